/**
 * Which gatewayd event each elizaOS moment is, and the notifications the runtime's own events
 * become. docs/clients.md has this as a table (elizaOS -> gatewayd -> OpenClaw).
 *
 * The moments a hook may decide on are not runtime events in elizaOS 1.7 (nothing fires before a
 * message is handled, an action runs or a reply goes out): `wrap.ts` asks those. The rest are the
 * runtime's events, posted without waiting. `MESSAGE_RECEIVED` and `MESSAGE_SENT`, which only
 * transports emit, are not posted: the message service's wrapper already posts
 * `message:received` and `message:sent` for every message it handles, whatever the transport.
 */
import { EventType, type IAgentRuntime, type PluginEvents } from "@elizaos/core";

import type { Bridge } from "./bridge.js";

/** elizaOS -> gatewayd, for the table in the docs and for the tests. */
export const EVENT_MAP: readonly { elizaos: string; gatewayd: string; decides?: string }[] = [
  { elizaos: "message handled (messageService.handleMessage)", gatewayd: "message:received", decides: "block, or rewrite the text" },
  { elizaos: "reply (the handler's callback)", gatewayd: "message:sending", decides: "cancel, or rewrite the text" },
  { elizaos: "reply delivered (or cancelled, or failed)", gatewayd: "message:sent" },
  { elizaos: "action handler", gatewayd: "agent:before_tool_call", decides: "block, or change params" },
  { elizaos: "action handler returned", gatewayd: "agent:after_tool_call" },
  { elizaos: EventType.RUN_STARTED, gatewayd: "agent:before_start", decides: "prependContext (a provider puts it in the prompt)" },
  { elizaos: EventType.RUN_ENDED, gatewayd: "agent:end" },
  { elizaos: EventType.RUN_TIMEOUT, gatewayd: "agent:end" },
  { elizaos: EventType.WORLD_JOINED, gatewayd: "agent:world_joined" },
  { elizaos: EventType.WORLD_CONNECTED, gatewayd: "agent:world_connected" },
  { elizaos: EventType.WORLD_LEFT, gatewayd: "agent:world_left" },
  { elizaos: EventType.ROOM_JOINED, gatewayd: "agent:room_joined" },
  { elizaos: EventType.ROOM_LEFT, gatewayd: "agent:room_left" },
  { elizaos: EventType.ENTITY_JOINED, gatewayd: "agent:entity_joined" },
  { elizaos: EventType.ENTITY_LEFT, gatewayd: "agent:entity_left" },
  { elizaos: EventType.ENTITY_UPDATED, gatewayd: "agent:entity_updated" },
  { elizaos: EventType.MESSAGE_DELETED, gatewayd: "message:deleted" },
];

type Payload = Record<string, unknown> & { runtime: IAgentRuntime };

function bridgeOf(payload: Payload): Bridge | undefined {
  const service = payload.runtime.getService("gatewayd") as { bridge?: Bridge } | null;
  return service?.bridge;
}

function run(kind: "started" | "ended" | "timeout") {
  return async (payload: Payload): Promise<void> => {
    const bridge = bridgeOf(payload);
    if (!bridge) return;
    const key = bridge.sessionKey(String(payload.roomId));
    const base = { sessionKey: key, runId: payload.runId, messageId: payload.messageId, entityId: payload.entityId };
    const messageId = String(payload.messageId);
    if (kind === "started") {
      // Awaited by the runtime before it composes the prompt: what the hooks return to prepend
      // reaches the prompt through the GATEWAYD_CONTEXT provider (provider.ts).
      const { result } = await bridge.decide(
        "agent:before_start",
        key,
        { ...base, prompt: bridge.turns.prompt(messageId) ?? "", messages: [] },
        {},
      );
      if (result.prependContext) bridge.turns.prepend(messageId, result.prependContext);
      return;
    }
    bridge.turns.end(messageId);
    const error = kind === "timeout" ? String(payload.error ?? "the run timed out") : (payload.error as string | undefined);
    bridge.post("agent:end", key, {
      ...base,
      messages: [],
      success: !error,
      ...(error ? { error } : {}),
      ...(typeof payload.duration === "number" ? { durationMs: payload.duration } : {}),
    });
  };
}

function environment(event: string) {
  return async (payload: Payload): Promise<void> => {
    const bridge = bridgeOf(payload);
    if (!bridge) return;
    const world = payload.world as { id?: string; name?: string } | undefined;
    const roomId = (payload.roomId as string | undefined) ?? undefined;
    const worldId = (payload.worldId as string | undefined) ?? world?.id;
    const key = roomId ? bridge.sessionKey(roomId) : `agent:${bridge.options.agentKey}:world:${worldId ?? "unknown"}`;
    const context: Record<string, unknown> = { sessionKey: key, source: payload.source };
    if (roomId) context.roomId = roomId;
    if (worldId) context.worldId = worldId;
    if (world?.name) context.worldName = world.name;
    if (payload.entityId) context.entityId = payload.entityId;
    if (payload.metadata) context.metadata = payload.metadata;
    if (Array.isArray(payload.rooms)) context.roomIds = (payload.rooms as { id?: string }[]).map((r) => r.id);
    if (Array.isArray(payload.entities)) context.entityIds = (payload.entities as { id?: string }[]).map((e) => e.id);
    bridge.post(event, key, context);
  };
}

async function messageDeleted(payload: Payload): Promise<void> {
  const bridge = bridgeOf(payload);
  const message = payload.message as { id?: string; roomId?: string; entityId?: string } | undefined;
  if (!bridge || !message?.roomId) return;
  const key = bridge.sessionKey(message.roomId);
  bridge.post("message:deleted", key, { sessionKey: key, messageId: message.id, from: message.entityId });
}

/** The plugin's `events`: the runtime's events posted to gatewayd. */
export const events = {
  [EventType.RUN_STARTED]: [run("started")],
  [EventType.RUN_ENDED]: [run("ended")],
  [EventType.RUN_TIMEOUT]: [run("timeout")],
  [EventType.WORLD_JOINED]: [environment("agent:world_joined")],
  [EventType.WORLD_CONNECTED]: [environment("agent:world_connected")],
  [EventType.WORLD_LEFT]: [environment("agent:world_left")],
  [EventType.ROOM_JOINED]: [environment("agent:room_joined")],
  [EventType.ROOM_LEFT]: [environment("agent:room_left")],
  [EventType.ENTITY_JOINED]: [environment("agent:entity_joined")],
  [EventType.ENTITY_LEFT]: [environment("agent:entity_left")],
  [EventType.ENTITY_UPDATED]: [environment("agent:entity_updated")],
  [EventType.MESSAGE_DELETED]: [messageDeleted],
} as unknown as PluginEvents;
