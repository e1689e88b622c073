"""The per-session bound (gatewayd/lanes.py) in-process: the orders a socket client cannot pin.

One session's backlog must never stall other sessions. Each test drives a
real TriggerQueue and Dispatcher (the in-memory journal, or the SQLite one on a real file) and
checks who is accepted, in which order, and that nothing accepted is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal.base import JournalError
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import QueueClosed, QueueFull, TriggerQueue


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def event(session: str, n: int, action: str = "step") -> HookEvent:
    return create_hook_event("command", action, session, {"n": n})


def test_a_full_session_makes_its_own_posters_wait_while_others_are_accepted() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=100, per_session_max=3, per_session_wait_s=3600)
        accepted: list[str] = []

        async def post(session: str, n: int) -> None:
            try:
                await queue.post(event(session, n))
                accepted.append(f"{session}{n}")
            except QueueClosed:
                accepted.append(f"closed {session}{n}")

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(post, "a", n)
            await anyio.wait_all_tasks_blocked()
            assert accepted == ["a0", "a1", "a2"]  # a3 and a4 wait in a's own line
            for n in range(3):
                tg.start_soon(post, "b", n)
            await anyio.wait_all_tasks_blocked()
            assert accepted == ["a0", "a1", "a2", "b0", "b1", "b2"]
            assert {k: len(v) for k, v in queue.bounds.waiting.items()} == {"a": 2}
            with pytest.raises(QueueFull) as refused:
                queue.post_nowait(event("a", 9))
            assert refused.value.session_key == "a"
            assert "gateway.queue.perSessionMax" in str(refused.value)
            queue.bound_sessions(4, 3600)  # a reload raising the bound lets the first one in
            await anyio.wait_all_tasks_blocked()
            assert accepted[-1] == "a3"
            queue.close()
        assert accepted[-1] == "closed a4"  # still waiting when the queue closed
        assert queue.depth == 7

    run(main)


def test_a_flooded_session_cannot_starve_another_of_the_shared_capacity() -> None:
    """Fails without the per-session bound: the flood fills the capacity and b's one event
    waits behind every one of a's posters (FIFO), so it is dispatched after all of them."""
    order: list[str] = []

    async def main() -> None:
        gate = anyio.Event()

        async def handler(ev: HookEvent) -> None:
            if ev.session_key == "a":
                await gate.wait()
            order.append(f"{ev.session_key}{ev.context['n']}")

        registry = HookRegistry(default_timeout_s=3600)
        registry.register("command:step", handler)
        queue = TriggerQueue(capacity=8, per_session_max=4, per_session_wait_s=3600)
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)

            async def flood() -> None:
                for n in range(40):
                    await queue.post(event("a", n))

            async with anyio.create_task_group() as producers:
                for _ in range(4):
                    producers.start_soon(flood)
                await anyio.wait_all_tasks_blocked()
                with anyio.fail_after(30):  # accepted and dispatched while a's hook is blocked
                    ticket = await queue.submit(event("b", 0))
                    await ticket.wait()
                assert order == ["b0"]
                gate.set()
            assert await dispatcher.drain(30) == 0
        assert dispatcher.dispatched == 161
        assert queue.bounds.held == {}

    run(main)
    a_seen = [e for e in order if e.startswith("a")]
    assert len(a_seen) == 160  # nothing accepted was lost


def test_a_session_that_stays_full_gets_queue_full_naming_it_and_the_key() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=100, per_session_max=2, per_session_wait_s=0.05)
        await queue.post(event("flooded", 0))
        await queue.post(event("flooded", 1))
        with pytest.raises(QueueFull) as refused:
            await queue.post(event("flooded", 2))
        text = str(refused.value)
        assert "session 'flooded'" in text and "gateway.queue.perSessionMax" in text
        assert "not accepted" in text and "gateway.queue.perSessionWaitMs" in text
        assert refused.value.code == "queue_full"
        with pytest.raises(QueueFull):
            await queue.submit(event("flooded", 3))
        await queue.post(event("other", 0))  # another session is not refused
        assert queue.bounds.refused == 2
        assert queue.bounds.held == {"flooded": 2, "other": 1}
        assert queue.bounds.waiting == {}

    run(main)


def test_posters_get_room_as_each_event_is_dispatched_not_per_batch() -> None:
    """A worker takes up to 64 events of a lane at once; a waiting poster of that session is
    let in as soon as one of them is dispatched, not after the whole batch."""

    async def main() -> list[str]:
        order: list[str] = []
        steps = [anyio.Event() for _ in range(3)]

        async def handler(ev: HookEvent) -> None:
            n = ev.context["n"]
            if n < 3:
                await steps[n].wait()
            order.append(f"run {n}")

        registry = HookRegistry(default_timeout_s=3600)
        registry.register("command:step", handler)
        queue = TriggerQueue(capacity=100, per_session_max=3, per_session_wait_s=3600)
        dispatcher = Dispatcher(queue, registry, concurrency=1)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            for n in range(3):
                await queue.post(event("s", n))

            async def late() -> None:
                await queue.post(event("s", 3))
                order.append("accepted 3")

            tg.start_soon(late)
            await anyio.wait_all_tasks_blocked()
            assert order == []
            steps[0].set()
            await anyio.wait_all_tasks_blocked()
            assert order == ["run 0", "accepted 3"]  # events 1 and 2 are still in the batch
            steps[1].set()
            steps[2].set()
            assert await dispatcher.drain(30) == 0
        return order

    assert run(main) == ["run 0", "accepted 3", "run 1", "run 2", "run 3"]


