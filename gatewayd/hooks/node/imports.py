"""Importing JS/TS hooks into a Node worker: one at a time, each bounded, a stuck one remembered.

The worker imports the hooks of a load one after the other and announces each import as it
begins (``worker.mjs``), so the hook at fault is always known:

* an import that never settles (``await new Promise(() => {})``) is answered ``stuck`` by the
  worker itself after the bound, and the next import starts: no other hook waits longer;
* one that never yields (top-level code that loops) keeps the worker from answering at all: once
  it ran ``timeout_s`` plus :data:`IMPORT_GRACE_S` since it began, *and* the worker's main thread
  spent that long on the CPU since then (:func:`busy_left`), the worker is killed for it, and the
  hooks not imported yet are *gone*, to be imported into a fresh worker;
* one that ends the worker (``process.exit`` at the top level) is that hook's failure, the rest
  gone likewise.

:class:`StuckImports` remembers the hooks whose import overran, as the Python loader does: the
next loads fail them at once, without importing them again, until a file of the hook changes
(``changes.fingerprint``, deep). An import that overran while calls of earlier hooks were running
in the same worker is not remembered: one of those may have been what kept the worker busy.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio

from gatewayd.hooks.changes import Fingerprint, fingerprint
from gatewayd.hooks.node.hook import NodeHook
from gatewayd.hooks.node.worker import NodeWorker, WorkerGone

IMPORT_GRACE_S: Final = 1.0
"""Past the import bound, how long a worker that has not answered is given before it is taken
for blocked by the import it announced last."""
IMPORT_WALL_FACTOR: Final = 6
"""A busy import is given the bound in CPU time, but never more than this many times the bound
by the clock (a worker stopped or starved for good still fails its import)."""
_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Imported:
    """What one round of imports into one worker did."""

    errors: dict[NodeHook, str] = field(default_factory=dict)
    """Hook -> why its import failed, its own fault or not (see :attr:`gone`)."""
    gone: set[NodeHook] = field(default_factory=set)
    """The hooks not imported because the worker died or was killed for another hook."""
    stuck: set[NodeHook] = field(default_factory=set)
    """The hooks whose import overran, known to be at fault (for :class:`StuckImports`)."""


def stuck_message(hook: NodeHook, timeout_s: float) -> str:
    return (
        f"{hook.file}: import did not finish within {timeout_s:g} s "
        "(top-level code that never settles?)"
    )


async def import_hooks(
    worker: NodeWorker, hooks: list[NodeHook], tag: str, timeout_s: float
) -> Imported:
    """Import ``hooks`` into ``worker`` (module graphs tagged ``tag``), each within
    ``timeout_s``; see the module docstring."""
    done = Imported()
    requests: list[tuple[NodeHook, int, asyncio.Future[dict[str, Any]]]] = []
    for hook in hooks:
        spec = {**hook.wire(), "id": hook.id, "tag": tag}
        message = {"op": "load", "hook": spec, "timeoutMs": round(timeout_s * 1000)}
        try:
            future = worker.request(message)
        except WorkerGone as exc:  # died since it said ready
            done.errors[hook] = f"{hook.file}: import failed: {exc}"
            done.gone.add(hook)
        else:
            requests.append((hook, worker.last_request_id, future))
    try:
        await _answers(worker, requests, done, timeout_s)
    finally:
        for _, request_id, _ in requests:
            worker.importing.pop(request_id, None)
    worker.generations += 1
    if worker.generations == 1:
        worker.first_rss = worker.rss
    return done


async def _answers(
    worker: NodeWorker,
    requests: list[tuple[NodeHook, int, asyncio.Future[dict[str, Any]]]],
    done: Imported,
    timeout_s: float,
) -> None:
    for index, (hook, request_id, future) in enumerate(requests):
        try:
            outcome, began = await _answer(worker, request_id, future, timeout_s)
        except WorkerGone as exc:  # it ended the worker (process.exit), or something else did
            done.errors[hook] = f"{hook.file}: import failed: {exc}"
            if worker.importing.get(request_id) is None:
                done.gone.add(hook)
        else:
            if outcome is not None:
                _apply(worker, hook, outcome, done, timeout_s)
                continue
            if began:  # it kept the worker busy past its bound: its own fault
                calls = worker.in_flight - (len(requests) - index)
                worker.kill(
                    f"the node worker was killed: importing {hook.name} took over {timeout_s:g} s"
                )
                done.errors[hook] = stuck_message(hook, timeout_s)
                if calls <= 0:
                    done.stuck.add(hook)
            else:  # busy before it began: with a call of an earlier load
                worker.kill(
                    f"the node worker was killed: it did not begin importing {hook.name} "
                    f"within {timeout_s:g} s (a call kept it busy?)"
                )
                done.errors[hook] = f"{hook.file}: import failed: {worker.kill_reason}"
                done.gone.add(hook)
        for _, _, pending in requests[index:]:
            worker.forget(pending)
        reason = worker.kill_reason or worker.exit_reason or "the node worker died"
        for rest, _, _ in requests[index + 1 :]:
            done.errors[rest] = f"{rest.file}: import failed: {reason}"
            done.gone.add(rest)
        return


async def _answer(
    worker: NodeWorker, request_id: int, future: asyncio.Future[dict[str, Any]], timeout_s: float
) -> tuple[dict[str, Any] | None, bool]:
    """The reply to a load (None when the worker is blocked) and whether its import began.

    The bound counts from the import's announcement, or, before that, from now: the worker
    answers the loads one at a time, so a load waits for the ones before it first."""
    loop = asyncio.get_running_loop()
    waited_since = loop.time()
    cpu_since = main_thread_cpu(worker.pid)
    bound = timeout_s + IMPORT_GRACE_S
    while not future.done():
        began = worker.importing.get(request_id)
        start = waited_since if began is None else began
        left = busy_left(worker.pid, cpu_since, loop.time() - start, bound)
        if left <= 0:
            return None, began is not None
        await asyncio.wait({future}, timeout=left)
        if began is None and worker.importing.get(request_id) is not None:
            waited_since = loop.time()  # it began meanwhile: its own bound from then
            cpu_since = main_thread_cpu(worker.pid)
    return future.result(), True


def busy_left(pid: int | None, cpu_since: float | None, waited: float, bound: float) -> float:
    """How much longer a worker that has not answered for ``waited`` seconds is given.

    A worker that does not answer is busy on the main thread: compiling and evaluating the
    import's module graph, or looping. Node loads a graph synchronously (the event loop does not
    turn until the whole graph is evaluated), and OpenClaw's own bundled hooks import 4,300
    modules (36 MB of JavaScript) from its ``dist``: 4 to 5 s of CPU, which a loaded machine
    stretches to 30 s and more by the clock. So the bound is on the CPU time the worker's main
    thread spent since ``cpu_since`` (read where Linux's ``/proc`` says it, else the clock's
    ``waited`` stands for it), capped by the clock at :data:`IMPORT_WALL_FACTOR` times the
    bound. A loop spends its CPU as fast as the machine gives it, and is killed at the bound."""
    if waited < bound:
        return bound - waited
    cap = bound * IMPORT_WALL_FACTOR - waited
    spent = main_thread_cpu(pid)
    if cap <= 0 or spent is None or cpu_since is None:
        return 0.0
    return min(cap, bound - (spent - cpu_since))


def main_thread_cpu(pid: int | None) -> float | None:
    """CPU seconds (user and system) the main thread of process ``pid`` has used, or None where
    ``/proc`` cannot say (not Linux, the process gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces and parentheses): state is the
    # first, utime and stime the 12th and 13th (proc(5)'s fields 14 and 15).
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (IndexError, ValueError):
        return None


