// Generated from gatewayd/hooks/schema.py by clients/typescript/scripts/generate_events.py:
// do not edit. Regenerate after changing the schema (a test fails while the two differ).

export interface MessageReceivedContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  from?: string;
  content?: string;
  channelId?: string;
  sessionKey?: string;
  timestamp?: number;
  conversationId?: string;
  messageId?: string;
  metadata?: Record<string, unknown>;
  direction?: "inbound";
}

/** What `message:received` handlers returned, merged in priority order. */
export interface MessageReceivedResult {
  /** merged: last */
  content?: string;
  /** merged: first */
  block?: boolean;
  /** merged: first */
  reason?: string;
}

/** ``message:sending``: a reply line about to be delivered; handlers may rewrite or cancel it (return ``{"content": ...}`` or ``{"cancel": True, "reason": ...}``). */
export interface MessageSendingContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  to?: string;
  content?: string;
  channelId?: string;
  sessionKey?: string;
  direction?: "outbound";
}

/** What `message:sending` handlers returned, merged in priority order. */
export interface MessageSendingResult {
  /** merged: last */
  content?: string;
  /** merged: first */
  cancel?: boolean;
  /** merged: first */
  reason?: string;
}

/** ``message:sent``: each reply line after it was delivered, or why it was not. */
export interface MessageSentContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  to?: string;
  content?: string;
  channelId?: string;
  sessionKey?: string;
  success?: boolean;
  timestamp?: number;
  reason?: string;
  error?: string;
  conversationId?: string;
  direction?: "outbound";
}

/** ``command:<name>``: a message ``/name args``. */
export interface CommandContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  args?: string;
  senderId?: string;
  commandSource?: string;
  sessionEntry?: SessionEntryJson | null;
  sessionId?: string | null;
  sessionFile?: string | null;
  previousSessionEntry?: SessionEntryJson | null;
  previousSessionMemory?: SessionMemoryJson;
}

/** A session as events carry it (``sessionEntry``, ``previousSessionEntry``). */
export interface SessionEntryJson {
  sessionKey?: string;
  sessionId?: string;
  sessionFile?: string;
  createdAt?: string;
}

/** A session's last messages as OpenClaw hands them to ``/new`` and ``/reset`` hooks. */
export interface SessionMemoryJson {
  status?: "available" | "unavailable";
  content?: string | null;
  originClass?: string;
  reason?: string;
}

/** ``session:start`` and ``session:end``. */
export interface SessionContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionEntry?: SessionEntryJson;
  sessionId?: string;
  sessionFile?: string;
  sessionKey?: string;
  reason?: "message" | "new" | "reset";
}

/** ``agent:bootstrap``: change ``bootstrapFiles`` in place; what is left is what boots. */
export interface BootstrapContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  bootstrapFiles?: BootstrapFile[];
  sessionKey?: string;
  sessionId?: string | null;
}

/** One entry of ``bootstrapFiles``: a workspace file the session boots with. */
export interface BootstrapFile {
  name?: string;
  path?: string;
  content?: string;
  missing?: boolean;
}

/** ``agent:before_start``: the agent runtime is about to run a turn; handlers return ``{"prependContext": ...}`` (joined in order), ``{"systemPrompt": ...}``, or, as OpenClaw's ``before_agent_start`` may, ``{"modelOverride": ..., "providerOverride": ...}`` (the first handler that sets one wins). */
export interface AgentStartContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  prompt?: string;
  messages?: unknown[];
  prependContext?: string;
}

/** What `agent:before_start` handlers returned, merged in priority order. */
export interface AgentBeforeStartResult {
  /** merged: join */
  prependContext?: string;
  /** merged: last */
  systemPrompt?: string;
  /** merged: first */
  modelOverride?: string;
  /** merged: first */
  providerOverride?: string;
}

/** ``agent:end``: a turn of the agent runtime ended. */
export interface AgentEndContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  messages?: unknown[];
  success?: boolean;
  error?: string;
  durationMs?: number;
}

