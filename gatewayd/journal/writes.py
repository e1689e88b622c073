"""What one write of the SQLite journal is, and how the writer process applies it.

A write (:data:`Request`) is a tuple of flat values, so that it crosses a pipe as one
``marshal`` frame (:func:`frame`): a batch's rows, laid end to end as :mod:`.store` binds them,
then the done marks, dead marks and started counts queued since the last write. :func:`apply`
writes it in one transaction and returns an :data:`Answer`; the rows commit or fail together,
and marks that fail for any other reason than a full disk are rolled back alone (a
``SAVEPOINT``): the rows still commit and the marks are kept for the next write.

:func:`serve` is the writer process's program (``python -I -S``, started by :mod:`.writer`):
it opens its own connection to the journal with the journal's pragmas (``synchronous`` per
``gateway.queue.sync``, so with ``full`` the fsync is inside each commit; the automatic
checkpoint off, the journal's thread checkpoints), then applies each request read from its
request pipe, in order, and answers each on its answer pipe. Stdlib and :mod:`.store` only: it
runs without the site packages.

Before it answers a write OK, it checks that the file is still the journal it opened
(:class:`FileWatch`: the path's device and inode, the ``-wal``'s, and SQLite's header in the
first bytes): SQLite goes on writing a file deleted, replaced or overwritten under it, and what
it writes there is gone at the next start. A write made to such a file is answered
:data:`LOST`, never OK: its events are refused, not acknowledged (the journal then restores
the file, :mod:`.thread`). Two system calls a write (~2 us).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import sqlite3
from typing import Any

from gatewayd.journal import store

Mark = tuple[int, str, str, int, float]
"""A dead letter on its way to the file: ``(seq, hook, error, attempts, at)``."""
Request = tuple[int, list[Any], list[int], float, int, list[Mark], list[int], bool]
"""``(rows, values, done, done_at, trim, dead, started, catch_up)``: ``rows`` says how
``values`` are bound (:data:`NO_ROWS`, :data:`SHARED_ROWS`, or the width of a row for
:func:`store.insert_values`); ``done`` the seqs whose handlers finished, deleted, or with
``done_at`` > 0 marked done at that time (``retainDone``), then done events beyond the newest
``trim`` deleted (0: no trim); ``dead`` the dead letters; ``started`` the redelivered seqs whose
dispatch began (:func:`store.note_started`); ``catch_up``: once answered, checkpoint what the
journal thread's checkpoint left (:func:`catch_up`)."""
Answer = tuple[int, str, str | None]
"""``(code, error, marks_error)``: ``code`` :data:`OK`, :data:`store.FULL` or :data:`FAILED`
with SQLite's message in ``error``; ``marks_error`` the message of marks rolled back alone."""

NO_ROWS = 0
SHARED_ROWS = 1
"""``values`` are :func:`store.insert_shared`'s parameters (one kind of event)."""
OK = 0
FAILED = 1
LOST = 2
"""The write went to a file that is no longer the journal at its path (:class:`FileWatch`)."""
SQLITE_HEADER = b"SQLite format 3\x00"

LENGTH = 4
"""Bytes of a frame's length prefix (little-endian)."""


def apply(conn: sqlite3.Connection, req: Request) -> Answer:
    """Write ``req`` in one transaction on ``conn``; never raises (the writer answers every
    request): an error comes back in the :data:`Answer`, the transaction rolled back."""
    rows, values, done, done_at, trim, dead, started, _ = req
    marks_error: str | None = None
    try:
        conn.execute("BEGIN IMMEDIATE")
        if rows == SHARED_ROWS:
            store.insert_shared(conn, values)
        elif rows != NO_ROWS:
            store.insert_values(conn, values, rows)
        if done or dead or started:
            conn.execute("SAVEPOINT marks")
            try:
                _marks(conn, done, done_at, trim, dead, started)
            except sqlite3.Error as exc:
                if store.is_full(exc):
                    raise
                conn.execute("ROLLBACK TO marks")
                marks_error = str(exc)
            conn.execute("RELEASE marks")
        conn.execute("COMMIT")
    except Exception as exc:  # sqlite3.Error, or a value SQLite cannot take (ValueError)
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # SQLite rolled it back itself (I/O error)
                conn.execute("ROLLBACK")
        code = store.FULL if store.is_full(exc) else FAILED
        text = str(exc) if isinstance(exc, sqlite3.Error) else f"{type(exc).__name__}: {exc}"
        return code, text, None
    return OK, "", marks_error


def _marks(
    conn: sqlite3.Connection,
    done: list[int],
    done_at: float,
    trim: int,
    dead: list[Mark],
    started: list[int],
) -> None:
    if dead:
        conn.executemany("INSERT OR REPLACE INTO dead VALUES (?,?,?,?,?)", dead)
        conn.executemany(
            "UPDATE events SET state = 2, done_at = ? WHERE seq = ?",
            [(at, seq) for seq, *_, at in dead],
        )
    if done:
        if done_at:
            store.update_done(conn, done, done_at)
        else:
            store.delete_done(conn, done)
    if trim:
        store.trim_done(conn, trim)
    for seq in started:
        store.note_started(conn, seq)


