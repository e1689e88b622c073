"""The trigger queue and its dispatcher: every event the gateway emits goes through here.

:class:`TriggerQueue` holds accepted events in one FIFO lane per session key, bounded by
``gateway.queue.capacity`` across all lanes. ``post()`` waits while the queue is full
(backpressure), ``post_nowait()`` raises :class:`QueueFull`; nothing accepted is ever dropped
except by a shutdown deadline, which is counted. ``submit()`` is ``post()`` plus a
:class:`Ticket` to await the dispatched event and its messages.

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
from collections.abc import Callable
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskStatus

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.registry import DispatchReport, HookRegistry

log = structlog.get_logger("gatewayd.queue")

BATCH = 64
"""Events a worker takes from one lane before giving other sessions a turn."""
YIELD_EVERY_S = 0.0005
"""A worker running handlers that never suspend yields to the loop at least this often."""
LATENCY_SAMPLES = 1024  # a power of two: the ring index is masked, not taken modulo


class QueueFull(Exception):
    """``post_nowait()`` on a full queue."""

    def __init__(self, capacity: int) -> None:
        super().__init__(
            f"trigger queue is full ({capacity} events waiting); retry later, post with "
            "backpressure (post()), or raise gateway.queue.capacity"
        )
        self.capacity = capacity


class QueueClosed(Exception):
    """The gateway is shutting down: the queue takes no more events, or one was not dispatched."""


class Ticket:
    """A submitted event; ``await ticket.wait()`` returns it after dispatch (messages filled)."""

    __slots__ = ("_background", "_done", "_released", "dropped", "event", "report")

    def __init__(self, event: HookEvent) -> None:
        self.event = event
        self.report: DispatchReport | None = None
        self.dropped = False
        self._done = anyio.Event()
        self._background: Callable[[], None] | None = None
        self._released = False

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> HookEvent:
        """Wait for the dispatch; raises :class:`QueueClosed` if shutdown left it undispatched."""
        await self._done.wait()
        if self.dropped:
            raise QueueClosed(f"{self.event.key} was not dispatched before the shutdown deadline")
        return self.event

    def release(self) -> None:
        """The poster has sent its reply: the event's background handlers may run now (at
        once, or as soon as its dispatch ends). Call it once the reply is out."""
        self._released = True
        if self._background is not None:
            post, self._background = self._background, None
            post()

    def _finish(self, report: DispatchReport | None) -> None:
        self.report = report
        self.dropped = report is None
        self._done.set()


_Item = tuple[HookEvent, "Ticket | None", float]
"""A queued event: the event, its ticket if the poster waits, ``perf_counter()`` at post."""


class TriggerQueue:
    """Bounded, per-session FIFO lanes; see the module docstring. Use on the event loop only."""

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError("gateway.queue.capacity must be at least 1")
        self.capacity = capacity
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
        self._enqueue((event, None, perf_counter()))

    def submit_nowait(self, event: HookEvent) -> Ticket:
        """``post_nowait()`` returning a :class:`Ticket` to await the dispatch."""
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        if self._depth >= self.capacity:
            raise QueueFull(self.capacity)
        ticket = Ticket(event)
        self._enqueue((event, ticket, perf_counter()))
        return ticket

    async def post(self, event: HookEvent) -> None:
        """Queue ``event``, waiting while the queue is full. Raises :class:`QueueClosed`.

        Returns without yielding to the loop when there is room (like ``asyncio.Queue.put``).
        """
        if self._depth >= self.capacity or self._putters or self._closed:
            await self._wait_for_room()
        # _enqueue() inlined: this is the hot path of every fire-and-forget event.
        item = (event, None, perf_counter())
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
        self._enqueue((event, ticket, perf_counter()))
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
        self._wake_putters(len(self._putters))

    def _drop_all(self) -> int:
        """Remove every queued event (shutdown deadline); their tickets raise. Returns the count."""
        self._peak = max(self._peak, self._depth)
        self._taken += self._depth
        left = 0
        for lane in self._lanes.values():
            for item in lane:
                if item[1] is not None:
                    item[1]._finish(None)
            left += len(lane)
            lane.clear()
        self._depth = 0
        return left


class Dispatcher:
    """The workers that take events off a :class:`TriggerQueue` and run the registry."""

    def __init__(self, queue: TriggerQueue, registry: HookRegistry, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError("gateway.queue.concurrency must be at least 1")
        self.queue = queue
        self.registry = registry
        self.concurrency = concurrency
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
        latency = self._latency
        mask = LATENCY_SAMPLES - 1
        checkpoint = anyio.lowlevel.checkpoint
        last_yield = perf_counter()
        while True:
            got = take()
            if got is None:
                if self._drained is not None and not queue._lanes:
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
                for event, ticket, _ in batch:
                    try:
                        report = await dispatch(event)
                    except Exception as exc:  # the registry never raises; a bug if it does
                        log.exception("queue.dispatch_crashed", event_key=event.key, error=str(exc))
                        report = DispatchReport(0, 1, 0)
                    done += 1
                    if report[1] or report[2]:
                        errors += report[1]
                        timeouts += report[2]
                    if ticket is not None:
                        ticket._finish(report)
                    if registry.background and not event.background:
                        self._post_background(event, ticket)
                    if done == 1:
                        elapsed = perf_counter() - batch[0][2]
                        latency[self._latency_n & mask] = elapsed
                        self._latency_n += 1
                        if elapsed > self._latency_max:
                            self._latency_max = elapsed
            except BaseException:
                # Cancelled by the shutdown deadline: the rest of this batch is left, counted.
                for _, ticket, _ in batch[done:]:
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

    def _post_background(self, event: HookEvent, ticket: Ticket | None) -> None:
        """Queue ``event``'s background handlers, if it has any, in its session's lane: at
        once for an event nobody waits on, else when its poster has sent the reply
        (:meth:`Ticket.release`). The queue's bound is not applied: this is the rest of an
        event already accepted."""
        if not self.registry.background_plan(event.type, event.key):
            return
        later = dataclasses.replace(event, messages=[], result=None, background=True)

        def post() -> None:
            if not self.queue.closed:
                self.queue._enqueue((later, None, perf_counter()))

        if ticket is None or ticket._released:
            post()
        else:
            ticket._background = post

    def has_handlers(self, key: str) -> bool:
        """True when an event ``type:action`` would run any handler on its reply path."""
        return bool(self.registry.plan(key.partition(":")[0], key))

    async def dispatch_now(self, event: HookEvent) -> DispatchReport:
        """Dispatch ``event`` directly, bypassing the queue (``gateway:shutdown``); counted."""
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
        if queue._lanes:
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
            "latency_ms": latency,
        }
