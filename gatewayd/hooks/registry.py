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

import asyncio
import contextvars
import itertools
import types
import weakref
from collections.abc import Awaitable, Callable, Container, Generator, Iterable, Sequence
from time import perf_counter
from typing import Any, NamedTuple, cast

import anyio

from gatewayd.hooks.agents import SHARED, AgentsSpec, HookScope, in_scope
from gatewayd.hooks.events import HookEvent, parse_event_key
from gatewayd.hooks.handlers import DEFAULT_PRIORITY, Handler, HandlerKind, make_handler
from gatewayd.hooks.results import merge_result
from gatewayd.hooks.runners import (
    HookThreads,
    Outcome,
    finish_async,
    report_failure,
    resume,
    run_command,
    run_sync,
)
from gatewayd.hooks.stats import BURST_S, RING, SAMPLE_EVERY, HookStats, running
from gatewayd.hooks.trace import HandlerOutcome, failure, run_traced

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_HOOK_THREADS = 16

dispatching: contextvars.ContextVar[HookEvent | None] = contextvars.ContextVar(
    "gatewayd_dispatching", default=None
)
"""The event whose handlers the current task (or hook thread) runs: how the gateway knows an
event a handler posts is caused by another (``hooks.maxDepth``, waiting on one's own session)."""


class HookLoopError(RuntimeError):
    """A handler caused an event it may not: past ``hooks.maxDepth``, or one it would wait on
    from its own session's dispatcher (a deadlock)."""


def cause_chain(max_depth: int, waits_on: str | None) -> tuple[str, ...]:
    """The causal chain of an event posted now: empty outside a handler, else the handling
    event's chain plus its key. Raises :class:`HookLoopError` when that chain reaches
    ``max_depth`` or when ``waits_on`` (the session a caller will wait on) is the session of
    the event being handled."""
    parent = dispatching.get()
    if parent is None:
        return ()
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


