"""One Node worker process (``worker.mjs``) and the framed JSON channel to it.

The worker is started with one end of a Unix socket pair as an inherited fd; frames both ways are
a 4-byte big-endian length and UTF-8 JSON (see ``worker.mjs`` for the messages). The channel is
an asyncio protocol: a reply parsed in ``data_received`` resolves its request's future with no
task switch in between, which is what keeps a round trip to tens of microseconds.

:meth:`NodeWorker.serve` owns the process for its whole life: it starts it, waits for its
``ready`` frame, reports started, and returns when the process has exited, after failing every
request still waiting with the reason (:meth:`kill` names one; an exit of its own is reported
with its code or signal). Nothing here restarts a worker; ``runtime.py`` decides that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc

from gatewayd.hooks.node.resolve import NodeBinary

WORKER_SCRIPT: Final = Path(__file__).with_name("worker.mjs")
START_TIMEOUT_S: Final = 30.0
"""Spawn to ``ready``: a cold Node on a loaded machine, plus the type stripper's warm-up."""
STOP_GRACE_S: Final = 2.0
MAX_FRAME: Final = 64 << 20
_HEAD = struct.Struct(">I")

LogSink = Callable[[str | None, str, str], None]
"""``(hook name or None, level, text)`` for a hook's console output."""


class WorkerGone(Exception):
    """The worker exited or was killed before it answered; the message is the reason."""


class _Channel(asyncio.Protocol):
    """Frames in, futures resolved; frames out."""

    def __init__(self, worker: NodeWorker) -> None:
        self.worker = worker
        self.buffer = bytearray()
        self.transport: Any = None
        """An ``asyncio.Transport`` (uvloop's does not subclass it, hence ``Any``)."""
        self.closed = anyio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        offset = 0
        while len(buffer) - offset >= 4:
            (size,) = _HEAD.unpack_from(buffer, offset)
            if len(buffer) - offset - 4 < size:
                break
            message = json.loads(buffer[offset + 4 : offset + 4 + size].decode())
            offset += 4 + size
            self.worker._received(message)
        if offset:
            del buffer[:offset]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()
        self.worker._channel_lost()


