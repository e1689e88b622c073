"""Benchmark: the Redis Streams queue (issue 16) with 1, 2 and 3 instances vs a bare loop.

One private ``redis-server`` (unix socket, ``appendonly yes``, ``appendfsync everysec``) per run.

``instances.N``  N real ``gatewayd run`` daemons (``gateway.queue.backend: redis``, 16
                 partitions, one no-op Python hook on ``command:work``). A closed-loop client
                 keeps ``CONNECTIONS`` ``trigger`` requests (``wait: true``) in flight, spread
                 over the instances and over ``SESSIONS`` sessions: each request goes posting
                 instance -> ``XADD`` -> the owning instance's ``XREADGROUP`` -> dispatch ->
                 ``XACK`` and, when another instance owns the session, the reply back through
                 ``<ns>:reply:<poster>``. Events/s over the measured window; the latency of each
                 request from send to reply (p50, p99).
``bare``         no gatewayd: one asyncio process with the same ``redis`` client, a producer
                 ``XADD``ing in pipelines of 64 (at most ``CAPACITY`` unacknowledged) and a
                 consumer ``XREADGROUP`` (256 a read) + ``XACK``; latency from ``XADD`` to the
                 consumer having read it. What Redis and the client allow per event.

Every run also reads Redis's CPU time (``INFO cpu``) and each daemon's (``/proc/<pid>/stat``)
before and after, giving CPU seconds per event on each side: the inputs of the paper estimate of
what 100,000 events/s would take.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio
import redis
import redis.asyncio as aioredis
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.harness import Figure, Scale, Section, main, median, progress, spread
from bench.process import Daemon, gatewayd
from bench.workload import env_for, make_state, write_config, write_hook

CONNECTIONS = 24
SESSIONS = 200
PARTITIONS = 16
CAPACITY = 1024
TARGET = 100_000
CLK = os.sysconf("SC_CLK_TCK")


class Server:
    """A private ``redis-server`` on a unix socket under ``base``."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "redis.sock"
        self.url = f"unix://{self.socket}"
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(self.socket), "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--loglevel", "warning", "--logfile", str(self.dir / "redis.log")],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket))

    def cpu(self) -> float:
        with self.client() as client:
            info = client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK


# -- gatewayd instances ----------------------------------------------------------------------------


async def _client(path: Path, c: int, stop: float, out: list[float]) -> None:
    stream = await anyio.connect_unix(path)
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        n = 0
        while perf_counter() < stop:
            session = f"s{(c + n * CONNECTIONS) % SESSIONS}"
            request = {"id": n, "op": "trigger", "event": "command:work", "sessionKey": session}
            sent = perf_counter()
            await stream.send(json.dumps(request).encode() + b"\n")
            reply = json.loads(await reader.receive_until(b"\n", 1 << 20))
            if not reply.get("ok"):
                raise RuntimeError(f"trigger failed: {reply}")
            out.append(perf_counter() - sent)
            n += 1


async def closed_loop(sockets: list[Path], seconds: float) -> tuple[list[float], float]:
    latencies: list[float] = []
    start = perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(CONNECTIONS):
            tg.start_soon(_client, sockets[c % len(sockets)], c, start + seconds, latencies)
    return latencies, perf_counter() - start


def settled(daemons: list[Daemon]) -> bool:
    owned = []
    for daemon in daemons:
        journal = daemon.request({"id": 1, "op": "status"})["status"]["queue"]["journal"]
        owned.append(len(journal["owned"]))
    return sum(owned) == PARTITIONS and min(owned) >= PARTITIONS // len(daemons)


def instances(base: Path, server: Server, n: int, seconds: float) -> dict[str, Any]:
    daemons: list[Daemon] = []
    try:
        for i in range(n):
            state = make_state(base / f"i{n}-{i}")
            write_hook(state / "workspace" / "hooks", "noop", events=("command:work",))
            queue = {
                "backend": "redis",
                "capacity": CAPACITY,
                "redis": {"url": server.url, "namespace": f"bench{n}", "partitions": PARTITIONS},
            }
            write_config(state, settings={"gateway": {"queue": queue}})
            daemons.append(gatewayd(state, env_for(state)).start())
        deadline = time.monotonic() + 60
        while not settled(daemons):  # an instance that joined takes its share within a lease
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n} instances never settled on a fair share of partitions")
            time.sleep(0.2)
        sockets = [d.socket_path for d in daemons]
        anyio.run(closed_loop, sockets, min(1.0, seconds / 3), backend="asyncio")  # warm-up
        redis_before = server.cpu()
        before = [proc_cpu(d.pid) for d in daemons]
        latencies, elapsed = anyio.run(closed_loop, sockets, seconds, backend="asyncio")
        daemon_cpu = sum(proc_cpu(d.pid) for d in daemons) - sum(before)
        redis_cpu = server.cpu() - redis_before
        for daemon in daemons:
            daemon.stop()
    finally:
        for daemon in daemons:
            daemon.close()
    events = len(latencies)
    return {
        "rate": round(events / elapsed, 1),
        "events": events,
        "latency_ms": spread(latencies, 1000),
        "redis_cpu_us": round(redis_cpu / events * 1e6, 2),
        "gatewayd_cpu_us": round(daemon_cpu / events * 1e6, 2),
    }


