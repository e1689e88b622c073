"""How the SQLite journal's writer thread writes (gatewayd/journal/sqlite.py), in-process on a
real file: a batch of one kind of event (bound with three values a row) and a mixed batch store
the same rows; done marks go in statements of their own, are in the file without another event
to carry them, and are kept and written later when that fails; posters wake once the WAL is
synced by the helper process (or, without it, the journal's thread), and a failed sync refuses
the batch; the loop leaves the connection alone while the thread uses it; checkpoints."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
import structlog

from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal import sqlite as sqlite_journal
from gatewayd.journal import store
from gatewayd.journal.base import Item, JournalError
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.journal.syncer import Syncer
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
    loses no mark, and refuses no event: they stay pending in the file and go with the next
    write that succeeds."""
    path = tmp_path / "events.db"
    failing = [True]
    delete_done = store.delete_done

    def flaky(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
        if failing[0]:
            raise sqlite3.OperationalError("disk I/O error")
        delete_done(conn, seqs)

    monkeypatch.setattr(store, "delete_done", flaky)

    async def main() -> tuple[int, int, int]:
        async with dispatching(path, noop) as (journal, queue):
            await queue.post_all([create_hook_event("command", "work", "s", {}) for _ in range(5)])
            await until(lambda: len(journal._carry) == 5)
            kept = len(journal._carry)
            pending = len(rows(path))
            await queue.post(create_hook_event("command", "work", "s", {}))  # accepted
            failing[0] = False
            await queue.post(create_hook_event("command", "work", "s", {}))
            await until(lambda: not rows(path))
            return kept, pending, len(rows(path))

    kept, pending, left = run(main)
    assert (kept, pending) == (5, 5)
    assert left == 0


def test_posters_wake_only_once_a_sync_begun_after_their_commit_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch is in the file (committed, ``synchronous=NORMAL``) when its sync is asked
    for, and its poster is not told "accepted" before that sync answered."""
    path = tmp_path / "events.db"
    asked: list[int] = []
    release = anyio.Event()
    request = Syncer.request
    groups: list[anyio.abc.TaskGroup] = []

    def held(syncer: Syncer) -> None:
        asked.append(len(rows(path)))  # what the file holds as the sync is asked for

        async def later() -> None:
            await release.wait()
            request(syncer)

        groups[0].start_soon(later)

    monkeypatch.setattr(Syncer, "request", held)

    async def main() -> tuple[list[int], bool, int, int]:
        async with anyio.create_task_group() as tg:
            groups.append(tg)
            journal = SqliteJournal(path, base=dict)
            queue = TriggerQueue(capacity=64, journal=journal)
            assert await journal.open() == []
            assert journal._syncer is not None and journal._syncer.helper_pid is not None
            accepted = anyio.Event()

            async def post() -> None:
                await queue.post(create_hook_event("command", "work", "s", {}))
                accepted.set()

            tg.start_soon(post)
            await until(lambda: bool(asked))
            await anyio.sleep(0.1)
            early = accepted.is_set()
            release.set()
            await accepted.wait()
            sync = await journal._call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
            await journal.close()
        return asked, early, sync, journal.commits

    asked_rows, early, sync, commits = run(main)
    assert asked_rows == [1]
    assert not early
    assert sync == 1  # NORMAL: the syncer does what FULL would add
    assert commits == 1


def test_a_sync_that_fails_refuses_the_batch_and_its_rows_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``fdatasync`` error: the posters get ``journal_error``; the batch's rows, committed
    but not known to be on the disk, are deleted (a restart does not dispatch them)."""
    path = tmp_path / "events.db"
    failures = [1]
    request = Syncer.request

    def failing(syncer: Syncer) -> None:
        if failures[0]:
            failures[0] -= 1
            syncer._loop.call_soon(syncer._done, OSError(errno.EIO, "I/O error"))
        else:
            request(syncer)

    monkeypatch.setattr(Syncer, "request", failing)

    async def main() -> tuple[str, list[int], int]:
        async with dispatching(path, noop) as (journal, queue):
            with pytest.raises(JournalError) as refused:
                await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
            await until(lambda: not rows(path))
            left = [r[0] for r in rows(path)]
        return refused.value.code, left, journal.refused

    code, left, refused = run(main)
    assert code == "journal_error"
    assert left == []
    assert refused == 1


def test_a_helper_that_goes_away_leaves_the_syncs_to_the_journal_thread(tmp_path: Path) -> None:
    """The helper killed: one ``journal.syncer_lost`` warning, and events are still accepted,
    synced by the journal's thread."""
    path = tmp_path / "events.db"

    async def main() -> tuple[int | None, int]:
        async with dispatching(path, noop) as (journal, queue):
            await queue.post(create_hook_event("command", "work", "s", {}))
            syncer = journal._syncer
            assert syncer is not None and syncer.helper_pid is not None
            os.kill(syncer.helper_pid, signal.SIGKILL)
            for n in range(3):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
            return syncer.helper_pid, journal.committed

    with structlog.testing.capture_logs() as logs:
        helper, committed = run(main)
    assert helper is None
    assert committed == 4
    assert [r["event"] for r in logs if r["event"].startswith("journal.syncer")] == [
        "journal.syncer_lost"
    ]


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_the_wal_files_directory_entry_is_synced_when_the_syncer_syncs_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync: str
) -> None:
    """SQLite syncs a new WAL's directory entry at the WAL's first sync, which with the commits
    at NORMAL is the first checkpoint's: with ``sync: full`` the journal syncs it at open."""
    synced: list[Path] = []
    monkeypatch.setattr(sqlite_journal, "fsync_dir", synced.append)
    path = tmp_path / "events.db"

    async def main() -> None:
        journal = SqliteJournal(path, base=dict, sync=sync)
        assert await journal.open() == []
        assert (tmp_path / "events.db-wal").exists()
        await journal.close()

    run(main)
    assert synced == ([tmp_path] if sync == "full" else [])


