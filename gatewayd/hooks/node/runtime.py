"""The Node runtime: generations of JS/TS hooks, the workers that run them, kept alive and replaced.

A *generation* (``generation.py``, which also makes its calls) is the set of JS/TS hooks of one
load, each imported with a module graph of its own (never a module of an earlier load).
:meth:`NodeRuntime.load` imports a set of hooks into a new generation. It goes into the worker
of the current generation when that worker can reload in place (``worker.mjs``: a tagged module
graph per generation, Node 22.15+), so a reload costs the hooks' own imports and nothing else;
into a fresh worker otherwise: on an older Node, when a file the worker loaded from
``node_modules`` changed on disk, or when the worker is due to be
*recycled* (ESM modules are never unloaded, so a worker is replaced after
:data:`RECYCLE_GENERATIONS` generations or :data:`RECYCLE_GROWTH_BYTES` of growth, which keeps
its memory bounded however often hooks are edited). The workers themselves (starting them, the
*spare* started ahead of time, serving them, the hang check) are ``pool.py``'s.
:meth:`NodeRuntime.reimport` starts the next load of the current generation's hooks before a
reload has rebuilt its hook list, and the reload's :meth:`NodeRuntime.load` takes it when it asks
for the same hooks (so a watched save of a ``.ts`` file imports while the Python side rebuilds).
:meth:`NodeRuntime.activate` makes a generation current and retires the previous one: once none
of its calls is in flight, its handlers are dropped from a worker that stays in use, or its
worker is stopped.

Imports (``imports.py``): a load's hooks are imported into its worker one at a time, each
bounded by :data:`LOAD_TIMEOUT_S`, so that only the hook at fault fails: an import that never
settles is answered stuck by the worker, one that keeps the worker busy gets it killed and the
hooks after it go into a fresh worker. A hook whose import overran is failed at once by the
next loads, without being imported, until a file of the hook changes.

Failures: a call answered with an error is that hook's error. A call that outlives its timeout is
a timeout, and the worker is then checked for a hang (``WorkerPool.check_hung``). A killed or
crashed worker
fails the calls in flight, each with the reason; the generation then starts a new worker and
loads the same hooks into it (with a back-off if it keeps dying), and calls wait for it within
their own timeouts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Final

import anyio
import anyio.abc
import structlog

from gatewayd.hooks.node.gateway import NodeGateway
from gatewayd.hooks.node.generation import EarlyLoad, Generation
from gatewayd.hooks.node.hook import NodeHook
from gatewayd.hooks.node.imports import StuckImports
from gatewayd.hooks.node.pool import WorkerPool
from gatewayd.hooks.node.resolve import NodeBinary
from gatewayd.hooks.node.worker import NodeWorker, WorkerGone

log = structlog.get_logger("gatewayd.hooks.node")

LOAD_TIMEOUT_S: Final = 10.0
"""How long one hook's module may take to import (its top-level code included)."""
RETIRE_IDLE_S: Final = 1.0
"""A replaced generation's worker stops after this long without calls (or at the next reload)."""
RETIRE_MAX_S: Final = 120.0
RESTART_BACKOFF_S: Final = (0.0, 0.1, 0.5, 2.0, 5.0)
RECYCLE_GENERATIONS: Final = 100
"""A worker that reloads in place is replaced by a fresh one after this many generations..."""
RECYCLE_GROWTH_BYTES: Final = 64 << 20
"""...or once its resident set has grown this much since its first generation."""


def _due(worker: NodeWorker) -> bool:
    """Whether ``worker`` has loaded enough generations in place to be replaced."""
    grown = worker.rss - worker.first_rss
    return worker.generations >= RECYCLE_GENERATIONS or grown > RECYCLE_GROWTH_BYTES


