"""The trigger queue and its dispatcher: every event the gateway emits goes through here.

:class:`TriggerQueue` holds accepted events in one FIFO lane per session key, bounded by
``gateway.queue.capacity`` across all lanes. ``post()`` waits while the queue is full
(backpressure), ``post_nowait()`` raises :class:`QueueFull`; nothing accepted is ever dropped
except by a shutdown deadline, which is counted. ``submit()`` is ``post()`` plus a
:class:`Ticket` to await the dispatched event and its messages.

Every event goes through the queue's :class:`~gatewayd.journal.Journal` first: ``post()`` returns
once the journal has it (for ``sqlite``: committed to disk, see :mod:`gatewayd.journal.sqlite`)
and the journal delivers it into its lane, in post order. After its dispatch (and retries, see
:mod:`gatewayd.retries`) the journal is told the event is done or dead-lettered. The default
journal here is the in-memory one, for which posting costs what it always did.

:class:`Dispatcher` runs ``gateway.queue.concurrency`` workers. A worker owns one session's lane
at a time and takes up to :data:`BATCH` of its events in one step, so one session's events run
strictly in post order while other sessions run on other workers: a slow hook delays only its own
session. Workers step through a batch with no task, future or cancel scope per event (the
registry adds a cancel scope only for a handler that actually suspends), and yield to the loop
once per batch.

Counters: ``depth`` (queued, not yet taken), ``peak``, ``accepted``, ``dispatched``, handler
``errors`` and ``timeouts``, and the dispatch latency from post to the end of the dispatch,
sampled on the first event of each batch (the one that waited longest), over the last
:data:`LATENCY_SAMPLES` samples.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskStatus

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.registry import DispatchReport, HookRegistry
from gatewayd.journal.base import Item, Journal, check_recordable
from gatewayd.journal.memory import MemoryJournal
from gatewayd.retries import NO_RETRIES, RetryPolicy, settle
from gatewayd.tickets import QueueClosed, QueueFull, Ticket

__all__ = ["Dispatcher", "QueueClosed", "QueueFull", "Ticket", "TriggerQueue"]

log = structlog.get_logger("gatewayd.queue")

BATCH = 64
"""Events a worker takes from one lane before giving other sessions a turn."""
YIELD_EVERY_S = 0.0005
"""A worker running handlers that never suspend yields to the loop at least this often."""
LATENCY_SAMPLES = 1024  # a power of two: the ring index is masked, not taken modulo


_Item = Item
"""A queued event: ``(event, ticket or None, perf_counter() at post, journal seq, only)``."""


class TriggerQueue:
    """Bounded, per-session FIFO lanes; see the module docstring. Use on the event loop only."""

    def __init__(self, capacity: int = 1024, journal: Journal | None = None) -> None:
        if capacity < 1:
            raise ValueError("gateway.queue.capacity must be at least 1")
        self.capacity = capacity
        self.journal = journal or MemoryJournal()
        self.journal.bind(self._deliver, self._reject, self.restore, self._hand_off)
        self._durable = self.journal.durable
        self._next_id = self.journal.next_id
        self.late = 0
        """Events the journal delivered after a drain had given up: kept there, not dispatched."""
        self._sealed = False
        self._peak = 0
        self._taken = 0
        self._depth = 0
        self._lanes: dict[str, deque[_Item]] = {}
        """Lanes of sessions with queued events or owned by a worker; removed when drained."""
        self._ready: deque[str] = deque()
        """Session keys with queued events that no worker owns, in the order they became ready."""
        self._putters: deque[anyio.Event] = deque()
        self._idle: deque[anyio.Event] = deque()
        self._closed = False

    @property
    def depth(self) -> int:
        """Events accepted and not yet taken by a worker."""
        return self._depth

    @property
    def peak(self) -> int:
        """The most events ever queued at once (``capacity`` means posters had to wait)."""
        return max(self._peak, self._depth)

    @property
    def accepted(self) -> int:
        """Events ever accepted (taken by workers, dropped at shutdown, or still queued)."""
        return self._taken + self._depth

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def sessions(self) -> int:
        """Sessions with queued or running events."""
        return len(self._lanes)

    # -- posting ----------------------------------------------------------------------------

    def post_nowait(self, event: HookEvent) -> None:
        """Queue ``event`` or raise :class:`QueueFull` / :class:`QueueClosed` at once."""
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        if self._depth >= self.capacity:
            raise QueueFull(self.capacity)
        self._accept(event, None)

    def submit_nowait(self, event: HookEvent) -> Ticket:
        """``post_nowait()`` returning a :class:`Ticket` to await the dispatch."""
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        if self._depth >= self.capacity:
            raise QueueFull(self.capacity)
        ticket = Ticket(event)
        self._accept(event, ticket)
        return ticket

    def _accept(self, event: HookEvent, ticket: Ticket | None) -> None:
        """Hand ``event`` to the journal without waiting for its commit (the ``_nowait`` forms:
        with a durable journal the event is dispatched once committed)."""
        if not self._durable:
            event.id = self._next_id()
            self._enqueue((event, ticket, perf_counter(), 0, None))
            return
        check_recordable(event)
        self._depth += 1
        self.journal.append(event, ticket, perf_counter())

    async def _journal(self, event: HookEvent, ticket: Ticket | None) -> None:
        """Append to a durable journal; without a ticket, wait for the commit (the journal
        delivers the event into its lane, in append order, before this returns). A ticket's
        ``wait()`` ends after the dispatch, which follows the commit, so a submitter does not
        wait twice: the several events of one message share one commit."""
        check_recordable(event)
        self._depth += 1
        commit = self.journal.append(event, ticket, perf_counter())
        if commit is not None and ticket is None:
            await commit.wait()  # JournalError: _reject() already gave the slot back

    async def post(self, event: HookEvent) -> None:
        """Queue ``event``, waiting while the queue is full. Raises :class:`QueueClosed`.

        Returns without yielding to the loop when there is room (like ``asyncio.Queue.put``).
        """
        if self._depth >= self.capacity or self._putters or self._closed:
            await self._wait_for_room()
        if self._durable:
            await self._journal(event, None)
            return
        # _enqueue() inlined: this is the hot path of every fire-and-forget event.
        event.id = self._next_id()
        item = (event, None, perf_counter(), 0, None)
        lane = self._lanes.get(event.session_key)
        if lane is None:
            self._lanes[event.session_key] = deque((item,))
            self._ready.append(event.session_key)
            if self._idle:
                self._idle.popleft().set()
        else:
            lane.append(item)
        self._depth += 1

    async def submit(self, event: HookEvent) -> Ticket:
        """``post()`` returning a :class:`Ticket` to await the dispatch."""
        if self._depth >= self.capacity or self._putters or self._closed:
            await self._wait_for_room()
        ticket = Ticket(event)
        if self._durable:
            await self._journal(event, ticket)
        else:
            event.id = self._next_id()
            self._enqueue((event, ticket, perf_counter(), 0, None))
        return ticket

    async def _wait_for_room(self) -> None:
        # Waiting posters queue up FIFO; each slot a worker frees wakes one of them. A poster
        # woken but beaten to the slot waits again at the front of the line.
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        if self._depth < self.capacity and not self._putters:
            return
        front = False
        while True:
            ready = anyio.Event()
            if front:
                self._putters.appendleft(ready)
            else:
                self._putters.append(ready)
            try:
                await ready.wait()
            except BaseException:
                if ready.is_set():
                    self._wake_putters(1)  # hand the wake-up we got to the next in line
                else:
                    self._putters.remove(ready)
                raise
            if self._closed:
                raise QueueClosed("the gateway is shutting down and takes no new events")
            if self._depth < self.capacity:
                return
            front = True

    def _enqueue(self, item: _Item) -> None:
        key = item[0].session_key
        lane = self._lanes.get(key)
        if lane is None:
            self._lanes[key] = deque((item,))
            self._ready.append(key)
            if self._idle:
                self._idle.popleft().set()
        else:
            lane.append(item)  # the lane is already ready or owned by a worker
        self._depth += 1

    def _deliver(self, items: Sequence[_Item]) -> None:
        """The journal committed ``items`` (already counted in ``depth``): into their lanes."""
        if self._sealed:
            self._depth -= len(items)
            self._late(items)
            return
        lanes = self._lanes
        for item in items:
            key = item[0].session_key
            lane = lanes.get(key)
            if lane is None:
                lanes[key] = deque((item,))
                self._ready.append(key)
                if self._idle:
                    self._idle.popleft().set()
            else:
                lane.append(item)

    def _reject(self, items: Sequence[_Item], error: Exception) -> None:
        """The journal could not record ``items``: give their slots back; posters get ``error``
        from the commit, submitters from their ticket."""
        for item in items:
            if item[1] is not None:
                item[1]._finish(None, error)
        self._depth -= len(items)
        if self._putters and self._depth < self.capacity:
            self._wake_putters(self.capacity - self._depth)

    def _hand_off(self, n: int) -> None:
        """The journal committed ``n`` appended items to a shared queue (Redis) rather than
        delivering them here: their slots are free (the owner of their session dispatches
        them; when that is this instance they come back through :meth:`restore`)."""
        self._depth -= n
        if self._putters and self._depth < self.capacity:
            self._wake_putters(self.capacity - self._depth)

    def restore(self, items: Sequence[_Item]) -> None:
        """Queue items nobody posted just now (recovered at start, retried dead letters, events
        the journal does not record), above the capacity bound if need be."""
        if self._sealed:
            self._late(items)
            return
        for item in items:
            self._enqueue(item)

    def _late(self, items: Sequence[_Item]) -> None:
        # After a drain gave up: the journal keeps them for the next start; waiters are told.
        for item in items:
            if item[1] is not None:
                item[1]._finish(None)
        self._taken += len(items)
        self.late += len(items)

    def _wake_putters(self, n: int) -> None:
        putters = self._putters
        while putters and n:
            putters.popleft().set()
            n -= 1

    # -- the dispatcher's side ----------------------------------------------------------------

    def _take(self) -> tuple[str, list[_Item]] | None:
        """Own the next ready session and take up to BATCH of its events, or None."""
        if not self._ready:
            return None
        key = self._ready.popleft()
        lane = self._lanes[key]
        # Depth only falls here, so its highest point is always just before a take.
        if self._depth > self._peak:
            self._peak = self._depth
        if len(lane) <= BATCH:
            batch = list(lane)
            lane.clear()
        else:
            batch = [lane.popleft() for _ in range(BATCH)]
        self._depth -= len(batch)
        self._taken += len(batch)
        if self._putters:
            self._wake_putters(len(batch))
        return key, batch

    def _release(self, key: str) -> None:
        """Give up ownership of ``key``'s lane: back in line if it has more, else gone."""
        if self._lanes[key]:
            self._ready.append(key)
        else:
            del self._lanes[key]

    def resize(self, capacity: int) -> None:
        """Change the bound (a reload of ``gateway.queue.capacity``); waiting posters that now
        fit are woken. Events already queued stay, even above a smaller bound."""
        if capacity < 1:
            raise ValueError("gateway.queue.capacity must be at least 1")
        self.capacity = capacity
        if self._putters and self._depth < capacity:
            self._wake_putters(capacity - self._depth)

    def close(self) -> None:
        """Take no more events; waiting posters get :class:`QueueClosed`."""
        self._closed = True
        self.journal.stop_delivery()
        self._wake_putters(len(self._putters))

    def _drop_all(self) -> int:
        """Remove every queued event (shutdown deadline); their tickets raise. Returns the count.

        Events still on their way into the journal are counted as they arrive (:attr:`late`)."""
        self._sealed = True
        self._peak = max(self._peak, self._depth)
        left = sum(len(lane) for lane in self._lanes.values())
        self._taken += left
        self._depth -= left
        left = 0
        for lane in self._lanes.values():
            for item in lane:
                if item[1] is not None:
                    item[1]._finish(None)
            left += len(lane)
            lane.clear()
        return left


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
        self._drained: anyio.Event | None = None
        self._stopped: anyio.Event | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the workers until :meth:`drain` (or cancellation) stops them."""
        self._stopped = stopped = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for _ in range(self.concurrency):
                    tg.start_soon(self._worker)
                task_status.started()
        finally:
            stopped.set()

    async def _worker(self) -> None:
        queue = self.queue
        take = queue._take
        release = queue._release
        registry = self.registry
        dispatch = registry.dispatch
        journal = queue.journal
        done_mark = journal.done
        started_mark = journal.started
        latency = self._latency
        mask = LATENCY_SAMPLES - 1
        checkpoint = anyio.lowlevel.checkpoint
        last_yield = perf_counter()
        while True:
            got = take()
            if got is None:
                if self._drained is not None and not queue._lanes and not queue.depth:
                    self._drained.set()
                wake = anyio.Event()
                queue._idle.append(wake)
                await wake.wait()
                last_yield = perf_counter()
                continue
            key, batch = got
            # Per event: the dispatch and a counter. Everything else is once per batch; the
            # latency is sampled on the batch's first event (the one that waited longest).
            done = errors = timeouts = 0
            try:
                for event, ticket, _, seq, only in batch:
                    if seq:
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
                        and registry.background_plan(event.type, event.key)
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

    def has_handlers(self, key: str) -> bool:
        """True when an event ``type:action`` would run any handler on its reply path."""
        return bool(self.registry.plan(key.partition(":")[0], key))

    async def dispatch_now(self, event: HookEvent) -> DispatchReport:
        """Dispatch ``event`` directly, bypassing the queue (``gateway:shutdown``); counted."""
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
            self._drained = anyio.Event()  # set by the last worker to go idle
            with anyio.move_on_after(timeout_s):
                await self._drained.wait()
        if self._tg is not None and self._stopped is not None:
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
