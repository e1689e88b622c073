"""A generation: the JS/TS hooks of one load, the worker that runs them, and one call of a hook.

:class:`NodeHook` is one JS/TS hook to load (a single-file hook's entries are each a
:class:`NodeSubscription`); :class:`Generation` holds the hooks of one load with the worker that
runs them and makes their calls (:meth:`Generation.call`): each within its timeout, a worker
being pinged for a hang waited out first (``NodeRuntime.check_hung``), the worker's replacement
waited for after a crash. :func:`apply_reply` applies what a JS handler did to the Python event.
:class:`EarlyLoad` is a load started ahead of the reload that will ask for it. The runtime
(``runtime.py``) makes generations, activates, retires and restarts them.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import orjson
import structlog

from gatewayd.hooks.events import HookEvent, encode_event
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.node.imports import import_hooks
from gatewayd.hooks.node.resolve import TS_SUFFIXES, NodeBinary
from gatewayd.hooks.node.worker import CallTimeout, NodeWorker, WorkerGone
from gatewayd.hooks.results import merge_result
from gatewayd.hooks.runners import Outcome, report_timeout

if TYPE_CHECKING:
    from gatewayd.hooks.node.runtime import NodeRuntime

hook_log = structlog.get_logger("gatewayd.hooks")
"""``hook.error`` / ``hook.bad_result`` lines, as Python handlers' are logged."""


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
    generation: Generation | None = None
    """Set by :meth:`NodeRuntime.load` when the import succeeded."""
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
    return _report_error(hook, event, "the hook was never loaded into a node worker", handler)


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


def _report_error(
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


def _report_timeout(
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


class Generation:
    """The hooks of one load and the worker that runs them (replaced if it dies)."""

    def __init__(self, runtime: NodeRuntime, binary: NodeBinary, hooks: Sequence[NodeHook]):
        self.runtime = runtime
        self.binary = binary
        self.hooks = list(hooks)
        self.asked = tuple(hooks)
        """Every hook its load asked for, the ones whose import failed too (:attr:`hooks` keeps
        those that loaded)."""
        self.tag = str(runtime._sequence)
        """In the URL of each of its modules (``worker.mjs``): its module graph is its own."""
        self.typescript = any(h.file.suffix in TS_SUFFIXES for h in hooks)
        self.in_flight = 0
        self.gone: set[NodeHook] = set()
        """The hooks whose import failed only because the worker died under it."""
        self.stuck: set[NodeHook] = set()
        """The hooks whose last import overran, each its own fault."""
        self.ids: list[str] = []
        """Its hooks' ids in its worker (taken when loaded: a hook object may be loaded again)."""
        self.worker: NodeWorker | None = None
        self.ready = anyio.Event()
        self.retired = False
        self.superseded = False
        self.restarts = 0

    async def import_into(self, worker: NodeWorker) -> dict[NodeHook, str]:
        """Import every hook into ``worker`` (``imports.import_hooks``); returns hook -> error
        for the failures. :attr:`gone` is left holding those that failed only because the
        worker died or was killed for another hook, :attr:`stuck` those whose import overran."""
        done = await import_hooks(worker, self.hooks, self.tag, self.runtime.load_timeout_s)
        self.gone, self.stuck = done.gone, done.stuck
        return done.errors

    async def call(
        self,
        hook: NodeHook,
        event: HookEvent,
        timeout_s: float,
        target: bytes,
        counted: Handler | None,
    ) -> Outcome:
        """Run ``hook`` (``target``: its id in the worker, or its events-map entry's, for a
        single-file hook) on ``event`` in this generation's worker within ``timeout_s``;
        failures are counted on ``counted``.

        The usual case (a live worker) costs no timer and no cancel scope: the worker fails the
        reply future with :class:`CallTimeout` when the time is up.
        """
        left = timeout_s
        worker = self.worker
        if worker is None or worker.suspect is not None or worker.exit_reason is not None:
            found = await self._wait_for_worker(timeout_s)
            if isinstance(found, str):
                return _report_error(hook, event, found, counted)
            if found is None:
                return _report_timeout(hook, event, timeout_s, counted)
            worker, left = found
        cfg = event.context.get("cfg")
        cfg_json = None if cfg is None else hook.cfg_json(cfg)
        event_json, opaque = encode_call_event(event, cfg_json is not None)
        self.in_flight += 1
        try:
            reply = await worker.call(target, event_json, cfg_json, left)
        except WorkerGone as exc:
            return _report_error(hook, event, str(exc), counted)
        except CallTimeout:
            self.runtime.check_hung(worker, hook, timeout_s)
            return _report_timeout(hook, event, timeout_s, counted)
        except ValueError as exc:  # too large to send
            return _report_error(hook, event, str(exc), counted)
        finally:
            self.in_flight -= 1
        if reply.get("ok") is not True:
            return _report_error(hook, event, str(reply.get("error")), counted)
        if len(reply) > 2:  # more than {id, ok}: something changed
            apply_reply(event, reply, opaque, hook.name)
        return _OK

    async def _wait_for_worker(self, timeout_s: float) -> tuple[NodeWorker, float] | str | None:
        """A live worker once there is one (its replacement, after a crash), with what is left
        of ``timeout_s``; the reason when there will be none; None when ``timeout_s`` ran out
        first.

        Also when a call ran past its timeout there and the worker may be hung: sent to it now,
        a call would fail with it when it is killed (the next hook of the same event, most
        often); it waits for the verdict, and for the new worker.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        with anyio.move_on_after(timeout_s):
            if not self.ready.is_set():
                await self.ready.wait()
            worker = self.worker
            if worker is not None and worker.suspect is not None:
                await worker.suspect.wait()
            while worker is not None and worker.doomed and not self.retired:
                # It died a moment ago and its replacement is on the way: wait for it.
                await anyio.sleep(0.01)
                if not self.ready.is_set():
                    await self.ready.wait()
                worker = self.worker
            if worker is None or not worker.alive:
                reason = worker.exit_reason if worker is not None else None
                return reason or "no node worker is running its hooks"
            return worker, max(0.0, deadline - loop.time())
        return None


_OK: Final = Outcome.OK


@dataclass(eq=False)
class EarlyLoad:
    """A load started by :meth:`NodeRuntime.reimport`, ahead of the build that will ask for it."""

    binary: NodeBinary
    hooks: list[NodeHook]
    """Stand-ins for the hooks of the current generation's load (the build makes its own)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    generation: Generation | None = None
    errors: dict[NodeHook, str] = field(default_factory=dict)

    def adopt(
        self, binary: NodeBinary, hooks: Sequence[NodeHook]
    ) -> tuple[Generation, dict[NodeHook, str]] | None:
        """This load as the load of ``hooks``, or None when they are not what it imported (a
        hook added, removed or changed in name, file, export or kind, or another Node)."""
        generation = self.generation
        if (
            generation is None
            or binary != self.binary
            or [h.wire() for h in hooks] != [h.wire() for h in self.hooks]
        ):
            return None
        own = dict(zip(self.hooks, hooks, strict=True))
        for stand_in, hook in own.items():
            hook.id, hook.generation = stand_in.id, stand_in.generation
            hook.events_found, hook.description = stand_in.events_found, stand_in.description
        generation.hooks = [own[h] for h in generation.hooks]
        generation.asked = tuple(hooks)
        return generation, {own[h]: reason for h, reason in self.errors.items()}