class NodeWorker:
    """One ``node worker.mjs`` process; see the module docstring."""

    def __init__(self, binary: NodeBinary, *, typescript: bool, on_log: LogSink) -> None:
        self.binary = binary
        self.typescript = typescript
        self.on_log = on_log
        self.pid: int | None = None
        self.started_at = time.monotonic()
        self.node_version: str | None = None
        self.inplace = False
        """Whether it can load a later generation itself (``worker.mjs``: Node's registerHooks)."""
        self.generations = 0
        """How many generations were loaded into it (see ``runtime.RECYCLE_GENERATIONS``)."""
        self.rss = 0
        """Its resident set in bytes as of its last load, and after its first one."""
        self.first_rss = 0
        self.exit_reason: str | None = None
        """Why the worker is gone, once it is."""
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._channel: _Channel | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self._kill_reason: str | None = None
        self._process: anyio.abc.Process | None = None

    @property
    def alive(self) -> bool:
        return self.exit_reason is None and self._channel is not None

    @property
    def doomed(self) -> bool:
        """Dead, or killed and about to be."""
        return not self.alive or self._kill_reason is not None

    @property
    def kill_reason(self) -> str | None:
        """Why it was killed, if it was (:meth:`kill`)."""
        return self._kill_reason

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def command(self) -> list[str]:
        argv = [self.binary.path, *self.binary.flags(self.typescript), str(WORKER_SCRIPT)]
        return [*argv, "--warm-typescript"] if self.typescript else argv

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Start the worker, report started once it is ready, return once it has exited."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as exc:  # EMFILE: a hook in this process holds every descriptor
            self.exit_reason = f"could not start {self.binary.label}: {exc}"
            raise WorkerGone(self.exit_reason) from None
        try:
            try:
                process = await anyio.open_process(
                    [*self.command(), "--fd", str(theirs.fileno())],
                    stdin=None,
                    stdout=None,
                    stderr=None,
                    pass_fds=[theirs.fileno()],
                    start_new_session=True,
                )
            except OSError as exc:
                self.exit_reason = f"could not start {self.binary.label}: {exc}"
                raise WorkerGone(self.exit_reason) from None
            finally:
                theirs.close()
            self._process, self.pid = process, process.pid
            try:
                _, self._channel = await loop.connect_accepted_socket(lambda: _Channel(self), ours)
                await self._run(process, task_status)
            except BaseException:
                self._kill_group()
                with anyio.CancelScope(shield=True):
                    await process.wait()
                raise
            finally:
                self._finish(process.returncode)
                with anyio.CancelScope(shield=True):
                    await process.aclose()
                    if self._channel is not None:  # let the transport close its socket
                        with anyio.move_on_after(1):
                            await self._channel.closed.wait()
        finally:
            if self._channel is None:  # never handed to a transport
                ours.close()

    async def _run(
        self, process: anyio.abc.Process, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        assert self._ready is not None
        with anyio.move_on_after(START_TIMEOUT_S):
            ready = await self._ready
        if not self._ready.done():
            self.kill(f"the node worker did not start within {START_TIMEOUT_S:g} s")
            await process.wait()
            raise WorkerGone(self._kill_reason or "the node worker did not start")
        self.node_version = str(ready.get("node"))
        self.inplace = bool(ready.get("inplace"))
        task_status.started()
        await process.wait()

    def _finish(self, code: int | None) -> None:
        if self.exit_reason is None:
            if self._kill_reason is not None:
                self.exit_reason = self._kill_reason
            elif code is not None and code < 0:
                self.exit_reason = f"the node worker (pid {self.pid}) died of signal {-code}"
            else:
                self.exit_reason = f"the node worker (pid {self.pid}) exited with code {code}"
        if self._channel is not None and self._channel.transport is not None:
            self._channel.transport.abort()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerGone(self.exit_reason))
                future.exception()  # retrieved: nobody may be waiting for it any more
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(WorkerGone(self.exit_reason))
            self._ready.exception()

    def _kill_group(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def kill(self, reason: str) -> None:
        """Kill the worker (its whole process group); every waiting request fails with
        ``reason``."""
        if self._kill_reason is None and self.exit_reason is None:
            self._kill_reason = reason
        self._kill_group()

    async def stop(self) -> None:
        """Close the channel (the worker exits by itself), then kill it after a grace period."""
        if self._channel is not None and self._channel.transport is not None:
            self._channel.transport.close()
        if self._process is not None and self._process.returncode is None:
            with anyio.move_on_after(STOP_GRACE_S):
                await self._process.wait()
            if self._process.returncode is None:
                self.kill("the node worker was stopped")

    # -- the channel ------------------------------------------------------------------------

    def _received(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "log":
            self.on_log(message.get("hook"), str(message.get("level")), str(message.get("text")))
            return
        if op == "ready":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(message)
            return
        future = self._pending.pop(message.get("id", -1), None)
        if future is not None and not future.done():
            future.set_result(message)

    def _channel_lost(self) -> None:
        # The process is exiting (its exit code is the reason) or closed its end while still
        # running: then it is killed after a grace period, so that serve() returns.
        def kill_if_running() -> None:
            if self._process is not None and self._process.returncode is None:
                self.kill(
                    self._kill_reason or f"the node worker (pid {self.pid}) closed its channel"
                )

        asyncio.get_running_loop().call_later(STOP_GRACE_S, kill_if_running)

    def request(
        self, message: dict[str, Any], event_json: str | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Send ``message`` with a fresh ``id`` (and ``event_json`` as its ``event``, spliced in
        as it is); the future is the reply, or fails with ``WorkerGone``."""
        if not self.alive:
            raise WorkerGone(self.exit_reason or "the node worker is not running")
        assert self._channel is not None and self._channel.transport is not None
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        text = json.dumps({**message, "id": request_id})
        if event_json is not None:
            text = f'{text[:-1]}, "event": {event_json}}}'
        body = text.encode()
        if len(body) > MAX_FRAME:
            del self._pending[request_id]
            raise ValueError(f"event too large for the node worker ({len(body)} bytes)")
        self._channel.transport.write(_HEAD.pack(len(body)) + body)
        return future

    def call(
        self, hook_id: str, event_json: str, cfg_json: str | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Run hook ``hook_id`` (the runtime's, digits and dots) on an event already in its
        wire form (JSON text), with its context's ``cfg`` as JSON text apart when given:
        :meth:`request` with the frame written out directly."""
        if not self.alive:
            raise WorkerGone(self.exit_reason or "the node worker is not running")
        assert self._channel is not None and self._channel.transport is not None
        self._next_id += 1
        request_id = self._next_id
        cfg = "" if cfg_json is None else f',"cfg":{cfg_json}'
        text = f'{{"op":"call","hook":"{hook_id}","id":{request_id}{cfg},"event":{event_json}}}'
        body = text.encode()
        if len(body) > MAX_FRAME:
            raise ValueError(f"event too large for the node worker ({len(body)} bytes)")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._channel.transport.write(_HEAD.pack(len(body)) + body)
        return future

    def forget(self, future: asyncio.Future[dict[str, Any]]) -> None:
        """Drop a request nobody waits for any more (its reply, if any, is ignored)."""
        for request_id, pending in list(self._pending.items()):
            if pending is future:
                del self._pending[request_id]
                break
