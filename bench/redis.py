"""Benchmark: the Redis Streams queue with 1 and 3 gatewayd instances against a bare queue loop.

Every variant keeps the same number of events in flight (``DEPTH``, a closed loop) over the same
``SESSIONS`` sessions and ``PARTITIONS`` partition streams, each on a ``redis-server`` of its own
(unix socket, ``appendonly yes``, ``appendfsync everysec``), so that Redis's CPU time and its
``INFO commandstats`` belong to one variant:

``bare``  no gatewayd: one asyncio process with the same ``redis`` client (no ``socket_timeout``)
          doing what a correct at-least-once queue with replies needs, as cheaply as the client
          allows: ``DEPTH`` producers, each posting one event and waiting for its reply; the
          events of one loop turn ``XADD``\\ed in one pipeline (one in flight at a time, as
          gatewayd does, so posts keep their order); one consumer ``XREADGROUP``\\ing every
          partition (``COUNT``, ``BLOCK``), answering each producer in process and ``XACK``\\ing
          what it answered in the pipeline of its next read. What Redis and the client allow.
``i1``    one ``gatewayd run`` (``gateway.queue.backend: redis``, one no-op Python hook on
          ``command:work``); a load process keeps ``DEPTH`` ``trigger`` requests (``wait:
          true``) in flight over its control socket.
``i3``    three instances on one Redis, the ``DEPTH`` connections spread over them: two thirds
          of the events are posted to an instance that does not own their session, whose owner
          sends the reply back through Redis.

The variants run interleaved, ``ROUNDS`` windows each (bare, i1, i3, bare, ...), so that the
load of this shared machine falls on all of them alike; the rates are events over the windows'
total time. Each window also reads Redis's CPU time (``INFO cpu``), every daemon's (the process
and its children) and Redis's command counts (``INFO commandstats``, reset before the window,
the benchmark's own ``INFO``/``CONFIG`` calls left out): per event, the inputs of the paper
estimate of what 100,000 events/s would take.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
import zlib
from collections import defaultdict
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio
import redis
import redis.asyncio as aioredis

from bench.harness import Figure, Scale, Section, Target, main, progress, spread
from bench.process import Daemon, gatewayd
from bench.workload import env_for, make_state, write_config, write_hook

DEPTH = 24
"""Events in flight in every variant (closed loop)."""
SESSIONS = 200
PARTITIONS = 16
CAPACITY = 1024
ROUNDS = 3
TARGET = 100_000
OWN_CALLS = ("cmdstat_info", "cmdstat_config|resetstat")
"""The benchmark's own commands, left out of the counts."""


class Server:
    """A private ``redis-server`` on a unix socket under ``base``."""

    def __init__(self, base: Path) -> None:
        self.dir = base
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

    def counters(self) -> tuple[float, dict[str, int]]:
        """Redis's CPU seconds so far, and its command counts since the last :meth:`reset`."""
        with self.client() as client:
            cpu = client.info("cpu")
            stats = client.info("commandstats")
        calls = {k: int(v["calls"]) for k, v in stats.items() if k not in OWN_CALLS}
        return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), calls

    def reset(self) -> None:
        with self.client() as client:
            client.config_resetstat()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class Window:
    """What the windows of one variant add up to."""

    def __init__(self) -> None:
        self.events = 0
        self.seconds = 0.0
        self.latencies: list[float] = []
        self.redis_cpu = 0.0
        self.daemon_cpu = 0.0
        self.client_cpu = 0.0
        self.calls: defaultdict[str, int] = defaultdict(int)

    def result(self) -> dict[str, Any]:
        events = max(1, self.events)
        calls = sum(self.calls.values())
        return {
            "rate": round(self.events / self.seconds, 1),
            "events": self.events,
            "latency_ms": spread(self.latencies, 1000),
            "redis_cpu_us": round(self.redis_cpu / events * 1e6, 2),
            "gatewayd_cpu_us": round(self.daemon_cpu / events * 1e6, 2),
            "client_cpu_us": round(self.client_cpu / events * 1e6, 2),
            "commands_per_event": round(calls / events, 3),
            "commands": {
                k.removeprefix("cmdstat_"): round(v / events, 3)
                for k, v in sorted(self.calls.items(), key=lambda kv: -kv[1])
            },
        }


