"""One JS/TS hook: what it is, how its call reaches its worker, and what its reply does.

:class:`NodeHook` is one JS/TS hook to load (a single-file hook's entries are each a
:class:`NodeSubscription`); once loaded, its calls go to its generation (``generation.py``),
which this module knows only as :class:`HookCalls`. :func:`encode_call_event` is the event as a
call sends it, :func:`apply_reply` applies what a JS handler did to the Python event, and
:func:`report_error` / :func:`report_timeout_of` log and count a call's failure as a Python
handler's are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import orjson
import structlog

from gatewayd.hooks.events import HookEvent, encode_event
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.node.worker import NodeWorker
from gatewayd.hooks.results import merge_result
from gatewayd.hooks.runners import Outcome, report_timeout

hook_log = structlog.get_logger("gatewayd.hooks")
"""``hook.error`` / ``hook.bad_result`` lines, as Python handlers' are logged."""


class HookCalls(Protocol):
    """What runs a loaded hook's calls: its generation."""

    worker: NodeWorker | None

    async def call(
        self,
        hook: NodeHook,
        event: HookEvent,
        timeout_s: float,
        target: bytes,
        counted: Handler | None,
    ) -> Outcome: ...


@dataclass(eq=False)
class NodeHook:
    """One JS/TS hook to load: its name, handler file and export, and where it is loaded."""

    name: str
    file: Path
    export: str | None = None
    hook_key: str = ""
    """Its key in ``hooks.entries`` (default: ``name``)."""
    handler: Handler | None = None
    """The registry's handler for it (its counters); one is made when none is given."""
    generation: HookCalls | None = None
    """Its load's generation (``generation.Generation``), set by ``NodeRuntime.load`` when the
    import succeeded."""
    id: str = ""
    events: bool = False
    """A single-file hook: the module's default export is ``defineHook({events})``, each of
    whose entries is called through a :class:`NodeSubscription`."""
    events_found: tuple[str, ...] = ()
    """The events map's names, as the worker's import found them."""
    description: str = ""
    _cfg: object = field(default=None, repr=False)
    _cfg_json: bytes | None = field(default=None, repr=False)

    def cfg_json(self, cfg: object) -> bytes | None:
        """``cfg`` (this hook's view of the config, the same object event after event until a
        reload) as JSON, encoded once; None when it is not JSON."""
        if cfg is not self._cfg:
            try:
                self._cfg_json = orjson.dumps(cfg, option=_OPTIONS | orjson.OPT_NON_STR_KEYS)
            except TypeError:
                self._cfg_json = None
            self._cfg = cfg
        return self._cfg_json

    @property
    def wire_id(self) -> bytes:
        """:attr:`id` as the worker's call lines name it."""
        return self.id.encode()

    def wire(self) -> dict[str, Any]:
        """What the worker is told to import (its ``load`` op, less the id and tag)."""
        return {
            "name": self.name,
            "file": str(self.file),
            "export": self.export,
            "events": self.events,
        }

    def __post_init__(self) -> None:
        self.hook_key = self.hook_key or self.name
        if self.handler is None:
            self.handler = Handler(
                hook=self.name, hook_key=self.hook_key, kind=HandlerKind.NODE, node=self
            )

    def run(self, event: HookEvent, timeout_s: float) -> Coroutine[Any, Any, Outcome]:
        """Run the handler on ``event`` (the registry's entry point for a ``node`` handler):
        the call's own coroutine, no frame around it."""
        if self.generation is None:
            return _never_loaded(self, event, self.handler)
        return self.generation.call(self, event, timeout_s, self.wire_id, self.handler)

    def counted_on(self, handler: Handler) -> NodeSubscription:
        """What runs this hook with its failures counted on ``handler`` (``hooks test``)."""
        return NodeSubscription(self, -1, handler)


@dataclass(eq=False)
class NodeSubscription:
    """One entry of a JS/TS single-file hook's events map: what its registry handler runs."""

    hook: NodeHook
    entry: int
    """The entry's position in the events map (``hook.events_found``): the worker knows it as
    hook ``<hook id>.<entry>``."""
    handler: Handler | None = None

    def run(self, event: HookEvent, timeout_s: float) -> Coroutine[Any, Any, Outcome]:
        """Call the entry of the hook's events map with ``(event, ctx)`` (entry -1: the hook's
        own handler, :meth:`NodeHook.counted_on`)."""
        hook = self.hook
        if hook.generation is None:
            return _never_loaded(hook, event, self.handler)
        target = hook.wire_id if self.entry < 0 else b"%s.%d" % (hook.wire_id, self.entry)
        return hook.generation.call(hook, event, timeout_s, target, self.handler)

    def counted_on(self, handler: Handler) -> NodeSubscription:
        """This entry with its failures counted on ``handler`` (``hooks test``)."""
        return NodeSubscription(self.hook, self.entry, handler)


