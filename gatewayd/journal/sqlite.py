"""The durable journal: ``<state>/journal/events.db``, SQLite in WAL mode, with group commit.

Every event appended in the same loop tick joins one batch. The event loop lays the batch's
rows out flat (its events' contexts encoded as JSON) and sends them, with the done and dead
marks queued since, to the journal's writer (:mod:`.writer`): a helper process that commits them
in one transaction on a connection of its own (:mod:`.writes`), with ``synchronous`` per
``gateway.queue.sync`` (``full``: the fsync is inside the commit), and answers. The batch's
posters wake on the answer. One batch is with the writer at a time; the next fills meanwhile,
so under load one commit carries many events and the batch size follows the load by itself.
A batch's events are delivered to the queue's lanes in append order once it is written: at
once, or, for a large batch, once its woken posters' next events are sent to the writer, so
that its dispatch runs while the writer commits those.

Before (issue 18, session 8) the loop committed each batch on its own connection at
``synchronous=NORMAL`` and the helper only ``fdatasync``ed the ``-wal``: 45-90 us of the loop's
CPU a commit (the WAL frames' ``pwrite``s, ~6 ``fcntl`` locks, binding) and the loop saturated
(bench/NOTES.md, issue 18, session 9). That path remains the fallback: if the writer cannot
start or goes away (``journal.writer_lost``), the loop commits (:meth:`SqliteJournal._write_here`)
and the journal's thread syncs.

The journal's thread (``gatewayd-journal``) opens and recovers the file, serves ``gatewayd
events`` queries, checkpoints and closes; while it uses its connection the loop sends no new
batch (events wait, as behind any write); the writer's connection waits for SQLite's write lock
(``busy_timeout``) when a query writes (``retry``, ``purge``).

Checkpoints: SQLite's automatic one would run inside a commit (with two fsyncs), so it is off;
the thread checkpoints (``PASSIVE``, on a connection of its own, while the writer goes on) every
:data:`CHECKPOINT_EVERY` commits, and the connection that commits (the writer's, or the loop's
without it) catches up after its next write, so that the WAL starts over.

``done``/``dead`` marks are not waited for: done marks go with a batch at most every
:data:`DONE_DELAY_S` (or on their own that long after the last batch); dead marks ride along
with the next batch. Neither is synced by itself: the next commit, a checkpoint or the close's
syncs them. One lost to a crash or a power cut means that event is dispatched again
(at-least-once).

A full disk: the batch is written again with backoff for up to ``gateway.queue.fullWaitMs``
while its posters wait (and, the queue being bounded, new posters wait behind them), then its
posters get :class:`JournalFull` (``journal_full``). SQLite rolls the failed transaction back,
so the file stays whole. Any other failed write refuses the batch's events (``journal_error``;
rows in the file all the same are deleted with the next marks). A damaged file found at start
is set aside (:func:`store.set_aside`) and a fresh one created; ``journal.set_aside`` names it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
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

from gatewayd.atomic import fsync_dir
from gatewayd.hooks.events import HookEvent
from gatewayd.journal import store, writes
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
from gatewayd.journal.writer import Answered, Writer
from gatewayd.journal.writes import NO_ROWS, SHARED_ROWS, Mark

__all__ = ["SqliteJournal", "journal_path"]

log = structlog.get_logger("gatewayd.journal")

T = TypeVar("T")
DONE_DELAY_S = 0.02
"""Done marks go with a batch at most this often while batches follow one another (fewer
``DELETE``s for the writer, fewer WAL pages to sync), and this long after the last batch when
none follows."""
HAND_BACK_MIN = 32
"""A written batch of at least this many events is dispatched after its woken posters' next
events are sent to the writer, while it commits them (:meth:`SqliteJournal._written`); a
smaller one at once (a trigger at a low rate is not made to wait for the next batch)."""
HELD_RETRY_S = 0.01
"""Without the writer process: how soon a write waiting for the journal's thread to let go of
the connection is tried again (:meth:`SqliteJournal._write_here`)."""
CHECKPOINT_EVERY = 256
"""Commits between two checkpoints by the journal's thread (SQLite's own, every 1,000 WAL
pages, is off: it would run inside a commit, with two fsyncs the batch's posters would wait
for)."""
TRIM_EVERY = 1024
"""Done marks between two trims of the retained done events (``retainDone`` > 0)."""


class Write:
    """A batch on its way to the file (:meth:`SqliteJournal._write`): its items, its commit,
    the marks sent with it, the writer's request, and its full-disk retry's state."""

    __slots__ = ("batch", "commit", "dead", "deadline", "delay", "done", "request")

    def __init__(
        self,
        batch: list[Item],
        commit: Commit | None,
        dead: list[Mark],
        done: list[int],
        request: writes.Request,
    ) -> None:
        self.batch = batch
        self.commit = commit
        self.dead = dead
        self.done = done
        self.request = request
        self.deadline: float | None = None
        """``time.monotonic()`` after which a full disk refuses it (set at the first)."""
        self.delay = 0.05
        """Before the next try on a full disk."""


def _caught_up(outcome: tuple[bool, Any]) -> None:
    """A catch-up on the loop's connection ended (:meth:`SqliteJournal._write_here`): nothing
    to do, :func:`.writes.catch_up` never raises (its errors are the next checkpoint's)."""


def _start_counted(answer: writes.Answer) -> None:
    """The writer's answer to a start count (:meth:`SqliteJournal.started`)."""
    code, error, marks_error = answer
    if code != writes.OK or marks_error is not None:
        log.warning("journal.start_count_failed", error=marks_error or error)


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
        """The journal's thread is using the connection (:meth:`_call`): the loop sends no new
        batch meanwhile (and, without the writer process, writes nothing)."""
        self._writer: Writer | None = None
        """Writes the batches and marks (:mod:`.writer`), from :meth:`open` to :meth:`close`."""
        self._walfd = -1
        """The ``-wal`` file (``sync: full``), synced by the journal's thread after the loop's
        commits when the writer process is gone (:meth:`_write_here`)."""
        self._writing: Write | None = None
        """The batch with the writer, or waiting to be sent again (a full disk)."""
        self._marks_at = 0.0
        """``time.monotonic()`` when done marks were last written."""
        self._since_checkpoint = 0
        self._checkpointer: sqlite3.Connection | None = None
        """The journal thread's own connection, for checkpoints (:meth:`_checkpoint`)."""
        self._catch_up = False
        """The thread's checkpoint ended: the writer's next write finishes it after its
        answer (:func:`.writes.catch_up`; without the writer process, :meth:`_write_here`)."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[Item] = []
        self._commit: Commit | None = None
        self._done: list[int] = []
        """Done marks not sent to the writer yet (:meth:`_write`)."""
        self._carry: list[int] = []
        """Done marks whose write failed: written again with the next ones."""
        self._dead: list[Mark] = []
        self._busy = False
        """No batch may be written now (:meth:`_blocked`)."""
        self._handing: list[Item] | None = None
        """A written batch whose posters were woken, delivered a turn later (:meth:`_written`)."""
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
            if not self._held and not self._busy:
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
        self._writer = Writer(self._loop, self.path, self.sync, self._write_here)
        self._writer.start()
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
            recovered = store.recover(conn, store.pending_rows(conn))
            rows = recovered.rows
            if recovered.poisoned:
                log.error(
                    "journal.poisoned",
                    events=recovered.poisoned,
                    path=str(self.path),
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
                    path=str(self.path),
                    note="dead-lettered, not dispatched: their rows cannot be events again",
                    fix="gatewayd events list --state dead; gatewayd events purge ID",
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
        # The writer process commits with the configured setting; when the loop commits on this
        # connection instead (_write_here), the journal's thread syncs (sync: full), and
        # checkpoints (module docstring). The recovery above ran with the configured setting.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        if self.sync == "full":
            # The file SQLite keeps while a connection is open (reading the file made it).
            self._walfd = os.open(f"{self.path}-wal", os.O_RDONLY | os.O_CLOEXEC)
            # Its directory entry too: SQLite syncs a new WAL's directory at the first sync of
            # the connection that created it (this one: at NORMAL, the first checkpoint's);
            # the writer's connection, and _write_here, sync its data only.
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
        for seq, session, etype, action, ts, context, hooks in rows:  # store.decode_row's
            event = HookEvent(
                type=etype,
                action=action,
                session_key=session,
                created=ts,
                # The base first: a stored workspaceDir is another agent's (hooks/agents.py).
                context={**{k: base[k] for k in BASE_KEYS if k in base}, **context},
            )
            event.id = f"{self._epoch}-{seq}"
            self._pending[seq] = now
            self.redelivered.add(seq)
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
        dispatch keeps ending with the daemon is dead-lettered (:func:`store.recover`). Sent to
        the writer at once, a write of its own, not with the next batch: a handler that blocks
        the loop from here on would keep it from ever being sent. Not synced by itself; a crash
        of the daemon loses none (the writer, or the kernel, has it)."""
        if seq in self.redelivered:
            self.redelivered.discard(seq)
            if self._writer is not None:
                self._writer.send(self._request(NO_ROWS, [], [], [], [seq]), _start_counted)

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
        """Write the batch being filled (event loop). ``committed``: the previous batch,
        written, its posters woken, not yet delivered: delivered once this batch is sent to the
        writer, so that its dispatch runs while the writer commits (and syncs) this one."""
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
        if committed:  # into the lanes first (order); dispatched while this batch is written
            self._deliver(committed)
        self._write(batch, commit, dead)

    def _write(self, batch: list[Item], commit: Commit | None, dead: list[Mark]) -> None:
        """Send ``batch``, the dead marks and the done marks when they are due
        (:data:`DONE_DELAY_S`, or no batch) to the writer, as one :class:`Write`; its answer
        comes to :meth:`_answered`. The context JSON is encoded here, on the loop: an event
        that cannot be recorded is refused before anything is written."""
        rows: tuple[int, list[Any]] = (NO_ROWS, [])
        if batch:
            try:
                rows = _rows(batch, self._base(), self._encode)
            except (TypeError, ValueError, RecursionError) as exc:  # a cycle, or nested too deep
                log.error("journal.unrecordable", error=str(exc), events=len(batch))
                self._dead[:0] = dead  # written with the next write
                self._written(batch, commit, JournalError(f"the event cannot be recorded: {exc}"))
                return
        done: list[int] = []
        if self._done or self._carry:
            now = time.monotonic()
            if not batch or now - self._marks_at >= DONE_DELAY_S:
                self._marks_at = now
                done = self._take_done()
        write = Write(batch, commit, dead, done, self._request(*rows, done, dead, []))
        self._writing = write
        self._busy = True
        self._send(write)

    def _request(
        self, rows: int, values: list[Any], done: list[int], dead: list[Mark], started: list[int]
    ) -> writes.Request:
        """The writer's request (:data:`.writes.Request`); done marks delete the rows, or with
        ``retainDone`` mark them done and now and then trim the oldest done ones."""
        catch_up, self._catch_up = self._catch_up, False
        if not (self.retain_done and done):
            return (rows, values, done, 0.0, 0, dead, started, catch_up)
        self._trim_countdown -= len(done)
        trim = 0
        if self._trim_countdown <= 0:
            self._trim_countdown = TRIM_EVERY
            trim = self.retain_done
        return (rows, values, done, time.time(), trim, dead, started, catch_up)

    def _take_done(self) -> list[int]:
        """The marks kept from a failed write, then those queued since."""
        taken, self._done = self._done, []
        if self._carry:
            taken[:0] = self._carry
            self._carry = []
        return taken

    def _send(self, write: Write) -> None:
        writer = self._writer
        if writer is None:
            return  # closed while a full disk's retry waited: the close gave up on it
        writer.send(write.request, functools.partial(self._answered, write))

    def _answered(self, write: Write, answer: writes.Answer) -> None:
        """The writer answered ``write``: deliver its batch (:meth:`_written`), wait and try
        again on a full disk (:meth:`_full_wait`), or refuse it. Marks of a write that failed,
        or that were rolled back alone, are kept for the next one."""
        code, message, marks_error = answer
        error: JournalError | None = None
        if code == store.FULL:
            if self._full_wait(write, message):
                return
            error = JournalFull(
                f"the disk holding the journal {self.path.parent} is full: event not "
                "accepted; free space there and post again"
            )
        elif code != writes.OK:
            log.error("journal.write_failed", error=message, events=len(write.batch))
            error = JournalError(f"the journal {self.path} could not record it: {message}")
        self._writing = None
        if error is not None:
            # Rows in the file all the same (the loop's commit, then its sync failed, when it
            # writes: _write_here) are deleted with the next marks: a restart does not run them.
            self._carry[:0] = [*write.done, *(item[3] for item in write.batch)]
            self._dead[:0] = write.dead
        else:
            if self.full:
                self.full = False
                log.info("journal.space_recovered", path=str(self.path))
            if marks_error is not None:
                log.warning("journal.marks_failed", error=marks_error, events=len(write.done))
                self._carry[:0] = write.done
                self._dead[:0] = write.dead
            if write.batch or write.dead:
                self.commits += 1
                self._since_checkpoint += 1
                if self._since_checkpoint >= CHECKPOINT_EVERY:
                    self._since_checkpoint = 0
                    self._jobs.put(self._checkpoint)
        self._written(write.batch, write.commit, error)

    def _full_wait(self, write: Write, message: str) -> bool:
        """A full disk: True when ``write`` is sent again later (backoff doubling to 0.5 s)
        because its deadline (``fullWaitMs`` after the first failure; none for marks alone)
        is not reached; its posters wait meanwhile, and no other batch is written."""
        now = time.monotonic()
        if write.deadline is None:
            write.deadline = now + (self.full_wait_s if write.batch else 0)
            if not self.full:
                log.error(
                    "journal.full",
                    path=str(self.path),
                    error=message,
                    waiting_ms=round(self.full_wait_s * 1000),
                    fix="free space on the journal's filesystem",
                )
            self.full = True
        if now >= write.deadline:
            return False
        assert self._loop is not None
        self._loop.call_later(write.delay, self._send, write)
        write.delay = min(write.delay * 2, 0.5)
        return True

    def _write_here(self, request: writes.Request, answered: Answered, again: bool) -> None:
        """(Event loop: the writer process is gone, or never started.) Write ``request`` on
        the loop's connection (``synchronous=NORMAL``); with ``sync: full`` the journal's
        thread ``fdatasync``s the WAL before ``answered``, what ``FULL`` adds in WAL mode, and
        then, when the request carries the catch-up, checkpoints on that connection
        (:func:`.writes.catch_up`), as the writer would have.
        ``again``: the writer went away before answering it, and may have committed it."""
        loop = self._loop
        assert loop is not None
        if self._held:  # the thread uses the connection: after it
            loop.call_later(HELD_RETRY_S, self._write_here, request, answered, again)
            return
        conn = self._conn
        assert conn is not None
        if not again:
            answer = writes.apply(conn, request)
        elif writes.committed(conn, request):
            answer = (writes.OK, "", None)
        else:
            answer = writes.apply(conn, writes.again(request))
        fd = self._walfd
        if answer[0] == writes.OK and fd >= 0:

            def sync() -> None:
                outcome = answer
                try:
                    os.fdatasync(fd)
                except OSError as exc:
                    log.error("journal.sync_failed", error=str(exc))
                    outcome = (writes.FAILED, f"cannot sync it: {exc}", None)
                loop.call_soon_threadsafe(answered, outcome)

            self._jobs.put(sync)
        else:
            loop.call_soon(answered, answer)
        if request[7]:
            # What the writer process does after answering (writes.serve): without it the WAL
            # grows by every commit's frames under load here too. On the journal's thread, after
            # the sync queued above (the posters do not wait for it), with the connection held:
            # the loop commits nothing meanwhile, so the checkpoint ends with the WAL copied.
            self._hold(writes.catch_up, _caught_up)

    def _checkpoint(self) -> None:
        """(The journal's thread.) Copy the WAL into the file, syncing both (``PASSIVE``), on a
        connection of its own: the writer goes on writing meanwhile, and the checkpoint's two
        fsyncs are no wait of the loop's or the writer's. The writer then copies what was
        committed meanwhile, so that the WAL starts over (:func:`.writes.catch_up`)."""
        conn = self._checkpointer
        if conn is None:
            return
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("journal.checkpoint_failed", error=str(exc))
            return
        assert self._loop is not None
        self._loop.call_soon_threadsafe(setattr, self, "_catch_up", True)

    def _written(
        self, batch: list[Item], commit: Commit | None, error: JournalError | None
    ) -> None:
        """A batch is durable (or refused): deliver (or refuse) and go on.

        A large batch (:data:`HAND_BACK_MIN`): its posters are woken first and the batch is
        delivered a loop turn later (:meth:`_deliver_after`), once they have appended their
        next events: those are sent to the writer first, and this batch is dispatched while
        the writer commits them (:meth:`_flush`)."""
        handing, self._handing = self._handing, None
        if handing is not None:  # written before this one: into the lanes first
            self._deliver(handing)
        self._busy = self._blocked()
        if error is None:
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
            if batch:
                self._reject(batch, error)
        if commit is not None:
            commit.finish(error)
        self._go_on()

    def _deliver_after(self) -> None:
        batch, self._handing = self._handing, None
        if batch is None:
            return  # delivered already: the next batch's answer came first (_written)
        self._busy = self._blocked()
        if self._batch and not (self._busy or self._held):
            self._flush(batch)
        else:
            self._deliver(batch)
            self._go_on()

    def _blocked(self) -> bool:
        """No batch may be written now: one is being written (or waits to be written again,
        a full disk), or one waits for its delivery (:meth:`_deliver_after`)."""
        return self._writing is not None or self._handing is not None

    def _go_on(self) -> None:
        if self._held:
            return  # the hold's end goes on (_hold)
        if self._batch:
            self._flush()
        elif self._done or self._dead:
            self._poke()
        elif self._idle is not None and not self._busy:
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
        writer, self._writer = self._writer, None
        if writer is not None:  # first: the close's checkpoint needs its connection closed
            await writer.close()
        if not self._busy:
            dead, self._dead = self._dead, []
            await self._call(lambda conn: self._close_store(conn, dead))
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
            code, error, marks_error = writes.apply(
                conn, self._request(NO_ROWS, [], done, dead, [])
            )
            if code != writes.OK or marks_error is not None:
                log.warning(
                    "journal.close_marks_lost", error=marks_error or error, events=len(done)
                )
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


def _rows(
    batch: Sequence[Item], base: dict[str, Any], encode: Callable[[Any], str]
) -> tuple[int, list[Any]]:
    """The batch's rows for the writer (:data:`.writes.Request`): how they are bound, and their
    values laid end to end (on the event loop).

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
        return len(store.EVENT_COLUMNS) + 1, [value for row in rows for value in row]
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
        return SHARED_ROWS, values
    return len(store.EVENT_COLUMNS), values
