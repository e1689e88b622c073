"""The journal interface: what the trigger queue needs of a backend (see gatewayd.journal)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from gatewayd.exits import EXIT_FAILED, EXIT_UNAVAILABLE
from gatewayd.hooks.events import HookEvent

Item = tuple[HookEvent, Any, float, int, "tuple[str, ...] | None"]
"""A queued event: ``(event, ticket or None, perf_counter() at post, seq, only)``.

``seq`` is the journal's handle for ``done``/``dead`` (0: not journaled); ``only`` limits the
dispatch to these hook names (a retried dead letter), ``None`` runs every handler."""

Deliver = Callable[[Sequence[Item]], None]
"""Called on the event loop with committed items, in append order."""
Reject = Callable[[Sequence[Item], "JournalError"], None]
"""Called on the event loop with items that could not be made durable (their posters get the
error from :meth:`Commit.wait`)."""
Restore = Callable[[Sequence[Item]], None]
"""Called on the event loop with items the queue has not counted yet: recovered or retried
events, and events that are not journaled; they go into the lanes above the capacity bound."""
HandOff = Callable[[Sequence[Item]], None]
"""Called on the event loop with the appended items the backend committed to a shared queue
instead of delivering them here: they leave this instance's depth and their sessions' counts
(whichever instance owns their session dispatches them; this one too, through ``restore``)."""

DeadLetter = tuple[str, str, int]
"""``(hook name, error, attempts)`` of one handler that exhausted its retries."""


class JournalError(Exception):
    """The journal could not record an event; ``code`` is the control channel's error code."""

    code = "journal_error"
    exit_code = EXIT_FAILED
    """The daemon's exit code when this stops its start."""


class JournalFull(JournalError):
    """The disk under the journal is full: the event was not accepted (nothing was corrupted)."""

    code = "journal_full"


class QueueUnavailable(JournalError):
    """The shared queue's server (Redis) cannot be reached: at start the daemon exits 69
    (``EX_UNAVAILABLE``); while running, an event not accepted within the wait is refused."""

    code = "queue_unavailable"
    exit_code = EXIT_UNAVAILABLE


class Unrecordable(JournalError):
    """An event the journal cannot store as text (a lone surrogate in its session key)."""

    code = "bad_request"


def check_recordable(event: HookEvent) -> None:
    """Raise :class:`Unrecordable` for an event whose key fields are not valid Unicode text:
    refused up front, so that nothing unwritable ever reaches the journal's writer."""
    if event.session_key.isascii() and event.action.isascii():
        return  # the common case, without encoding anything
    try:
        event.session_key.encode("utf-8")
        event.action.encode("utf-8")
    except UnicodeEncodeError:
        raise Unrecordable(
            f"session key {event.session_key!r} (or action {event.action!r}) is not valid "
            "Unicode text (a lone surrogate?); send UTF-8 text"
        ) from None


class Commit:
    """One group commit: every poster whose event is in it awaits :meth:`wait`.

    Made and finished on the event loop. Each waiter awaits a bare future of that loop, taken
    once per commit: no ``anyio.Event`` per commit and no ``asyncio.Event.wait`` per poster,
    each of which looks the running loop up again (a ``getpid()`` system call every time, in
    CPython's check that the loop was not inherited across a fork). A cancelled poster's future
    is cancelled alone; the others still get the outcome."""

    __slots__ = ("_finished", "_loop", "_waiters", "error")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._waiters: list[asyncio.Future[None]] = []
        self._finished = False
        self.error: JournalError | None = None

    def wait(self) -> asyncio.Future[None]:
        """Await it: returns once the events are durable; raises :class:`JournalError` if they
        never were.

        A plain method returning the poster's future, not a coroutine: every durable poster
        awaits one, and a coroutine per wait is one more object and one more frame to resume
        on every wake-up (256 posters a commit: 1.7 -> 1.5 us a wake-up)."""
        waiter = self._loop.create_future()
        if self._finished:
            if self.error is not None:
                waiter.set_exception(self.error)
            else:
                waiter.set_result(None)
        else:
            self._waiters.append(waiter)
        return waiter

    def finish(self, error: JournalError | None = None) -> None:
        """The commit ended (``error``: it failed): wake every waiter, in the order they came."""
        self.error = error
        self._finished = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if waiter.done():  # its poster was cancelled
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class Journal(ABC):
    """What the trigger queue needs from a journal backend; see the module docstring."""

    backend: str = ""
    durable: bool = False
    """False: ``append`` delivers at once and returns None (no commit to await)."""
    keeps_unheard: bool = False
    """True: an event no handler here subscribes to is still appended (a done event stays
    listed, or another instance may dispatch it with its own hooks). False: the dispatcher
    counts it done as it is accepted (``Dispatcher.post_all``, design.md section 8)."""

    def bind(
        self,
        deliver: Deliver,
        reject: Reject,
        restore: Restore,
        hand_off: HandOff = lambda items: None,
    ) -> None:
        """Set where committed, refused, uncounted and handed-off items go; the queue calls
        this once."""
        self._deliver = deliver
        self._reject = reject
        self._restore = restore
        self._hand_off = hand_off

    def stop_delivery(self) -> None:  # noqa: B027 - a no-op unless the backend feeds the queue
        """The queue takes no more events (a drain began): a backend that reads a shared queue
        stops handing this instance new items; what it has handed over is drained."""

    @abstractmethod
    async def open(self) -> list[Item]:
        """Open (creating or setting aside a damaged store); return the unfinished items."""

    @abstractmethod
    def next_id(self) -> str:
        """A fresh event id for an event that is not journaled (``gateway:shutdown``)."""

    @abstractmethod
    def append(
        self, event: HookEvent, ticket: Any, posted: float, only: tuple[str, ...] | None = None
    ) -> Commit | None:
        """Record ``event`` (giving it its ``id``); on the event loop, never blocks.

        Returns the :class:`Commit` to await before telling the poster "accepted", or None when
        the item was delivered already (not journaled)."""

    @abstractmethod
    def done(self, seq: int) -> None:
        """Every handler of item ``seq`` finished (ok, error or timeout)."""

    def started(self, seq: int) -> None:  # noqa: B027 - a no-op unless the backend redelivers
        """Item ``seq``'s dispatch begins (a journal that redelivers after a restart counts
        this for the items it redelivered, to stop one that keeps taking the daemon down).

        Called only while :attr:`redelivered` is not empty."""

    redelivered: AbstractSet[int] = frozenset()
    """The seqs :meth:`started` is to be told about; a backend that counts them adds to (and
    takes from) one set of its own, never replacing it: the dispatcher reads it once and
    skips the call for every event while it is empty (0.13 us an event otherwise)."""

    @abstractmethod
    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        """Item ``seq`` finished, but these handlers exhausted their retries."""

    @abstractmethod
    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        """Serve ``gatewayd events`` (``action``: list, show, retry, purge); see inspect.py."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """``{backend, path, size_bytes, pending, dead_letters, oldest_pending_age_s, ...}``."""

    @abstractmethod
    async def close(self) -> None:
        """Write what is buffered and release the store (after the queue drained)."""


__all__ = [
    "Commit",
    "DeadLetter",
    "Deliver",
    "HandOff",
    "Item",
    "Journal",
    "JournalError",
    "JournalFull",
    "QueueUnavailable",
    "Reject",
    "Restore",
]
