"""The durable journal: ``<state>/journal/events.db``, SQLite in WAL mode, with group commit.

Events are written on the event loop: every event appended in the same loop tick joins one
batch, committed with ``synchronous=NORMAL`` (SQLite writes the WAL frames, ``write()`` only,
no fsync: 40-100 us a batch on the loop). With ``gateway.queue.sync: full`` the batch's posters
wake only once an ``fdatasync`` of the ``-wal`` file that began after its commit returned: what
``synchronous=FULL`` adds in WAL mode, done by a helper process (:mod:`.syncer`) while the loop
goes on; the next batch fills meanwhile, so under load one fsync carries many events and the
batch size follows the load by itself. A batch's events are delivered to the queue's lanes in
append order once it is synced: at once, or, for a large batch, once its woken posters'
next events are committed, so that its dispatch runs while their sync waits for the disk.

Before (up to session 8 of issue 18) a writer thread did the writing with ``synchronous=FULL``:
it needed the GIL to wake, to bind the rows and after the fsync, and while the event loop
dispatched it got it only when the loop went idle (or after the 5 ms switch interval), so its
fsync did not overlap the dispatch; it cost 25-30 us of its CPU and 15-20 us of the loop's a
message (bench/NOTES.md, issue 18, session 8). That thread (``gatewayd-journal``) now only opens
and recovers the file, serves ``gatewayd events`` queries, checkpoints and closes; while it
uses the connection the loop writes nothing (events wait, as behind any write).

Checkpoints: SQLite's automatic one would run inside a commit on the loop (with two fsyncs), so
it is off; the thread checkpoints (``PASSIVE``, on a connection of its own, while the loop goes
on) every :data:`CHECKPOINT_EVERY` commits. The WAL restarting after one syncs its header (one
fsync on the loop per checkpoint).

``done``/``dead`` marks are not waited for: done marks go every :data:`DONE_DELAY_S` (or when
no batch is being written), in a statement of their own after a batch's; dead marks ride along
with the next batch. Neither is synced by itself: the next sync, a checkpoint or the close's
syncs them. One lost to a crash or a power cut means that event is dispatched again
(at-least-once).

A full disk: the batch is retried with backoff for up to ``gateway.queue.fullWaitMs`` while its
posters wait (and, the queue being bounded, new posters wait behind them), then its posters get
:class:`JournalFull` (``journal_full``). SQLite rolls the failed transaction back, so the file
stays whole. A sync that fails refuses the batch's events (``journal_error``) and deletes their
rows. A damaged file found at start is set aside (:func:`store.set_aside`) and a fresh one
created; ``journal.set_aside`` names the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, TypeVar

import anyio
import structlog

from gatewayd.atomic import fsync_dir
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
from gatewayd.journal.syncer import Syncer

__all__ = ["SqliteJournal", "journal_path"]

log = structlog.get_logger("gatewayd.journal")

Mark = tuple[int, str, str, int, float]
"""A dead letter on its way to the file: ``(seq, hook, error, attempts, at)``."""
Insert = Callable[[sqlite3.Connection], None]
"""Inserts a batch's rows (:func:`_rows`)."""
Pending = tuple[list[Item], Commit | None, list[Mark]]
"""A batch committed and waiting for its sync: its items, its commit, its dead marks."""