class DispatchReport(NamedTuple):
    """What one dispatch did: handlers run, and how many of them failed or timed out."""

    handlers: int
    errors: int
    timeouts: int
    outcomes: tuple[HandlerOutcome, ...] = ()
    """Per-handler records (:class:`~gatewayd.hooks.trace.HandlerOutcome`), in plan order: of
    every handler when the event is traced, else only of those that failed or timed out."""


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

    specialise = True
    """Run a plan whose handlers are all async with :func:`_run_async_plan` (the tests turn
    it off to run the same plans through :func:`_run_plan` alone)."""

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
        self._async_plans: dict[str, dict[str, _AsyncPlan]] = {}
        """The reply-path plans (unscoped) whose handlers are all async, by event type and
        action, with each handler's fields taken out once (:func:`_entries`): what
        :func:`_run_async_plan` runs. By type, then action: no ``type:action`` string is built
        to find one (that and its hash were 0.1 us of every event's ~0.9)."""
        self._event_counts: dict[str, int] = {}
        """:attr:`event_counts` but for the runs of the all-async plans since they were folded
        (:meth:`_fold`)."""
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
        session key (an event's plan is looked up 1 to 3 times; with the same cache for
        ``Gateway.event_base``: -6 to -22 us of daemon CPU per ``message``)."""
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

    @property
    def event_counts(self) -> dict[str, int]:
        """Events dispatched, by ``type:action`` (the metrics endpoint sums them by type)."""
        self._fold()
        return self._event_counts

    def _clear_plans(self) -> None:
        self._fold()  # a dispatch under way counted its plan's calls when it began
        self._plans, self._background, self._async_plans = {}, {}, {}
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
        handlers registered in code; with every call counted (:meth:`_fold`)."""
        for registry in (self, *self.code._readers):  # code handlers may be in others' plans
            registry._fold()
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

    def _fold(self) -> None:
        """Count into :attr:`event_counts` and its handlers' counters the events each
        all-async plan ran since the last fold (:class:`_AsyncPlan`)."""
        counts = self._event_counts
        for actions in self._async_plans.values():
            for compiled in actions.values():
                if n := compiled.runs - compiled.folded:
                    compiled.folded = compiled.runs
                    counts[compiled.key] = counts.get(compiled.key, 0) + n
                    for _, _, _, _, stats, _ in compiled.entries:
                        stats.calls += n

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

    def _build_plans(self, event_type: str, key: str) -> None:
        ordered = self._ordered(event_type, key)
        plan = self._plans[key] = tuple(h for h in ordered if not h.background)
        self._background[key] = tuple(h for h in ordered if h.background)
        key_type, _, action = key.partition(":")
        if (
            self.specialise
            and key_type == event_type
            and all(h.kind is _ASYNC and h.call is not None for h in plan)
        ):
            counted = self._event_counts.get(key, 0)
            self._async_plans.setdefault(event_type, {})[action] = _AsyncPlan(plan, key, counted)

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
        self, event: HookEvent, only: Container[str] | None = None
    ) -> Awaitable[DispatchReport]:
        """Run every handler for ``event`` in order; failures are logged and counted, never
        raised. Await it for a :class:`DispatchReport`; replies are in ``event.messages``.
        ``only``: run just the handlers of these hook names (the trigger queue's retries).

        This is the hot path (one call per event): the plan runs in one generator,
        :func:`_run_plan` (or :func:`_run_async_plan` when its handlers are all async),
        stepped here by hand. When no handler suspends, the whole dispatch runs in this call,
        which returns a future already holding the report; a handler that suspends makes it
        return a coroutine that runs the rest (:meth:`_suspended`, where its timeout starts).
        Not a coroutine itself: one per event was 0.03-0.05 us of the loop's ~1.45 (one
        no-op handler). Callers await the
        result at once, as they would a coroutine.
        """
        actions = self._async_plans.get(event.type)  # only ever filled while not scoped
        compiled = actions.get(event.action) if actions is not None else None
        if compiled is not None and not (event.background or event.trace) and only is None:
            # The event counted, and one call of each handler, ahead (_AsyncPlan).
            compiled.runs = n = compiled.runs + 1
            plan, entries = compiled.handlers, compiled.entries
        else:
            key = f"{event.type}:{event.action}"
            entries = None
            if self._scoped:
                plan = self._scoped_plan(event.type, key, event.session_key)[event.background]
            elif event.background:
                plan = self.background_plan(event.type, key)
            else:
                plan = self._plans.get(key) or self.plan(event.type, key)
            if only is not None:
                plan = tuple(h for h in plan if h.hook in only)
            counts = self._event_counts
            n = counts[key] = counts.get(key, 0) + 1
            if event.trace:
                return self._traced(event, plan)
        # Whether the handlers that return without suspending are timed (hooks/stats.py): on
        # every event that comes BURST_S or more after the one before, else on the 1st, 9th,
        # 17th... of its key. A clock read and a ring write a handler were 0.115 us of a
        # no-op handler's ~0.35.
        start = perf_counter()
        timed = start - self._last_start >= BURST_S or n & _SAMPLE_MASK == 1
        self._last_start = start
        token = dispatching.set(event)
        try:
            base_cfg = event.context.get("cfg", _NO_CFG)
            if entries is not None:
                steps = _run_async_plan(event, entries, base_cfg, start, timed)
            else:
                steps = _run_plan(self, event, plan, 0, None, base_cfg, start, timed)
            # next() with a default: a generator that returns None raises no StopIteration
            # (0.11 against 0.27 us for send() and catching it, timeit).
            yielded = next(steps, _DONE)
        except _Finished as finished:
            return _ready(finished.report)
        finally:
            # Reset before returning even when a handler suspended: _suspended sets it again
            # for the rest of the dispatch, in the context it is awaited in.
            dispatching.reset(token)
        if yielded is _DONE:
            try:
                ready = _CLEAN_READY[len(plan)]  # a list's item: 0.02 us less than dict.get()
            except IndexError:  # 64 handlers or more
                ready = None
            return ready if ready is not None else _ready(_clean_report(len(plan)))
        if entries is not None:  # _suspended and _run_plan count the handler and the rest
            _uncount(entries, _locals(steps)["ran"] - 1)
        return self._suspended(event, plan, steps, yielded)

    async def _traced(self, event: HookEvent, plan: tuple[Handler, ...]) -> DispatchReport:
        """The dispatch of an event traced (``event.trace``): every handler's outcome."""
        token = dispatching.set(event)
        try:
            traced = await run_traced(self, event, plan)
        finally:
            dispatching.reset(token)
        return DispatchReport(
            len(traced),
            sum(o.outcome == "error" for o in traced),
            sum(o.outcome == "timeout" for o in traced),
            tuple(traced),
        )

    async def _suspended(
        self,
        event: HookEvent,
        plan: tuple[Handler, ...],
        steps: _Steps,
        yielded: Any,
    ) -> DispatchReport:
        """The rest of a dispatch whose plan suspended: ``steps`` (:func:`_run_plan`) awaits a
        handler that gave the event loop ``yielded``.

        That handler is taken out and run on from here, alone: an async one under its timeout
        (:func:`finish_async`, as every async handler that suspends always was), a runner of
        another kind with its own. Then the rest of the plan runs in a new ``steps``, which is
        told where to start and what failed before. ``dispatching`` names the event again
        while it runs, in the context it is awaited in.
        """
        token = dispatching.set(event)  # dispatch() reset it when the handler suspended
        try:
            while True:
                running.hook = None  # no hook's code is on the loop while it waits
                # Which handler suspended, since when, and what failed before it: the suspended
                # generator's own locals, so that the hot path keeps no record of its progress.
                where = _locals(steps)
                handler: Handler = where["handler"]
                coro = _awaiting(steps)  # the handler's coroutine (or its runner's)
                try:
                    if handler.kind is _ASYNC:
                        timeout_s = handler.timeout_s or self.default_timeout_s
                        outcome = await finish_async(handler, event, coro, yielded, timeout_s)
                    else:
                        outcome = await resume(coro, yielded, None)
                finally:
                    steps.close()  # it awaits a coroutine that has ended: nothing more runs
                # Timed from when it began; in a run whose other calls are not timed, from the
                # start of the run (docs/design.md): plus at most the time of the calls before it
                # that returned at once.
                t1 = perf_counter()
                seconds = t1 - where["t0"]
                handler.stats.record(seconds)
                failed = where["failed"]
                if outcome is not _OK:
                    failed = [*(failed or ()), failure(handler, outcome, seconds)]
                steps = _run_plan(
                    self, event, plan, where["ran"], failed, where["base_cfg"], t1, where["timed"]
                )
                try:
                    yielded = next(steps, _DONE)
                except _Finished as finished:
                    return finished.report
                if yielded is _DONE:
                    return _clean_report(len(plan))
        finally:
            dispatching.reset(token)


