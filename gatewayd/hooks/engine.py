"""The dispatch engine: the one place where an event's handlers run and are counted.

:func:`run_plan` runs a plan (the ordered handlers :class:`~gatewayd.hooks.registry.HookRegistry`
chose for the event) and returns an awaitable :class:`~gatewayd.hooks.outcomes.DispatchReport`.
Every way into handlers ends here: the queue's workers, an event dispatched at once
(``message:sending``, ``gateway:shutdown``), a retry, ``gatewayd hooks test``. Failures are
logged and counted, never raised; a handler that blocks or cancels ends the chain.

How it runs: the plan is one generator (:func:`_run_plan`) stepped by hand, each async handler
awaited natively in it (``yield from``), so one that finishes without suspending costs its call
and its counters, no task, future or cancel scope. When no handler suspends the whole dispatch
runs in the call, which returns a future already holding the report. A handler that suspends
is taken out and run on alone under its timeout (:func:`_suspended`, where the cancel scope
starts), then the rest of the plan runs in a new generator. CPU time of the dispatch loop: 1.6
against 1.8 us an event with one no-op handler, 4.3 against 6.1 us with ten, against a
hand-stepped coroutine per handler.

An observer (:class:`DispatchObserver`: the trace, :class:`~gatewayd.hooks.trace.TraceRecorder`)
is told before and after each handler; an untraced dispatch has none and pays one test a
handler for it. Counters: every call counts on its hook (``HookStats.calls``); durations are
timed as :mod:`gatewayd.hooks.stats` says (``timed``: chosen per event by the registry).
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Generator
from time import perf_counter
from typing import Any, Protocol, cast

import anyio

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.outcomes import DispatchReport, HandlerOutcome, failure
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
from gatewayd.hooks.stats import RING, running

dispatching: contextvars.ContextVar[HookEvent | None] = contextvars.ContextVar(
    "gatewayd_dispatching", default=None
)
"""The event whose handlers the current task (or hook thread) runs: how the gateway knows an
event a handler posts is caused by another (``hooks.maxDepth``, waiting on one's own session)."""


class Runs(Protocol):
    """What the engine needs of its registry: the default timeout and the hook threads."""

    default_timeout_s: float

    def hook_threads(self) -> HookThreads: ...


class DispatchObserver(Protocol):
    """Told around each handler of a dispatch (tracing); its report is the dispatch's."""

    def before(self, handler: Handler, event: HookEvent) -> None: ...

    def after(
        self, handler: Handler, event: HookEvent, outcome: Outcome, seconds: float
    ) -> None: ...

    def report(self) -> DispatchReport: ...


def run_plan(
    owner: Runs,
    event: HookEvent,
    plan: tuple[Handler, ...],
    start: float,
    timed: bool,
    observer: DispatchObserver | None = None,
) -> Awaitable[DispatchReport]:
    """Run ``plan``'s handlers for ``event`` in order; await the result for the report
    (replies are in ``event.messages``). ``start``: ``perf_counter()`` now (the caller read
    it); ``timed``: whether async handlers that return without suspending are timed (the others
    always are); ``observer``: told around each handler, and then makes the report.

    Not a coroutine itself: one per event was 0.03-0.05 us of the loop's ~1.45 (one no-op
    handler). Callers await the result at once, as they would a coroutine.
    """
    token = dispatching.set(event)
    try:
        base_cfg = event.context.get("cfg", _NO_CFG)
        steps = _run_plan(owner, event, plan, 0, None, base_cfg, start, timed, observer)
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
    return _suspended(owner, event, plan, steps, yielded)


async def _suspended(
    owner: Runs,
    event: HookEvent,
    plan: tuple[Handler, ...],
    steps: _Steps,
    yielded: Any,
) -> DispatchReport:
    """The rest of a dispatch whose plan suspended: ``steps`` (:func:`_run_plan`) awaits a
    handler that gave the event loop ``yielded``.

    That handler is taken out and run on from here, alone: an async one under its timeout
    (:func:`finish_async`), a runner of another kind with its own. Then the rest of the plan
    runs in a new ``steps``, told where to start and what failed before. ``dispatching``
    names the event again while it runs, in the context it is awaited in.
    """
    token = dispatching.set(event)  # run_plan() reset it when the handler suspended
    try:
        while True:
            running.hook = None  # no hook's code is on the loop while it waits
            # Which handler suspended, since when, and what failed before it: the suspended
            # generator's own locals, so that the hot path keeps no record of its progress.
            where = _locals(steps)
            handler: Handler = where["handler"]
            observer: DispatchObserver | None = where["observer"]
            coro = _awaiting(steps)  # the handler's coroutine (or its runner's)
            try:
                if handler.kind is _ASYNC:
                    timeout_s = handler.timeout_s or owner.default_timeout_s
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
            if observer is not None:
                observer.after(handler, event, outcome, seconds)
            steps = _run_plan(
                owner,
                event,
                plan,
                where["ran"],
                failed,
                where["base_cfg"],
                t1,
                where["timed"],
                observer,
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
    owner: Runs,
    event: HookEvent,
    plan: tuple[Handler, ...],
    ran: int,
    failed: list[HandlerOutcome] | None,
    base_cfg: Any,
    t0: float,
    timed: bool,
    observer: DispatchObserver | None,
) -> Generator[Any, Any, None]:
    """Run the handlers of ``plan`` after the first ``ran``: the generator that
    :func:`run_plan` steps by hand (a coroutine for ``yield from``).

    Ends by returning ``None`` when every handler ran and none failed (and nothing observed
    it), else by raising :class:`_Finished` with the report. ``failed``: what failed before (a
    restart after a suspension); ``base_cfg``: the event's own ``cfg`` (``_NO_CFG``: none),
    each handler seeing its own hook's settings in its place (hooks/cfgview.py). ``t0``: when
    the run began; ``timed``: whether async handlers that return without suspending are timed.
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
        if observer is not None:
            observer.before(handler, event)
            t0 = perf_counter()
        if handler.kind is _ASYNC:
            # `slot.hook` names the hook whose code is on the loop (loop-lag monitor, output
            # capture); _suspended clears it while a handler is suspended.
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
                seconds = perf_counter() - t0
                failed = _raised(handler, event, exc, seconds, failed)
                if observer is not None:
                    observer.after(handler, event, _ERROR, seconds)
                t0 = perf_counter()
                continue
            stats = handler.stats
            if timed:  # HookStats.record() inlined
                t1 = perf_counter()
                seconds = t1 - t0
                n = stats.timed
                stats.durations[n & _MASK] = seconds
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
            if observer is not None:  # an observed dispatch is timed
                observer.after(handler, event, _OK, seconds)
            continue
        slot.hook = None
        if not timed:  # a thread or another process: timed from its own start
            t0 = perf_counter()
        timeout_s = handler.timeout_s or owner.default_timeout_s
        if handler.kind is _SYNC:
            outcome = yield from run_sync(  # type: ignore[misc]
                handler, event, timeout_s, owner.hook_threads()
            )
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
        if observer is not None:
            observer.after(handler, event, outcome, seconds)
    slot.hook = None
    if base_cfg is not _NO_CFG:
        context["cfg"] = base_cfg
    if observer is not None:
        raise _Finished(observer.report())
    if failed is None and ran == len(plan):
        return
    raise _Finished(_clean_report(ran) if failed is None else _failed_report(ran, failed))


# Marks the generator as a coroutine, in place, so that it may `yield from` native coroutines
# (types.coroutine returns the same function: mypy keeps its Generator type).
types.coroutine(_run_plan)


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


_ASYNC, _SYNC, _NODE = HandlerKind.ASYNC, HandlerKind.SYNC, HandlerKind.NODE
_OK, _ERROR = Outcome.OK, Outcome.ERROR
_MASK = RING - 1
_NO_CFG: Any = object()
_CLEAN_REPORTS = tuple(DispatchReport(n, 0, 0) for n in range(64))
_CLEAN_MAX = len(_CLEAN_REPORTS)
_Steps = Generator[Any, Any, None]
"""A running :func:`_run_plan`."""
_DONE: Any = object()
"""What ``next(steps, _DONE)`` returns when the plan ran to its end."""


def _locals(steps: _Steps) -> dict[str, Any]:
    """The local variables of a suspended :func:`_run_plan`."""
    frame = cast("types.GeneratorType[Any, Any, None]", steps).gi_frame
    assert frame is not None
    return frame.f_locals


def _awaiting(steps: _Steps) -> Any:
    """What a suspended :func:`_run_plan` awaits now: its handler's coroutine (or runner's)."""
    return cast("types.GeneratorType[Any, Any, None]", steps).gi_yieldfrom


def _failed_report(ran: int, failed: list[HandlerOutcome]) -> DispatchReport:
    """The report of ``ran`` handlers of which those in ``failed`` failed or timed out."""
    return DispatchReport(
        ran,
        sum(o.outcome == "error" for o in failed),
        sum(o.outcome == "timeout" for o in failed),
        tuple(failed),
    )


def _clean_report(ran: int) -> DispatchReport:
    """The report of ``ran`` handlers that all ran clean, built once (0.2 us a NamedTuple)."""
    return _CLEAN_REPORTS[ran] if ran < _CLEAN_MAX else DispatchReport(ran, 0, 0)


def _ready(report: DispatchReport) -> asyncio.Future[DispatchReport]:
    """A future already holding ``report`` (on the running loop): what :func:`run_plan`
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
    """How :func:`_run_plan` ends when a handler failed or halted the chain, or the run was
    observed: the dispatch's report."""

    def __init__(self, report: DispatchReport) -> None:
        super().__init__(report)
        self.report = report


__all__ = ["DispatchObserver", "Runs", "dispatching", "run_plan"]
