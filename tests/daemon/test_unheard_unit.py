"""A message's ``message:sent`` events that no handler subscribes to (``Dispatcher.post_all``).

They are done as they are accepted (docs/design.md section 8): id given, counted by key,
accepted and dispatched, but neither journaled nor queued, unless the journal keeps done events
(``retainDone``). One a handler subscribes to is queued and dispatched as before, in order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import QueueClosed, TriggerQueue


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def sent(n: int, session: str = "agent:main:s") -> HookEvent:
    return create_hook_event("message", "sent", session, {"content": f"line {n}"})


def test_unheard_events_are_counted_done_without_a_lane_or_a_worker() -> None:
    async def main() -> None:
        queue = TriggerQueue()
        dispatcher = Dispatcher(queue, HookRegistry())
        events = [sent(n) for n in range(3)]
        await dispatcher.post_all(events)  # no workers run: a queued event would stay queued
        assert queue.depth == 0 and queue.sessions == 0
        assert queue.accepted == 3 and dispatcher.dispatched == 3
        assert dispatcher.registry.event_counts == {"message:sent": 3}
        assert all(e.id for e in events) and len({e.id for e in events}) == 3
        queue.close()
        with pytest.raises(QueueClosed):
            await dispatcher.post_all([sent(3)])
        assert queue.accepted == 3

    run(main)


def test_accept_unheard_counts_as_post_all_does_without_the_events() -> None:
    """The router does not build a reply's message:sent events when nothing hears them."""

    async def main() -> None:
        registry = HookRegistry()
        queue = TriggerQueue()
        dispatcher = Dispatcher(queue, registry)
        assert not dispatcher.hears("message:sent", "agent:main:s")
        dispatcher.accept_unheard("message:sent", 3)
        assert queue.depth == 0 and queue.sessions == 0
        assert queue.accepted == 3 and dispatcher.dispatched == 3
        assert registry.event_counts == {"message:sent": 3}
        later = sent(3)
        await dispatcher.post_all([later])
        assert later.id.endswith("-4")  # ids were used up, as post_all would
        registry.register("message:sent", lambda event: None)
        assert dispatcher.hears("message:sent", "agent:main:s")
        queue.close()
        with pytest.raises(QueueClosed):
            dispatcher.accept_unheard("message:sent", 1)
        assert queue.accepted == 4

    run(main)


@pytest.mark.parametrize("retain_done", [0, 5])
def test_the_sqlite_journal_hears_everything_when_it_keeps_done_events(
    tmp_path: Path, retain_done: int
) -> None:
    journal = SqliteJournal(tmp_path / "events.db", base=dict, retain_done=retain_done)
    dispatcher = Dispatcher(TriggerQueue(journal=journal), HookRegistry())
    assert dispatcher.hears("message:sent", "agent:main:s") == bool(retain_done)


def test_heard_events_are_queued_and_dispatched_in_order() -> None:
    seen: list[str] = []

    async def main() -> None:
        registry = HookRegistry()

        async def handler(event: HookEvent) -> None:
            seen.append(event.context["content"])

        registry.register("message:sent", handler)
        queue = TriggerQueue()
        dispatcher = Dispatcher(queue, registry)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await dispatcher.post_all([sent(n) for n in range(3)])
            assert queue.accepted == 3
            assert await dispatcher.drain(10) == 0
        assert dispatcher.dispatched == 3

    run(main)
    assert seen == ["line 0", "line 1", "line 2"]


@pytest.mark.parametrize("retain_done", [0, 5])
def test_the_sqlite_journal_records_them_only_when_it_keeps_done_events(
    tmp_path: Path, retain_done: int
) -> None:
    async def main() -> dict[str, Any]:
        journal = SqliteJournal(
            tmp_path / "events.db", base=dict, sync="normal", retain_done=retain_done
        )
        assert await journal.open() == []
        queue = TriggerQueue(journal=journal)
        dispatcher = Dispatcher(queue, HookRegistry())
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await dispatcher.post_all([sent(n) for n in range(3)])
            assert await dispatcher.drain(10) == 0
        listed = await journal.query({"action": "list", "state": "all"})
        await journal.close()
        assert dispatcher.dispatched == 3 and queue.accepted == 3
        return listed

    listed = run(main)
    assert len(listed["events"]) == (3 if retain_done else 0)
    assert listed["journal"]["commits"] == (1 if retain_done else 0)
