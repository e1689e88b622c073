"""The consuming side of the Redis queue: reading owned partitions and replies, takeover, leases.

Functions of a :class:`~gatewayd.journal.redis_queue.RedisState` (which owns the connection,
and whose outbox does the writing), run as its background tasks:

* :func:`reader`: one blocking ``XREADGROUP`` over the owned, resynced partitions (as many
  entries as the queue's capacity leaves room for) and this instance's reply stream
  ``<ns>:reply:<instance>`` (answers to its tickets from the instances that dispatched them);
  entries go to the lanes through :func:`take`, replies to their tickets;
* :func:`resync`: a partition just gained (or every owned one after a reconnect): its whole
  pending list claimed with ``XAUTOCLAIM`` and dispatched in order before anything new;
* :func:`maintain` / :func:`lease_round`: every ``leaseMs / 3`` the leases are renewed, free
  partitions taken up to the fair share, surplus ones drained then released, and the status
  snapshot (:func:`refresh`: lag and pending per owned partition) refreshed; acknowledged
  entries and the replies read are trimmed.

Every Redis call may raise the client's connection errors or time out: the loops log the loss
once (``queue.redis_lost``), retry with backoff and resync when Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from time import perf_counter
from typing import Any

import structlog
from redis import exceptions as rex

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.journal import redis_codec as codec
from gatewayd.journal import redis_link
from gatewayd.journal.base import Item, JournalError
from gatewayd.journal.redis_link import UNREACHABLE
from gatewayd.journal.redis_outbox import BACKOFF
from gatewayd.journal.redis_state import RedisState
from gatewayd.jsonenc import loads
from gatewayd.tickets import Ticket

log = structlog.get_logger("gatewayd.queue")

READ_COUNT = 256
"""Most entries one ``XREADGROUP`` (or ``XAUTOCLAIM`` step) returns per stream."""
BLOCK_MS = 200
"""How long one read blocks: also how soon a newly ready partition is read."""
FULL_BLOCK_MS = 10
"""How long a read of the replies alone blocks while the queue has no room for entries (so
that entries are read again soon after room is made)."""
SETTLE_PASSES = 3
"""Passes of the event loop a read that returned entries lets by before the next read.
Measured with three instances, 24 events in flight (load average 14-17): 0.72 reads per event
without, 0.63 after one pass, 0.43 after three, 0.40 after six; a pass costs microseconds
when the loop is idle."""
REPLY_TTL_MS = 3_600_000
"""A reply stream whose reader is gone (its instance died) is deleted this long after the
reader's last lease round."""


class RemoteTicket(Ticket):
    """The ticket of an event another instance posted: finishing it sends the reply there."""

    __slots__ = ("_journal", "_origin")

    def __init__(self, event: HookEvent, journal: RedisState, origin: str) -> None:
        super().__init__(event)
        self._journal = journal
        self._origin = origin
        self._released = True  # the poster is elsewhere: background handlers run at once

    def _finish(self, report: DispatchReport | None, error: Exception | None = None) -> None:
        super()._finish(report, error)
        if report is not None:
            self._journal._reply(self._origin, self.event, report)


def _field(fields: Any, name: bytes) -> Any:
    """A field of an entry as read raw (``[name, value, ...]``) or by the client (a dict);
    ``None`` for an entry deleted since it was delivered."""
    if isinstance(fields, list):
        if len(fields) == 2 and fields[0] == name:  # what gatewayd writes: one field
            return fields[1]
        fields = dict(zip(fields[::2], fields[1::2], strict=False))
    return fields.get(name) if isinstance(fields, dict) else None


