"""``gatewayd events`` on the SQLite journal file: list, show, retry and purge.

Plain functions on a ``sqlite3.Connection`` (the journal's thread serves them for a running
daemon, :meth:`gatewayd.journal.sqlite.SqliteJournal.query`; ``gatewayd events`` runs them on
the file itself when no daemon runs), returning the records the ``events`` op sends: ``id``,
``event``, ``sessionKey``, ``timestamp``, ``state``, ``doneAt``, ``only``, ``deadLetters`` (and
``context`` for ``show``). Event ids are ``<epoch>-<seq>``: an id of another file is refused by
name (:func:`parse_id`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from gatewayd.journal.store import (
    DEAD,
    PENDING,
    POISON_HOOK,
    STATE_NAMES,
    STATES,
    UNREADABLE_HOOK,
    Unreadable,
    decode_row,
    session_blob,
    session_text,
)
from gatewayd.timestamps import iso_utc


def parse_id(epoch: str, event_id: str) -> int:
    """The ``seq`` of ``<epoch>-<seq>``; ``ValueError`` naming the id when it is not ours."""
    prefix, _, seq = event_id.rpartition("-")
    if prefix != epoch or not seq.isdigit():
        raise ValueError(f"no event {event_id!r} in this journal (ids look like {epoch}-123)")
    return int(seq)


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso_utc(ts)


def _letters(conn: sqlite3.Connection, seq: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT hook, error, attempts, at FROM dead WHERE seq = ? ORDER BY at, hook", (seq,)
    ).fetchall()
    return [{"hook": h, "error": e, "attempts": a, "at": _iso(at)} for h, e, a, at in rows]


def _record(conn: sqlite3.Connection, epoch: str, row: Sequence[Any], full: bool) -> dict[str, Any]:
    seq, session, etype, action, ts, context, only, state, done_at = row
    record: dict[str, Any] = {
        "id": f"{epoch}-{seq}",
        "event": f"{etype}:{action}",
        "sessionKey": session_text(session) if isinstance(session, str | bytes) else session,
        "timestamp": _iso(ts) if isinstance(ts, int | float) else ts,
        "state": STATE_NAMES.get(state, str(state)),
        "doneAt": _iso(done_at) if isinstance(done_at, int | float) else done_at,
        "only": _json_or_text(only) if only else None,
        "deadLetters": _letters(conn, seq) if state == DEAD else [],
    }
    if full:
        record["context"] = _json_or_text(context)
    return record


def _json_or_text(value: Any) -> Any:
    """A stored JSON column decoded, or as stored when it is no JSON (an unreadable row,
    :func:`decode_row`, is still listed and shown)."""
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


COLUMNS = "seq, session, type, action, ts, context, only, state, done_at"


def list_events(
    conn: sqlite3.Connection,
    epoch: str,
    *,
    state: str = "all",
    session: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The newest ``limit`` events (``state``: pending, done, dead or all), oldest first."""
    where: list[str] = []
    args: list[Any] = []
    if state != "all":
        where.append("state = ?")
        args.append(STATES[state])
    if session is not None:
        where.append("CAST(session AS BLOB) = ?")  # stored as text, or bytes by older journals
        args.append(session_blob(session))
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM events {clause} ORDER BY seq DESC LIMIT ?", (*args, limit)
    ).fetchall()
    return [_record(conn, epoch, row, False) for row in reversed(rows)]


def show_event(conn: sqlite3.Connection, epoch: str, event_id: str) -> dict[str, Any] | None:
    """One event with its context and dead letters, or None when the journal no longer has it."""
    seq = parse_id(epoch, event_id)
    row = conn.execute(f"SELECT {COLUMNS} FROM events WHERE seq = ?", (seq,)).fetchone()
    return _record(conn, epoch, row, True) if row else None


def _dead_seqs(conn: sqlite3.Connection, epoch: str, ids: Sequence[str] | None) -> list[int]:
    if ids is None:
        return [r[0] for r in conn.execute("SELECT seq FROM events WHERE state = 2 ORDER BY seq")]
    seqs = []
    for event_id in ids:
        seq = parse_id(epoch, event_id)
        row = conn.execute("SELECT state FROM events WHERE seq = ?", (seq,)).fetchone()
        if row is None or row[0] != DEAD:
            state = "gone" if row is None else STATE_NAMES.get(row[0], "?")
            raise ValueError(f"event {event_id} is not a dead letter (it is {state})")
        seqs.append(seq)
    return seqs


def retry_dead(
    conn: sqlite3.Connection, epoch: str, ids: Sequence[str] | None
) -> list[tuple[Any, ...]]:
    """Make dead-lettered events pending again, limited to the hooks that failed; return their
    rows decoded (:func:`decode_row`). ``ids`` None: every dead letter; one that cannot be
    decoded refuses the whole retry (``ValueError``), and nothing changes."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        seqs = _dead_seqs(conn, epoch, ids)
        for seq in seqs:
            hooks = [r[0] for r in conn.execute("SELECT hook FROM dead WHERE seq = ?", (seq,))]
            # A poisoned or unreadable event's letter names no handler: it runs them all again
            # (limited to its letter's name, it ran none and was done at once).
            whole = POISON_HOOK in hooks or UNREADABLE_HOOK in hooks
            conn.execute(
                "UPDATE events SET state = 0, only = ?, done_at = NULL WHERE seq = ?",
                (None if whole else json.dumps(sorted(hooks)), seq),
            )
            conn.execute("DELETE FROM dead WHERE seq = ?", (seq,))
        rows = []
        for seq in seqs:
            row = conn.execute(
                "SELECT seq, session, type, action, ts, context, only FROM events WHERE seq = ?",
                (seq,),
            ).fetchone()
            try:
                rows.append(decode_row(row))
            except Unreadable as exc:
                raise ValueError(
                    f"event {epoch}-{seq} cannot be retried: its row cannot be read back as "
                    f"an event ({exc}); remove it with `gatewayd events purge {epoch}-{seq}`"
                ) from None
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return rows


def purge(conn: sqlite3.Connection, epoch: str, ids: Sequence[str] | None) -> int:
    """Delete dead-lettered and done events (``ids`` None: all of them); pending ones are never
    purged. Returns how many events went."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if ids is None:
            seqs = [r[0] for r in conn.execute("SELECT seq FROM events WHERE state != 0")]
        else:
            seqs = []
            for event_id in ids:
                seq = parse_id(epoch, event_id)
                row = conn.execute("SELECT state FROM events WHERE seq = ?", (seq,)).fetchone()
                if row is None:
                    raise ValueError(f"no event {event_id} in the journal")
                if row[0] == PENDING:
                    raise ValueError(
                        f"event {event_id} is pending: it is still to be dispatched, not purged"
                    )
                seqs.append(seq)
        conn.executemany("DELETE FROM dead WHERE seq = ?", [(s,) for s in seqs])
        conn.executemany("DELETE FROM events WHERE seq = ?", [(s,) for s in seqs])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(seqs)
