"""How the SQLite journal writes (gatewayd/journal/sqlite.py, writer.py, writes.py), in-process
on a real file: a batch of one kind of event (bound with three values a row) and a mixed batch
store the same rows; done marks are in the file without another event to carry them, and are
kept and written later when SQLite refuses them; posters wake once the writer process answered,
a write it fails is refused; a writer killed mid-run leaves the writes to the loop (the journal's
thread syncing them) and loses nothing; a batch larger than the pipe; the loop sends nothing
while the journal's thread holds the connection; checkpoints, and the WAL starting over after
them with or without the writer."""

from __future__ import annotations

import asyncio
import enum
import errno
import json
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
import structlog

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal import sqlite as sqlite_journal
from gatewayd.journal import store, writes
from gatewayd.journal import writer as writer_module
from gatewayd.journal.base import Item, JournalError
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import TriggerQueue


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


class Kind(enum.StrEnum):
    WORK = "work"


def test_an_event_whose_fields_are_str_subclasses_is_stored_as_their_text(tmp_path: Path) -> None:
    """``marshal`` (the writer's framing) takes exact types only: an action given as a
    ``str`` enum is sent as its plain text, and stored as SQLite would bind it."""
    path = tmp_path / "events.db"
    events = [create_hook_event("command", Kind.WORK, "s", {"n": n}) for n in range(3)]

    async def main() -> None:
        journal = SqliteJournal(path, base=dict)
        queue = TriggerQueue(capacity=64, journal=journal)
        assert await journal.open() == []
        assert journal._writer is not None and journal._writer.helper_pid is not None
        await queue.post_all(events)
        await journal.close()

    run(main)
    assert [r[3] for r in rows(path)] == ["work"] * 3


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


def block(table: str, operation: str) -> str:
    """A trigger that makes SQLite refuse every ``operation`` on ``table`` while the table
    ``blocked`` has a row: a failure the writer process meets in the file itself."""
    return (
        "CREATE TABLE IF NOT EXISTS blocked (x); "
        f"CREATE TRIGGER refuse_{operation.lower()} BEFORE {operation} ON {table} "
        "WHEN EXISTS (SELECT 1 FROM blocked) BEGIN SELECT RAISE(ABORT, 'refused'); END; "
        "INSERT INTO blocked VALUES (1);"
    )


