"""Messages a hook sends later (``ctx.gateway.send``), on their way to the clients that own the
session: the control channel's ``subscribe`` op.

A subscriber gets a bounded stream of one session's outbound messages, in the order they were
sent. Publishing never waits: a subscriber whose buffer is full misses that message (its
``message:sent`` says so), so one slow client cannot stall the hook that sends or the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

SUBSCRIBER_BUFFER = 256
"""Messages one subscriber may have waiting before it misses the next ones."""


class Outbox:
    """Session key -> the streams of the clients subscribed to it."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[MemoryObjectSendStream[dict[str, Any]]]] = {}

    def subscribers(self, session_key: str) -> int:
        return len(self._subscribers.get(session_key, ()))

    @contextmanager
    def subscribe(self, session_key: str) -> Iterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        """Receive ``session_key``'s outbound messages until the block ends."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](SUBSCRIBER_BUFFER)
        self._subscribers.setdefault(session_key, set()).add(send)
        try:
            yield receive
        finally:
            subscribers = self._subscribers.get(session_key)
            if subscribers is not None:
                subscribers.discard(send)
                if not subscribers:
                    del self._subscribers[session_key]
            send.close()
            receive.close()

    def publish(self, session_key: str, item: dict[str, Any]) -> str | None:
        """Hand ``item`` to every subscriber of ``session_key``; ``None`` when at least one
        took it, else why nobody did (the error ``message:sent`` carries)."""
        subscribers = self._subscribers.get(session_key)
        if not subscribers:
            return f"no client is subscribed to session {session_key!r} (the subscribe op)"
        taken = 0
        for stream in list(subscribers):
            try:
                stream.send_nowait(item)
                taken += 1
            except anyio.WouldBlock:
                continue  # that client is SUBSCRIBER_BUFFER messages behind: it misses this one
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                subscribers.discard(stream)
        if taken:
            return None
        return f"every subscriber of session {session_key!r} is too far behind to take more"
