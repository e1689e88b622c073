"""The Redis Streams backend (``gateway.queue.backend: redis``): one queue shared by instances.

Every instance posts to and dispatches from the same Redis (docs/design.md section 8, "Many
instances"). A session's events go to one partition stream (:mod:`.redis_codec`); a partition is
read by the one instance holding its lease (:mod:`.redis_leases`), through the consumer group
``gatewayd``, so a session's events are dispatched by one instance at a time, in stream order.

Posting: events appended in one loop turn are sent as one pipeline of ``XADD`` (one batch in
flight at a time, so one instance's posts keep their order); the posters wake once Redis has
them and their queue slots are handed off (another instance may dispatch them). An event posted
with a ticket (its poster waits for the reply) is kept here by id: when this instance reads it
back it dispatches the poster's own object; when another instance does, that one sends the
reply to ``<ns>:reply:<poster>`` and this instance's reply reader finishes the ticket.

Consuming: one reader task ``XREADGROUP``\\s the owned, ready partitions (as many entries as
``gateway.queue.capacity`` leaves room for) and hands them to the queue's lanes. ``done`` and
``dead`` are acknowledged (``XACK``) in pipelined batches; acknowledged entries are trimmed
(``XTRIM MINID``). A partition this instance gains is first *resynced*: its whole pending list
(a dead owner's entries, or this instance's own after a reconnect) is claimed with
``XAUTOCLAIM`` and dispatched in order, before new entries are read.

Redis lost while running: producers wait up to ``gateway.queue.redis.waitMs`` (then get
``queue_unavailable``), the reader and the lease task retry with backoff (logged once as
``queue.redis_lost``, then ``queue.redis_back``), acknowledgements and replies are kept and sent
on reconnect, and every owned partition is resynced. ``status`` keeps serving from the last
snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
import structlog
from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.registry import DispatchReport
from gatewayd.journal import redis_codec as codec
from gatewayd.journal import redis_consumer as consumer
from gatewayd.journal.base import (
    Commit,
    DeadLetter,
    Item,
    Journal,
    JournalError,
    JournalFull,
    QueueUnavailable,
)
from gatewayd.journal.redis_consumer import BACKOFF, UNREACHABLE
from gatewayd.journal.redis_inspect import query_dead
from gatewayd.journal.redis_leases import Leases
from gatewayd.jsonenc import loads
from gatewayd.tickets import Ticket

if TYPE_CHECKING:
    from gatewayd.config import RedisQueueConfig

__all__ = ["RedisJournal"]

log = structlog.get_logger("gatewayd.queue")

REPLY_MAXLEN = 10_000
"""Entries a reply stream keeps at most (its reader deletes what it read)."""
REPLY_TTL_S = 3600
"""A reply stream nobody reads (its instance died) is deleted this long after its last reply."""


def _redis_url(url: str) -> tuple[str, str | None]:
    """The URL with ``GATEWAYD_REDIS_PASSWORD`` applied (as the client's password), and the
    URL as shown in logs and status (password hidden)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    shown = url
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        shown = urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    return shown, os.environ.get("GATEWAYD_REDIS_PASSWORD") or None


class RedisJournal(Journal):
    """See the module docstring."""

    backend = "redis"
    durable = True
    keeps_unheard = True  # the session's owner may be another instance, with other hooks

    def __init__(
        self, settings: RedisQueueConfig, *, base: Callable[[], dict[str, Any]], capacity: int
    ) -> None:
        self.settings = settings
        self.url, self._password = _redis_url(settings.url)
        self.keys = codec.Keys(settings.namespace)
        self.partitions = settings.partitions
        self.capacity = capacity
        self.instance = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._base = base
        self._client: Any = None
        self.leases: Leases | None = None
        self._n = 0
        self._seq = 0
        self._batch: list[Item] = []
        self._commit: Commit | None = None
        self._busy = False
        self._local: dict[str, tuple[HookEvent, Ticket]] = {}
        """Events posted here with a ticket, by id, until dispatched (here or elsewhere)."""
        self._inflight: dict[int, tuple[int, bytes, bytes]] = {}
        """seq -> (partition, entry id, raw entry) of every item handed to the lanes, not done."""
        self._held: defaultdict[int, set[bytes]] = defaultdict(set)
        self._acks: defaultdict[int, list[bytes]] = defaultdict(list)
        self._replies: list[tuple[str, str]] = []
        self._expiry: dict[str, float] = {}
        """Origin -> when its reply stream's TTL is set again (once a minute, not per reply)."""
        self._dead_out: list[tuple[str, str]] = []
        self._acking = False
        self._ready: set[int] = set()
        """Owned partitions resynced and being read."""
        self._draining: set[int] = set()
        self._reading: frozenset[int] = frozenset()
        """The partitions of the ``XREADGROUP`` under way (kept until it returned)."""
        self._stranded: set[int] = set()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._delivering = True
        self.connected = False
        self.lost_since: float | None = None
        self.reconnects = 0
        self.refused = 0
        self.posted = 0
        self.read = 0
        self.claimed = 0
        self._snapshot: dict[int, dict[str, Any]] = {}
        self._dead_letters = 0

    # -- connection ---------------------------------------------------------------------------

    async def open(self) -> list[Item]:
        options: dict[str, Any] = {
            "socket_connect_timeout": 2.0,
            "socket_timeout": 5.0,
            "retry": Retry(NoBackoff(), 0),
        }
        if self._password:
            options["password"] = self._password
        try:
            self._client = aioredis.Redis.from_url(self.settings.url, **options)
        except ValueError as exc:
            raise JournalError(
                f"gateway.queue.redis.url {self.url!r} is not a Redis URL ({exc}): use "
                "redis://host:port/db, rediss://... or unix:///path/redis.sock"
            ) from None
        try:
            await self._client.ping()
            await self._check_meta()
            await self._ensure_groups()
            self.leases = Leases(
                self._client, self.keys, self.instance, self.partitions, self.settings.lease_ms
            )
            self._up()
            await consumer.lease_round(self)  # take a share now: status shows it at once
        except (OSError, rex.ConnectionError, rex.TimeoutError) as exc:
            await self._drop_client()
            raise QueueUnavailable(
                f"cannot reach Redis at {self.url} ({type(exc).__name__}: {exc}); start "
                "redis-server there or fix gateway.queue.redis.url"
            ) from None
        except rex.RedisError as exc:  # refused: a key of the namespace holds something else
            await self._drop_client()
            raise JournalError(
                f"Redis at {self.url} refused the queue's setup ({exc}); check that the "
                f"namespace {self.keys.ns!r} (gateway.queue.redis.namespace) is gatewayd's alone"
            ) from None
        except JournalError:
            await self._drop_client()
            raise
        for coro in (consumer.maintain(self), consumer.reader(self), consumer.reply_reader(self)):
            self._spawn(coro)
        log.info(
            "queue.redis_open",
            url=self.url,
            instance=self.instance,
            partitions=self.partitions,
            owned=sorted(self.leases.owned),
        )
        return []

    async def _drop_client(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(TimeoutError, *UNREACHABLE):
                async with asyncio.timeout(2):
                    await client.aclose()

    async def _check_meta(self) -> None:
        pipe = self._client.pipeline(transaction=False)
        pipe.hsetnx(self.keys.meta, "partitions", self.partitions)
        pipe.hget(self.keys.meta, "partitions")
        _, raw = await pipe.execute()
        try:
            stored = int(raw)
        except (TypeError, ValueError):  # written by hand: a traceback at every start
            shown = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            raise JournalError(
                f"the Redis queue {self.keys.ns!r} at {self.url} has {shown!r} as its partition "
                f"count in {self.keys.meta}, not a number: set it to the count every instance "
                f"uses (HSET {self.keys.meta} partitions N), or delete it when no instance runs"
            ) from None
        if stored != self.partitions:
            raise JournalError(
                f"the Redis queue {self.keys.ns!r} at {self.url} has {stored} partitions, "
                f"this instance is set to {self.partitions}: set gateway.queue.redis.partitions "
                f"to {stored} (or use another gateway.queue.redis.namespace)"
            )

    async def _ensure_groups(self) -> None:
        pipe = self._client.pipeline(transaction=False)
        for partition in range(self.partitions):
            pipe.xgroup_create(self.keys.stream(partition), codec.GROUP, id="0", mkstream=True)
        for result in await pipe.execute(raise_on_error=False):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        name = getattr(coro, "__qualname__", None)  # what queue.task_failed names
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A task of the queue ended. Its readers and lease rounds handle what Redis can do to
        them; one that died anyway of an error is a bug that leaves partitions unread (or
        acks unsent): said loudly here, not only as asyncio's "Task exception was never
        retrieved" at exit."""
        self._tasks.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        log.error(
            "queue.task_failed",
            task=task.get_name(),
            error=f"{type(exc).__name__}: {exc}",
            exc_info=exc,
            fix="restart gatewayd to read the queue again, and report this as a bug",
        )

    def _up(self) -> None:
        if not self.connected and self.lost_since is not None:
            self.reconnects += 1
            log.info(
                "queue.redis_back",
                url=self.url,
                down_s=round(time.monotonic() - self.lost_since, 3),
            )
        self.connected = True
        self.lost_since = None

    def _down(self, exc: BaseException) -> None:
        if self.connected or self.lost_since is None:
            log.error(
                "queue.redis_lost",
                url=self.url,
                error=f"{type(exc).__name__}: {exc}",
                note="producers wait, dispatch of owned partitions stops; reconnecting",
                fix="bring Redis back (nothing accepted is lost)",
            )
            self.lost_since = time.monotonic()
        self.connected = False
        self._ready.clear()  # back: every owned partition is resynced before it is read

    # -- posting ------------------------------------------------------------------------------

    def next_id(self) -> str:
        self._n += 1
        return f"{self.instance}-{self._n}"

    def append(
        self, event: HookEvent, ticket: Any, posted: float, only: tuple[str, ...] | None = None
    ) -> Commit | None:
        event.id = self.next_id()
        if event.type == "gateway":  # lifecycle events stay with the instance they concern
            self._deliver([(event, ticket, posted, 0, only)])
            return None
        self._batch.append((event, ticket, posted, 0, only))
        if ticket is not None:
            self._local[event.id] = (event, ticket)
        commit = self._commit
        if commit is None:
            commit = self._commit = Commit()
        if not self._busy:
            self._busy = True
            asyncio.get_running_loop().call_soon(self._flush)
        return commit

    def _flush(self) -> None:
        batch, commit = self._batch, self._commit
        self._batch, self._commit = [], None
        if not batch or commit is None:
            self._busy = False
            return
        self._spawn(self._write(batch, commit))

    async def _write(self, batch: list[Item], commit: Commit) -> None:
        """Send one batch (retrying while Redis is unreachable, up to ``waitMs``)."""
        error: JournalError | None = None
        base = self._base()
        try:
            rows = [
                (
                    codec.partition_of(item[0].session_key, self.partitions),
                    codec.encode_event(
                        item[0], base, item[4], self.instance if item[1] is not None else None
                    ),
                )
                for item in batch
            ]
        except (TypeError, ValueError) as exc:
            rows, error = [], JournalError(f"the event cannot be recorded: {exc}")
        deadline = time.monotonic() + self.settings.wait_ms / 1000
        delay = BACKOFF[0]
        while error is None:
            try:
                pipe = self._client.pipeline(transaction=False)
                for partition, raw in rows:
                    pipe.xadd(self.keys.stream(partition), {"e": raw})
                await pipe.execute()
                self._up()
                break
            except UNREACHABLE as exc:
                self._down(exc)
                if time.monotonic() >= deadline:
                    error = QueueUnavailable(
                        f"Redis at {self.url} has been unreachable for "
                        f"{self.settings.wait_ms} ms (gateway.queue.redis.waitMs): event not "
                        "accepted; post again once it is back"
                    )
                    break
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF[1])
            except rex.ResponseError as exc:
                # Redis's "OOM ..." answer: the client raises it without the prefix.
                full = isinstance(exc, rex.OutOfMemoryError)
                log.error("queue.redis_refused", error=str(exc), events=len(rows))
                error = (JournalFull if full else JournalError)(
                    f"Redis at {self.url} refused the event ({exc})"
                    + ("; free memory there or raise its maxmemory" if full else "")
                )
            except Exception as exc:  # a bug: the posters hear of it, the queue goes on
                log.exception("queue.redis_write_failed", error=f"{type(exc).__name__}: {exc}")
                error = JournalError(f"the event could not be sent to Redis: {exc}")
        if error is None:
            self.posted += len(batch)
            self._hand_off(batch)
        else:
            self.refused += len(batch)
            for item in batch:
                self._local.pop(item[0].id, None)
            self._reject(batch, error)
        commit.finish(error)
        if self._batch:
            self._flush()
        else:
            self._busy = False

    # -- consuming ----------------------------------------------------------------------------

    # -- acknowledging and replying -----------------------------------------------------------

    def done(self, seq: int) -> None:
        entry = self._inflight.pop(seq, None)
        if entry is None:
            return
        partition, entry_id, _ = entry
        self._held[partition].discard(entry_id)
        self._acks[partition].append(entry_id)
        self._send_acks()
        self._wake.set()

    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        entry = self._inflight.get(seq)
        if entry is not None:
            raw = entry[2].decode("utf-8", "surrogatepass")
            self._dead_out.append((event.id, codec.dead_record(event, list(letters), raw)))
            self._dead_letters += 1
        self.done(seq)

    def _reply(self, origin: str, event: HookEvent, report: DispatchReport) -> None:
        raw = codec.encode_reply(event, (report[0], report[1], report[2]), self._base())
        self._replies.append((origin, raw))
        self._send_acks()

    def _send_acks(self) -> None:
        if not self._acking and (self._acks or self._replies or self._dead_out):
            self._acking = True
            self._spawn(self._ack_batch())

    async def _ack_batch(self) -> None:
        """One pipeline of acks, replies and dead letters; kept for later if Redis is gone."""
        await asyncio.sleep(0)  # what this loop turn adds rides along
        acks, replies, dead = self._acks, self._replies, self._dead_out
        self._acks, self._replies, self._dead_out = defaultdict(list), [], []
        try:
            pipe = self._client.pipeline(transaction=False)
            for event_id, record in dead:
                pipe.hset(self.keys.dead, event_id, record)
            for partition, ids in acks.items():
                if ids:
                    pipe.xack(self.keys.stream(partition), codec.GROUP, *ids)
            for origin, raw in replies:
                key = self.keys.reply(origin)
                pipe.xadd(key, {"r": raw}, maxlen=REPLY_MAXLEN, approximate=True)
            now = time.monotonic()
            for origin in {origin for origin, _ in replies}:  # a dead poster's stream goes
                if self._expiry.get(origin, 0.0) < now:
                    self._expiry[origin] = now + REPLY_TTL_S / 60
                    pipe.expire(self.keys.reply(origin), REPLY_TTL_S)
            await pipe.execute()
        except UNREACHABLE as exc:
            self._down(exc)
            for partition, ids in acks.items():
                self._acks[partition][:0] = ids
            self._replies[:0] = replies
            self._dead_out[:0] = dead
            self._acking = False
            return  # the lease task sends them again once Redis is back
        except Exception as exc:  # refused by Redis (its data lost?): those entries are gone
            log.exception("queue.redis_ack_failed", error=f"{type(exc).__name__}: {exc}")
        self._acking = False
        self._send_acks()
        self._wake.set()

    # -- leases -------------------------------------------------------------------------------

    # -- the rest of the interface ------------------------------------------------------------

    def stop_delivery(self) -> None:
        self._delivering = False
        self._wake.set()

    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        return await query_dead(self, request)

    def retry_raw(self, raw: str, only: tuple[str, ...]) -> tuple[int, str]:
        """A dead letter's entry for ``XADD`` again, limited to the hooks that failed."""
        record = loads(raw)
        record["only"] = list(only)
        record["posted"] = time.time()
        record.pop("reply", None)
        return codec.partition_of(record["session"], self.partitions), json.dumps(record)

    def stats(self) -> dict[str, Any]:
        leases = self.leases
        owned = sorted(leases.owned) if leases is not None else []
        return {
            "backend": self.backend,
            "url": self.url,
            "namespace": self.keys.ns,
            "instance": self.instance,
            "connected": self.connected,
            "down_s": round(time.monotonic() - self.lost_since, 3) if self.lost_since else 0.0,
            "instances": leases.live if leases is not None else 0,
            "partitions": self.partitions,
            "fair_share": leases.fair if leases is not None else 0,
            "lease_ms": self.settings.lease_ms,
            "owned": [
                {"partition": p, **self._snapshot.get(p, {"lag": None, "pending": None})}
                for p in owned
            ],
            "draining": sorted(self._draining),
            "pending": len(self._inflight),
            "waiting_replies": len(self._local),
            "posted": self.posted,
            "read": self.read,
            "claimed": self.claimed,
            "refused": self.refused,
            "reconnects": self.reconnects,
            "dead_letters": self._dead_letters,
        }

    async def close(self) -> None:
        """Send what is buffered, give the leases back (the others take over at once)."""
        self._delivering = False
        deadline = time.monotonic() + 5
        while (self._busy or self._acking or self._acks or self._replies) and (
            time.monotonic() < deadline and self._client is not None
        ):
            self._send_acks()
            await asyncio.sleep(0.01)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None and self.leases is not None and self.connected:
            try:
                async with asyncio.timeout(2):
                    await self.leases.leave()
                    await self._client.delete(self.keys.reply(self.instance))
            except (TimeoutError, rex.ConnectionError, rex.TimeoutError) as exc:
                log.warning("queue.redis_leave_failed", error=str(exc))
        await self._drop_client()
