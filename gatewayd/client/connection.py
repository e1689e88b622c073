"""One asynchronous connection to the control socket: many requests in flight, replies by id.

Each request gets the next id of its connection and waits for the reply that carries it; a
reader task (:meth:`Connection.read_replies`, run by the :class:`~gatewayd.client.Client` in
its task group) hands every reply line to its waiter, in whatever order the replies come (the
daemon answers in request order today; a client that matches by id needs no such promise).
Lines are read with anyio's buffered stream, requests written under a lock so that two tasks'
lines never interleave.

When the connection ends, every request still waiting fails with
:class:`~gatewayd.client.errors.ConnectionLost` (the daemon may or may not have carried it
out), or with the daemon's last word when it closed the connection with one (``busy``,
``idle_timeout``: an error reply with id ``null``).
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from gatewayd.client.errors import (
    CannotConnect,
    ConnectionLost,
    DaemonError,
    GatewayError,
    ProtocolError,
)
from gatewayd.client.wire import connect_failure, decode, encode, outcome

MAX_REPLY = 1 << 28
"""Longest reply line this client reads (a ``hooks`` listing of many hooks is a few MiB)."""

ENDED = (  # what reading or writing a connection that ended raises
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    OSError,
)


async def open_stream(path: str, within_s: float) -> anyio.abc.SocketStream:
    """A connected Unix stream to ``path``; a failure says why for a person."""
    try:
        with anyio.fail_after(within_s):
            return await anyio.connect_unix(path)
    except OSError as exc:
        raise connect_failure(path, exc) from None
    except TimeoutError:
        raise CannotConnect(f"cannot connect to {path} within {within_s:g} s") from None


class _Waiter:
    """One request's reply, once the reader has it."""

    __slots__ = ("done", "error", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: dict[str, Any] | None = None
        self.error: GatewayError | None = None


class Connection:
    """One connection; make it with :meth:`open`, run :meth:`read_replies` in a task."""

    def __init__(self, stream: anyio.abc.SocketStream, path: str) -> None:
        self.path = path
        self._stream = stream
        self._lines = BufferedByteReceiveStream(stream)
        self._sending = anyio.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self.ended: GatewayError | None = None
        """Why the connection ended (None while it is open): what its requests raise."""

    @classmethod
    async def open(cls, path: str, within_s: float) -> Connection:
        return cls(await open_stream(path, within_s), path)

    async def request(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Send ``op`` and wait for its reply's fields; a refusal raises its
        :class:`~gatewayd.client.errors.DaemonError`. Cancel the caller to stop waiting."""
        if self.ended is not None:
            raise self.ended
        req_id = next(self._ids)
        line = encode(req_id, op, fields)
        waiter = self._waiting[req_id] = _Waiter()
        try:
            async with self._sending:
                try:
                    await self._stream.send(line)
                except ENDED as exc:
                    self._end(
                        ConnectionLost(f"lost the connection to gatewayd ({self.path}): {exc}")
                    )
                except BaseException:
                    # Cancelled mid-line: what follows on this stream would not be JSON lines.
                    self._end(
                        ConnectionLost(f"a request was cancelled while being sent ({self.path})")
                    )
                    await _close(self._stream)
                    raise
            await waiter.done.wait()
        finally:
            self._waiting.pop(req_id, None)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.reply is not None
        return outcome(waiter.reply)

    async def read_replies(self) -> None:
        """Hand each reply to the request waiting for it, until the connection ends."""
        try:
            while True:
                reply = decode(await self._lines.receive_until(b"\n", MAX_REPLY))
                req_id = reply.get("id")
                waiter = self._waiting.pop(req_id, None) if type(req_id) is int else None
                if waiter is not None:
                    waiter.reply = reply
                    waiter.done.set()
                elif req_id is None and reply.get("ok") is False:
                    try:  # the daemon's last word (busy, idle_timeout, forbidden), then EOF
                        outcome(reply)
                    except DaemonError as exc:
                        self._end(exc)
        except ENDED:
            self._end(ConnectionLost(f"gatewayd closed the connection ({self.path})"))
        except ProtocolError as exc:
            self._end(exc)
        finally:
            self._end(ConnectionLost(f"the connection to gatewayd was closed ({self.path})"))
            await _close(self._stream)

    def _end(self, why: GatewayError) -> None:
        """The connection is over: every waiting request raises ``why`` (the first reason
        given wins)."""
        if self.ended is None:
            self.ended = why
        for waiter in self._waiting.values():
            if not waiter.done.is_set():
                waiter.error = self.ended
                waiter.done.set()

    async def aclose(self) -> None:
        self._end(ConnectionLost(f"the connection to gatewayd was closed ({self.path})"))
        await _close(self._stream)


async def _close(stream: anyio.abc.SocketStream) -> None:
    with anyio.CancelScope(shield=True):
        await stream.aclose()