def catch_up(conn: sqlite3.Connection) -> None:
    """Checkpoint (``PASSIVE``) the frames committed since the journal's thread checkpointed.

    The thread's checkpoint (every ``CHECKPOINT_EVERY`` commits, on its own connection) copies
    the WAL into the file while this writer goes on committing, so under load it never ends
    with the whole WAL copied, and SQLite restarts the WAL from its start only when it did:
    the ``-wal`` file grew by every commit's frames for as long as the load lasted (40-80 MB
    in 4 s of the endtoend load), each ``fdatasync`` writing the file's new size too. Run
    here, between two writes, the checkpoint ends with nothing left to copy (the few frames
    since the thread's), and the next write starts the WAL over. Its errors are the thread's
    next checkpoint's to report."""
    with contextlib.suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def frame(value: Any) -> bytes:
    """``value`` as one frame: its length, then its ``marshal`` bytes."""
    try:
        body = marshal.dumps(value)
    except ValueError:  # marshal takes exact types only: a str subclass (a StrEnum event type)
        body = marshal.dumps(_plain(value))
    return len(body).to_bytes(LENGTH, "little") + body


def _plain(value: Any) -> Any:
    """``value`` with every str, int and float subclass replaced by its plain value, as
    SQLite would bind it."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return value


def unframe(buffer: bytearray) -> list[Any]:
    """The whole frames at the start of ``buffer``, taken out of it."""
    out: list[Any] = []
    start = 0
    while len(buffer) - start >= LENGTH:
        size = int.from_bytes(buffer[start : start + LENGTH], "little")
        end = start + LENGTH + size
        if end > len(buffer):
            break
        out.append(marshal.loads(buffer[start + LENGTH : end]))
        start = end
    del buffer[:start]
    return out


def connect(path: str, sync: str) -> sqlite3.Connection:
    """The writer's connection: the journal's pragmas (the file is open and in WAL mode
    already: the journal's thread opened and recovered it)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    # A done-mark DELETE over scattered seqs builds a temporary index: in memory, not in a
    # file made and unlinked for it (4 system calls each time; strace of the writer under load).
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when the daemon (``parent``) dies (Linux): a daemon
    killed with ``kill -9`` and started again must not find this writer still committing
    behind the new one's recovery."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pipe's end stops it, a moment later
        pass
    if os.getppid() != parent:  # the daemon died before the line above
        os._exit(0)


class FileWatch:
    """Whether the journal's file (and its ``-wal``) at ``path`` is still the one this writer
    opened and still an SQLite file; see the module docstring."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.wal = path + "-wal"
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(self._fd)
        self._file = (st.st_dev, st.st_ino)
        self._wal: tuple[int, int] | None = None
        """The ``-wal``'s identity once seen (SQLite keeps it while a connection is open)."""

    def problem(self) -> str | None:
        """Why the file at the path is not the journal this writer writes, or None."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return f"{self.path} was deleted under the running daemon"
        except OSError as exc:
            return f"{self.path} cannot be checked: {exc}"
        if (st.st_dev, st.st_ino) != self._file:
            return f"{self.path} was replaced by another file under the running daemon"
        try:
            head = os.pread(self._fd, len(SQLITE_HEADER), 0)
        except OSError as exc:
            return f"{self.path} cannot be read: {exc}"
        if head != SQLITE_HEADER:
            return f"{self.path} was overwritten under the running daemon (no SQLite header)"
        try:
            wal = os.stat(self.wal)
        except FileNotFoundError:
            return f"{self.wal} was deleted under the running daemon" if self._wal else None
        except OSError as exc:
            return f"{self.wal} cannot be checked: {exc}"
        identity = (wal.st_dev, wal.st_ino)
        if self._wal is None:
            self._wal = identity
        elif identity != self._wal:
            return f"{self.wal} was replaced by another file under the running daemon"
        return None


def serve(requests: int, answers: int, path: str, sync: str, parent: int) -> None:
    """The writer process: apply each request from ``requests``, answer it on ``answers``;
    exit when ``requests`` ends (the daemon closed it, or died). SIGINT and SIGTERM are
    ignored: a service stop signals the whole cgroup, and the daemon's drain still writes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent(parent)
    conn = connect(path, sync)
    try:
        watch: FileWatch | None = FileWatch(path)
    except OSError:  # gone already: every write is answered LOST below
        watch = None
    buffer = bytearray()
    while data := os.read(requests, 1 << 16):
        buffer += data
        for req in unframe(buffer):
            answer = apply(conn, req)
            if answer[0] == OK:
                problem = watch.problem() if watch is not None else f"{path} is gone"
                if problem is not None:
                    answer = (LOST, problem, None)
            reply = frame(answer)
            while reply:
                reply = reply[os.write(answers, reply) :]
            if req[7]:  # after the answer: the posters do not wait for it
                catch_up(conn)
    conn.close()