/** ``agent:before_tool_call``: handlers may block the call (``{"block": True, "reason": ...}``) or change its ``params``. */
export interface ToolCallContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  toolName?: string;
  toolCallId?: string;
  params?: Record<string, unknown>;
}

/** What `agent:before_tool_call` handlers returned, merged in priority order. */
export interface AgentBeforeToolCallResult {
  /** merged: last */
  params?: Record<string, unknown>;
  /** merged: first */
  block?: boolean;
  /** merged: first */
  reason?: string;
}

/** ``agent:after_tool_call``: a tool call finished. */
export interface ToolResultContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  toolName?: string;
  toolCallId?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: string;
  durationMs?: number;
}

/** ``agent:tool_result_persist``: a tool result about to enter the transcript; handlers may return ``{"message": ...}`` to store another. */
export interface ToolResultPersistContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  toolName?: string;
  toolCallId?: string;
  message?: unknown;
  isSynthetic?: boolean;
}

/** What `agent:tool_result_persist` handlers returned, merged in priority order. */
export interface AgentToolResultPersistResult {
  /** merged: last */
  message?: unknown;
}

/** ``agent:before_compaction`` and ``agent:after_compaction`` (OpenClaw's plugin hooks ``before_compaction`` and ``after_compaction``). */
export interface CompactionContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  messageCount?: number;
  tokenCount?: number;
  compactedCount?: number;
}

/** ``agent:before_model_resolve`` (``before_model_resolve``): before the run's model is chosen; handlers return ``{"modelOverride": ..., "providerOverride": ...}`` (the first handler that sets one wins, as in OpenClaw). */
export interface ModelResolveContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  prompt?: string;
  attachments?: Record<string, unknown>[];
}

/** What `agent:before_model_resolve` handlers returned, merged in priority order. */
export interface AgentBeforeModelResolveResult {
  /** merged: first */
  modelOverride?: string;
  /** merged: first */
  providerOverride?: string;
}

/** ``agent:before_prompt_build`` (``before_prompt_build``): before the prompt is built; handlers return ``systemPrompt`` (the first wins), ``prependContext``, ``appendContext``, ``prependSystemContext``, ``appendSystemContext`` (each joined in order). */
export interface PromptBuildContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  prompt?: string;
  currentUserMessage?: string;
  currentUserMessageId?: string;
  messages?: unknown[];
}

/** What `agent:before_prompt_build` handlers returned, merged in priority order. */
export interface AgentBeforePromptBuildResult {
  /** merged: first */
  systemPrompt?: string;
  /** merged: join */
  prependContext?: string;
  /** merged: join */
  appendContext?: string;
  /** merged: join */
  prependSystemContext?: string;
  /** merged: join */
  appendSystemContext?: string;
}

/** ``agent:turn_prepare`` (``agent_turn_prepare``): a turn about to run; handlers return ``prependContext`` and ``appendContext`` (joined in order). */
export interface TurnPrepareContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  prompt?: string;
  messages?: unknown[];
  queuedInjections?: unknown[];
}

/** What `agent:turn_prepare` handlers returned, merged in priority order. */
export interface AgentTurnPrepareResult {
  /** merged: join */
  prependContext?: string;
  /** merged: join */
  appendContext?: string;
}

/** ``agent:before_reply`` (``before_agent_reply``): the cleaned inbound body before the agent replies; a handler may answer instead (``{"handled": true, "reply": ..., "reason": ...}``, the first wins and ends the chain). */
export interface AgentReplyContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  cleanedBody?: string;
}

/** What `agent:before_reply` handlers returned, merged in priority order. */
export interface AgentBeforeReplyResult {
  /** merged: first */
  handled?: boolean;
  /** merged: first */
  reply?: string;
  /** merged: first */
  reason?: string;
}

