"""The hook event: what every handler receives (DESIGN.md section 4).

An event is ``type:action`` for one session. Handlers append reply lines to ``messages`` and may
read or mutate ``context``. ``to_json()`` / ``from_json()`` are the wire form used by the control
channel and command hooks: ``{id, type, action, sessionKey, timestamp, messages, context}``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Generic

from typing_extensions import TypeVar

from gatewayd.timestamps import iso_utc

EVENT_TYPES: Final = frozenset({"command", "session", "agent", "gateway", "message"})
"""The event types a gateway emits; an event key's part before ``:`` must be one of these."""

_KEY_RE = re.compile(r"^(?P<type>[a-z]+)(?::(?P<action>[A-Za-z0-9_.:-]+))?$")

MAX_ACTION: Final = 200
"""Characters in an event's action (``command:<name>``: the command's name). Each event key is
remembered (a dispatch plan, counters): a client must not be able to make them huge."""
MAX_SESSION_KEY: Final = 1024
"""Characters in a session key a client sends (plans, lanes and the session table key on it)."""


class EventKeyError(ValueError):
    """An event key or type that no gateway emits."""


ContextT = TypeVar("ContextT", default=dict[str, Any])
"""An event's context type: a ``TypedDict`` of :mod:`gatewayd.hooks.schema`; a
bare ``HookEvent`` is ``HookEvent[dict[str, Any]]``."""


def _empty_context() -> Any:
    return {}


