/**
 * The calls of one client: request ids, the bounded in-flight window, the calls waiting for a
 * slot or a connection, and per-call timeouts on one timer.
 *
 * A call is *queued* until it is written and *in flight* until its reply arrives. At most
 * `window` calls are in flight (the daemon's `maxInFlight`, from `hello`): more wait here, in
 * order, and are written as replies free slots. A call whose deadline passes is rejected with a
 * `TimeoutError` wherever it is; one already in flight keeps its slot until its late reply
 * arrives (the daemon is still working on it), so the window never overcommits the daemon.
 * Timeouts cost no timer per call: one timer is armed for the earliest deadline.
 */
import { ConnectionError, GatewaydError, RequestError, TimeoutError } from "./errors.js";

export interface Call {
  readonly id: number;
  readonly line: string;
  readonly op: string;
  readonly deadline: number;
  readonly timeoutMs: number;
  resolve(reply: unknown): void;
  reject(error: Error): void;
  /** Settled already (timed out): a late reply is dropped. */
  done: boolean;
}

export class Calls {
  window = 1;
  private nextId = 1;
  private readonly inFlight = new Map<number, Call>();
  private queue: Call[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  constructor(private readonly maxQueued: number) {}

  get queued(): number {
    return this.queue.length - this.head;
  }

  get flying(): number {
    return this.inFlight.size;
  }

  /** A new call for `payload` (a JSON object text without its id). */
  create(op: string, payload: string, timeoutMs: number): { call: Call; promise: Promise<unknown> } {
    const id = this.nextId++;
    const line = payload.length > 2 ? `{"id":${id},${payload.slice(1)}` : `{"id":${id}}`;
    let resolve!: (reply: unknown) => void;
    let reject!: (error: Error) => void;
    const promise = new Promise<unknown>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const deadline = Date.now() + timeoutMs;
    const call: Call = { id, line, op, deadline, timeoutMs, resolve, reject, done: false };
    if (deadline < this.timerAt) this.arm(deadline);
    return { call, promise };
  }

  /** Queue `call` behind the others; false when the queue is full (the call is rejected). */
  enqueue(call: Call): boolean {
    if (this.queued >= this.maxQueued) {
      call.done = true;
      call.reject(
        new GatewaydError(
          "backlog_full",
          `${this.maxQueued} requests already wait for gatewayd (is it down?): this one was not sent`,
        ),
      );
      return false;
    }
    this.queue.push(call);
    return true;
  }

  /** The next queued call that may be written now (window permitting), or undefined. */
  next(): Call | undefined {
    while (this.head < this.queue.length && this.inFlight.size < this.window) {
      const call = this.queue[this.head]!;
      this.queue[this.head++] = undefined as unknown as Call;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      if (call.done) continue;
      this.inFlight.set(call.id, call);
      return call;
    }
    return undefined;
  }

  /** Mark `call` in flight without the queue (the handshake goes first, whatever the window). */
  fly(call: Call): void {
    this.inFlight.set(call.id, call);
  }

  /** Settle the call a reply is for; false when no call has that id (a late reply: dropped). */
  settle(reply: { id?: unknown; ok?: unknown; error?: { code?: unknown; message?: unknown } }): boolean {
    const call = typeof reply.id === "number" ? this.inFlight.get(reply.id) : undefined;
    if (call === undefined) return false;
    this.inFlight.delete(call.id);
    if (call.done) return true;
    call.done = true;
    if (reply.ok === true) {
      call.resolve(reply);
    } else {
      const error = reply.error ?? {};
      call.reject(new RequestError(String(error.code ?? "internal"), String(error.message ?? "request failed")));
    }
    return true;
  }

  /** The connection broke: every call in flight fails (it may or may not have been done). */
  lose(path: string, cause: Error | undefined): void {
    const why = cause ? `: ${cause.message}` : "";
    for (const call of this.inFlight.values()) {
      if (call.done) continue;
      call.done = true;
      call.reject(
        new ConnectionError(
          "connection_lost",
          `lost the connection to gatewayd (${path}) with '${call.op}' in flight${why}: it may or may not have been done`,
        ),
      );
    }
    this.inFlight.clear();
  }

  /** Fail every call, queued or in flight, with `error` (the client closes, or cannot connect). */
  failAll(error: Error): void {
    for (const call of this.inFlight.values()) {
      if (!call.done) {
        call.done = true;
        call.reject(error);
      }
    }
    this.inFlight.clear();
    for (let i = this.head; i < this.queue.length; i++) {
      const call = this.queue[i]!;
      if (!call.done) {
        call.done = true;
        call.reject(error);
      }
    }
    this.queue = [];
    this.head = 0;
    this.disarm();
  }

  private arm(at: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.expire, Math.max(0, at - Date.now()));
    this.timer.unref();
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private readonly expire = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    const check = (call: Call): void => {
      if (call.done) return;
      if (call.deadline <= now) {
        call.done = true;
        call.reject(new TimeoutError(`no reply from gatewayd to '${call.op}' within ${call.timeoutMs} ms`));
      } else if (call.deadline < next) {
        next = call.deadline;
      }
    };
    for (const call of this.inFlight.values()) check(call);
    for (let i = this.head; i < this.queue.length; i++) check(this.queue[i]!);
    if (next !== Infinity) this.arm(next);
  };
}
