"""The consuming side of the Redis queue: reading owned partitions, takeover, lease rounds.

Functions of a :class:`~gatewayd.journal.redis_queue.RedisJournal` (which owns the connection,
the posting side and the acknowledgements), run as its background tasks:

* :func:`reader`: ``XREADGROUP`` over the owned, resynced partitions, as many entries as the
  queue's capacity leaves room for; entries go to the lanes through :func:`take`;
* :func:`resync`: a partition just gained (or every owned one after a reconnect): its whole
  pending list claimed with ``XAUTOCLAIM`` and dispatched in order before anything new;
* :func:`maintain` / :func:`lease_round`: every ``leaseMs / 3`` the leases are renewed, free
  partitions taken up to the fair share, surplus ones drained then released, and the status
  snapshot (:func:`refresh`: lag and pending per owned partition) refreshed; acknowledged
  entries are trimmed;
* :func:`reply_reader`: answers to this instance's tickets, from ``<ns>:reply:<instance>``.

Every Redis call may raise the client's connection errors: the loops log the loss once
(``queue.redis_lost``), retry with backoff and resync when Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

import structlog
from redis import exceptions as rex

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.registry import DispatchReport
from gatewayd.journal import redis_codec as codec
from gatewayd.journal.base import Item, JournalError
from gatewayd.jsonenc import loads
from gatewayd.tickets import Ticket

if TYPE_CHECKING:
    from gatewayd.journal.redis_queue import RedisJournal

log = structlog.get_logger("gatewayd.queue")

UNREACHABLE = (rex.ConnectionError, rex.TimeoutError)
"""What the client raises when Redis cannot be reached (``BusyLoadingError`` included)."""
READ_COUNT = 256
"""Most entries one ``XREADGROUP`` (or ``XAUTOCLAIM`` step) returns."""
BLOCK_MS = 200
"""How long one read blocks: also how soon a newly ready partition is read."""
BACKOFF = (0.05, 2.0)
"""First and longest wait between reconnect attempts (doubling)."""


class RemoteTicket(Ticket):
    """The ticket of an event another instance posted: finishing it sends the reply there."""

    __slots__ = ("_journal", "_origin")

    def __init__(self, event: HookEvent, journal: RedisJournal, origin: str) -> None:
        super().__init__(event)
        self._journal = journal
        self._origin = origin
        self._released = True  # the poster is elsewhere: background handlers run at once

    def _finish(self, report: DispatchReport | None, error: Exception | None = None) -> None:
        super()._finish(report, error)
        if report is not None:
            self._journal._reply(self._origin, self.event, report)


def take(j: RedisJournal, partition: int, entries: Sequence[tuple[bytes, Any]]) -> None:
    """Hand entries read from ``partition`` to the lanes (the poster's own objects when
    they were posted here)."""
    if not j._delivering:  # draining for shutdown: left pending, the next owner claims them
        return
    items: list[Item] = []
    held = j._held[partition]
    now_wall, now = time.time(), perf_counter()
    for entry_id, fields in entries:
        if entry_id is None or entry_id in held:
            continue
        raw = fields.get(b"e", b"")
        try:
            event, posted, only, reply_to = codec.decode_event(raw, j._base)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("queue.bad_entry", partition=partition, entry=entry_id, error=str(exc))
            j._acks[partition].append(entry_id)
            continue
        j._seq += 1
        j._inflight[j._seq] = (partition, entry_id, raw)
        held.add(entry_id)
        ticket: Ticket | None = None
        mine = j._local.pop(event.id, None)
        if mine is not None:
            event, ticket = mine
        elif reply_to is not None and reply_to != j.instance:
            ticket = RemoteTicket(event, j, reply_to)
        items.append((event, ticket, now - max(0.0, now_wall - posted), j._seq, only))
    j.read += len(items)
    if items:
        j._restore(items)
    if j._acks:
        j._send_acks()


async def reader(j: RedisJournal) -> None:
    assert j.leases is not None
    delay = BACKOFF[0]
    while True:
        room = j.capacity - len(j._inflight)
        readable = [p for p in sorted(j._ready) if j.leases.valid(p)]
        if not (j._delivering and readable and room > 0):
            j._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(j._wake.wait(), BLOCK_MS / 1000)
            continue
        j._reading = frozenset(readable)  # none of these is released while the read runs
        try:
            got = await j._client.xreadgroup(
                codec.GROUP,
                j.instance,
                {j.keys.stream(p): ">" for p in readable},
                count=min(room, READ_COUNT),
                block=BLOCK_MS,
            )
            delay = BACKOFF[0]
        except UNREACHABLE as exc:
            j._down(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF[1])
            continue
        except rex.ResponseError as exc:
            if not groups_gone(exc):
                log.error("queue.reader_failed", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(BACKOFF[1])
                continue
            log.warning("queue.redis_groups_gone", note="Redis lost its data; recreated")
            await j._ensure_groups()
            continue
        except Exception as exc:  # a bug: logged, and the reader goes on
            log.exception("queue.reader_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(BACKOFF[1])
            continue
        finally:
            j._reading = frozenset()
        j._up()
        for name, entries in got or ():
            partition = int(name.rsplit(b":", 1)[1])
            if not j._delivering:  # draining for shutdown: left pending, the next owner claims
                continue
            if j.leases.valid(partition):
                take(j, partition, entries)
            else:
                # The lease ran out (locally) while the read was under way: the entries are in
                # this consumer's pending list, where nothing looked for them once the next
                # round renewed the lease after all (they were never dispatched). The next round
                # resyncs the partition if it is still ours; if not, its next owner claims them
                # as entries stranded on another consumer.
                j._stranded.add(partition)


def groups_gone(exc: rex.ResponseError) -> bool:
    """``exc`` says a partition's stream or its consumer group is gone: Redis lost its data,
    or the stream was deleted (``UNBLOCKED``: while a read waited on it). Its next ``XADD``
    makes the stream again without the group, so the group is made again, from the start."""
    return "NOGROUP" in str(exc) or "UNBLOCKED" in str(exc)


async def resync(j: RedisJournal, partition: int) -> None:
    """Claim ``partition``'s whole pending list and dispatch it in order (takeover)."""
    stream = j.keys.stream(partition)
    cursor: Any = "0-0"
    entries: list[tuple[bytes, Any]] = []
    while True:
        cursor, got, *rest = await j._client.xautoclaim(
            stream, codec.GROUP, j.instance, 0, cursor, count=READ_COUNT
        )
        entries += got
        for deleted in rest[0] if rest else ():
            j._acks[partition].append(deleted)
        if cursor in (b"0-0", "0-0"):
            break
    await forget_consumers(j, stream)
    fresh = [e for e in entries if e[0] not in j._held[partition]]
    if fresh:
        j.claimed += len(fresh)
        log.info("queue.partition_claimed", partition=partition, entries=len(fresh))
    take(j, partition, fresh)


