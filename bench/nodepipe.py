"""The JS call's baseline: a raw Python <-> Node round trip of one small JSON line.

The same kind of channel the Node worker has (a Unix socket pair, the child's end inherited, the
daemon's end on the event loop's own transport through ``loop.connect_accepted_socket``, a
reply resolving a future in ``data_received``), the same Node binary, and nothing else: the
child (``reference/pipe_echo.mjs``) parses each line and answers one, the Python side encodes
with orjson, decodes the reply and wakes the waiting task. What a JS handler call costs beyond
this is the gateway's: the event's encoding, the worker's handler call, the reply applied.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import orjson

from bench.harness import REPO

ECHO = REPO / "bench" / "reference" / "pipe_echo.mjs"
EVENT = {
    "type": "message",
    "action": "received",
    "sessionKey": "agent:main:bench",
    "timestamp": "2026-01-01T00:00:00+00:00",
    "messages": [],
    "context": {},
}
"""What a no-op JS handler's call carries, near enough: a small line."""


class _Lines(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: Any = None
        self.waiter: asyncio.Future[Any] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\n")) >= 0:
            reply = orjson.loads(self.buffer[:end])
            del self.buffer[: end + 1]
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(reply)


@dataclass
class PipeRounds:
    """Round trips measured one by one: seconds each, and this process's CPU seconds in all."""

    latencies: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    count: int = 0


class NodePipe:
    """A running ``pipe_echo.mjs`` under ``node`` and the Python end of its socket."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.process: subprocess.Popen[bytes] | None = None
        self.protocol: _Lines | None = None
        self.rounds = PipeRounds()
        self._id = 0

    def _spawn(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = subprocess.Popen(
            [self.node, str(ECHO), str(theirs.fileno())], pass_fds=[theirs.fileno()]
        )
        theirs.close()
        return ours

    async def start(self) -> None:
        ours = self._spawn()
        loop = asyncio.get_running_loop()
        _, self.protocol = await loop.connect_accepted_socket(_Lines, ours)
        await self.round_trips(50)  # Node's JIT and the socket warm

    async def round_trips(self, count: int) -> PipeRounds:
        """``count`` round trips one after another; returns (and adds to :attr:`rounds`)
        their latencies and CPU."""
        protocol = self.protocol
        assert protocol is not None
        loop = asyncio.get_running_loop()
        write = protocol.transport.write
        out = PipeRounds()
        cpu0 = time.process_time()
        for _ in range(count):
            self._id += 1
            t0 = perf_counter()
            waiter = protocol.waiter = loop.create_future()
            write(orjson.dumps({"id": self._id, "op": "call", "event": EVENT}) + b"\n")
            await waiter
            out.latencies.append(perf_counter() - t0)
        out.cpu_s = time.process_time() - cpu0
        out.count = count
        self.rounds.latencies += out.latencies
        self.rounds.cpu_s += out.cpu_s
        self.rounds.count += count
        return out

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
