"""The event schema: every event the gateway fires, in one place.

For each event this module says what its ``context`` holds (a ``TypedDict``, so a handler
annotated ``event: HookEvent[CommandContext]`` is checked by mypy and pyright), which of those
fields handlers may change (the gateway reads them back after the handlers ran), and where the
event's reply goes. The daemon builds events from these types, docs/hooks.md documents them (a
test checks the guide against :data:`EVENTS`), and the runtimes for other languages (command
hooks, JS/TS) serialise the same fields.

At run time a context is a plain ``dict``: old handlers that index ``event.context["args"]`` keep
working, and a ``trigger`` request may carry any fields of its own. Every context type is
``total=False`` for that reason: a field the gateway always sets for the events it fires may be
absent from an event a client triggered by hand, so read with ``.get()`` where that matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from gatewayd.hooks.runtime_contexts import RUNTIME_EVENTS

if TYPE_CHECKING:
    from collections.abc import Mapping


class GatewayHandle(Protocol):
    """What a hook may ask of the running gateway (``ctx.gateway``, and ``context["gateway"]``
    in ``gateway:startup``): never the whole daemon."""

    async def deliver(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str = "gateway",
        channel: str = "internal",
        wait: bool = True,
    ) -> tuple[list[str], str | None]:
        """Inject an inbound message as if a channel had received it; ``(reply, command)``.

        From a handler pass ``wait=False``: waiting would wait on the dispatcher running you.
        """
        ...

    async def send(self, session_key: str, text: str, *, channel: str = "hook") -> bool:
        """Send ``text`` to a session now (through ``message:sending`` and ``message:sent``) to
        the clients subscribed to it; True when one took it."""
        ...


class SessionMemoryJson(TypedDict, total=False):
    """A session's last messages as OpenClaw hands them to ``/new`` and ``/reset`` hooks."""

    status: Literal["available", "unavailable"]
    content: str | None
    """``<role>: <text as a JSON string>`` lines; None for a session without messages."""
    originClass: str
    reason: str


class SessionEntryJson(TypedDict):
    """A session as events carry it (``sessionEntry``, ``previousSessionEntry``)."""

    sessionKey: str
    sessionId: str
    sessionFile: str
    createdAt: str


class BootstrapFile(TypedDict, total=False):
    """One entry of ``bootstrapFiles``: a workspace file the session boots with."""

    name: str
    path: str
    content: str
    missing: bool


class BaseContext(TypedDict, total=False):
    """What every event the gateway fires carries."""

    cfg: dict[str, Any]
    """The effective config as a dict with Eliza key names; read-only by convention."""
    workspaceDir: str
    """The workspace of the event's agent."""
    agentId: str
    """``<id>`` of an ``agent:<id>:...`` session key, else the default agent's id."""
    subagentId: str
    """``<subId>`` of an ``agent:<id>:subagent:<subId>...`` session key (absent otherwise)."""


# ``from`` is a Python keyword, so this one is declared in the functional form (which cannot
# inherit: the base fields are repeated).
MessageReceivedContext = TypedDict(
    "MessageReceivedContext",
    {
        "cfg": dict[str, Any],
        "workspaceDir": str,
        "agentId": str,
        "subagentId": str,
        "from": str,
        "content": str,
        "channelId": str,
        "sessionKey": str,
        "timestamp": int,
        "conversationId": str,
        "messageId": str,
        "metadata": dict[str, Any],
        "direction": Literal["inbound"],
    },
    total=False,
)
"""``message:received``: every inbound message, before anything else it causes. ``timestamp`` is
Unix epoch milliseconds, as OpenClaw's message hooks get it; ``direction`` is gatewayd's
(:attr:`EventSpec.direction`)."""


class MessageSendingContext(BaseContext, total=False):
    """``message:sending``: a reply line about to be delivered; handlers may rewrite or cancel it
    (return ``{"content": ...}`` or ``{"cancel": True, "reason": ...}``)."""

    to: str
    content: str
    channelId: str
    sessionKey: str
    direction: Literal["outbound"]


class MessageSentContext(BaseContext, total=False):
    """``message:sent``: each reply line after it was delivered, or why it was not."""

    to: str
    content: str
    channelId: str
    sessionKey: str
    success: bool
    timestamp: int
    reason: str
    """Why it was not sent: a ``message:sending`` handler cancelled it."""
    error: str
    """Why it was not sent: the delivery failed."""
    conversationId: str
    direction: Literal["outbound"]