def _apply(
    worker: NodeWorker, hook: NodeHook, reply: dict[str, Any], done: Imported, timeout_s: float
) -> None:
    if isinstance(rss := reply.get("rss"), int):
        worker.rss = rss
    if reply.get("stuck"):
        done.errors[hook] = stuck_message(hook, timeout_s)
        done.stuck.add(hook)
    elif not reply.get("ok"):
        done.errors[hook] = f"{hook.file}: import failed: {reply.get('error')}"
    elif hook.events:
        hook.events_found = tuple(str(n) for n in reply.get("events") or ())
        hook.description = str(reply.get("description") or "")


@dataclass(frozen=True, slots=True)
class _Stuck:
    message: str
    sources: str
    """The hook's directory, or a single-file hook's file."""
    stamp: Fingerprint


class StuckImports:
    """The hooks whose import overran, by handler file, until a file of the hook changes."""

    def __init__(self) -> None:
        self._stuck: dict[Path, _Stuck] = {}

    async def held(self, hooks: list[NodeHook]) -> dict[NodeHook, str]:
        """The hooks of ``hooks`` still remembered (their files as they were), each with the
        reason it fails without being imported; forgets the others."""
        known = [hook for hook in hooks if hook.file in self._stuck]
        if not known:
            return {}
        sources = [self._stuck[h.file].sources for h in known]
        stamps = await anyio.to_thread.run_sync(lambda: [_deep_fingerprint(s) for s in sources])
        held: dict[NodeHook, str] = {}
        for hook, stamp in zip(known, stamps, strict=True):
            stuck = self._stuck[hook.file]
            if stamp == stuck.stamp:
                held[hook] = stuck.message
            else:
                del self._stuck[hook.file]
        return held

    async def remember(self, hooks: set[NodeHook], timeout_s: float) -> None:
        """Remember ``hooks``, whose import just overran."""
        for hook in hooks:
            sources = str(hook.file if hook.events else hook.file.parent)
            stamp = await anyio.to_thread.run_sync(_deep_fingerprint, sources)
            message = (
                f"{stuck_message(hook, timeout_s)} in an earlier load (imported again once a "
                "file of the hook changes)"
            )
            self._stuck[hook.file] = _Stuck(message, sources, stamp)


def _deep_fingerprint(sources: str) -> Fingerprint:
    return fingerprint(sources, deep=True)
