"""What reaches a Node worker's stdout and stderr: read line by line and logged, never passed on.

``worker.mjs`` turns what a hook writes (``console.*``, ``process.stdout.write``,
``process.stderr.write``, ``fs.writeSync(1|2)``) into log frames naming the hook. What still
reaches the worker's fds 1 and 2 (a child process a hook started with inherited stdio, Node's own
messages, a native addon) arrives on two pipes the daemon reads here: each line is one
``hook.console`` record through the worker's log sink, with no hook, at ``info`` for stdout and
``warning`` for stderr. Nothing a worker writes reaches the daemon's own stdout or stderr, where
a bare or forged line would pass for the daemon's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, Final

MAX_LINE: Final = 16 << 10
"""Bytes of one line; a longer one is logged in parts of this size."""

LogSink = Callable[[str | None, str, str], None]
"""``(hook name or None, level, text)``: where a worker's output goes."""


class OutputPipe(asyncio.Protocol):
    """One of a worker's output pipes: each line in is one record out."""

    def __init__(self, sink: LogSink, level: str) -> None:
        self.sink = sink
        self.level = level
        self.buffer = bytearray()
        self.transport: Any = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            self._emit(buffer[start:end])
            start = end + 1
        while len(buffer) - start >= MAX_LINE:
            self._emit(buffer[start : start + MAX_LINE])
            start += MAX_LINE
        del buffer[:start]

    def eof_received(self) -> bool | None:
        if self.buffer:
            self._emit(self.buffer)
            self.buffer.clear()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof_received()
        if not self.closed.done():
            self.closed.set_result(None)

    def _emit(self, line: bytes | bytearray) -> None:
        text = bytes(line).decode("utf-8", "replace").removesuffix("\r")
        self.sink(None, self.level, text)


async def read_output(fd: int, sink: LogSink, level: str) -> OutputPipe:
    """Read the pipe ``fd`` (its read end; this takes it over) into ``sink`` at ``level``."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        _, protocol = await loop.connect_read_pipe(lambda: OutputPipe(sink, level), pipe)
    except BaseException:
        pipe.close()
        raise
    return protocol
