/**
 * `Subscription`: the messages hooks send to one session (`ctx.gateway.send`), as an async
 * iterator. It owns a connection of its own (after `subscribe` the daemon streams on it and
 * ignores further requests); a lost connection is re-subscribed with a growing pause until
 * `close()`. Messages sent while no subscription is up are not kept by the daemon
 * (`gateway.send` returns false then).
 */
import { ConnectionError, GatewaydError, RequestError } from "./errors.js";
import { PROTOCOL, type OutboundMessage } from "./replies.js";
import { Transport } from "./transport.js";

export interface SubscriptionOptions {
  clientName: string;
  connectTimeoutMs: number;
  reconnect: { initialDelayMs: number; maxDelayMs: number } | undefined;
}

export class Subscription implements AsyncIterableIterator<OutboundMessage> {
  readonly sessionKey: string;
  private readonly path: string;
  private readonly options: SubscriptionOptions;
  private readonly buffered: OutboundMessage[] = [];
  private waiter: { resolve(r: IteratorResult<OutboundMessage>): void; reject(e: Error): void } | undefined;
  private transport: Transport | undefined;
  private closed = false;
  private failure: Error | undefined;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private confirmed: { resolve(): void; reject(e: Error): void } | undefined;
  private readonly first: Promise<void>;

  constructor(path: string, sessionKey: string, options: SubscriptionOptions) {
    this.path = path;
    this.sessionKey = sessionKey;
    this.options = options;
    this.first = new Promise<void>((resolve, reject) => {
      this.confirmed = { resolve, reject };
    });
    void this.start();
  }

  /** Resolves once the daemon confirmed the first subscription; rejects if it could not. */
  ready(): Promise<void> {
    return this.first;
  }

  /** Whether a subscription is up now. */
  get active(): boolean {
    return this.transport?.open === true && this.confirmed === undefined;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<OutboundMessage> {
    return this;
  }

  next(): Promise<IteratorResult<OutboundMessage>> {
    const message = this.buffered.shift();
    if (message !== undefined) return Promise.resolve({ value: message, done: false });
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  async return(): Promise<IteratorResult<OutboundMessage>> {
    this.close();
    return { value: undefined, done: true };
  }

  /** Stop: the connection closes and the iterator ends. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.transport?.close();
    this.transport = undefined;
    this.confirmed?.reject(new ConnectionError("closed", "the subscription was closed"));
    this.confirmed = undefined;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.resolve({ value: undefined, done: true });
  }

  private async start(): Promise<void> {
    let phase: "hello" | "subscribe" | "stream" = "hello";
    try {
      const transport = await Transport.open(
        this.path,
        {
          line: (text) => {
            let reply: Record<string, unknown>;
            try {
              reply = JSON.parse(text) as Record<string, unknown>;
            } catch {
              return; // not JSON: no message of the daemon's; the stream goes on
            }
            if (phase === "stream") {
              if (reply.event === "message") this.deliver(reply as unknown as OutboundMessage);
              return;
            }
            if (reply.ok !== true) {
              const error = (reply.error ?? {}) as { code?: string; message?: string };
              // A daemon without `hello` still streams: only the subscribe reply decides.
              if (phase === "hello" && error.code === "unknown_op") {
                phase = "subscribe";
                return;
              }
              this.fail(new RequestError(error.code ?? "internal", error.message ?? "subscribe failed"));
              transport.close();
              return;
            }
            if (phase === "hello") {
              phase = "subscribe";
            } else {
              phase = "stream";
              this.failures = 0;
              this.confirmed?.resolve();
              this.confirmed = undefined;
            }
          },
          closed: (error) => {
            if (this.transport === transport) this.transport = undefined;
            this.retry(error ?? new ConnectionError("connection_lost", `gatewayd closed the subscription (${this.path})`));
          },
        },
        this.options.connectTimeoutMs,
      );
      if (this.closed) {
        transport.close();
        return;
      }
      this.transport = transport;
      transport.send(JSON.stringify({ id: 1, op: "hello", protocol: PROTOCOL, client: this.options.clientName }));
      transport.send(JSON.stringify({ id: 2, op: "subscribe", sessionKey: this.sessionKey }));
    } catch (err) {
      this.retry(err as Error);
    }
  }

  private deliver(message: OutboundMessage): void {
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter.resolve({ value: message, done: false });
    } else {
      this.buffered.push(message);
    }
  }

  private fail(error: Error): void {
    this.failure = error;
    this.closed = true;
    this.confirmed?.reject(error);
    this.confirmed = undefined;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(error);
  }

  private retry(error: Error): void {
    if (this.closed) return;
    const delays = this.options.reconnect;
    // Not reconnecting, or the first subscription could not be made: the caller hears it.
    if (delays === undefined || this.confirmed !== undefined) {
      this.fail(error);
      return;
    }
    const base = Math.min(delays.maxDelayMs, delays.initialDelayMs * 2 ** this.failures);
    this.failures += 1;
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = undefined;
        if (!this.closed) void this.start();
      },
      Math.round(base * (0.8 + Math.random() * 0.4)),
    );
  }
}
