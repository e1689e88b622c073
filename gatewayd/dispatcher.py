"""The dispatcher: the workers that run the trigger queue's events through the hook registry.

:class:`Dispatcher` runs ``gateway.queue.concurrency`` workers. A worker owns one session's lane
at a time and takes up to :data:`~gatewayd.lanes.BATCH` of its events in one step, so one
session's events run strictly in post order while other sessions run on other workers: a slow
hook delays only its own session. Workers step through a batch with no task, future or cancel
scope per event (the engine adds a cancel scope only for a handler that actually suspends), and
yield to the loop once per batch.

Counters: ``depth`` (queued, not yet taken), ``peak``, ``accepted``, ``dispatched``, handler
``errors`` and ``timeouts``, and the dispatch latency from post to the end of the dispatch,
sampled on the first event of each batch (the one that waited longest), over the last
:data:`LATENCY_SAMPLES` samples.

The queue (:class:`~gatewayd.triggers.TriggerQueue`) owns
the lanes and their bounds; this module owns what happens to an event once a worker took it:
the dispatch, retries and dead letters (:mod:`gatewayd.retries`), background handlers, the
journal's done marks, the shutdown drain and the counters ``status`` reports.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskStatus

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.registry import HookRegistry
from gatewayd.retries import NO_RETRIES, RetryPolicy, settle
from gatewayd.tickets import Ticket
from gatewayd.triggers import TriggerQueue

__all__ = ["LATENCY_SAMPLES", "YIELD_EVERY_S", "Dispatcher"]

log = structlog.get_logger("gatewayd.queue")

YIELD_EVERY_S = 0.0005
"""A worker running handlers that never suspend yields to the loop at least this often."""
LATENCY_SAMPLES = 1024  # a power of two: the ring index is masked, not taken modulo


class Dispatcher:
    """The workers that take events off a :class:`TriggerQueue` and run the registry."""

    def __init__(
        self,
        queue: TriggerQueue,
        registry: HookRegistry,
        concurrency: int = 8,
        retry_policy: RetryPolicy = NO_RETRIES,
    ) -> None:
        if concurrency < 1:
            raise ValueError("gateway.queue.concurrency must be at least 1")
        self.queue = queue
        self.registry = registry
        self.concurrency = concurrency
        self.retry_policy = retry_policy
        """Hook name -> (retries, first backoff in seconds); the gateway sets it per load."""
        self.retried = 0
        self.dead_lettered = 0
        self.dispatched = 0
        self.errors = 0
        self.timeouts = 0
        self.left = 0
        """Events accepted but not dispatched because the drain deadline passed."""
        self._latency = [0.0] * LATENCY_SAMPLES
        self._latency_n = 0
        self._latency_max = 0.0
        self._tg: anyio.abc.TaskGroup | None = None
        """The workers' task group, while :meth:`run` runs."""
        self._draining = False
        self._drained = anyio.Event()
        """Set by the last worker to go idle once :meth:`drain` began."""
        self._stopped = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the workers until :meth:`drain` (or cancellation) stops them."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for _ in range(self.concurrency):
                    tg.start_soon(self._worker)
                task_status.started()
        finally:
            self._stopped.set()

    async def _worker(self) -> None:
        queue = self.queue
        take = queue._take
        release = queue._release
        registry = self.registry
        dispatch = registry.dispatch
        journal = queue.journal
        done_mark = journal.done
        started_mark = journal.started
        redelivered = journal.redelivered  # told when their dispatch starts (empty: no call)
        waiting = queue.bounds.waiting  # session key -> its posters waiting for room
        unhold = queue.bounds.remove
        latency = self._latency
        mask = LATENCY_SAMPLES - 1
        checkpoint = anyio.lowlevel.checkpoint
        loop = asyncio.get_running_loop()
        last_yield = perf_counter()
        while True:
            got = take()
            if got is None:
                if self._draining and not queue._lanes and not queue.depth:
                    self._drained.set()
                wake = loop.create_future()
                queue._idle.append(wake)
                await wake
                last_yield = perf_counter()
                continue
            key, batch = got
            # Per event: the dispatch and a counter. Everything else is once per batch; the
            # latency is sampled on the batch's first event (the one that waited longest).
            done = errors = timeouts = freed = 0
            try:
                for event, ticket, _, seq, only in batch:
                    if seq and redelivered:
                        started_mark(seq)
                    try:
                        report = await dispatch(event, only)
                    except Exception as exc:  # the registry never raises; a bug if it does
                        log.exception("queue.dispatch_crashed", event_key=event.key, error=str(exc))
                        report = DispatchReport(0, 1, 0)
                    # An event with background handlers is done once those ran (its
                    # background item carries the same seq), not after its reply path.
                    later = (
                        registry.background
                        and not event.background
                        and registry.background_plan(event.type, event.key, event.session_key)
                    )
                    if report[3]:  # handler outcomes: failures (all, if traced) -> retries
                        report = await self._settle(event, seq, report, finish=not later)
                    elif seq and not later:
                        done_mark(seq)
                    done += 1
                    if report[1] or report[2]:
                        errors += report[1]
                        timeouts += report[2]
                    if ticket is not None:
                        ticket._finish(report)
                    if later:
                        self._post_background(event, ticket, seq)
                    if waiting and key in waiting:  # its posters get room event by event
                        unhold(key, done - freed)
                        freed = done
                    if done == 1:
                        elapsed = perf_counter() - batch[0][2]
                        latency[self._latency_n & mask] = elapsed
                        self._latency_n += 1
                        if elapsed > self._latency_max:
                            self._latency_max = elapsed
            except BaseException:
                # Cancelled by the shutdown deadline: the rest of this batch is left, counted.
                for _, ticket, *_ in batch[done:]:
                    if ticket is not None:
                        ticket._finish(None)
                self.left += len(batch) - done
                raise
            finally:
                unhold(key, len(batch) - freed)  # the session's events the batch held
                self.dispatched += done
                self.errors += errors
                self.timeouts += timeouts
            release(key)
            now = perf_counter()
            if now - last_yield > YIELD_EVERY_S:
                await checkpoint()
                last_yield = perf_counter()

    async def _settle(
        self, event: HookEvent, seq: int, report: DispatchReport, *, finish: bool = True
    ) -> DispatchReport:
        """Retry the failed handlers (their hooks' ``retries``); dead-letter those that never
        succeed; tell the journal (``finish``: that the event is done, when it has no
        background handlers still to run). Returns the report with the retries' failures."""
        outcome = await settle(self.registry, event, report, self.retry_policy)
        self.retried += outcome.retried
        journal = self.queue.journal
        if outcome.dead:
            self.dead_lettered += 1
            journal.dead(event, seq, outcome.dead)
        elif seq and finish:
            journal.done(seq)
        return outcome.report

    def _post_background(self, event: HookEvent, ticket: Ticket | None, seq: int) -> None:
        """Queue ``event``'s background handlers in its session's lane: at once for an event
        nobody waits on, else when its poster has sent the reply (:meth:`Ticket.release`).
        The queue's bound is not applied: this is the rest of an event already accepted. The
        journal's ``seq`` goes along: the event is done once these ran (a poster that never
        releases leaves it pending, so a restart dispatches it again)."""
        later = dataclasses.replace(event, messages=[], result=None, background=True)

        def post() -> None:
            if not self.queue.closed:
                self.queue._enqueue((later, None, perf_counter(), seq, None))

        if ticket is None or ticket._released:
            post()
        else:
            ticket._background = post

    async def post_all(self, events: Sequence[HookEvent]) -> None:
        """Post the rest of a message already accepted (its ``message:sent`` events), in order:
        ``TriggerQueue.post_all(events, follows=True)``, except that an event nothing
        :meth:`hears` is done as it is accepted (design.md section 8, :meth:`accept_unheard`):
        it gets its id and is counted, but is neither journaled nor queued, so no worker wakes
        for it. Three events a message with no ``message:sent`` hook: daemon CPU per message
        with the SQLite journal 288-393 -> 216-261 us, within noise with the memory one.
        Raises :class:`QueueClosed`."""
        heard: list[HookEvent] = []
        for event in events:
            key = f"{event.type}:{event.action}"
            if self.hears(key, event.session_key):
                heard.append(event)
            else:  # QueueClosed once the drain began, as the queue's post_all would raise
                event.id = event.id or self.accept_unheard(key, 1)
        if heard:
            await self.queue.post_all(heard, follows=True)

    def hears(self, key: str, session_key: str) -> bool:
        """Whether events ``type:action`` of ``session_key`` must be posted to be done: a
        handler subscribes to them (reply path or background), or the journal keeps events
        nobody hears (``Journal.keeps_unheard``). Otherwise :meth:`accept_unheard` is what
        :meth:`post_all` does with them."""
        if self.queue.journal.keeps_unheard:
            return True
        return self.registry.subscribed(key.partition(":")[0], key, session_key)

    def accept_unheard(self, key: str, n: int) -> str:
        """Count ``n`` events ``key`` nothing hears (:meth:`hears`) as done at once, without
        the events: each uses up an id (the last is returned); events by key, ``accepted`` and
        ``dispatched`` count them. Raises :class:`QueueClosed` once the drain began."""
        queue = self.queue
        queue.accept_done(n)
        next_id = queue.journal.next_id
        last = ""
        for _ in range(n):
            last = next_id()
        self.registry.count_events(key, n)
        self.dispatched += n
        return last

    def has_handlers(self, key: str, session_key: str | None = None) -> bool:
        """True when an event ``type:action`` of ``session_key`` would run any handler on its
        reply path (its agent's hooks: ``gatewayd/hooks/agents.py``)."""
        return bool(self.registry.plan(key.partition(":")[0], key, session_key))

    async def dispatch(self, event: HookEvent, *, queued: bool = True) -> DispatchReport:
        """Run ``event``'s handlers and return the report; counted either way.

        ``queued``: through its session's lane (journaled, in order behind what the session
        already has), waiting for the dispatch; raises :class:`QueueClosed` when the gateway
        stops first. ``queued=False``: at once, in the calling task, past the lane: for what
        must not wait behind its session (``message:sending`` from a handler of the same
        session, ``gateway:shutdown`` while the queue drains). Background handlers run only
        for queued events.
        """
        if queued:
            ticket = await self.queue.submit(event)
            try:
                await ticket.wait()
            finally:
                ticket.release()
            assert ticket.report is not None, "wait() raises for an event not dispatched"
            return ticket.report
        if not event.id:
            event.id = self.queue.journal.next_id()
        report = await self.registry.dispatch(event)
        self.dispatched += 1
        self.errors += report.errors
        self.timeouts += report.timeouts
        return report

    async def drain(self, timeout_s: float) -> int:
        """Close the queue, dispatch what it holds within ``timeout_s``, then stop the workers.

        Returns how many accepted events were left undispatched (also in :attr:`left`).
        """
        queue = self.queue
        queue.close()
        # depth: events still on their way through the journal. No workers (the start failed
        # before dispatch began): nothing to wait for; what is queued stays journaled.
        if (queue._lanes or queue.depth) and self._tg is not None:
            self._draining = True
            with anyio.move_on_after(timeout_s):
                await self._drained.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            with anyio.move_on_after(5):
                await self._stopped.wait()
        self.left += queue._drop_all()
        return self.left

    def stats(self) -> dict[str, Any]:
        """The counters for ``status``: depth, capacity, dispatched, errors, timeouts, ..."""
        n = min(self._latency_n, LATENCY_SAMPLES)
        samples = sorted(self._latency[:n])

        def ms(seconds: float) -> float:
            return round(seconds * 1000, 3)

        latency = {
            "samples": n,
            "p50": ms(samples[n // 2]) if n else 0.0,
            "p99": ms(samples[min(n - 1, (n * 99) // 100)]) if n else 0.0,
            "max": ms(self._latency_max),
        }
        return {
            "depth": self.queue.depth,
            "capacity": self.queue.capacity,
            "per_session_max": self.queue.bounds.limit,
            "refused": self.queue.bounds.refused,
            "concurrency": self.concurrency,
            "sessions": self.queue.sessions,
            "accepted": self.queue.accepted,
            "peak": self.queue.peak,
            "dispatched": self.dispatched,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "left": self.left,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "latency_ms": latency,
            "journal": self.queue.journal.stats(),
        }
