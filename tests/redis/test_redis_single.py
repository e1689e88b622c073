"""One gatewayd instance on a real Redis: posting, replies, order, status, absent Redis.

* ``trigger`` with ``wait`` gets the handler's messages back through the Redis queue, and the
  event's id is the one the handler saw;
* fire-and-forget events of several sessions are dispatched once each, in each session's order,
  and acknowledged (nothing pending in Redis afterwards);
* ``status`` shows the backend, the instance, every partition owned with its lag and pending;
* Redis absent at start: ``gatewayd run`` exits 69 with an error naming the URL.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import RedisServer, instance_config
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


def test_redis_absent_at_start_exits_69(redis_server: RedisServer) -> None:
    redis_server.stop()
    state = new_state_dir()
    try:
        write_config(state, instance_config(redis_server.url))
        proc = subprocess.run(
            [sys.executable, "-m", "gatewayd", "run"],
            env=clean_env(state),
            cwd=state,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 69, proc.stderr
        assert f"cannot reach Redis at {redis_server.url}" in proc.stderr
        assert "gateway.queue.redis.url" in proc.stderr
    finally:
        subprocess.run(["rm", "-rf", str(state)], check=False)
        Path(redis_server.dir).mkdir(exist_ok=True)
