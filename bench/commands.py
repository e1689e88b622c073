"""Bundled hooks under load: every command written by command-logger.

A real ``gatewayd run`` with the default config (bundled hooks on, no other hook) takes 32
closed-loop clients (``bench/loadgen.py``), each sending ``/ping`` as a ``message`` on its own
session: each request is a ``message:received`` and a ``command:ping`` event, and the bundled
command-logger appends one JSON line to ``<state>/logs/commands.log`` for the latter (its lines
of one event-loop turn in one ``O_APPEND`` write under its lock). Run with the durable journal
(the default) and, as a second daemon on its own state dir, with the in-memory queue; the
minimal daemon answers the same load as the floor of the socket round trip.

Target: >= 5,000 commands/s on this machine, with no line lost or torn. After the
rounds every log file (``commands.log`` and its rotations) is read: each line must be a JSON
object naming the ``ping`` action, and there must be exactly one line per answered request,
warm-up included (the load generator counts them; a later ``ping`` op makes the daemon end the
loop turn that writes the last lines).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench import loadgen
from bench.endtoend import CLIENTS, MEMORY_JOURNAL
from bench.harness import Figure, Scale, Section, Target, child_json, main, median, progress
from bench.process import Daemon, gatewayd, minimal
from bench.workload import env_for, make_state, write_config

TARGET = 5000.0
"""Commands a second with command-logger writing every one."""
TEXT = "/ping"


def prepare(base: Path, settings: dict[str, Any] | None = None) -> Path:
    state = make_state(base)
    write_config(state, bundled=True, settings=settings)
    return state


def load(daemon: Daemon, seconds: float, warmup: float) -> dict[str, Any]:
    out: dict[str, Any] = child_json(
        loadgen.command(daemon.socket_path, seconds, warmup, clients=CLIENTS, text=TEXT),
        timeout=seconds + warmup + 60,
    )
    if out["latency_ms"] is None:
        raise RuntimeError(f"no request to {daemon.socket_path} completed in the window")
    return out


def logged(state: Path) -> tuple[int, int]:
    """``(lines, bad lines)`` of command-logger's files under ``state``: a bad line is not a
    JSON object whose ``action`` is the benchmark's command (torn, interleaved or foreign)."""
    lines = bad = 0
    for path in sorted((state / "logs").glob("commands.log*")):
        if path.name.endswith(".lock"):
            continue
        for line in path.read_bytes().splitlines():
            lines += 1
            try:
                record = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if not isinstance(record, dict) or record.get("action") != TEXT[1:]:
                bad += 1
    return lines, bad


def run(scale: Scale) -> Section:
    section = Section("commands", "Bundled hooks: command-logger under load (`/ping`, 32 clients)")
    runs = scale.pick(3, 1)
    seconds = 2.5 if not scale.smoke else 1.0
    warmup = 0.5 if not scale.smoke else 0.3
    results: dict[str, list[dict[str, Any]]] = {"minimal": [], "durable": [], "memory": []}
    checked: dict[str, tuple[int, int, int]] = {}
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        states = {
            "durable": prepare(Path(tmp) / "sqlite"),
            "memory": prepare(Path(tmp) / "memory", MEMORY_JOURNAL),
        }
        durable_state, memory_state = states["durable"], states["memory"]
        with (
            gatewayd(durable_state, env_for(durable_state)) as durable,
            gatewayd(memory_state, env_for(memory_state)) as memory,
            minimal(Path(tmp), env_for(durable_state)) as floor,
        ):
            daemons = {"durable": durable, "memory": memory}
            for i in range(runs):
                progress(f"commands round {i + 1}/{runs}")
                results["minimal"].append(load(floor, seconds, warmup))
                for name, daemon in daemons.items():
                    results[name].append(load(daemon, seconds, warmup))
            for name, daemon in daemons.items():
                daemon.request({"id": 1, "op": "ping"})  # ends the turn with the last lines
                answered = sum(int(r["completed"]) for r in results[name])
                lines, bad = logged(states[name])
                checked[name] = (answered, lines, bad)
            durable.stop()
            memory.stop()
            floor.stop()

    minimal_rate = median([float(r["rate"]) for r in results["minimal"]])
    section.add(Figure("minimal.rate", "minimal daemon", minimal_rate, "msg/s", "higher"))
    target = Target(f">= {TARGET:.0f} commands/s, every line written whole", low=TARGET)
    for name, label in (
        ("durable", "commands/s, durable journal (the default)"),
        ("memory", "commands/s, in-memory queue"),
    ):
        answered, lines, bad = checked[name]
        section.add(
            Figure(
                f"{name}.rate",
                label,
                median([float(r["rate"]) for r in results[name]]),
                "commands/s",
                "higher",
                vs=["minimal.rate"],
                target=target,
                detail={
                    "runs": [round(r["rate"]) for r in results[name]],
                    "answered": answered,
                    "lines": lines,
                },
                headline=name == "durable",
            )
        )
        section.add(
            Figure(
                f"{name}.lost",
                f"lines lost or torn ({name})",
                float(abs(answered - lines) + bad),
                "lines",
                "lower",
                target=Target("0", high=0.0),
                detail={"answered": answered, "lines": lines, "bad": bad},
            )
        )
    section.notes.append(
        f"Median of {runs} rounds of {seconds} s after {warmup} s of warm-up, each daemon in "
        "turn; every answered request, warm-up included, is one line in `commands.log`, "
        "checked after the rounds."
    )
    return section


if __name__ == "__main__":
    main(run)
