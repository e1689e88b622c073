"""How the SQLite journal writes (gatewayd/journal/sqlite.py, group.py, writer.py, writes.py),
in-process on a real file: a batch of one kind of event (bound with three values a row) and a
mixed batch store the same rows; done marks are in the file without another event to carry
them, and are kept and written later when SQLite refuses them; posters wake once the writer
process answered, a write it fails is refused; the writer is the only way in: a journal whose
writer cannot start does not open, and a writer that goes away mid-run has its unanswered
writes refused (their rows deleted if it had committed them) and a new writer takes the next;
a batch larger than the pipe; a post during a transaction of the journal's thread; checkpoints,
and the WAL starting over after them."""

from __future__ import annotations

import asyncio
import enum
import json
import os
import signal
import sqlite3
import sys
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
from gatewayd.journal import group as group_module
from gatewayd.journal import store, writes
from gatewayd.journal import thread as thread_module
from gatewayd.journal import writer as writer_module
from gatewayd.journal.base import Item, JournalError
from gatewayd.journal.group import GroupCommit
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.journal.thread import JournalThread
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
            await journal._thread.call(lambda c: c.executescript(block("events", "DELETE")))
            await queue.post_all([create_hook_event("command", "work", "s", {}) for _ in range(5)])
            await until(lambda: len(journal._group._carry) == 5)
            kept = len(journal._group._carry)
            pending = len(rows(path))
            await queue.post(create_hook_event("command", "work", "s", {}))  # accepted
            await journal._thread.call(unblock)
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
            await journal._thread.call(lambda c: c.executescript(block("events", "INSERT")))
            with pytest.raises(JournalError) as refused:
                await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            await journal._thread.call(unblock)
            await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
            await until(lambda: not rows(path))
            assert journal._writer is not None
            return (
                refused.value.code,
                str(refused.value),
                journal.stats()["refused"],
                journal._writer.helper_pid,
            )

    code, message, refused, helper = run(main)
    assert code == "journal_error"
    assert "refused" in message
    assert refused == 1
    assert helper is not None  # the same writer went on


