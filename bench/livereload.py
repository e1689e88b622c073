"""Benchmark 3: live reload latency, from saving a hook file to the new code answering.

A real ``gatewayd run`` (default config, bundled hooks on) with one workspace hook, ``live``,
that answers every ``message`` with its version. Each edit rewrites its ``handler.py`` with the
next version, as a write in place or as a rename-save (write ``handler.py.tmp``, ``os.replace``),
and a client polls with ``message`` requests on one connection (one every millisecond) until the
reply carries the new version. Latency runs from the start of the save to that reply.

Baseline, same run: a second daemon with ``hooks.load.watch: false``, where the client sends the
``reload`` op itself right after the save (the reload without the detection), timed the same
way up to the first reply with the new version.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import Figure, Scale, Section, Target, main, median, progress, spread
from bench.process import Daemon, gatewayd
from bench.workload import env_for, make_state, write_config, write_hook

POLL_S = 0.001
GAP_S = 0.1
"""Quiet after each edit has answered, so that no reload of one edit overlaps the next."""
WAIT_S = 10.0
SESSION = "agent:main:live"

HANDLER = '''"""Benchmark hook: answers with its version."""


async def handler(event):
    event.messages.append("version {n}")
'''


class Client:
    """One control-socket connection, blocking, for polling."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(str(path))
        self.buf = b""
        self.n = 0

    def call(self, op: str, **fields: object) -> dict[str, object]:
        self.n += 1
        self.sock.sendall(json.dumps({"id": self.n, "op": op, **fields}).encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        reply: dict[str, object] = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"{op} failed: {reply}")
        return reply

    def answers(self, version: int) -> bool:
        reply = self.call("message", sessionKey=SESSION, text="which version?")
        return f"version {version}" in reply["messages"]  # type: ignore[operator]

    def close(self) -> None:
        self.sock.close()


def write_in_place(path: Path, n: int) -> None:
    path.write_text(HANDLER.format(n=n), encoding="utf-8")


def rename_save(path: Path, n: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(HANDLER.format(n=n), encoding="utf-8")
    os.replace(tmp, path)


def edits(
    daemon: Daemon,
    handler: Path,
    save: Callable[[Path, int], None],
    count: int,
    first: int,
    *,
    explicit_reload: bool,
) -> list[float]:
    """``count`` edits (after one warm-up) numbered from ``first``; latency of each in seconds."""
    client = Client(daemon.socket_path)
    latencies = []
    try:
        for i in range(count + 1):
            version = first + i
            start = time.perf_counter()
            save(handler, version)
            if explicit_reload:
                client.call("reload")
            while not client.answers(version):
                if time.perf_counter() - start > WAIT_S:
                    raise RuntimeError(
                        f"version {version} never answered; log:\n{daemon.log()[-2000:]}"
                    )
                time.sleep(POLL_S)
            if i:
                latencies.append(time.perf_counter() - start)
            time.sleep(GAP_S)
    finally:
        client.close()
    return latencies


def prepare(base: Path, *, watch: bool) -> tuple[Path, Path]:
    state = make_state(base)
    directory = write_hook(
        state / "workspace" / "hooks",
        "live",
        events=("message:received",),
        source=HANDLER.format(n=0),
    )
    write_config(state, bundled=True, settings={"hooks": {"load": {"watch": watch}}})
    return state, directory / "handler.py"


def run(scale: Scale) -> Section:
    section = Section("livereload", "3. Live reload: save to the new code answering `message`")
    count = scale.pick(30, 2)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        watched, watched_handler = prepare(Path(tmp) / "watch", watch=True)
        manual, manual_handler = prepare(Path(tmp) / "manual", watch=False)
        with gatewayd(watched, env_for(watched)) as gw, gatewayd(manual, env_for(manual)) as ref:
            version = 1
            for kind, save in (("write", write_in_place), ("rename", rename_save)):
                progress(f"livereload: {kind}, explicit reload (baseline)")
                results[f"reload_op.{kind}"] = edits(
                    ref, manual_handler, save, count, version, explicit_reload=True
                )
                progress(f"livereload: {kind}, watched")
                results[f"watch.{kind}"] = edits(
                    gw, watched_handler, save, count, version, explicit_reload=False
                )
                version += count + 1
            gw.stop()
            ref.stop()

    labels = {"write": "write in place", "rename": "rename-save"}
    for kind in ("write", "rename"):
        base = results[f"reload_op.{kind}"]
        values = results[f"watch.{kind}"]
        section.add(
            Figure(
                f"reload_op.{kind}",
                "`reload` op right after the save, p50",
                median(base) * 1000,
                "ms",
                "lower",
                detail=spread(base, 1000),
            )
        )
        section.add(
            Figure(
                f"watch.{kind}.p50",
                f"{labels[kind]}, p50",
                median(values) * 1000,
                "ms",
                "lower",
                vs=[f"reload_op.{kind}"],
                target=Target("< 50 ms", high=50),
                detail=spread(values, 1000),
            )
        )
        section.add(
            Figure(
                f"reload_op.{kind}.p95",
                "`reload` op right after the save, p95",
                float(spread(base, 1000)["p95"]),
                "ms",
                "lower",
            )
        )
        section.add(
            Figure(
                f"watch.{kind}.p95",
                f"{labels[kind]}, p95",
                float(spread(values, 1000)["p95"]),
                "ms",
                "lower",
                vs=[f"reload_op.{kind}.p95"],
                target=Target("< 100 ms", high=100),
            )
        )
    section.notes.append(
        f"{count} edits of each kind after a warm-up edit, {GAP_S * 1000:.0f} ms apart; "
        f"the client polls with `message` every {POLL_S * 1000:.0f} ms, so figures include up "
        "to ~2 ms of polling granularity. Daemon: default config, 4 bundled hooks + 1 workspace "
        "hook."
    )
    return section


if __name__ == "__main__":
    main(run)