def measured(server: Server, daemons: list[Daemon], window: Window, run: Any, *args: Any) -> None:
    """Run one window (``anyio.run(run, *args)`` -> ``(latencies, seconds)``), adding its
    figures to ``window``: the client's CPU is this process's (the load, or the bare loop)."""
    server.reset()
    redis_before, _ = server.counters()
    before = sum(d.cpu_seconds()[1] for d in daemons)
    client_before = time.process_time()
    latencies, seconds = anyio.run(run, *args, backend="asyncio")
    window.client_cpu += time.process_time() - client_before
    window.daemon_cpu += sum(d.cpu_seconds()[1] for d in daemons) - before
    redis_after, calls = server.counters()
    window.redis_cpu += redis_after - redis_before
    window.events += len(latencies)
    window.seconds += seconds
    window.latencies += latencies
    for name, n in calls.items():
        window.calls[name] += n


# -- gatewayd instances ----------------------------------------------------------------------------


REQUESTS = [
    json.dumps({"id": 1, "op": "trigger", "event": "command:work", "sessionKey": f"s{k}"}).encode()
    + b"\n"
    for k in range(SESSIONS)
]
"""One ``trigger`` request per session, encoded once: the load process spends its CPU on the
socket, not on building requests (it shares the cores with what it measures)."""


async def _client(path: Path, c: int, stop: float, out: list[float]) -> None:
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        n = 0
        while perf_counter() < stop:
            sent = perf_counter()
            writer.write(REQUESTS[(c + n * DEPTH) % SESSIONS])
            line = await reader.readline()
            if not json.loads(line).get("ok"):
                raise RuntimeError(f"trigger failed: {line!r}")
            out.append(perf_counter() - sent)
            n += 1
    finally:
        writer.close()


async def closed_loop(sockets: list[Path], seconds: float) -> tuple[list[float], float]:
    """``DEPTH`` connections spread over ``sockets``, each with one ``trigger`` (``wait:
    true``) in flight; the latency of every request and the window's length."""
    latencies: list[float] = []
    start = perf_counter()
    clients = (
        _client(sockets[c % len(sockets)], c, start + seconds, latencies) for c in range(DEPTH)
    )
    await asyncio.gather(*clients)
    return latencies, perf_counter() - start


def settled(daemons: list[Daemon]) -> bool:
    owned = []
    for daemon in daemons:
        journal = daemon.request({"id": 1, "op": "status"})["status"]["queue"]["journal"]
        owned.append(len(journal["owned"]))
    return sum(owned) == PARTITIONS and min(owned) >= PARTITIONS // len(daemons)


def start_instances(base: Path, server: Server, n: int) -> list[Daemon]:
    daemons: list[Daemon] = []
    for i in range(n):
        state = make_state(base / f"i{n}-{i}")
        write_hook(state / "workspace" / "hooks", "noop", events=("command:work",))
        queue = {
            "backend": "redis",
            "capacity": CAPACITY,
            "redis": {"url": server.url, "partitions": PARTITIONS},
        }
        write_config(state, settings={"gateway": {"queue": queue}})
        daemons.append(gatewayd(state, env_for(state)).start())
    deadline = time.monotonic() + 60
    while not settled(daemons):  # an instance that joined takes its share within a lease
        if time.monotonic() > deadline:
            raise RuntimeError(f"{n} instances never settled on a fair share of partitions")
        time.sleep(0.2)
    return daemons


# -- the bare loop ---------------------------------------------------------------------------------