async def _never_loaded(hook: NodeHook, event: HookEvent, handler: Handler | None) -> Outcome:
    return report_error(hook, event, "the hook was never loaded into a node worker", handler)


_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""A dataclass or a datetime is refused, as ``json`` refuses it (then sent as a placeholder)."""
_NO_OPAQUE: Final = frozenset[str]()


def encode_call_event(event: HookEvent, without_cfg: bool) -> tuple[bytes, frozenset[str]]:
    """``event`` as the worker's call takes it (``encode_event``'s form, the timestamp in epoch
    milliseconds) and the context keys sent as placeholders (see ``encode_event``), its
    ``context.cfg`` left out when ``without_cfg``.

    orjson, 2.7 against 35 us for ``encode_event``'s ``json.dumps`` (timeit, this machine
    loaded); a context orjson refuses (a value JSON has no form for, a key that is no string, an
    integer past 64 bits, a lone surrogate) is encoded by ``encode_event``, as it always was. A
    float that is not finite is sent as ``null`` either way (as ``JSON.stringify`` writes it).
    """
    context = event.context
    if without_cfg and "cfg" in context:
        context = context.copy()
        del context["cfg"]
    wire = {
        "type": event.type,
        "action": event.action,
        "sessionKey": event.session_key,
        "timestamp": event.created * 1000,
        "messages": event.messages,
        "context": context,
    }
    try:
        return orjson.dumps(wire, option=_OPTIONS), _NO_OPAQUE
    except TypeError:
        text, opaque = encode_event(event, without_cfg=without_cfg)
        if "NaN" in text or "Infinity" in text:  # json's extension, which JSON.parse refuses
            text = json.dumps(json.loads(text, parse_constant=lambda _: None))
        return text.encode(), opaque


_AT = re.compile(r"\(at (.+:\d+):\d+\)$")


def report_error(
    hook: NodeHook, event: HookEvent, error: str, handler: Handler | None = None
) -> Outcome:
    """Log and count a JS handler's failure as ``runners.report_failure`` does a Python one's
    (on ``handler``, default the hook's); ``where`` is the ``file:line`` the worker found in the
    JS stack, if any."""
    handler = handler or hook.handler
    assert handler is not None
    match = _AT.search(error)
    where = match[1] if match else None
    handler.stats.error(error, where)
    hook_log.error(
        "hook.error",
        hook=hook.name,
        event_key=event.key,
        session_key=event.session_key,
        error=error,
        where=where or str(hook.file),
    )
    return Outcome.ERROR


def report_timeout_of(
    hook: NodeHook, event: HookEvent, timeout_s: float, handler: Handler | None
) -> Outcome:
    handler = handler or hook.handler
    assert handler is not None
    return report_timeout(handler, event, timeout_s)


def apply_reply(
    event: HookEvent, reply: dict[str, Any], opaque: frozenset[str], hook: str = ""
) -> None:
    """Apply what JS handler ``hook`` did: its ``messages``, the context keys it changed, and
    what it returned (merged as a Python handler's return value is, ``results.merge_result``).

    A changed list or dict is updated in place, so a reference the emitter holds (e.g. to
    ``bootstrapFiles``) sees the change as it does with a Python handler.
    """
    messages = reply.get("messages")
    if isinstance(messages, list):
        event.messages[:] = [str(m) for m in messages]
    context = event.context
    for key, value in (reply.get("changed") or {}).items():
        if key in opaque:
            continue
        old = context.get(key)
        if isinstance(old, list) and isinstance(value, list):
            old[:] = value
        elif isinstance(old, dict) and isinstance(value, dict):
            old.clear()
            old.update(value)
        else:
            context[key] = value
    for key in reply.get("removed") or ():
        if key not in opaque:
            context.pop(key, None)
    if (problem := reply.get("resultError")) is not None:
        hook_log.warning(
            "hook.bad_result",
            hook=hook,
            event_key=event.key,
            error=str(problem),
            fix="return undefined or a plain object of the event's result fields",
        )
        return
    merge_result(event, hook, reply.get("result"))
