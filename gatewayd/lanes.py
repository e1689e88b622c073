"""The trigger queue's lanes: one FIFO per session key, and how many events one session may hold.

:class:`Lanes` is the queue's state and its consumers' side: the lanes the journal fills (in
post order, once an event is recorded) and the dispatcher's workers take from, one session at a
time; :class:`~gatewayd.triggers.TriggerQueue` adds the producers' side on top.


The queue's lanes are per session, but its capacity (``gateway.queue.capacity``) is shared: a
session flooded with events behind a slow hook would fill it, and then every other session's
producers would wait behind that one backlog. :class:`LaneBounds` counts, per session key, the
events the queue holds for it (queued in its lane, on their way through the journal, in a
worker's batch and not yet dispatched, or reserved by a poster waiting for room in the whole
queue) and holds a poster whose session is at ``gateway.queue.perSessionMax`` in that session's
own line, FIFO, until one of them has been dispatched. After
``gateway.queue.perSessionWaitMs`` the poster gets :class:`QueueFull` (the control channel's
``queue_full``): its event was not accepted. Posters of other sessions never stand in that line,
so they keep being accepted and dispatched.

Not held by the bound (they still count): events a hook's handler causes (the session's lane
cannot drain until that handler returns, so waiting would deadlock), the rest of a message whose
first event was accepted, background handlers' items, and events recovered or retried from the
journal.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

import anyio
import structlog

from gatewayd.journal.base import Item, Journal
from gatewayd.journal.memory import MemoryJournal
from gatewayd.tickets import QueueClosed, QueueFull, wake_first

log = structlog.get_logger("gatewayd.queue")


class LaneBounds:
    """The per-session counts and waiting lines; see the module docstring. Event loop only."""

    def __init__(self, limit: int = 256, wait_s: float = 5.0) -> None:
        self.limit = 1
        self.wait_s = 0.0
        self.held: dict[str, int] = {}
        """Session key -> events held for it; keys at 0 are removed."""
        self.waiting: dict[str, deque[anyio.Event]] = {}
        """Session key -> its posters waiting for room, FIFO; empty lines are removed."""
        self.refused = 0
        """Events refused with :class:`QueueFull` because their session stayed full."""
        self.closed = False
        self._refusing: set[str] = set()
        self.configure(limit, wait_s)

    def configure(self, limit: int, wait_s: float) -> None:
        """Set the bound (at start and on reload); posters that now fit are woken. Events held
        above a smaller bound stay."""
        if limit < 1:
            raise ValueError("gateway.queue.perSessionMax must be at least 1")
        if wait_s < 0:
            raise ValueError("gateway.queue.perSessionWaitMs must be 0 or more")
        self.limit = limit
        self.wait_s = wait_s
        for key in list(self.waiting):
            self._wake(key)

    def full(self, key: str) -> bool:
        """True when a new poster of ``key`` must wait (the session is at its bound, or others
        of it are waiting already: they go first)."""
        return self.held.get(key, 0) >= self.limit or key in self.waiting

    def add(self, key: str, n: int = 1) -> None:
        held = self.held
        held[key] = held.get(key, 0) + n

    def unreserve(self, key: str) -> None:
        """Give back a waiting poster's place without waking anyone: the poster counts its
        event at once (:meth:`add`)."""
        held = self.held
        left = held.get(key, 0) - 1
        if left > 0:
            held[key] = left
        else:
            held.pop(key, None)

    def remove(self, key: str, n: int = 1) -> None:
        """``n`` events of ``key`` were dispatched (or dropped) or refused by the journal, or a
        waiting poster's place was given back: wake the posters that now fit."""
        held = self.held
        left = held.get(key, 0) - n
        if left > 0:
            held[key] = left
        else:
            held.pop(key, None)
            self._refusing.discard(key)
        if key in self.waiting:
            self._wake(key)

    def clear(self) -> None:
        """Forget every count (the shutdown deadline dropped what was queued)."""
        self.held.clear()

    def close(self) -> None:
        """The queue takes no more events: every waiting poster gets :class:`QueueClosed`."""
        self.closed = True
        for line in self.waiting.values():
            for ready in line:
                ready.set()
        self.waiting.clear()

    def _wake(self, key: str) -> None:
        line = self.waiting.get(key)
        if line is None:
            return
        room = self.limit - self.held.get(key, 0)
        while line and room > 0:
            line.popleft().set()
            room -= 1
        if not line:
            del self.waiting[key]

    def _leave(self, key: str, ready: anyio.Event) -> None:
        line = self.waiting.get(key)
        if line is not None and ready in line:
            line.remove(ready)
            if not line:
                del self.waiting[key]

    async def wait(self, key: str) -> None:
        """Wait in ``key``'s line until it holds fewer than the bound; the caller then counts
        its event without yielding. Raises :class:`QueueFull` after ``wait_s`` and
        :class:`QueueClosed` when the queue closes meanwhile."""
        if self.closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        deadline = anyio.current_time() + self.wait_s
        front = False
        while True:
            ready = anyio.Event()
            line = self.waiting.setdefault(key, deque())
            if front:
                line.appendleft(ready)
            else:
                line.append(ready)
            try:
                with anyio.move_on_after(deadline - anyio.current_time()):
                    await ready.wait()
            except BaseException:
                if ready.is_set():
                    self._wake(key)  # hand the wake-up we got to the next in line
                else:
                    self._leave(key, ready)
                raise
            if self.closed:
                raise QueueClosed("the gateway is shutting down and takes no new events")
            if not ready.is_set():
                self._leave(key, ready)
                self._refuse(key)
            if self.held.get(key, 0) < self.limit:
                return
            front = True  # woken, but a reload lowered the bound: wait again, first in line

    def _refuse(self, key: str) -> None:
        self.refused += 1
        if key not in self._refusing:  # once per episode: a flood is not a flood of logs
            self._refusing.add(key)
            log.warning(
                "queue.session_full",
                session_key=key,
                held=self.held.get(key, 0),
                per_session_max=self.limit,
                fix="the session's hooks are slower than its producers: retry later, or raise "
                "gateway.queue.perSessionMax / gateway.queue.perSessionWaitMs",
            )
        raise QueueFull.session(key, self.limit, round(self.wait_s * 1000))

    def refuse_now(self, key: str) -> None:
        """Raise :class:`QueueFull` for ``key`` at once (``post_nowait()``)."""
        self._refuse(key)


