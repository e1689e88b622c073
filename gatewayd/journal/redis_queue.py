"""The Redis Streams backend (``gateway.queue.backend: redis``): one queue shared by instances.

Every instance posts to and dispatches from the same Redis (docs/design.md section 8.1). A
session's events go to one partition stream (:mod:`.redis_codec`); a partition is read by the one
instance holding its lease (:mod:`.redis_leases`), through the consumer group ``gatewayd``, so a
session's events are dispatched by one instance at a time, in stream order.

The journal is built on the state its parts share (:mod:`.redis_state`). Posting, replies and
acknowledgements go through the instance's outbox (:mod:`.redis_outbox`):
one batch in flight at a time, each batch one write. An event posted with a ticket (its poster
waits for the reply) is kept here by id: when this instance reads it back it dispatches the
poster's own object and the reply never leaves the process; when another instance does, that one
sends the reply to ``<ns>:reply:<poster>``, which this instance reads with its partitions.

Consuming (:mod:`.redis_consumer`): one reader task ``XREADGROUP``\\s the owned, ready partitions
and this instance's reply stream in one blocking read and hands the entries to the queue's lanes;
a partition this instance gains is first *resynced*: its whole pending list (a dead owner's
entries, or this instance's own after a reconnect) is claimed with ``XAUTOCLAIM`` and dispatched
in order, before new entries are read.

Timeouts are per batch (:mod:`.redis_link`), not per command. Redis lost while running: producers
wait up to ``gateway.queue.redis.waitMs`` (then get ``queue_unavailable``), the reader and the
lease task retry with backoff (logged once as ``queue.redis_lost``, then ``queue.redis_back``),
replies and marks are kept and sent once it is back, and every owned partition is resynced.
``status`` keeps serving from the last snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
import structlog
from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gatewayd.hooks.events import HookEvent
from gatewayd.journal import redis_codec as codec
from gatewayd.journal import redis_consumer as consumer
from gatewayd.journal import redis_link
from gatewayd.journal.base import (
    Commit,
    DeadLetter,
    Item,
    JournalError,
    QueueUnavailable,
)
from gatewayd.journal.redis_inspect import query_dead
from gatewayd.journal.redis_leases import Leases
from gatewayd.journal.redis_link import UNREACHABLE, Link
from gatewayd.journal.redis_state import RedisState

if TYPE_CHECKING:
    pass

__all__ = ["RedisJournal"]

log = structlog.get_logger("gatewayd.queue")


class RedisJournal(RedisState):
    """See the module docstring."""

    backend = "redis"
    durable = True
    keeps_unheard = True  # the session's owner may be another instance, with other hooks

    # -- connection ---------------------------------------------------------------------------

    async def open(self) -> list[Item]:
        # No socket_timeout (the client's default is 5 s): with one it wraps every write in
        # asyncio.wait_for (a task per command); every batch has a timeout of its own instead.
        options: dict[str, Any] = {
            "socket_timeout": None,
            "socket_connect_timeout": 2.0,
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
            async with asyncio.timeout(redis_link.TIMEOUT_S):
                await self._client.ping()
                await self._check_meta()
                await self._ensure_groups()
                self.leases = Leases(
                    self._client, self.keys, self.instance, self.partitions, self.settings.lease_ms
                )
                self.outbox.link, self._reads = Link(self._client), Link(self._client)
                self._up()
                await consumer.lease_round(self)  # take a share now: status shows it at once
        except TimeoutError:
            await self._drop_client()
            raise QueueUnavailable(
                f"Redis at {self.url} did not answer within {redis_link.TIMEOUT_S:g} s; check "
                "that redis-server there is running (not stopped or busy loading its data)"
            ) from None
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
        for coro in (consumer.maintain(self), consumer.reader(self)):
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
        item = (event, ticket, posted, 0, only)
        if ticket is not None:
            self._local[event.id] = item
        return self.outbox.post(item)

    # -- acknowledging and replying -----------------------------------------------------------

    def done(self, seq: int) -> None:
        entry = self._inflight.pop(seq, None)
        if entry is None:
            return
        partition, entry_id, _ = entry
        self._held[partition].discard(entry_id)
        # A partition being handed over waits for its acknowledgements: they go at once.
        self.outbox.ack(self.streams[partition], entry_id, partition in self._draining)

    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        entry = self._inflight.pop(seq, None)
        if entry is None:
            return
        partition, entry_id, raw = entry
        self._held[partition].discard(entry_id)
        record = codec.dead_record(event, list(letters), raw.decode("utf-8", "surrogatepass"))
        self.outbox.dead_letter((self.streams[partition], entry_id, event.id, record))
        self._dead_letters += 1

    # -- the rest of the interface ------------------------------------------------------------

    def stop_delivery(self) -> None:
        self._delivering = False

    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            async with asyncio.timeout(redis_link.TIMEOUT_S):
                return await query_dead(self, request)
        except TimeoutError:
            raise QueueUnavailable(
                f"Redis at {self.url} did not answer within {redis_link.TIMEOUT_S:g} s; try "
                "again once it answers"
            ) from None

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
        """Send what is queued, give the leases back (the others take over at once)."""
        self._delivering = False
        if self._client is not None:
            await self.outbox.drain(5.0)
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
        for link in (self.outbox.link, self._reads):
            if link is not None:
                with contextlib.suppress(TimeoutError, *UNREACHABLE):
                    async with asyncio.timeout(2):
                        await link.close()
        await self._drop_client()
