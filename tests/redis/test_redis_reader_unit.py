"""The Redis queue's reader when a partition's lease runs out while its read is under way.

The lease's validity is local time (renewed every ``leaseMs / 3``); a late lease round (a busy
loop) lets it lapse locally while Redis still holds it, and the next round renews it. Entries a
read returned meanwhile were in this consumer's pending list and were never dispatched: nothing
looked for them there (the resync of a partition runs when it is gained, and the stranded-entry
check looks at other consumers). Seen as one accepted event never dispatched in
``test_three_instances_kill_join_restart`` under load. Fakes stand in for the lease table and
the client here: only the order of "valid when the read began, not when it returned" matters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from gatewayd.journal import redis_consumer

PARTITION = 3


class LapsingLeases:
    """Valid for the reader's check before its read, not once the read has returned."""

    def __init__(self) -> None:
        self.owned = {PARTITION: 0.0}
        self.checks = 0

    def valid(self, partition: int) -> bool:
        self.checks += 1
        return self.checks == 1


class OneRead:
    """The reader's connection: returns two entries of the partition once (calling
    ``meanwhile`` first), then nothing."""

    def __init__(self, returned: asyncio.Event, meanwhile: Callable[[], None]) -> None:
        self.returned = returned
        self.meanwhile = meanwhile

    async def execute(self, commands: Any, limit_s: float = 0) -> list[Any]:
        if self.returned.is_set():
            await asyncio.sleep(3600)
        self.meanwhile()
        self.returned.set()
        stream = f"gw:stream:{PARTITION}".encode()
        return [{stream: [[b"1-0", [b"e", b"{}"]], [b"1-1", [b"e", b"{}"]]]}]


def journal(shutdown_meanwhile: bool, returned: asyncio.Event) -> Any:
    def meanwhile() -> None:
        if shutdown_meanwhile:
            j._delivering = False

    j = SimpleNamespace(
        instance="me",
        leases=LapsingLeases(),
        capacity=100,
        _inflight={},
        _ready={PARTITION},
        _delivering=True,
        _reading=frozenset(),
        _reads=OneRead(returned, meanwhile),
        _reread_replies=False,
        keys=SimpleNamespace(stream=lambda p: f"gw:stream:{p}", reply=lambda i: f"gw:reply:{i}"),
        _up=lambda: None,
        _stranded=set(),
        _held={PARTITION: set()},
    )
    return j


async def read_once(shutdown_meanwhile: bool) -> Any:
    returned = asyncio.Event()
    j = journal(shutdown_meanwhile, returned)
    task = asyncio.create_task(redis_consumer.reader(j))
    await returned.wait()
    for _ in range(5):  # the reader handles what the read returned without waiting
        await asyncio.sleep(0)
    task.cancel()
    return j


def test_entries_read_as_the_lease_lapsed_mark_the_partition_for_a_resync() -> None:
    j = asyncio.run(read_once(shutdown_meanwhile=False))
    assert j._stranded == {PARTITION}  # the next lease round claims and dispatches them
    assert j._held[PARTITION] == set() and j._inflight == {}  # not dispatched here meanwhile


def test_entries_read_as_shutdown_began_are_left_to_the_next_owner() -> None:
    j = asyncio.run(read_once(shutdown_meanwhile=True))
    assert j._stranded == set()


def test_a_queue_task_that_dies_of_an_error_is_logged_with_the_fix() -> None:
    from structlog.testing import capture_logs

    from gatewayd.journal.redis_queue import RedisJournal

    async def dies() -> None:
        raise RuntimeError("a bug in a reader")

    async def finishes() -> None:
        return None

    async def run() -> set[Any]:
        queue: Any = SimpleNamespace(_tasks=set())
        queue._ended = lambda task: RedisJournal._ended(queue, task)
        for coro in (dies(), finishes()):
            RedisJournal._spawn(queue, coro)
        for _ in range(3):
            await asyncio.sleep(0)
        return queue._tasks  # type: ignore[no-any-return]

    with capture_logs() as logs:
        left = asyncio.run(run())
    assert left == set()
    failed = [e for e in logs if e["event"] == "queue.task_failed"]
    assert len(failed) == 1, logs
    assert failed[0]["error"] == "RuntimeError: a bug in a reader"
    assert failed[0]["task"].endswith("dies") and "restart gatewayd" in failed[0]["fix"]