BATCH = 64
"""Events a worker takes from one lane before giving other sessions a turn."""

_Item = Item
"""A queued event: ``(event, ticket or None, perf_counter() at post, journal seq, only)``."""


class Lanes:
    """The trigger queue's state and its consumers' side: one FIFO lane per session key, the
    sessions ready for a worker, the idle workers, and the journal's callbacks that fill the
    lanes (:class:`~gatewayd.triggers.TriggerQueue` adds the producers' side). Event loop only.

    Workers of the :class:`~gatewayd.dispatcher.Dispatcher` take a session's events with
    :meth:`_take`, up to :data:`BATCH` at a time, and give the lane back with :meth:`_release`.
    """

    def __init__(
        self,
        capacity: int = 1024,
        journal: Journal | None = None,
        per_session_max: int = 256,
        per_session_wait_s: float = 5.0,
    ) -> None:
        if capacity < 1:
            raise ValueError("gateway.queue.capacity must be at least 1")
        self.capacity = capacity
        self.bounds = LaneBounds(per_session_max, per_session_wait_s)
        """The per-session bound: events held per session, and the posters waiting for room."""
        self._held = self.bounds.held
        self._lane_waiting = self.bounds.waiting
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
        self._idle: deque[asyncio.Future[None]] = deque()
        """Idle workers, each waiting on a bare future of the loop (no ``anyio.Event``: see
        :class:`~gatewayd.tickets.Ticket`); :meth:`_wake_worker` wakes the first."""
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

    # -- what the journal delivers ------------------------------------------------------------

    def _enqueue(self, item: _Item) -> None:
        key = item[0].session_key
        lane = self._lanes.get(key)
        if lane is None:
            self._lanes[key] = deque((item,))
            self._ready.append(key)
            if self._idle:
                self._wake_worker()
        else:
            lane.append(item)  # the lane is already ready or owned by a worker
        self._depth += 1
        held = self._held
        held[key] = held.get(key, 0) + 1

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
                    self._wake_worker()
            else:
                lane.append(item)

    def _reject(self, items: Sequence[_Item], error: Exception) -> None:
        """The journal could not record ``items``: give their slots back; posters get ``error``
        from the commit, submitters from their ticket."""
        for item in items:
            if item[1] is not None:
                item[1]._finish(None, error)
            self.bounds.remove(item[0].session_key)
        self._depth -= len(items)
        if self._putters and self._depth < self.capacity:
            self._wake_putters(self.capacity - self._depth)

    def _hand_off(self, items: Sequence[_Item]) -> None:
        """The journal committed appended ``items`` to a shared queue (Redis) rather than
        delivering them here: their slots, and their sessions', are free (the owner of their
        session dispatches them; when that is this instance they come back through
        :meth:`restore`)."""
        self._depth -= len(items)
        for item in items:
            self.bounds.remove(item[0].session_key)
        if self._putters and self._depth < self.capacity:
            self._wake_putters(self.capacity - self._depth)
        if not self._depth and not self._lanes and self._idle:
            self._wake_worker()  # a drain waiting for these sees it is over

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

    def _wake_worker(self) -> None:
        """Wake the longest idle worker (one cancelled at shutdown is skipped)."""
        wake_first(self._idle)

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

    def _drop_all(self) -> int:
        """Remove every queued event (shutdown deadline); their tickets raise. Returns the count.

        Events still on their way into the journal are counted as they arrive (:attr:`late`)."""
        self._sealed = True
        self._peak = max(self._peak, self._depth)
        self.bounds.clear()
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
