"""The suite's one client of the control socket: JSON lines over a Unix stream socket.

A :class:`Control` is one connection: :meth:`Control.request` sends ``{"id", "op", ...}`` and
reads the reply with the same id; :meth:`Control.ok` also asserts ``ok: true``. For the wire
protocol's edge cases it can send raw bytes and read raw replies. :class:`AsyncControl` is the
same client awaited, for a gateway serving in the test's own event loop
(:mod:`tests.support.inprocess`).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

TIMEOUT_S = 60.0


class Control:
    """One client connection to a daemon's control socket."""

    def __init__(self, path: Path | str, timeout: float = TIMEOUT_S) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(str(path))
        except BaseException:
            self.sock.close()
            raise
        self.file = self.sock.makefile("rb")
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        """Send ``data`` as is (no framing added)."""
        self.sock.sendall(data)

    def read(self) -> dict[str, Any] | None:
        """The next reply line, or None at end of stream."""
        line = self.file.readline()
        if not line:
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply (whatever ``ok`` says)."""
        self._next_id += 1
        self.send_raw(json.dumps({"id": self._next_id, "op": op, **fields}).encode() + b"\n")
        reply = self.read()
        assert reply is not None, f"connection closed instead of replying to {op}"
        assert reply["id"] == self._next_id, reply
        return reply

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """:meth:`request`, asserting the reply says ``ok: true``."""
        reply = self.request(op, **fields)
        assert reply["ok"] is True, reply
        return reply

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncControl:
    """:class:`Control` for a daemon in the test's own event loop (``async with``): the same
    requests, awaited, so that the loop serving the socket is never blocked by its client."""

    def __init__(self, path: Path | str, timeout: float = TIMEOUT_S) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._stream: anyio.abc.SocketStream | None = None
        self._buffer: BufferedByteReceiveStream | None = None
        self._next_id = 0

    async def connect(self) -> AsyncControl:
        with anyio.fail_after(self.timeout):
            self._stream = await anyio.connect_unix(self.path)
        self._buffer = BufferedByteReceiveStream(self._stream)
        return self

    async def send_raw(self, data: bytes) -> None:
        """Send ``data`` as is (no framing added)."""
        assert self._stream is not None, "not connected"
        await self._stream.send(data)

    async def read(self) -> dict[str, Any] | None:
        """The next reply line, or None at end of stream."""
        assert self._buffer is not None, "not connected"
        with anyio.fail_after(self.timeout):
            try:
                line = await self._buffer.receive_until(b"\n", 1 << 26)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply (whatever ``ok`` says)."""
        self._next_id += 1
        await self.send_raw(json.dumps({"id": self._next_id, "op": op, **fields}).encode() + b"\n")
        reply = await self.read()
        assert reply is not None, f"connection closed instead of replying to {op}"
        assert reply["id"] == self._next_id, reply
        return reply

    async def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """:meth:`request`, asserting the reply says ``ok: true``."""
        reply = await self.request(op, **fields)
        assert reply["ok"] is True, reply
        return reply

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()
            self._stream = None

    async def __aenter__(self) -> AsyncControl:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
