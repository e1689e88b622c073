"""The Prometheus figures of the Redis queue: whether the instance is connected, and per owned
partition its lag (entries not read yet) and pending (read, not acknowledged)."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.redis.redis_support import RedisServer, instance_config
from tests.support.daemon import Daemon
from tests.support.state import new_state_dir, wait_until, write_config

pytestmark = [pytest.mark.xdist_group("redis")]


def samples(address: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_a_redis_instance_exports_connected_and_each_owned_partitions_lag_and_pending(
    redis_server: RedisServer,
) -> None:
    state = new_state_dir()
    config = instance_config(redis_server.url, partitions=4)
    config["gateway"]["metrics"] = {"listen": "127.0.0.1:0"}
    write_config(state, config)
    daemon = Daemon(state)
    try:
        daemon.start()
        address = daemon.wait_log("metrics.listening")["address"]
        with daemon.control() as ctl:
            ctl.ok("trigger", event="command:work", sessionKey="s1")

        def owned() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            found = samples(address)
            lags = found.get("gatewayd_journal_partition_lag", [])
            return found if len(lags) == 4 else None

        found = wait_until(owned, what="the 4 partitions owned and exported")
        assert found["gatewayd_journal_connected"] == [({}, 1.0)], found.get(
            "gatewayd_journal_connected"
        )
        lags = {labels["partition"]: v for labels, v in found["gatewayd_journal_partition_lag"]}
        pending = {
            labels["partition"]: v for labels, v in found["gatewayd_journal_partition_pending"]
        }
        assert sorted(lags) == sorted(pending) == ["0", "1", "2", "3"], (lags, pending)
        assert all(v >= 0 for v in [*lags.values(), *pending.values()])
        assert found["gatewayd_journal_reconnects_total"][0][1] == 0
    finally:
        daemon.close()