def _run_plan(
    registry: HookRegistry,
    event: HookEvent,
    plan: tuple[Handler, ...],
    ran: int,
    failed: list[HandlerOutcome] | None,
    base_cfg: Any,
    t0: float,
    timed: bool,
) -> Generator[Any, Any, None]:
    """Run the handlers of ``plan`` after the first ``ran``: the generator that
    :meth:`HookRegistry.dispatch` steps by hand (a coroutine for ``yield from``).

    Each handler is awaited natively (``yield from``) in this one generator, so one that
    finishes without suspending costs its call and its counters, no step of its own; one that
    suspends is taken out by ``dispatch`` (:meth:`HookRegistry._suspended`). Against a
    hand-stepped coroutine per handler, CPU time of the dispatch loop: 1.6 against 1.8 us an
    event with one no-op handler, 4.3 against 6.1 us with ten.

    Ends by returning ``None`` when every handler ran and none failed, else by raising
    :class:`_Finished` with the report. ``failed``: what failed before (a restart after a
    timeout); ``base_cfg``: the event's own ``cfg`` (``_NO_CFG``: none), each handler seeing
    its own hook's settings in its place (hooks/cfgview.py). ``t0``: when the run began;
    ``timed``: whether async handlers that return without suspending are timed (else only
    counted: :meth:`HookRegistry.dispatch`).
    """
    slot = running
    context = event.context
    # One clock read per timed handler: a handler starts when the previous one ended, and t0
    # is read again after anything slow between two handlers (a result merged, a failure).
    coro: Any = None
    for handler in plan[ran:] if ran else plan:
        if event.halted:  # a handler blocked or cancelled: lower priorities do not run
            break
        ran += 1
        if base_cfg is not _NO_CFG:
            context["cfg"] = base_cfg if handler.cfg is None else handler.cfg
        if handler.kind is _ASYNC:
            # `slot.hook` names the hook whose code is on the loop (loop-lag monitor, output
            # capture); dispatch clears it while a handler is suspended.
            slot.hook = handler.hook
            try:
                if handler.takes_ctx:
                    coro = handler.call(event, handler.ctx)  # type: ignore[misc]
                else:
                    coro = handler.call(event)  # type: ignore[misc]
                value = yield from coro
            except BaseException as exc:
                slot.hook = None
                # Not the handler's failure, and the end of this generator: a cancellation from
                # outside, being closed, or closing a coroutine that will not end (it ignored
                # GeneratorExit: RuntimeError). get_cancelled_exc_class() costs ~1 us.
                if isinstance(exc, (GeneratorExit, anyio.get_cancelled_exc_class())) or getattr(
                    coro, "cr_suspended", False
                ):
                    raise
                failed = _raised(handler, event, exc, perf_counter() - t0, failed)
                t0 = perf_counter()
                continue
            stats = handler.stats
            if timed:  # HookStats.record() inlined
                t1 = perf_counter()
                n = stats.timed
                stats.durations[n & _MASK] = t1 - t0
                stats.timed = n = n + 1
                stats.calls += 1
                if not n & _MASK:
                    stats.fold()
                t0 = t1
            else:
                stats.calls += 1
            if value is not None:
                slot.hook = None
                merge_result(event, handler.hook, value)
                t0 = perf_counter()
            continue
        slot.hook = None
        if not timed:  # a thread or another process: timed from its own start
            t0 = perf_counter()
        timeout_s = handler.timeout_s or registry.default_timeout_s
        if handler.kind is _SYNC:
            threads = registry.hook_threads()
            outcome = yield from run_sync(handler, event, timeout_s, threads)  # type: ignore[misc]
        elif handler.kind is _NODE:
            outcome = yield from handler.node.run(event, timeout_s)
        else:
            outcome = yield from run_command(handler, event, timeout_s)  # type: ignore[misc]
        t1 = perf_counter()
        seconds = t1 - t0
        handler.stats.record(seconds)
        t0 = t1
        if outcome is not _OK:
            failed = failed or []
            failed.append(failure(handler, outcome, seconds))
            t0 = perf_counter()
    slot.hook = None
    if base_cfg is not _NO_CFG:
        context["cfg"] = base_cfg
    if failed is None and ran == len(plan):
        return
    raise _Finished.after(ran, failed)