def test_a_handler_posting_to_its_own_full_session_is_not_held() -> None:
    """A handler's lane drains only when it returns: waiting for room there would deadlock."""

    async def main() -> Dispatcher:
        queue = TriggerQueue(capacity=100, per_session_max=1, per_session_wait_s=0)
        seen: list[int] = []
        last = anyio.Event()

        async def fan_out(ev: HookEvent) -> None:
            for n in range(5):
                await queue.post(event(ev.session_key, n, "child"))

        async def child(ev: HookEvent) -> None:
            seen.append(ev.context["n"])
            if len(seen) == 5:
                last.set()

        registry = HookRegistry()
        registry.register("command:parent", fan_out)
        registry.register("command:child", child)
        dispatcher = Dispatcher(queue, registry, concurrency=1)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await queue.post(event("s", 0, "parent"))
            with anyio.fail_after(30):
                await last.wait()
            assert await dispatcher.drain(30) == 0
        assert seen == [0, 1, 2, 3, 4]
        return dispatcher

    dispatcher = run(main)
    assert (dispatcher.dispatched, dispatcher.errors) == (6, 0)


def test_follows_is_not_held_and_a_cancelled_waiter_gives_its_place_back() -> None:
    async def main() -> None:
        queue = TriggerQueue(capacity=100, per_session_max=1, per_session_wait_s=3600)
        await queue.post(event("s", 0))
        await queue.submit(event("s", 1), follows=True)  # the rest of an accepted message
        queue.post_nowait(event("s", 2), follows=True)
        assert queue.bounds.held == {"s": 3}
        with anyio.move_on_after(0.05):
            await queue.post(event("s", 3))
        assert queue.bounds.waiting == {} and queue.bounds.held == {"s": 3}
        assert queue.depth == 3

    run(main)


def test_a_poster_waiting_for_the_queue_holds_its_place_in_the_session() -> None:
    """With the whole queue full, a session's waiting posters count against its bound, so one
    session cannot line up more than its bound ahead of everyone else."""

    async def main() -> None:
        queue = TriggerQueue(capacity=2, per_session_max=2, per_session_wait_s=3600)
        queue.post_nowait(event("x", 0))
        queue.post_nowait(event("y", 0))
        accepted: list[str] = []

        async def post(session: str, n: int) -> None:
            try:
                await queue.post(event(session, n))
                accepted.append(f"{session}{n}")
            except QueueClosed:
                accepted.append(f"closed {session}{n}")

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(post, "a", n)
            await anyio.wait_all_tasks_blocked()
            assert queue.bounds.held["a"] == 2  # two wait for the queue, two for the session
            assert len(queue.bounds.waiting["a"]) == 2
            tg.start_soon(post, "b", 0)
            await anyio.wait_all_tasks_blocked()
            queue.resize(5)  # three slots: a0, a1 (first in line), then b0, not a2
            await anyio.wait_all_tasks_blocked()
            assert accepted == ["a0", "a1", "b0"]
            queue.close()
        assert sorted(accepted[3:]) == ["closed a2", "closed a3"]

    run(main)


def test_the_bound_composes_with_the_durable_journal(tmp_path: Path) -> None:
    """Events of a full session wait for room, then go through the SQLite journal like any
    other; every one is dispatched once, in order, and the counts go back to zero."""

    async def main() -> tuple[list[int], dict[str, Any]]:
        seen: list[int] = []

        async def record(ev: HookEvent) -> None:
            await anyio.lowlevel.checkpoint()
            seen.append(ev.context["n"])

        journal = SqliteJournal(tmp_path / "events.db", base=dict, sync="normal")
        assert await journal.open() == []
        registry = HookRegistry()
        registry.register("command:step", record)
        queue = TriggerQueue(100, journal, per_session_max=2, per_session_wait_s=3600)
        dispatcher = Dispatcher(queue, registry, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            for n in range(50):
                await queue.post(event("s", n))
            assert await dispatcher.drain(30) == 0
        await journal.close()
        assert queue.bounds.held == {}
        return seen, journal.stats()

    seen, stats = run(main)
    assert seen == list(range(50))
    assert stats["pending"] == 0


def test_the_bound_is_validated() -> None:
    with pytest.raises(ValueError, match="perSessionMax must be at least 1"):
        TriggerQueue(per_session_max=0)
    with pytest.raises(ValueError, match="perSessionWaitMs must be 0 or more"):
        TriggerQueue(per_session_wait_s=-1)


def test_an_event_the_journal_refuses_gives_its_session_place_back(tmp_path: Path) -> None:
    """The journal's refusals (journal_full, or a context it cannot record, as here) are not
    accepted events: they leave the session's count, so the session is not left full."""

    async def main() -> None:
        journal = SqliteJournal(tmp_path / "events.db", base=dict, sync="normal")
        assert await journal.open() == []
        queue = TriggerQueue(100, journal, per_session_max=1, per_session_wait_s=0)
        looped: dict[str, Any] = {}
        looped["self"] = looped
        bad = create_hook_event("command", "step", "s", {"loop": looped})
        with pytest.raises(JournalError, match="cannot be recorded"):
            await queue.post(bad)
        assert queue.bounds.held == {} and queue.depth == 0
        await queue.post(event("s", 1))  # the session has room again: accepted at once
        assert queue.bounds.held == {"s": 1}
        with pytest.raises(QueueFull):
            await queue.post(event("s", 2))
        await journal.close()

    run(main)