@dataclass(slots=True, eq=False)
class HookEvent(Generic[ContextT]):
    """One event. ``messages`` is the reply handlers build; ``context`` carries event details.

    Annotate a handler with the event's context type to have it checked, e.g.
    ``async def handler(event: HookEvent[CommandContext]) -> None``; a bare ``HookEvent`` has a
    ``dict[str, Any]`` context. At run time ``context`` is always a plain ``dict``.
    """

    type: str
    action: str
    session_key: str
    created: float = field(default_factory=time.time)
    """When the event was created, in epoch seconds: :attr:`timestamp` as a number."""
    messages: list[str] = field(default_factory=list)
    context: ContextT = field(default_factory=_empty_context)
    trace: bool = False
    """Record what every handler did (``HookRegistry.dispatch`` returns it): debugging only."""
    result: dict[str, Any] | None = None
    """What the handlers returned, merged (:mod:`gatewayd.hooks.results`); ``None``: nothing."""
    halted: bool = False
    """A handler blocked or cancelled: the rest of the chain did not run."""
    chain: tuple[str, ...] = ()
    """The events that caused this one through handlers (deliver / send / trigger), outermost
    first; bounded by ``hooks.maxDepth``."""
    background: bool = False
    """This dispatch runs the event's background handlers (after its reply was sent)."""
    id: str = ""
    """Stable across redeliveries (given by the trigger queue's journal): de-duplicate on it."""
    _timestamp: datetime | None = field(default=None, init=False, repr=False)

    @property
    def timestamp(self) -> datetime:
        """When the event was created (an aware UTC ``datetime``).

        Built from :attr:`created` when first read: most events are never asked, and
        ``datetime.now(UTC)`` was 0.21 of the 0.49 us it took to create one (``time.time()``
        0.06 us; timeit)."""
        stamp = self._timestamp
        if stamp is None:
            stamp = self._timestamp = datetime.fromtimestamp(self.created, UTC)
        return stamp

    @timestamp.setter
    def timestamp(self, value: datetime) -> None:
        self._timestamp = value
        self.created = value.timestamp()

    @property
    def key(self) -> str:
        """``type:action``, the most specific dispatch key."""
        return f"{self.type}:{self.action}"

    def to_json(self) -> dict[str, Any]:
        """The wire form (DESIGN.md section 4); ``context`` must be JSON-serialisable."""
        return {
            "id": self.id,
            "type": self.type,
            "action": self.action,
            "sessionKey": self.session_key,
            "timestamp": iso_utc(self.timestamp),
            "messages": list(self.messages),
            "context": self.context,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HookEvent:
        """Rebuild an event from its wire form (validates the type)."""
        event = create_hook_event(
            data["type"], data["action"], data["sessionKey"], dict(data.get("context") or {})
        )
        if ts := data.get("timestamp"):
            event.timestamp = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        event.messages = [str(m) for m in data.get("messages") or []]
        event.id = str(data.get("id") or "")
        return event


def encode_event(
    event: HookEvent, *, without_cfg: bool = False, default: Callable[[Any], Any] | None = None
) -> tuple[str, frozenset[str]]:
    """The event's wire JSON and the context keys whose values are not JSON, sent as
    ``[TypeName]`` placeholders (a JS handler's changes to them are never merged back).

    ``without_cfg``: leave ``context.cfg`` out (the Node worker gets it apart). ``default``:
    what ``json.dumps`` makes of a value it cannot encode (``str`` for command hooks); a value
    it still cannot send, one that contains itself or is nested deeper than the encoder goes
    (``RecursionError``), is a placeholder too. Such a value, put in the context by one
    handler, once ended the event's dispatch at the next JS or command handler.
    """
    wire = event.to_json()
    if without_cfg:
        wire["context"] = {k: v for k, v in event.context.items() if k != "cfg"}
    try:
        return json.dumps(wire, default=default), frozenset()
    except (TypeError, ValueError, RecursionError):
        pass
    context: dict[str, Any] = {}
    opaque: set[str] = set()
    for key, value in wire["context"].items():
        try:
            json.dumps(value, default=default)
            context[key] = value
        except (TypeError, ValueError, RecursionError):
            opaque.add(key)
            context[key] = f"[{type(value).__name__}]"
    wire["context"] = context
    return json.dumps(wire, default=str), frozenset(opaque)


def create_hook_event(
    type: str,
    action: str,
    session_key: str,
    context: dict[str, Any] | None = None,
) -> HookEvent:
    """Build an event stamped now (UTC). Raises :class:`EventKeyError` for an unknown type."""
    if type not in EVENT_TYPES:
        raise EventKeyError(
            f"unknown event type {type!r}: expected one of {', '.join(sorted(EVENT_TYPES))}"
        )
    if not action:
        raise EventKeyError(f"event {type!r} needs an action, as in '{type}:<action>'")
    if len(action) > MAX_ACTION:
        raise EventKeyError(_too_long(f"{type}:{action}", len(action)))
    return HookEvent(type=type, action=action, session_key=session_key, context=context or {})


def parse_event_key(key: str) -> tuple[str, str | None]:
    """Split ``type:action`` (or ``type``, or ``*``) into its parts, validating the type.

    Raises :class:`EventKeyError` naming the key and the known types; this is what turns a
    misspelled ``comand:new`` into a reported problem instead of a hook that never fires.
    """
    if key == "*":
        return "*", None
    match = _KEY_RE.match(key)
    if not match:
        raise EventKeyError(f"malformed event key {_cut(key)}: expected 'type' or 'type:action'")
    etype, action = match["type"], match["action"]
    if action is not None and len(action) > MAX_ACTION:
        raise EventKeyError(_too_long(key, len(action)))
    if etype not in EVENT_TYPES:
        raise EventKeyError(
            f"unknown event type {etype!r} in {_cut(key)}: "
            f"expected one of {', '.join(sorted(EVENT_TYPES))} or '*'"
        )
    return etype, action


def _cut(key: str) -> str:
    """``key`` as an error message shows it: at most 60 characters of it (it comes from a
    client, and may be a megabyte)."""
    return repr(key) if len(key) <= 60 else f"{key[:60]!r}... ({len(key)} characters)"


def _too_long(key: str, length: int) -> str:
    return f"event key {_cut(key)} has an action of {length} characters; the limit is {MAX_ACTION}"