def _run_async_plan(
    event: HookEvent, entries: tuple[_Entry, ...], base_cfg: Any, t0: float, timed: bool
) -> Generator[Any, Any, None]:
    """:func:`_run_plan` from its start for a plan whose handlers are all async: the same
    steps (and the same locals, which :meth:`HookRegistry._suspended` reads when a handler
    suspends; the rest of the plan then runs in :func:`_run_plan`), with each handler's
    fields unpacked from its entry (:func:`_entries`) instead of read off the handler, and no
    test of its kind.

    CPU time of the dispatch loop against :func:`_run_plan`: 4.4-4.5 -> 4.0-4.2 us an event
    with ten no-op handlers, 1.57 -> 1.51-1.55 us with one.
    """
    slot = running
    context = event.context
    failed: list[HandlerOutcome] | None = None
    ran = 0
    coro: Any = None
    for handler, call, ctx, hook, stats, cfg in entries:
        if event.halted:  # a handler blocked or cancelled: lower priorities do not run
            _uncount(entries, ran)
            break
        ran += 1
        if base_cfg is not _NO_CFG:
            context["cfg"] = base_cfg if cfg is None else cfg
        slot.hook = hook
        try:
            coro = call(event) if ctx is _NO_CTX else call(event, ctx)
            value = yield from coro
        except BaseException as exc:
            slot.hook = None
            if isinstance(exc, GeneratorExit) or getattr(coro, "cr_suspended", False):
                raise  # closed by _suspended, which counted this call and the rest
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                _uncount(entries, ran - 1)  # neither this call nor the rest is counted
                raise  # not the handler's failure (see _run_plan)
            stats.calls -= 1  # counted by _raised
            failed = _raised(handler, event, exc, perf_counter() - t0, failed)
            t0 = perf_counter()
            continue
        if timed:  # HookStats.record() inlined, but for the call counted ahead
            t1 = perf_counter()
            n = stats.timed
            stats.durations[n & _MASK] = t1 - t0
            stats.timed = n = n + 1
            if not n & _MASK:
                stats.fold()
            t0 = t1
        if value is not None:
            slot.hook = None
            merge_result(event, hook, value)
            t0 = perf_counter()
    slot.hook = None
    if base_cfg is not _NO_CFG:
        context["cfg"] = base_cfg
    if failed is None and ran == len(entries):
        return
    raise _Finished.after(ran, failed)


