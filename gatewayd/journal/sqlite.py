"""The durable journal: ``<state>/journal/events.db``, SQLite in WAL mode, with group commit.

Everything touching the file runs in one writer thread (``gatewayd-journal``), fed jobs through
a queue; the event loop never waits on disk. Group commit: every event appended in the same loop
tick joins one batch, and while a batch is being written the next one fills, so under load one
transaction (one fsync with ``gateway.queue.sync: full``) carries many events and the batch size
follows the load by itself. A batch's posters wake when its ``COMMIT`` returned, and its events
are delivered to the queue's lanes in append order: at once, or, for a large batch, once the
writer thread starts the next batch's ``COMMIT``, so that their dispatch runs while that
``COMMIT`` waits for the disk (the writer needs the GIL to write the rows, not during the fsync).

``done``/``dead`` marks are not waited for: done marks are written right after each commit, in
statements of their own that do not fsync (:meth:`SqliteJournal._write_done`), dead marks ride
along with the next batch; with no batch to follow they go on their own a moment later. One
lost to a crash or a power cut means that event is dispatched again (at-least-once).

A full disk: the batch is retried with backoff for up to ``gateway.queue.fullWaitMs`` while its
posters wait (and, the queue being bounded, new posters wait behind them), then its posters get
:class:`JournalFull` (``journal_full``). SQLite rolls the failed transaction back, so the file
stays whole. A damaged file found at start is set aside (:func:`store.set_aside`) and a fresh one
created; ``journal.set_aside`` names the file.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, TypeVar

import anyio
import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.journal import store
from gatewayd.journal.base import (
    Commit,
    DeadLetter,
    Item,
    Journal,
    JournalError,
    JournalFull,
)
from gatewayd.journal.records import BASE_KEYS, context_json, make_encoder
from gatewayd.journal.requests import parse_request
from gatewayd.journal.store import journal_path

__all__ = ["SqliteJournal", "journal_path"]

log = structlog.get_logger("gatewayd.journal")

Mark = tuple[int, str, str, int, float]
"""A dead letter on its way to the file: ``(seq, hook, error, attempts, at)``."""
Insert = Callable[[sqlite3.Connection], None]
"""Inserts a batch's rows (:func:`_rows`)."""

T = TypeVar("T")
DONE_DELAY_S = 0.02
"""Done marks with no batch to ride along wait this long for one, then go on their own."""
HAND_BACK_MIN = 32
"""A committed batch of at least this many events is dispatched while the next one's ``COMMIT``
waits for the disk (:meth:`SqliteJournal._write`); a smaller one at once, as its dispatch
holds up the writer thread only briefly (a trigger at a low rate is not made to wait for the
next batch's write)."""
TRIM_EVERY = 1024
"""Done marks between two trims of the retained done events (``retainDone`` > 0)."""


