"""One gatewayd instance on a real Redis: posting, replies, order, status, absent Redis.

* ``trigger`` with ``wait`` gets the handler's messages back through the Redis queue, and the
  event's id is the one the handler saw;
* fire-and-forget events of several sessions are dispatched once each, in each session's order,
  and acknowledged (nothing pending in Redis afterwards);
* ``status`` shows the backend, the instance, every partition owned with its lag and pending;
* Redis absent at start: ``gatewayd run`` exits 69 with an error naming the URL;
* a partition count in ``<ns>:meta`` that is no number (written by hand): the start fails with
  exit 1 naming the key and the fix (it was a ``ValueError`` traceback);
* Redis lost while running: ``status`` (and ``gatewayd status``) keeps answering and says so, a
  poster gets ``queue_unavailable`` after ``waitMs``, one waiting when Redis comes back is
  accepted, and every accepted event is dispatched once it is back.

What every journal backend does (Redis at its ``maxmemory`` refusing with ``journal_full``,
dead letters, restarts) is the contract suite's, tests/journal/test_journal_contract.py.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import RedisServer, instance_config
from tests.support.cli import gatewayd
from tests.support.state import clean_env, new_state_dir, wait_until, write_config

pytestmark = [pytest.mark.xdist_group("redis")]  # one worker: redis-servers and instances

PARTITIONS = 8


def test_replies_order_and_status(instances: Instances, redis_server: RedisServer) -> None:
    (daemon,) = instances(1, partitions=PARTITIONS)
    reply = daemon.request(
        "trigger", event="command:work", sessionKey="s-reply", context={"n": 0}, wait=True
    )
    assert reply["ok"], reply
    with daemon.control() as control:
        for n in range(1, 301):
            for session in ("a", "b", "c"):
                sent = control.request(
                    "trigger", event="command:work", sessionKey=session, context={"n": n},
                    wait=False,
                )  # fmt: skip
                assert sent["ok"], sent

    def all_in() -> list[dict[str, Any]] | None:
        records = read_shared(instances.record)
        return records if len(records) >= 901 else None

    records = wait_until(all_in, what="901 dispatches")
    by_session: dict[str, list[int]] = defaultdict(list)
    for record in records:
        by_session[record["session"]].append(record["n"])
    assert by_session["s-reply"] == [0]
    for session in ("a", "b", "c"):
        assert by_session[session] == list(range(1, 301))
    assert len({r["id"] for r in records}) == 901

    def settled() -> dict[str, Any] | None:
        journal = daemon.request("status")["status"]["queue"]["journal"]
        owned = journal["owned"]
        return journal if all(p["pending"] == 0 for p in owned) and owned else None

    journal = wait_until(settled, what="every entry acknowledged")
    assert journal["backend"] == "redis"
    assert journal["connected"] is True
    assert [p["partition"] for p in journal["owned"]] == list(range(PARTITIONS))
    assert all(p["lag"] == 0 for p in journal["owned"])
    with redis_server.client() as client:
        pending = sum(
            client.xpending(f"gatewayd:p:{p}", "gatewayd")["pending"] for p in range(PARTITIONS)
        )
    assert pending == 0
    assert daemon.stop() == 0


def start_once(state: Path, url: str) -> subprocess.CompletedProcess[str]:
    """``gatewayd run`` on ``state`` with the Redis queue at ``url``, for a start that fails."""
    write_config(state, instance_config(url))
    return subprocess.run(
        [sys.executable, "-m", "gatewayd", "run"],
        env=clean_env(state),
        cwd=state,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_redis_absent_at_start_exits_69(redis_server: RedisServer) -> None:
    redis_server.stop()
    state = new_state_dir()
    try:
        proc = start_once(state, redis_server.url)
        assert proc.returncode == 69, proc.stderr
        assert f"cannot reach Redis at {redis_server.url}" in proc.stderr
        assert "gateway.queue.redis.url" in proc.stderr
    finally:
        subprocess.run(["rm", "-rf", str(state)], check=False)
        Path(redis_server.dir).mkdir(exist_ok=True)


def test_redis_lost_while_running(instances: Instances, redis_server: RedisServer) -> None:
    (daemon,) = instances(1, partitions=4, wait_ms=3000)

    def post(n: int) -> dict[str, Any]:
        with daemon.control() as control:
            return control.request(
                "trigger", event="command:work", sessionKey="lost", context={"n": n}, wait=False
            )

    assert post(0)["ok"]
    redis_server.stop()

    def down() -> dict[str, Any] | None:
        journal = daemon.request("status")["status"]["queue"]["journal"]
        return None if journal["connected"] else journal

    wait_until(down, what="status saying Redis is unreachable")
    shown = gatewayd(daemon.state, "status")
    assert shown.returncode == 0, shown.stderr
    assert "UNREACHABLE" in shown.stdout
    refused = post(1)  # nobody brings Redis back within waitMs: a clear error
    assert refused["error"]["code"] == "queue_unavailable", refused
    assert "gateway.queue.redis.waitMs" in refused["error"]["message"]
    waiting: list[dict[str, Any]] = []

    def post_until_accepted() -> None:
        # It waits for Redis and is accepted once Redis is back; should starting Redis take
        # longer than waitMs on a loaded machine, it is refused with the same clear error and
        # posted again, as a producer would.
        while not (waiting and waiting[-1].get("ok")):
            waiting.append(post(2))
            assert waiting[-1].get("ok") or waiting[-1]["error"]["code"] == "queue_unavailable"

    poster = threading.Thread(target=post_until_accepted)
    poster.start()
    redis_server.start()
    poster.join(120)
    assert waiting and waiting[-1]["ok"], waiting
    assert post(3)["ok"]
    wait_until(lambda: not down(), what="status saying Redis is back")

    def dispatched() -> list[int] | None:
        ns = [r["n"] for r in read_shared(instances.record) if r["session"] == "lost"]
        return ns if 3 in ns else None

    assert wait_until(dispatched, what="the events around the outage dispatched") == [0, 2, 3]
    assert [r for r in daemon.logs if r.get("event") == "queue.redis_lost"]
    assert [r for r in daemon.logs if r.get("event") == "queue.redis_back"]
    assert daemon.stop() == 0


def test_a_partition_count_that_is_no_number_stops_the_start_naming_the_key(
    redis_server: RedisServer,
) -> None:
    with redis_server.client() as client:
        client.hset("gatewayd:meta", "partitions", "abc")
    state = new_state_dir()
    try:
        proc = start_once(state, redis_server.url)
        assert proc.returncode == 1, proc.stderr
        assert "has 'abc' as its partition count in gatewayd:meta" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        subprocess.run(["rm", "-rf", str(state)], check=False)