def take(j: RedisState, partition: int, entries: Sequence[tuple[bytes, Any]]) -> None:
    """Hand entries read from ``partition`` to the lanes (the poster's own objects when
    they were posted here)."""
    if not j._delivering:  # draining for shutdown: left pending, the next owner claims them
        return
    items: list[Item] = []
    held, local = j._held[partition], j._local
    now_wall, now = time.time(), perf_counter()
    for entry_id, fields in entries:
        if entry_id is None or entry_id in held:
            continue
        raw = _field(fields, b"e") or b""
        # Posted here with a ticket: the poster's own object, the entry left undecoded.
        mine = local.pop(codec.peek_id(raw) or "", None) if local else None
        if mine is None:
            try:
                event, posted, only, reply_to = codec.decode_event(raw, j._base)
            except (ValueError, KeyError, TypeError) as exc:
                log.error("queue.bad_entry", partition=partition, entry=entry_id, error=str(exc))
                j.outbox.ack(j.streams[partition], entry_id)
                continue
            mine = local.pop(event.id, None)  # (written by a gatewayd that put "id" elsewhere)
        j._seq += 1
        j._inflight[j._seq] = (partition, entry_id, raw)
        held.add(entry_id)
        if mine is not None:
            items.append((*mine[:3], j._seq, mine[4]))
            continue
        ticket: Ticket | None = None
        if reply_to is not None and reply_to != j.instance:
            ticket = RemoteTicket(event, j, reply_to)
        items.append((event, ticket, now - max(0.0, now_wall - posted), j._seq, only))
    j.read += len(items)
    if items:
        j._restore(items)


def _streams(reply: Any) -> Any:
    """``(stream, entries)`` pairs of an ``XREADGROUP`` reply (a map under RESP3, pairs under
    RESP2, ``None`` when a block ran out)."""
    if isinstance(reply, dict):
        return reply.items()
    return reply or ()


def _xreadgroup(j: RedisState, count: int, block: int | None, streams: dict[str, str]) -> Any:
    command: list[Any] = ["XREADGROUP", "GROUP", codec.GROUP, j.instance, "COUNT", count]
    if block is not None:
        command += ["BLOCK", block]
    return (*command, "STREAMS", *streams, *streams.values())