# Marks the generators as coroutines, in place, so that they may `yield from` native coroutines
# (types.coroutine returns the same function: mypy keeps its Generator type).
types.coroutine(_run_plan)
types.coroutine(_run_async_plan)


_Entry = tuple[Handler, Callable[..., Any], Any, str, HookStats, Any]
"""A handler of an all-async plan as :func:`_run_async_plan` unpacks it: the handler, its
callable, its ctx (``_NO_CTX``: it takes none), hook name, counters and cfg view."""


class _AsyncPlan:
    """An all-async plan of an event key, as :func:`_run_async_plan` runs it.

    Its events and its handlers' calls are counted once per event, not once per call and in
    a dict: ``runs`` counts the events dispatched with it, each one call of every handler of
    the plan, and :meth:`HookRegistry._fold` adds them to ``HookRegistry.event_counts`` and
    to the handlers' counters (``HookStats.calls``) when those are read
    (:meth:`HookRegistry.stats`) and before the plan is dropped. A call that does not happen
    (the chain halted, a cancellation) is taken back off the counters (:func:`_uncount`); so
    is one that is counted elsewhere too (``HookStats.record``: a failure, a suspension).
    Counting each call was 0.025-0.03 us a handler, the event in the dict 0.08-0.1 us: with
    one / ten no-op handlers, 1.49 -> 1.37 / 3.25 -> 2.90 us of CPU an event.
    """

    __slots__ = ("entries", "folded", "handlers", "key", "runs")

    def __init__(self, handlers: tuple[Handler, ...], key: str, counted: int) -> None:
        self.handlers = handlers
        self.entries = _entries(handlers)
        self.key = key
        self.runs = counted
        """The events of its key: ``counted`` (those before it) plus those it dispatched;
        the dispatch times a burst's calls on the 1st, 9th, 17th... of them."""
        self.folded = counted
        """``runs`` already counted in ``event_counts`` and the handlers' counters."""


def _uncount(entries: tuple[_Entry, ...], start: int) -> None:
    """Take back the calls of ``entries[start:]`` that a run counted ahead (:class:`_AsyncPlan`)."""
    for _, _, _, _, stats, _ in entries[start:]:
        stats.calls -= 1


def _entries(plan: tuple[Handler, ...]) -> tuple[_Entry, ...]:
    """The entries of an all-async plan (its handlers' fields do not change once planned:
    a load builds new handlers, and a new plan)."""
    return tuple(
        (
            h,
            cast("Callable[..., Any]", h.call),
            h.ctx if h.takes_ctx else _NO_CTX,
            h.hook,
            h.stats,
            h.cfg,
        )
        for h in plan
    )