def test_the_loop_writes_nothing_while_the_journal_thread_holds_the_connection(
    tmp_path: Path,
) -> None:
    """A query on the journal's thread (here a transaction it rolls back) and a post at the
    same time: the post's rows are not written into the thread's transaction (they would be
    rolled back with it), but after it."""
    path = tmp_path / "events.db"

    def slow_rollback(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        time.sleep(0.2)
        conn.execute("ROLLBACK")

    release = anyio.Event()

    async def gate(ev: HookEvent) -> None:
        await release.wait()

    async def main() -> list[tuple[Any, ...]]:
        async with dispatching(path, gate) as (_, queue):
            async with anyio.create_task_group() as tg:
                tg.start_soon(journal_call, queue, slow_rollback)
                await anyio.sleep(0.05)
                await queue.post(create_hook_event("command", "work", "s", {}))
            found = rows(path)  # the thread's transaction is over: the event is still there
            release.set()
            return found

    async def journal_call(queue: TriggerQueue, fn: Callable[[sqlite3.Connection], None]) -> None:
        assert isinstance(queue.journal, SqliteJournal)
        await queue.journal._call(fn)

    assert [r[0] for r in run(main)] == [1]


def test_the_journal_thread_checkpoints_every_so_many_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's automatic checkpoint (which would run inside a commit on the loop) is off;
    the journal's thread checkpoints every ``CHECKPOINT_EVERY`` commits instead, on a
    connection of its own, and the WAL's frames reach the file."""
    path = tmp_path / "events.db"
    monkeypatch.setattr(sqlite_journal, "CHECKPOINT_EVERY", 3)
    done: list[tuple[int, ...]] = []

    def counted(journal: SqliteJournal) -> None:
        assert journal._checkpointer is not None
        row = journal._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        done.append(tuple(row))

    monkeypatch.setattr(SqliteJournal, "_checkpoint", counted)

    async def main() -> int:
        async with dispatching(path, noop) as (journal, queue):
            for n in range(7):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
            await until(lambda: len(done) == 2)
            return int(
                await journal._call(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            )

    assert run(main) == 0
    assert len(done) == 2
    assert all(busy == 0 and frames > 0 for busy, frames, _ in done)


@pytest.mark.parametrize("ahead", [1, 2])
def test_each_session_is_dispatched_in_post_order_whatever_syncs_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    """Batches committed while others wait for their syncs (``SYNCS_AHEAD``), large ones
    handed back a turn later: every session's events still reach its handler in post order."""
    path = tmp_path / "events.db"
    monkeypatch.setattr(sqlite_journal, "SYNCS_AHEAD", ahead)
    seen: dict[str, list[int]] = {}

    async def record(ev: HookEvent) -> None:
        seen.setdefault(ev.session_key, []).append(ev.context["n"])

    async def produce(queue: TriggerQueue, p: int) -> None:
        for n in range(60):
            await queue.post(create_hook_event("command", "work", f"s{p % 4}", {"n": n * 64 + p}))

    async def main() -> None:
        async with (
            dispatching(path, record, capacity=1024) as (_, queue),
            anyio.create_task_group() as tg,
        ):
            for p in range(64):  # batches of up to 64 events: some handed back
                tg.start_soon(produce, queue, p)

    run(main)
    assert sum(len(v) for v in seen.values()) == 64 * 60
    for key, ns in seen.items():
        by_producer: dict[int, list[int]] = {}
        for n in ns:
            by_producer.setdefault(n % 64, []).append(n)
        assert all(v == sorted(v) for v in by_producer.values()), key


def test_a_batch_synced_before_the_hand_back_of_the_one_before_it_goes_after_it(
    tmp_path: Path,
) -> None:
    """A large batch is delivered a loop turn after its sync answered (its posters first);
    when the sync of the batch after it answers in that same turn (two syncs waiting,
    ``SYNCS_AHEAD`` 2), the earlier batch still goes into the lanes first."""
    delivered: list[int] = []

    async def main() -> None:
        journal = SqliteJournal(tmp_path / "events.db", base=dict)
        journal.bind(
            lambda items: delivered.extend(item[3] for item in items),
            lambda items, error: None,
            lambda items: None,
        )
        journal._loop = asyncio.get_running_loop()
        large: list[Item] = [
            (create_hook_event("command", "work", "s", {}), None, 0.0, seq, None)
            for seq in range(1, 41)
        ]
        small: list[Item] = [(create_hook_event("command", "work", "s", {}), None, 0.0, 41, None)]
        journal._written(large, None, [], None)  # handed back: delivered a turn later
        journal._written(small, None, [], None)  # the next sync's answer, same turn
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()

    run(main)
    assert delivered == list(range(1, 42))
