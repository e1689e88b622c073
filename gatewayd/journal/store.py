"""The SQLite journal file: its schema, opening (or setting aside) it, writing and recovering.

Plain functions on a ``sqlite3.Connection``, used by the journal's thread (opening, recovery,
:mod:`gatewayd.journal.thread`), its writer process (rows and marks, :mod:`.writes`) and
``gatewayd events`` when no daemon runs (:mod:`.inspection` has that command's queries), so
all of them read and change the file the same way.

Tables (``PRAGMA user_version`` = :data:`SCHEMA_VERSION`):

``events``  one row per accepted event: ``seq`` (order, and with the journal's ``epoch`` the
            event id ``<epoch>-<seq>``), session (text; bytes in journals written before
            2026-11-26, read back alike), type, action, timestamp, the event's own
            context as JSON (without ``cfg``/``workspaceDir``, put back on replay), ``only`` (the
            hook names a retried dead letter runs), ``state``: 0 pending, 1 done (kept by
            ``retainDone``), 2 dead (a handler exhausted its retries).
``dead``    the dead letters: ``(seq, hook, error, attempts, at)``.
``meta``    ``epoch``: random, made with the file, so ids never repeat across a set-aside file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import time
from typing import Any, NamedTuple

from gatewayd.atomic import not_regular

# The journal's writer process imports this module (`python -I -S`, :mod:`.writes`). Not
# importing at run time what only annotations name (pathlib), nor `secrets` (its 4 random
# bytes are `os.urandom`'s), took the writer's start from 37 to 28 ms and its RSS from 16.7 to
# 12.1 MiB (median of 15 starts).
TYPE_CHECKING = False  # typing's flag, as mypy reads it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

SCHEMA_VERSION = 1
PENDING, DONE, DEAD = 0, 1, 2
STATES = {"pending": PENDING, "done": DONE, "dead": DEAD}
STATE_NAMES = {v: k for k, v in STATES.items()}

SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    type TEXT NOT NULL,
    action TEXT NOT NULL,
    ts REAL NOT NULL,
    context TEXT NOT NULL,
    only TEXT,
    state INTEGER NOT NULL DEFAULT 0,
    done_at REAL
);
CREATE TABLE recoveries (seq INTEGER PRIMARY KEY, count INTEGER NOT NULL);
CREATE TABLE dead (
    seq INTEGER NOT NULL,
    hook TEXT NOT NULL,
    error TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (seq, hook)
) WITHOUT ROWID;
PRAGMA user_version = {SCHEMA_VERSION};
"""

INSERT_ROWS = 4000
"""Rows per INSERT statement (7 parameters each, under SQLite's limit of 32766)."""
RANGE_DELETES = 8
"""Done marks forming at most this many runs of consecutive seqs are applied one statement per
run (a range scan); more fragmented marks go as one list (:func:`delete_done`)."""
DAMAGED = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
FULL = 13  # SQLITE_FULL


def journal_path(state: Path) -> Path:
    """Where the durable journal lives under the state dir."""
    return state / "journal" / "events.db"


class Damaged(Exception):
    """The file is not a usable journal (corrupt, truncated, not SQLite, a newer schema)."""