T = TypeVar("T")
DONE_DELAY_S = 0.02
"""Done marks are written at most this often while batches follow one another (each write is a
``DELETE`` on the loop, 15-30 us), and this long after the last batch when none follows."""
HAND_BACK_MIN = 32
"""A synced batch of at least this many events is dispatched after its woken posters' next
events are committed, while their sync waits for the disk (:meth:`SqliteJournal._written`); a
smaller one at once (a trigger at a low rate is not made to wait for the next batch)."""
SYNCS_AHEAD = 1
"""Batches committed and waiting for their syncs at most. With 2, the helper starts the next
sync as the last returns, without waiting for the loop to hear of it, but batches are smaller
(more commits, more loop CPU a message): the endtoend ``message`` load, 8 interleaved rounds,
durable throughput 0.73x the in-memory queue's with 1 against 0.59x with 2 (faster in 6 of 8;
bench/NOTES.md, issue 18, session 8)."""
CHECKPOINT_EVERY = 256
"""Commits between two checkpoints by the journal's thread (SQLite's own, every 1,000 WAL
pages, is off: it would run inside a commit on the event loop)."""
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
        """The journal's JSON encoder (:mod:`gatewayd.journal.records`)."""
        self._epoch = ""
        self._seq = 0
        self._conn: sqlite3.Connection | None = None
        self._held = 0
        """The journal's thread is using the connection (:meth:`_call`): the loop writes
        nothing meanwhile."""
        self._syncer: Syncer | None = None
        """Syncs the WAL after each batch's commit (``sync: full``; :mod:`.syncer`)."""
        self._walfd = -1
        self._inflight: deque[Pending] = deque()
        """Batches committed and waiting for their syncs, oldest first (:data:`SYNCS_AHEAD`)."""
        self._marks_at = 0.0
        """``time.monotonic()`` when done marks were last written."""
        self._since_checkpoint = 0
        self._checkpointer: sqlite3.Connection | None = None
        """The journal thread's own connection, for checkpoints (:meth:`_checkpoint`)."""
        self._started: list[int] = []
        """Redelivered seqs whose dispatch began, not yet counted in the file (:meth:`started`
        while the thread held the connection)."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[Item] = []
        self._commit: Commit | None = None
        self._done: list[int] = []
        """Done marks not written yet (:meth:`_write_marks`)."""
        self._carry: list[int] = []
        """Done marks whose write failed: written again with the next ones."""
        self._dead: list[Mark] = []
        self._busy = False
        """No batch may be written now (:meth:`_blocked`, or one is being written)."""
        self._retrying = False
        """A batch waits to be written again (a full disk, or the thread held the connection)."""
        self._handing: list[Item] | None = None
        """A synced batch whose posters were woken, delivered a turn later (:meth:`_written`)."""
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

    # -- the journal's thread -----------------------------------------------------------------

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as exc:  # a bug; the thread must live on for the next jobs
                log.exception("journal.job_failed", error=f"{type(exc).__name__}: {exc}")

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the journal's thread (after every job queued before it); the
        event loop writes nothing meanwhile (:meth:`_hold`)."""
        done = anyio.Event()
        box: list[Any] = []

        def finished(outcome: tuple[bool, Any]) -> None:
            box.append(outcome)
            done.set()

        self._hold(fn, finished)
        await done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _hold(
        self, fn: Callable[[sqlite3.Connection], T], then: Callable[[tuple[bool, Any]], None]
    ) -> None:
        """Run ``fn(conn)`` on the journal's thread, then ``then((ok, value or error))`` on
        the loop. Until then the loop leaves the connection to the thread: new batches wait
        (:meth:`_flush`), as they waited behind a query when the thread wrote them."""
        loop = self._loop
        assert loop is not None and self._thread is not None

        def finished(outcome: tuple[bool, Any]) -> None:
            self._held -= 1
            then(outcome)
            if not self._held:
                if self._started:
                    self._write_started()
                if not self._busy:
                    self._go_on()

        def job() -> None:
            try:
                assert self._conn is not None
                outcome: tuple[bool, Any] = (True, fn(self._conn))
            except BaseException as exc:
                outcome = (False, exc)
            loop.call_soon_threadsafe(finished, outcome)

        self._held += 1
        self._jobs.put(job)

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
            # The thread ends here: close() (the daemon's shutdown after the failed
            # start) must not hand it the closing job, which nobody would ever run.
            thread, self._thread = self._thread, None
            if thread is not None:
                await anyio.to_thread.run_sync(thread.join, 5)
            raise JournalError(f"cannot open the journal {self.path}: {value}") from value
        rows, self._dead_letters = value
        if self._walfd >= 0:
            self._syncer = Syncer(self._loop, self._walfd, self._synced, self._jobs.put)
            self._syncer.start()
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
        # The commits are synced by the syncer (sync: full), and checkpoints by this thread
        # (module docstring); the recovery above still ran with the configured setting.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        if self.sync == "full":
            # The file SQLite keeps while a connection is open (reading the file made it).
            self._walfd = os.open(f"{self.path}-wal", os.O_RDONLY | os.O_CLOEXEC)
            # Its directory entry too: SQLite syncs a new WAL's directory at the WAL's first
            # sync, which at NORMAL is the first checkpoint's; the syncer syncs the data only.
            fsync_dir(self.path.parent)
        self._checkpointer = sqlite3.connect(self.path, isolation_level=None, timeout=10)
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
            self._started.append(seq)
            if not self._held:
                self._write_started()

    def _write_started(self) -> None:
        """(Event loop, connection not held.) Count the dispatches begun (:meth:`started`):
        not synced by themselves; a crash of the process loses none (the kernel has them)."""
        conn = self._conn
        seqs, self._started = self._started, []
        if conn is None:
            return
        try:
            for seq in seqs:
                store.note_started(conn, seq)
        except sqlite3.Error as exc:
            log.warning("journal.start_count_failed", error=str(exc), events=len(seqs))

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
        """Write the batch being filled (event loop). ``committed``: the previous batch, synced,
        its posters woken, not yet delivered: delivered once this batch is committed and its
        sync requested, so that its dispatch runs while that sync waits for the disk."""
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._busy or self._held or not (self._batch or self._done or self._dead):
            if committed:
                self._deliver(committed)
            return
        batch, commit, dead = self._batch, self._commit, self._dead
        self._batch, self._commit, self._dead = [], None, []
        self._busy = True
        if committed:  # into the lanes first (order); dispatched after this commit and request
            self._deliver(committed)
        self._attempt(batch, commit, dead, None, 0.05)

    def _attempt(
        self,
        batch: list[Item],
        commit: Commit | None,
        dead: list[Mark],
        deadline: float | None,
        delay: float,
    ) -> None:
        """Commit ``batch`` and the dead marks (event loop, ``synchronous=NORMAL``), then wait
        for its sync (:meth:`_synced`); on a full disk, try again ``delay`` later, until
        ``deadline``. A batch one ``INSERT`` takes, with no dead marks, is that statement
        alone, in autocommit."""
        assert self._loop is not None
        if self._held:  # the thread took the connection during a full disk's wait
            self._retrying = True
            self._loop.call_later(delay, self._attempt, batch, commit, dead, deadline, delay)
            return
        conn = self._conn
        assert conn is not None
        error: JournalError | None = None
        insert: Insert | None = None
        try:
            if batch:
                insert = _rows(batch, self._base(), self._encode)
        except (TypeError, ValueError, RecursionError) as exc:  # a cycle, or nested too deep
            log.error("journal.unrecordable", error=str(exc), events=len(batch))
            error = JournalError(f"the event cannot be recorded: {exc}")
        try:
            if error is None:
                self._commit_rows(conn, insert, len(batch), dead)
        except (sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot take
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not store.is_full(exc):
                log.error("journal.write_failed", error=str(exc), events=len(batch))
                error = JournalError(f"the journal {self.path} could not record it: {exc}")
            else:
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
                if time.monotonic() < deadline:
                    self._retrying = True
                    later = min(delay * 2, 0.5)
                    loop = self._loop
                    loop.call_later(delay, self._attempt, batch, commit, dead, deadline, later)
                    return
                error = JournalFull(
                    f"the disk holding the journal {self.path.parent} is full: event not "
                    "accepted; free space there and post again"
                )
        self._retrying = False
        if error is None and self.full:
            self.full = False
            log.info("journal.space_recovered", path=str(self.path))
        if error is None and (batch or dead):
            self._since_checkpoint += 1
        syncer = self._syncer
        if error is None and batch and syncer is not None:
            self._inflight.append((batch, commit, dead))
            syncer.request()
            # With SYNCS_AHEAD > 1 the next batch may be committed while this one is synced.
            self._busy = self._blocked()
            self._after_commit(batch)
            return
        if error is None:
            self._after_commit(batch)
        self._written(batch, commit, dead, error)

    def _commit_rows(
        self, conn: sqlite3.Connection, insert: Insert | None, rows: int, dead: list[Mark]
    ) -> None:
        """Write a batch's ``rows`` (``insert``) and its dead marks in one transaction: a batch
        one ``INSERT`` takes, with no dead marks, is that statement alone, in autocommit."""
        if not dead and rows <= store.INSERT_ROWS:
            if insert is not None:
                insert(conn)
            return
        conn.execute("BEGIN IMMEDIATE")
        if insert is not None:
            insert(conn)
        self._apply_dead(conn, dead)
        conn.execute("COMMIT")

    def _after_commit(self, batch: list[Item]) -> None:
        """Done marks when they are due (:data:`DONE_DELAY_S`, or no batch written), a
        checkpoint when one is due (:data:`CHECKPOINT_EVERY`); while the sync waits."""
        if self._done or self._carry:
            now = time.monotonic()
            if not batch or now - self._marks_at >= DONE_DELAY_S:
                self._marks_at = now
                self._write_marks()
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._jobs.put(self._checkpoint)

    def _synced(self, error: OSError | None) -> None:
        """The sync of the batch in flight returned (:mod:`.syncer`): its posters wake, or, if
        it failed, get ``journal_error`` (their rows are deleted with the next done marks)."""
        batch, commit, dead = self._inflight.popleft()
        failure: JournalError | None = None
        if error is not None:
            log.error("journal.sync_failed", error=str(error), events=len(batch))
            failure = JournalError(f"the journal {self.path} could not be synced: {error}")
            self._carry.extend(item[3] for item in batch)
        self._written(batch, commit, dead, failure)

    def _checkpoint(self) -> None:
        """(The journal's thread.) Copy the WAL into the file, syncing both (``PASSIVE``), on a
        connection of its own: the loop goes on writing meanwhile (its cache stays valid, as
        a checkpoint changes no page's content), and the checkpoint's two fsyncs are no wait
        of the loop's."""
        conn = self._checkpointer
        if conn is None:
            return
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("journal.checkpoint_failed", error=str(exc))

    def _write_marks(self) -> None:
        """(Event loop.) Write the done marks, a statement of their own, not synced by itself.
        Marks that cannot be written (a full disk) are kept and tried again next time."""
        conn = self._conn
        assert conn is not None
        done = self._take_done()
        try:
            self._mark_done(conn, done)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not store.is_full(exc):
                log.warning("journal.marks_failed", error=str(exc), events=len(done))
            self._carry = done

    def _take_done(self) -> list[int]:
        """The marks kept from a failed write, then those queued since."""
        taken, self._done = self._done, []
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
        """A batch is durable (or refused): deliver (or refuse) and go on.

        A large batch (:data:`HAND_BACK_MIN`): its posters are woken first and the batch is
        delivered a loop turn later (:meth:`_deliver_after`), once they have appended their
        next events: those are committed first, and this batch is dispatched while their sync
        waits for the disk (:meth:`_flush`)."""
        handing, self._handing = self._handing, None
        if handing is not None:  # synced before this one: into the lanes first
            self._deliver(handing)
        self._busy = self._blocked()
        if error is None:
            if batch or dead:  # done marks alone: no commit of events
                self.commits += 1
            self.committed += len(batch)
            if len(batch) >= HAND_BACK_MIN:
                if commit is not None:
                    commit.finish()
                self._handing = batch
                self._busy = True  # until _deliver_after: the woken posters' events wait
                assert self._loop is not None
                self._loop.call_soon(self._deliver_after)
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

    def _deliver_after(self) -> None:
        batch, self._handing = self._handing, None
        if batch is None:
            return  # delivered already: the next batch's sync came first (_written)
        self._busy = self._blocked()
        if self._batch and not (self._busy or self._held):
            self._flush(batch)
        else:
            self._deliver(batch)
            self._go_on()

    def _blocked(self) -> bool:
        """No batch may be written now: one waits to be written again (a full disk), one waits
        for its delivery (:meth:`_deliver_after`), or :data:`SYNCS_AHEAD` wait for syncs."""
        return self._retrying or self._handing is not None or len(self._inflight) >= SYNCS_AHEAD

    def _go_on(self) -> None:
        if self._held:
            return  # the hold's end goes on (_hold)
        if self._batch:
            self._flush()
        elif self._done or self._dead:
            self._poke()
        elif self._idle is not None and not (self._busy or self._inflight):
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
        while self._busy or self._inflight or self._batch or self._scheduled or self._timer:
            self._idle = anyio.Event()
            if not self._busy:
                self._flush()
            with anyio.move_on_after(10):
                await self._idle.wait()
            if self._busy:  # the disk stays full: what is in flight is not waited for longer
                break
        if not (self._busy or self._inflight):
            dead, self._dead = self._dead, []
            await self._call(lambda conn: self._close_store(conn, dead))
        if self._syncer is not None:
            self._syncer.close()
            self._syncer = None
        if self._walfd >= 0:
            os.close(self._walfd)
            self._walfd = -1
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
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
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
    """What inserts the batch's rows (on the event loop, within the transaction).

    Built flat, a row's values extended in one step, with the common cases inline (an ASCII
    session key, an empty context, a context without the gateway's objects): this runs for
    every durable event on the path to its commit, 0.51 -> 0.35 us an event against tuples per
    row flattened afterwards, 0.17 with no context to encode
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
