"""Nothing accepted is lost to ``kill -9``: redelivery after a restart, in each session's order.

A real ``gatewayd run`` with a slow recording hook; 8 producers post 10,000 events over 24
sessions (each session has one producer, so its order is the order of ``n``) while the daemon
is killed with SIGKILL at random moments and started again on the same state dir. Then: every
event a producer saw accepted was dispatched at least once; per session, the dispatches (with
repeats removed) come in ``n`` order and within one daemon's life ``n`` never goes back; no
event id is dispatched twice by one daemon; ``gateway:startup`` fires once per daemon. The
duplicates (the price of at-least-once) are counted and printed, not bounded.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.journal.journal_support import Producer, read_records, recording_hook
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOTAL = 10_000
CLIENTS = 8
SESSIONS_PER_CLIENT = 3
KILLS = 3
CONFIG = {
    "gateway": {"queue": {"capacity": 256, "concurrency": 4}},
    "hooks": {"entries": {"command-logger": {"enabled": False}}},
}


def plan() -> list[list[tuple[str, int]]]:
    """Each client's events: round-robin over its own sessions, ``n`` counting per session."""
    per_client = TOTAL // CLIENTS
    out = []
    for c in range(CLIENTS):
        sessions = [f"client-{c}-s{k}" for k in range(SESSIONS_PER_CLIENT)]
        counters = dict.fromkeys(sessions, 0)
        events = []
        for i in range(per_client):
            session = sessions[i % SESSIONS_PER_CLIENT]
            events.append((session, counters[session]))
            counters[session] += 1
        out.append(events)
    return out


def test_kill_9_at_random_moments_loses_nothing_accepted(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    seed = int(os.environ.get("JOURNAL_TEST_SEED", time.time()))
    rng = random.Random(seed)
    hooks = state_dir / "hooks"
    slow = recording_hook(delay_s=0.001)
    write_hook(hooks, "slow-recorder", events=["command:work"], handler=slow)
    startup = recording_hook("startup.jsonl")
    write_hook(hooks, "startup-recorder", events=["gateway:startup"], handler=startup)
    daemon = start_daemon(CONFIG)
    deadline = time.monotonic() + 480
    producers = [Producer(daemon.socket, events, deadline) for events in plan()]
    for producer in producers:
        producer.start()
    kills = 0
    for _ in range(KILLS):
        # A random moment while the producers are still posting.
        time.sleep(rng.uniform(0.5, 2.5))
        if all(not p.is_alive() for p in producers):
            break
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.wait()
        kills += 1
        daemon = start_daemon()
    for producer in producers:
        producer.join(timeout=max(1.0, deadline - time.monotonic()))
    assert all(p.error is None for p in producers), [p.error for p in producers]
    assert all(not p.refused for p in producers), [p.refused[:3] for p in producers]
    accepted = {event for p in producers for event in p.accepted}
    assert len(accepted) == TOTAL

    with daemon.control() as control:
        wait_until(
            lambda: (
                (q := control.ok("status")["status"]["queue"])["journal"]["pending"] == 0
                and q["depth"] == 0
            ),
            timeout=300,
            what="every event dispatched and done",
        )
    assert daemon.stop() == 0

    records = [r for r in read_records(state_dir) if r.get("key") == "command:work"]
    dispatched = {(r["session"], r["n"]) for r in records}
    missing = accepted - dispatched
    assert not missing, f"seed {seed}: accepted, never dispatched: {sorted(missing)[:10]}"

    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_session[str(record["session"])].append(record)
    for session, recs in by_session.items():
        firsts: list[int] = []
        seen: set[int] = set()
        for r in recs:
            if r["n"] not in seen:
                seen.add(r["n"])
                firsts.append(r["n"])
        assert firsts == sorted(firsts), f"seed {seed}: {session} out of order: {firsts[:50]}"
        for pid in {r["pid"] for r in recs}:
            ns: list[int] = [r["n"] for r in recs if r["pid"] == pid]
            assert ns == sorted(ns), f"seed {seed}: {session} went back in daemon {pid}: {ns[:50]}"
    per_daemon = Counter((r["pid"], r["id"]) for r in records)
    assert max(per_daemon.values()) == 1, "one daemon dispatched an event twice"

    startups = Counter(r["pid"] for r in read_records(state_dir, "startup.jsonl"))
    assert startups and max(startups.values()) == 1, startups

    duplicates = len(records) - len(dispatched)
    resent = sum(p.resent for p in producers)
    print(
        f"\njournal kill -9: seed {seed}, {kills} kills, {TOTAL} accepted, {len(records)} "
        f"dispatches, {duplicates} duplicates, {resent} requests resent after a kill"
    )