class BareQueue:
    """The bare loop's queue: see the module docstring."""

    GROUP = "g"

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.streams = [f"bare:p:{i}" for i in range(PARTITIONS)]
        self.waiting: dict[int, asyncio.Future[None]] = {}
        self.batch: list[tuple[str, str]] = []
        self.writing = False
        self.acks: defaultdict[bytes, list[bytes]] = defaultdict(list)
        self.n = 0

    async def setup(self) -> None:
        """The streams and their group, once (a window after the first reads on)."""
        pipe = self.client.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xgroup_create(stream, self.GROUP, id="$", mkstream=True)
        for result in await pipe.execute(raise_on_error=False):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result

    def post(self, session: str) -> asyncio.Future[None]:
        self.n += 1
        loop = asyncio.get_running_loop()
        future = self.waiting[self.n] = loop.create_future()
        stream = self.streams[zlib.crc32(session.encode()) % PARTITIONS]
        self.batch.append((stream, json.dumps({"id": self.n, "session": session})))
        if not self.writing:
            self.writing = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        batch, self.batch = self.batch, []
        if not batch:
            self.writing = False
            return
        asyncio.get_running_loop().create_task(self._write(batch))

    async def _write(self, batch: list[tuple[str, str]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for stream, raw in batch:
            pipe.xadd(stream, {"e": raw})
        await pipe.execute()
        self._flush()

    async def consume(self, stop: asyncio.Event) -> None:
        streams = dict.fromkeys(self.streams, ">")
        while not stop.is_set() or self.acks:
            pipe = self.client.pipeline(transaction=False)
            acks, self.acks = self.acks, defaultdict(list)
            for stream, ids in acks.items():
                pipe.xack(stream, self.GROUP, *ids)
            if not stop.is_set():
                pipe.xreadgroup(self.GROUP, "c", streams, count=256, block=100)
            got = (await pipe.execute())[-1] if len(pipe) else None
            for name, entries in got if isinstance(got, list) else ():
                for entry_id, fields in entries:
                    record = json.loads(fields[b"e"])
                    self.acks[name].append(entry_id)
                    self.waiting.pop(record["id"]).set_result(None)


async def bare_setup(url: str) -> None:
    client = aioredis.Redis.from_url(url, socket_timeout=None)
    await BareQueue(client).setup()
    await client.aclose()


async def bare(url: str, seconds: float) -> tuple[list[float], float]:
    client = aioredis.Redis.from_url(url, socket_timeout=None)
    queue = BareQueue(client)
    latencies: list[float] = []
    stop = asyncio.Event()

    async def producer(c: int, until: float) -> None:
        n = 0
        while perf_counter() < until:
            sent = perf_counter()
            await queue.post(f"s{(c + n * DEPTH) % SESSIONS}")
            latencies.append(perf_counter() - sent)
            n += 1

    start = perf_counter()
    consumer = asyncio.create_task(queue.consume(stop))
    await asyncio.gather(*(producer(c, start + seconds) for c in range(DEPTH)))
    elapsed = perf_counter() - start
    stop.set()
    await consumer
    await client.aclose()
    return latencies, elapsed


# -- the run ---------------------------------------------------------------------------------------


def run(scale: Scale) -> Section:
    seconds = 6.0 if not scale.smoke else 0.6
    window = seconds / ROUNDS
    section = Section("redis", "Redis Streams queue: 1 and 3 gatewayd instances vs a bare loop")
    windows = {name: Window() for name in ("bare", "i1", "i3")}
    with tempfile.TemporaryDirectory(prefix="gdbr-", dir="/tmp") as tmp:
        base = Path(tmp)
        servers = {name: Server(base / f"redis-{name}") for name in windows}
        daemons: dict[str, list[Daemon]] = {"bare": []}
        try:
            progress("redis: starting 1 + 3 instances")
            daemons["i1"] = start_instances(base, servers["i1"], 1)
            daemons["i3"] = start_instances(base, servers["i3"], 3)
            sockets = {n: [d.socket_path for d in daemons[n]] for n in ("i1", "i3")}
            variants = {
                "bare": (bare, servers["bare"].url),
                "i1": (closed_loop, sockets["i1"]),
                "i3": (closed_loop, sockets["i3"]),
            }
            anyio.run(bare_setup, servers["bare"].url, backend="asyncio")
            for run_window, arg in variants.values():  # warm-up
                anyio.run(run_window, arg, min(1.0, window / 2), backend="asyncio")
            for r in range(ROUNDS):
                progress(f"redis: round {r + 1}/{ROUNDS}, {window:.1f} s a variant")
                for name, (run_window, arg) in variants.items():
                    measured(servers[name], daemons[name], windows[name], run_window, arg, window)
            for group in daemons.values():
                for daemon in group:
                    daemon.stop()
        finally:
            for group in daemons.values():
                for daemon in group:
                    daemon.close()
            for server in servers.values():
                server.close()
    results = {name: w.result() for name, w in windows.items()}
    loop, one, three = results["bare"], results["i1"], results["i3"]
    section.add(Figure("bare.rate", f"bare queue loop, {DEPTH} in flight", loop["rate"],
                       "events/s", "higher", detail=loop))  # fmt: skip
    section.add(Figure("bare.p99", "bare loop, post to reply p99", loop["latency_ms"]["p99"], "ms",
                       "lower", detail=loop["latency_ms"]))  # fmt: skip
    section.add(
        Figure("i1.rate", "1 instance, trigger wait", one["rate"], "events/s", "higher",
               vs=["bare.rate"], detail=one, target=Target(">= 0.5x bare", low=0.5 * loop["rate"]))
    )  # fmt: skip
    section.add(
        Figure("i3.rate", "3 instances, trigger wait", three["rate"], "events/s", "higher",
               vs=["bare.rate", "i1.rate"], detail=three, headline=True,
               target=Target(">= 0.8x 1 instance", low=0.8 * one["rate"]))
    )  # fmt: skip
    for key, result in (("i1", one), ("i3", three)):
        section.add(
            Figure(f"{key}.p99", f"{key[1]} instance(s), trigger p99",
                   result["latency_ms"]["p99"], "ms", "lower", vs=["bare.p99"],
                   detail=result["latency_ms"])
        )  # fmt: skip
    section.add(Figure("bare.commands", "bare loop, Redis commands per event",
                       loop["commands_per_event"], "commands", "lower",
                       detail=loop["commands"]))  # fmt: skip
    for key, result in (("i1", one), ("i3", three)):
        section.add(
            Figure(f"{key}.commands", f"{key[1]} instance(s), Redis commands per event",
                   result["commands_per_event"], "commands", "lower", vs=["bare.commands"],
                   detail=result["commands"], target=Target("<= 2", high=2.0))
        )  # fmt: skip
    section.notes.append(
        f"Closed loop, {DEPTH} events in flight in every variant over {SESSIONS} sessions and "
        f"{PARTITIONS} partitions, {ROUNDS} interleaved windows of {window:.1f} s per variant "
        "after a warm-up; the load process, every instance and redis-server share this "
        "machine's cores, so the rate with three instances shows what contention costs here, "
        "not what more machines would give."
    )
    cpu = {k: (r["redis_cpu_us"], r["gatewayd_cpu_us"]) for k, r in results.items()}
    redis_us, gatewayd_us = cpu["i3"]
    section.notes.append(
        f"CPU per event, Redis / gatewayd (all instances): bare {cpu['bare'][0]} us / -, "
        f"1 instance {cpu['i1'][0]} / {cpu['i1'][1]} us, 3 instances {redis_us} / "
        f"{gatewayd_us} us. Paper estimate for {TARGET:,} events/s at the 3-instance costs: "
        f"Redis {TARGET * redis_us / 1e6:.1f} cores (one Redis is single-threaded: beyond ~0.8 "
        f"of a core, shard namespaces over several Redis), gatewayd "
        f"{TARGET * gatewayd_us / 1e6 / 0.8:.0f} instances at 80% of a core each."
    )
    return section


if __name__ == "__main__":
    main(run)
