"""Pending rows a start must not redeliver, dead-lettered instead: an event that takes the daemon
down every time it is redelivered (a handler that blocks the loop until the watchdog kills it),
which would make a restart loop, and a row that cannot be made into an event again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatewayd.journal import inspection, store


def test_a_redelivered_event_that_keeps_stopping_the_daemon_is_dead_lettered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    conn, _ = store.connect(path, "normal")
    store.insert(
        conn,
        [
            (1, "a", "command", "block", 1.0, "{}", None),  # blocks the daemon every time
            (2, "a", "command", "next", 1.0, "{}", None),
            (3, "b", "command", "x", 1.0, "{}", None),  # pending, but never in flight
        ],
    )
    for start in range(store.MAX_RECOVERIES):
        # A start redelivers all three; 1's dispatch begins, and the daemon dies again.
        assert [r[0] for r in store.recover(conn, store.pending_rows(conn)).rows] == [1, 2, 3], (
            start
        )
        store.note_started(conn, 1)
    conn.close()

    conn, epoch = store.connect(path, "normal")
    assert [r[0] for r in store.recover(conn, store.pending_rows(conn)).rows] == [2, 3]
    assert store.dead_count(conn) == 1
    (hook, error, attempts) = conn.execute(
        "SELECT hook, error, attempts FROM dead WHERE seq = 1"
    ).fetchone()
    assert hook == store.POISON_HOOK and attempts == store.MAX_RECOVERIES
    assert "events retry" in error
    # Replayed, it runs every handler again: it used to be limited to a hook named
    # "(gatewayd)", so it ran none and was done at once.
    (retried,) = inspection.retry_dead(conn, epoch, None)
    assert retried[0] == 1 and retried[6] is None
    conn.close()


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("context", "not json", "no JSON"),
        ("context", "[1, 2]", "JSON list, not an object"),
        ("context", "null", "JSON NoneType, not an object"),
        ("context", b"\x00\xff", "no JSON"),
        ("ts", "yesterday", "timestamp is str"),
        pytest.param("context", "[" * 100_000 + "]" * 100_000, "no JSON", id="nested-too-deep"),
    ],
)
def test_a_pending_row_that_cannot_be_an_event_again_is_dead_lettered_alone(
    tmp_path: Path, column: str, value: object, why: str
) -> None:
    """A row the writer never wrote (the file edited by hand, a value damaged where
    ``quick_check`` does not look) used to raise out of the recovery: every start failed."""
    path = tmp_path / "events.db"
    conn, epoch = store.connect(path, "normal")
    store.insert(conn, [(n, "a", "command", "x", 1.0, json.dumps({"n": n})) for n in (1, 2, 3)])
    conn.execute(f"UPDATE events SET {column} = ? WHERE seq = 2", (value,))

    recovered = store.recover(conn, store.pending_rows(conn))
    assert [(r[0], r[5]) for r in recovered.rows] == [(1, {"n": 1}), (3, {"n": 3})]
    assert [seq for seq, _ in recovered.unreadable] == [2] and why in recovered.unreadable[0][1]
    hook, error = conn.execute("SELECT hook, error FROM dead WHERE seq = 2").fetchone()
    assert hook == store.UNREADABLE_HOOK and why in error and "events purge" in error
    # Still listed and shown as stored; a retry refuses it and changes nothing; purge removes it.
    # (A damaged ``only`` alone is made good by a retry, which runs every handler.)
    assert inspection.list_events(conn, epoch, state="dead")[0]["id"] == f"{epoch}-2"
    assert inspection.show_event(conn, epoch, f"{epoch}-2") is not None
    with pytest.raises(ValueError, match=f"events purge {epoch}-2"):
        inspection.retry_dead(conn, epoch, None)
    assert store.dead_count(conn) == 1 and [r[0] for r in store.pending_rows(conn)] == [1, 3]
    assert inspection.purge(conn, epoch, [f"{epoch}-2"]) == 1
    conn.close()


def test_a_pending_row_whose_only_is_damaged_is_dead_lettered_and_retried_whole(
    tmp_path: Path,
) -> None:
    conn, epoch = store.connect(tmp_path / "events.db", "normal")
    store.insert(conn, [(1, "a", "command", "x", 1.0, "{}", "not json")])
    recovered = store.recover(conn, store.pending_rows(conn))
    assert recovered.rows == [] and "only is no JSON" in recovered.unreadable[0][1]
    assert inspection.retry_dead(conn, epoch, None) == [(1, "a", "command", "x", 1.0, {}, None)]
    conn.close()
