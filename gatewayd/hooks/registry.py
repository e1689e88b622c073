"""The hook registry: who handles which event key, and dispatching an event to them.

Two layers (docs/design.md, "Dispatch"):

* handlers registered in code, which no reload touches: a :class:`CodeHooks` table. A registry
  has its own unless it is given one; the daemon's registry reads the process-wide
  :data:`code_hooks` that :func:`register_hook` fills (a program registers its handlers at
  import time, before any gateway exists, so that one table is process-wide by nature);
* file hooks, which each load replaces as a whole with :meth:`HookRegistry.set_file_hooks`.

For an event ``type:action`` the plan is: handlers for ``type:action``, then ``type``, then ``*``;
within a key, code handlers first, then file hooks in load order; then sorted (stably) by
``priority``, lower first, so equal priorities keep that order. Background handlers form a plan
of their own, run after the event's reply (see the dispatcher). A handler may return a result
(:mod:`gatewayd.hooks.results`); one that blocks or cancels ends the chain.

Plans are immutable tuples cached per event key and rebuilt after any change, so a dispatch in
progress keeps the list it started with and a reload is one assignment: never half-built, never
empty in between.

When a file hook is scoped to an agent (``gatewayd/hooks/agents.py``: a workspace's hooks, a
subagent's, or a hook restricted with ``agents``), plans are cached per event key *and* per the
session's agent and subagent: a plan keeps the handlers that serve that scope, and drops a shared
hook that a scoped hook of the same plain name replaces there.
"""

from __future__ import annotations

import contextvars
import itertools
import weakref
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from time import perf_counter
from typing import Any

from gatewayd.hooks.agents import SHARED, AgentsSpec, HookScope, in_scope
from gatewayd.hooks.engine import dispatching, run_plan
from gatewayd.hooks.events import HookEvent, parse_event_key
from gatewayd.hooks.handlers import DEFAULT_PRIORITY, Handler, make_handler
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.runners import HookThreads
from gatewayd.hooks.stats import BURST_S, SAMPLE_EVERY, HookStats
from gatewayd.hooks.trace import TraceRecorder

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_HOOK_THREADS = 16


class HookLoopError(RuntimeError):
    """A handler caused an event it may not: past ``hooks.maxDepth``, or one it would wait on
    from its own session's dispatcher (a deadlock)."""


HOOK_PROCESS = "(a hook's process)"
"""What a request's cause chain names each event by that caused it from another process: a
command hook that runs ``gatewayd trigger`` sends only how deep it is (``depth``)."""

requested: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("requested", default=())
"""The cause chain of the request being served, when a hook's process sent it (its ``depth``):
the events of that request (a ``message``'s too) carry it, so they count toward
``hooks.maxDepth`` as the events a handler posts in the daemon do."""


def cause_chain(max_depth: int, waits_on: str | None, depth: int = 0) -> tuple[str, ...]:
    """The causal chain of an event posted now: the handling event's chain plus its key inside
    a handler; outside one, the request's (``depth`` events caused it, in a hook's process).
    Raises :class:`HookLoopError` when that chain reaches ``max_depth`` or when ``waits_on``
    (the session a caller will wait on) is the session of the event being handled."""
    parent = dispatching.get()
    if parent is None:
        chain = (HOOK_PROCESS,) * depth if depth > 0 else requested.get()
        if len(chain) >= max_depth:
            raise HookLoopError(
                f"hooks.maxDepth ({max_depth}) reached: a hook's process sent this request "
                f"{len(chain)} events deep (GATEWAYD_HOOK_DEPTH={len(chain)}); a command hook "
                "keeps causing the events it handles (check its gatewayd trigger/send calls)"
            )
        return chain
    chain = (*parent.chain, parent.key)
    if len(chain) >= max_depth:
        raise HookLoopError(
            f"hooks.maxDepth ({max_depth}) reached: {' -> '.join(chain)} -> ...; a hook keeps "
            "causing the events it handles (check its deliver/send/trigger calls)"
        )
    if waits_on is not None and waits_on == parent.session_key:
        raise HookLoopError(
            f"a handler of {parent.key} on session {waits_on!r} would wait on an event of the "
            "same session, which cannot run until the handler returns: pass wait=False"
        )
    return chain


