"""The shapes of what gatewayd answers (docs/design.md section 3), for type checkers.

At run time every reply is a plain ``dict`` decoded from JSON; these ``TypedDict`` s say which
keys it has, so ``reply["messages"]`` is checked by mypy and pyright. The result fields of the
decision events typed here are the event schema's (:mod:`gatewayd.hooks.schema`):
``tests/client`` checks that they match it, so the two cannot drift.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, NotRequired, TypedDict, TypeVar

DecisionEvent = Literal[
    "agent:before_start",
    "agent:before_tool_call",
    "agent:tool_result_persist",
    "message:received",
    "message:sending",
]
"""The decision events whose merged result this client types (:meth:`Client.decide
<gatewayd.client.Client.decide>`); the daemon's ``hello`` lists every decision event it serves
(``decisions``), and ``decide`` takes the others too, with a plain ``dict`` result."""


# -- each decision's merged result (hooks merge them as the event schema says) ---------------------


class InboundDecision(TypedDict, total=False):
    """``message:received``: block the message, or rewrite its text."""

    content: str
    block: bool
    reason: str


class OutboundDecision(TypedDict, total=False):
    """``message:sending``: cancel the reply, or rewrite it."""

    content: str
    cancel: bool
    reason: str


class StartDecision(TypedDict, total=False):
    """``agent:before_start``: context to prepend (joined in order), a system prompt, another
    model or provider."""

    prependContext: str
    systemPrompt: str
    modelOverride: str
    providerOverride: str


class ToolCallDecision(TypedDict, total=False):
    """``agent:before_tool_call``: block the call, or change its parameters."""

    params: dict[str, Any]
    block: bool
    reason: str


class PersistDecision(TypedDict, total=False):
    """``agent:tool_result_persist``: store another message than the tool's result."""

    message: Any


R = TypeVar("R")


class Decision(TypedDict, Generic[R]):
    """The reply to a decision event: the handlers' merged ``result``, their lines, and
    ``timedOut`` when ``hooks.decisionTimeoutMs`` passed first (``result`` is then what the
    handlers that finished returned)."""

    result: R
    messages: list[str]
    timedOut: NotRequired[bool]
    trace: NotRequired[list[TraceEntry]]


# -- the ops' replies -------------------------------------------------------------------------


class Limits(TypedDict):
    maxLineBytes: int
    """The longest request line, newline excluded."""
    maxInFlight: int
    """How many requests one connection may have sent and not yet been answered."""


class DaemonInfo(TypedDict):
    name: str
    version: str


class Hello(TypedDict):
    """The handshake: what the daemon serves."""

    protocol: int
    minProtocol: int
    daemon: DaemonInfo
    ops: list[str]
    events: list[str]
    decisions: list[str]
    limits: Limits


class TraceEntry(TypedDict, total=False):
    """One event of a trace: each handler's outcome (``trace: true``)."""

    event: str
    handlers: list[dict[str, Any]]
    reason: str


class MessageReply(TypedDict):
    """The reply to ``message``: the lines ``message:sending`` let through, as rewritten."""

    messages: list[str]
    command: str | None
    blocked: NotRequired[bool]
    reason: NotRequired[str]
    trace: NotRequired[list[TraceEntry]]


class TriggerReply(TypedDict):
    """The reply to a waited ``trigger``."""

    messages: list[str]
    result: NotRequired[dict[str, Any]]
    timedOut: NotRequired[bool]
    trace: NotRequired[list[TraceEntry]]


class Queued(TypedDict):
    """The reply to ``trigger`` with ``wait: false``: the event is durable and queued."""

    queued: Literal[True]


class OutboundMessage(TypedDict):
    """What a hook sent a subscribed session later (``ctx.gateway.send``)."""

    event: Literal["message"]
    sessionKey: str
    content: str


class ReloadReply(TypedDict):
    result: dict[str, Any]
    """``{discovered, eligible, registered, skipped, failed, statuses}``."""
    outcome: Literal["ok", "partial"]
    changes: dict[str, Any] | None


class HooksReply(TypedDict):
    view: Literal["daemon"]
    stateDir: str
    workspaceDir: str
    agents: dict[str, Any]
    hooks: list[dict[str, Any]]
    codeHooks: list[dict[str, Any]]


class TestReply(TypedDict):
    hook: str
    event: str
    messages: list[str]
    trace: list[TraceEntry]
    passed: bool


class BootstrapFile(TypedDict):
    name: str
    path: str
    content: str
    missing: bool


class EventsReply(TypedDict, total=False):
    """``events``: ``events`` and ``journal`` (list), ``event`` (show), ``retried`` (retry),
    ``purged`` (purge)."""

    events: list[dict[str, Any]]
    journal: dict[str, Any]
    event: dict[str, Any]
    retried: list[str]
    purged: int