class AgentStartContext(BaseContext, total=False):
    """``agent:before_start``: the agent runtime is about to run a turn; handlers return
    ``{"prependContext": ...}`` (joined in order), ``{"systemPrompt": ...}``, or, as OpenClaw's
    ``before_agent_start`` may, ``{"modelOverride": ..., "providerOverride": ...}`` (the first
    handler that sets one wins)."""

    sessionKey: str
    prompt: str
    messages: list[Any]
    prependContext: str
    """What earlier handlers returned to prepend, joined so far."""


class AgentEndContext(BaseContext, total=False):
    """``agent:end``: a turn of the agent runtime ended."""

    sessionKey: str
    messages: list[Any]
    success: bool
    error: str
    durationMs: float


class ToolCallContext(BaseContext, total=False):
    """``agent:before_tool_call``: handlers may block the call (``{"block": True, "reason":
    ...}``) or change its ``params``."""

    sessionKey: str
    toolName: str
    toolCallId: str
    params: dict[str, Any]


class ToolResultContext(BaseContext, total=False):
    """``agent:after_tool_call``: a tool call finished."""

    sessionKey: str
    toolName: str
    toolCallId: str
    params: dict[str, Any]
    result: Any
    error: str
    durationMs: float


class ToolResultPersistContext(BaseContext, total=False):
    """``agent:tool_result_persist``: a tool result about to enter the transcript; handlers may
    return ``{"message": ...}`` to store another."""

    sessionKey: str
    toolName: str
    toolCallId: str
    message: Any
    isSynthetic: bool


class CompactionContext(BaseContext, total=False):
    """``agent:before_compaction`` and ``agent:after_compaction`` (OpenClaw's plugin hooks
    ``before_compaction`` and ``after_compaction``)."""

    sessionKey: str
    messageCount: int
    tokenCount: int
    compactedCount: int


class CompactBeforeContext(BaseContext, total=False):
    """``session:compact:before`` (OpenClaw's internal event, as its compaction builds it):
    ``tokenCount`` and ``tokenCountOriginal`` are absent when they could not be estimated."""

    sessionId: str
    missingSessionKey: bool
    messageCount: int
    tokenCount: int
    messageCountOriginal: int
    tokenCountOriginal: int


class CompactAfterContext(BaseContext, total=False):
    """``session:compact:after`` (OpenClaw's internal event, after a successful compaction)."""

    sessionId: str
    missingSessionKey: bool
    messageCount: int
    tokenCount: int
    compactedCount: int
    summaryLength: int
    tokensBefore: int
    tokensAfter: int
    firstKeptEntryId: str


class SessionAutoResetContext(BaseContext, total=False):
    """``session:auto-reset`` (OpenClaw): a session replaced by its daily or idle policy."""

    sessionEntry: SessionEntryJson
    storePath: str
    reason: Literal["daily", "idle"]
    transcriptArchived: bool
    nextSessionId: str
    nextSessionKey: str


class CommandContext(BaseContext, total=False):
    """``command:<name>``: a message ``/name args``."""

    args: str
    senderId: str
    commandSource: str
    sessionEntry: SessionEntryJson | None
    sessionId: str | None
    sessionFile: str | None
    previousSessionEntry: SessionEntryJson | None
    previousSessionMemory: SessionMemoryJson
    """``/new`` and ``/reset``: the ended session's last messages (``session_memory.py``)."""


class SessionContext(BaseContext, total=False):
    """``session:start`` and ``session:end``."""

    sessionEntry: SessionEntryJson
    sessionId: str
    sessionFile: str
    sessionKey: str
    reason: Literal["message", "new", "reset"]


class BootstrapContext(BaseContext, total=False):
    """``agent:bootstrap``: change ``bootstrapFiles`` in place; what is left is what boots."""

    bootstrapFiles: list[BootstrapFile]
    sessionKey: str
    sessionId: str | None


class GatewayStartupContext(BaseContext, total=False):
    """``gateway:startup``: once per process, after every channel listens."""

    gateway: GatewayHandle


class GatewayShutdownContext(BaseContext, total=False):
    """``gateway:shutdown``: on SIGTERM/SIGINT/SIGUSR2, before the queue drains; and
    ``gateway:pre-restart`` after it when the stop restarts in place (SIGUSR2), as OpenClaw
    fires both."""

    reason: str
    """The signal (``SIGTERM``, ``SIGUSR2``, ...) or what requested the stop."""
    restartExpectedMs: int | None
    """When the process restarts in place (SIGUSR2), in how many ms it is expected to serve
    again (the time this run took to start: ``Gateway.restart_expected_ms``); ``None`` on a plain
    stop."""


class Merge(Enum):
    """How the values several handlers return for one result field combine."""

    LAST = "last"
    """The last handler (in priority order) that returned the field wins."""
    FIRST = "first"
    """The first handler that returned the field wins (``block``, ``cancel``, their reason)."""
    JOIN = "join"
    """Strings are joined with a blank line, in order (``prependContext``)."""


