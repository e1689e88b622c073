"""What a poster of the trigger queue holds: a :class:`Ticket`, or one of the queue's errors.

Kept apart from :mod:`gatewayd.triggers` (which re-exports all three) so that the queue module
holds only the lanes and the dispatcher.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport


def wake_first(waiters: deque[asyncio.Future[None]]) -> bool:
    """Wake the first of ``waiters`` (bare loop futures, oldest first) still waiting; a
    cancelled waiter's future is done already and is skipped. False when none was."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return True
    return False


class QueueFull(Exception):
    """An event was not accepted: the queue (``post_nowait()``) or its session was full.

    ``session_key`` is set when the session's own bound (``gateway.queue.perSessionMax``)
    refused it; ``code`` is the control channel's error code."""

    code = "queue_full"

    def __init__(
        self, capacity: int, message: str | None = None, session_key: str | None = None
    ) -> None:
        super().__init__(
            message
            or f"trigger queue is full ({capacity} events waiting); retry later, post with "
            "backpressure (post()), or raise gateway.queue.capacity"
        )
        self.capacity = capacity
        self.session_key = session_key

    @classmethod
    def session(cls, session_key: str, limit: int, wait_ms: int) -> QueueFull:
        """Session ``session_key`` held ``limit`` events and none was taken in ``wait_ms``."""
        return cls(
            limit,
            f"session {session_key!r} already has {limit} events queued "
            f"(gateway.queue.perSessionMax) and none was dispatched within {wait_ms} ms "
            "(gateway.queue.perSessionWaitMs): this event was not accepted. Its hooks are "
            "slower than its producers: retry later, or raise gateway.queue.perSessionMax",
            session_key,
        )


class QueueClosed(Exception):
    """The gateway is shutting down: the queue takes no more events, or one was not dispatched."""


class Ticket:
    """A submitted event; ``await ticket.wait()`` returns it after dispatch (messages filled).

    Made, waited on and finished on the event loop. A waiter awaits a bare future of the loop,
    made only if the dispatch has not ended yet: no ``anyio.Event`` per ticket (its creation
    asks sniffio which library runs, its wait checks the cancel scopes; with the workers' idle
    wake-up, ``TriggerQueue._idle``: -7 to -19 us of daemon CPU per ``message`` op). A
    cancelled waiter's future is cancelled alone."""

    __slots__ = (
        "_background",
        "_finished",
        "_released",
        "_waiters",
        "dropped",
        "error",
        "event",
        "report",
    )

    def __init__(self, event: HookEvent) -> None:
        self.event = event
        self.report: DispatchReport | None = None
        self.dropped = False
        self.error: Exception | None = None
        """Why the event was never accepted (the journal could not record it)."""
        self._finished = False
        self._waiters: list[asyncio.Future[None]] = []
        self._background: Callable[[], None] | None = None
        self._released = False

    @property
    def done(self) -> bool:
        return self._finished

    async def wait(self) -> HookEvent:
        """Wait for the dispatch; raises :class:`QueueClosed` if shutdown left it undispatched,
        or the journal's error (``JournalFull``) if it could not be recorded."""
        if not self._finished:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        if self.error is not None:
            raise self.error
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

    def _finish(self, report: DispatchReport | None, error: Exception | None = None) -> None:
        self.report = report
        self.dropped = report is None
        self.error = error
        self._finished = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():  # a cancelled waiter's future is done already
                waiter.set_result(None)
