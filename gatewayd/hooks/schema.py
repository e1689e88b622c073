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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

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


# ``from`` is a Python keyword, so this one is declared in the functional form (which cannot
# inherit: the base fields are repeated).
MessageReceivedContext = TypedDict(
    "MessageReceivedContext",
    {
        "cfg": dict[str, Any],
        "workspaceDir": str,
        "from": str,
        "content": str,
        "channelId": str,
        "sessionKey": str,
        "timestamp": str,
    },
    total=False,
)
"""``message:received``: every inbound message, before anything else it causes."""


class MessageSentContext(BaseContext, total=False):
    """``message:sent``: each reply line after it was delivered."""

    to: str
    content: str
    channelId: str
    sessionKey: str
    success: bool
    timestamp: str


class CommandContext(BaseContext, total=False):
    """``command:<name>``: a message ``/name args``."""

    args: str
    senderId: str
    commandSource: str
    sessionEntry: SessionEntryJson | None
    sessionId: str | None
    sessionFile: str | None
    previousSessionEntry: SessionEntryJson | None


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
    """``gateway:shutdown``: on SIGTERM/SIGINT, before the queue drains."""

    reason: str


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

    @property
    def fields(self) -> tuple[str, ...]:
        """Its own context fields (besides ``cfg`` and ``workspaceDir``), in declared order."""
        return tuple(k for k in self.context.__annotations__ if k not in BASE_FIELDS)


BASE_FIELDS = ("cfg", "workspaceDir")

EVENTS: Mapping[str, EventSpec] = {
    spec.key: spec
    for spec in (
        EventSpec(
            "message:received",
            MessageReceivedContext,
            frozenset(),
            "sender",
        ),
        EventSpec(
            "message:sent",
            MessageSentContext,
            frozenset(),
            "nowhere",
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
        EventSpec("gateway:startup", GatewayStartupContext, frozenset(), "nowhere"),
        EventSpec("gateway:shutdown", GatewayShutdownContext, frozenset(), "nowhere"),
    )
}
"""Every event the gateway fires, by key; ``command`` stands for every ``command:<name>``."""


def spec_for(key: str) -> EventSpec | None:
    """The spec of event ``type:action``: its own, else its type's family, else ``None``."""
    return EVENTS.get(key) or EVENTS.get(key.partition(":")[0])