def test_a_journal_whose_writer_cannot_start_does_not_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer process is the only way events are committed: when it cannot be started the
    journal does not open, with the reason (the daemon's start then fails with it), and the
    journal's thread is stopped again."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))

    async def main() -> str:
        journal = SqliteJournal(tmp_path / "events.db", base=dict)
        TriggerQueue(capacity=64, journal=journal)
        with pytest.raises(JournalError) as refused:
            await journal.open()
        assert journal._thread._thread is None
        await journal.close()  # after a failed open: nothing to do
        return str(refused.value)

    message = run(main)
    assert "cannot start the journal's writer process" in message
    assert "no-python" in message


def test_a_writer_killed_mid_run_has_its_batch_refused_and_a_new_writer_goes_on(
    tmp_path: Path,
) -> None:
    """The writer killed (SIGKILL) with a batch sent and not answered (it was stopped): one
    ``journal.writer_lost`` error; that batch's poster gets ``journal_error`` saying so (it was
    never told "accepted"), the next events start a new writer and are accepted, and every
    accepted event is dispatched once."""
    path = tmp_path / "events.db"
    seen: list[int] = []

    async def record(ev: HookEvent) -> None:
        seen.append(ev.context["n"])

    async def main() -> tuple[str, int, int | None, int]:
        async with dispatching(path, record) as (journal, queue):
            await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            writer = journal._writer
            assert writer is not None and writer.helper_pid is not None
            pid = writer.helper_pid
            os.kill(pid, signal.SIGSTOP)
            refused: list[JournalError] = []

            async def post_refused() -> None:
                with pytest.raises(JournalError) as error:
                    await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
                refused.append(error.value)

            with anyio.fail_after(30):  # a bound: a lost answer would hang the poster
                async with anyio.create_task_group() as tg:
                    tg.start_soon(post_refused)
                    await until(lambda: journal._group._writing is not None)
                    await anyio.sleep(0.05)
                    os.kill(pid, signal.SIGKILL)
            for n in range(2, 5):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
            return str(refused[0]), pid, writer.helper_pid, journal.committed

    with structlog.testing.capture_logs() as logs:
        message, old, new, committed = run(main)
    assert "writer process went away before answering" in message
    assert new is not None and new != old
    assert committed == 4
    assert seen == [0, 2, 3, 4]
    lost = [r for r in logs if r["event"].startswith("journal.writer")]
    assert [r["event"] for r in lost] == ["journal.writer_lost"]
    assert lost[0]["log_level"] == "error" and lost[0]["exit"] == -signal.SIGKILL


COMMIT_THEN_DIE = """\
import os, sys
sys.path.insert(0, sys.argv[1])
from gatewayd.journal import writes
requests, answers, path, sync = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
flag = os.path.join(os.path.dirname(path), "died")
if os.path.exists(flag):
    writes.serve(requests, answers, path, sync, int(sys.argv[6]))
    sys.exit(0)
conn = writes.connect(path, sync)
buffer = bytearray()
while data := os.read(requests, 1 << 16):
    buffer += data
    for req in writes.unframe(buffer):
        answer = writes.apply(conn, req)
        if req[0] != writes.NO_ROWS and req[1][-1] == '{"n":1}':
            open(flag, "w").close()
            os._exit(9)  # committed, never answered
        os.write(answers, writes.frame(answer))
"""
"""A writer that commits the batch of the event ``n: 1`` and exits before answering it (once:
the next writer is the real one)."""


def test_a_batch_the_lost_writer_committed_is_refused_and_its_rows_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that goes away between its commit and its answer: the batch is refused (its
    poster was never told "accepted"), so its rows, in the file all the same, are deleted with
    the next write's marks and never dispatched, now or after a restart."""
    monkeypatch.setattr(writer_module, "PROGRAM", COMMIT_THEN_DIE)
    path = tmp_path / "events.db"
    seen: list[int] = []

    async def record(ev: HookEvent) -> None:
        seen.append(ev.context["n"])

    async def main() -> tuple[str, list[tuple[Any, ...]]]:
        async with dispatching(path, record) as (_, queue):
            await queue.post(create_hook_event("command", "work", "s", {"n": 0}))
            with pytest.raises(JournalError) as refused:
                await queue.post(create_hook_event("command", "work", "s", {"n": 1}))
            in_file = rows(path)
            await queue.post(create_hook_event("command", "work", "s", {"n": 2}))
            await until(lambda: not rows(path))
        return str(refused.value), in_file

    message, in_file = run(main)
    assert "went away before answering" in message
    assert [json.loads(r[5])["n"] for r in in_file] == [1]  # committed, then refused
    assert rows(path) == []
    assert seen == [0, 2]

    async def restart() -> list[Item]:
        journal = SqliteJournal(path, base=dict)
        TriggerQueue(capacity=64, journal=journal)
        items = await journal.open()
        await journal.close()
        return items

    assert run(restart) == []


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
    monkeypatch.setattr(thread_module, "fsync_dir", synced.append)
    path = tmp_path / "events.db"

    async def main() -> None:
        journal = SqliteJournal(path, base=dict, sync=sync)
        assert await journal.open() == []
        assert (tmp_path / "events.db-wal").exists()
        await journal.close()

    run(main)
    assert synced == ([tmp_path] if sync == "full" else [])


def test_a_post_during_a_transaction_of_the_journal_thread_is_committed_after_it(
    tmp_path: Path,
) -> None:
    """A query on the journal's thread (here a transaction it rolls back) and a post at the
    same time: the post's rows are not written into the thread's transaction (they would be
    rolled back with it) but after it, the writer waiting for SQLite's lock."""
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
        await queue.journal._thread.call(fn)

    assert [r[0] for r in run(main)] == [1]


def test_the_journal_thread_checkpoints_every_so_many_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's automatic checkpoint (which would run inside a commit) is off; the journal's
    thread checkpoints every ``CHECKPOINT_EVERY`` commits instead, on a connection of its own,
    and the WAL's frames reach the file; the writer's next write is asked to catch up."""
    path = tmp_path / "events.db"
    monkeypatch.setattr(group_module, "CHECKPOINT_EVERY", 3)
    done: list[tuple[int, ...]] = []
    checkpoint = JournalThread.checkpoint

    def counted(thread: JournalThread, then: Callable[[], None]) -> None:
        def job() -> None:  # on the thread, before the checkpoint: what it will copy
            assert thread._checkpointer is not None
            done.append(tuple(thread._checkpointer.execute("PRAGMA wal_checkpoint").fetchone()))

        thread._jobs.put(job)
        checkpoint(thread, then)

    monkeypatch.setattr(JournalThread, "checkpoint", counted)
    sent: list[writes.Request] = []
    request = GroupCommit.request

    def recorded(group: GroupCommit, *args: Any) -> writes.Request:
        sent.append(request(group, *args))
        return sent[-1]

    monkeypatch.setattr(GroupCommit, "request", recorded)

    async def main() -> int:
        async with dispatching(path, noop) as (journal, queue):
            for n in range(7):
                await queue.post(create_hook_event("command", "work", "s", {"n": n}))
                if n == 2:  # the first checkpoint's catch-up goes with the next write
                    await until(lambda: any(req[7] for req in sent))
            await until(lambda: len(done) == 2)
            autocheckpoint = await journal._thread.call(
                lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            )
            return int(autocheckpoint)

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
        path = tmp_path / "events.db"
        group = GroupCommit(
            path, base=dict, retain_done=0, full_wait_s=5.0, checkpoint=lambda then: None
        )
        loop = asyncio.get_running_loop()
        group.bind(lambda items: delivered.extend(item[3] for item in items), lambda *_: None)
        group.start(loop, writer_module.Writer(loop, path, "full"))  # not started: sends none
        large: list[Item] = [
            (create_hook_event("command", "work", "s", {}), None, 0.0, seq, None)
            for seq in range(1, 41)
        ]
        small: list[Item] = [(create_hook_event("command", "work", "s", {}), None, 0.0, 41, None)]
        group._written(large, None, None)  # handed back: delivered a turn later
        group._written(small, None, None)  # the next write's answer, same turn
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()

    run(main)
    assert delivered == list(range(1, 42))
