"""Benchmark 5: startup and footprint.

``gatewayd run`` (default config: the 4 bundled hooks, uvloop) is started repeatedly as systemd
would start it, with ``NOTIFY_SOCKET`` set; each start is timed from spawn to ``READY=1`` (sent
once every channel listens; the 250 ms ``gateway:startup`` delay comes after it). Once the startup
hook has fired, the idle RSS is read from ``/proc/<pid>/status``, ``gatewayd status`` is timed
against it, and ``SIGTERM`` to exit is timed.

Baselines, same run: ``python -c pass`` (the interpreter), the import of gatewayd's daemon
dependencies, and ``reference/minimal_daemon.py`` (those imports + a uvloop loop + a listening
Unix socket + ``READY=1``) for start, RSS and stop; for the client command, a Python one-liner
that sends ``status`` to the same daemon with nothing but the standard library.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    PYTHON,
    Figure,
    Scale,
    Section,
    Target,
    main,
    median,
    progress,
    spread,
    wall_times,
)
from bench.process import Daemon, gatewayd, minimal
from bench.workload import env_for, make_state, write_config

DEPENDENCIES = "anyio, uvloop, watchfiles, structlog, yaml, pydantic, pydantic_settings"
HEAVY = frozenset(DEPENDENCIES.replace(" ", "").split(",")) | {"gatewayd.server", "ruamel"}
SETTLE_S = 0.6
"""Wait after READY=1 before reading RSS: the startup hook fires 250 ms after READY."""

CLIENT_FLOOR = (
    "import json, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    's.sendall(b\'{"id": 1, "op": "status"}\\n\'); s.recv(65536)'
)


def client_imports(env: dict[str, str]) -> list[str]:
    """Modules ``gatewayd status`` imports (``-X importtime``) that belong to the daemon stack."""
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "gatewayd", "status"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return sorted(n for n in names if n.split(".")[0] in HEAVY or n in HEAVY)


def one_start(daemon: Daemon, client_runs: int, env: dict[str, str]) -> dict[str, Any]:
    """Start ``daemon`` and time its start, RSS and stop; with ``client_runs``, also
    ``gatewayd status`` and the stdlib one-liner against it, that many times each, alternated
    (after one warm-up each), so that both see the same moments of the machine's load: five of
    one then five of the other put the ratio anywhere in 1.14-1.68x on a quiet machine."""
    with daemon:
        time.sleep(SETTLE_S)
        out: dict[str, Any] = {
            "ready": daemon.ready_s,
            "rss": daemon.rss_mib(),
            "rss_tree": daemon.rss_tree_mib(),
        }
        if client_runs:
            status = [str(Path(PYTHON).with_name("gatewayd")), "status"]
            floor = [PYTHON, "-c", CLIENT_FLOOR, str(daemon.socket_path)]
            wall_times(status, 0, env=env, warmup=1)
            wall_times(floor, 0, env=env, warmup=1)
            out["status"], out["floor"] = [], []
            for _ in range(client_runs):
                out["status"] += wall_times(status, 1, env=env, warmup=0)
                out["floor"] += wall_times(floor, 1, env=env, warmup=0)
        out["stop"] = daemon.stop()
    return out


def run(scale: Scale) -> Section:
    section = Section("startup", "5. Startup and footprint")
    starts = scale.pick(8, 1)
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        state = make_state(Path(tmp))
        write_config(state, bundled=True)
        env = env_for(state)
        progress("startup: interpreter and imports")
        py = wall_times([PYTHON, "-c", "pass"], scale.pick(20, 2), env=env)
        deps = wall_times([PYTHON, "-c", f"import {DEPENDENCIES}"], scale.pick(20, 2), env=env)
        version = wall_times([PYTHON, "-m", "gatewayd", "--version"], scale.pick(20, 2), env=env)
        runs: dict[str, list[dict[str, Any]]] = {"gatewayd": [], "minimal": []}
        for i in range(starts):
            progress(f"startup: start {i + 1}/{starts}")
            runs["minimal"].append(one_start(minimal(Path(tmp), env), 0, env))
            client_runs = scale.pick(15, 2) if i == 0 else 0
            runs["gatewayd"].append(one_start(gatewayd(state, env), client_runs, env))
        heavy = client_imports(env)

    def ms(values: list[float]) -> float:
        return median(values) * 1000

    def col(name: str, key: str) -> list[float]:
        return [float(r[key]) for r in runs[name]]

    section.add(Figure("python", "`python -c pass`", ms(py), "ms", "lower", detail=spread(py, 1e3)))
    section.add(
        Figure(
            "deps",
            "import of the daemon's dependencies",
            ms(deps),
            "ms",
            "lower",
            detail=spread(deps, 1e3),
        )
    )
    section.add(
        Figure(
            "minimal.ready",
            "minimal daemon",
            ms(col("minimal", "ready")),
            "ms",
            "lower",
            detail=spread(col("minimal", "ready"), 1e3),
        )
    )
    section.add(
        Figure(
            "gatewayd.ready",
            "`gatewayd run` spawn to READY=1",
            ms(col("gatewayd", "ready")),
            "ms",
            "lower",
            vs=["minimal.ready", "deps"],
            target=Target("< 350 ms", high=350),
            detail=spread(col("gatewayd", "ready"), 1e3),
        )
    )
    section.add(
        Figure("minimal.rss", "minimal daemon", median(col("minimal", "rss")), "MiB", "lower")
    )
    for column, label, target in (
        ("rss", "idle RSS, bundled hooks loaded", Target("< 50 MiB", high=50)),
        ("rss_tree", "idle RSS with its helper processes (the journal's writer)", None),
    ):
        section.add(
            Figure(
                f"gatewayd.{column}",
                label,
                median(col("gatewayd", column)),
                "MiB",
                "lower",
                vs=["minimal.rss"],
                target=target,
                detail={"runs": [round(v, 1) for v in col("gatewayd", column)]},
            )
        )
    first = runs["gatewayd"][0]
    floor = first["floor"]
    section.add(
        Figure(
            "client.floor",
            "stdlib socket one-liner",
            ms(floor),
            "ms",
            "lower",
            detail=spread(floor, 1e3),
        )
    )
    section.add(
        Figure(
            "gatewayd.status",
            "`gatewayd status` against the running daemon",
            ms(first["status"]),
            "ms",
            "lower",
            vs=["client.floor", "python"],
            target=Target("< 120 ms", high=120),
            detail={**spread(first["status"], 1e3), "daemon_stack_imports": heavy},
        )
    )
    section.add(
        Figure(
            "gatewayd.version",
            "`gatewayd --version`",
            ms(version),
            "ms",
            "lower",
            vs=["python"],
            detail=spread(version, 1e3),
        )
    )
    section.add(Figure("minimal.stop", "minimal daemon", ms(col("minimal", "stop")), "ms", "lower"))
    section.add(
        Figure(
            "gatewayd.stop",
            "SIGTERM to exit, idle",
            ms(col("gatewayd", "stop")),
            "ms",
            "lower",
            vs=["minimal.stop"],
            detail=spread(col("gatewayd", "stop"), 1e3),
            headline=True,
        )
    )
    section.notes.append(
        f"Median of {starts} starts of each daemon, interleaved. `gatewayd status` imports "
        + (
            f"**daemon-stack modules: {', '.join(heavy)}**."
            if heavy
            else "none of the daemon stack (checked with `python -X importtime`)."
        )
    )
    return section


if __name__ == "__main__":
    main(run)
