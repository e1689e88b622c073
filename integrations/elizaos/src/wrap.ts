/**
 * Where gatewayd's decisions act on the runtime, before it proceeds. elizaOS 1.7 fires no event a
 * plugin could veto with, so the plugin wraps the three places itself:
 *
 * - `runtime.messageService.handleMessage`: `message:received` first; a block returns at once
 *   (nothing is stored, no model runs), a rewrite replaces the text the runtime stores and
 *   prompts with;
 * - the reply callback passed to it: `message:sending` before each reply with text (cancel: the
 *   transport never gets it; rewrite: it gets the new text), `message:sent` after;
 * - each action's `handler`: `agent:before_tool_call` (block: the handler never runs and the
 *   action reports `success: false`; `params`: its message content and options as changed),
 *   `agent:after_tool_call` after it.
 */
import { randomUUID } from "node:crypto";

import type {
  Action,
  ActionResult,
  Content,
  HandlerCallback,
  HandlerOptions,
  IAgentRuntime,
  Memory,
  UUID,
} from "@elizaos/core";

import type { Bridge } from "./bridge.js";

const SRC = "plugin:gatewayd";
const WRAPPED = Symbol.for("@gatewayd/plugin-elizaos.wrapped");

type HandleMessage = NonNullable<IAgentRuntime["messageService"]>["handleMessage"];

/** JSON of `value` as gatewayd will see it: functions and cycles dropped, never a throw. */
export function plain(value: unknown): unknown {
  const seen = new WeakSet<object>();
  try {
    return JSON.parse(
      JSON.stringify(value, (_key, v: unknown) => {
        if (typeof v === "function" || typeof v === "symbol") return undefined;
        if (typeof v === "bigint") return String(v);
        if (v !== null && typeof v === "object") {
          if (seen.has(v)) return undefined;
          seen.add(v);
        }
        return v;
      }) ?? "null",
    );
  } catch {
    return String(value);
  }
}

function channelOf(message: Memory): string {
  return typeof message.content.source === "string" && message.content.source ? message.content.source : "elizaos";
}

/** Wrap the runtime's message service (once). */
export function wrapMessageService(runtime: IAgentRuntime, bridge: Bridge): void {
  const service = runtime.messageService as (NonNullable<IAgentRuntime["messageService"]> & { [WRAPPED]?: true }) | null;
  if (!service || service[WRAPPED]) return;
  const original: HandleMessage = service.handleMessage.bind(service);
  service[WRAPPED] = true;
  service.handleMessage = async (rt, message, callback, options) => {
    // The agent's own messages the runtime skips unanswered: nothing to ask or post.
    if (message.entityId === rt.agentId) return original(rt, message, callback, options);
    const key = bridge.sessionKey(message.roomId);
    const channel = channelOf(message);
    void bridge.watchRoom(message.roomId);
    const text = message.content.text ?? "";
    const decision = await bridge.decide(
      "message:received",
      key,
      {
        from: message.entityId,
        content: text,
        channelId: channel,
        sessionKey: key,
        timestamp: message.createdAt ?? Date.now(),
        conversationId: key,
        ...(message.id ? { messageId: message.id } : {}),
        metadata: { provider: "elizaos", surface: channel, senderId: message.entityId, roomId: message.roomId, worldId: message.worldId },
      },
      { block: true, reason: "gatewayd is unreachable (GATEWAYD_FAIL_MODE=closed)" },
    );
    const { result } = decision;
    if (result.block) {
      rt.logger.info({ src: SRC, roomId: message.roomId, reason: result.reason }, "message blocked by a gatewayd hook");
      return { didRespond: false, responseContent: null, responseMessages: [], state: { values: {}, data: {}, text: "" }, mode: "none" };
    }
    let inbound = message;
    if (typeof result.content === "string" && result.content !== text) {
      inbound = { ...message, content: { ...message.content, text: result.content } };
    }
    if (inbound.id) bridge.turns.begin(inbound.id, inbound.content.text ?? "");
    const reply = callback ? wrapReply(bridge, inbound, callback) : undefined;
    return original(rt, inbound, reply, options);
  };
}

