"""TriggerQueue and Dispatcher in-process: the API edges a socket client cannot reach."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import QueueClosed, QueueFull, TriggerQueue


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def event(session: str, n: int, action: str = "step") -> HookEvent:
    return create_hook_event("command", action, session, {"n": n})


def test_post_nowait_on_a_full_queue_raises_a_clear_queue_full() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=2)
        queue.post_nowait(event("s", 1))
        queue.submit_nowait(event("s", 2))
        with pytest.raises(QueueFull, match=r"full \(2 events waiting\).*gateway.queue.capacity"):
            queue.post_nowait(event("s", 3))
        with pytest.raises(QueueFull):
            queue.submit_nowait(event("t", 3))
        assert (queue.depth, queue.peak, queue.accepted) == (2, 2, 2)

    run(main)


def test_post_waits_for_room_and_nothing_is_lost_or_reordered() -> None:
    seen: list[tuple[str, int]] = []

    async def record(ev: HookEvent) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append((ev.session_key, ev.context["n"]))

    async def main() -> Dispatcher:
        registry = HookRegistry()
        registry.register("command:step", record)
        queue = TriggerQueue(capacity=3)
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)

            async def producer(session: str) -> None:
                for n in range(200):
                    await queue.post(event(session, n))

            async with anyio.create_task_group() as producers:
                for session in ("a", "b", "c", "d"):
                    producers.start_soon(producer, session)
            assert await dispatcher.drain(30) == 0
        return dispatcher

    dispatcher = run(main)
    assert dispatcher.dispatched == 800
    assert dispatcher.queue.peak == 3
    for session in "abcd":
        assert [n for s, n in seen if s == session] == list(range(200))


def test_a_slow_session_does_not_hold_up_another() -> None:
    async def main() -> None:
        release = anyio.Event()

        async def handler(ev: HookEvent) -> None:
            if ev.action == "slow":
                await release.wait()
            ev.messages.append(f"{ev.action} {ev.session_key}")

        registry = HookRegistry()
        registry.register("command", handler)
        queue = TriggerQueue()
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            slow = await queue.submit(event("A", 0, "slow"))
            behind = await queue.submit(event("A", 1, "quick"))
            other = await queue.submit(event("B", 0, "quick"))
            with anyio.fail_after(10):
                assert (await other.wait()).messages == ["quick B"]
            assert not slow.done and not behind.done
            release.set()
            with anyio.fail_after(10):
                assert (await behind.wait()).messages == ["quick A"]
            assert slow.done
            await dispatcher.drain(10)

    run(main)


def test_drain_deadline_leaves_events_counted_and_their_tickets_raise() -> None:
    async def main() -> None:
        async def stuck(ev: HookEvent) -> None:
            await anyio.sleep(3600)

        registry = HookRegistry(default_timeout_s=3600)
        registry.register("command:step", stuck)
        queue = TriggerQueue()
        dispatcher = Dispatcher(queue, registry, concurrency=1)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            tickets = [await queue.submit(event("s", n)) for n in range(5)]
            await anyio.sleep(0.05)
            assert await dispatcher.drain(0.1) == 5
            assert dispatcher.dispatched == 0
            for ticket in tickets:
                with pytest.raises(QueueClosed, match="not dispatched"):
                    await ticket.wait()
            with pytest.raises(QueueClosed):
                await queue.post(event("s", 9))
            with pytest.raises(QueueClosed):
                queue.post_nowait(event("s", 9))
        assert dispatcher.stats()["left"] == 5

    run(main)


def test_close_wakes_waiting_posters_and_resize_lets_them_in() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=1)
        queue.post_nowait(event("s", 0))
        outcomes: list[str] = []

        async def poster(n: int) -> None:
            try:
                await queue.post(event("s", n))
                outcomes.append(f"in {n}")
            except QueueClosed:
                outcomes.append(f"closed {n}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(poster, 1)
            tg.start_soon(poster, 2)
            tg.start_soon(poster, 3)
            # Not a sleep: under load the posters' wake-ups can take longer than any sleep.
            await anyio.wait_all_tasks_blocked()
            assert outcomes == []
            queue.resize(3)  # room for two more: the first two waiting posters get in
            await anyio.wait_all_tasks_blocked()
            assert outcomes == ["in 1", "in 2"]
            queue.close()
        assert outcomes == ["in 1", "in 2", "closed 3"]
        assert queue.depth == 3

    run(main)


def test_stats_report_counts_and_latency() -> None:
    async def main() -> dict[str, Any]:
        async def fails(ev: HookEvent) -> None:
            raise RuntimeError("boom")

        registry = HookRegistry()
        registry.register("command:bad", fails)
        queue = TriggerQueue(capacity=8)
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await (await queue.submit(event("s", 0, "bad"))).wait()
            for n in range(5):
                await queue.post(event("s", n))
            await dispatcher.drain(10)
        return dispatcher.stats()

    stats = run(main)
    assert stats["dispatched"] == 6
    assert stats["errors"] == 1
    assert stats["timeouts"] == 0
    assert stats["depth"] == 0 and stats["capacity"] == 8 and stats["left"] == 0
    assert 1 <= stats["latency_ms"]["samples"] <= 6  # one per batch taken
    assert (
        0 <= stats["latency_ms"]["p50"] <= stats["latency_ms"]["p99"] <= stats["latency_ms"]["max"]
    )


def test_post_all_shares_one_durable_commit_and_keeps_the_order(tmp_path: Path) -> None:
    """A message's message:sent events: appended together, so one commit covers them; each is
    dispatched in order once durable."""
    seen: list[int] = []

    async def record(ev: HookEvent) -> None:
        seen.append(ev.context["n"])

    async def main() -> int:
        registry = HookRegistry()
        registry.register("command:step", record)
        journal = SqliteJournal(tmp_path / "events.db", base=dict)
        queue = TriggerQueue(capacity=64, journal=journal)
        assert await journal.open() == []
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await queue.post_all([event("s", n) for n in range(5)])
            commits = journal.commits
            assert journal.committed == 5  # durable when post_all returns
            assert await dispatcher.drain(30) == 0
        await journal.close()
        return commits

    assert run(main) == 1
    assert seen == list(range(5))


def test_post_all_waits_for_room_and_stops_at_a_closed_queue() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=2)
        registry = HookRegistry()
        dispatcher = Dispatcher(queue, registry, concurrency=1)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await queue.post_all([event("s", n) for n in range(10)])  # 10 through 2 slots
            assert await dispatcher.drain(30) == 0
        assert dispatcher.dispatched == 10
        with pytest.raises(QueueClosed):
            await queue.post_all([event("s", 10)])

    run(main)


def test_durable_batches_dispatched_during_the_next_commit_keep_order_and_durability(
    tmp_path: Path,
) -> None:
    """Many producers, so that commits carry batches large enough to be handed back by the
    writer during the next batch's COMMIT (gatewayd/journal/sqlite.py, HAND_BACK_MIN): each
    post returns only once its event is in the file, every event is dispatched once, in post
    order within its session, and none is left pending in the file."""
    producers, per_producer, sessions = 96, 12, 8
    seen: dict[str, list[int]] = {}
    unwritten: list[str] = []
    path = tmp_path / "events.db"

    async def record(ev: HookEvent) -> None:
        seen.setdefault(ev.session_key, []).append(ev.context["n"])

    async def main() -> SqliteJournal:
        registry = HookRegistry()
        registry.register("command:step", record)
        journal = SqliteJournal(path, base=dict)
        queue = TriggerQueue(capacity=1024, journal=journal)
        assert await journal.open() == []
        reader = sqlite3.connect(path)
        dispatcher = Dispatcher(queue, registry, concurrency=4)

        async def produce(p: int) -> None:
            key = f"s{p % sessions}"
            for i in range(per_producer):
                ev = event(key, p * 1000 + i)
                await queue.post(ev)
                seq = int(ev.id.rsplit("-", 1)[1])
                # Accepted: in the file (or already done and deleted, its seq used).
                if seq > reader.execute("SELECT seq FROM sqlite_sequence").fetchone()[0]:
                    unwritten.append(ev.id)

        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            async with anyio.create_task_group() as posting:
                for p in range(producers):
                    posting.start_soon(produce, p)
            assert await dispatcher.drain(30) == 0
        await journal.close()
        left = reader.execute("SELECT count(*) FROM events").fetchone()[0]
        reader.close()
        assert left == 0
        return journal

    journal = run(main)
    assert unwritten == []
    assert journal.committed == producers * per_producer
    assert journal.committed / journal.commits >= 32  # large batches: the handed-back path ran
    for key, numbers in seen.items():
        by_producer: dict[int, list[int]] = {}
        for n in numbers:
            by_producer.setdefault(n // 1000, []).append(n % 1000)
        assert all(ns == list(range(per_producer)) for ns in by_producer.values()), key
    assert sum(len(ns) for ns in seen.values()) == producers * per_producer
