"""How the SQLite journal's writer thread writes (gatewayd/journal/sqlite.py), in-process on a
real file: a batch of one kind of event (bound with three values a row) and a mixed batch store
the same rows; done marks go in statements of their own right after a commit, are in the file
without another event to carry them, and are kept and written later when that fails."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal import store
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import Dispatcher, TriggerQueue


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


async def until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` for up to 10 s (a bound against a hang; the test asserts after)."""
    deadline = time.monotonic() + 10
    # The file and the writer thread's lists have no event to wait on.
    while not predicate() and time.monotonic() < deadline:  # noqa: ASYNC110
        await anyio.sleep(0.02)


@asynccontextmanager
async def dispatching(
    path: Path, handler: Callable[[HookEvent], Awaitable[None]], capacity: int = 64
) -> AsyncIterator[tuple[SqliteJournal, TriggerQueue]]:
    """A durable queue on a new journal at ``path``, dispatched to ``handler`` (for
    ``command:work``): its journal and queue. On the way out it drains, with nothing left over,
    and closes the journal."""
    registry = HookRegistry()
    registry.register("command:work", handler)
    journal = SqliteJournal(path, base=dict)
    queue = TriggerQueue(capacity=capacity, journal=journal)
    assert await journal.open() == []
    dispatcher = Dispatcher(queue, registry, concurrency=2)
    async with anyio.create_task_group() as tg:
        await tg.start(dispatcher.run)
        yield journal, queue
        assert await dispatcher.drain(30) == 0
    await journal.close()


async def noop(ev: HookEvent) -> None:
    pass


def rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as reader:
        found = reader.execute(
            "SELECT seq, session, type, action, ts, context, only, state FROM events ORDER BY seq"
        ).fetchall()
    reader.close()
    return found


def expected(events: list[HookEvent]) -> list[tuple[Any, ...]]:
    return [
        (
            int(ev.id.rsplit("-", 1)[1]),
            ev.session_key,
            ev.type,
            ev.action,
            ev.created,
            store_context(ev),
            None,
            store.PENDING,
        )
        for ev in events
    ]


def store_context(ev: HookEvent) -> str:
    return json.dumps(ev.context, separators=(",", ":")) if ev.context else "{}"


@pytest.mark.parametrize(
    "batch",
    [
        # one kind, one session: the shared-values INSERT
        [("command", "work", "agent:main:s", {})] * 5,
        # one kind, several sessions, a non-ASCII key and contexts
        [("message", "received", f"agent:main:ß{i % 3}", {"n": i}) for i in range(7)],
        # mixed kinds: six values a row
        [("command", "work", "s", {}), ("message", "received", "s", {"n": 1})] * 3,
    ],
    ids=["one-kind", "one-kind-contexts", "mixed"],
)
def test_a_batch_is_stored_as_posted_whatever_its_kinds(
    tmp_path: Path, batch: list[tuple[str, str, str, dict[str, Any]]]
) -> None:
    path = tmp_path / "events.db"
    events = [create_hook_event(t, a, key, dict(ctx)) for t, a, key, ctx in batch]

    async def main() -> None:
        journal = SqliteJournal(path, base=dict)
        queue = TriggerQueue(capacity=64, journal=journal)
        assert await journal.open() == []
        await queue.post_all(events)  # one loop turn: one batch, one commit
        assert journal.commits == 1
        await journal.close()

    run(main)
    assert rows(path) == expected(events)


def test_a_batch_with_a_gap_in_its_seqs_is_stored_as_posted(tmp_path: Path) -> None:
    """A ``gateway`` event takes a seq but is not journaled: the batch around it cannot number
    its rows from the first seq (the shared-values INSERT), and is written row by row."""
    path = tmp_path / "events.db"
    events = [create_hook_event("command", "work", "s", {"n": n}) for n in range(4)]

    async def main() -> None:
        journal = SqliteJournal(path, base=dict)
        TriggerQueue(capacity=64, journal=journal)  # binds the journal's delivery
        assert await journal.open() == []
        journal.append(events[0], None, 0.0)
        journal.append(events[1], None, 0.0)
        journal.append(create_hook_event("gateway", "startup", "gateway", {}), None, 0.0)
        journal.append(events[2], None, 0.0)
        commit = journal.append(events[3], None, 0.0)
        assert commit is not None
        await commit.wait()
        await journal.close()

    run(main)
    assert [r[0] for r in rows(path)] == [1, 2, 4, 5]
    assert rows(path) == expected(events)


