"""One write of the SQLite journal as the writer process applies it (:func:`writes.apply`), in
this process on a real journal file: the rows and marks commit in one transaction, marks that
fail roll back alone while the rows commit, a write SQLite refuses comes back as an answer and
never raises, a frame crosses the pipe whole, and :class:`writes.FileWatch` names each way the
file stops being the journal the writer opened. The writer process around it (pipes, parent
death, a writer lost mid-write) is ``test_journal_writes.py``'s."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from gatewayd.journal import store, writes

ROW = ("s", "command", "go", 1.0, '{"n":1}')
"""An event row after its seq: session, type, action, ts, context."""


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A journal made as the daemon makes it, and the writer's own connection to it."""
    path = tmp_path / "events.db"
    made, _ = store.connect(path, "full")
    conn = writes.connect(str(path), "full")
    yield path, conn
    conn.close()
    made.close()


def request(
    values: list[Any] | None = None,
    *,
    rows: int = writes.NO_ROWS,
    done: list[int] | None = None,
    done_at: float = 0.0,
    trim: int = 0,
    dead: list[writes.Mark] | None = None,
    started: list[int] | None = None,
) -> writes.Request:
    return (rows, values or [], done or [], done_at, trim, dead or [], started or [], False)


def events(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    return conn.execute("SELECT seq, state FROM events ORDER BY seq").fetchall()


def test_rows_and_marks_commit_together(journal: tuple[Path, sqlite3.Connection]) -> None:
    _, conn = journal
    width = len(store.EVENT_COLUMNS)
    values = [value for seq in (1, 2, 3, 4) for value in (seq, *ROW)]
    assert writes.apply(conn, request(values, rows=width)) == (writes.OK, "", None)
    shared = [5, "command", "go", "s", 2.0, "{}", "t", 3.0, "{}"]  # seqs 5 and 6, one kind
    assert writes.apply(conn, request(shared, rows=writes.SHARED_ROWS)) == (writes.OK, "", None)
    assert [seq for seq, _ in events(conn)] == [1, 2, 3, 4, 5, 6]

    marks = request(done=[1], dead=[(2, "h", "boom", 3, 9.0)], started=[3, 3])
    assert writes.apply(conn, marks) == (writes.OK, "", None)
    assert events(conn) == [(2, 2), (3, 0), (4, 0), (5, 0), (6, 0)]  # 1 deleted, 2 dead
    assert conn.execute("SELECT * FROM dead").fetchall() == [(2, "h", "boom", 3, 9.0)]
    assert conn.execute("SELECT * FROM recoveries").fetchall() == [(3, 2)]

    kept = request(done=[3, 4, 5], done_at=10.0, trim=1)  # retainDone: the newest one kept
    assert writes.apply(conn, kept) == (writes.OK, "", None)
    assert events(conn) == [(2, 2), (5, 1), (6, 0)]


def test_marks_that_fail_roll_back_alone(journal: tuple[Path, sqlite3.Connection]) -> None:
    _, conn = journal
    bad_dead: writes.Mark = (1, "h", "boom", 1, 1.0)
    conn.execute("CREATE TRIGGER no_dead BEFORE INSERT ON dead BEGIN SELECT RAISE(ABORT, 'x'); END")
    answer = writes.apply(conn, request([1, *ROW], rows=6, dead=[bad_dead], started=[1]))
    assert answer[:2] == (writes.OK, "") and answer[2] is not None and "x" in answer[2]
    assert events(conn) == [(1, 0)]  # the row is in, the marks (dead, started) are not
    assert conn.execute("SELECT count(*) FROM recoveries").fetchone() == (0,)


def test_a_refused_write_is_answered_and_rolled_back(
    journal: tuple[Path, sqlite3.Connection],
) -> None:
    _, conn = journal
    assert writes.apply(conn, request([1, *ROW], rows=6))[0] == writes.OK
    code, error, _ = writes.apply(conn, request([2, *ROW, 1, *ROW], rows=6))  # seq 1 again
    assert code == writes.FAILED and "UNIQUE" in error
    code, error, _ = writes.apply(conn, request([3, "s", "command", "go", 1.0, object()], rows=6))
    assert code == writes.FAILED and error.startswith(("ProgrammingError", "Error binding"))
    assert events(conn) == [(1, 0)] and not conn.in_transaction


def test_a_frame_crosses_whole_and_plain(tmp_path: Path) -> None:
    class Kind(StrEnum):  # a StrEnum event type: marshal takes exact types only
        COMMAND = "command"

    req = request([1, "s", Kind.COMMAND, "go", 1.0, "{}", True], rows=7, done=[1])
    data = writes.frame(req) + writes.frame((writes.OK, "", None))
    buffer = bytearray(data[:-1])
    first = writes.unframe(buffer)
    assert first == [request([1, "s", "command", "go", 1.0, "{}", True], rows=7, done=[1])]
    assert type(first[0][1][2]) is str
    buffer += data[-1:]
    assert writes.unframe(buffer) == [(writes.OK, "", None)] and not buffer


def test_the_file_watch_names_each_way_the_journal_goes(
    journal: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = journal
    watch = writes.FileWatch(str(path))
    assert watch.problem() is None
    assert writes.apply(conn, request([1, *ROW], rows=6))[0] == writes.OK
    assert watch.problem() is None  # the -wal is seen now

    wal = Path(f"{path}-wal")
    wal.rename(f"{wal}.moved")
    wal.write_bytes(b"")
    assert watch.problem() == f"{wal} was replaced by another file under the running daemon"
    wal.unlink()
    assert watch.problem() == f"{wal} was deleted under the running daemon"

    with path.open("r+b") as file:
        file.write(b"not SQLite")
    assert "overwritten" in (watch.problem() or "")
    path.rename(path.with_name("aside.db"))
    assert watch.problem() == f"{path} was deleted under the running daemon"
    path.write_bytes(b"")
    assert watch.problem() == f"{path} was replaced by another file under the running daemon"
