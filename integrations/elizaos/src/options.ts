/**
 * The plugin's settings: the options passed to `gatewaydPlugin(...)` win, then the runtime's
 * settings (the character's `settings`/`secrets`, or the environment), then the defaults.
 *
 * | option | setting | default |
 * |---|---|---|
 * | `socket` | `GATEWAYD_SOCKET` | the CLI's rules: `$GATEWAYD_GATEWAY__CONTROL__SOCKET`, the config file, `$ELIZA_STATE_DIR/run/gatewayd.sock` |
 * | `config` | `GATEWAYD_CONFIG` | (the CLI's) |
 * | `failMode` | `GATEWAYD_FAIL_MODE` | `open`: gatewayd unreachable, the runtime goes on as if no hook objected (a warning says so); `closed`: messages, actions and replies are refused while it is down |
 * | `agentKey` | `GATEWAYD_AGENT_KEY` | the runtime's agent id: session keys are `agent:<agentKey>:<roomId>` |
 * | `decisionTimeoutMs` | `GATEWAYD_DECISION_TIMEOUT_MS` | 10,000 (gatewayd bounds a decision by its own `hooks.decisionTimeoutMs`, 5,000) |
 * | `maxSubscriptions` | `GATEWAYD_MAX_SUBSCRIPTIONS` | 64: rooms whose hook messages are delivered at once (a connection each), the most recently active |
 */
import type { IAgentRuntime } from "@elizaos/core";

export type FailMode = "open" | "closed";

export interface GatewaydPluginOptions {
  socket?: string;
  config?: string;
  failMode?: FailMode;
  agentKey?: string;
  decisionTimeoutMs?: number;
  /** Rooms subscribed at once for what hooks send (a connection each; default 64). */
  maxSubscriptions?: number;
  /** How long an event waits for gatewayd (down, restarting) before it is given up (default 600,000 ms). */
  postTimeoutMs?: number;
}

export interface ResolvedOptions {
  socket: string | undefined;
  config: string | undefined;
  failMode: FailMode;
  agentKey: string;
  decisionTimeoutMs: number;
  postTimeoutMs: number;
  maxSubscriptions: number;
}

function setting(runtime: IAgentRuntime, key: string): string | undefined {
  const value = runtime.getSetting(key);
  if (value === null || value === undefined || value === "") return undefined;
  return String(value);
}

function positive(name: string, raw: string | number | undefined, fallback: number, unit = "number of milliseconds"): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`@gatewayd/plugin-elizaos: ${name} must be a positive ${unit}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

export function resolveOptions(runtime: IAgentRuntime, options: GatewaydPluginOptions): ResolvedOptions {
  const failMode = options.failMode ?? setting(runtime, "GATEWAYD_FAIL_MODE") ?? "open";
  if (failMode !== "open" && failMode !== "closed") {
    throw new Error(
      `@gatewayd/plugin-elizaos: GATEWAYD_FAIL_MODE must be "open" or "closed", got ${JSON.stringify(failMode)}`,
    );
  }
  return {
    socket: options.socket ?? setting(runtime, "GATEWAYD_SOCKET"),
    config: options.config ?? setting(runtime, "GATEWAYD_CONFIG"),
    failMode,
    agentKey: options.agentKey ?? setting(runtime, "GATEWAYD_AGENT_KEY") ?? runtime.agentId,
    decisionTimeoutMs: positive(
      "decisionTimeoutMs",
      options.decisionTimeoutMs ?? setting(runtime, "GATEWAYD_DECISION_TIMEOUT_MS"),
      10_000,
    ),
    postTimeoutMs: positive("postTimeoutMs", options.postTimeoutMs, 600_000),
    maxSubscriptions: Math.floor(
      positive("maxSubscriptions", options.maxSubscriptions ?? setting(runtime, "GATEWAYD_MAX_SUBSCRIPTIONS"), 64, "number"),
    ),
  };
}
