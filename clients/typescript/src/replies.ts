/**
 * The ops' replies as TypeScript types (docs/design.md section 3 is the contract). Each reply
 * still carries the wire's `id` and `ok`; the fields the daemon may add later are kept, untyped.
 */
import type { DecisionEventKey, DecisionResults, EventContexts } from "./events.js";

/** The protocol version this client speaks (the `hello` handshake). */
export const PROTOCOL = 1;

export interface Reply {
  id: unknown;
  ok: true;
  [field: string]: unknown;
}

/** `hello`: who the daemon is and what it serves. */
export interface HelloReply extends Reply {
  protocol: number;
  minProtocol: number;
  daemon: { name: string; version: string };
  ops: string[];
  events: string[];
  limits: { maxLineBytes: number; maxInFlight: number };
}

/** One handler's outcome in a trace (`trace: true`). */
export interface TraceHandler {
  hook: string;
  kind: "python" | "command" | "js" | string;
  outcome: "ok" | "error" | "timeout" | "skipped" | string;
  durationMs?: number;
  error?: string;
  reason?: string;
  changed?: { messages?: string[]; context?: { added?: string[]; changed?: string[]; removed?: string[] } };
}

/** One event of a trace, in dispatch order. */
export interface TraceEntry {
  event: string;
  handlers: TraceHandler[];
  reason?: string;
}

/** `message`: the reply lines every event the message caused produced. */
export interface MessageReply extends Reply {
  messages: string[];
  command: string | null;
  blocked?: true;
  reason?: string;
  trace?: TraceEntry[];
}

/** `trigger` with `wait: false`: the event is accepted (durable, with the journal). */
export interface QueuedReply extends Reply {
  queued: true;
}

/** The merged result type of event `K`: typed for a decision event, else the fields as sent. */
export type ResultOf<K extends string> = K extends DecisionEventKey ? DecisionResults[K] : Record<string, unknown>;

/** The context type of event `K` (`command:<name>`: the command context). */
export type ContextOf<K extends string> = K extends keyof EventContexts
  ? EventContexts[K]
  : K extends `command:${string}`
    ? EventContexts["command"]
    : Record<string, unknown>;

/** `trigger` (waited): the event's reply lines and, for a decision event, its merged result. */
export interface TriggerReply<K extends string = string> extends Reply {
  messages: string[];
  result?: ResultOf<K>;
  timedOut?: true;
  trace?: TraceEntry[];
}

/** A decision event's reply: `result` is always there (`{}` when no handler returned one). */
export interface DecisionReply<K extends DecisionEventKey> extends Reply {
  messages: string[];
  result: DecisionResults[K];
  timedOut?: true;
  trace?: TraceEntry[];
}

/** `status`: the daemon's state (docs/design.md section 3 lists every field). */
export interface StatusReply extends Reply {
  status: {
    pid: number;
    version: string;
    state: "starting" | "running" | "stopping";
    uptime_s: number;
    queue: Record<string, unknown>;
    hooks: { discovered: number; eligible: number; registered: number; skipped: string[]; failed: string[] };
    [field: string]: unknown;
  };
}

/** A hook record of the `hooks` op. */
export interface HookRecord {
  name: string;
  hookKey: string;
  events: string[];
  status: string;
  source: string;
  path: string;
  stats: { calls: number; errors: number; timeouts: number; p50Ms: number | null; p99Ms: number | null } | null;
  [field: string]: unknown;
}

/** `hooks`: the daemon's view of its hooks. */
export interface HooksReply extends Reply {
  hooks: HookRecord[];
  codeHooks: { name: string; stats: unknown }[];
  stateDir: string;
  workspaceDir: string;
}

/** `reload`: what the reload found and loaded. */
export interface ReloadReply extends Reply {
  result: {
    discovered: number;
    eligible: number;
    registered: number;
    skipped: string[];
    failed: string[];
    statuses: Record<string, number>;
  };
  outcome: "ok" | "partial";
  changes: Record<string, unknown> | null;
}

/** A message a hook sent to a subscribed session (`ctx.gateway.send`). */
export interface OutboundMessage {
  event: "message";
  sessionKey: string;
  content: string;
}