def test_done_marks_reach_the_file_without_another_event_to_carry_them(tmp_path: Path) -> None:
    """The marks of a dispatched batch are written on their own (_write_done) while
    the daemon waits for more: the file holds nothing pending before any close."""
    path = tmp_path / "events.db"
    seen: list[int] = []

    async def record(ev: HookEvent) -> None:
        seen.append(ev.context["n"])

    async def main() -> list[tuple[Any, ...]]:
        async with dispatching(path, record, capacity=256) as (journal, queue):
            for burst in range(3):
                await queue.post_all(
                    [create_hook_event("command", "work", f"s{n % 4}", {"n": n}) for n in range(40)]
                )
                assert burst or journal.committed == 40
            await until(lambda: not rows(path))
            return rows(path)

    assert run(main) == []
    assert len(seen) == 120


def test_done_marks_that_cannot_be_written_are_kept_and_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marks write that fails (SQLite refusing the DELETE, here while ``failing`` is set)
    loses no mark: they stay pending in the file and go with the next write that succeeds;
    the connection is back at ``synchronous=FULL`` for the events' commits either way."""
    path = tmp_path / "events.db"
    failing = [True]
    delete_done = store.delete_done

    def flaky(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
        if failing[0]:
            raise sqlite3.OperationalError("disk I/O error")
        delete_done(conn, seqs)

    monkeypatch.setattr(store, "delete_done", flaky)

    async def main() -> tuple[int, int, int, int]:
        async with dispatching(path, noop) as (journal, queue):
            await queue.post_all([create_hook_event("command", "work", "s", {}) for _ in range(5)])
            await until(lambda: len(journal._carry) == 5)
            kept = len(journal._carry)
            pending = len(rows(path))
            sync = await journal._call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
            failing[0] = False
            await queue.post(create_hook_event("command", "work", "s", {}))
            await until(lambda: not rows(path))
            return kept, pending, sync, len(rows(path))

    kept, pending, sync, left = run(main)
    assert (kept, pending) == (5, 5)
    assert sync == 2  # FULL
    assert left == 0


def test_a_write_after_a_failed_return_to_full_sync_sets_it_before_writing(tmp_path: Path) -> None:
    """Done marks are written without an fsync; if ``synchronous=FULL`` cannot be set again
    after them, the next write sets it before it writes its events (their commit is fsynced)."""
    path = tmp_path / "events.db"

    async def main() -> tuple[bool, int, int]:
        async with dispatching(path, noop) as (journal, queue):
            sync_full = journal._sync_full
            refusals = [1]
            seen: list[int] = []

            def refuse_once(conn: sqlite3.Connection) -> None:
                seen.append(conn.execute("PRAGMA synchronous").fetchone()[0])
                if refusals[0]:
                    refusals[0] -= 1
                    raise sqlite3.OperationalError("refused")
                sync_full(conn)

            journal._sync_full = refuse_once  # type: ignore[method-assign]
            await queue.post_all([create_hook_event("command", "work", "s", {}) for _ in range(3)])
            await until(lambda: not refusals[0])
            relaxed = journal._relaxed
            await queue.post(create_hook_event("command", "work", "s", {}))
            sync = await journal._call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
            return relaxed, seen[1], sync

    with structlog.testing.capture_logs() as logs:
        relaxed, before_second, sync = run(main)
    # A refusal is handled where it happens, not by the writer's "a bug" catch-all.
    assert [r for r in logs if r["event"] == "journal.job_failed"] == []
    assert relaxed  # the refusal left the flag set
    assert before_second == 1  # NORMAL when the next write began: it set FULL first
    assert sync == 2