class MessageEnrichedContext(BaseContext, total=False):
    """``message:transcribed`` and ``message:preprocessed`` (OpenClaw): a message after media
    and link understanding."""

    body: str
    bodyForAgent: str
    transcript: str
    channelId: str
    sessionKey: str
    conversationId: str
    messageId: str
    senderId: str
    timestamp: int


class SessionPatchContext(BaseContext, total=False):
    """``session:patch`` (OpenClaw): session properties changed."""

    sessionEntry: SessionEntryJson
    sessionKey: str
    patch: dict[str, Any]


# ``from`` is a Python keyword: the functional form, the base fields repeated.
MessageDeletedContext = TypedDict(
    "MessageDeletedContext",
    {
        "cfg": dict[str, Any],
        "workspaceDir": str,
        "agentId": str,
        "subagentId": str,
        "sessionKey": str,
        "messageId": str,
        "from": str,
    },
    total=False,
)
"""``message:deleted`` (elizaOS's ``MESSAGE_DELETED``, posted by its gatewayd plugin): a message
of the session's room was deleted; ``from`` is the entity that wrote it."""


class EnvironmentContext(BaseContext, total=False):
    """``agent:world_joined`` ... ``agent:entity_updated`` (elizaOS's world, room and entity
    events, posted by its gatewayd plugin): the room's session (or ``agent:<agent>:world:<id>``
    for a world event without a room) and what the runtime said of it."""

    sessionKey: str
    source: str
    """The transport that reported it (``discord``, ``telegram``, ...)."""
    roomId: str
    worldId: str
    worldName: str
    entityId: str
    metadata: dict[str, Any]
    roomIds: list[str]
    """A world's rooms (``agent:world_joined``, ``agent:world_connected``)."""
    entityIds: list[str]
    """A world's entities (``agent:world_joined``, ``agent:world_connected``)."""