/** The reply callback, through `message:sending` (rewrite or cancel) and `message:sent`. */
function wrapReply(bridge: Bridge, message: Memory, callback: HandlerCallback): HandlerCallback {
  const key = bridge.sessionKey(message.roomId);
  const channel = channelOf(message);
  return async (content: Content) => {
    const text = typeof content.text === "string" ? content.text : "";
    if (!text) return callback(content); // an IGNORE, or an action's status without text
    const { result } = await bridge.decide(
      "message:sending",
      key,
      { to: message.entityId, content: text, channelId: channel, sessionKey: key },
      { cancel: true, reason: "gatewayd is unreachable (GATEWAYD_FAIL_MODE=closed)" },
    );
    const sent = { to: message.entityId, channelId: channel, sessionKey: key, conversationId: key };
    if (result.cancel) {
      bridge.runtime.logger.info({ src: SRC, roomId: message.roomId, reason: result.reason }, "reply cancelled by a gatewayd hook");
      bridge.post("message:sent", key, {
        ...sent,
        content: text,
        success: false,
        timestamp: Date.now(),
        reason: result.reason ?? "cancelled by a message:sending hook",
      });
      return [];
    }
    const final = typeof result.content === "string" ? result.content : text;
    const out = final === text ? content : { ...content, text: final };
    try {
      const memories = await callback(out);
      bridge.post("message:sent", key, { ...sent, content: final, success: true, timestamp: Date.now() });
      return memories;
    } catch (err) {
      bridge.post("message:sent", key, {
        ...sent,
        content: final,
        success: false,
        timestamp: Date.now(),
        error: (err as Error).message,
      });
      throw err;
    }
  };
}

/** Wrap `action`'s handler (once). */
export function wrapAction(action: Action, bridge: Bridge): void {
  const marked = action as Action & { [WRAPPED]?: true };
  if (marked[WRAPPED]) return;
  marked[WRAPPED] = true;
  const original = action.handler;
  action.handler = async (rt, message, state, options, callback, responses) => {
    const key = bridge.sessionKey(message.roomId);
    const toolCallId = randomUUID();
    const { actionContext: _ctx, ...rest } = options ?? {};
    const params = { content: plain(message.content), options: plain(rest) } as Record<string, unknown>;
    const { result } = await bridge.decide(
      "agent:before_tool_call",
      key,
      { sessionKey: key, toolName: action.name, toolCallId, params },
      { block: true, reason: "gatewayd is unreachable (GATEWAYD_FAIL_MODE=closed)" },
    );
    if (result.block) {
      const reason = result.reason ?? "blocked by a gatewayd hook";
      rt.logger.info({ src: SRC, action: action.name, reason }, "action blocked by a gatewayd hook");
      const blocked: ActionResult = {
        success: false,
        text: `${action.name} was blocked: ${reason}`,
        error: reason,
        data: { actionName: action.name, blockedBy: "gatewayd", reason },
      };
      return blocked;
    }
    let callMessage = message;
    let callOptions: HandlerOptions | undefined = options;
    let called = params;
    if (result.params && typeof result.params === "object") {
      called = result.params;
      const changed = result.params as { content?: Record<string, unknown>; options?: Record<string, unknown> };
      if (changed.content && typeof changed.content === "object") {
        callMessage = { ...message, content: { ...message.content, ...changed.content } as Content };
      }
      if (changed.options && typeof changed.options === "object") {
        callOptions = { ...(options ?? {}), ...changed.options };
      }
    }
    const started = performance.now();
    const after = { sessionKey: key, toolName: action.name, toolCallId, params: called };
    try {
      const value = await original(rt, callMessage, state, callOptions, callback, responses);
      bridge.post("agent:after_tool_call", key, { ...after, result: plain(value ?? null), durationMs: performance.now() - started });
      return value;
    } catch (err) {
      bridge.post("agent:after_tool_call", key, { ...after, error: (err as Error).message, durationMs: performance.now() - started });
      throw err;
    }
  };
}

/** Wrap every action the runtime has, and every one registered later. */
export function wrapActions(runtime: IAgentRuntime, bridge: Bridge): void {
  for (const action of runtime.actions) wrapAction(action, bridge);
  const registry = runtime as IAgentRuntime & { [WRAPPED]?: true };
  if (registry[WRAPPED]) return;
  registry[WRAPPED] = true;
  const register = runtime.registerAction.bind(runtime);
  runtime.registerAction = (action: Action) => {
    wrapAction(action, bridge);
    return register(action);
  };
}

export type { UUID };
