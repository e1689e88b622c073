"""The journal file's writes (gatewayd/journal/store.py) on a real SQLite file: rows with and
without ``only``, done marks by runs of seqs or by list, and session keys stored as text by this
version and as bytes by older journals, found alike."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatewayd.journal import inspection, store


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn, _ = store.connect(tmp_path / "events.db", "normal")
    yield conn
    conn.close()


def add(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    store.insert(conn, rows)
    conn.execute("COMMIT")


def row(seq: int, session: str | bytes = "agent:main:s") -> tuple[object, ...]:
    return (seq, session, "command", "work", 1.0, "{}")


def seqs(conn: sqlite3.Connection, state: int) -> list[int]:
    return [
        r[0] for r in conn.execute("SELECT seq FROM events WHERE state = ? ORDER BY seq", (state,))
    ]


@given(st.lists(st.integers(min_value=0, max_value=40), max_size=30))
def test_runs_cover_exactly_the_seqs_given(numbers: list[int]) -> None:
    spans = store.runs(numbers)
    covered = [n for first, last in spans for n in range(first, last + 1)]
    assert covered == sorted(set(numbers))
    assert all(b[0] > a[1] + 1 for a, b in itertools.pairwise(spans))  # maximal runs


def test_only_is_written_when_a_row_has_it_and_null_otherwise(conn: sqlite3.Connection) -> None:
    add(conn, [row(1), row(2)])
    add(conn, [row(3), (*row(4), '["audit"]'), row(5)])
    stored = conn.execute("SELECT seq, only FROM events ORDER BY seq").fetchall()
    assert stored == [(1, None), (2, None), (3, None), (4, '["audit"]'), (5, None)]
    assert [r[0] for r in store.pending_rows(conn)] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "done",
    [list(range(1, 31)), [30, 3, 2, 1, 12, 11, 10], list(range(1, 31, 2))],
    ids=["one-run", "a-few-runs", "scattered"],
)
def test_done_marks_delete_those_events_and_no_other(
    conn: sqlite3.Connection, done: list[int]
) -> None:
    add(conn, [row(seq) for seq in range(1, 41)])
    conn.execute("UPDATE events SET state = 2 WHERE seq IN (3, 20)")  # dead letters stay
    store.delete_done(conn, done)
    assert seqs(conn, store.PENDING) == [
        s for s in range(1, 41) if s not in done and s not in (3, 20)
    ]
    assert seqs(conn, store.DEAD) == [3, 20]


def test_done_marks_kept_for_retain_done_are_updated_by_runs(conn: sqlite3.Connection) -> None:
    add(conn, [row(seq) for seq in range(1, 21)])
    conn.execute("UPDATE events SET state = 2 WHERE seq = 4")
    store.update_done(conn, [5, 4, 3, 9, 10], 7.0)
    assert seqs(conn, store.DONE) == [3, 5, 9, 10]
    assert seqs(conn, store.DEAD) == [4]
    assert {r[0] for r in conn.execute("SELECT done_at FROM events WHERE state = 1")} == {7.0}


def test_a_session_is_listed_whether_stored_as_text_or_as_bytes(conn: sqlite3.Connection) -> None:
    key = "agent:main:café"
    add(conn, [row(1, store.session_value(key)), row(2, store.session_blob(key)), row(3, "other")])
    listed = inspection.list_events(conn, "e", session=key)
    assert [(e["id"], e["sessionKey"]) for e in listed] == [("e-1", key), ("e-2", key)]
    assert [store.session_text(r[1]) for r in store.pending_rows(conn)][:2] == [key, key]


def test_a_key_utf8_cannot_encode_is_stored_as_bytes() -> None:
    assert store.session_value("agent:main:s") == "agent:main:s"
    assert store.session_value("agent:é") == "agent:é"
    lone = "agent:\ud800"
    assert store.session_value(lone) == store.session_blob(lone)
    assert store.session_text(store.session_value(lone)) == lone


@pytest.mark.parametrize("count", [1, 3, 8])
def test_shared_rows_are_numbered_from_the_first_seq_across_statements(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """insert_shared: one type and action for all rows, seqs counted from the first, split into
    statements of INSERT_ROWS rows (3 here) like insert_values."""
    monkeypatch.setattr(store, "INSERT_ROWS", 3)
    params: list[object] = [10, "command", "work"]
    for n in range(count):
        params += [f"agent:main:s{n}", float(n), f'{{"n":{n}}}']
    conn.execute("BEGIN IMMEDIATE")
    store.insert_shared(conn, params)
    conn.execute("COMMIT")
    stored = conn.execute("SELECT seq, session, type, action, ts, context, only FROM events")
    assert stored.fetchall() == [
        (10 + n, f"agent:main:s{n}", "command", "work", float(n), f'{{"n":{n}}}', None)
        for n in range(count)
    ]
