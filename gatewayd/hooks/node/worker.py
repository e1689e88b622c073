"""One Node worker process (``worker.mjs``) and the framed JSON channel to it.

The worker is started with one end of a Unix socket pair as an inherited fd; frames both ways are
a 4-byte big-endian length and UTF-8 JSON (see ``worker.mjs`` for the messages). The channel is
an asyncio protocol: a reply parsed in ``data_received`` resolves its request's future with no
task switch in between, which is what keeps a round trip to tens of microseconds. A frame that
cannot be decoded (nested past the parser's stack) fails its own request, not the channel.

:meth:`NodeWorker.serve` owns the process for its whole life: it starts it, waits for its
``ready`` frame, reports started, and returns when the process has exited, after failing every
request still waiting with the reason (:meth:`kill` names one; an exit of its own is reported
with its code or signal). Nothing here restarts a worker; ``runtime.py`` decides that.

What the worker starts goes with it. It runs in a session and process group of its own, and
holds the read end of a *parent pipe* whose write end only this process has: the pipe ends when
:meth:`kill` closes it or when the daemon dies (``kill -9`` included), and the worker's watchdog
thread then kills the detached children of its hooks and the worker's process group, however
busy its main thread is (Node has no parent-death signal of its own). Its stdout and stderr are
pipes read here (``output.py``): nothing it writes reaches the daemon's own output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc

from gatewayd.hooks.node.output import LogSink, OutputPipe, read_output
from gatewayd.hooks.node.resolve import NodeBinary
from gatewayd.jsonenc import loads

WORKER_SCRIPT: Final = Path(__file__).with_name("worker.mjs")
START_TIMEOUT_S: Final = 30.0
"""Spawn to ``ready``: a cold Node on a loaded machine, plus the type stripper's warm-up."""
STOP_GRACE_S: Final = 2.0
KILL_GRACE_S: Final = 1.0
"""After :meth:`NodeWorker.kill` closed the parent pipe, how long the worker's watchdog has to
end it and its hooks' detached children before its process group is killed from here."""
OUTPUT_GRACE_S: Final = 0.5
"""After the worker exited, how long its output pipes may still be read (a child killed with
it may hold them a moment)."""
MAX_FRAME: Final = 64 << 20
_HEAD = struct.Struct(">I")
_REPLY_ID = re.compile(rb'^\{"id":(\d+)')


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
            frame = bytes(buffer[offset + 4 : offset + 4 + size])
            offset += 4 + size
            try:
                message = loads(frame)
            except ValueError as exc:
                message = _undecodable(frame, exc)
            self.worker._received(message)
        if offset:
            del buffer[:offset]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()
        self.worker._channel_lost()


