"""A closed-loop load generator for the control socket, run as its own process.

    python -m bench.loadgen SOCKET --clients 32 --seconds 3 --warmup 1 [--slow-clients 1]

Each client holds one connection and sends ``message`` requests on its own session key
(``agent:main:client-<i>``), the next as soon as the reply arrives. ``--slow-clients`` adds
clients on ``agent:main:slow-<i>`` (a session a benchmark hook makes slow). Requests started
during the warm-up are not counted. Prints one JSON line: the request rate of the normal clients
and their latency percentiles, the same for the slow ones, and ``completed``: every request
answered, warm-up included (what a daemon's CPU over the whole run is divided by).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.harness import PYTHON, spread


class Window:
    """Which requests count: those started after the warm-up and before the end."""

    def __init__(self, warmup: float, seconds: float) -> None:
        self.begin = perf_counter() + warmup
        self.end = self.begin + seconds


async def client(
    path: Path,
    session: str,
    window: Window,
    latencies: list[float],
    text: str,
    completed: list[int],
) -> None:
    stream = await anyio.connect_unix(path)
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        n = 0
        while True:
            n += 1
            request = {"id": n, "op": "message", "sessionKey": session, "text": text}
            start = perf_counter()
            if start >= window.end:
                return
            await stream.send(json.dumps(request).encode() + b"\n")
            line = await reader.receive_until(b"\n", 1 << 20)
            elapsed = perf_counter() - start
            reply = json.loads(line)
            if not reply.get("ok"):
                raise RuntimeError(f"request failed: {reply}")
            completed[0] += 1
            if start >= window.begin:
                latencies.append(elapsed)


async def load(args: argparse.Namespace) -> dict[str, Any]:
    window = Window(args.warmup, args.seconds)
    normal: list[float] = []
    slow: list[float] = []
    completed = [0]
    async with anyio.create_task_group() as tg:
        for i in range(args.clients):
            key = f"agent:main:client-{i}"
            tg.start_soon(client, args.socket, key, window, normal, args.text, completed)
        for i in range(args.slow_clients):
            key = f"agent:main:slow-{i}"
            tg.start_soon(client, args.socket, key, window, slow, args.text, completed)
    out: dict[str, Any] = {
        "clients": args.clients,
        "seconds": args.seconds,
        "requests": len(normal),
        "completed": completed[0],
        "rate": len(normal) / args.seconds,
        "latency_ms": spread(normal, 1000) if normal else None,
    }
    if args.slow_clients:
        out["slow"] = {"requests": len(slow), "latency_ms": spread(slow, 1000) if slow else None}
    return out


def command(
    socket_path: Path,
    seconds: float,
    warmup: float,
    *,
    clients: int,
    slow_clients: int = 0,
    text: str | None = None,
) -> list[str]:
    """The command line that runs this load generator against ``socket_path``."""
    argv = [PYTHON, "-m", "bench.loadgen", str(socket_path), "--clients", str(clients)]
    argv += ["--slow-clients", str(slow_clients), "--seconds", str(seconds)]
    argv += ["--warmup", str(warmup)]
    return argv if text is None else [*argv, "--text", text]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loadgen")
    parser.add_argument("socket", type=Path)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--slow-clients", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--text", default="hello gateway")
    args = parser.parse_args()
    out = anyio.run(load, args, backend="asyncio", backend_options={"use_uvloop": True})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