/** ``agent:model_call_started`` and ``agent:model_call_ended`` (observe only). */
export interface ModelCallContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  provider?: string;
  model?: string;
  durationMs?: number;
  error?: string;
}

/** ``agent:llm_input`` (``llm_input``): what is sent to the model (observe only). */
export interface LlmInputContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  provider?: string;
  model?: string;
  systemPrompt?: string;
  prompt?: string;
  historyMessages?: unknown[];
  imagesCount?: number;
  tools?: unknown[];
}

/** ``agent:llm_output`` (``llm_output``): what the model answered (observe only). */
export interface LlmOutputContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  provider?: string;
  model?: string;
  prompt?: string;
  assistantTexts?: string[];
  lastAssistant?: unknown;
  usage?: Record<string, unknown>;
}

/** ``agent:before_finalize`` (``before_agent_finalize``): the run is about to end; a handler may ask for another pass (``{"action": "revise", "reason": ..., "retry": {"instruction": ...}}``; the first wins). */
export interface AgentFinalizeContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  turnId?: string;
  provider?: string;
  model?: string;
  cwd?: string;
  transcriptPath?: string;
  stopHookActive?: boolean;
  lastAssistantMessage?: unknown;
  messages?: unknown[];
}

/** What `agent:before_finalize` handlers returned, merged in priority order. */
export interface AgentBeforeFinalizeResult {
  /** merged: first */
  action?: string;
  /** merged: first */
  reason?: string;
  /** merged: first */
  retry?: string;
}

/** ``agent:before_reset`` (``before_reset``): a session is about to be reset (observe). */
export interface ResetContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  sessionFile?: string;
  messages?: unknown[];
  reason?: string;
}

/** ``agent:before_message_write`` (``before_message_write``): a message about to enter the transcript; handlers may ``block`` it (the first wins, ending the chain) or return another ``message``. */
export interface MessageWriteContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  message?: unknown;
}

/** What `agent:before_message_write` handlers returned, merged in priority order. */
export interface AgentBeforeMessageWriteResult {
  /** merged: first */
  block?: boolean;
  /** merged: last */
  message?: unknown;
}

/** ``agent:subagent_spawned``, ``agent:subagent_progress``, ``agent:subagent_ended`` and ``agent:subagent_delivery_target`` (a handler may return its ``origin``; the first wins). */
export interface SubagentContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  childSessionKey?: string;
  requesterSessionKey?: string;
  targetSessionKey?: string;
  targetKind?: string;
  phase?: string;
  outcome?: string;
  reason?: string;
  error?: string;
  endedAt?: number;
  spawnMode?: string;
  expectsCompletionMessage?: boolean;
}

/** What `agent:subagent_delivery_target` handlers returned, merged in priority order. */
export interface AgentSubagentDeliveryTargetResult {
  /** merged: first */
  origin?: string;
}

/** ``agent:heartbeat_prompt_contribution``: a heartbeat prompt being built; handlers return ``prependContext`` and ``appendContext`` (joined in order). */
export interface HeartbeatContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  modelProviderId?: string;
  modelId?: string;
  trigger?: string;
  channelId?: string;
  heartbeatName?: string;
}

/** What `agent:heartbeat_prompt_contribution` handlers returned, merged in priority order. */
export interface AgentHeartbeatPromptContributionResult {
  /** merged: join */
  prependContext?: string;
  /** merged: join */
  appendContext?: string;
}

/** ``session:compact:before`` (OpenClaw's internal event, as its compaction builds it): ``tokenCount`` and ``tokenCountOriginal`` are absent when they could not be estimated. */
export interface CompactBeforeContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionId?: string;
  missingSessionKey?: boolean;
  messageCount?: number;
  tokenCount?: number;
  messageCountOriginal?: number;
  tokenCountOriginal?: number;
}

/** ``session:compact:after`` (OpenClaw's internal event, after a successful compaction). */
export interface CompactAfterContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionId?: string;
  missingSessionKey?: boolean;
  messageCount?: number;
  tokenCount?: number;
  compactedCount?: number;
  summaryLength?: number;
  tokensBefore?: number;
  tokensAfter?: number;
  firstKeptEntryId?: string;
}

