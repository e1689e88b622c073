"""What a poster of the trigger queue holds: a :class:`Ticket`, or one of the queue's errors.

Kept apart from :mod:`gatewayd.triggers` (which re-exports all three) so that the queue module
holds only the lanes and the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.registry import DispatchReport


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

    __slots__ = ("_background", "_done", "_released", "dropped", "error", "event", "report")

    def __init__(self, event: HookEvent) -> None:
        self.event = event
        self.report: DispatchReport | None = None
        self.dropped = False
        self.error: Exception | None = None
        """Why the event was never accepted (the journal could not record it)."""
        self._done = anyio.Event()
        self._background: Callable[[], None] | None = None
        self._released = False

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> HookEvent:
        """Wait for the dispatch; raises :class:`QueueClosed` if shutdown left it undispatched,
        or the journal's error (``JournalFull``) if it could not be recorded."""
        await self._done.wait()
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
        self._done.set()