async def reader(j: RedisState) -> None:
    """Read the owned partitions and the replies to this instance, one blocking read at a time."""
    assert j.leases is not None and j._reads is not None
    link, replies = j._reads, j.keys.reply(j.instance)
    delay = BACKOFF[0]
    while True:
        room = j.capacity - len(j._inflight)
        readable = [p for p in sorted(j._ready) if j.leases.valid(p)] if room > 0 else []
        if not j._delivering:
            readable = []
        streams = {j.keys.stream(p): ">" for p in readable}
        streams[replies] = ">"
        block = BLOCK_MS if room > 0 else FULL_BLOCK_MS
        j._reading = frozenset(readable)  # none of these is released while the read runs
        try:
            if j._reread_replies:  # delivered as Redis was lost: read again, from the start
                await reread_replies(j)
            count = min(room, READ_COUNT) if readable else READ_COUNT
            command = _xreadgroup(j, count, block, streams)
            (got,) = await link.execute([command], block / 1000 + redis_link.TIMEOUT_S)
            if isinstance(got, Exception):
                raise got
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
            with contextlib.suppress(TimeoutError, *UNREACHABLE):
                async with asyncio.timeout(redis_link.TIMEOUT_S):
                    await j._ensure_groups()
            continue
        except Exception as exc:  # a bug: logged, and the reader goes on
            log.exception("queue.reader_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(BACKOFF[1])
            continue
        finally:
            j._reading = frozenset()
        j._up()
        for name, entries in _streams(got):
            if name == replies.encode():
                on_replies(j, entries)
                continue
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
        if got:
            # Let the loop dispatch what came (the workers take it, run it, the outbox sends
            # the replies) before reading again: what arrives meanwhile comes in the same read.
            for _ in range(SETTLE_PASSES):
                await asyncio.sleep(0)


def groups_gone(exc: rex.ResponseError) -> bool:
    """``exc`` says a partition's stream or its consumer group is gone: Redis lost its data,
    or the stream was deleted (``UNBLOCKED``: while a read waited on it). Its next ``XADD``
    makes the stream again without the group, so the group is made again, from the start."""
    return "NOGROUP" in str(exc) or "UNBLOCKED" in str(exc)


async def resync(j: RedisState, partition: int) -> None:
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
            j.outbox.ack(stream, deleted)
        if cursor in (b"0-0", "0-0"):
            break
    await forget_consumers(j, stream)
    fresh = [e for e in entries if e[0] not in j._held[partition]]
    if fresh:
        j.claimed += len(fresh)
        log.info("queue.partition_claimed", partition=partition, entries=len(fresh))
    take(j, partition, fresh)


async def reread_replies(j: RedisState) -> None:
    """Read this instance's pending replies again (delivered to it, not yet acknowledged):
    those a read that broke with the connection never brought."""
    assert j._reads is not None
    after = "0"
    while True:
        command = _xreadgroup(j, READ_COUNT, None, {j.keys.reply(j.instance): after})
        (got,) = await j._reads.execute([command])
        if isinstance(got, Exception):
            raise got
        entries = [e for _, es in _streams(got) for e in es]
        on_replies(j, [e for e in entries if e[1] is not None])  # None: trimmed, read before
        if len(entries) < READ_COUNT:
            break
        after = entries[-1][0].decode()
    j._reread_replies = False


def on_replies(j: RedisState, entries: Sequence[tuple[bytes, Any]]) -> None:
    """Finish the tickets that reply entries answer (events posted here and dispatched by
    another instance) and acknowledge the entries."""
    for entry_id, fields in entries:
        j._replies_read.append(entry_id)
        _finish_remote(j, entry_id, _field(fields, b"r"))


def _finish_remote(j: RedisState, entry_id: bytes, raw: Any) -> None:
    """Finish the tickets a reply entry answers: one reply (a JSON object) or several (an
    array). One no instance wrote (by hand) is logged and skipped: it used to end the reply
    reader, and no remote reply was read again."""
    try:
        if raw is None:
            raise KeyError("r")
        records = loads(raw)
        if not isinstance(records, list):
            records = [records]
    except (KeyError, TypeError, ValueError) as exc:
        log.error("queue.bad_reply", entry=entry_id, error=f"{type(exc).__name__}: {exc}")
        return
    for record in records:
        mine = None
        try:
            mine = j._local.pop(record["id"], None)
            if mine is not None:  # else a duplicate, or dispatched here already
                event, ticket = mine[0], mine[1]
                ticket._finish(DispatchReport(*codec.apply_reply(event, record)))
        except (KeyError, TypeError, ValueError) as exc:
            log.error("queue.bad_reply", entry=entry_id, error=f"{type(exc).__name__}: {exc}")
            if mine is not None:  # its poster is told the reply was lost, not left waiting
                event, ticket = mine[0], mine[1]
                ticket._finish(
                    None,
                    JournalError(
                        f"the reply to {event.id} from the instance that dispatched it cannot "
                        f"be read ({type(exc).__name__}: {exc})"
                    ),
                )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def forget_consumers(j: RedisState, stream: str) -> None:
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


async def lease_round(j: RedisState) -> None:
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
    # What was dispatched of a partition is acknowledged before its hand-over.
    unsettled = {p for p in j._draining if j.outbox.unsettled(j.keys.stream(p))}
    if unsettled:
        j.outbox.flush_marks()
    quiet = not j.outbox.sending  # a batch on its way may carry the last acknowledgements
    done = [
        p
        for p in j._draining
        if quiet and not j._held[p] and p not in unsettled and p not in j._reading
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
    await refresh(j)


async def maintain(j: RedisState) -> None:
    assert j.leases is not None
    interval = j.settings.lease_ms / 3000
    delay = BACKOFF[0]
    while True:
        await asyncio.sleep(interval if j.connected else delay)
        try:
            async with asyncio.timeout(redis_link.TIMEOUT_S):
                await lease_round(j)
            delay = BACKOFF[0]
        except (TimeoutError, *UNREACHABLE) as exc:
            if isinstance(exc, TimeoutError):
                exc = rex.TimeoutError(
                    f"Redis did not answer a lease round within {redis_link.TIMEOUT_S:g} s"
                )
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
            with contextlib.suppress(TimeoutError, *UNREACHABLE):
                async with asyncio.timeout(redis_link.TIMEOUT_S):
                    await j._ensure_groups()
        except Exception as exc:  # a bug: logged, and the leases are still renewed
            log.exception("queue.lease_round_failed", error=f"{type(exc).__name__}: {exc}")


async def refresh(j: RedisState) -> None:
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
    replies, read = j.keys.reply(j.instance), list(j._replies_read)
    trim.pexpire(replies, REPLY_TTL_MS)  # kept while this instance reads it
    if read:  # the replies read are acknowledged and gone from the stream
        trim.xack(replies, codec.GROUP, *read)
        ms, _, n = max(read, key=_id_key).decode().partition("-")
        trim.xtrim(replies, minid=f"{ms}-{int(n) + 1}", approximate=False)
    await trim.execute()
    del j._replies_read[: len(read)]
    j._snapshot = snapshot


def _id_key(entry_id: bytes) -> tuple[int, int]:
    ms, _, n = entry_id.partition(b"-")
    return int(ms), int(n)
