"""Many gatewayd instances on one real Redis: order, takeover, joining, replies, Redis restarts.

The full end-to-end run is three instances, 20,000 events over 200 sessions. On the 2-core
CI machine that is scaled by ``REDIS_TEST_EVENTS`` (default 3,000 over 200 sessions; set it to
20000 for the full run): one producer thread per instance posts its sessions' events (``n``
counting per session) while, mid-stream, one instance is killed with SIGKILL (its producer waits
for it), a fourth joins, and the killed one is started again. Then: every event a producer saw
accepted was dispatched at least once; per session, the dispatches (repeats removed, in the
shared record's order) come in ``n`` order; the repeats (the price of at-least-once after a
kill) are counted and printed.

Also: a ``trigger`` with ``wait`` sent to one instance for a session another owns gets that
owner's reply; Redis restarted mid-stream loses nothing and keeps the order.
"""

from __future__ import annotations

import os
import signal
import time
import zlib
from collections import defaultdict
from typing import Any

import pytest

from tests.journal.journal_support import Producer
from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import RedisServer
from tests.support.daemon import Daemon
from tests.support.state import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.xdist_group("redis")]

EVENTS = int(os.environ.get("REDIS_TEST_EVENTS", "3000"))
SESSIONS = 200
PARTITIONS = 8


def plan(producers: int, total: int = EVENTS) -> list[list[tuple[str, int]]]:
    """Each producer's events: round-robin over its own sessions, ``n`` counting per session."""
    sessions = [[f"s{k}" for k in range(p, SESSIONS, producers)] for p in range(producers)]
    out = []
    for own in sessions:
        count = total // producers
        counters = dict.fromkeys(own, 0)
        events = []
        for i in range(count):
            session = own[i % len(own)]
            events.append((session, counters[session]))
            counters[session] += 1
        out.append(events)
    return out


def check(
    records: list[dict[str, Any]], accepted: list[tuple[str, int]]
) -> tuple[int, dict[str, list[int]]]:
    """Assert nothing accepted is missing and each session's first dispatches are in order;
    return the number of repeats and each session's ``n`` sequence."""
    seen: set[tuple[str, int]] = set()
    order: dict[str, list[int]] = defaultdict(list)
    repeats = 0
    for record in records:
        key = (record["session"], record["n"])
        if key in seen:
            repeats += 1
            continue
        seen.add(key)
        order[record["session"]].append(record["n"])
    missing = set(accepted) - seen
    assert not missing, (
        f"{len(missing)} accepted events never dispatched, e.g. {sorted(missing)[:5]}"
    )
    for session, ns in order.items():
        assert ns == sorted(ns), f"session {session} dispatched out of order: {ns}"
    return repeats, order


def wait_accepted(producers: list[Producer], count: int) -> None:
    wait_until(
        lambda: sum(len(p.accepted) for p in producers) >= count or not any_alive(producers),
        timeout=300,
        what=f"{count} events accepted",
    )


def any_alive(producers: list[Producer]) -> bool:
    return any(p.is_alive() for p in producers)


def owned(daemon: Daemon) -> list[int]:
    journal = daemon.request("status")["status"]["queue"]["journal"]
    return [p["partition"] for p in journal["owned"]]


def test_three_instances_kill_join_restart(instances: Instances) -> None:
    daemons = instances(3, partitions=PARTITIONS)
    deadline = time.monotonic() + 480
    producers = [
        Producer(d.socket, events, deadline) for d, events in zip(daemons, plan(3), strict=True)
    ]
    for producer in producers:
        producer.start()
    wait_accepted(producers, EVENTS // 4)
    victim = daemons[1]
    victim.proc.send_signal(signal.SIGKILL)
    victim.wait()
    # The survivors take the victim's partitions over once its leases ran out.
    wait_until(
        lambda: sorted(owned(daemons[0]) + owned(daemons[2])) == list(range(PARTITIONS)),
        timeout=120,
        what="the killed instance's partitions taken over",
    )
    wait_accepted(producers, EVENTS // 2)
    joined = instances.add()
    wait_until(lambda: owned(joined), timeout=120, what="the new instance owning a partition")
    victim.start()  # its producer has been waiting for it: it posts the rest of its share
    for producer in producers:
        producer.join(480)
        assert producer.error is None, producer.error
        assert not producer.refused, producer.refused[:3]
    accepted = [event for p in producers for event in p.accepted]
    assert len(accepted) == EVENTS - EVENTS % 3

    def all_dispatched() -> list[dict[str, Any]] | None:
        records = read_shared(instances.record)
        done = {(r["session"], r["n"]) for r in records}
        return records if done >= set(accepted) else None

    records = wait_until(all_dispatched, timeout=300, what="every accepted event dispatched")
    repeats, _ = check(records, accepted)
    pids = {r["pid"] for r in records}
    print(f"redis e2e: {len(accepted)} accepted, {len(records)} dispatches, {repeats} repeats, "
          f"{len(pids)} instance processes")  # fmt: skip
    assert len(pids) >= 4  # the three, the joined one, the restarted victim (at least one of)
    live = [d for d in (*daemons, joined)]
    wait_until(
        lambda: sorted(p for d in live for p in owned(d)) == list(range(PARTITIONS)),
        timeout=120,
        what="every partition owned exactly once",
    )
    for daemon in live:
        assert daemon.stop() == 0, daemon.stderr_text()[-3000:]


def test_reply_from_the_owning_instance(instances: Instances) -> None:
    first, second = instances(2, partitions=PARTITIONS)
    wait_until(lambda: owned(first) and owned(second), timeout=120, what="both own partitions")
    theirs = set(owned(second))
    session = next(
        f"r{i}" for i in range(10_000) if zlib.crc32(f"r{i}".encode()) % PARTITIONS in theirs
    )
    reply = first.request(
        "trigger", event="command:work", sessionKey=session, context={"n": 7}, wait=True
    )
    assert reply["ok"], reply
    assert reply["messages"] == [f"n=7 pid={second.proc.pid}"]


def test_redis_restarted_mid_stream(instances: Instances, redis_server: RedisServer) -> None:
    daemons = instances(2, partitions=PARTITIONS)
    total = max(600, EVENTS // 3)
    deadline = time.monotonic() + 300
    producers = [
        Producer(d.socket, events, deadline)
        for d, events in zip(daemons, plan(2, total), strict=True)
    ]
    for producer in producers:
        producer.start()
    wait_accepted(producers, total // 3)
    redis_server.restart()
    for producer in producers:
        producer.join(300)
        assert producer.error is None, producer.error
        assert not producer.refused, producer.refused[:3]
    accepted = [event for p in producers for event in p.accepted]
    assert len(accepted) == total - total % 2

    def all_dispatched() -> list[dict[str, Any]] | None:
        records = read_shared(instances.record)
        done = {(r["session"], r["n"]) for r in records}
        return records if done >= set(accepted) else None

    records = wait_until(all_dispatched, timeout=300, what="every accepted event dispatched")
    repeats, _ = check(records, accepted)
    print(f"redis restart: {len(accepted)} accepted, {repeats} repeats")
    for daemon in daemons:
        back = [r for r in daemon.logs if r.get("event") == "queue.redis_back"]
        assert back, "no queue.redis_back in the log"
        assert daemon.stop() == 0
