"""The SQLite journal's thread (``gatewayd-journal``): the file's own connections, off the loop.

Everything the journal does to its file other than committing events and marks (the writer
process's job, :mod:`.writer`) runs here, one job at a time, so the event loop never waits on
SQLite: opening the file (setting a damaged one aside, :func:`store.set_aside`) and recovering
what was pending (:func:`store.recover`), serving ``gatewayd events`` (:meth:`JournalThread.call`;
a query that writes, ``retry`` or ``purge``, and the writer wait for each other through
SQLite's lock, ``busy_timeout`` 10 s), checkpointing and closing.

Checkpoints: SQLite's automatic one would run inside a commit (with two fsyncs the batch's
posters would wait for), so it is off; the journal asks for one every so many commits
(:meth:`JournalThread.checkpoint`), which runs ``PASSIVE`` on a connection of its own while the
writer goes on, and the writer then copies what was committed meanwhile
(:func:`.writes.catch_up`), so that the WAL starts over. The close checkpoints ``TRUNCATE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import anyio
import structlog

from gatewayd.atomic import fsync_dir
from gatewayd.journal import store
from gatewayd.journal.base import JournalError

__all__ = ["JournalThread", "Opened", "Restored"]

log = structlog.get_logger("gatewayd.journal")

T = TypeVar("T")


class Opened(NamedTuple):
    """What opening the file found: the pending rows to redeliver (:func:`store.decode_row`'s),
    the dead letters' count, the file's epoch and its highest seq."""

    rows: list[tuple[Any, ...]]
    dead_letters: int
    epoch: str
    high_water: int


class Restored(NamedTuple):
    """What :meth:`JournalThread.restore` did: the file set aside (None: there was none), the
    pending events in the copy, or why it could not."""

    aside: Path | None
    pending: int
    error: str | None


class JournalThread:
    """The journal file's thread and connections; see the module docstring."""

    def __init__(self, path: Path, sync: str) -> None:
        self.path = path
        self.sync = sync
        self._conn: sqlite3.Connection | None = None
        self._checkpointer: sqlite3.Connection | None = None
        """A connection of the thread's own for checkpoints (:meth:`checkpoint`)."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as exc:  # a bug; the thread must live on for the next jobs
                log.exception("journal.job_failed", error=f"{type(exc).__name__}: {exc}")

    async def open(self) -> Opened:
        """Start the thread and open the file on it; :class:`JournalError` when it cannot be
        (the thread is stopped again)."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="gatewayd-journal", daemon=True)
        self._thread.start()
        try:
            return await self._submit(self._open)
        except Exception as exc:
            await self._stop()
            raise JournalError(f"cannot open the journal {self.path}: {exc}") from exc

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` on the thread (after every job queued before it)."""

        def job() -> T:
            assert self._conn is not None, "call() on a journal that is not open"
            return fn(self._conn)

        return await self._submit(job)

    async def _submit(self, fn: Callable[[], T]) -> T:
        loop = self._loop
        assert loop is not None and self._thread is not None, "call() before open()"
        done = anyio.Event()
        box: list[tuple[bool, Any]] = []

        def job() -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:
                box.append((False, exc))
            loop.call_soon_threadsafe(done.set)

        self._jobs.put(job)
        await done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _open(self) -> Opened:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            conn, epoch = store.connect(self.path, self.sync)
            recovered = store.recover(conn, store.pending_rows(conn))
            rows = recovered.rows
            _log_recovered(recovered, epoch, self.path)
        except (store.Damaged, sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            # UnicodeDecodeError: a value of its own tables that is no UTF-8 (its epoch).
            if isinstance(exc, sqlite3.DatabaseError) and not store.is_damage(exc):
                raise
            aside = store.set_aside(self.path)
            log.error(
                "journal.set_aside",
                file=str(aside),
                reason=str(exc),
                note="the events in it are not replayed; a new journal was created",
                fix=f"inspect or delete {aside}",
            )
            conn, epoch = store.connect(self.path, self.sync)
            rows = []
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the journal checkpoints (module docstring)
        if self.sync == "full":
            # SQLite syncs a new WAL's directory entry at the first sync of the connection that
            # created it: this one, which commits nothing more than a retry or a purge. The
            # writer's connection syncs the WAL's data only.
            fsync_dir(self.path.parent)
        self._checkpointer = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        self._conn = conn
        return Opened(rows, store.dead_count(conn), epoch, store.high_water(conn))

    def restore(self, then: Callable[[Restored], None]) -> None:
        """Put a whole copy of the journal back at its path, from the thread's own open
        connection (SQLite's backup: every page, the WAL's included), after the file there was
        deleted, replaced or overwritten under the daemon; ``then(outcome)`` on the loop.

        The open connection still reads the file the daemon wrote (a deleted file's inode, an
        overwritten header still in its cache): the copy holds every event acknowledged. What
        is at the path now is set aside (``events.db.damaged-<stamp>``), the copy renamed into
        its place, and the thread's connections opened on it; the writer process, stopped
        meanwhile, opens it at its next write."""
        loop = self._loop
        assert loop is not None

        def job() -> None:
            try:
                outcome = self._restore()
            except (OSError, sqlite3.Error) as exc:
                outcome = Restored(None, 0, f"{type(exc).__name__}: {exc}")
            loop.call_soon_threadsafe(then, outcome)

        self._jobs.put(job)

    def _restore(self) -> Restored:
        old = self._conn
        assert old is not None, "restore() on a journal that is not open"
        copy = self.path.with_name(self.path.name + ".restoring")
        for name in (copy.name, copy.name + "-wal", copy.name + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (copy.parent / name).unlink()
        target = sqlite3.connect(copy, isolation_level=None)
        try:
            old.backup(target)
            target.execute("PRAGMA journal_mode=WAL")
            pending = len(store.pending_rows(target))
        finally:
            target.close()
        # The old connections closed before anything else is at the path: SQLite removes a
        # closing WAL by name.
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        old.close()
        self._conn = None
        aside = store.set_aside(self.path) if os.path.lexists(self.path) else None
        for suffix in ("-wal", "-shm"):  # left by a file deleted alone
            with contextlib.suppress(FileNotFoundError):
                self.path.with_name(self.path.name + suffix).unlink()
        os.replace(copy, self.path)
        fsync_dir(self.path.parent)
        conn, _ = store.connect(self.path, self.sync)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        self._checkpointer = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        self._conn = conn
        return Restored(aside, pending, None)

    def checkpoint(self, then: Callable[[], None]) -> None:
        """Checkpoint the WAL into the file (``PASSIVE``: the writer goes on meanwhile, and the
        checkpoint's two fsyncs are no wait of the loop's or the writer's); ``then()`` on the
        loop once it ended, for the writer to copy what was committed meanwhile."""
        loop = self._loop
        assert loop is not None

        def job() -> None:
            conn = self._checkpointer
            if conn is None:
                return
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:
                log.warning("journal.checkpoint_failed", error=str(exc))
                return
            loop.call_soon_threadsafe(then)

        self._jobs.put(job)

    async def close(self) -> None:
        """Checkpoint the WAL into the file (``TRUNCATE``), close the file, stop the thread
        (after the writer process exited: the checkpoint needs its connection closed)."""
        if self._thread is None:
            return
        await self.call(self._close)
        await self._stop()

    def _close(self, conn: sqlite3.Connection) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            log.warning("journal.checkpoint_failed", error=str(exc))
        conn.close()
        self._conn = None

    async def _stop(self) -> None:
        self._jobs.put(None)
        thread, self._thread = self._thread, None
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join, 5)


def _log_recovered(recovered: store.Recovered, epoch: str, path: Path) -> None:
    """What recovery dead-lettered instead of redelivering, said once at open."""
    if recovered.poisoned:
        log.error(
            "journal.poisoned",
            events=recovered.poisoned,
            path=str(path),
            note="dead-lettered: the daemon stopped again while each was next",
            fix="gatewayd events list --state dead",
        )
    if recovered.unreadable:
        seq, why = recovered.unreadable[0]
        log.error(
            "journal.unreadable",
            events=len(recovered.unreadable),
            first=f"{epoch}-{seq}",
            reason=why,
            path=str(path),
            note="dead-lettered, not dispatched: their rows cannot be events again",
            fix="gatewayd events list --state dead; gatewayd events purge ID",
        )
