"""Benchmark: hooks that decide, round trip over the control socket.

Two real ``gatewayd run`` processes (uvloop, bundled hooks off):

* ``plain``: a ``command:ping`` hook answering one line, and 1 no-op hook on
  ``agent:before_tool_call``;
* ``deciding``: the same ``command:ping`` hook plus a ``message:sending`` hook that rewrites every
  reply line, and 10 no-op hooks on ``agent:before_tool_call``.

One client, one connection, closed loop (a request is sent when the previous reply arrived), so
each figure is the latency of one request with nothing queued before it. Measured, interleaved:
the ``message`` op ``/ping`` without and with the rewrite hook (what one ``message:sending``
rewrite adds to a reply), the ``trigger`` op ``agent:before_tool_call`` with 1 and 10 hooks (the
round trip an agent runtime pays before each tool call), and the same line sent to
``reference/minimal_daemon.py`` (the floor of the socket round trip on this stack).
Target: a decision's p99 under 5 ms with no-op hooks.
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import Figure, Scale, Section, Target, main, median, percentile, progress
from bench.process import Daemon, gatewayd, minimal
from bench.workload import env_for, make_state, write_config, write_hook

PING = '''"""Benchmark hook: answers /ping."""


async def handler(event):
    event.messages.append("pong")
'''

REWRITE = '''"""Benchmark hook: rewrites every reply line."""


async def handler(event):
    return {"content": event.context["content"].upper()}
'''

NOOP = '''"""Benchmark hook: allows the tool call."""


async def handler(event):
    return None
'''

MESSAGE = {"op": "message", "sessionKey": "agent:main:bench", "text": "/ping"}
TOOL = {
    "op": "trigger",
    "event": "agent:before_tool_call",
    "sessionKey": "agent:main:bench",
    "context": {"toolName": "ls", "params": {"path": "/"}},
}


def prepare(base: Path, *, deciding: bool) -> Path:
    state = make_state(base)
    hooks = state / "hooks"
    write_hook(hooks, "ping", events=["command:ping"], source=PING)
    if deciding:
        write_hook(hooks, "rewrite", events=["message:sending"], source=REWRITE)
    for i in range(10 if deciding else 1):
        write_hook(hooks, f"tool-{i}", events=["agent:before_tool_call"], source=NOOP)
    write_config(state, settings={"logging": {"level": "warning"}})
    return state


class Client:
    """One connection, one request at a time."""

    def __init__(self, daemon: Daemon) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(daemon.socket_path))
        self.buf = b""

    def round_trip(self, payload: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        line = json.dumps(payload).encode() + b"\n"
        start = time.perf_counter()
        self.sock.sendall(line)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError(f"connection closed before a reply to {payload}")
            self.buf += chunk
        elapsed = time.perf_counter() - start
        reply, _, self.buf = self.buf.partition(b"\n")
        return elapsed * 1000, json.loads(reply)

    def close(self) -> None:
        self.sock.close()


def sample(client: Client, payload: dict[str, Any], n: int) -> list[float]:
    out = []
    for i in range(n):
        ms, reply = client.round_trip({"id": i, **payload})
        if not reply.get("ok"):
            raise RuntimeError(f"{payload['op']} failed: {reply}")
        out.append(ms)
    return out


def run(scale: Scale) -> Section:
    section = Section("decisions", "Hooks that decide: round trips over the control socket")
    n = scale.pick(2000, 50)
    rounds = scale.pick(3, 1)
    series: dict[str, list[float]] = {
        k: [] for k in ("floor", "plain", "rewrite", "tool1", "tool10")
    }
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        plain_state = prepare(Path(tmp) / "plain", deciding=False)
        deciding_state = prepare(Path(tmp) / "deciding", deciding=True)
        with (
            gatewayd(plain_state, env_for(plain_state)) as plain,
            gatewayd(deciding_state, env_for(deciding_state)) as deciding,
            minimal(Path(tmp), env_for(plain_state)) as floor,
        ):
            if deciding.request({"id": 0, **MESSAGE}).get("messages") != ["PONG"]:
                raise RuntimeError("the rewrite hook did not answer as expected")
            clients = {"plain": Client(plain), "deciding": Client(deciding), "floor": Client(floor)}
            try:
                for i in range(rounds):
                    progress(f"decisions round {i + 1}/{rounds}")
                    series["floor"] += sample(clients["floor"], MESSAGE, n)
                    series["plain"] += sample(clients["plain"], MESSAGE, n)
                    series["rewrite"] += sample(clients["deciding"], MESSAGE, n)
                    series["tool1"] += sample(clients["plain"], TOOL, n)
                    series["tool10"] += sample(clients["deciding"], TOOL, n)
            finally:
                for client in clients.values():
                    client.close()

    def add(key: str, label: str, name: str, q: float, vs: list[str], **kw: Any) -> None:
        values = series[name]
        section.add(
            Figure(
                key,
                label,
                round(percentile(values, q), 3),
                "ms",
                "lower",
                vs=vs,
                detail={"samples": len(values), "median_ms": round(median(values), 3)},
                **kw,
            )
        )

    add("floor.p50", "minimal daemon p50", "floor", 50, [])
    add("floor.p99", "minimal daemon p99", "floor", 99, [])
    add("message.p50", "`message` op, no sending hook, p50", "plain", 50, ["floor.p50"])
    add("message.p99", "`message` op, no sending hook, p99", "plain", 99, ["floor.p99"])
    add(
        "rewrite.p50",
        "`message` op + 1 `message:sending` rewrite, p50",
        "rewrite",
        50,
        ["message.p50"],
        headline=True,
    )
    add(
        "rewrite.p99",
        "`message` op + 1 `message:sending` rewrite, p99",
        "rewrite",
        99,
        ["message.p99"],
        headline=True,
    )
    five = Target("p99 < 5 ms", high=5.0)
    add("tool1.p50", "`before_tool_call`, 1 hook, p50", "tool1", 50, ["floor.p50"])
    add("tool1.p99", "`before_tool_call`, 1 hook, p99", "tool1", 99, ["floor.p99"], target=five)
    add("tool10.p50", "`before_tool_call`, 10 hooks, p50", "tool10", 50, ["floor.p50"])
    add("tool10.p99", "`before_tool_call`, 10 hooks, p99", "tool10", 99, ["floor.p99"], target=five)
    section.notes.append(
        f"{rounds} interleaved rounds of {n} sequential requests on one connection per daemon; "
        "latency is measured by the client, request written to reply read. The rewrite figures "
        "compare the same `/ping` with and without the `message:sending` hook."
    )
    return section


if __name__ == "__main__":
    main(run)