def error_code(exc: sqlite3.Error) -> int:
    """The primary SQLite result code of ``exc`` (0 when unknown)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def is_damage(exc: sqlite3.Error) -> bool:
    """``exc`` says the file is corrupt or no database at all (not: locked, unreadable)."""
    text = str(exc)
    return (
        error_code(exc) in DAMAGED
        or "malformed" in text
        or "not a database" in text
        # A header whose schema format number SQLite does not know (bytes 44-47 overwritten).
        or "unsupported file format" in text
        # A name in its schema that is no UTF-8 (a flipped bit in sqlite_master).
        or "Could not decode to UTF-8" in text
    )


def is_full(exc: BaseException) -> bool:
    """``exc`` says the disk (or the filesystem's quota) is full."""
    if isinstance(exc, sqlite3.Error) and error_code(exc) == FULL:
        return True
    return "disk is full" in str(exc) or "No space left" in str(exc)


def connect(path: Path, sync: str) -> tuple[sqlite3.Connection, str]:
    """Open (or create) the journal at ``path``; return the connection and the epoch.

    Raises :class:`Damaged` when the file exists but is no usable journal, and ``sqlite3.Error``
    / ``OSError`` for anything else (permissions, a missing directory)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        # SQLite fails on a FIFO or a directory with a bare "disk I/O error" or "unable to open"
        # (the daemon could not start); as a file that is no journal, it is set aside instead.
        if (why := not_regular(path, mode)) is not None:
            raise Damaged(why)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
    try:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            conn.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise Damaged(str(exc)) from None
            raise
        if check != "ok":
            raise Damaged(f"integrity check: {check}")
        if str(mode).lower() != "wal":
            raise Damaged(f"cannot switch the file to WAL mode (got {mode})")
        if version > SCHEMA_VERSION:
            raise Damaged(f"written by a newer gatewayd (schema {version} > {SCHEMA_VERSION})")
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise Damaged("an SQLite file that is not a gatewayd journal")
            conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA} COMMIT;")
        elif (lacking := _lacking(conn)) is not None:
            # An SQLite file of another program (or edited by hand) that set user_version: it
            # failed every start with "no such table: meta".
            raise Damaged(f"not a gatewayd journal (schema {version}): {lacking}")
        # Journals written before the table existed get it here (same schema version).
        conn.execute(
            "CREATE TABLE IF NOT EXISTS recoveries "
            "(seq INTEGER PRIMARY KEY, count INTEGER NOT NULL)"
        )
        row = conn.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        if row is None:
            epoch = os.urandom(4).hex()
            conn.execute("INSERT INTO meta VALUES ('epoch', ?)", (epoch,))
        else:
            epoch = str(row[0])
    except BaseException:
        conn.close()
        raise
    return conn, epoch


TABLES = {
    "meta": frozenset({"key", "value"}),
    "events": frozenset(
        {"seq", "session", "type", "action", "ts", "context", "only", "state", "done_at"}
    ),
    "dead": frozenset({"seq", "hook", "error", "attempts", "at"}),
}
"""The tables and columns every query here relies on (``recoveries`` is made when missing)."""


def _lacking(conn: sqlite3.Connection) -> str | None:
    """What of :data:`TABLES` the file lacks (None: nothing)."""
    for table, columns in TABLES.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not have:
            return f"no table {table}"
        if missing := columns - have:
            return f"table {table} lacks {', '.join(sorted(missing))}"
    return None


def set_aside(path: Path) -> Path:
    """Rename a damaged journal (and its ``-wal``/``-shm``) with a UTC timestamp; return it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def insert(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert event rows ``(seq, session, type, action, ts, context)`` or, when one of them
    carries it, ``(seq, session, type, action, ts, context, only)``, in the seq order given
    (:func:`insert_values` with the rows laid end to end)."""
    width = len(EVENT_COLUMNS)
    if any(len(row) > width for row in rows):
        width += 1
        rows = [row if len(row) == width else (*row, None) for row in rows]
    insert_values(conn, [value for row in rows for value in row], width)


EVENT_COLUMNS = ("seq", "session", "type", "action", "ts", "context")
"""The columns every inserted row binds; ``only`` follows when a row of the batch has it."""


def insert_values(conn: sqlite3.Connection, values: Sequence[Any], width: int) -> None:
    """Insert event rows given as one flat sequence, ``width`` values a row: the columns of
    :data:`EVENT_COLUMNS`, and ``only`` when ``width`` is one more.

    One multi-row statement per :data:`INSERT_ROWS`, not ``executemany``: the sqlite3 module
    lets go of the GIL around every statement step (taking it back costs a thread that is not
    the event loop's a wait for the busy loop each time: ~100x slower under load when a writer
    thread wrote the rows), and one step per batch is cheaper on any thread. Rows without
    ``only`` leave the column out rather than bind ``None``: the sqlite3 module binds ``None``
    (and ``bytes``) through its adaptation lookup, ~0.3 us a value against ~0.1 us for text or a
    number (``only`` is set on retried dead letters only). The journal builds ``values``
    flat (no tuple per row, no flattening here): 0.51 -> 0.35 us an event."""
    columns = EVENT_COLUMNS if width == len(EVENT_COLUMNS) else (*EVENT_COLUMNS, "only")
    names = ", ".join(columns)
    marks = "(" + ",".join("?" * width) + ")"
    step = INSERT_ROWS * width
    for start in range(0, len(values), step):
        chunk = values[start : start + step]
        conn.execute(
            f"INSERT INTO events ({names}) VALUES {','.join([marks] * (len(chunk) // width))}",
            chunk,
        )


SHARED = 3
"""Leading values of :func:`insert_shared`'s parameters: first seq, type, action."""
SHARED_WIDTH = 3
"""Values a row binds in :func:`insert_shared`: session, ts, context."""


def insert_shared(conn: sqlite3.Connection, params: list[Any]) -> None:
    """Insert event rows of consecutive seqs that share one type and action (a group commit of
    one kind of event, the common case under load): ``params`` is the first seq, the type, the
    action, then each row's session, ts and context laid end to end.

    Half the values of :func:`insert_values` are bound: the seq is ``?1`` plus the row's place
    and every row names ``?2``/``?3``. Binding is most of an ``INSERT``'s cost to the writer
    thread, all of it holding the GIL (~0.08 us a value on top of ~0.13 us a row): 256 rows
    0.59 -> 0.39 us a row."""
    head = params[:SHARED]
    step = INSERT_ROWS * SHARED_WIDTH
    body = len(params) - SHARED
    if body <= step:
        conn.execute(_shared_sql(body // SHARED_WIDTH), params)
        return
    first = head[0]
    for start in range(0, body, step):
        chunk = params[SHARED + start : SHARED + start + step]
        head[0] = first + start // SHARED_WIDTH
        conn.execute(_shared_sql(len(chunk) // SHARED_WIDTH), head + chunk)


@functools.lru_cache(maxsize=64)
def _shared_sql(rows: int) -> str:
    """The ``INSERT`` of :func:`insert_shared` for ``rows`` rows."""
    values = ",".join(
        f"(?1+{i},?{SHARED + 1 + SHARED_WIDTH * i},?2,?3,"
        f"?{SHARED + 2 + SHARED_WIDTH * i},?{SHARED + 3 + SHARED_WIDTH * i})"
        for i in range(rows)
    )
    return f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES {values}"


def runs(seqs: Sequence[int]) -> list[tuple[int, int]]:
    """``seqs`` as sorted runs of consecutive numbers: ``[5, 3, 4, 9]`` -> ``[(3, 5), (9, 9)]``.

    On the event loop for every write of done marks, which are usually one run: that case is
    recognised without a Python step per seq (0.25-0.38 -> 0.03 us a seq, 256 marks)."""
    if not seqs:
        return []
    ordered = sorted(seqs)
    first, last = ordered[0], ordered[-1]
    if last - first + 1 == len(ordered) == len(set(ordered)):
        return [(first, last)]
    out: list[tuple[int, int]] = []
    previous = first
    for seq in ordered:
        if seq > previous + 1:  # a gap ends the run (a repeat or the next one extends it)
            out.append((first, previous))
            first = seq
        previous = seq
    out.append((first, previous))
    return out


def delete_done(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Delete the pending events ``seqs`` (they are done), by :func:`_where_pending`."""
    _where_pending(conn, "DELETE FROM events", (), seqs)


def update_done(conn: sqlite3.Connection, seqs: Sequence[int], at: float) -> None:
    """Mark the pending events ``seqs`` done at ``at`` (kept for ``retainDone``), by
    :func:`_where_pending`."""
    _where_pending(conn, "UPDATE events SET state = 1, done_at = ?", (at,), seqs)


def _where_pending(
    conn: sqlite3.Connection, statement: str, params: tuple[Any, ...], seqs: Sequence[int]
) -> None:
    """Run ``statement`` (with ``params``) on the pending events ``seqs``.

    Marks come in runs (a batch committed together is dispatched together): up to
    :data:`RANGE_DELETES` runs, one ``seq BETWEEN`` statement each, which costs SQLite a third
    of looking each seq up from a list (0.19 against 0.5 us an event, 256-event batches); else
    one statement over the list (see :func:`insert` for why not ``executemany``)."""
    spans = runs(seqs)
    if len(spans) <= RANGE_DELETES:
        for first, last in spans:
            conn.execute(
                f"{statement} WHERE state = 0 AND seq BETWEEN ? AND ?", (*params, first, last)
            )
        return
    conn.execute(
        f"{statement} WHERE state = 0 AND seq IN (SELECT value FROM json_each(?))",
        (*params, json.dumps(list(seqs))),
    )


def session_blob(key: str) -> bytes:
    """A session key as UTF-8 bytes, lone surrogates kept (``surrogatepass``): how journals
    before 2026-11-26 stored every key, and what :func:`list_events` compares with."""
    return key.encode("utf-8", "surrogatepass")


def session_value(key: str) -> str | bytes:
    """A session key as the writer stores it: the text itself (bound as text, a third of the
    cost of bytes to the sqlite3 module), or :func:`session_blob` for a key UTF-8 cannot encode
    (a lone surrogate; the queue refuses those before they reach the journal)."""
    if key.isascii():
        return key
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return session_blob(key)
    return key


def session_text(value: bytes | str) -> str:
    """The session key :func:`session_value` (or :func:`session_blob`) stored."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def high_water(conn: sqlite3.Connection) -> int:
    """The highest ``seq`` ever used (AUTOINCREMENT keeps it past deleted rows)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return int(row[0]) if row else 0


def pending_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """``(seq, session, type, action, ts, context, only)`` of every pending event, in order.
    A text value that is no UTF-8 (a flipped bit) comes back as :class:`NotUtf8`, for
    :func:`decode_row` to refuse that row alone: read as text, it failed the whole query, and
    with it every start."""
    factory = conn.text_factory
    conn.text_factory = _text
    try:
        return conn.execute(
            "SELECT seq, session, type, action, ts, context, only FROM events "
            "WHERE state = 0 ORDER BY seq"
        ).fetchall()
    finally:
        conn.text_factory = factory


class NotUtf8(bytes):
    """A text value of the file that does not decode as UTF-8."""


def _text(value: bytes) -> str | NotUtf8:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8(value)


MAX_RECOVERIES = 2
"""A redelivered event whose dispatch began this many times without finishing (the daemon
stopped each time) is dead-lettered at the next start instead of redelivered again."""
POISON_HOOK = "(gatewayd)"
"""The ``hook`` of such a dead letter: no one handler failed, the daemon kept stopping."""


def note_started(conn: sqlite3.Connection, seq: int) -> None:
    """A redelivered event's dispatch is beginning (see :func:`recover`)."""
    conn.execute(
        "INSERT INTO recoveries VALUES (?, 1) ON CONFLICT(seq) DO UPDATE SET count = count + 1",
        (seq,),
    )


class Unreadable(ValueError):
    """A stored row that cannot be made into an event again (its context no JSON object, ...)."""


def decode_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A :func:`pending_rows` row with its values as the journal wrote them: session key and
    type/action text, ``ts`` a float, ``context`` a dict, ``only`` a tuple of hook names or
    None. Raises :class:`Unreadable` naming the column for a row the writer never wrote (the
    file edited by hand, a bit flipped inside a value that ``quick_check`` cannot see)."""
    seq, session, etype, action, ts, context, only = row
    if any(isinstance(value, NotUtf8) for value in row):
        raise Unreadable("a text value is not UTF-8 (the file changed under it)")
    if not isinstance(session, str | bytes):
        raise Unreadable(f"session is {type(session).__name__}, not text")
    if not isinstance(etype, str) or not isinstance(action, str):
        raise Unreadable("type or action is not text")
    if not isinstance(ts, int | float):
        raise Unreadable(f"timestamp is {type(ts).__name__}, not a number")
    try:
        fields = json.loads(context)
        hooks = json.loads(only) if only else None
    except (TypeError, ValueError, RecursionError) as exc:  # Recursion: nested past the stack
        raise Unreadable(f"context or only is no JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise Unreadable(f"context is a JSON {type(fields).__name__}, not an object")
    if hooks is not None and not (
        isinstance(hooks, list) and all(isinstance(h, str) for h in hooks)
    ):
        raise Unreadable("only is not a list of hook names")
    return (
        seq,
        session_text(session),
        etype,
        action,
        float(ts),
        fields,
        hooks if hooks is None else tuple(hooks),
    )


UNREADABLE_HOOK = "(journal)"
"""The ``hook`` of the dead letter of a row :func:`decode_row` refuses: no handler ran."""


class Recovered(NamedTuple):
    """What :func:`recover` found: the rows to redeliver (decoded, :func:`decode_row`), how many
    were dead-lettered as poison, and ``(seq, why)`` of those dead-lettered as unreadable."""

    rows: list[tuple[Any, ...]]
    poisoned: int
    unreadable: list[tuple[int, str]]


def recover(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> Recovered:
    """The pending ``rows`` to redeliver at a start, decoded: those whose redelivered dispatch
    already began :data:`MAX_RECOVERIES` times without finishing are dead-lettered instead. A
    handler that blocks the loop until the watchdog kills the daemon, or ends the process, must
    not take it down again on every start. So is a row that cannot be an event again
    (:func:`decode_row`): one such row used to stop every start with a traceback."""
    counts = dict(conn.execute("SELECT seq, count FROM recoveries").fetchall())
    poisoned = {row[0]: counts[row[0]] for row in rows if counts.get(row[0], 0) >= MAX_RECOVERIES}
    letters = [
        (
            seq,
            POISON_HOOK,
            f"the daemon stopped {count} times while dispatching this event again after "
            "a restart (a handler that blocks the event loop or ends the process?); "
            "inspect it with `gatewayd events show`, replay it with `events retry`",
            count,
        )
        for seq, count in poisoned.items()
    ]
    decoded: list[tuple[Any, ...]] = []
    unreadable: list[tuple[int, str]] = []
    for row in rows:
        if row[0] in poisoned:
            continue
        try:
            decoded.append(decode_row(row))
        except Unreadable as exc:
            unreadable.append((row[0], str(exc)))
            letters.append(
                (
                    row[0],
                    UNREADABLE_HOOK,
                    f"its row in the journal cannot be read back as an event: {exc}; "
                    "it was never dispatched; inspect it with `gatewayd events show`, "
                    "remove it with `events purge`",
                    0,
                )
            )
    at = now()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for seq, hook, error, attempts in letters:
            conn.execute(
                "INSERT OR REPLACE INTO dead VALUES (?,?,?,?,?)", (seq, hook, error, attempts, at)
            )
            conn.execute("UPDATE events SET state = 2, done_at = ? WHERE seq = ?", (at, seq))
        conn.execute(
            "DELETE FROM recoveries WHERE seq NOT IN (SELECT seq FROM events WHERE state = 0)"
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return Recovered(decoded, len(poisoned), unreadable)


def dead_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM dead").fetchone()[0])


def file_size(path: Path) -> int:
    """Bytes of the journal file plus its write-ahead log."""
    total = 0
    for name in (path.name, path.name + "-wal"):
        with contextlib.suppress(OSError):
            total += path.with_name(name).stat().st_size
    return total


def trim_done(conn: sqlite3.Connection, retain: int) -> int:
    """Delete done events beyond the newest ``retain``; returns how many went."""
    cur = conn.execute(
        "DELETE FROM events WHERE state = 1 AND seq <= (SELECT seq FROM events WHERE state = 1 "
        "ORDER BY seq DESC LIMIT 1 OFFSET ?)",
        (retain,),
    )
    return cur.rowcount


def now() -> float:
    return time.time()