class SqliteJournal(Journal):
    """See the module docstring. Open with ``await open()`` on the event loop."""

    backend = "sqlite"
    durable = True

    def __init__(
        self,
        path: Path,
        *,
        base: Callable[[], dict[str, Any]],
        sync: str = "full",
        retain_done: int = 0,
        full_wait_s: float = 5.0,
    ) -> None:
        self.path = path
        self.sync = sync
        self.retain_done = retain_done
        self.keeps_unheard = retain_done > 0  # done events are listed (gatewayd events list)
        self.full_wait_s = full_wait_s
        self._base = base
        self._encode = make_encoder()
        """The writer thread's JSON encoder (:mod:`gatewayd.journal.records`)."""
        self._epoch = ""
        self._seq = 0
        self._conn: sqlite3.Connection | None = None
        self._relaxed = False
        """The connection may be at ``synchronous=NORMAL`` (:meth:`_relax`; writer thread)."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[Item] = []
        self._commit: Commit | None = None
        self._done: list[int] = []
        """Done marks: the event loop appends, the writer thread takes them from the front
        (:meth:`_write_done`). The one list object is never replaced, and each side's step is
        one list operation under the GIL (``append``; a slice, then ``del`` of that many), so
        a mark appended meanwhile lands after the ones taken and is left for the next time."""
        self._carry: list[int] = []
        """Done marks the writer thread took and could not write yet (writer thread only)."""
        self._dead: list[Mark] = []
        self._busy = False
        self._scheduled = False
        """A flush is due on the next loop turn (events were appended)."""
        self._timer: asyncio.TimerHandle | None = None
        """A flush of done/dead marks alone, a moment later."""
        self._idle: anyio.Event | None = None
        self._pending: dict[int, float] = {}
        """seq -> wall time accepted, of every event not yet done (insertion = seq order)."""
        self._accepted_at = 0.0
        """The wall time of the first append to the commit being filled."""
        self.redelivered: set[int] = set()
        """Items redelivered at open (or retried) whose dispatch has not begun yet (see
        :meth:`started`)."""
        self._dead_letters = 0
        self._trim_countdown = TRIM_EVERY
        self.commits = 0
        self.committed = 0
        self.refused = 0
        self.full = False
        """The last write found the disk full (cleared by the next one that succeeds)."""

    # -- the writer thread ------------------------------------------------------------------

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as exc:  # a bug; the thread must live on, or nothing is written
                log.exception("journal.job_failed", error=f"{type(exc).__name__}: {exc}")

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the writer thread, after every job queued before it."""
        loop = self._loop
        assert loop is not None and self._thread is not None
        done = anyio.Event()
        box: list[Any] = []

        def job() -> None:
            try:
                assert self._conn is not None
                box.append((True, fn(self._conn)))
            except BaseException as exc:
                box.append((False, exc))
            loop.call_soon_threadsafe(done.set)

        self._jobs.put(job)
        await done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    # -- open / recover -----------------------------------------------------------------------

    async def open(self) -> list[Item]:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="gatewayd-journal", daemon=True)
        self._thread.start()
        self._conn = None
        opened = anyio.Event()
        box: list[Any] = []
        loop = self._loop

        def job() -> None:
            try:
                box.append((True, self._open_store()))
            except BaseException as exc:
                box.append((False, exc))
            loop.call_soon_threadsafe(opened.set)

        self._jobs.put(job)
        await opened.wait()
        ok, value = box[0]
        if not ok:
            self._jobs.put(None)
            # The writer thread ends here: close() (the daemon's shutdown after the failed
            # start) must not hand it the closing job, which nobody would ever run.
            thread, self._thread = self._thread, None
            if thread is not None:
                await anyio.to_thread.run_sync(thread.join, 5)
            raise JournalError(f"cannot open the journal {self.path}: {value}") from value
        rows, self._dead_letters = value
        items = self._items(rows)
        if items:
            log.info(
                "journal.recovered",
                pending=len(items),
                sessions=len({item[0].session_key for item in items}),
                path=str(self.path),
            )
        return items

    def _open_store(self) -> tuple[list[tuple[Any, ...]], int]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            conn, epoch = store.connect(self.path, self.sync)
            rows = store.pending_rows(conn)
            before = len(rows)
            rows = store.recover(conn, rows)
            if len(rows) < before:
                log.error(
                    "journal.poisoned",
                    events=before - len(rows),
                    path=str(self.path),
                    note="dead-lettered: the daemon stopped again while each was next",
                    fix="gatewayd events list --state dead",
                )
        except (store.Damaged, sqlite3.DatabaseError) as exc:
            if not isinstance(exc, store.Damaged) and not store.is_damage(exc):
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
        self._conn = conn
        self._epoch = epoch
        self._seq = store.high_water(conn)
        return rows, store.dead_count(conn)

    def _items(self, rows: Sequence[tuple[Any, ...]]) -> list[Item]:
        base = self._base()
        items: list[Item] = []
        now = time.time()
        for seq, session, etype, action, ts, context, only in rows:
            event = HookEvent(
                type=etype,
                action=action,
                session_key=store.session_text(session),
                created=float(ts),
                # The base first: a stored workspaceDir is another agent's (hooks/agents.py).
                context={**{k: base[k] for k in BASE_KEYS if k in base}, **json.loads(context)},
            )
            event.id = f"{self._epoch}-{seq}"
            self._pending[seq] = now
            self.redelivered.add(seq)
            hooks = tuple(json.loads(only)) if only else None
            items.append((event, None, perf_counter(), seq, hooks))
        return items

    # -- appending (event loop) ---------------------------------------------------------------

    def next_id(self) -> str:
        self._seq += 1
        return f"{self._epoch}-{self._seq}"

    def append(
        self, event: HookEvent, ticket: Any, posted: float, only: tuple[str, ...] | None = None
    ) -> Commit | None:
        self._seq += 1
        seq = self._seq
        event.id = f"{self._epoch}-{seq}"
        if event.type == "gateway":  # lifecycle events (gateway:startup) are never replayed
            self._deliver([(event, ticket, posted, 0, only)])
            return None
        self._batch.append((event, ticket, posted, seq, only))
        commit = self._commit
        if commit is None:
            commit = self._commit = Commit()
            self._accepted_at = time.time()  # once per commit: for the oldest pending age
        self._pending[seq] = self._accepted_at
        if not self._busy and not self._scheduled:
            self._scheduled = True
            assert self._loop is not None, "append() before open()"
            self._loop.call_soon(self._flush)
        return commit

    def started(self, seq: int) -> None:
        """A redelivered item's dispatch begins: counted in the file, so that one whose
        dispatch keeps ending with the daemon is dead-lettered (:func:`store.recover`)."""
        if seq in self.redelivered:
            self.redelivered.discard(seq)
            conn = self._conn
            if conn is not None:
                self._jobs.put(lambda: store.note_started(conn, seq))

    def done(self, seq: int) -> None:
        self._pending.pop(seq, None)
        self._done.append(seq)
        if not (self._busy or self._scheduled or self._timer):  # _poke(), once per event
            self._poke()

    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        self._pending.pop(seq, None)
        at = time.time()
        self._dead.extend((seq, hook, error, attempts, at) for hook, error, attempts in letters)
        self._dead_letters += len(letters)
        self._poke()

    def _poke(self) -> None:
        """Done/dead marks queued: write them with the next batch, or soon on their own."""
        if not (self._busy or self._scheduled or self._timer) and self._loop is not None:
            self._timer = self._loop.call_later(DONE_DELAY_S, self._flush)

    def _flush(self, committed: list[Item] | None = None) -> None:
        """Hand the batch being filled to the writer thread. ``committed``: the batch whose
        commit just woke its posters, not yet delivered: the writer hands it back to be
        delivered as it starts this batch's ``COMMIT`` (see :meth:`_written`)."""
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._busy or not (self._batch or self._done or self._dead):
            if committed:
                self._deliver(committed)
            return
        if committed and not self._jobs.empty():  # the writer has other work first (a query)
            self._deliver(committed)
            committed = None
        batch, commit, dead = self._batch, self._commit, self._dead
        self._batch, self._commit, self._dead = [], None, []
        self._busy = True
        base = self._base()
        self._jobs.put(lambda: self._write(batch, commit, dead, base, committed))

    def _write(
        self,
        batch: list[Item],
        commit: Commit | None,
        dead: list[Mark],
        base: dict[str, Any],
        committed: list[Item] | None = None,
    ) -> None:
        """One transaction (writer thread): insert ``batch``, apply the dead letters, commit;
        then the done marks (:meth:`_write_done`).

        ``committed`` (the previous batch, committed, its posters woken) goes back to the event
        loop to be delivered as this thread lets go of the GIL for the last time before the
        commit: its dispatch then runs while SQLite inserts and the commit waits for the disk
        (the fsync). Earlier, the event loop's dispatch would keep this thread from the GIL it
        needs to bind the rows and between its statements; later, the fsync would be waited
        for with nothing else to do (bench/NOTES.md, issue 15, fourth pass). A batch that one
        ``INSERT`` takes, with no dead letters, is that statement alone, in autocommit (the
        statement is the transaction, committed before it returns): it is handed back before
        it, and its SQLite work runs beside the dispatch too (sixth pass)."""
        conn = self._conn
        loop = self._loop
        assert conn is not None and loop is not None
        if committed:
            handed = [committed]

            def hand_back() -> None:  # once, before the COMMIT, a failure or a wait
                if handed:
                    loop.call_soon_threadsafe(self._deliver, handed.pop())

        else:

            def hand_back() -> None:
                pass

        error: JournalError | None = None
        encode = self._encode
        insert: Insert | None = None
        try:
            if batch:
                insert = _rows(batch, base, encode)
        except (TypeError, ValueError, RecursionError) as exc:  # a cycle, or nested too deep
            log.error("journal.unrecordable", error=str(exc), events=len(batch))
            error = JournalError(f"the event cannot be recorded: {exc}")
        alone = not dead and len(batch) <= store.INSERT_ROWS
        deadline: float | None = None
        delay = 0.05
        while error is None:
            try:
                if self._relaxed:  # a restore failed after the last marks: nothing unsynced
                    self._sync_full(conn)
                if alone:
                    hand_back()
                    if insert is not None:
                        insert(conn)  # one statement, its own transaction (autocommit)
                    break
                conn.execute("BEGIN IMMEDIATE")
                if insert is not None:
                    insert(conn)
                self._apply_dead(conn, dead)
                hand_back()
                conn.execute("COMMIT")
                break
            except (sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot take
                hand_back()
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if not store.is_full(exc):
                    log.error("journal.write_failed", error=str(exc), events=len(batch))
                    error = JournalError(f"the journal {self.path} could not record it: {exc}")
                    break
                if deadline is None:
                    deadline = time.monotonic() + (self.full_wait_s if batch else 0)
                    if not self.full:
                        log.error(
                            "journal.full",
                            path=str(self.path),
                            error=str(exc),
                            waiting_ms=round(self.full_wait_s * 1000),
                            fix="free space on the journal's filesystem",
                        )
                    self.full = True
                if time.monotonic() >= deadline:
                    error = JournalFull(
                        f"the disk holding the journal {self.path.parent} is full: event not "
                        "accepted; free space there and post again"
                    )
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        hand_back()  # the rows could not be encoded: nothing was written
        if error is None and self.full:
            self.full = False
            log.info("journal.space_recovered", path=str(self.path))
        done = self._take_done()
        relaxed = self._relax(conn) if done else False
        loop.call_soon_threadsafe(self._written, batch, commit, dead, error)
        if done:
            self._write_done(conn, done, relaxed)

    def _relax(self, conn: sqlite3.Connection) -> bool:
        """(Writer thread.) Let the next statements commit without an fsync (``gateway.queue.sync:
        full`` only) until :meth:`_sync_full`; True if they will. :attr:`_relaxed` stays set
        until ``synchronous=FULL`` is back, and every write checks it before it writes."""
        if self.sync != "full":
            return False
        self._relaxed = True
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error:
            return False  # still FULL; the next write sets it again all the same
        return True

    def _sync_full(self, conn: sqlite3.Connection) -> None:
        """(Writer thread.) ``synchronous=FULL`` again after :meth:`_relax`. Raises
        ``sqlite3.Error`` if SQLite refuses: :attr:`_relaxed` then stays set, and the next write
        tries again before it writes anything (refusing its events if it still cannot)."""
        conn.execute("PRAGMA synchronous=FULL")
        self._relaxed = False

    def _write_done(self, conn: sqlite3.Connection, done: list[int], relaxed: bool) -> None:
        """(Writer thread.) Write the done marks ``done``, right after a commit, as statements of
        their own (autocommit), without an fsync when ``relaxed``.

        The event loop is waking that commit's posters meanwhile, and the marks are those of
        the batch it dispatched during the commit: their ``DELETE``'s SQLite work runs beside
        the posters, not while the event loop waits for the next commit (as when the marks
        rode along with the next batch). Not fsynced, the marks reach the disk with the next
        commit's fsync or the close's checkpoint; one lost meanwhile (a power cut; not a crash
        of the process, whose writes the kernel keeps) means that event is dispatched again:
        delivery is at-least-once, as with a mark not yet written at a crash. Marks that
        cannot be written (a full disk) are kept and tried again next time. The same
        connection, not a second one with ``synchronous=NORMAL``: a write through another
        connection makes this one drop its page cache and read the file again at its next
        commit (+0.35-0.55 ms a commit, bench/NOTES.md, issue 15, sixth pass)."""
        try:
            self._mark_done(conn, done)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not store.is_full(exc):
                log.warning("journal.marks_failed", error=str(exc), events=len(done))
            self._carry = done
        finally:
            if relaxed:
                try:
                    self._sync_full(conn)
                except sqlite3.Error as exc:  # _relaxed stays set: the next write sets it first
                    log.warning("journal.sync_full_refused", error=str(exc))

    def _take_done(self) -> list[int]:
        """(Writer thread.) The marks kept from a failed write, then those queued meanwhile."""
        shared = self._done
        taken = shared[: len(shared)]
        del shared[: len(taken)]
        if self._carry:
            taken[:0] = self._carry
            self._carry = []
        return taken

    def _apply_dead(self, conn: sqlite3.Connection, dead: list[Mark]) -> None:
        if dead:
            conn.executemany("INSERT OR REPLACE INTO dead VALUES (?,?,?,?,?)", dead)
            conn.executemany(
                "UPDATE events SET state = 2, done_at = ? WHERE seq = ?",
                [(at, seq) for seq, *_, at in dead],
            )

    def _mark_done(self, conn: sqlite3.Connection, done: list[int]) -> None:
        if self.retain_done == 0:
            store.delete_done(conn, done)
            return
        store.update_done(conn, done, time.time())
        self._trim_countdown -= len(done)
        if self._trim_countdown <= 0:
            self._trim_countdown = TRIM_EVERY
            store.trim_done(conn, self.retain_done)

    def _written(
        self,
        batch: list[Item],
        commit: Commit | None,
        dead: list[Mark],
        error: JournalError | None,
    ) -> None:
        """Back on the event loop after a transaction: deliver (or refuse) and go on.

        A large committed batch (:data:`HAND_BACK_MIN`): its posters are woken first and the
        batch is delivered a loop turn later (:meth:`_deliver_after`), once they have appended
        their next events: those are flushed first, and the writer hands this batch back for
        its dispatch as it starts their ``COMMIT`` (:meth:`_write`)."""
        self._busy = False
        if error is None:
            if batch or dead:  # done marks alone: no commit of events (_write_done)
                self.commits += 1
            self.committed += len(batch)
            if len(batch) >= HAND_BACK_MIN:
                if commit is not None:
                    commit.finish()
                self._busy = True  # until _deliver_after: the woken posters' events wait
                assert self._loop is not None
                self._loop.call_soon(self._deliver_after, batch)
                return
            if batch:
                self._deliver(batch)
        else:
            self.refused += len(batch)
            for item in batch:
                self._pending.pop(item[3], None)
            if batch and error is not None:
                self._reject(batch, error)
            self._dead[:0] = dead  # retried with the next write
        if commit is not None:
            commit.finish(error)
        self._go_on()

    def _deliver_after(self, batch: list[Item]) -> None:
        self._busy = False
        if self._batch:
            self._flush(batch)
        else:
            self._deliver(batch)
            self._go_on()

    def _go_on(self) -> None:
        if self._batch:
            self._flush()
        elif self._done or self._dead:
            self._poke()
        elif self._idle is not None:
            self._idle.set()

    # -- inspection ---------------------------------------------------------------------------

    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        action, args = parse_request(request)
        epoch = self._epoch
        if action == "list":
            events = await self._call(lambda c: store.list_events(c, epoch, **args))
            return {"events": events, "journal": self.stats()}
        if action == "show":
            event = await self._call(lambda c: store.show_event(c, epoch, args["id"]))
            if event is None:
                raise ValueError(f"no event {args['id']} in the journal (done and compacted?)")
            return {"event": event}
        if action == "retry":
            rows = await self._call(lambda c: store.retry_dead(c, epoch, args["ids"]))
            self._dead_letters = await self._call(store.dead_count)
            items = self._items(rows)
            self._restore(items)
            return {"retried": [item[0].id for item in items]}
        purged = await self._call(lambda c: store.purge(c, epoch, args["ids"]))
        self._dead_letters = await self._call(store.dead_count)
        return {"purged": purged}

    def stats(self) -> dict[str, Any]:
        oldest = next(iter(self._pending.values()), None)
        return {
            "backend": self.backend,
            "path": str(self.path),
            "sync": self.sync,
            "size_bytes": store.file_size(self.path),
            "pending": len(self._pending),
            "dead_letters": self._dead_letters,
            "oldest_pending_age_s": round(time.time() - oldest, 3) if oldest else 0.0,
            "commits": self.commits,
            "events_per_commit": round(self.committed / self.commits, 2) if self.commits else 0.0,
            "refused": self.refused,
            "full": self.full,
            "retain_done": self.retain_done,
        }

    # -- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._thread is None:
            return
        while self._busy or self._batch or self._scheduled or self._timer:
            self._idle = anyio.Event()
            if not self._busy:
                self._flush()
            with anyio.move_on_after(10):
                await self._idle.wait()
            if self._busy:  # the disk stays full: what is in flight is not waited for longer
                break
        if not self._busy:
            dead, self._dead = self._dead, []
            await self._call(lambda conn: self._close_store(conn, dead))
        self._jobs.put(None)
        thread, self._thread = self._thread, None
        await anyio.to_thread.run_sync(thread.join, 5)

    def _close_store(self, conn: sqlite3.Connection, dead: list[Mark]) -> None:
        """Write the marks of the last dispatches, checkpoint the WAL into the file, close."""
        done = self._take_done()
        if done or dead:
            try:
                conn.execute("BEGIN IMMEDIATE")
                if done:
                    self._mark_done(conn, done)
                self._apply_dead(conn, dead)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                log.warning("journal.close_marks_lost", error=str(exc), events=len(done))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            log.warning("journal.checkpoint_failed", error=str(exc))
        conn.close()
        self._conn = None


def _one_kind(batch: Sequence[Item]) -> bool:
    """The batch's seqs follow one another and its events share one type and action: its rows
    go in through :func:`store.insert_shared` (three values a row bound instead of six)."""
    first = batch[0]
    if batch[-1][3] - first[3] != len(batch) - 1:  # seqs only grow: none is left out
        return False
    etype, action = first[0].type, first[0].action
    for item in batch:
        event = item[0]
        if event.type != etype or event.action != action:
            return False
    return True


def _rows(batch: Sequence[Item], base: dict[str, Any], encode: Callable[[Any], str]) -> Insert:
    """What inserts the batch's rows (on the writer thread, within the transaction).

    Built flat, a row's values extended in one step, with the common cases inline (an ASCII
    session key, an empty context, a context without the gateway's objects): this runs on the
    writer thread holding the GIL while every poster of the next batch waits, 0.51 -> 0.35 us
    an event against tuples per row flattened afterwards, 0.17 with no context to encode
    (bench/NOTES.md, issue 15, fifth pass). A batch of one kind of event binds its seqs, type
    and action once (:func:`store.insert_shared`; sixth pass)."""
    if any(item[4] for item in batch):  # a retried dead letter: the rows carry ``only``
        rows = [
            (
                seq,
                store.session_value(event.session_key),
                event.type,
                event.action,
                event.created,
                context_json(event.context, base, encode),
                json.dumps(list(only)) if only else None,
            )
            for event, _, _, seq, only in batch
        ]
        flat = [value for row in rows for value in row]
        width = len(store.EVENT_COLUMNS) + 1
        return lambda conn: store.insert_values(conn, flat, width)
    shared = _one_kind(batch)
    if shared:
        first = batch[0]
        values: list[Any] = [first[3], first[0].type, first[0].action]
    else:
        values = []
    extend = values.extend
    session_value = store.session_value
    for event, _, _, seq, _ in batch:
        key = event.session_key
        value = key if key.isascii() else session_value(key)
        context = event.context
        if not context:
            text = "{}"  # what encode() gives, without its 0.22 us (an event with no context)
        elif "cfg" in context or "gateway" in context:
            text = context_json(context, base, encode)
        else:
            text = encode(context)
        if shared:
            extend((value, event.created, text))
        else:
            extend((seq, value, event.type, event.action, event.created, text))
    if shared:
        return lambda conn: store.insert_shared(conn, values)
    return lambda conn: store.insert_values(conn, values, len(store.EVENT_COLUMNS))
