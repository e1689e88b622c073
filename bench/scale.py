"""10,000 hooks: start, reload, and how long the event loop is away meanwhile.

``gatewayd run`` on a state dir of 10,000 generated Python hooks (the bundled ones disabled) is
started as systemd would start it (``NOTIFY_SOCKET``) and timed from spawn to ``READY=1``; then a
client pings the control socket in a loop (a ping, 10 ms, the next ping) while a ``reload`` op
runs, and the longest ping round trip during the reload is the figure: what a client waits at
worst while the daemon reloads, the event loop's longest stall as the socket sees it.

Baselines, same run: the same daemon on an empty hook root (start), and the longest ping round
trip over as long a time with the daemon idle (the stall figure's floor: the machine's own
scheduling noise).
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench.process
from bench.harness import Figure, Scale, Section, main, progress
from bench.process import gatewayd
from bench.workload import env_for, generate_hooks, make_state, write_config

PING_PAUSE_S = 0.01
SLOW_S = 0.1
"""A ping slower than this counts as held by a stall (``over_100ms``: how many, not how long)."""
START_TIMEOUT_S = 300.0


def request(path: Path, op: str, timeout: float) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps({"id": 1, "op": op}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"{op}: the daemon closed the connection")
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    if not reply.get("ok"):
        raise RuntimeError(f"{op} failed: {reply}")
    return reply


class Pinger(threading.Thread):
    """Pings the daemon in a loop until stopped; keeps each round trip."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.trips: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            began = time.perf_counter()
            request(self.path, "ping", 120)
            self.trips.append(time.perf_counter() - began)
            time.sleep(PING_PAUSE_S)


def pinged(path: Path, during: Any) -> tuple[list[float], float]:
    """Round trips of pings made while ``during()`` runs, and how long it ran."""
    pinger = Pinger(path)
    pinger.start()
    time.sleep(0.3)
    began = time.perf_counter()
    during()
    took = time.perf_counter() - began
    pinger.halt.set()
    pinger.join(120)
    return pinger.trips, took


def one(state: Path) -> dict[str, Any]:
    bench.process.READY_TIMEOUT_S = START_TIMEOUT_S  # 10,000 hooks take longer than the default
    with gatewayd(state, env_for(state)) as daemon:
        path = daemon.socket_path
        ready = daemon.ready_s
        trips, took = pinged(path, lambda: request(path, "reload", 600))
        idle, _ = pinged(path, lambda: time.sleep(took))
    return {
        "ready": ready,
        "reload": took,
        "stall": max(trips),
        "idle": max(idle),
        "pings": len(trips),
        "slow": sum(trip > SLOW_S for trip in trips),
    }


def run(scale: Scale) -> Section:
    section = Section("scale", "10,000 hooks: start, reload and the event loop")
    count = scale.pick(10_000, 50)
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        empty = make_state(Path(tmp) / "empty")
        write_config(empty)
        many = make_state(Path(tmp) / "many")
        progress(f"scale: writing {count:,} hooks")
        generate_hooks(many / "hooks", count)
        write_config(many)
        progress("scale: no hooks")
        floor = one(empty)
        progress(f"scale: {count:,} hooks")
        out = one(many)
    section.add(
        Figure("ready.n0", "spawn to READY=1, no hooks", floor["ready"] * 1000, "ms", "lower")
    )
    section.add(
        Figure(
            f"ready.n{count}",
            f"spawn to READY=1, {count:,} hooks",
            out["ready"] * 1000,
            "ms",
            "lower",
            vs=["ready.n0"],
            headline=True,
        )
    )
    section.add(
        Figure(
            f"reload.n{count}", f"reload op, {count:,} hooks", out["reload"] * 1000, "ms", "lower"
        )
    )
    section.add(
        Figure("stall.idle", "longest ping round trip, idle", out["idle"] * 1000, "ms", "lower")
    )
    section.add(
        Figure(
            f"stall.reload.n{count}",
            f"longest ping round trip during the reload of {count:,} hooks",
            out["stall"] * 1000,
            "ms",
            "lower",
            vs=["stall.idle"],
            headline=True,
            detail={"pings": out["pings"], "over_100ms": out["slow"]},
        )
    )
    section.notes.append(
        "A ping every 10 ms while the reload op runs; the idle floor pings as long with nothing "
        "to do. The stall is what a client waits at worst while the daemon reloads."
    )
    return section


if __name__ == "__main__":
    main(run)
