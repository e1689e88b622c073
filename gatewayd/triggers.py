"""The trigger queue: every event the gateway emits goes through here.

:class:`TriggerQueue` holds accepted events in one FIFO lane per session key, bounded by
``gateway.queue.capacity`` across all lanes and by ``gateway.queue.perSessionMax`` per session
(:mod:`gatewayd.lanes`: one session's backlog cannot fill the queue for the others). ``post()``
waits while the queue is full (backpressure) and, up to ``perSessionWaitMs``, while its session
is; ``post_nowait()`` raises :class:`QueueFull`; nothing accepted is ever dropped except by a
shutdown deadline, which is counted. ``submit()`` is ``post()`` plus a :class:`Ticket` to await
the dispatched event and its messages.

Every event goes through the queue's :class:`~gatewayd.journal.Journal` first: ``post()`` returns
once the journal has it (for ``sqlite``: committed to disk, see :mod:`gatewayd.journal.sqlite`)
and the journal delivers it into its lane, in post order. After its dispatch (and retries, see
:mod:`gatewayd.retries`) the journal is told the event is done or dead-lettered. The default
journal here is the in-memory one, for which posting costs what it always did.

The lanes themselves, what the journal delivers into them and what the dispatcher's workers take
from them are :class:`~gatewayd.lanes.Lanes`, which :class:`TriggerQueue` extends with posting.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter

import anyio

from gatewayd.hooks.engine import dispatching
from gatewayd.hooks.events import HookEvent
from gatewayd.journal.base import Commit, check_recordable
from gatewayd.lanes import Lanes
from gatewayd.tickets import QueueClosed, QueueFull, Ticket

__all__ = ["QueueClosed", "QueueFull", "Ticket", "TriggerQueue"]


class TriggerQueue(Lanes):
    """Bounded, per-session FIFO lanes; see the module docstring. Use on the event loop only."""

    # -- posting ----------------------------------------------------------------------------

    def post_nowait(self, event: HookEvent, *, follows: bool = False) -> None:
        """Queue ``event`` or raise :class:`QueueFull` / :class:`QueueClosed` at once."""
        self._check_nowait(event.session_key, follows)
        self._accept(event, None)

    def submit_nowait(self, event: HookEvent, *, follows: bool = False) -> Ticket:
        """``post_nowait()`` returning a :class:`Ticket` to await the dispatch."""
        self._check_nowait(event.session_key, follows)
        ticket = Ticket(event)
        self._accept(event, ticket)
        return ticket

    def _check_nowait(self, key: str, follows: bool) -> None:
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        if not follows and self.bounds.full(key) and dispatching.get() is None:
            self.bounds.refuse_now(key)
        if self._depth >= self.capacity:
            raise QueueFull(self.capacity)

    def _accept(self, event: HookEvent, ticket: Ticket | None) -> None:
        """Hand ``event`` to the journal without waiting for its commit (the ``_nowait`` forms:
        with a durable journal the event is dispatched once committed)."""
        if not self._durable:
            event.id = self._next_id()
            self._enqueue((event, ticket, perf_counter(), 0, None))
            return
        check_recordable(event)
        self._depth += 1
        self.bounds.add(event.session_key)
        self.journal.append(event, ticket, perf_counter())

    async def _journal(self, event: HookEvent, ticket: Ticket | None) -> None:
        """Append to a durable journal; without a ticket, wait for the commit (the journal
        delivers the event into its lane, in append order, before this returns). A ticket's
        ``wait()`` ends after the dispatch, which follows the commit, so a submitter does not
        wait twice: the several events of one message share one commit."""
        commit = self._append(event, ticket)
        if commit is not None and ticket is None:
            await commit.wait()  # JournalError: _reject() already gave the slot back

    def _append(self, event: HookEvent, ticket: Ticket | None) -> Commit | None:
        check_recordable(event)
        self._depth += 1
        held = self._held
        held[event.session_key] = held.get(event.session_key, 0) + 1
        return self.journal.append(event, ticket, perf_counter())

    async def post(self, event: HookEvent, *, follows: bool = False) -> None:
        """Queue ``event``, waiting while the queue is full and while its session is (then
        :class:`QueueFull` after ``perSessionWaitMs``). Raises :class:`QueueClosed`.

        ``follows``: the event is the rest of one of its session already accepted (a message's
        later events), so the per-session bound does not hold it; neither does it hold events
        a hook's handler causes. Returns without yielding to the loop when there is room (like
        ``asyncio.Queue.put``).
        """
        key = event.session_key
        if (
            self._depth >= self.capacity
            or self._putters
            or self._closed
            or self._held.get(key, 0) >= self.bounds.limit
            or self._lane_waiting
        ):
            await self._admit(key, follows)
        commit = self._put(event)
        if commit is not None:
            await commit.wait()  # JournalError: _reject() already gave the slot back

    async def enter(self, event: HookEvent, *, follows: bool = False) -> Commit | None:
        """:meth:`post` up to the commit: returns once ``event`` is in the queue, in post order,
        with the :class:`Commit` to await before telling its poster "accepted" (None: it is
        in its lane already). A poster with many events (a connection's pipelined requests)
        enters them all before awaiting any commit, so they share one."""
        key = event.session_key
        if (
            self._depth >= self.capacity
            or self._putters
            or self._closed
            or self._held.get(key, 0) >= self.bounds.limit
            or self._lane_waiting
        ):
            await self._admit(key, follows)
        return self._put(event)

    def _put(self, event: HookEvent) -> Commit | None:
        """Count ``event`` (its room was made) and append it to a durable journal, else put it
        in its lane (:meth:`Lanes._enqueue`)."""
        key = event.session_key
        held = self._held
        if self._durable:
            if not (key.isascii() and event.action.isascii()):
                check_recordable(event)
            self._depth += 1
            held[key] = held.get(key, 0) + 1
            return self.journal.append(event, None, perf_counter())
        event.id = self._next_id()
        self._enqueue((event, None, perf_counter(), 0, None))
        return None

    async def post_all(self, events: Sequence[HookEvent], *, follows: bool = False) -> None:
        """:meth:`post` each of ``events``, in order. With a durable journal, all are appended
        before any commit is awaited, so they share a commit instead of waiting for one each
        (a message's ``message:sent`` events)."""
        if not self._durable:
            for event in events:
                await self.post(event, follows=follows)
            return
        commits: list[Commit] = []
        for event in events:
            key = event.session_key
            if (
                self._depth >= self.capacity
                or self._putters
                or self._closed
                or self._held.get(key, 0) >= self.bounds.limit
                or self._lane_waiting
            ):
                await self._admit(key, follows)
            commit = self._append(event, None)
            if commit is not None and (not commits or commits[-1] is not commit):
                commits.append(commit)
        for commit in commits:
            await commit.wait()  # JournalError: _reject() already gave the slot back

    async def submit(self, event: HookEvent, *, follows: bool = False) -> Ticket:
        """``post()`` returning a :class:`Ticket` to await the dispatch."""
        if (
            self._depth >= self.capacity
            or self._putters
            or self._closed
            or self._held.get(event.session_key, 0) >= self.bounds.limit
            or self._lane_waiting
        ):
            await self._admit(event.session_key, follows)
        ticket = Ticket(event)
        if self._durable:
            await self._journal(event, ticket)
        else:
            event.id = self._next_id()
            self._enqueue((event, ticket, perf_counter(), 0, None))
        return ticket

    async def _admit(self, key: str, follows: bool) -> None:
        """Wait for room in ``key``'s session (unless ``follows`` or caused by a handler), then
        in the queue, holding a place in the session meanwhile; the caller counts the event
        without yielding."""
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        bounds = self.bounds
        if not follows and bounds.full(key) and dispatching.get() is None:
            await bounds.wait(key)
        if self._depth >= self.capacity or self._putters:
            bounds.add(key)  # this poster's place in its session while it waits for the queue
            try:
                await self._wait_for_room()
            except BaseException:
                bounds.remove(key)
                raise
            bounds.unreserve(key)  # counted again, for good, by the caller

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

    def accept_done(self, n: int) -> None:
        """Count ``n`` events accepted and done at once (no handler subscribes to them:
        ``Dispatcher.post_all``); they are neither journaled nor queued."""
        if self._closed:
            raise QueueClosed("the gateway is shutting down and takes no new events")
        self._taken += n

    def resize(self, capacity: int) -> None:
        """Change the bound (a reload of ``gateway.queue.capacity``); waiting posters that now
        fit are woken. Events already queued stay, even above a smaller bound."""
        if capacity < 1:
            raise ValueError("gateway.queue.capacity must be at least 1")
        self.capacity = capacity
        if self._putters and self._depth < capacity:
            self._wake_putters(capacity - self._depth)

    def bound_sessions(self, per_session_max: int, wait_s: float) -> None:
        """Change the per-session bound (a reload of ``gateway.queue.perSessionMax`` or
        ``perSessionWaitMs``); waiting posters that now fit are woken."""
        self.bounds.configure(per_session_max, wait_s)

    def close(self) -> None:
        """Take no more events; waiting posters get :class:`QueueClosed`."""
        self._closed = True
        self.journal.stop_delivery()
        self._wake_putters(len(self._putters))
        self.bounds.close()
