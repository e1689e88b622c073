/**
 * One connection to the control socket, as lines: JSON-lines framing and nothing else.
 *
 * Writes are coalesced: every line queued in one turn of the event loop goes out in one
 * `socket.write` (a microtask after the first), so a caller that fires 1,000 requests in a loop
 * makes one system call, not 1,000. Replies arrive as lines of text: each chunk is decoded once
 * (a `StringDecoder`, which keeps a character split between two chunks whole) and split on
 * `\n`; decoding each line from the bytes on its own cost ~0.5-1 us more a line. The caller
 * parses them.
 */
import { createConnection, type Socket } from "node:net";
import { StringDecoder } from "node:string_decoder";

import { ConnectionError } from "./errors.js";

/** Lines queued in one turn past which they are written at once (the daemon answers up to 256 in one write). */
const FLUSH_LINES = 256;

export interface TransportHandlers {
  /** One line the daemon sent (without the newline), as UTF-8 text. */
  line(text: string): void;
  /** The connection ended (`error` set when it broke rather than closed). */
  closed(error: Error | undefined): void;
}

/** Why a connect failed, in the words of the `gatewayd` CLI (gatewayd/client.py). */
export function connectFailure(path: string, err: NodeJS.ErrnoException): ConnectionError {
  switch (err.code) {
    case "ENOENT":
      return new ConnectionError("not_running", `gatewayd is not running (no socket at ${path})`);
    case "ECONNREFUSED":
      return new ConnectionError(
        "not_running",
        `gatewayd is not running (nothing listening on ${path}: a stale socket)`,
      );
    case "EACCES":
    case "EPERM":
      return new ConnectionError(
        "cannot_connect",
        `cannot connect to ${path}: permission denied (the daemon runs as another user; connect as that user or root)`,
      );
    default:
      return new ConnectionError("cannot_connect", `cannot connect to ${path}: ${err.message}`);
  }
}

export class Transport {
  private readonly socket: Socket;
  private readonly handlers: TransportHandlers;
  private out: string[] = [];
  private flushing = false;
  private readonly decoder = new StringDecoder("utf8");
  private rest = ""; // the start of a line whose newline has not arrived
  private ended = false;

  private constructor(socket: Socket, handlers: TransportHandlers) {
    this.socket = socket;
    this.handlers = handlers;
    socket.on("data", (chunk: Buffer) => this.receive(chunk));
    socket.on("error", (err) => this.end(err));
    socket.on("close", () => this.end(undefined));
  }

  /** Connect to the socket at `path`; rejects with a `ConnectionError` that says why. */
  static open(path: string, handlers: TransportHandlers, timeoutMs: number): Promise<Transport> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new ConnectionError("cannot_connect", `cannot connect to ${path}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      const failed = (err: NodeJS.ErrnoException): void => {
        clearTimeout(timer);
        reject(connectFailure(path, err));
      };
      socket.once("error", failed);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.off("error", failed);
        resolve(new Transport(socket, handlers));
      });
    });
  }

  get open(): boolean {
    return !this.ended;
  }

  /**
   * Queue one line (no newline); it is written with the others queued in this turn, or at once
   * when `FLUSH_LINES` are queued: a caller that fires thousands of requests in one loop has the
   * daemon working on the first ones while it makes the rest.
   */
  send(line: string): void {
    if (this.ended) return;
    if (this.out.push(line) >= FLUSH_LINES) {
      this.flush();
    } else if (!this.flushing) {
      this.flushing = true;
      queueMicrotask(this.flush);
    }
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const out = this.out;
    if (out.length === 0 || this.ended) return;
    const data = out.length === 1 ? out[0] + "\n" : out.join("\n") + "\n";
    out.length = 0;
    this.socket.write(data);
  };

  /** Close the write side and the connection. */
  close(): void {
    if (this.ended) return;
    this.flush();
    this.socket.end();
    this.socket.destroySoon();
  }

  private receive(chunk: Buffer): void {
    const text = this.decoder.write(chunk);
    let start = 0;
    let nl = text.indexOf("\n");
    if (nl < 0) {
      this.rest += text;
      return;
    }
    if (this.rest) {
      const head = this.rest + text.slice(0, nl);
      this.rest = "";
      this.handlers.line(head);
      start = nl + 1;
      nl = text.indexOf("\n", start);
    }
    while (nl >= 0) {
      this.handlers.line(text.slice(start, nl));
      start = nl + 1;
      nl = text.indexOf("\n", start);
    }
    if (start < text.length) this.rest = text.slice(start);
  }

  private end(error: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.out.length = 0;
    this.socket.destroy();
    this.handlers.closed(error);
  }
}
