"""Per-session bounds of the trigger queue: how many events one session may hold at once.

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

from collections import deque

import anyio
import structlog

from gatewayd.tickets import QueueClosed, QueueFull

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
