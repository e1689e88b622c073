/**
 * `Bridge`: one runtime's link to gatewayd. It asks decisions (and applies the fail mode when
 * gatewayd cannot answer), posts notifications (retried until gatewayd accepted them), builds
 * session keys, and delivers what hooks send to a room (`gateway.send`) into that room.
 *
 * Delivery guarantee of notifications: at least once. An event is posted with `wait: false`,
 * and gatewayd's reply means it is durable in its journal. One gatewayd never accepted (it was
 * down, restarting, or stopping: `not_running`, `cannot_connect`, `shutting_down`) is posted again once it is
 * back; one whose connection broke before the reply (`connection_lost`) is posted again too, so
 * a crash at that instant may deliver it twice, never zero times.
 */
import type { Content, IAgentRuntime, Memory, UUID } from "@elizaos/core";
import {
  GatewaydClient,
  type ContextOf,
  type DecisionEventKey,
  type DecisionResults,
  type GatewaydError,
  type Subscription,
} from "@gatewayd/client";

import type { ResolvedOptions } from "./options.js";
import { Turns } from "./turns.js";

const SRC = "plugin:gatewayd";
const RETRYABLE = new Set([
  "not_running",
  "cannot_connect",
  "connection_lost",
  "shutting_down",
  "timeout",
  "backlog_full",
  "queue_full",
  "journal_full",
  "queue_unavailable",
]);

export interface Decision<K extends DecisionEventKey> {
  result: DecisionResults[K];
  /** gatewayd could not be asked; `result` is what the fail mode decided. */
  failed?: string;
}

export class Bridge {
  readonly client: GatewaydClient;
  /** Each run's text and prepended context, between the moments the plugin sees. */
  readonly turns = new Turns();
  private readonly subscriptions = new Map<UUID, Subscription>();
  private readonly watching = new Set<UUID>();
  private stopped = false;
  private warnedDown = false;
  /** Notifications posted and not yet accepted by gatewayd (waiting for it, or being retried). */
  pendingPosts = 0;

  constructor(
    readonly runtime: IAgentRuntime,
    readonly options: ResolvedOptions,
  ) {
    this.client = new GatewaydClient({
      socket: options.socket,
      config: options.config,
      clientName: "@gatewayd/plugin-elizaos/0.1.0",
    });
    const log = runtime.logger;
    this.client.on("connect", (hello) => {
      this.warnedDown = false;
      log.info({ src: SRC, socket: this.client.path, daemon: hello.daemon?.version }, "gatewayd connected");
    });
    this.client.on("disconnect", (error?: Error) =>
      log.warn({ src: SRC, socket: this.client.path, error: error?.message }, "gatewayd connection lost; reconnecting"),
    );
  }

  /** Connect now; a daemon that is down is reported (per the fail mode) and retried in the background. */
  async start(): Promise<void> {
    try {
      await this.client.connect();
    } catch (err) {
      this.down(err as Error);
    }
  }