# -- the bare loop ---------------------------------------------------------------------------------


async def bare(url: str, events: int) -> tuple[list[float], float]:
    client = aioredis.Redis.from_url(url)
    stream, group = "bare:s", "g"
    await client.delete(stream)
    await client.xgroup_create(stream, group, id="0", mkstream=True)
    latencies: list[float] = []
    acked = 0
    produced = 0
    room = anyio.Event()

    async def produce() -> None:
        nonlocal produced, room
        while produced < events:
            while produced - acked >= CAPACITY:
                room = anyio.Event()
                await room.wait()
            pipe = client.pipeline(transaction=False)
            batch = min(64, events - produced)
            for _ in range(batch):
                pipe.xadd(stream, {"e": json.dumps({"t": perf_counter(), "session": "s"})})
            await pipe.execute()
            produced += batch

    async def consume() -> None:
        nonlocal acked
        while acked < events:
            got = await client.xreadgroup(group, "c", {stream: ">"}, count=256, block=100)
            for _, entries in got or ():
                now = perf_counter()
                ids = []
                for entry_id, fields in entries:
                    latencies.append(now - json.loads(fields[b"e"])["t"])
                    ids.append(entry_id)
                await client.xack(stream, group, *ids)
                acked += len(ids)
                room.set()

    start = perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        tg.start_soon(consume)
    elapsed = perf_counter() - start
    await client.delete(stream)
    await client.aclose()
    return latencies, elapsed


def bare_run(server: Server, events: int) -> dict[str, Any]:
    anyio.run(bare, server.url, min(2000, events), backend="asyncio")  # warm-up
    before = server.cpu()
    latencies, elapsed = anyio.run(bare, server.url, events, backend="asyncio")
    cpu = server.cpu() - before
    return {
        "rate": round(events / elapsed, 1),
        "events": events,
        "latency_ms": spread(latencies, 1000),
        "redis_cpu_us": round(cpu / events * 1e6, 2),
    }


# -- the run ---------------------------------------------------------------------------------------


def run(scale: Scale) -> Section:
    seconds = 6.0 if not scale.smoke else 0.6
    bare_events = scale.pick(50_000, 500)
    section = Section("redis", "Redis Streams queue: 1-3 gatewayd instances vs a bare loop")
    with tempfile.TemporaryDirectory(prefix="gdbr-", dir="/tmp") as tmp:
        base = Path(tmp)
        server = Server(base)
        try:
            progress("redis: bare XADD/XREADGROUP/XACK loop")
            loop = bare_run(server, bare_events)
            results = {}
            for n in (1, 2, 3):
                progress(f"redis: {n} instance(s), {seconds} s closed loop")
                results[n] = instances(base, server, n, seconds)
        finally:
            server.close()
    section.add(Figure("bare.rate", "bare XADD/XREADGROUP/XACK loop", loop["rate"], "events/s",
                       "higher", detail=loop))  # fmt: skip
    section.add(Figure("bare.p99", "bare loop, XADD to read p99", loop["latency_ms"]["p99"], "ms",
                       "lower", detail=loop["latency_ms"]))  # fmt: skip
    for n, result in results.items():
        section.add(
            Figure(f"i{n}.rate", f"{n} instance(s), trigger wait", result["rate"], "events/s",
                   "higher", vs=["bare.rate"], detail=result, headline=n == 3)
        )  # fmt: skip
        section.add(
            Figure(f"i{n}.p99", f"{n} instance(s), trigger p99", result["latency_ms"]["p99"],
                   "ms", "lower", vs=["bare.p99"], detail=result["latency_ms"])
        )  # fmt: skip
    redis_us = median([r["redis_cpu_us"] for r in results.values()])
    gatewayd_us = median([r["gatewayd_cpu_us"] for r in results.values()])
    section.notes.append(
        f"Closed loop: {CONNECTIONS} connections with one trigger (wait: true) in flight each, "
        f"over {SESSIONS} sessions, {seconds} s per instance count after a warm-up; the client, "
        "every instance and redis-server share this machine's cores, so the rate with more "
        "instances shows what contention costs here, not what more machines would give."
    )
    section.notes.append(
        f"Paper estimate for {TARGET:,} events/s: Redis spent {redis_us} us of CPU per event "
        f"through gatewayd (bare loop: {loop['redis_cpu_us']} us), so Redis needs about "
        f"{TARGET * redis_us / 1e6:.1f} cores (one Redis is single-threaded: beyond ~0.8 of a "
        f"core, shard namespaces over several Redis); each event cost {gatewayd_us} us of "
        f"gatewayd CPU, so about {TARGET * gatewayd_us / 1e6 / 0.8:.0f} instances at 80% of a "
        "core each (each instance is one event loop, one core)."
    )
    return section


if __name__ == "__main__":
    main(run)