/** ``agent:world_joined`` ... ``agent:entity_updated`` (elizaOS's world, room and entity events, posted by its gatewayd plugin): the room's session (or ``agent:<agent>:world:<id>`` for a world event without a room) and what the runtime said of it. */
export interface EnvironmentContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  source?: string;
  roomId?: string;
  worldId?: string;
  worldName?: string;
  entityId?: string;
  metadata?: Record<string, unknown>;
  roomIds?: string[];
  entityIds?: string[];
}

export interface MessageDeletedContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  messageId?: string;
  from?: string;
}

/** ``gateway:startup``: once per process, after every channel listens. */
export interface GatewayStartupContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  gateway?: string;
}

/** ``gateway:shutdown``: on SIGTERM/SIGINT/SIGUSR2, before the queue drains; and ``gateway:pre-restart`` after it when the stop restarts in place (SIGUSR2), as OpenClaw fires both. */
export interface GatewayShutdownContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  reason?: string;
  restartExpectedMs?: number | null;
}

/** ``message:transcribed`` and ``message:preprocessed`` (OpenClaw): a message after media and link understanding. */
export interface MessageEnrichedContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  body?: string;
  bodyForAgent?: string;
  transcript?: string;
  channelId?: string;
  sessionKey?: string;
  conversationId?: string;
  messageId?: string;
  senderId?: string;
  timestamp?: number;
}

/** ``session:patch`` (OpenClaw): session properties changed. */
export interface SessionPatchContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionEntry?: SessionEntryJson;
  sessionKey?: string;
  patch?: Record<string, unknown>;
}

/** ``session:auto-reset`` (OpenClaw): a session replaced by its daily or idle policy. */
export interface SessionAutoResetContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionEntry?: SessionEntryJson;
  storePath?: string;
  reason?: "daily" | "idle";
  transcriptArchived?: boolean;
  nextSessionId?: string;
  nextSessionKey?: string;
}

/** ``agent:step`` (Hermes): one turn of an agent's tool-calling loop. */
export interface AgentStepContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  sessionKey?: string;
  iteration?: number;
  toolNames?: string[];
}

/** The context type of each event the schema declares (`command`: every command). */
export interface EventContexts {
  "message:received": MessageReceivedContext;
  "message:sending": MessageSendingContext;
  "message:sent": MessageSentContext;
  "command": CommandContext;
  "session:start": SessionContext;
  "session:end": SessionContext;
  "agent:bootstrap": BootstrapContext;
  "agent:before_start": AgentStartContext;
  "agent:end": AgentEndContext;
  "agent:before_tool_call": ToolCallContext;
  "agent:after_tool_call": ToolResultContext;
  "agent:tool_result_persist": ToolResultPersistContext;
  "agent:before_compaction": CompactionContext;
  "agent:after_compaction": CompactionContext;
  "agent:before_model_resolve": ModelResolveContext;
  "agent:before_prompt_build": PromptBuildContext;
  "agent:turn_prepare": TurnPrepareContext;
  "agent:before_reply": AgentReplyContext;
  "agent:model_call_started": ModelCallContext;
  "agent:model_call_ended": ModelCallContext;
  "agent:llm_input": LlmInputContext;
  "agent:llm_output": LlmOutputContext;
  "agent:before_finalize": AgentFinalizeContext;
  "agent:before_reset": ResetContext;
  "agent:before_message_write": MessageWriteContext;
  "agent:subagent_spawned": SubagentContext;
  "agent:subagent_progress": SubagentContext;
  "agent:subagent_ended": SubagentContext;
  "agent:subagent_delivery_target": SubagentContext;
  "agent:heartbeat_prompt_contribution": HeartbeatContext;
  "session:compact:before": CompactBeforeContext;
  "session:compact:after": CompactAfterContext;
  "agent:world_joined": EnvironmentContext;
  "agent:world_connected": EnvironmentContext;
  "agent:world_left": EnvironmentContext;
  "agent:room_joined": EnvironmentContext;
  "agent:room_left": EnvironmentContext;
  "agent:entity_joined": EnvironmentContext;
  "agent:entity_left": EnvironmentContext;
  "agent:entity_updated": EnvironmentContext;
  "message:deleted": MessageDeletedContext;
  "gateway:startup": GatewayStartupContext;
  "gateway:shutdown": GatewayShutdownContext;
  "message:transcribed": MessageEnrichedContext;
  "message:preprocessed": MessageEnrichedContext;
  "session:patch": SessionPatchContext;
  "session:auto-reset": SessionAutoResetContext;
  "gateway:pre-restart": GatewayShutdownContext;
  "agent:step": AgentStepContext;
}