  /** Stop: events still waiting get up to `graceMs` to be accepted, then the connection closes. */
  async stop(graceMs = 5_000): Promise<void> {
    const deadline = Date.now() + graceMs;
    while (this.pendingPosts > 0 && this.client.connected && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (this.pendingPosts > 0) {
      this.runtime.logger.warn(
        { src: SRC, pending: this.pendingPosts, socket: this.client.path },
        "stopping with events gatewayd has not accepted: they are lost",
      );
    }
    this.stopped = true;
    for (const sub of this.subscriptions.values()) sub.close();
    this.subscriptions.clear();
    this.client.close();
  }

  /** `agent:<agentKey>:<roomId>`: the gatewayd session of a room. */
  sessionKey(roomId: string): string {
    return `agent:${this.options.agentKey}:${roomId}`;
  }

  /**
   * Ask decision event `event`; the merged result. When gatewayd cannot answer, fail open (an
   * empty result: nothing objected) or closed (`closed`, what refuses: `block` or `cancel`).
   */
  async decide<K extends DecisionEventKey>(
    event: K,
    sessionKey: string,
    context: ContextOf<K>,
    closed: DecisionResults[K],
  ): Promise<Decision<K>> {
    if (this.client.connected) {
      try {
        const reply = await this.client.decide(event, sessionKey, context, { timeoutMs: this.options.decisionTimeoutMs });
        return { result: reply.result };
      } catch (err) {
        return this.failDecision(event, err as GatewaydError, closed);
      }
    }
    const why = new Error(`gatewayd is not connected (${this.client.path})`) as GatewaydError;
    return this.failDecision(event, why, closed);
  }

  private failDecision<K extends DecisionEventKey>(
    event: K,
    error: GatewaydError,
    closed: DecisionResults[K],
  ): Decision<K> {
    const open = this.options.failMode === "open";
    this.runtime.logger.warn(
      { src: SRC, event, error: error.message, code: error.code, failMode: this.options.failMode },
      open
        ? `gatewayd could not decide ${event}: going on as if no hook objected (GATEWAYD_FAIL_MODE=open)`
        : `gatewayd could not decide ${event}: refused (GATEWAYD_FAIL_MODE=closed)`,
    );
    return { result: open ? ({} as DecisionResults[K]) : closed, failed: error.message };
  }

  /** Post notification `event` (not waited on); retried until gatewayd accepted it or `postTimeoutMs`. */
  post<K extends string>(event: K, sessionKey: string, context: ContextOf<K>): void {
    this.pendingPosts += 1;
    void this.postNow(event, sessionKey, context, Date.now() + this.options.postTimeoutMs).finally(() => {
      this.pendingPosts -= 1;
    });
  }

  private async postNow<K extends string>(event: K, sessionKey: string, context: ContextOf<K>, deadline: number): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      const left = deadline - Date.now();
      try {
        await this.client.trigger(event, sessionKey, context, { wait: false, timeoutMs: Math.max(1, left) });
        return;
      } catch (err) {
        const error = err as GatewaydError;
        if (!RETRYABLE.has(error.code) || Date.now() >= deadline || this.stopped) {
          this.runtime.logger.error(
            { src: SRC, event, sessionKey, error: error.message, code: error.code },
            "gatewayd did not take an event; it is lost",
          );
          return;
        }
        if (!this.client.connected) this.down(error);
        // The client holds calls until it is connected again; a short pause spares a loop
        // against a daemon that refuses while stopping.
        await new Promise((r) => setTimeout(r, Math.min(1_000, 50 * 2 ** attempt)));
      }
    }
  }

  private down(error: Error): void {
    if (this.warnedDown) return;
    this.warnedDown = true;
    this.runtime.logger.warn(
      { src: SRC, socket: this.client.path, error: error.message, failMode: this.options.failMode },
      `gatewayd is unreachable: events wait for it, decisions ${this.options.failMode === "open" ? "go through" : "are refused"} until it is back`,
    );
  }

  /** Deliver what hooks send to this room's session (`gateway.send`) into the room, from now on. */
  async watchRoom(roomId: UUID): Promise<void> {
    const current = this.subscriptions.get(roomId);
    if (current !== undefined) {
      // Most recently active last: the room left out when the cap is reached is the quietest.
      this.subscriptions.delete(roomId);
      this.subscriptions.set(roomId, current);
      return;
    }
    if (this.stopped || this.watching.has(roomId)) return;
    this.watching.add(roomId);
    try {
      await this.subscribeRoom(roomId);
    } finally {
      this.watching.delete(roomId);
    }
  }

  private async subscribeRoom(roomId: UUID): Promise<void> {
    const room = await this.runtime.getRoom(roomId);
    const source = room?.source;
    const channelId = room?.channelId;
    const key = this.sessionKey(roomId);
    let sub: Subscription;
    try {
      sub = await this.client.subscribe(key);
    } catch (err) {
      this.runtime.logger.warn({ src: SRC, roomId, error: (err as Error).message }, "cannot subscribe to gatewayd for this room yet");
      return;
    }
    if (this.stopped || this.subscriptions.has(roomId)) {
      sub.close();
      return;
    }
    this.subscriptions.set(roomId, sub);
    // Each subscription is a connection of its own (gatewayd serves gateway.control.maxConnections,
    // 256 by default): past the cap, the least recently active room's is closed.
    while (this.subscriptions.size > this.options.maxSubscriptions) {
      const [quietest, old] = this.subscriptions.entries().next().value as [UUID, Subscription];
      this.subscriptions.delete(quietest);
      old.close();
      this.runtime.logger.debug({ src: SRC, roomId: quietest }, "gatewayd subscription closed (the least recently active room)");
    }
    void (async () => {
      try {
        for await (const message of sub) await this.deliver(roomId, source, channelId, message.content);
      } catch (err) {
        this.runtime.logger.warn({ src: SRC, roomId, error: (err as Error).message }, "gatewayd subscription ended");
        this.subscriptions.delete(roomId);
      }
    })();
  }

  /** A hook's message into the room: stored as the agent's, and handed to the room's transport. */
  private async deliver(roomId: UUID, source: string | undefined, channelId: string | undefined, text: string): Promise<void> {
    const runtime = this.runtime;
    const content: Content = { text, source: "gatewayd" };
    const memory: Memory = {
      entityId: runtime.agentId,
      agentId: runtime.agentId,
      roomId,
      content,
      createdAt: Date.now(),
    };
    try {
      await runtime.createMemory(memory, "messages");
      const handlers = (runtime as unknown as { sendHandlers?: Map<string, unknown> }).sendHandlers;
      if (source && handlers?.has(source)) {
        await runtime.sendMessageToTarget({ source, roomId, ...(channelId ? { channelId } : {}) }, content);
      }
    } catch (err) {
      runtime.logger.error({ src: SRC, roomId, error: (err as Error).message }, "could not deliver a gatewayd message to the room");
    }
  }
}
