"""The journal contract (docs/design.md section 8), written once and run against every backend:
the in-memory journal, the SQLite journal on a real file and the Redis queue on a real
``redis-server`` (:mod:`tests.journal.backends`).

* an accepted event has an id that never repeats, is in the store before its poster is told
  "accepted", and is dispatched once, each session's events in post order;
* an event every handler finished is no longer pending and is not dispatched again after a
  restart; one that was not finished is, in its order, with its id, before anything new of its
  session (the memory journal keeps nothing across a restart);
* a handler that exhausts its retries leaves a dead letter (hook, error, attempts) that is
  listed and shown, retried to that hook alone, and purged; unknown ids are refused by name;
  dead letters outlive a restart in a durable store;
* a store with no room refuses with ``journal_full`` naming the fix, and accepts again once it
  has room; an event the store cannot hold (a context that contains itself) is refused with
  ``journal_error`` and the next one is accepted;
* ``gateway:*`` lifecycle events are delivered at once and never stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.hooks.events import create_hook_event
from gatewayd.journal.base import JournalError
from tests.journal.backends import (
    KEY,
    Dispatched,
    Handler,
    MemoryStore,
    RedisStore,
    Running,
    SqliteStore,
    Store,
    failing_until,
    recorder,
    running,
)
from tests.redis.redis_support import RedisServer

pytestmark = pytest.mark.anyio

BACKENDS = ("memory", "sqlite", "redis")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        sqlite = SqliteStore(tmp_path)
        try:
            yield sqlite
        finally:
            sqlite.close()
    else:
        server = RedisServer().start()
        try:
            yield RedisStore(server)
        finally:
            server.close()


def gated(gate: anyio.Event) -> dict[str, Any]:
    """One recorder, ``rec``, whose runs wait for ``gate``."""
    return {"rec": lambda seen: recorder("rec", seen, gate)}


async def test_an_accepted_event_is_recorded_before_its_poster_hears_so(store: Store) -> None:
    gate = anyio.Event()
    async with running(store, gated(gate)) as run:
        events = [await run.post("s", n) for n in range(5)]
        ids = [event.id for event in events]
        if store.durable:  # the handler has not finished any: all five are in the store
            assert set(ids) <= set(store.recorded())
        gate.set()
        await run.until(lambda: len(run.seen) == 5, "five dispatches")
    assert len(set(ids)) == 5 and all(ids)
    assert [d.id for d in run.seen] == ids  # once each, in post order


async def test_each_session_is_dispatched_in_post_order(store: Store) -> None:
    async def produce(session: str) -> None:
        for n in range(40):
            await run.post(session, n)

    async with running(store) as run:
        async with anyio.create_task_group() as tg:
            for session in "abcd":
                tg.start_soon(produce, session)
        await run.until(lambda: len(run.seen) == 160, "every event dispatched")
    for session in "abcd":
        assert run.ns(session) == list(range(40))
    assert len({d.id for d in run.seen}) == 160


async def test_a_finished_event_is_not_pending_and_not_dispatched_again(store: Store) -> None:
    async with running(store) as run:
        first = [await run.post("s", n) for n in range(3)]
        await run.until(lambda: len(run.seen) == 3, "three dispatches")
        if store.durable:
            await run.until(lambda: run.journal.stats()["pending"] == 0, "nothing pending")
            assert await listed(run, "pending", 0) == []  # the done marks reach the store
        else:
            assert run.journal.stats()["pending"] is None  # the memory journal keeps no list
    async with running(store) as again:
        later = await again.post("s", 99)  # a redelivered event would go before it
        await again.until(lambda: again.seen, "the new event dispatched")
    assert again.ns("s") == [99]
    assert later.id not in {event.id for event in first}


async def test_an_unfinished_event_is_dispatched_again_after_a_restart_in_order(
    store: Store,
) -> None:
    never = anyio.Event()
    async with running(store, gated(never), drain_s=0.2) as run:
        posted = [await run.post(session, n) for n in range(3) for session in ("a", "b")]
        if store.durable:
            listed = await run.query("list", state="pending")
            assert {e["id"] for e in listed["events"]} <= {event.id for event in posted}
            assert run.journal.stats()["pending"] > 0
    assert run.seen == []  # every dispatch was cut short by the drain's deadline
    async with running(store) as again:
        for session in ("a", "b"):
            await again.post(session, 3)
        await again.until(
            lambda: (
                len(again.ns("a")) + len(again.ns("b")) >= 2
                and all(3 in again.ns(s) for s in ("a", "b"))
            ),
            "the new events dispatched",
        )
    if not store.durable:
        assert again.ns("a") == again.ns("b") == [3]
        return
    for session in ("a", "b"):
        assert again.ns(session) == [0, 1, 2, 3]
        redelivered = [d.id for d in again.seen if d.session == session][:3]
        assert redelivered == [e.id for e in posted if e.session_key == session]


def flaky_hooks(fixed: list[bool]) -> dict[str, Any]:
    """``steady`` records; ``flaky`` records and fails until ``fixed`` holds ``True``."""
    return {
        "steady": lambda seen: recorder("steady", seen),
        "flaky": lambda seen: failing_until(fixed, "flaky", seen),
    }


async def listed(run: Running, state: str, count: int) -> list[dict[str, Any]]:
    """The events ``list`` shows in ``state`` once it shows ``count`` of them (a done or dead
    mark reaches the store a moment after the dispatch: a bound of 30 s against a hang)."""
    found: list[dict[str, Any]] = []

    async def shown() -> bool:
        found[:] = (await run.query("list", state=state))["events"]
        return len(found) == count

    with anyio.fail_after(30):
        while not await shown():  # noqa: ASYNC110 - the store has no event to wait on
            await anyio.sleep(0.02)
    return found


async def dead_listed(run: Running, count: int) -> list[dict[str, Any]]:
    return await listed(run, "dead", count)


async def test_a_dead_letter_is_listed_shown_retried_to_its_hook_and_gone(store: Store) -> None:
    fixed: list[bool] = []
    async with running(store, flaky_hooks(fixed), retries={"flaky": 2}) as run:
        event = await run.post("s", 1)
        await run.until(lambda: run.journal.stats()["dead_letters"] == 1, "a dead letter")
        assert run.ns("s", "flaky") == [1, 1, 1]  # 1 + 2 retries
        assert run.ns("s", "steady") == [1]  # not re-run by the retries
        assert run.dispatcher.retried == 2 and run.dispatcher.dead_lettered == 1
        if isinstance(store, MemoryStore):
            stats = run.journal.stats()
            assert stats == {"backend": "memory", "pending": None, "dead_letters": 1}
        (dead,) = await dead_listed(run, 1)
        assert dead["id"] == event.id and dead["state"] == "dead"
        assert dead["event"] == KEY and dead["sessionKey"] == "s"
        (letter,) = dead["deadLetters"]
        assert letter["hook"] == "flaky" and letter["attempts"] == 3
        assert "RuntimeError: not yet" in letter["error"]
        shown = (await run.query("show", eventId=event.id))["event"]
        assert shown["context"] == {"n": 1} and shown["id"] == event.id

        fixed.append(True)
        assert (await run.query("retry", all=True))["retried"] == [event.id]
        await run.until(lambda: len(run.ns("s", "flaky")) == 4, "the retry")
        retried = [d for d in run.seen if d.hook == "flaky"][-1]
        assert (retried.id, retried.n) == (event.id, 1)
        assert run.ns("s", "steady") == [1]  # only the failed hook ran again
        await dead_listed(run, 0)
        assert run.journal.stats()["dead_letters"] == 0
        if store.durable:
            await run.until(lambda: run.journal.stats()["pending"] == 0, "the retry done")


async def test_dead_letters_are_purged_and_unknown_ids_refused_by_name(store: Store) -> None:
    fixed: list[bool] = []
    async with running(store, flaky_hooks(fixed), retries={"flaky": 1}) as run:
        first = await run.post("s1", 1)
        second = await run.post("s2", 2)
        await run.until(lambda: run.journal.stats()["dead_letters"] == 2, "two dead letters")
        await dead_listed(run, 2)
        for action in ("retry", "purge"):
            with pytest.raises(ValueError, match="nope-1"):
                await run.query(action, ids=["nope-1"])
        with pytest.raises(ValueError, match="nope-1"):
            await run.query("show", eventId="nope-1")
        assert (await run.query("purge", ids=[first.id]))["purged"] == 1
        (left,) = await dead_listed(run, 1)
        assert left["id"] == second.id
        assert (await run.query("list", state="dead", sessionKey="s1"))["events"] == []
        assert (await run.query("purge", all=True))["purged"] == 1
        await dead_listed(run, 0)
        assert run.journal.stats()["dead_letters"] == 0


async def test_a_dead_letter_outlives_a_restart_in_a_durable_store(store: Store) -> None:
    fixed: list[bool] = []
    async with running(store, flaky_hooks(fixed), retries={"flaky": 1}) as run:
        event = await run.post("s", 7)
        await dead_listed(run, 1)
    fixed.append(True)
    async with running(store, flaky_hooks(fixed), retries={"flaky": 1}) as again:
        if not store.durable:
            assert (await again.query("list", state="dead"))["events"] == []
            return
        (dead,) = await dead_listed(again, 1)
        assert dead["id"] == event.id
        assert (await again.query("retry", ids=[event.id]))["retried"] == [event.id]
        await again.until(lambda: again.ns("s", "flaky") == [7], "the retry after the restart")
        assert again.ns("s", "steady") == []
        await dead_listed(again, 0)


FIXES = {"sqlite": ("full", "free space"), "redis": ("maxmemory",)}
"""What a ``journal_full`` error says, per store: what happened and what to do."""


def messaging(seen: list[Dispatched]) -> Handler:
    """Records, and answers ``n=<n>`` to a poster that waits."""
    record = recorder("rec", seen)

    async def handler(event: Any) -> None:
        await record(event)
        event.messages.append(f"n={event.context['n']}")

    return handler


async def test_a_full_store_refuses_with_journal_full_then_accepts_again(store: Store) -> None:
    store.limit()
    refused: JournalError | None = None
    with structlog.testing.capture_logs() as logs:
        async with running(store, {"rec": messaging}) as run:
            await run.post("s", 0)
            with store.full():
                for n in range(1, 200):  # until the store cannot grow: then every post fails
                    try:
                        await run.post("s", n)
                    except JournalError as exc:
                        refused = exc
                        break
                assert refused is not None, "the store never ran out of room"
                stats = run.journal.stats()
                assert stats["refused"] >= 1
                if isinstance(store, SqliteStore):
                    assert stats["full"] is True
            event = create_hook_event("command", "work", "s", {"n": 1000})
            ticket = await run.queue.submit(event)  # room again: accepted, and answered
            await ticket.wait()
            ticket.release()
            assert event.messages == ["n=1000"]
            if isinstance(store, SqliteStore):
                assert run.journal.stats()["full"] is False
    assert refused.code == "journal_full"
    assert all(words in str(refused) for words in FIXES[store.name])
    ns = run.ns("s")
    assert ns[0] == 0 and ns[-1] == 1000
    assert ns == sorted(ns) and len(ns) == len(set(ns))  # in order, nothing twice
    if isinstance(store, SqliteStore):
        names = [r["event"] for r in logs]
        assert "journal.full" in names and "journal.space_recovered" in names
        with structlog.testing.capture_logs() as reopened:
            async with running(store) as again:
                assert again.journal.stats()["pending"] == 0
        assert not [r for r in reopened if r["event"] == "journal.set_aside"]
        assert not list(store.dir.glob("*.damaged-*"))


async def test_an_event_the_store_cannot_hold_is_refused_and_the_next_accepted(
    store: Store,
) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    async with running(store) as run:
        if store.durable:
            with pytest.raises(JournalError) as refused:
                await run.post("s", 1, loop=loop)
            assert refused.value.code == "journal_error"
            assert "cannot be recorded" in str(refused.value)
        else:  # nothing to encode: the memory journal hands it on as it is
            await run.post("s", 1, loop=loop)
        await run.post("s", 2)
        await run.until(lambda: 2 in run.ns("s"), "the next event dispatched")
    assert run.ns("s") == ([2] if store.durable else [1, 2])


async def test_a_lifecycle_event_is_delivered_at_once_and_never_stored(store: Store) -> None:
    started: list[str] = []

    async def on_startup(event: Any) -> None:
        started.append(event.id)

    async with running(store) as run:
        run.dispatcher.registry.register("gateway:startup", on_startup, name="startup")
        event = create_hook_event("gateway", "startup", "gateway", {})
        await run.queue.post(event)
        await run.post("s", 1)
        await run.until(lambda: started and run.seen, "both dispatched")
        if store.durable:
            assert event.id not in store.recorded()
    assert started == [event.id]


async def test_ids_never_repeat_across_restarts(store: Store) -> None:
    ids: list[str] = []
    for _ in range(2):
        async with running(store) as run:
            ids.append(run.journal.next_id())
            ids += [(await run.post("s", n)).id for n in range(3)]
    assert len(set(ids)) == len(ids) == 8