def _raised(
    handler: Handler,
    event: HookEvent,
    exc: BaseException,
    seconds: float,
    failed: list[HandlerOutcome] | None,
) -> list[HandlerOutcome]:
    """Log and count the exception of an async handler that ran ``seconds``; ``failed`` with
    its record added."""
    report_failure(handler, event, exc)
    handler.stats.record(seconds)
    failed = failed or []
    failed.append(failure(handler, _ERROR, seconds))
    return failed


def _failed_report(ran: int, failed: list[HandlerOutcome]) -> DispatchReport:
    return DispatchReport(
        ran,
        sum(o.outcome == "error" for o in failed),
        sum(o.outcome == "timeout" for o in failed),
        tuple(failed),
    )


def _priority(handler: Handler) -> int:
    return handler.priority


def _scope(handler: Handler) -> HookScope:
    return handler.scope


def _replaceable(handler: Handler) -> str | None:
    """A file hook's name, which an agent's hook of that name replaces; code handlers never."""
    return None if handler.source == "code" else handler.hook


_Plans = tuple[tuple[Handler, ...], tuple[Handler, ...]]
_MAX_SCOPED_PLANS = 4096
"""Scoped plans kept before the cache starts afresh (a plan per event key, agent, subagent)."""


_ASYNC, _SYNC, _NODE = HandlerKind.ASYNC, HandlerKind.SYNC, HandlerKind.NODE
_OK, _ERROR, _TIMEOUT = Outcome.OK, Outcome.ERROR, Outcome.TIMEOUT
_MASK = RING - 1
_SAMPLE_MASK = SAMPLE_EVERY - 1
_NEVER = float("-inf")
_NO_CFG: Any = object()
_NO_CTX: Any = object()
_CLEAN_REPORTS = tuple(DispatchReport(n, 0, 0) for n in range(64))
_Steps = Generator[Any, Any, None]
"""A running :func:`_run_plan`."""


def _locals(steps: _Steps) -> dict[str, Any]:
    """The local variables of a suspended :func:`_run_plan`."""
    frame = cast("types.GeneratorType[Any, Any, None]", steps).gi_frame
    assert frame is not None
    return frame.f_locals


def _awaiting(steps: _Steps) -> Any:
    """What a suspended :func:`_run_plan` awaits now: its handler's coroutine (or runner's)."""
    return cast("types.GeneratorType[Any, Any, None]", steps).gi_yieldfrom


_DONE: Any = object()
"""What ``next(steps, _DONE)`` returns when the plan ran to its end."""


_CLEAN_MAX = len(_CLEAN_REPORTS)


def _clean_report(ran: int) -> DispatchReport:
    """The report of ``ran`` handlers that all ran clean, built once (0.2 us a NamedTuple)."""
    return _CLEAN_REPORTS[ran] if ran < _CLEAN_MAX else DispatchReport(ran, 0, 0)


def _ready(report: DispatchReport) -> asyncio.Future[DispatchReport]:
    """A future already holding ``report`` (on the running loop): what :meth:`dispatch`
    returns when no handler suspended. Those of clean reports are made once and awaited again
    and again (:data:`_CLEAN_READY`): the future of a loop that has ended returns its result
    as well, as a done future checks no loop."""
    ready = asyncio.get_running_loop().create_future()
    ready.set_result(report)
    n = report.handlers
    if n < _CLEAN_MAX and report == _CLEAN_REPORTS[n] and _CLEAN_READY[n] is None:
        _CLEAN_READY[n] = ready
    return ready


_CLEAN_READY: list[asyncio.Future[DispatchReport] | None] = [None] * _CLEAN_MAX
"""Done futures of the clean reports, by handlers run (:func:`_ready`); ``None`` until the
first is needed."""


class _Finished(Exception):
    """How :func:`_run_plan` (and :func:`_run_async_plan`) ends when a handler failed or
    halted the chain."""

    def __init__(self, report: DispatchReport) -> None:
        super().__init__(report)
        self.report = report

    @classmethod
    def after(cls, ran: int, failed: list[HandlerOutcome] | None) -> _Finished:
        """The end of a plan stopped after ``ran`` handlers (halted) or with failures."""
        return cls(_clean_report(ran) if failed is None else _failed_report(ran, failed))


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
