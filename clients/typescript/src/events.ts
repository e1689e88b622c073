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
}

/** A session as events carry it (``sessionEntry``, ``previousSessionEntry``). */
export interface SessionEntryJson {
  sessionKey?: string;
  sessionId?: string;
  sessionFile?: string;
  createdAt?: string;
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

/** ``agent:before_start``: the agent runtime is about to run a turn; handlers return ``{"prependContext": ...}`` (joined in order) or ``{"systemPrompt": ...}``. */
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

/** ``gateway:startup``: once per process, after every channel listens. */
export interface GatewayStartupContext {
  cfg?: Record<string, unknown>;
  workspaceDir?: string;
  agentId?: string;
  subagentId?: string;
  gateway?: string;
}

/** ``gateway:shutdown``: on SIGTERM/SIGINT, before the queue drains (and OpenClaw's ``gateway:pre-restart``). */
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
  "session:compact:before": CompactBeforeContext;
  "session:compact:after": CompactAfterContext;
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
}

/** Every event key the schema declares. */
export type EventKey = keyof EventContexts;
/** The events whose handlers return a result the caller obeys. */
export type DecisionEventKey = keyof DecisionResults;

/** How the gateway treats each event: the schema's contract, as data. */
export const EVENTS = {
  "message:received": { fired: true, reply: "sender", fields: ["from", "content", "channelId", "sessionKey", "timestamp", "conversationId", "messageId", "metadata"], mutable: ["content"], results: { content: "last", block: "first", reason: "first" }, stop: "block", openclaw: "message_received" },
  "message:sending": { fired: true, reply: "nowhere", fields: ["to", "content", "channelId", "sessionKey"], mutable: ["content"], results: { content: "last", cancel: "first", reason: "first" }, stop: "cancel", openclaw: "message_sending" },
  "message:sent": { fired: true, reply: "nowhere", fields: ["to", "content", "channelId", "sessionKey", "success", "timestamp", "reason", "error", "conversationId"], mutable: [], results: {}, stop: null, openclaw: "message_sent" },
  "command": { fired: true, reply: "sender", fields: ["args", "senderId", "commandSource", "sessionEntry", "sessionId", "sessionFile", "previousSessionEntry"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:start": { fired: true, reply: "sender", fields: ["sessionEntry", "sessionId", "sessionFile", "sessionKey", "reason"], mutable: [], results: {}, stop: null, openclaw: "session_start" },
  "session:end": { fired: true, reply: "sender", fields: ["sessionEntry", "sessionId", "sessionFile", "sessionKey", "reason"], mutable: [], results: {}, stop: null, openclaw: "session_end" },
  "agent:bootstrap": { fired: true, reply: "sender", fields: ["bootstrapFiles", "sessionKey", "sessionId"], mutable: ["bootstrapFiles"], results: {}, stop: null, openclaw: null },
  "agent:before_start": { fired: true, reply: "caller", fields: ["sessionKey", "prompt", "messages", "prependContext"], mutable: ["prependContext"], results: { prependContext: "join", systemPrompt: "last" }, stop: null, openclaw: "before_agent_start" },
  "agent:end": { fired: true, reply: "caller", fields: ["sessionKey", "messages", "success", "error", "durationMs"], mutable: [], results: {}, stop: null, openclaw: "agent_end" },
  "agent:before_tool_call": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "params"], mutable: ["params"], results: { params: "last", block: "first", reason: "first" }, stop: "block", openclaw: "before_tool_call" },
  "agent:after_tool_call": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "params", "result", "error", "durationMs"], mutable: [], results: {}, stop: null, openclaw: "after_tool_call" },
  "agent:tool_result_persist": { fired: true, reply: "caller", fields: ["sessionKey", "toolName", "toolCallId", "message", "isSynthetic"], mutable: ["message"], results: { message: "last" }, stop: null, openclaw: "tool_result_persist" },
  "agent:before_compaction": { fired: true, reply: "caller", fields: ["sessionKey", "messageCount", "tokenCount", "compactedCount"], mutable: [], results: {}, stop: null, openclaw: "before_compaction" },
  "agent:after_compaction": { fired: true, reply: "caller", fields: ["sessionKey", "messageCount", "tokenCount", "compactedCount"], mutable: [], results: {}, stop: null, openclaw: "after_compaction" },
  "session:compact:before": { fired: true, reply: "caller", fields: ["sessionId", "missingSessionKey", "messageCount", "tokenCount", "messageCountOriginal", "tokenCountOriginal"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:compact:after": { fired: true, reply: "caller", fields: ["sessionId", "missingSessionKey", "messageCount", "tokenCount", "compactedCount", "summaryLength", "tokensBefore", "tokensAfter", "firstKeptEntryId"], mutable: [], results: {}, stop: null, openclaw: null },
  "gateway:startup": { fired: true, reply: "nowhere", fields: ["gateway"], mutable: [], results: {}, stop: null, openclaw: "gateway_start" },
  "gateway:shutdown": { fired: true, reply: "nowhere", fields: ["reason", "restartExpectedMs"], mutable: [], results: {}, stop: null, openclaw: "gateway_stop" },
  "message:transcribed": { fired: false, reply: "nowhere", fields: ["body", "bodyForAgent", "transcript", "channelId", "sessionKey", "conversationId", "messageId", "senderId", "timestamp"], mutable: [], results: {}, stop: null, openclaw: null },
  "message:preprocessed": { fired: false, reply: "nowhere", fields: ["body", "bodyForAgent", "transcript", "channelId", "sessionKey", "conversationId", "messageId", "senderId", "timestamp"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:patch": { fired: false, reply: "nowhere", fields: ["sessionEntry", "sessionKey", "patch"], mutable: [], results: {}, stop: null, openclaw: null },
  "session:auto-reset": { fired: false, reply: "nowhere", fields: ["sessionEntry", "storePath", "reason", "transcriptArchived", "nextSessionId", "nextSessionKey"], mutable: [], results: {}, stop: null, openclaw: null },
  "gateway:pre-restart": { fired: false, reply: "nowhere", fields: ["reason", "restartExpectedMs"], mutable: [], results: {}, stop: null, openclaw: null },
  "agent:step": { fired: false, reply: "nowhere", fields: ["sessionKey", "iteration", "toolNames"], mutable: [], results: {}, stop: null, openclaw: null },
} as const;

/** The decision events, in schema order. */
export const DECISION_EVENTS: readonly DecisionEventKey[] = ["message:received", "message:sending", "agent:before_start", "agent:before_tool_call", "agent:tool_result_persist"];
