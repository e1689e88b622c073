"""What one instance writes to the Redis queue, one batch at a time: events, replies, marks.

Everything the instance writes goes through its :class:`Outbox`, one batch in flight at a time
on a connection of its own (:class:`~gatewayd.journal.redis_link.Link`), so one instance's posts
keep their order and a batch is one write however much it carries:

* **events** (``XADD`` to their partitions): the events appended in one loop turn go in the
  batch sent at the end of that turn; their posters wake once Redis answered. A batch Redis
  cannot take is sent again with backoff for up to ``gateway.queue.redis.waitMs`` (the posters
  wait, then get ``queue_unavailable``); one sent again after its connection broke may be in
  Redis twice: one more delivery of the same ``event.id``;
* **replies** to other instances' tickets: one ``XADD`` per poster per batch, carrying every
  reply to that poster done since the last batch (a JSON array), sent at the end of the turn;
* **marks**: acknowledgements (``XACK``, one per stream with every entry id done since the last
  one) and dead letters (``HSET`` into ``<ns>:dead``) wait up to :data:`MARK_DELAY_S`, so that one
  ``XACK`` covers many events; they go at once for a partition being handed over and at close.
  A dead letter's entry is acknowledged only once its record is in Redis, by the next batch. A
  mark that was not sent (Redis gone) is kept and sent when Redis is back; one lost with a kill
  only means one more delivery.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from redis import exceptions as rex

from gatewayd.journal import redis_codec as codec
from gatewayd.journal.base import (
    Commit,
    HandOff,
    Item,
    JournalError,
    JournalFull,
    QueueUnavailable,
    Reject,
)
from gatewayd.journal.redis_link import UNREACHABLE, Command, Link

if TYPE_CHECKING:
    from gatewayd.config import RedisQueueConfig

log = structlog.get_logger("gatewayd.queue")

MARK_DELAY_S = 0.1
"""How long an acknowledgement or a dead letter waits for others to share its batch (one
``XACK`` per stream: the longer, the more entries each carries, and the more are delivered
again after a kill)."""
MARKS_MAX = 1024
"""Marks that go at once, without waiting for :data:`MARK_DELAY_S`."""
REPLY_MAXLEN = 10_000
"""Entries a reply stream keeps at most (its reader trims what it read every lease round)."""
BACKOFF = (0.05, 2.0)
"""First and longest wait between attempts while Redis is unreachable (doubling)."""

DeadOut = tuple[str, bytes, str, str]
"""``(stream, entry id, event id, dead-letter record)``."""


class Owner(Protocol):
    """What the outbox needs of the queue it writes for (:class:`~gatewayd.journal.redis_state.
    RedisState`)."""

    instance: str
    partitions: int
    streams: list[str]
    keys: codec.Keys
    settings: RedisQueueConfig
    url: str
    connected: bool
    posted: int
    refused: int
    _local: dict[str, Item]
    _base: Callable[[], dict[str, Any]]
    _hand_off: HandOff
    _reject: Reject

    def _up(self) -> None: ...

    def _down(self, exc: BaseException) -> None: ...

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...


class Outbox:
    """What the instance has to write; see the module docstring. Use on the event loop only."""

    def __init__(self, journal: Owner) -> None:
        self.j = journal
        self.link: Link | None = None
        """Its connection (made by the journal's ``open``)."""
        self.events: list[Item] = []
        self.commit: Commit | None = None
        self.replies: defaultdict[str, list[str]] = defaultdict(list)
        self.acks: defaultdict[str, list[bytes]] = defaultdict(list)
        """Stream -> entry ids to acknowledge."""
        self.dead: list[DeadOut] = []
        self.marks = 0
        self.sending = False
        self.closing = False
        """Marks go at once (shutdown)."""
        self._urgent = False
        self._soon = False
        self._timer: asyncio.TimerHandle | None = None

    # -- what is queued ---------------------------------------------------------------------

    def post(self, item: Item) -> Commit:
        """Queue an event for the batch sent at the end of this loop turn."""
        self.events.append(item)
        commit = self.commit
        if commit is None:
            commit = self.commit = Commit()
        self._schedule()
        return commit

    def reply(self, origin: str, raw: str) -> None:
        self.replies[origin].append(raw)
        self._schedule()

    def ack(self, stream: str, entry_id: bytes, urgent: bool = False) -> None:
        """Acknowledge an entry within :data:`MARK_DELAY_S` (``urgent``: in the next batch)."""
        self.acks[stream].append(entry_id)
        self._marked(urgent)

    def dead_letter(self, letter: DeadOut) -> None:
        self.dead.append(letter)
        self._marked(False)

    def unsettled(self, stream: str) -> bool:
        """Marks of ``stream`` not yet in Redis (its hand-over waits for them)."""
        return stream in self.acks or any(d[0] == stream for d in self.dead)

    @property
    def idle(self) -> bool:
        return not (self.sending or self.events or self.replies or self.acks or self.dead)

    def _marked(self, urgent: bool) -> None:
        self.marks += 1
        if urgent or self.closing or self.marks >= MARKS_MAX:
            self._urgent = True
            self._schedule()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(MARK_DELAY_S, self._marks_due)

    def _marks_due(self) -> None:
        self._timer = None
        self._urgent = True
        self._schedule()

    def flush_marks(self) -> None:
        """Send the marks now (Redis back, a hand-over, a shutdown)."""
        if self.acks or self.dead:
            self._urgent = True
            self._schedule()

    def wake(self) -> None:
        """Redis is back: send what waited for it."""
        self.flush_marks()
        if self.replies:
            self._schedule()

    def _schedule(self) -> None:
        if not self._soon and not self.sending:
            self._soon = True
            asyncio.get_running_loop().call_soon(self._flush)

    # -- sending ----------------------------------------------------------------------------

    def _flush(self) -> None:
        self._soon = False
        if self.sending:
            return  # the batch under way sends the rest when it returns
        events, commit = self.events, self.commit
        self.events, self.commit = [], None
        marks = self._urgent and bool(self.acks or self.dead)
        if not events and not self.j.connected:
            return  # replies and marks wait for Redis to be back (wake())
        if not (events or self.replies or marks):
            return
        self.sending = True
        self.j._spawn(self._send(events, commit, marks))

    def _take_marks(self) -> tuple[dict[str, list[bytes]], list[DeadOut]]:
        acks, dead = self.acks, self.dead
        self.acks, self.dead, self.marks, self._urgent = defaultdict(list), [], 0, False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return acks, dead

    def _keep(
        self, acks: dict[str, list[bytes]], dead: list[DeadOut], replies: dict[str, list[str]]
    ) -> None:
        """Put back what a batch that did not reach Redis carried, ahead of what came since."""
        for stream, ids in acks.items():
            self.acks[stream][:0] = ids
        self.dead[:0] = dead
        for origin, raws in replies.items():
            self.replies[origin][:0] = raws
        self.marks += len(dead) + sum(map(len, acks.values()))

    async def _send(self, batch: list[Item], commit: Commit | None, marks: bool) -> None:
        """Send one batch: the events (retried while Redis is unreachable, up to ``waitMs``),
        with the replies and the marks due."""
        j, link = self.j, self.link
        assert link is not None
        error: JournalError | None = None
        rows: list[Command] = []
        base = j._base()
        try:
            for event, ticket, _, _, only in batch:
                raw = codec.encode_event(event, base, only, j.instance if ticket else None)
                partition = codec.partition_of(event.session_key, j.partitions)
                rows.append(("XADD", j.streams[partition], "*", "e", raw))
        except (TypeError, ValueError) as exc:
            rows, error = [], JournalError(f"the event cannot be recorded: {exc}")
        deadline = time.monotonic() + j.settings.wait_ms / 1000
        delay = BACKOFF[0]
        while True:
            replies, self.replies = self.replies, defaultdict(list)
            acks, dead = self._take_marks() if marks else ({}, [])
            commands: list[Command] = [("HSET", j.keys.dead, d[2], d[3]) for d in dead]
            commands += [("XACK", stream, codec.GROUP, *ids) for stream, ids in acks.items()]
            commands += [
                ("XADD", j.keys.reply(origin), "MAXLEN", "~", REPLY_MAXLEN, "*", "r",
                 raws[0] if len(raws) == 1 else f"[{','.join(raws)}]")
                for origin, raws in replies.items()
            ]  # fmt: skip
            try:
                results = await link.execute(commands + rows)
            except UNREACHABLE as exc:
                j._down(exc)
                self._keep(acks, dead, replies)  # sent when Redis is back
                marks = False
                if not rows or error is not None:
                    break
                if time.monotonic() >= deadline:
                    error = QueueUnavailable(
                        f"Redis at {j.url} has been unreachable for {j.settings.wait_ms} ms "
                        "(gateway.queue.redis.waitMs): event not accepted; post again once "
                        "it is back"
                    )
                    break
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF[1])
                continue
            except Exception as exc:  # a bug: the posters hear of it, the outbox goes on
                log.exception("queue.redis_write_failed", error=f"{type(exc).__name__}: {exc}")
                self._keep(acks, dead, replies)
                error = JournalError(f"the event could not be sent to Redis: {exc}")
                break
            j._up()
            error = self._answered(results, len(commands), dead) or error
            break
        if batch:
            self._settle(batch, commit, error)
        self.sending = False
        if self.events or self.replies or (self._urgent and (self.acks or self.dead)):
            self._flush()

    def _answered(self, results: list[Any], marks: int, dead: list[DeadOut]) -> JournalError | None:
        """Look at a batch's answers: a dead letter in Redis gets its entry acknowledged, one
        refused is kept for the next batch; a refused event refuses the batch's events."""
        for i, result in enumerate(results[:marks]):
            if not isinstance(result, Exception):
                if i < len(dead):
                    self.ack(dead[i][0], dead[i][1])
                continue
            if i < len(dead):
                self.dead.append(dead[i])  # its entry stays pending meanwhile
            what = "dead letter" if i < len(dead) else "acknowledgement or reply"
            log.error("queue.redis_ack_failed", what=what, error=str(result))
        refused = next((r for r in results[marks:] if isinstance(r, Exception)), None)
        if refused is None:
            return None
        # Redis's "OOM ..." answer: the client raises it without the prefix.
        full = isinstance(refused, rex.OutOfMemoryError)
        log.error("queue.redis_refused", error=str(refused), events=len(results) - marks)
        return (JournalFull if full else JournalError)(
            f"Redis at {self.j.url} refused the event ({refused})"
            + ("; free memory there or raise its maxmemory" if full else "")
        )

    def _settle(self, batch: list[Item], commit: Commit | None, error: JournalError | None) -> None:
        j = self.j
        if error is None:
            j.posted += len(batch)
            j._hand_off(batch)
        else:
            j.refused += len(batch)
            for item in batch:
                j._local.pop(item[0].id, None)
            j._reject(batch, error)
        if commit is not None:
            commit.finish(error)

    async def drain(self, seconds: float) -> None:
        """Send everything queued (the marks at once) within ``seconds`` while Redis answers."""
        self.closing = True
        deadline = time.monotonic() + seconds
        while not self.idle and time.monotonic() < deadline and self.j.connected:
            self.flush_marks()
            await asyncio.sleep(0.01)
