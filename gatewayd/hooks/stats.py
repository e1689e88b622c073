"""Per-hook counters, and which hook's code is running right now.

One hook's counters, :class:`HookStats`, are what ``gatewayd hooks list --daemon`` and the
metrics endpoint show for it: calls, errors, timeouts, loop stalls, the last error (time,
message, ``file:line``) and its recent durations. The durations are a fixed ring of
:data:`RING` floats per hook, written in place by the dispatcher: no allocation per call (the
ring is made when the registry first plans the hook's handlers, :meth:`HookStats.ring`, not
when the hook is loaded). A registry keeps one :class:`HookStats` per hook name across reloads
(a reload replaces the handlers, not their history).

Every call is counted (:attr:`HookStats.calls`); the durations (ring, percentiles, histogram)
are those of the calls *timed* (:attr:`HookStats.timed`). Every call that suspends, fails, runs
in a thread or another process is timed; so is an async handler's call that returns without
suspending, on an event dispatched :data:`BURST_S` or more after the one before (any key's), or
on the 1st, 9th, 17th... event of its key (one in :data:`SAMPLE_EVERY`): every call outside
bursts of events, one in :data:`SAMPLE_EVERY` of those within (``HookRegistry.dispatch``;
docs/design.md).

:data:`running` says which hook's code is on the event loop at this instant: the dispatcher
sets it around every step of an async handler (and clears it after), so the loop-lag monitor
(:mod:`gatewayd.looplag`) can name the hook that blocked the loop and the output capture
(:mod:`gatewayd.hooks.capture`) can tag what a hook logs or prints. Sync handlers run in worker
threads, where :data:`thread_hook` (a context variable, copied into the thread) names them.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from bisect import bisect_left, bisect_right
from contextvars import ContextVar
from typing import Any

from gatewayd.timestamps import iso_utc

RING = 256
"""Durations kept per hook for p50/p99 (a power of two: the index is masked)."""
_MASK = RING - 1
BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
"""Upper bounds (seconds) of the duration histogram buckets; one more bucket is ``+Inf``."""
SAMPLE_EVERY = 8
"""During a burst, an event key's handlers are timed on one event in this many (a power of
two: the event count is masked)."""
BURST_S = 0.001
"""Events dispatched less than this apart (seconds) are a burst, in which an event key's
handlers are timed on one event in :data:`SAMPLE_EVERY`."""


class HookStats:
    """One hook's counters; see the module docstring. Mutated on the event loop only."""

    __slots__ = (
        "buckets",
        "calls",
        "durations",
        "errors",
        "folded",
        "last_error",
        "stalls",
        "timed",
        "timeouts",
        "total_s",
    )

    def __init__(self) -> None:
        self.calls = 0
        """Every call of the hook's handlers."""
        self.timed = 0
        """The calls whose duration was measured (all of them outside bursts: see the module
        docstring); :attr:`durations` and the histogram hold theirs."""
        self.errors = 0
        self.timeouts = 0
        self.stalls = 0
        """Times the loop-lag monitor caught this hook blocking the event loop."""
        self.durations: list[float] = []
        """Seconds per timed call, ring-indexed by ``timed & (RING - 1)``: :data:`RING` slots
        from :meth:`ring` on, empty before (no call counted yet)."""
        self.last_error: tuple[float, str, str | None] | None = None
        """``(epoch seconds, message, file:line or None)`` of the latest error or timeout."""
        self.buckets = [0] * (len(BUCKETS) + 1)
        """Timed calls per duration bucket (not cumulative), of the first :attr:`folded`."""
        self.total_s = 0.0
        """Summed duration of the first :attr:`folded` timed calls."""
        self.folded = 0
        """Timed calls already counted into :attr:`buckets`: the ring is folded in each time
        it fills, so a histogram costs the hot path one test per timed call."""

    def ring(self) -> None:
        """Give :attr:`durations` its :data:`RING` slots, before a call is counted: the
        registry does for every handler it plans, since the engine writes the ring in place.

        A ring made with each hook's counters was 2 KB a hook: a fifth of the memory a cold
        load of 1,000 hooks takes (~500 page faults) and ~4 ms of its collections (256 items
        to traverse each), for hooks most of which may never see an event."""
        if not self.durations:
            self.durations = [0.0] * RING

    def record(self, seconds: float) -> None:
        """Count one call, timed: it took ``seconds`` (the dispatcher inlines this)."""
        if not self.durations:
            self.ring()
        self.durations[self.timed & _MASK] = seconds
        self.calls += 1
        self.timed += 1
        if not self.timed & _MASK:
            self.fold()

    def fold(self) -> None:
        """Count the ring's durations since the last fold into the histogram (it is full)."""
        buckets = self.buckets
        self.total_s += sum(self.durations)  # in ring order, as each call was counted
        self.folded = self.timed
        # The common case first: every call under the first bound (0.5 ms). max() and sum()
        # take ~5 us a fold, sorting and bisecting ~12 us: 0.02 against 0.05 us of each call.
        if max(self.durations) <= BUCKETS[0]:
            buckets[0] += RING
            return
        # Sorted once, then one bisect per bucket bound: a bisect per duration made the fold
        # ~0.15 us of every call's cost (~40 us each 256 calls).
        ring = sorted(self.durations)
        below = 0
        for i, bound in enumerate(BUCKETS):
            upto = bisect_right(ring, bound)  # durations <= bound, as bisect_left(BUCKETS, d)
            buckets[i] += upto - below
            below = upto
        buckets[-1] += len(ring) - below

    def histogram(self) -> tuple[list[int], float, int]:
        """``(cumulative bucket counts incl. +Inf, sum in seconds, count)`` of the timed
        calls (:attr:`timed`)."""
        buckets, total = list(self.buckets), self.total_s
        for i in range(self.folded, self.timed):
            seconds = self.durations[i & _MASK]
            buckets[bisect_left(BUCKETS, seconds)] += 1
            total += seconds
        cumulative, running_count = [], 0
        for n in buckets:
            running_count += n
            cumulative.append(running_count)
        return cumulative, total, self.timed

    def error(self, message: str, where: str | None) -> None:
        self.errors += 1
        self.last_error = (time.time(), message, where)

    def timeout(self, message: str) -> None:
        self.timeouts += 1
        self.last_error = (time.time(), message, None)

    def percentiles(self) -> tuple[float, float]:
        """``(p50, p99)`` of the recent timed calls, in milliseconds (0.0 before any)."""
        n = min(self.timed, RING)
        if not n:
            return 0.0, 0.0
        samples = sorted(self.durations[:n])
        return (
            round(samples[n // 2] * 1000, 3),
            round(samples[min(n - 1, (n * 99) // 100)] * 1000, 3),
        )

    def to_json(self) -> dict[str, Any]:
        """The counters as the ``hooks`` op shows them under ``stats``."""
        p50, p99 = self.percentiles()
        last = None
        if self.last_error is not None:
            at, message, where = self.last_error
            last = {
                "time": iso_utc(at),
                "message": message,
                "where": where,
            }
        return {
            "calls": self.calls,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "stalls": self.stalls,
            "lastError": last,
            "p50Ms": p50,
            "p99Ms": p99,
        }


def exc_text(exc: BaseException) -> str:
    """``str(exc)``, for an exception a hook raised: when its own ``__str__`` raises too, what
    that raised (left to propagate, it ended the dispatch of the event, or the whole load)."""
    try:
        return str(exc)
    except BaseException as inner:  # the hook's code: it may raise anything
        return f"<str() of the exception raised {type(inner).__name__}>"


def error_location(exc: BaseException, source: str | None) -> str | None:
    """``file:line`` where ``exc`` was raised: the innermost frame in the directory of
    ``source`` (the hook's handler file) when there is one, else the innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    if source:
        directory = os.path.dirname(os.path.realpath(source)) + os.sep
        inside = [f for f in frames if os.path.realpath(f.filename).startswith(directory)]
        if inside:
            return f"{inside[-1].filename}:{inside[-1].lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}"


class _Running:
    """The slot :data:`running` is: one attribute, so that setting it costs one store."""

    __slots__ = ("hook", "loop_thread")

    def __init__(self) -> None:
        self.hook: str | None = None
        self.loop_thread: int | None = None
        """``threading.get_ident()`` of the loop's thread (:func:`bind_loop_thread`)."""


running = _Running()
"""``running.hook``: the hook whose code is on the event loop now, else ``None``."""

thread_hook: ContextVar[str | None] = ContextVar("gatewayd_thread_hook", default=None)
"""The hook a worker thread runs (sync handlers; the context is copied into the thread)."""


def bind_loop_thread() -> None:
    """Say that the calling thread runs the event loop that dispatches hooks."""
    running.loop_thread = threading.get_ident()


def current_hook() -> str | None:
    """The hook whose code is running in this thread now, if any."""
    hook = thread_hook.get()
    if hook is not None:
        return hook
    loop_thread = running.loop_thread
    if loop_thread is None or loop_thread == threading.get_ident():
        return running.hook
    return None
