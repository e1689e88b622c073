"""The durable journal: ``<state>/journal/events.db``, SQLite in WAL mode, with group commit.

Three parts, each in its own module, one way each:

* the event loop batches (:mod:`.group`): every event appended in one loop turn joins one
  batch, laid out flat and sent with the marks queued since as one write;
* the writer process commits (:mod:`.writer`, :mod:`.writes`): one transaction a write, on a
  connection of its own, with ``synchronous`` per ``gateway.queue.sync`` (``full``: the fsync
  is inside the commit), and answers; the batch's posters wake on the answer. It must run: the
  journal does not open without it;
* the journal's thread (:mod:`.thread`) opens and recovers the file (setting a damaged one
  aside), serves ``gatewayd events`` queries, checkpoints and closes.

The file deleted, replaced or overwritten under the running daemon: the writer answers the next
write :data:`~.writes.LOST` instead of OK (its events are refused, never acknowledged), the
journal says so (``journal.file_lost``, an error), and the thread puts a whole copy back from
its open connection (``journal.restored``; what was at the path set aside): every event
acknowledged before is in it, and the next events are written there.

Ids are ``<epoch>-<seq>``: the file's random epoch and the event's row number, so they never
repeat, even after a file is set aside. An event redelivered after a restart has its dispatch
counted in the file as it begins (:meth:`SqliteJournal.started`), so that one that keeps taking
the daemon down is dead-lettered (:func:`store.recover`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.journal import inspection, store
from gatewayd.journal.base import (
    Commit,
    DeadLetter,
    Deliver,
    HandOff,
    Item,
    Journal,
    Reject,
    Restore,
)
from gatewayd.journal.group import GroupCommit
from gatewayd.journal.records import BASE_KEYS
from gatewayd.journal.requests import parse_request
from gatewayd.journal.store import journal_path
from gatewayd.journal.thread import JournalThread, Restored
from gatewayd.journal.writer import Writer
from gatewayd.journal.writes import NO_ROWS

__all__ = ["SqliteJournal", "journal_path"]

log = structlog.get_logger("gatewayd.journal")


def _nothing(items: Sequence[Item]) -> None:
    """Where handed-off items go: this journal hands none off (it is no shared queue)."""


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
        self._base = base
        self._thread = JournalThread(path, sync)
        self._group = GroupCommit(
            path,
            base=base,
            retain_done=retain_done,
            full_wait_s=full_wait_s,
            checkpoint=self._thread.checkpoint,
            lost=self._file_lost,
        )
        self._writer: Writer | None = None
        """Commits the writes (:mod:`.writer`), from :meth:`open` to :meth:`close`."""
        self._epoch = ""
        self._seq = 0
        self.redelivered: set[int] = set()
        """Items redelivered at open (or retried) whose dispatch has not begun yet (see
        :meth:`started`)."""
        self._dead_letters = 0
        self._open = False
        self.lost: str | None = None
        """Why the file was last found not to be the journal (until it is restored)."""
        self.restores = 0

    def bind(
        self, deliver: Deliver, reject: Reject, restore: Restore, hand_off: HandOff = _nothing
    ) -> None:
        super().bind(deliver, reject, restore, hand_off)
        self._group.bind(deliver, reject)

    @property
    def commits(self) -> int:
        """Writes that committed events or dead letters."""
        return self._group.commits

    @property
    def committed(self) -> int:
        """Events committed."""
        return self._group.committed

    # -- open / recover -----------------------------------------------------------------------

    async def open(self) -> list[Item]:
        opened = await self._thread.open()
        self._epoch, self._seq = opened.epoch, opened.high_water
        self._dead_letters = opened.dead_letters
        loop = asyncio.get_running_loop()
        writer = Writer(loop, self.path, self.sync)
        try:
            writer.start()
        except BaseException:
            await self._thread.close()
            raise
        self._writer = writer
        self._group.start(loop, writer)
        self._open = True
        items = self._items(opened.rows)
        if items:
            log.info(
                "journal.recovered",
                pending=len(items),
                sessions=len({item[0].session_key for item in items}),
                path=str(self.path),
            )
        return items

    def _items(self, rows: Sequence[tuple[Any, ...]]) -> list[Item]:
        base = self._base()
        items: list[Item] = []
        now = time.time()
        pending = self._group.pending
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
            pending[seq] = now
            self.redelivered.add(seq)
            items.append((event, None, perf_counter(), seq, hooks))
        return items

    # -- the file lost under the daemon -------------------------------------------------------

    def _file_lost(self, problem: str) -> None:
        """The writer found the file not to be the journal any more (see the module docstring):
        stop it, and restore the file from the thread's connection."""
        self.lost = problem
        log.error(
            "journal.file_lost",
            path=str(self.path),
            problem=problem,
            pending=len(self._group.pending),
            note="events are refused (journal_error) until the journal is restored from the "
            "daemon's open copy; every event acknowledged before is in that copy",
            fix="leave <state>/journal to gatewayd while it runs",
        )
        # After the writer's answers being handed out now (this runs inside that loop).
        asyncio.get_running_loop().call_soon(self._begin_restore)

    def _begin_restore(self) -> None:
        if self._writer is not None:
            self._writer.stop()  # its connection is on the lost file; the next write starts one
        self._thread.restore(self._restored)

    def _restored(self, outcome: Restored) -> None:
        if outcome.error is not None:
            log.error(
                "journal.restore_failed",
                path=str(self.path),
                error=outcome.error,
                note="events are refused until gatewayd restarts",
                fix="see the error; restart gatewayd (what the queue holds is dispatched "
                "before, the rest is lost)",
            )
            self._group.restored(f"{self.lost}, and it could not be restored: {outcome.error}")
            return
        self.restores += 1
        self.lost = None
        log.warning(
            "journal.restored",
            path=str(self.path),
            pending=outcome.pending,
            set_aside=str(outcome.aside) if outcome.aside is not None else None,
        )
        self._group.restored()

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
        return self._group.add((event, ticket, posted, seq, only))

    def started(self, seq: int) -> None:
        """A redelivered item's dispatch begins: counted in the file, so that one whose
        dispatch keeps ending with the daemon is dead-lettered (:func:`store.recover`). Sent to
        the writer at once, a write of its own, not with the next batch: a handler that blocks
        the loop from here on would keep it from ever being sent. Not synced by itself; a crash
        of the daemon loses none (the writer, or the kernel, has it)."""
        if seq in self.redelivered:
            self.redelivered.discard(seq)
            self._group.send_alone(self._group.request(NO_ROWS, [], [], [], [seq]))

    def done(self, seq: int) -> None:
        self._group.done(seq)

    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        at = time.time()
        self._group.dead(
            seq, [(seq, hook, error, attempts, at) for hook, error, attempts in letters]
        )
        self._dead_letters += len(letters)

    # -- inspection ---------------------------------------------------------------------------

    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        action, args = parse_request(request)
        epoch = self._epoch
        call = self._thread.call
        if action == "list":
            events = await call(lambda c: inspection.list_events(c, epoch, **args))
            return {"events": events, "journal": self.stats()}
        if action == "show":
            event = await call(lambda c: inspection.show_event(c, epoch, args["id"]))
            if event is None:
                raise ValueError(f"no event {args['id']} in the journal (done and compacted?)")
            return {"event": event}
        if action == "retry":
            rows = await call(lambda c: inspection.retry_dead(c, epoch, args["ids"]))
            self._dead_letters = await call(store.dead_count)
            items = self._items(rows)
            self._restore(items)
            return {"retried": [item[0].id for item in items]}
        purged = await call(lambda c: inspection.purge(c, epoch, args["ids"]))
        self._dead_letters = await call(store.dead_count)
        return {"purged": purged}

    def stats(self) -> dict[str, Any]:
        group = self._group
        oldest = next(iter(group.pending.values()), None)
        return {
            "backend": self.backend,
            "path": str(self.path),
            "sync": self.sync,
            "size_bytes": store.file_size(self.path),
            "pending": len(group.pending),
            "dead_letters": self._dead_letters,
            "oldest_pending_age_s": round(time.time() - oldest, 3) if oldest else 0.0,
            "commits": group.commits,
            "events_per_commit": round(group.committed / group.commits, 2)
            if group.commits
            else 0.0,
            "refused": group.refused,
            "full": group.full,
            "retain_done": self.retain_done,
            "lost": self.lost,
            "restores": self.restores,
        }

    # -- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Write what is queued, stop the writer, checkpoint and close the file."""
        if not self._open:
            return
        self._open = False
        await self._group.settle()
        self._group.close()
        writer, self._writer = self._writer, None
        if writer is not None:  # first: the close's checkpoint needs its connection closed
            await writer.close()
        await self._thread.close()
