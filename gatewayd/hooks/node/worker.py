"""One Node worker process (``worker.mjs``): started, supervised, killed with what it started.

The worker is started with one end of a Unix socket pair as an inherited fd, the channel to it
(``channel.py``: JSON lines, batched both ways, each request a future).

:meth:`NodeWorker.serve` owns the process for its whole life: it starts it, waits for its
``ready`` line, reports started, and returns when the process has exited, after failing every
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
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc

from gatewayd.hooks.node.channel import CallTimeout, Channel, Reply, WorkerGone
from gatewayd.hooks.node.output import LogSink, OutputPipe, read_output
from gatewayd.hooks.node.resolve import NodeBinary

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
        self.channel = Channel(self._message, self._channel_lost, self.kill)
        self.call = self.channel.call
        """:meth:`Channel.call`: a hook's call (its ``cfg`` sent once), within its timeout."""
        self.request = self.channel.request
        """:meth:`Channel.request`: any other request (``load``, ``begin``, ``ping``)."""
        self.forget = self.channel.forget
        """:meth:`Channel.forget`: a request nobody waits for any more."""
        self.drop = self.channel.drop
        """:meth:`Channel.drop`: have the worker forget a replaced generation's handlers."""
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
        self.on_gateway: Callable[[NodeWorker, Reply], None] | None = None
        """Told each use of a hook's gateway handle (``gateway.py``)."""
        self.causes: dict[int, tuple[int, Any]] = {}
        """The events whose handlers made the latest calls, by slot (``gateway.py``)."""

    @property
    def alive(self) -> bool:
        return self.exit_reason is None and self.channel.transport is not None

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
        return self.channel.in_flight

    @property
    def last_request_id(self) -> int:
        """The id of the request :meth:`request` sent last."""
        return self.channel.last_request_id

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
            os.set_blocking(parent_r, False)  # see worker.mjs: its watchdog polls it
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
                await loop.connect_accepted_socket(lambda: self.channel, sock)
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
                    if self.channel.transport is not None:  # let it close its socket
                        with anyio.move_on_after(1):
                            await self.channel.closed.wait()
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
        self.channel.fail(self.exit_reason)
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
        if self.channel.transport is not None:
            self.channel.transport.close()
        if self._process is not None and self._process.returncode is None:
            with anyio.move_on_after(STOP_GRACE_S):
                await self._process.wait()
            if self._process.returncode is None:
                self.kill("the node worker was stopped")

    # -- the channel ------------------------------------------------------------------------

    def _message(self, message: Reply) -> None:
        op = message.get("op")
        if op == "importing":
            self.importing[message.get("id", -1)] = asyncio.get_running_loop().time()
        elif op == "log":
            self.on_log(message.get("hook"), str(message.get("level")), str(message.get("text")))
        elif op == "gateway" and self.on_gateway is not None:
            self.on_gateway(self, message)
        elif op == "ready" and self._ready is not None and not self._ready.done():
            self._ready.set_result(message)

    def _channel_lost(self) -> None:
        # The process is exiting (its exit code is the reason) or closed its end while still
        # running: then it is killed after a grace period, so that serve() returns.
        def kill_if_running() -> None:
            if self._process is not None and self._process.returncode is None:
                self.kill(
                    self._kill_reason or f"the node worker (pid {self.pid}) closed its channel"
                )

        asyncio.get_running_loop().call_later(STOP_GRACE_S, kill_if_running)


__all__ = ["CallTimeout", "NodeWorker", "WorkerGone"]