async def reply_reader(j: RedisJournal) -> None:
    """Finish the tickets of events posted here and dispatched by another instance."""
    key = j.keys.reply(j.instance)
    last: Any = "0-0"
    delay = BACKOFF[0]
    while True:
        try:
            got = await j._client.xread({key: last}, count=READ_COUNT, block=1000)
            delay = BACKOFF[0]
        except UNREACHABLE as exc:
            j._down(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF[1])
            continue
        except Exception as exc:  # a bug: logged, and the reader goes on
            log.exception("queue.reply_reader_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(BACKOFF[1])
            continue
        ids = []
        for _, entries in got or ():
            for entry_id, fields in entries:
                last = entry_id
                ids.append(entry_id)
                _finish_remote(j, entry_id, fields)
        if ids:
            try:
                await j._client.xdel(key, *ids)
            except UNREACHABLE as exc:
                j._down(exc)


def _finish_remote(j: RedisJournal, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
    """Finish the ticket a reply entry answers. An entry no instance wrote (by hand) is logged
    and skipped: it used to end the reply reader, and no remote reply was read again."""
    mine = None
    try:
        record = loads(fields[b"r"])
        mine = j._local.pop(record["id"], None)
        if mine is not None:  # else a duplicate, or dispatched here already
            event, ticket = mine
            ticket._finish(DispatchReport(*codec.apply_reply(event, record)))
    except (KeyError, TypeError, ValueError) as exc:
        log.error("queue.bad_reply", entry=entry_id, error=f"{type(exc).__name__}: {exc}")
        if mine is not None:  # its poster is told the reply was lost, not left waiting
            event, ticket = mine
            ticket._finish(
                None,
                JournalError(
                    f"the reply to {event.id} from the instance that dispatched it cannot be "
                    f"read ({type(exc).__name__}: {exc})"
                ),
            )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def forget_consumers(j: RedisJournal, stream: str) -> None:
    """Delete the consumers of earlier instances that hold nothing (each start is a new
    consumer name): they would pile up in ``XINFO CONSUMERS``."""
    idle_ms = 3 * j.settings.lease_ms
    consumers = await j._client.xinfo_consumers(stream, codec.GROUP)
    pipe = j._client.pipeline(transaction=False)
    stale = 0
    for consumer in consumers:
        name = _text(consumer["name"])
        if name != j.instance and not consumer["pending"] and consumer["idle"] > idle_ms:
            pipe.xgroup_delconsumer(stream, codec.GROUP, name)
            stale += 1
    if stale:
        await pipe.execute()


async def lease_round(j: RedisJournal) -> None:
    """One lease round: renew, take over, drain and give back, refresh the snapshot."""
    leases = j.leases
    assert leases is not None
    gained, lost, surplus = await leases.tick(j._draining)
    j._up()
    for partition in lost:
        j._ready.discard(partition)
        j._draining.discard(partition)
        log.warning("queue.partition_lost", partition=partition, instance=j.instance)
    for partition in surplus:  # stop reading; give it back once its events are done
        j._ready.discard(partition)
        j._draining.add(partition)
    quiet = not j._acking  # an acknowledgement on its way must land before the hand-over
    done = [
        p
        for p in j._draining
        if quiet and not j._held[p] and p not in j._acks and p not in j._reading
    ]
    if done:
        await leases.release(done)
        j._draining.difference_update(done)
        log.info("queue.partitions_released", partitions=sorted(done), fair=leases.fair)
    # Gained ones, after a reconnect every owned one (``_down`` empties ``_ready``), and those
    # with entries stranded in another consumer's pending list (see refresh()).
    stranded, j._stranded = j._stranded & j._ready, set()
    for partition in sorted((leases.owned.keys() - j._ready - j._draining) | stranded):
        await resync(j, partition)
        j._ready.add(partition)
    if gained:
        log.info("queue.partitions_acquired", partitions=sorted(gained), fair=leases.fair)
        j._wake.set()
    await refresh(j)
    j._send_acks()


async def maintain(j: RedisJournal) -> None:
    assert j.leases is not None
    interval = j.settings.lease_ms / 3000
    delay = BACKOFF[0]
    while True:
        await asyncio.sleep(interval if j.connected else delay)
        try:
            await lease_round(j)
            delay = BACKOFF[0]
        except UNREACHABLE as exc:
            j._down(exc)
            for partition in j.leases.expire():
                j._ready.discard(partition)
                j._draining.discard(partition)
            delay = min(delay * 2, BACKOFF[1])
        except rex.ResponseError as exc:
            if not groups_gone(exc):
                log.exception("queue.lease_round_failed", error=f"{type(exc).__name__}: {exc}")
                continue
            # Found here when no read was waiting on the stream as it went.
            log.warning("queue.redis_groups_gone", note="a stream or group was gone; recreated")
            with contextlib.suppress(*UNREACHABLE):
                await j._ensure_groups()
        except Exception as exc:  # a bug: logged, and the leases are still renewed
            log.exception("queue.lease_round_failed", error=f"{type(exc).__name__}: {exc}")


async def refresh(j: RedisJournal) -> None:
    """Lag and pending of the owned partitions for ``status``; trim what all acked."""
    assert j.leases is not None
    owned = sorted(j.leases.owned)
    pipe = j._client.pipeline(transaction=False)
    for partition in owned:
        pipe.xinfo_groups(j.keys.stream(partition))
        pipe.xpending(j.keys.stream(partition), codec.GROUP)
    pipe.hlen(j.keys.dead)
    results = await pipe.execute()
    j._dead_letters = int(results[-1])
    snapshot: dict[int, dict[str, Any]] = {}
    trim = j._client.pipeline(transaction=False)
    for i, partition in enumerate(owned):
        groups, pending = results[2 * i], results[2 * i + 1]
        group = next((g for g in groups if g["name"] in (b"gatewayd", "gatewayd")), None)
        if group is None:
            continue
        snapshot[partition] = {"lag": group.get("lag"), "pending": int(pending["pending"])}
        # Entries another consumer read and cannot dispatch (it lost the lease while its read
        # was under way): claimed by the next round's resync.
        if any(_text(c["name"]) != j.instance for c in pending["consumers"] if c["pending"]):
            j._stranded.add(partition)
        low = pending["min"] or group["last-delivered-id"]
        if low and low not in (b"0-0", "0-0"):
            # Everything below the oldest pending entry (or up to the last delivered one)
            # is acknowledged: gone from the stream.
            ms, _, n = (low.decode() if isinstance(low, bytes) else low).partition("-")
            minid = low if pending["min"] else f"{ms}-{int(n) + 1}"
            trim.xtrim(j.keys.stream(partition), minid=minid, approximate=True)
    await trim.execute()
    j._snapshot = snapshot
