"""A session's outbound messages, as an async iterator (the ``subscribe`` op).

``subscribe`` turns a connection into a stream of what hooks send the session later
(``ctx.gateway.send``): one ``{"event": "message", "sessionKey", "content"}`` line each, in the
order sent. So a :class:`Subscription` has a connection of its own. When that connection ends
(the daemon restarted), it connects again with a growing pause and subscribes again, unless the
client was made with ``reconnect=False`` (then the iteration ends); messages sent while no
client was subscribed are not kept for it (the daemon's ``send`` returns false for them).
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from gatewayd.client.connection import ENDED, MAX_REPLY, open_stream
from gatewayd.client.errors import CannotConnect, ConnectionLost, DaemonError
from gatewayd.client.types import OutboundMessage
from gatewayd.client.wire import check_hello, decode, encode, hello_fields, hello_refused, outcome

BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 2.0


class Subscription:
    """``async with gw.subscribe(key) as messages: async for message in messages: ...``"""

    def __init__(
        self, path: str, session_key: str, *, connect_s: float, reconnect: bool, hello: bool
    ) -> None:
        self.path = path
        self.session_key = session_key
        self._connect_s = connect_s
        self._reconnect = reconnect
        self._hello = hello
        self._stream: anyio.abc.SocketStream | None = None
        self._lines: BufferedByteReceiveStream | None = None
        self._subscribed = False

    async def __aenter__(self) -> Subscription:
        await self._subscribe()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> OutboundMessage:
        """The next message sent to the session; waits for as long as none comes."""
        while True:
            if self._lines is None:
                if not self._subscribed:
                    await self._subscribe()  # iterated without ``async with``
                elif self._reconnect:
                    await self._subscribe_again()
                else:
                    raise StopAsyncIteration
            assert self._lines is not None
            try:
                line = await self._lines.receive_until(b"\n", MAX_REPLY)
            except ENDED:
                await self._close()
                continue
            item: Any = json.loads(line)
            if type(item) is dict and item.get("event") == "message":
                return cast(OutboundMessage, item)

    async def _subscribe_again(self) -> None:
        delay = BACKOFF_FIRST_S
        while True:
            try:
                await self._subscribe()
                return
            except (CannotConnect, ConnectionLost):
                await anyio.sleep(delay)
                delay = min(2 * delay, BACKOFF_MAX_S)

    async def _subscribe(self) -> None:
        """Connect, say hello (and check it), subscribe; the connection then carries the
        session's messages."""
        stream = await open_stream(self.path, self._connect_s)
        lines = BufferedByteReceiveStream(stream)
        try:
            requests = [("subscribe", {"sessionKey": self.session_key})]
            if self._hello:
                requests.insert(0, ("hello", hello_fields()))
            await stream.send(b"".join(encode(n, op, f) for n, (op, f) in enumerate(requests)))
            for op, _fields in requests:
                try:
                    fields = outcome(decode(await lines.receive_until(b"\n", MAX_REPLY)))
                except DaemonError as exc:
                    raise (hello_refused(exc, self.path) if op == "hello" else exc) from None
                if op == "hello":
                    check_hello(fields, self.path)
        except ENDED as exc:
            await stream.aclose()
            raise ConnectionLost(f"gatewayd closed the connection ({self.path}): {exc}") from None
        except BaseException:
            await stream.aclose()
            raise
        self._stream, self._lines = stream, lines
        self._subscribed = True

    async def _close(self) -> None:
        stream, self._stream, self._lines = self._stream, None, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