/** The merged result of each decision event (the `result` of a waited `trigger`). */
export interface DecisionResults {
  "message:received": MessageReceivedResult;
  "message:sending": MessageSendingResult;
  "agent:before_start": AgentBeforeStartResult;
  "agent:before_tool_call": AgentBeforeToolCallResult;
  "agent:tool_result_persist": AgentToolResultPersistResult;
  "agent:before_model_resolve": AgentBeforeModelResolveResult;
  "agent:before_prompt_build": AgentBeforePromptBuildResult;
  "agent:turn_prepare": AgentTurnPrepareResult;
  "agent:before_reply": AgentBeforeReplyResult;
  "agent:before_finalize": AgentBeforeFinalizeResult;
  "agent:before_message_write": AgentBeforeMessageWriteResult;
  "agent:subagent_delivery_target": AgentSubagentDeliveryTargetResult;
  "agent:heartbeat_prompt_contribution": AgentHeartbeatPromptContributionResult;
}

/** Every event key the schema declares. */
export type EventKey = keyof EventContexts;
/** The events whose handlers return a result the caller obeys. */
export type DecisionEventKey = keyof DecisionResults;

/** How the gateway treats each event: the schema's contract, as data. */
export const EVENTS = {
  "message:received": { fired: true, reply: "sender", fields: ["from", "content", "channelId", "sessionKey", "timestamp", "conversationId", "messageId", "metadata", "direction"], mutable: ["content"], results: { content: "last", block: "first", reason: "first" }, stop: "block", openclaw: "message_received" },
  "message:sending": { fired: true, reply: "nowhere", fields: ["to", "content", "channelId", "sessionKey", "direction"], mutable: ["content"], results: { content: "last", cancel: "first", reason: "first" }, stop: "cancel", openclaw: "message_sending" },
  "message:sent": { fired: true, reply: "nowhere", fields: ["to", "content", "channelId", "sessionKey", "success", "timestamp", "reason", "error", "conversationId", "direction"], mutable: [], results: {}, stop: null, openclaw: "message_sent" },
  "command": { fired: true, reply: "sender", fields: ["args", "senderId", "commandSource", "sessionEntry", "sessionId", "sessionFile", "previousSessionEntry", "previousSessionMemory"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:start": { fired: true, reply: "sender", fields: ["sessionEntry", "sessionId", "sessionFile", "sessionKey", "reason"], mutable: [], results: {}, stop: null, openclaw: "session_start" },
  "session:end": { fired: true, reply: "sender", fields: ["sessionEntry", "sessionId", "sessionFile", "sessionKey", "reason"], mutable: [], results: {}, stop: null, openclaw: "session_end" },
  "agent:bootstrap": { fired: true, reply: "sender", fields: ["bootstrapFiles", "sessionKey", "sessionId"], mutable: ["bootstrapFiles"], results: {}, stop: null, openclaw: null },
  "agent:before_start": { fired: true, reply: "caller", fields: ["sessionKey", "prompt", "messages", "prependContext"], mutable: ["prependContext"], results: { prependContext: "join", systemPrompt: "last", modelOverride: "first", providerOverride: "first" }, stop: null, openclaw: "before_agent_start" },
  "agent:end": { fired: true, reply: "caller", fields: ["sessionKey", "messages", "success", "error", "durationMs"], mutable: [], results: {}, stop: null, openclaw: "agent_end" },
  "agent:before_tool_call": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "params"], mutable: ["params"], results: { params: "last", block: "first", reason: "first" }, stop: "block", openclaw: "before_tool_call" },
  "agent:after_tool_call": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "params", "result", "error", "durationMs"], mutable: [], results: {}, stop: null, openclaw: "after_tool_call" },
  "agent:tool_result_persist": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "message", "isSynthetic"], mutable: ["message"], results: { message: "last" }, stop: null, openclaw: "tool_result_persist" },
  "agent:before_compaction": { fired: true, reply: "caller", fields: ["sessionKey", "messageCount", "tokenCount", "compactedCount"], mutable: [], results: {}, stop: null, openclaw: "before_compaction" },
  "agent:after_compaction": { fired: true, reply: "caller", fields: ["sessionKey", "messageCount", "tokenCount", "compactedCount"], mutable: [], results: {}, stop: null, openclaw: "after_compaction" },
  "agent:before_model_resolve": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "prompt", "attachments"], mutable: [], results: { modelOverride: "first", providerOverride: "first" }, stop: null, openclaw: "before_model_resolve" },
  "agent:before_prompt_build": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "prompt", "currentUserMessage", "currentUserMessageId", "messages"], mutable: [], results: { systemPrompt: "first", prependContext: "join", appendContext: "join", prependSystemContext: "join", appendSystemContext: "join" }, stop: null, openclaw: "before_prompt_build" },
  "agent:turn_prepare": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "prompt", "messages", "queuedInjections"], mutable: [], results: { prependContext: "join", appendContext: "join" }, stop: null, openclaw: "agent_turn_prepare" },
  "agent:before_reply": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "cleanedBody"], mutable: [], results: { handled: "first", reply: "first", reason: "first" }, stop: "handled", openclaw: "before_agent_reply" },
  "agent:model_call_started": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "provider", "model", "durationMs", "error"], mutable: [], results: {}, stop: null, openclaw: "model_call_started" },
  "agent:model_call_ended": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "provider", "model", "durationMs", "error"], mutable: [], results: {}, stop: null, openclaw: "model_call_ended" },
  "agent:llm_input": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "provider", "model", "systemPrompt", "prompt", "historyMessages", "imagesCount", "tools"], mutable: [], results: {}, stop: null, openclaw: "llm_input" },
  "agent:llm_output": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "provider", "model", "prompt", "assistantTexts", "lastAssistant", "usage"], mutable: [], results: {}, stop: null, openclaw: "llm_output" },
  "agent:before_finalize": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "turnId", "provider", "model", "cwd", "transcriptPath", "stopHookActive", "lastAssistantMessage", "messages"], mutable: [], results: { action: "first", reason: "first", retry: "first" }, stop: null, openclaw: "before_agent_finalize" },
  "agent:before_reset": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "sessionFile", "messages", "reason"], mutable: [], results: {}, stop: null, openclaw: "before_reset" },
  "agent:before_message_write": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "message"], mutable: ["message"], results: { block: "first", message: "last" }, stop: "block", openclaw: "before_message_write" },
  "agent:subagent_spawned": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "childSessionKey", "requesterSessionKey", "targetSessionKey", "targetKind", "phase", "outcome", "reason", "error", "endedAt", "spawnMode", "expectsCompletionMessage"], mutable: [], results: {}, stop: null, openclaw: "subagent_spawned" },
  "agent:subagent_progress": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "childSessionKey", "requesterSessionKey", "targetSessionKey", "targetKind", "phase", "outcome", "reason", "error", "endedAt", "spawnMode", "expectsCompletionMessage"], mutable: [], results: {}, stop: null, openclaw: "subagent_progress" },
  "agent:subagent_ended": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "childSessionKey", "requesterSessionKey", "targetSessionKey", "targetKind", "phase", "outcome", "reason", "error", "endedAt", "spawnMode", "expectsCompletionMessage"], mutable: [], results: {}, stop: null, openclaw: "subagent_ended" },
  "agent:subagent_delivery_target": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "childSessionKey", "requesterSessionKey", "targetSessionKey", "targetKind", "phase", "outcome", "reason", "error", "endedAt", "spawnMode", "expectsCompletionMessage"], mutable: [], results: { origin: "first" }, stop: null, openclaw: "subagent_delivery_target" },
  "agent:heartbeat_prompt_contribution": { fired: true, reply: "caller", fields: ["sessionKey", "sessionId", "runId", "modelProviderId", "modelId", "trigger", "channelId", "heartbeatName"], mutable: [], results: { prependContext: "join", appendContext: "join" }, stop: null, openclaw: "heartbeat_prompt_contribution" },
  "session:compact:before": { fired: true, reply: "caller", fields: ["sessionId", "missingSessionKey", "messageCount", "tokenCount", "messageCountOriginal", "tokenCountOriginal"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:compact:after": { fired: true, reply: "caller", fields: ["sessionId", "missingSessionKey", "messageCount", "tokenCount", "compactedCount", "summaryLength", "tokensBefore", "tokensAfter", "firstKeptEntryId"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:world_joined": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:world_connected": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:world_left": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:room_joined": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:room_left": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:entity_joined": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:entity_left": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:entity_updated": { fired: true, reply: "caller", fields: ["sessionKey", "source", "roomId", "worldId", "worldName", "entityId", "metadata", "roomIds", "entityIds"], mutable: [], results: {}, stop: null, openclaw: null },
  "message:deleted": { fired: true, reply: "caller", fields: ["sessionKey", "messageId", "from"], mutable: [], results: {}, stop: null, openclaw: null },
  "gateway:startup": { fired: true, reply: "nowhere", fields: ["gateway"], mutable: [], results: {}, stop: null, openclaw: "gateway_start" },
  "gateway:shutdown": { fired: true, reply: "nowhere", fields: ["reason", "restartExpectedMs"], mutable: [], results: {}, stop: null, openclaw: "gateway_stop" },
  "message:transcribed": { fired: false, reply: "nowhere", fields: ["body", "bodyForAgent", "transcript", "channelId", "sessionKey", "conversationId", "messageId", "senderId", "timestamp"], mutable: [], results: {}, stop: null, openclaw: null },
  "message:preprocessed": { fired: false, reply: "nowhere", fields: ["body", "bodyForAgent", "transcript", "channelId", "sessionKey", "conversationId", "messageId", "senderId", "timestamp"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:patch": { fired: false, reply: "nowhere", fields: ["sessionEntry", "sessionKey", "patch"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:auto-reset": { fired: false, reply: "nowhere", fields: ["sessionEntry", "storePath", "reason", "transcriptArchived", "nextSessionId", "nextSessionKey"], mutable: [], results: {}, stop: null, openclaw: null },
  "gateway:pre-restart": { fired: true, reply: "nowhere", fields: ["reason", "restartExpectedMs"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:step": { fired: false, reply: "nowhere", fields: ["sessionKey", "iteration", "toolNames"], mutable: [], results: {}, stop: null, openclaw: null },
} as const;

/** The decision events, in schema order. */
export const DECISION_EVENTS: readonly DecisionEventKey[] = ["message:received", "message:sending", "agent:before_start", "agent:before_tool_call", "agent:tool_result_persist", "agent:before_model_resolve", "agent:before_prompt_build", "agent:turn_prepare", "agent:before_reply", "agent:before_finalize", "agent:before_message_write", "agent:subagent_delivery_target", "agent:heartbeat_prompt_contribution"];