class AgentStepContext(BaseContext, total=False):
    """``agent:step`` (Hermes): one turn of an agent's tool-calling loop."""

    sessionKey: str
    iteration: int
    toolNames: list[str]


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One event the gateway fires: its key, context type and contract."""

    key: str
    """``type:action``, or a bare ``type`` for a family (``command``: every ``command:<name>``)."""
    context: type
    """The ``TypedDict`` of its context (``cfg`` and ``workspaceDir`` included)."""
    mutable: frozenset[str]
    """Context fields the gateway reads back after the handlers ran."""
    reply: Literal["sender", "caller", "nowhere"]
    """Where ``event.messages`` goes."""
    results: Mapping[str, Merge] = field(default_factory=dict)
    """The fields a handler may return (a dict) and how they merge; a returned field that is
    also a context field is written to the context, so later handlers see the rewrite."""
    stop: str | None = None
    """A result field that, once true, ends the chain: no lower-priority handler runs."""
    direction: Literal["inbound", "outbound"] | None = None
    """For a message event, which way the message goes: the gateway sets ``direction`` in the
    context to it (a client's trigger included). OpenClaw 2026.9.6's hook contexts have no such
    field (its audit records do): gatewayd's own, docs/design.md's deliberate differences."""
    fired: bool = True
    """Whether this gateway fires it (or accepts it posted by an agent runtime). The others are
    declared so that hooks written for OpenClaw and Hermes load with their contexts typed; a
    hook subscribed to one is told it will not run, and :attr:`never` says why."""
    never: str = ""
    """Why this gateway never fires it (for an event that is not :attr:`fired`)."""

    @property
    def fields(self) -> tuple[str, ...]:
        """Its own context fields (besides ``cfg`` and ``workspaceDir``), in declared order."""
        return tuple(k for k in self.context.__annotations__ if k not in BASE_FIELDS)


BASE_FIELDS = ("cfg", "workspaceDir", "agentId", "subagentId")

EVENTS: Mapping[str, EventSpec] = {
    spec.key: spec
    for spec in (
        EventSpec(
            "message:received",
            MessageReceivedContext,
            frozenset({"content"}),
            "sender",
            {"content": Merge.LAST, "block": Merge.FIRST, "reason": Merge.FIRST},
            stop="block",
            direction="inbound",
        ),
        EventSpec(
            "message:sending",
            MessageSendingContext,
            frozenset({"content"}),
            "nowhere",
            {"content": Merge.LAST, "cancel": Merge.FIRST, "reason": Merge.FIRST},
            stop="cancel",
            direction="outbound",
        ),
        EventSpec(
            "message:sent",
            MessageSentContext,
            frozenset(),
            "nowhere",
            direction="outbound",
        ),
        EventSpec(
            "command",
            CommandContext,
            frozenset(),
            "sender",
        ),
        EventSpec("session:start", SessionContext, frozenset(), "sender"),
        EventSpec("session:end", SessionContext, frozenset(), "sender"),
        EventSpec(
            "agent:bootstrap",
            BootstrapContext,
            frozenset({"bootstrapFiles"}),
            "sender",
        ),
        EventSpec(
            "agent:before_start",
            AgentStartContext,
            frozenset({"prependContext"}),
            "caller",
            {
                "prependContext": Merge.JOIN,
                "systemPrompt": Merge.LAST,
                "modelOverride": Merge.FIRST,
                "providerOverride": Merge.FIRST,
            },
        ),
        EventSpec("agent:end", AgentEndContext, frozenset(), "caller"),
        EventSpec(
            "agent:before_tool_call",
            ToolCallContext,
            frozenset({"params"}),
            "caller",
            {"params": Merge.LAST, "block": Merge.FIRST, "reason": Merge.FIRST},
            stop="block",
        ),
        EventSpec("agent:after_tool_call", ToolResultContext, frozenset(), "caller"),
        EventSpec(
            "agent:tool_result_persist",
            ToolResultPersistContext,
            frozenset({"message"}),
            "caller",
            {"message": Merge.LAST},
        ),
        EventSpec("agent:before_compaction", CompactionContext, frozenset(), "caller"),
        EventSpec("agent:after_compaction", CompactionContext, frozenset(), "caller"),
        # OpenClaw's plugin hooks around an agent run, posted here by the agent runtime.
        *(
            EventSpec(
                key,
                context,
                frozenset(mutable),
                "caller",
                {field: Merge(how) for field, how in results.items()},
                stop=stop,
            )
            for key, context, mutable, results, stop in RUNTIME_EVENTS
        ),
        # OpenClaw fires its internal compaction events and the plugin hooks above for one
        # compaction, each with its own shape: an agent runtime posts both.
        EventSpec("session:compact:before", CompactBeforeContext, frozenset(), "caller"),
        EventSpec("session:compact:after", CompactAfterContext, frozenset(), "caller"),
        # elizaOS's runtime events with no OpenClaw name, posted by its gatewayd plugin
        # (integrations/elizaos/src/mapping.ts).
        *(
            EventSpec(f"agent:{action}", EnvironmentContext, frozenset(), "caller")
            for action in (
                "world_joined",
                "world_connected",
                "world_left",
                "room_joined",
                "room_left",
                "entity_joined",
                "entity_left",
                "entity_updated",
            )
        ),
        EventSpec("message:deleted", MessageDeletedContext, frozenset(), "caller"),
        EventSpec("gateway:startup", GatewayStartupContext, frozenset(), "nowhere"),
        EventSpec("gateway:shutdown", GatewayShutdownContext, frozenset(), "nowhere"),
        # Known to OpenClaw and Hermes hooks, not fired by this gateway.
        EventSpec(
            "message:transcribed",
            MessageEnrichedContext,
            frozenset(),
            "nowhere",
            fired=False,
            never="it transcribes no audio (OpenClaw's media understanding does)",
        ),
        EventSpec(
            "message:preprocessed",
            MessageEnrichedContext,
            frozenset(),
            "nowhere",
            fired=False,
            never="it does no media or link preprocessing (OpenClaw's does)",
        ),
        EventSpec(
            "session:patch",
            SessionPatchContext,
            frozenset(),
            "nowhere",
            fired=False,
            never="its sessions have no patchable settings (OpenClaw's sessions.patch does)",
        ),
        EventSpec(
            "session:auto-reset",
            SessionAutoResetContext,
            frozenset(),
            "nowhere",
            fired=False,
            never="it has no daily or idle reset policy: sessions end on /new and /reset",
        ),
        EventSpec("gateway:pre-restart", GatewayShutdownContext, frozenset(), "nowhere"),
        EventSpec(
            "agent:step",
            AgentStepContext,
            frozenset(),
            "nowhere",
            fired=False,
            never="model steps are the agent runtime's (Hermes fires it)",
        ),
    )
}
"""Every event the gateway knows, by key; ``command`` stands for every ``command:<name>``;
``fired`` says which the gateway fires."""


DECISION_EVENTS = frozenset(key for key, spec in EVENTS.items() if spec.results)
"""Events whose handlers may return a result the caller acts on."""

DIRECTIONS: Mapping[str, str] = {
    key: spec.direction for key, spec in EVENTS.items() if spec.direction is not None
}
"""``direction`` of each message event (:attr:`EventSpec.direction`), by key."""


def spec_for(key: str) -> EventSpec | None:
    """The spec of event ``type:action``: its own, else its type's family, else ``None``."""
    return EVENTS.get(key) or EVENTS.get(key.partition(":")[0])