def _undecodable(frame: bytes, exc: ValueError) -> dict[str, Any]:
    """A frame the daemon cannot decode, as an error reply to its request (replies begin with
    their id) or, without one, a log line of the worker's."""
    error = f"the node worker's reply could not be read: {exc}"
    if (match := _REPLY_ID.match(frame)) is not None:
        return {"id": int(match[1]), "ok": False, "error": error}
    return {"op": "log", "hook": None, "level": "error", "text": error}


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
        self._parent_pipe: int | None = None
        """The write end of the parent pipe (see the module docstring): closed, it ends the
        worker."""
        self._outputs: list[OutputPipe] = []
        self.importing: dict[int, float] = {}
        """Load request id -> when (loop time) its import began (the worker's ``importing``
        frame; loads run one at a time); the importer removes its ids."""
        self.suspect: anyio.Event | None = None
        """Set while a call ran past its timeout and the worker is asked whether it still
        answers; the event is set with the verdict (killed or not)."""

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

    @property
    def last_request_id(self) -> int:
        """The id of the request :meth:`request` sent last."""
        return self._next_id

    def command(self) -> list[str]:
        argv = [self.binary.path, *self.binary.flags(self.typescript), str(WORKER_SCRIPT)]
        return [*argv, "--warm-typescript"] if self.typescript else argv

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Start the worker, report started once it is ready, return once it has exited."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        # The channel, the parent pipe, stdout and stderr: each an end for the worker and one
        # kept here (closed if not handed over).
        theirs: list[int] = []
        ours: list[int] = []
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            channel_ours, channel_theirs = a.detach(), b.detach()
            ours.append(channel_ours)
            theirs.append(channel_theirs)
            parent_r, parent_w = os.pipe()
            theirs.append(parent_r)
            ours.append(parent_w)
            out_r, out_w = os.pipe()
            ours.append(out_r)
            theirs.append(out_w)
            err_r, err_w = os.pipe()
            ours.append(err_r)
            theirs.append(err_w)
        except OSError as exc:  # EMFILE: a hook in this process holds every descriptor
            for fd in (*ours, *theirs):
                os.close(fd)
            self.exit_reason = f"could not start {self.binary.label}: {exc}"
            raise WorkerGone(self.exit_reason) from None
        try:
            try:
                process = await anyio.open_process(
                    [
                        *self.command(),
                        *("--fd", str(channel_theirs), "--parent-fd", str(parent_r)),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out_w,
                    stderr=err_w,
                    pass_fds=[channel_theirs, parent_r],
                    start_new_session=True,
                )
            except OSError as exc:
                self.exit_reason = f"could not start {self.binary.label}: {exc}"
                raise WorkerGone(self.exit_reason) from None
            finally:
                for fd in theirs:
                    os.close(fd)
            self._process, self.pid = process, process.pid
            self._parent_pipe = parent_w
            ours.remove(parent_w)
            try:
                for fd, level in ((out_r, "info"), (err_r, "warning")):
                    ours.remove(fd)
                    self._outputs.append(await read_output(fd, self.on_log, level))
                sock = socket.socket(fileno=channel_ours)
                ours.remove(channel_ours)
                _, self._channel = await loop.connect_accepted_socket(lambda: _Channel(self), sock)
                await self._run(process, task_status)
            except BaseException:
                self.kill(self._kill_reason or "the node worker was stopped")
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(KILL_GRACE_S):
                        await process.wait()
                    if process.returncode is None:
                        self._kill_group()
                    await process.wait()
                raise
            finally:
                self._finish(process.returncode)
                with anyio.CancelScope(shield=True):
                    await process.aclose()
                    if self._channel is not None:  # let the transport close its socket
                        with anyio.move_on_after(1):
                            await self._channel.closed.wait()
                    await self._close_outputs()
        finally:
            for fd in ours:  # never handed over
                os.close(fd)
            self._close_parent_pipe()

    async def _close_outputs(self) -> None:
        """Read what is left in the output pipes, for a moment, then close them."""
        with anyio.move_on_after(OUTPUT_GRACE_S):
            for output in self._outputs:
                await output.closed
        for output in self._outputs:
            if output.transport is not None:
                output.transport.close()

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
        """SIGKILL the worker's process group, while the worker is not reaped (its pid, the
        group's id, cannot then be another process's)."""
        if self.pid is not None and self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def _close_parent_pipe(self) -> None:
        pipe, self._parent_pipe = self._parent_pipe, None
        if pipe is not None:
            os.close(pipe)

    def kill(self, reason: str) -> None:
        """Kill the worker, its process group and its hooks' detached children; every waiting
        request fails with ``reason``. The parent pipe is closed (the worker's watchdog ends
        them all); its process group is killed from here :data:`KILL_GRACE_S` later if it
        still runs."""
        if self._kill_reason is None and self.exit_reason is None:
            self._kill_reason = reason
        if self._parent_pipe is None:
            self._kill_group()
            return
        self._close_parent_pipe()
        asyncio.get_running_loop().call_later(KILL_GRACE_S, self._kill_group)

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
        if op == "importing":
            self.importing[message.get("id", -1)] = asyncio.get_running_loop().time()
            return
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
