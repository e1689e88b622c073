"""Watcher latency: from saving a hook file to the watcher asking for a reload.

Two ways of saving, 30 times each (after one warm-up save): a write in place (``write_text``),
and a rename-save as vim and most editors do it (write ``handler.py.tmp``, ``os.replace`` it over
``handler.py``). Timed from the start of the save to the callback, in one uvloop event loop.

Baselines, same files, same loop: ``watchfiles.awatch`` with the ``step`` gatewayd asks of it
(``WATCH_STEP_MS``) and with its default ``step=50``, timed to the first change set it yields.
gatewayd's ``HookWatcher`` (default ``WatchSpec``) adds the noise filter, root re-checks and
``hooks.load.debounceMs`` of quiet before it calls ``on_change``.

Also timed: how long each watcher takes to stop, since the daemon's shutdown waits for it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio
import watchfiles

from bench.harness import Figure, Scale, Section, main, median, progress, spread
from bench.workload import write_hook
from gatewayd.hooks.watcher import WATCH_STEP_MS, HookWatcher, WatchSpec

GAP_S = 0.06
"""Quiet time after each callback before the next save, so saves never coalesce."""
WAIT_S = 5.0

Save = Callable[[Path, int], None]


def write_in_place(path: Path, n: int) -> None:
    path.write_text(f"async def handler(event):\n    event.messages.append('v{n}')\n")


def rename_save(path: Path, n: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"async def handler(event):\n    event.messages.append('v{n}')\n")
    os.replace(tmp, path)


SAVES: dict[str, Save] = {"write": write_in_place, "rename": rename_save}


class Signal:
    """The time of the first callback since :meth:`arm`."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.event = anyio.Event()

    def arm(self) -> None:
        self.at = None
        self.event = anyio.Event()

    def fire(self) -> None:
        if self.at is None:
            self.at = perf_counter()
            self.event.set()


Starter = Callable[[anyio.abc.TaskGroup, Signal], Awaitable[anyio.Event | None]]
"""Starts a watcher in the task group; returns the event that stops it, if it has one."""


async def measure(
    start_watcher: Starter, path: Path, kinds: list[str], edits: int
) -> tuple[dict[str, list[float]], float]:
    """Latencies per save kind, and how long the watcher took to stop once told to."""
    signal = Signal()
    latencies: dict[str, list[float]] = {kind: [] for kind in kinds}
    async with anyio.create_task_group() as tg:
        stop = await start_watcher(tg, signal)
        await anyio.sleep(0.2)  # let the inotify watches settle
        for kind in kinds:
            save = SAVES[kind]
            for n in range(edits + 1):
                signal.arm()
                start = perf_counter()
                save(path, n)
                with anyio.fail_after(WAIT_S):
                    await signal.event.wait()
                assert signal.at is not None
                if n:  # the first save is a warm-up
                    latencies[kind].append(signal.at - start)
                await anyio.sleep(GAP_S)
        stopping = perf_counter()
        if stop is not None:
            stop.set()
        else:
            tg.cancel_scope.cancel()
    return latencies, perf_counter() - stopping


def raw_watchfiles(root: Path, step: int) -> Starter:
    async def start(tg: anyio.abc.TaskGroup, signal: Signal) -> anyio.Event:
        stop = anyio.Event()

        async def loop() -> None:
            async for _ in watchfiles.awatch(root, watch_filter=None, step=step, stop_event=stop):
                signal.fire()

        tg.start_soon(loop)
        return stop

    return start


def hook_watcher(root: Path) -> Starter:
    async def start(tg: anyio.abc.TaskGroup, signal: Signal) -> None:
        async def on_change(paths: frozenset[Path]) -> None:
            signal.fire()

        watcher = HookWatcher(WatchSpec(roots=(root,)), on_change)
        tg.start_soon(watcher.run)

    return start


async def measure_all(root: Path, edits: int) -> dict[str, list[float]]:
    path = write_hook(root, "watched") / "handler.py"
    plan: list[tuple[str, Starter, list[str]]] = [
        ("watchfiles.step50", raw_watchfiles(root, 50), ["write"]),
        ("watchfiles.step", raw_watchfiles(root, WATCH_STEP_MS), ["write", "rename"]),
        ("gatewayd", hook_watcher(root), ["write", "rename"]),
    ]
    results: dict[str, list[float]] = {}
    for name, start, kinds in plan:
        progress(f"watch: {name}, {' + '.join(kinds)}")
        latencies, stopped = await measure(start, path, kinds, edits)
        for kind, values in latencies.items():
            results[f"{name}.{kind}"] = values
        results[f"{name}.stop"] = [stopped]
    return results


def run(scale: Scale) -> Section:
    edits = scale.pick(30, 2)
    section = Section("watch", "Watcher latency (save -> reload requested)")
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        results = anyio.run(
            measure_all, Path(tmp), edits, backend="asyncio", backend_options={"use_uvloop": True}
        )

    def fig(key: str, label: str, vs: list[str] | None = None, **kw: Any) -> Figure:
        values = results[key]
        return section.add(
            Figure(
                key,
                label,
                median(values) * 1000,
                "ms",
                "lower",
                vs=vs or [],
                detail=spread(values, 1000),
                **kw,
            )
        )

    fig("watchfiles.step50.write", "watchfiles step=50")
    fig("watchfiles.step.write", f"watchfiles step={WATCH_STEP_MS}")
    fig("watchfiles.step.rename", f"watchfiles step={WATCH_STEP_MS}")
    fig(
        "gatewayd.write",
        "HookWatcher, write in place, p50",
        vs=["watchfiles.step.write", "watchfiles.step50.write"],
        headline=True,
    )
    fig("gatewayd.rename", "HookWatcher, rename-save, p50", vs=["watchfiles.step.rename"])
    fig("watchfiles.step.stop", "awatch told by its stop_event")
    fig(
        "gatewayd.stop",
        "HookWatcher stop on cancellation (daemon shutdown)",
        vs=["watchfiles.step.stop"],
    )
    section.notes.append(
        f"{edits} saves per variant after a warm-up save, {GAP_S * 1000:.0f} ms apart; "
        f"HookWatcher includes hooks.load.debounceMs = {WatchSpec(roots=()).debounce_ms} ms "
        "of quiet by design."
    )
    return section


if __name__ == "__main__":
    main(run)
