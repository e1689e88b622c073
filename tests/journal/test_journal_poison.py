"""An event that takes the daemon down every time it is redelivered (a handler that blocks the
loop until the watchdog kills it) is dead-lettered instead of making a restart loop."""

from __future__ import annotations

from pathlib import Path

from gatewayd.journal import store


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
        assert [r[0] for r in store.recover(conn, store.pending_rows(conn))] == [1, 2, 3], start
        store.note_started(conn, 1)
    conn.close()

    conn, _ = store.connect(path, "normal")
    assert [r[0] for r in store.recover(conn, store.pending_rows(conn))] == [2, 3]
    assert store.dead_count(conn) == 1
    (hook, error, attempts) = conn.execute(
        "SELECT hook, error, attempts FROM dead WHERE seq = 1"
    ).fetchone()
    assert hook == store.POISON_HOOK and attempts == store.MAX_RECOVERIES
    assert "events retry" in error
    conn.close()
