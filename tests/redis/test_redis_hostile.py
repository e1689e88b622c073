"""Entries nobody's gatewayd wrote, put into a running instance's streams by hand (redis-cli).

* a partition entry whose ``e`` is JSON nested past the stack: it is logged (``queue.bad_entry``)
  and acknowledged, and the partition's next events are dispatched; it used to end the reader
  task, and the instance kept its leases while reading nothing again;
* a reply entry that is no reply: it is logged (``queue.bad_reply``) and skipped, and replies
  from the other instance still reach their posters; it used to end the reply reader;
* a partition's stream deleted (``DEL``) under a running instance: its group is made again and
  the events posted after are dispatched. Redis answers the read waiting on the stream with
  ``UNBLOCKED``, which ended the reader, and the next ``XADD`` makes the stream without a group;
* a dead letter that is no dead letter in ``<ns>:dead``: ``events list``, ``show`` and ``retry``
  name it and ``events purge``, which removes it (they answered a bare JSON parser error).
"""

from __future__ import annotations

import zlib

import pytest

from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import RedisServer
from tests.redis.test_redis_many import owned
from tests.support.state import wait_until

pytestmark = [pytest.mark.xdist_group("redis")]  # one worker: redis-servers and instances

DEEP = "[" * 100_000 + "]" * 100_000
BOGUS = "ffff0000-1"
"""The id of a dead letter put into ``<ns>:dead`` by hand."""


def test_an_entry_nested_past_the_stack_is_skipped_and_reading_goes_on(
    instances: Instances, redis_server: RedisServer
) -> None:
    (daemon,) = instances(1, partitions=1)
    with redis_server.client() as client:
        client.xadd("gatewayd:p:0", {"e": DEEP})
    bad = daemon.wait_log("queue.bad_entry")
    assert "nested too deeply" in bad["error"]
    reply = daemon.request(
        "trigger", event="command:work", sessionKey="after", context={"n": 1}, wait=True
    )
    assert reply["ok"] and reply["messages"] == [f"n=1 pid={daemon.proc.pid}"], reply

    def acknowledged() -> bool:
        with redis_server.client() as client:
            return bool(client.xpending("gatewayd:p:0", "gatewayd")["pending"] == 0)

    wait_until(acknowledged, what="the bad entry acknowledged")
    assert daemon.stop() == 0


@pytest.mark.parametrize(
    "reply",
    ["garbage", pytest.param(DEEP, id="nested"), "[1]", "no r field"],
)
def test_a_reply_entry_that_is_no_reply_is_skipped_and_replies_go_on(
    instances: Instances, redis_server: RedisServer, reply: str
) -> None:
    first, second = instances(2, partitions=2)
    wait_until(lambda: owned(first) and owned(second), timeout=120, what="both own partitions")
    instance = first.request("status")["status"]["queue"]["journal"]["instance"]
    with redis_server.client() as client:
        fields = {"x": "1"} if reply == "no r field" else {"r": reply}
        client.xadd(f"gatewayd:reply:{instance}", fields)
    assert first.wait_log("queue.bad_reply")["entry"]
    theirs = set(owned(second))
    session = next(f"r{i}" for i in range(10_000) if zlib.crc32(f"r{i}".encode()) % 2 in theirs)
    answer = first.request(
        "trigger", event="command:work", sessionKey=session, context={"n": 7}, wait=True
    )
    assert answer["ok"] and answer["messages"] == [f"n=7 pid={second.proc.pid}"], answer
    assert [r["n"] for r in read_shared(instances.record)] == [7]
    assert first.stop() == 0 and second.stop() == 0


def test_a_stream_deleted_under_a_running_instance_gets_its_group_back(
    instances: Instances, redis_server: RedisServer
) -> None:
    (daemon,) = instances(1, partitions=1)
    daemon.request("trigger", event="command:work", sessionKey="s", context={"n": 0}, wait=True)
    with redis_server.client() as client:
        client.delete("gatewayd:p:0")
    with daemon.control() as control:
        for n in range(1, 6):
            control.ok("trigger", event="command:work", sessionKey="s", context={"n": n})
    daemon.wait_log("queue.redis_groups_gone")
    wait_until(
        lambda: [r["n"] for r in read_shared(instances.record)] == list(range(6)),
        what="the events posted after the stream went dispatched, in order",
    )
    assert daemon.stop() == 0


@pytest.mark.parametrize("letter", ["not json", '{"entry": "[1]"}', '{"letters": 5}'])
def test_a_dead_letter_that_is_no_dead_letter_names_itself_and_the_fix(
    instances: Instances, redis_server: RedisServer, letter: str
) -> None:
    (daemon,) = instances(1, partitions=1)
    with redis_server.client() as client:
        client.hset("gatewayd:dead", BOGUS, letter)
    with daemon.control() as control:
        for action, fields in (
            ("list", {"state": "dead"}),
            ("show", {"eventId": BOGUS}),
            ("retry", {"ids": [BOGUS]}),
        ):
            reply = control.request("events", action=action, **fields)
            assert not reply["ok"], reply
            message = reply["error"]["message"]
            assert f"dead letter {BOGUS}" in message and f"events purge {BOGUS}" in message, message
        assert control.ok("events", action="purge", ids=[BOGUS])["purged"] == 1
        assert control.ok("events", action="list", state="dead")["events"] == []
    assert daemon.stop() == 0