class NodeRuntime:
    """Owns every Node worker of the daemon; run it in the gateway's task group."""

    def __init__(self) -> None:
        self.gateway = NodeGateway()
        """The hooks' gateway handle (``gateway.py``): the daemon sets its ``handle``."""
        self._pool = WorkerPool(self._worker_exited, self.gateway.serve)
        self._owner: dict[NodeWorker, Generation] = {}
        self.current: Generation | None = None
        self._retiring: list[Generation] = []
        self._sequence = 0
        self._loaded: Generation | None = None
        """The last generation loaded, until it is activated."""
        self._early: EarlyLoad | None = None
        """The load :meth:`reimport` started, until a :meth:`load` takes or discards it."""
        self._stuck = StuckImports()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; cancelling kills every worker."""
        await self._pool.run(task_status=task_status)

    @property
    def workers(self) -> list[NodeWorker]:
        """Every live worker: current, retiring and spare (for status and tests)."""
        found = [g.worker for g in (self.current, *self._retiring) if g is not None and g.worker]
        if (spare := self._pool.spare) is not None:
            found.append(spare)
        return [w for w in dict.fromkeys(found) if w.alive]

    # -- workers ----------------------------------------------------------------------------

    def _worker_exited(self, worker: NodeWorker) -> None:
        generation = self._owner.pop(worker, None)
        if generation is not None and generation.worker is worker:
            self._worker_gone(generation, worker)

    async def _reusable(self, binary: NodeBinary, typescript: bool) -> NodeWorker | None:
        """The current generation's worker, when the next generation can load into it."""
        worker = self.current.worker if self.current is not None else None
        if worker is None or worker.doomed or not worker.inplace or _due(worker):
            return None
        if worker.binary != binary or worker.typescript < typescript:
            return None
        try:
            future = worker.request({"op": "begin"})
            with anyio.move_on_after(LOAD_TIMEOUT_S):
                reply = await future
                if stale := reply.get("stale"):
                    log.info("node.fresh_worker", reason=f"{stale[0]} changed since it was loaded")
                    return None
                return worker
            worker.forget(future)  # busy beyond reason: a fresh worker it is
        except WorkerGone:
            pass
        return None

    # -- generations ------------------------------------------------------------------------

    def reimport(self) -> EarlyLoad | None:
        """Start loading the current generation's hooks again (read from disk now, each with a
        new module graph), in the background; returns that load, to be handed to :meth:`load`.

        A reload calls it before it re-reads the config and rebuilds the Python hooks, so that
        the Node imports run meanwhile: a ``.ts`` save then costs what a ``.py`` save does.
        Only when the worker reloads in place (a fresh worker is
        not started on a guess), and one early load at a time. None when none was started.
        """
        current = self.current
        worker = current.worker if current is not None else None
        if not self._pool.running or self._early is not None or current is None or worker is None:
            return None
        if worker.doomed or not worker.inplace or _due(worker):
            return None
        hooks = [
            NodeHook(h.name, h.file, h.export, h.hook_key, events=h.events) for h in current.asked
        ]
        early = self._early = EarlyLoad(current.binary, hooks)

        async def load_early() -> None:
            try:
                early.generation, early.errors = await self._load(early.binary, hooks)
            except Exception as exc:  # a bug: the reload's own load then meets it where it logs
                log.exception("node.reimport_failed", error=f"{type(exc).__name__}: {exc}")
            finally:
                early.done.set()

        self._pool.start_soon(load_early)
        return early

    async def load(
        self, binary: NodeBinary, hooks: Sequence[NodeHook], early: EarlyLoad | None = None
    ) -> tuple[Generation, dict[NodeHook, str]]:
        """Import ``hooks`` into a new generation; returns it and hook -> reason for failures.

        The hooks that loaded are bound to the generation (``hook.generation``); it serves no
        call until :meth:`activate` (calls made before wait for nothing: it is ready at once).
        ``early``: what :meth:`reimport` returned for this reload, taken as this load when it
        imported the same hooks; a load that cannot be taken is discarded, as a load whose
        reload failed is.
        """
        pending, self._early = self._early, None
        if pending is not None:
            # Not one load at a time otherwise; bounded by the load's own waits.
            await pending.done.wait()
            if pending is early and (adopted := pending.adopt(binary, hooks)) is not None:
                return adopted
        return await self._load(binary, hooks)

    async def discard(self, early: EarlyLoad) -> None:
        """Let go of ``early`` if no :meth:`load` took it (its reload failed, or found no JS/TS
        hooks to load): once it has finished, its generation is retired."""
        if self._early is not early:
            return
        self._early = None
        await early.done.wait()  # bounded by the load's own waits
        if (generation := early.generation) is not None and generation is self._loaded:
            self._loaded = None
            self._retire_soon(generation)

    async def _load(
        self, binary: NodeBinary, hooks: Sequence[NodeHook]
    ) -> tuple[Generation, dict[NodeHook, str]]:
        unused, self._loaded = self._loaded, None
        if unused is not None and unused is not self.current:  # its reload failed after the load
            self._retire_soon(unused)
        self._sequence += 1
        for index, hook in enumerate(hooks):
            hook.id = f"{self._sequence}.{index}"
        generation = Generation(self._pool, binary, hooks, str(self._sequence), LOAD_TIMEOUT_S)
        self._loaded = generation
        # A hook whose import overran in an earlier load, its files as they were, is failed
        # without being imported again (it would hold this load as long again).
        errors = await self._stuck.held(generation.hooks)
        generation.hooks = [h for h in generation.hooks if h not in errors]
        if not generation.hooks:
            return generation, errors
        worker = await self._reusable(binary, generation.typescript)
        fresh = worker is None
        if worker is None:
            try:
                worker = await self._pool.take(binary, generation.typescript)
            except WorkerGone as exc:
                return generation, {**errors, **{h: str(exc) for h in generation.hooks}}
        every = generation.hooks
        own = await self._import_round(generation, worker)
        progress = bool(own) or not fresh
        while worker.doomed and progress:
            # It died under the imports (a top-level process.exit, or a crash of a call it ran
            # meanwhile) or was killed for an import that kept it busy: every hook that did not
            # fail on its own account (those loaded into it too) goes into a fresh worker. Each
            # round fails the next hook at fault, until a worker survives its imports.
            retry = [h for h in every if h not in own]
            if not retry:
                break
            generation.hooks = retry
            try:
                worker = await self._pool.take(binary, generation.typescript)
            except WorkerGone as exc:
                return generation, {**errors, **own, **{h: str(exc) for h in retry}}
            fresh = True
            found = await self._import_round(generation, worker)
            own.update(found)
            progress = bool(found)
        errors.update(own)
        if worker.doomed:
            reason = worker.exit_reason or worker.kill_reason
            return generation, {h: errors.get(h) or f"{h.file}: {reason}" for h in hooks}
        generation.hooks = [h for h in generation.hooks if h not in errors]
        if not generation.hooks:  # nothing to run: no worker to keep
            if fresh:
                await worker.stop()
            return generation, errors
        for hook in generation.hooks:
            hook.generation = generation
        generation.ids = [hook.id for hook in generation.hooks]
        generation.worker = worker
        if fresh:
            self._owner[worker] = generation
        generation.ready.set()
        return generation, errors

    async def _import_round(
        self, generation: Generation, worker: NodeWorker
    ) -> dict[NodeHook, str]:
        """Import ``generation.hooks`` into ``worker``; the failures that are the hooks' own
        (not :attr:`Generation.gone`); stuck ones are remembered."""
        errors = await generation.import_into(worker)
        await self._stuck.remember(generation.stuck, LOAD_TIMEOUT_S)
        return {h: e for h, e in errors.items() if h not in generation.gone}

    def activate(self, generation: Generation | None) -> None:
        """Make ``generation`` current (None: no JS hooks); retire the one it replaces."""
        if self._loaded is generation:
            self._loaded = None
        if generation is not None and generation.worker is None:
            generation = None
        previous, self.current = self.current, generation
        if generation is not None and generation.worker is not None:
            # A worker answers for (restarts with, is stopped with) its newest generation.
            if generation.worker.alive:
                self._owner[generation.worker] = generation
            elif generation.ready.is_set():  # it died since the load, and nobody restarts it
                self._worker_gone(generation, generation.worker)
        if previous is not None and previous is not generation:
            for older in self._retiring:
                older.superseded = True
            self._retire_soon(previous)
        if generation is not None:
            worker = generation.worker
            if worker is None or not worker.inplace or _due(worker):
                self._pool.start_spare(generation.binary, generation.typescript)
        else:
            self._pool.stop_spare()

    def _retire_soon(self, generation: Generation) -> None:
        self._retiring.append(generation)
        generation.retired = True
        if self._pool.running:
            self._pool.start_soon(self._retire, generation)
        else:
            self._retiring.remove(generation)

    async def _retire(self, generation: Generation) -> None:
        """Once idle: drop its handlers from a worker a newer generation uses, else stop it."""
        began = time.monotonic()
        idle_since: float | None = None
        while (worker := generation.worker) is not None and worker.alive:
            now = time.monotonic()
            stopping = self._owner.get(worker) is generation
            if worker.in_flight if stopping else generation.in_flight:
                idle_since = None
            else:
                idle_since = idle_since or now
                if generation.superseded or now - idle_since >= RETIRE_IDLE_S:
                    break
            if now - began >= RETIRE_MAX_S:
                break
            await anyio.sleep(0.02)
        worker = generation.worker
        if worker is not None and self._owner.get(worker) is generation:
            await worker.stop()
        elif worker is not None and worker.alive:
            with contextlib.suppress(WorkerGone):
                worker.drop(generation.ids)
        self._retiring.remove(generation)

    # -- failures ---------------------------------------------------------------------------

    def _worker_gone(self, generation: Generation, worker: NodeWorker) -> None:
        if generation.retired or not self._pool.running:
            return
        if time.monotonic() - worker.started_at > 60:
            generation.restarts = 0  # it had been healthy: this is not a crash loop
        log.error(
            "node.worker_exited",
            pid=worker.pid,
            reason=worker.exit_reason,
            hooks=[h.name for h in generation.hooks],
            action="restarting it",
        )
        generation.ready = anyio.Event()
        self._pool.start_soon(self._restart, generation)

    async def _restart(self, generation: Generation) -> None:
        delay = RESTART_BACKOFF_S[min(generation.restarts, len(RESTART_BACKOFF_S) - 1)]
        generation.restarts += 1
        await anyio.sleep(delay)
        if generation.retired:
            generation.ready.set()
            return
        try:
            worker = await self._pool.start(generation.binary, generation.typescript)
        except WorkerGone as exc:
            log.error("node.restart_failed", reason=str(exc))
            generation.ready.set()
            self._pool.start_soon(self._restart, generation)
            return
        errors = await generation.import_into(worker)
        for hook, reason in errors.items():
            log.error("node.reimport_failed", hook=hook.name, reason=reason)
        generation.worker = worker
        self._owner[worker] = generation
        generation.ready.set()
        log.info("node.worker_restarted", pid=worker.pid, restarts=generation.restarts)