def unblock(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM blocked")


def test_done_marks_that_cannot_be_written_are_kept_and_written_later(tmp_path: Path) -> None:
    """Marks SQLite refuses (here a trigger refusing every ``DELETE``) are rolled back alone:
    the batch they went with is accepted, no mark is lost, and they go with the next write
    that succeeds."""
    path = tmp_path / "events.db"

    async def main() -> tuple[int, int, int]:
        async with dispatching(path, noop) as (journal, queue):
            await journal._call(lambda c: c.executescript(block("events", "DELETE")))
            await queue.post_all([create_hook_event("command", "work", "s", {}) for _ in range(5)])
            await until(lambda: len(journal._carry) == 5)
            kept = len(journal._carry)
            pending = len(rows(path))
            await queue.post(create_hook_event("command", "work", "s", {}))  # accepted
            await journal._call(unblock)
            await queue.post(create_hook_event("command", "work", "s", {}))
            await until(lambda: not rows(path))
            return kept, pending, len(rows(path))

    with structlog.testing.capture_logs() as logs:
        kept, pending, left = run(main)
    assert (kept, pending) == (5, 5)
    assert left == 0
    assert any(r["event"] == "journal.marks_failed" for r in logs)


def test_posters_wake_only_once_the_writer_answered(tmp_path: Path) -> None:
    """The writer process stopped (SIGSTOP): a poster is not told "accepted" and its event is
    not in the file; once the writer goes on, it is both. The writer commits with the
    configured ``synchronous`` (FULL: the fsync inside the commit)."""
    path = tmp_path / "events.db"

    async def main() -> tuple[bool, int, int]:
        async with dispatching(path, noop) as (journal, queue):
            writer = journal._writer
            assert writer is not None and writer.helper_pid is not None
            os.kill(writer.helper_pid, signal.SIGSTOP)
            accepted = anyio.Event()

            async def post() -> None:
                await queue.post(create_hook_event("command", "work", "s", {}))
                accepted.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await anyio.sleep(0.2)
                early = accepted.is_set()
                before = len(rows(path))
                os.kill(writer.helper_pid, signal.SIGCONT)
            return early, before, journal.commits

    early, before, commits = run(main)
    assert not early
    assert before == 0
    assert commits == 1
    conn = writes.connect(str(tmp_path / "events.db"), "full")
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


def test_a_write_sqlite_refuses_refuses_its_batch_and_the_next_goes_on(tmp_path: Path) -> None:
    """The writer process answers an error (here a trigger refusing the batch's ``INSERT``):
    the batch's posters get ``journal_error``, nothing of it is in the file, and the writer
    writes the next batch."""
    path = tmp_path / "events.db"

    async def main() -> tuple[str, str, int, int | None]:
        async with dispatching(path, noop) as (journal, queue):
            await journal._call(lambda c: c.executescript(block("events", "INSERT")))
            with pytest.raises(JournalError) as refused:
                await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            await journal._call(unblock)
            await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
            await until(lambda: not rows(path))
            assert journal._writer is not None
            return (
                refused.value.code,
                str(refused.value),
                journal.refused,
                journal._writer.helper_pid,
            )

    code, message, refused, helper = run(main)
    assert code == "journal_error"
    assert "refused" in message
    assert refused == 1
    assert helper is not None  # the same writer went on


def no_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process exits as it starts: the loop writes (``journal.writer_lost``)."""
    monkeypatch.setattr(writer_module, "PROGRAM", "raise SystemExit(3)")


def test_a_sync_that_fails_without_the_writer_refuses_the_batch_and_its_rows_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the writer process the loop commits and the journal's thread syncs: an
    ``fdatasync`` error refuses the batch (``journal_error``) and its rows, committed but not
    known to be on the disk, are deleted (a restart does not dispatch them)."""
    path = tmp_path / "events.db"
    no_writer(monkeypatch)
    failures = [1]
    fdatasync = os.fdatasync

    def failing(fd: int) -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError(errno.EIO, "I/O error")
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", failing)

    async def main() -> tuple[str, list[int], int, int | None]:
        async with dispatching(path, noop) as (journal, queue):
            with pytest.raises(JournalError) as refused:
                await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
            await until(lambda: not rows(path))
            left = [r[0] for r in rows(path)]
            assert journal._writer is not None
            return refused.value.code, left, journal.refused, journal._writer.helper_pid

    code, left, refused, helper = run(main)
    assert helper is None
    assert code == "journal_error"
    assert left == []
    assert refused == 1


def test_a_writer_killed_mid_run_leaves_the_writes_to_the_loop_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """The writer killed (SIGKILL) with a batch sent and not answered (it was stopped): one
    ``journal.writer_lost`` warning; that batch is written by the loop and accepted, and so
    are the next ones; every event is dispatched once."""
    path = tmp_path / "events.db"
    seen: list[int] = []

    async def record(ev: HookEvent) -> None:
        seen.append(ev.context["n"])

    async def main() -> tuple[int | None, int]:
        async with dispatching(path, record) as (journal, queue):
            await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            writer = journal._writer
            assert writer is not None and writer.helper_pid is not None
            pid = writer.helper_pid
            os.kill(pid, signal.SIGSTOP)
            async with anyio.create_task_group() as tg:
                tg.start_soon(queue.post, create_hook_event("command", "work", "s", {"n": 1}))
                await until(lambda: journal._writing is not None)
                await anyio.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
            for n in range(2, 5):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
            return writer.helper_pid, journal.committed

    with structlog.testing.capture_logs() as logs:
        helper, committed = run(main)
    assert helper is None
    assert committed == 5
    assert seen == [0, 1, 2, 3, 4]
    assert [r["event"] for r in logs if r["event"].startswith("journal.writer")] == [
        "journal.writer_lost"
    ]


def test_a_write_the_lost_writer_committed_is_not_written_twice(tmp_path: Path) -> None:
    """A write the writer committed before going away unanswered is found in the file and not
    written again (its rows would clash); one it had not committed is written, without its
    start counts (which it may have written)."""
    path = tmp_path / "events.db"
    conn, _ = store.connect(path, "normal")

    def one_row(seq: int) -> writes.Request:
        """The row of event ``seq``, and its dispatch counted as begun."""
        rows = [seq, "command", "work", "s", float(seq), "{}"]
        return (writes.SHARED_ROWS, rows, [], 0.0, 0, [], [seq], False)

    first, second = one_row(1), one_row(2)
    assert writes.apply(conn, first) == (writes.OK, "", None)
    assert writes.committed(conn, first)
    assert not writes.committed(conn, second)
    assert writes.apply(conn, writes.again(second)) == (writes.OK, "", None)
    assert [r[0] for r in store.pending_rows(conn)] == [1, 2]
    assert conn.execute("SELECT seq, count FROM recoveries").fetchall() == [(1, 1)]
    conn.close()


def test_a_batch_larger_than_the_pipe_reaches_the_writer_whole(tmp_path: Path) -> None:
    """A batch of several megabytes: the loop writes what the request pipe takes and the rest
    as it drains, without blocking; the writer stores every row."""
    path = tmp_path / "events.db"
    events = [
        create_hook_event("command", "work", f"s{n % 4}", {"n": n, "pad": "x" * 2000})
        for n in range(1500)
    ]

    async def main() -> int:
        journal = SqliteJournal(path, base=dict)
        TriggerQueue(capacity=2048, journal=journal)
        assert await journal.open() == []
        commits = [journal.append(ev, None, 0.0) for ev in events]
        assert journal._writer is not None and journal._writer.helper_pid is not None
        for commit in commits:
            assert commit is not None
            await commit.wait()
        helper = journal._writer.helper_pid
        await journal.close()
        assert helper is not None
        return journal.commits

    assert run(main) == 1
    assert rows(path) == expected(events)


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_the_wal_files_directory_entry_is_synced_at_open_with_sync_full(
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
    """SQLite's automatic checkpoint (which would run inside a commit) is off; the journal's
    thread checkpoints every ``CHECKPOINT_EVERY`` commits instead, on a connection of its own,
    and the WAL's frames reach the file; the writer's next write is asked to catch up."""
    path = tmp_path / "events.db"
    monkeypatch.setattr(sqlite_journal, "CHECKPOINT_EVERY", 3)
    done: list[tuple[int, ...]] = []
    checkpoint = SqliteJournal._checkpoint

    def counted(journal: SqliteJournal) -> None:
        assert journal._checkpointer is not None
        done.append(tuple(journal._checkpointer.execute("PRAGMA wal_checkpoint").fetchone()))
        checkpoint(journal)

    monkeypatch.setattr(SqliteJournal, "_checkpoint", counted)
    sent: list[writes.Request] = []
    request = SqliteJournal._request

    def recorded(journal: SqliteJournal, *args: Any) -> writes.Request:
        sent.append(request(journal, *args))
        return sent[-1]

    monkeypatch.setattr(SqliteJournal, "_request", recorded)

    async def main() -> int:
        async with dispatching(path, noop) as (journal, queue):
            for n in range(7):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
                if n == 2:  # the first checkpoint's catch-up goes with the next write
                    await until(lambda: any(req[7] for req in sent))
            await until(lambda: len(done) == 2)
            return int(
                await journal._call(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            )

    assert run(main) == 0
    assert len(done) == 2
    assert all(busy == 0 and frames > 0 for busy, frames, _ in done)
    assert any(req[7] for req in sent)


def test_the_writers_catch_up_lets_the_wal_start_over(tmp_path: Path) -> None:
    """A checkpoint that could not copy the whole WAL (here a reader held an older snapshot;
    under load, the writer committed meanwhile) leaves the WAL to grow with every commit; the
    writer's catch-up copies the rest, and its next commit starts the WAL over."""
    path = tmp_path / "events.db"

    def wal_frames(with_catch_up: bool) -> int:
        if path.exists():
            for name in ("events.db", "events.db-wal", "events.db-shm"):
                (tmp_path / name).unlink(missing_ok=True)
        setup, _ = store.connect(path, "normal")
        writer = writes.connect(str(path), "normal")
        seq = iter(range(1, 1000))

        def commit() -> None:
            values = [next(seq), "command", "work", "s", 1.0, "{}"]
            assert writes.apply(writer, (writes.SHARED_ROWS, values, [], 0.0, 0, [], [], False))[
                0
            ] == (writes.OK)

        for _ in range(10):
            commit()
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchone()  # a snapshot of 10 commits
        for _ in range(5):
            commit()
        setup.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the thread's: up to the snapshot
        reader.execute("COMMIT")
        if with_catch_up:
            writes.catch_up(writer)
        commit()
        frames = int(setup.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
        for conn in (reader, writer, setup):
            conn.close()
        return frames

    without, with_it = wal_frames(False), wal_frames(True)
    assert with_it < 5 < without  # one commit's frames, against all sixteen commits' ones


def test_each_session_is_dispatched_in_post_order_whatever_the_batches(tmp_path: Path) -> None:
    """Batches of many sizes, large ones handed back a turn later: every session's events
    still reach its handler in post order."""
    path = tmp_path / "events.db"
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


def test_a_batch_written_before_the_hand_back_of_the_one_before_it_goes_after_it(
    tmp_path: Path,
) -> None:
    """A large batch is delivered a loop turn after its answer (its posters first); when the
    answer of a batch after it comes in that same turn, the earlier batch still goes into the
    lanes first."""
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
        journal._written(large, None, None)  # handed back: delivered a turn later
        journal._written(small, None, None)  # the next write's answer, same turn
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()

    run(main)
    assert delivered == list(range(1, 42))


def test_without_the_writer_the_wal_starts_over_after_each_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the writer process the loop commits on the journal's connection and the thread
    syncs; under a sustained stream of events the thread's checkpoint rarely ends with the whole
    WAL copied, so the loop's connection catches up after the write that carries the flag: over
    fifty checkpoint cycles the ``-wal`` file never grows past about one cycle's commits
    (without the catch-up it grew by 7-23 cycles' worth, 1-3.4 MB), and every event is still
    committed and delivered in order."""
    path = tmp_path / "events.db"
    no_writer(monkeypatch)
    every = 16
    monkeypatch.setattr(sqlite_journal, "CHECKPOINT_EVERY", every)
    # The -wal file's size after each batch is answered. SQLite does not shrink it while the
    # journal is open: a WAL that starts over is written again from its start.
    sizes: list[int] = []
    answered = SqliteJournal._answered

    def measured(journal: SqliteJournal, write: Any, answer: writes.Answer) -> None:
        answered(journal, write, answer)
        if write.batch:
            sizes.append(os.stat(f"{path}-wal").st_size)

    monkeypatch.setattr(SqliteJournal, "_answered", measured)
    seen: dict[str, list[int]] = {}
    producers, each = 8, 800

    async def record(ev: HookEvent) -> None:
        seen.setdefault(ev.session_key, []).append(ev.context["n"])

    async def produce(queue: TriggerQueue, p: int) -> None:
        for n in range(each):  # each post waits for its commit: `each` commits at least
            await queue.post(create_hook_event("command", "work", f"s{p}", {"n": n}))

    async def main() -> tuple[int | None, int]:
        async with dispatching(path, record, capacity=1024) as (journal, queue):
            async with anyio.create_task_group() as tg:
                for p in range(producers):
                    tg.start_soon(produce, queue, p)
            assert journal._writer is not None
            helper = journal._writer.helper_pid
        return helper, journal.committed

    helper, committed = run(main)
    assert helper is None  # the loop wrote every batch
    assert committed == producers * each
    assert seen == {f"s{p}": list(range(each)) for p in range(producers)}
    assert len(sizes) >= each
    # The first cycle's commits, before any checkpoint, grow the file by what a cycle writes.
    first, cycle = sizes[0], sizes[every - 1] - sizes[0]
    assert max(sizes) <= first + 2 * cycle, (first, cycle, max(sizes))
