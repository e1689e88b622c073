"""The Node workers of the daemon: started (a spare kept ready), served, checked for a hang.

:class:`WorkerPool` runs every worker in a task group of its own (cancelling it kills them all)
and tells its owner (``runtime.py``) when one exits while the daemon runs: what happens next (a
restart, nothing) is the owner's to decide. A fresh worker is the *spare* when one is ready:
started ahead of time, its Node started and its type stripper warmed.

A hook's call that outlived its timeout gets its worker pinged (:meth:`WorkerPool.check_hung`);
one that does not answer within :data:`HANG_GRACE_S` is hung and killed. Meanwhile
:attr:`NodeWorker.suspect` holds new calls back, so the next hook of the same event is not sent
into a worker about to be killed.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, TypeVarTuple

import anyio
import anyio.abc
import structlog

from gatewayd.hooks.node.channel import Reply
from gatewayd.hooks.node.resolve import NodeBinary
from gatewayd.hooks.node.worker import NodeWorker, WorkerGone

log = structlog.get_logger("gatewayd.hooks.node")
hook_log = structlog.get_logger("gatewayd.hooks")
"""``hook.console`` lines, as Python handlers' output is logged."""

HANG_GRACE_S: Final = 1.0
"""After a timeout, how long the worker has to answer a ping before it is killed as hung."""
_Args = TypeVarTuple("_Args")
SPARE_WAIT_S: Final = 30.0
"""How long a load waits for the spare to finish starting before it starts a worker itself."""


@dataclass
class _Spare:
    worker: NodeWorker
    started: anyio.Event = field(default_factory=anyio.Event)


def _on_log(hook: str | None, level: str, text: str) -> None:
    method = {
        "debug": hook_log.debug,
        "warning": hook_log.warning,
        "error": hook_log.error,
    }.get(level, hook_log.info)
    method("hook.console", hook=hook, text=text)


class WorkerPool:
    """Starts and serves the workers; ``on_exit(worker)`` is told when one exits on its own or
    is killed (not when the pool is cancelled). Run :meth:`run` in the gateway's task group."""

    def __init__(
        self,
        on_exit: Callable[[NodeWorker], None],
        on_gateway: Callable[[NodeWorker, Reply], None] | None = None,
    ) -> None:
        self._on_exit = on_exit
        self._on_gateway = on_gateway
        self._tg: anyio.abc.TaskGroup | None = None
        self._spare: _Spare | None = None

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; cancelling kills every worker."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None

    @property
    def running(self) -> bool:
        return self._tg is not None

    @property
    def spare(self) -> NodeWorker | None:
        return self._spare.worker if self._spare is not None else None

    def start_soon(
        self, fn: Callable[[*_Args], Coroutine[Any, Any, object]], *args: *_Args
    ) -> None:
        """Run ``fn(*args)`` in the pool's task group (it dies with the workers)."""
        assert self._tg is not None, "NodeRuntime.run() is not running"
        self._tg.start_soon(fn, *args)

    async def _serve(self, worker: NodeWorker, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        cancelled = False
        try:
            await worker.serve(task_status=task_status)
        except anyio.get_cancelled_exc_class():
            cancelled = True  # the daemon is stopping: the worker dies with it, no restart
            raise
        finally:
            if not cancelled:
                self._on_exit(worker)

    async def start(self, binary: NodeBinary, typescript: bool) -> NodeWorker:
        """A new worker, once it is ready; raises :class:`WorkerGone` when it could not start."""
        assert self._tg is not None, "NodeRuntime.run() is not running"
        worker = self._new(binary, typescript)
        await self._tg.start(self._serve, worker)
        return worker

    def _new(self, binary: NodeBinary, typescript: bool) -> NodeWorker:
        worker = NodeWorker(binary, typescript=typescript, on_log=_on_log)
        worker.on_gateway = self._on_gateway
        return worker

    async def take(self, binary: NodeBinary, typescript: bool) -> NodeWorker:
        """A ready worker: the spare when it fits, else a new one (:meth:`start`)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            if spare.worker.binary == binary and spare.worker.typescript >= typescript:
                with anyio.move_on_after(SPARE_WAIT_S):
                    await spare.started.wait()
                if spare.worker.alive:
                    return spare.worker
            else:
                await spare.worker.stop()
        return await self.start(binary, typescript)

    def start_spare(self, binary: NodeBinary, typescript: bool) -> None:
        """Start the spare, unless there is one."""
        if self._tg is None or self._spare is not None:
            return
        spare = self._spare = _Spare(self._new(binary, typescript))

        async def warm() -> None:
            assert self._tg is not None
            try:
                await self._tg.start(self._serve, spare.worker)
            except WorkerGone as exc:
                log.warning("node.spare_failed", reason=str(exc))
            finally:
                spare.started.set()

        self._tg.start_soon(warm)

    def stop_spare(self) -> None:
        """Stop the spare, if any (no JS/TS hooks are loaded any more)."""
        spare, self._spare = self._spare, None
        if spare is not None and self._tg is not None:
            self._tg.start_soon(spare.worker.stop)

    def check_hung(self, worker: NodeWorker, hook: str, timeout_s: float) -> None:
        """After hook ``hook`` timed out: kill ``worker`` if it does not answer a ping in time.
        Meanwhile :attr:`NodeWorker.suspect` holds new calls back (``Generation.call``)."""
        if self._tg is None or worker.suspect is not None or not worker.alive:
            return
        verdict = worker.suspect = anyio.Event()

        async def check() -> None:
            try:
                future = worker.request({"op": "ping"})
                with anyio.move_on_after(HANG_GRACE_S):
                    await future
                    return
                worker.forget(future)
                worker.kill(
                    f"the node worker was killed: it stopped answering after hook {hook!r} "
                    f"ran past its {round(timeout_s * 1000)} ms timeout"
                )
            except WorkerGone:
                return
            finally:
                worker.suspect = None
                verdict.set()

        self._tg.start_soon(check)
