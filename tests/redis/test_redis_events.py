"""Dead letters on the Redis queue are shared; an instance set to another partition count stops.

Two instances, each with a hook that fails (with ``retries: 1``) until a flag file exists: the
event is dead-lettered by whichever instance owns its session, and ``gatewayd events`` on the
*other* instance lists and shows it; ``events retry --all`` there dispatches it again, to the
failed hook only (the recorder does not run twice), and the dead letter is gone. A third
instance configured with another ``partitions`` count refuses to start with an error naming the
key and the count to use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.journal.journal_support import events_cli, read_records, recording_hook
from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import instance_config
from tests.support.cli import ok
from tests.support.state import wait_until, write_config

pytestmark = [pytest.mark.xdist_group("redis")]

PARTITIONS = 4
ENTRIES = {"flaky": {"retries": 1, "retryBackoffMs": 20}}


def _json(state: Any, *args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(events_cli(state, *args, "--json")).stdout)
    return data


def test_shared_dead_letters_and_partition_count(instances: Instances) -> None:
    instances.config = {"partitions": PARTITIONS, "entries": ENTRIES}
    flaky = {"flaky": recording_hook("flaky.jsonl", fail_unless="fixed")}
    first = instances.add(hooks=flaky)
    second = instances.add(hooks=flaky)
    reply = first.request(
        "trigger", event="command:work", sessionKey="dl", context={"n": 1}, wait=True
    )
    assert reply["ok"], reply

    def dead() -> list[dict[str, Any]] | None:
        events = _json(second.state, "list", "--state", "dead")["events"]
        return events or None

    (letter,) = wait_until(dead, what="the dead letter listed by the other instance")
    assert letter["sessionKey"] == "dl"
    assert [d["hook"] for d in letter["deadLetters"]] == ["flaky"]
    assert letter["deadLetters"][0]["attempts"] == 2
    shown = _json(second.state, "show", letter["id"])
    assert shown["context"]["n"] == 1
    for daemon in (first, second):
        (daemon.state / "fixed").write_text("")
    retried = _json(second.state, "retry", "--all")
    assert retried["retried"] == [letter["id"]]

    def fixed() -> list[dict[str, Any]] | None:
        records = [
            r for d in (first, second) for r in read_records(d.state, "flaky.jsonl")
            if not r.get("failed")
        ]  # fmt: skip
        return records or None

    (done,) = wait_until(fixed, what="the retried event dispatched to the fixed hook")
    assert done["id"] == letter["id"]
    assert [r["n"] for r in read_shared(instances.record)] == [1]  # the recorder ran once
    assert _json(first.state, "list", "--state", "dead")["events"] == []

    other = instances.add(start=False)
    write_config(other.state, instance_config(instances.server.url, partitions=PARTITIONS * 2))
    other.start(wait_ready=False)
    assert other.wait() == 1
    text = other.stderr_text()
    assert f"has {PARTITIONS} partitions" in text
    assert f"gateway.queue.redis.partitions to {PARTITIONS}" in text