class CodeHooks:
    """Handlers registered in code, by event key; the registries reading it see every change."""

    def __init__(self) -> None:
        self.by_key: dict[str, list[Handler]] = {}
        self._readers: weakref.WeakSet[HookRegistry] = weakref.WeakSet()

    def _changed(self) -> None:
        for registry in self._readers:
            registry._clear_plans()

    def register(
        self,
        key: str,
        fn: Callable[..., Any] | Handler,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> Handler:
        """Register ``fn`` for ``key`` (``type:action``, ``type`` or ``*``); survives reloads.

        Raises ``EventKeyError`` for an unknown event type and ``HandlerSignatureError`` for a
        callable that cannot take ``(event)`` or ``(event, ctx)``.
        """
        parse_event_key(key)
        if isinstance(fn, Handler):
            handler = fn
        else:
            hook = name or str(getattr(fn, "__qualname__", None) or repr(fn))
            handler = make_handler(fn, hook=hook, timeout_s=timeout_s, priority=priority)
        self.by_key.setdefault(key, []).append(handler)
        self._changed()
        return handler

    def unregister(self, key: str, fn: Callable[..., Any] | Handler) -> bool:
        """Remove a code handler registered for ``key``; False when it was not there."""
        handlers = self.by_key.get(key, [])
        for i, handler in enumerate(handlers):
            if handler is fn or handler.call is fn:
                del handlers[i]
                if not handlers:
                    del self.by_key[key]
                self._changed()
                return True
        return False


class HookRegistry:
    """Event key -> handlers, in two layers; see the module docstring."""

    def __init__(
        self,
        *,
        code: CodeHooks | None = None,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        hook_threads: int = DEFAULT_HOOK_THREADS,
    ) -> None:
        self.default_timeout_s = default_timeout_s
        self.code = code if code is not None else CodeHooks()
        """The code layer: this registry's own table, or a shared one such as
        :data:`code_hooks`."""
        self.code._readers.add(self)
        self._files: dict[str, tuple[Handler, ...]] = {}
        self._plans: dict[str, tuple[Handler, ...]] = {}
        self.event_counts: dict[str, int] = {}
        """Events dispatched, by ``type:action`` (the metrics endpoint sums them by type)."""
        self._last_start = _NEVER
        """When the latest dispatch began (``perf_counter``): whether events come in a burst."""
        self.hook_stats: dict[str, HookStats] = {}
        """File hooks' counters by hook name; they outlive reloads (:meth:`stats`)."""
        self._background: dict[str, tuple[Handler, ...]] = {}
        self._agents = AgentsSpec()
        self._scoped = False
        """True when any file hook serves only some agents: plans then depend on the session."""
        self._scoped_plans: dict[tuple[str, str, str | None], _Plans] = {}
        self._session_plans: dict[tuple[str, str], _Plans] = {}
        """``_scoped_plans`` by ``(key, session key)``: one lookup instead of parsing the
        session key (an event's plan is looked up 1 to 3 times; with the same cache for the
        event bases, ``gatewayd/eventbase.py``: -6 to -22 us of daemon CPU per ``message``)."""
        self.background = False
        """True when any handler runs in the background (the dispatcher then looks for them)."""
        self._hook_threads = hook_threads
        self._threads: HookThreads | None = None
        self.max_abandoned_threads = 16
        """``hooks.maxAbandonedThreads`` (set by the gateway on every load)."""

    def register(
        self,
        key: str,
        fn: Callable[..., Any] | Handler,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> Handler:
        """Register ``fn`` for ``key`` in the code layer (:meth:`CodeHooks.register`)."""
        return self.code.register(key, fn, name=name, timeout_s=timeout_s, priority=priority)

    def unregister(self, key: str, fn: Callable[..., Any] | Handler) -> bool:
        """Remove a handler from this registry's code layer; False when it was not there."""
        return self.code.unregister(key, fn)

    # -- the file layer -------------------------------------------------------------------

    def set_file_hooks(self, hooks: Iterable[tuple[Handler, Sequence[str]]]) -> None:
        """Replace every file hook at once with ``(handler, event keys)`` pairs in load order."""
        by_key: dict[str, list[Handler]] = {}
        for handler, keys in hooks:
            stats = self.hook_stats.get(handler.hook)
            if stats is None:  # a hook new here: the counters its handler was built with (unused)
                stats = self.hook_stats[handler.hook] = handler.stats
            handler.stats = stats
            for key in dict.fromkeys(keys):  # a key listed twice still runs the handler once
                by_key.setdefault(key, []).append(handler)
        files = {key: tuple(handlers) for key, handlers in by_key.items()}
        # Assignments with no await in between: a dispatch sees old or new.
        self._files = files
        self._scoped = any(h.scope is not SHARED for hs in files.values() for h in hs)
        self._clear_plans()
        self.background = any(h.background for hs in files.values() for h in hs) or any(
            h.background for hs in self.code.by_key.values() for h in hs
        )

    @property
    def agents(self) -> AgentsSpec:
        """The configured agents (set by every load): how a session key maps to a scope."""
        return self._agents

    @agents.setter
    def agents(self, agents: AgentsSpec) -> None:
        self._agents = agents
        self._scoped_plans, self._session_plans = {}, {}

    def _clear_plans(self) -> None:
        self._plans, self._background = {}, {}
        self._scoped_plans, self._session_plans = {}, {}

    # -- dispatch -------------------------------------------------------------------------

    def plan(
        self, event_type: str, key: str, session_key: str | None = None
    ) -> tuple[Handler, ...]:
        """The ordered handlers for an event on its reply path: specific, then type, then
        ``*`` (code before file hooks in each), then sorted by priority. ``session_key``: the
        plan for that session's agent (``None``: the default agent's)."""
        if self._scoped:
            return self._scoped_plan(event_type, key, session_key or "")[0]
        plan = self._plans.get(key)
        if plan is None:
            self._build_plans(event_type, key)
            plan = self._plans[key]
        return plan

    def stats(self) -> dict[str, HookStats]:
        """Every hook's counters by name: file hooks (also those a reload removed), then
        handlers registered in code."""
        found = dict(self.hook_stats)
        for handlers in self.code.by_key.values():
            for handler in handlers:
                found.setdefault(handler.hook, handler.stats)
        return found

    def background_plan(
        self, event_type: str, key: str, session_key: str | None = None
    ) -> tuple[Handler, ...]:
        """The event's background handlers, in the same order."""
        if self._scoped:
            return self._scoped_plan(event_type, key, session_key or "")[1]
        plan = self._background.get(key)
        if plan is None:
            self._build_plans(event_type, key)
            plan = self._background[key]
        return plan

    def subscribed(self, event_type: str, key: str, session_key: str | None = None) -> bool:
        """Whether any handler (reply path or background) runs for ``key`` of ``session_key``."""
        if self._scoped:
            plans = self._scoped_plan(event_type, key, session_key or "")
            return bool(plans[0] or plans[1])
        return bool(self.plan(event_type, key) or self.background_plan(event_type, key))

    def _ordered(self, event_type: str, key: str) -> list[Handler]:
        code = self.code.by_key
        chained = itertools.chain.from_iterable(
            (*code.get(k, ()), *self._files.get(k, ()))
            for k in dict.fromkeys((key, event_type, "*"))
        )
        ordered = sorted(chained, key=_priority)
        for handler in ordered:  # the dispatcher writes each one's durations ring in place
            handler.stats.ring()
        return ordered

    def count_events(self, key: str, n: int = 1) -> int:
        """Count ``n`` events of ``key`` in :attr:`event_counts`; returns its count. A key new
        past :data:`MAX_EVENT_KEYS` of them is counted under ``<type>:(other)``."""
        counts = self.event_counts
        count = counts.get(key)
        if count is None and len(counts) >= MAX_EVENT_KEYS:
            key = f"{key.partition(':')[0]}:{OTHER_ACTIONS}"
            count = counts.get(key)
        count = counts[key] = (count or 0) + n
        return count

    def cached_plans(self) -> int:
        """Event keys whose plans are cached now (at most :data:`MAX_EVENT_KEYS`)."""
        return len(self._plans)

    def _build_plans(self, event_type: str, key: str) -> None:
        if len(self._plans) >= MAX_EVENT_KEYS:  # keys come from clients: start afresh
            self._plans, self._background = {}, {}
        ordered = self._ordered(event_type, key)
        self._plans[key] = tuple(h for h in ordered if not h.background)
        self._background[key] = tuple(h for h in ordered if h.background)

    def _scoped_plan(self, event_type: str, key: str, session_key: str) -> _Plans:
        """``(reply path, background)`` plans of ``key`` for the session's agent scope."""
        plans = self._session_plans.get((key, session_key))
        if plans is not None:
            return plans
        if len(self._session_plans) >= _MAX_SCOPED_PLANS:  # session keys come from clients
            self._session_plans.clear()
        agent, serving, subagent = self._agents.scope(session_key)
        cache_key = (key, agent, subagent)
        plans = self._scoped_plans.get(cache_key)
        if plans is None:
            if len(self._scoped_plans) >= _MAX_SCOPED_PLANS:  # agent ids come from clients
                self._scoped_plans.clear()
            ordered = self._ordered(event_type, key)
            kept = in_scope(ordered, _scope, _replaceable, agent, serving, subagent)
            plans = (
                tuple(h for h in kept if not h.background),
                tuple(h for h in kept if h.background),
            )
            self._scoped_plans[cache_key] = plans
        self._session_plans[(key, session_key)] = plans
        return plans

    def handlers_of(self, hook: str) -> list[Handler]:
        """Every handler registered under the hook name ``hook`` (file hooks and code), once."""
        found: dict[int, Handler] = {}
        for handlers in (*self._files.values(), *self.code.by_key.values()):
            for handler in handlers:
                if handler.hook == hook:
                    found.setdefault(id(handler), handler)
        return list(found.values())

    def hook_threads(self) -> HookThreads:
        """The worker threads sync handlers run in (created on the event loop, on first use)."""
        if self._threads is None:
            self._threads = HookThreads(self._hook_threads, self.max_abandoned_threads)
        return self._threads

    def dispatch(
        self,
        event: HookEvent,
        only: Container[str] | None = None,
        *,
        handlers: Sequence[Handler] | None = None,
    ) -> Awaitable[DispatchReport]:
        """Run every handler for ``event`` in order (:func:`gatewayd.hooks.engine.run_plan`);
        failures are logged and counted, never raised. Await it for a :class:`DispatchReport`;
        replies are in ``event.messages``. A traced event (``event.trace``) is run with a
        :class:`~gatewayd.hooks.trace.TraceRecorder` watching: its report has every handler's
        record. ``only``: run just the handlers of these hook names (the queue's retries);
        ``handlers``: run these instead of the event's plan (``gatewayd hooks test``: one
        hook's handlers, whatever they subscribe to; not counted as an event of its key).
        """
        if handlers is not None:
            plan = tuple(handlers)
            for handler in plan:  # the engine writes each one's durations ring in place
                handler.stats.ring()
            n = 1
        else:
            key = f"{event.type}:{event.action}"
            if self._scoped:
                plan = self._scoped_plan(event.type, key, event.session_key)[event.background]
            elif event.background:
                plan = self.background_plan(event.type, key)
            else:
                plan = self._plans.get(key) or self.plan(event.type, key)
            counts = self.event_counts
            seen = counts.get(key)
            if seen is None:  # a new key: counted where the bound says
                n = self.count_events(key)
            else:
                n = counts[key] = seen + 1
        if only is not None:
            plan = tuple(h for h in plan if h.hook in only)
        if event.trace:  # every call timed, each handler's record kept
            return run_plan(self, event, plan, perf_counter(), True, TraceRecorder())
        # Whether the handlers that return without suspending are timed (hooks/stats.py): on
        # every event that comes BURST_S or more after the one before, else on the 1st, 9th,
        # 17th... of its key. A clock read and a ring write a handler were 0.115 us of a
        # no-op handler's ~0.35.
        start = perf_counter()
        timed = start - self._last_start >= BURST_S or n & _SAMPLE_MASK == 1
        self._last_start = start
        return run_plan(self, event, plan, start, timed)


def _priority(handler: Handler) -> int:
    return handler.priority


def _scope(handler: Handler) -> HookScope:
    return handler.scope


def _replaceable(handler: Handler) -> str | None:
    """A file hook's name, which an agent's hook of that name replaces; code handlers never."""
    return None if handler.source == "code" else handler.hook


_Plans = tuple[tuple[Handler, ...], tuple[Handler, ...]]
MAX_EVENT_KEYS = 4096
"""Event keys remembered with a plan (the cache then starts afresh) and with a count of their
own (``event_counts``; beyond, an event is counted under ``<type>:`` :data:`OTHER_ACTIONS`):
a client chooses actions, each one a key."""
OTHER_ACTIONS = "(other)"
_MAX_SCOPED_PLANS = 4096
"""Scoped plans kept before the cache starts afresh (a plan per event key, agent, subagent)."""
_SAMPLE_MASK = SAMPLE_EVERY - 1
_NEVER = float("-inf")


code_hooks = CodeHooks()
"""The process's code-registered handlers (:func:`register_hook`); the daemon's registry
runs them before its file hooks."""


def register_hook(
    key: str,
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    priority: int = DEFAULT_PRIORITY,
) -> Handler:
    """Register ``fn`` for ``key`` (``type:action``, ``type`` or ``*``) in the process's code
    layer; it runs in every gateway of this process and survives every reload.

    Raises ``EventKeyError`` for an unknown event type and ``HandlerSignatureError`` for a
    callable that cannot take ``(event)`` or ``(event, ctx)``.
    """
    return code_hooks.register(key, fn, name=name, timeout_s=timeout_s, priority=priority)


def unregister_hook(key: str, fn: Callable[..., Any] | Handler) -> bool:
    """Remove a handler registered with :func:`register_hook`; False when it was not there."""
    return code_hooks.unregister(key, fn)
