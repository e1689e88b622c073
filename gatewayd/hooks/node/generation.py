"""A generation: the JS/TS hooks of one load, the worker that runs them, and their calls.

:class:`Generation` holds the hooks of one load with the worker that runs them and makes their
calls (:meth:`Generation.call`): each within its timeout, a worker being pinged for a hang
waited out first (``WorkerPool.check_hung``), the worker's replacement waited for after a crash.
:class:`EarlyLoad` is a load started ahead of the reload that will ask for it. The runtime
(``runtime.py``) makes generations, activates, retires and restarts them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import Handler
from gatewayd.hooks.node.gateway import remember_cause
from gatewayd.hooks.node.hook import (
    NodeHook,
    apply_reply,
    encode_call_event,
    report_error,
    report_timeout_of,
)
from gatewayd.hooks.node.imports import import_hooks
from gatewayd.hooks.node.pool import WorkerPool
from gatewayd.hooks.node.resolve import TS_SUFFIXES, NodeBinary
from gatewayd.hooks.node.worker import CallTimeout, NodeWorker, WorkerGone
from gatewayd.hooks.runners import Outcome


class Generation:
    """The hooks of one load and the worker that runs them (replaced if it dies)."""

    def __init__(
        self,
        pool: WorkerPool,
        binary: NodeBinary,
        hooks: Sequence[NodeHook],
        tag: str,
        load_timeout_s: float,
    ):
        self.pool = pool
        self.binary = binary
        self.hooks = list(hooks)
        self.asked = tuple(hooks)
        """Every hook its load asked for, the ones whose import failed too (:attr:`hooks` keeps
        those that loaded)."""
        self.tag = tag
        """In the URL of each of its modules (``worker.mjs``): its module graph is its own."""
        self.load_timeout_s = load_timeout_s
        """How long one hook's import may take."""
        self.typescript = any(h.file.suffix in TS_SUFFIXES for h in hooks)
        self.in_flight = 0
        self.gone: set[NodeHook] = set()
        """The hooks whose import failed only because the worker died under it."""
        self.stuck: set[NodeHook] = set()
        """The hooks whose last import overran, each its own fault."""
        self.ids: list[str] = []
        """Its hooks' ids in its worker (taken when loaded: a hook object may be loaded again)."""
        self.worker: NodeWorker | None = None
        self.ready = anyio.Event()
        self.retired = False
        self.superseded = False
        self.restarts = 0

    async def import_into(self, worker: NodeWorker) -> dict[NodeHook, str]:
        """Import every hook into ``worker`` (``imports.import_hooks``); returns hook -> error
        for the failures. :attr:`gone` is left holding those that failed only because the
        worker died or was killed for another hook, :attr:`stuck` those whose import overran."""
        done = await import_hooks(worker, self.hooks, self.tag, self.load_timeout_s)
        self.gone, self.stuck = done.gone, done.stuck
        return done.errors

    async def call(
        self,
        hook: NodeHook,
        event: HookEvent,
        timeout_s: float,
        target: bytes,
        counted: Handler | None,
    ) -> Outcome:
        """Run ``hook`` (``target``: its id in the worker, or its events-map entry's, for a
        single-file hook) on ``event`` in this generation's worker within ``timeout_s``;
        failures are counted on ``counted``.

        The usual case (a live worker) costs no timer and no cancel scope: the worker fails the
        reply future with :class:`CallTimeout` when the time is up.
        """
        left = timeout_s
        worker = self.worker
        if worker is None or worker.suspect is not None or worker.exit_reason is not None:
            found = await self._wait_for_worker(timeout_s)
            if isinstance(found, str):
                return report_error(hook, event, found, counted)
            if found is None:
                return report_timeout_of(hook, event, timeout_s, counted)
            worker, left = found
        cfg = event.context.get("cfg")
        cfg_json = None if cfg is None else hook.cfg_json(cfg)
        event_json, opaque = encode_call_event(event, cfg_json is not None)
        self.in_flight += 1
        try:
            future = worker.call(target, event_json, cfg_json, left)
            remember_cause(worker, worker.last_request_id)
            reply = await future
        except WorkerGone as exc:
            return report_error(hook, event, str(exc), counted)
        except CallTimeout:
            self.pool.check_hung(worker, hook.name, timeout_s)
            return report_timeout_of(hook, event, timeout_s, counted)
        except ValueError as exc:  # too large to send
            return report_error(hook, event, str(exc), counted)
        finally:
            self.in_flight -= 1
        if reply.get("ok") is not True:
            return report_error(hook, event, str(reply.get("error")), counted)
        if len(reply) > 2:  # more than {id, ok}: something changed
            apply_reply(event, reply, opaque, hook.name)
        return _OK

    async def _wait_for_worker(self, timeout_s: float) -> tuple[NodeWorker, float] | str | None:
        """A live worker once there is one (its replacement, after a crash), with what is left
        of ``timeout_s``; the reason when there will be none; None when ``timeout_s`` ran out
        first.

        Also when a call ran past its timeout there and the worker may be hung: sent to it now,
        a call would fail with it when it is killed (the next hook of the same event, most
        often); it waits for the verdict, and for the new worker.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        with anyio.move_on_after(timeout_s):
            if not self.ready.is_set():
                await self.ready.wait()
            worker = self.worker
            if worker is not None and worker.suspect is not None:
                await worker.suspect.wait()
            while worker is not None and worker.doomed and not self.retired:
                # It died a moment ago and its replacement is on the way: wait for it.
                await anyio.sleep(0.01)
                if not self.ready.is_set():
                    await self.ready.wait()
                worker = self.worker
            if worker is None or not worker.alive:
                reason = worker.exit_reason if worker is not None else None
                return reason or "no node worker is running its hooks"
            return worker, max(0.0, deadline - loop.time())
        return None


_OK: Final = Outcome.OK


@dataclass(eq=False)
class EarlyLoad:
    """A load started by :meth:`NodeRuntime.reimport`, ahead of the build that will ask for it."""

    binary: NodeBinary
    hooks: list[NodeHook]
    """Stand-ins for the hooks of the current generation's load (the build makes its own)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    generation: Generation | None = None
    errors: dict[NodeHook, str] = field(default_factory=dict)

    def adopt(
        self, binary: NodeBinary, hooks: Sequence[NodeHook]
    ) -> tuple[Generation, dict[NodeHook, str]] | None:
        """This load as the load of ``hooks``, or None when they are not what it imported (a
        hook added, removed or changed in name, file, export or kind, or another Node)."""
        generation = self.generation
        if (
            generation is None
            or binary != self.binary
            or [h.wire() for h in hooks] != [h.wire() for h in self.hooks]
        ):
            return None
        own = dict(zip(self.hooks, hooks, strict=True))
        for stand_in, hook in own.items():
            hook.id, hook.generation = stand_in.id, stand_in.generation
            hook.events_found, hook.description = stand_in.events_found, stand_in.description
        generation.hooks = [own[h] for h in generation.hooks]
        generation.asked = tuple(hooks)
        return generation, {own[h]: reason for h, reason in self.errors.items()}
