"""The Redis queue's wire forms: stream keys, an event as a stream entry, a reply, a partition.

Everything the Redis backend (:mod:`gatewayd.journal.redis_queue`) writes to or reads from Redis
is shaped here, so that every instance of a namespace agrees on it:

``<ns>:meta``         hash: ``partitions`` (the count every instance must use);
``<ns>:p:<i>``        partition ``i``'s stream; consumer group ``gatewayd``; one field ``e``;
``<ns>:lease:<i>``    the instance owning partition ``i`` (a string with a TTL);
``<ns>:instances``    sorted set: live instance -> the wall time (ms) its registration expires;
``<ns>:reply:<id>``   instance ``id``'s reply stream (answers to events it posted with a ticket;
                      consumer group ``gatewayd``; field ``r``: one reply or a JSON array);
``<ns>:dead``         hash: event id -> dead-letter record (JSON).

An entry's ``e`` field is one JSON object: ``id``, ``type``, ``action``, ``session``, ``ts``
(event timestamp, epoch seconds), ``posted`` (epoch seconds), ``ctx`` (the event's own context:
the gateway's ``cfg``/``workspaceDir`` are left out and put back by the reader), and when set
``only``, ``chain``, ``trace``, ``reply`` (the posting instance, which waits for the answer).
``id`` is written first: the poster finds its own event by it without decoding the rest.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from typing import Any

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.results import reply_lines
from gatewayd.journal.records import BASE_KEYS
from gatewayd.jsonenc import dumps, loads
from gatewayd.timestamps import iso_utc

GROUP = "gatewayd"
"""The one consumer group on every partition stream."""


def _encode(value: Any) -> str:
    """A stream entry's JSON (a lone surrogate in a hook-set context value travels as its
    ``\\u`` escape, ``\\udc80`` say)."""
    return dumps(value).decode()


class Keys:
    """The key names of one namespace."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.meta = f"{namespace}:meta"
        self.instances = f"{namespace}:instances"
        self.dead = f"{namespace}:dead"

    def stream(self, partition: int) -> str:
        return f"{self.ns}:p:{partition}"

    def lease(self, partition: int) -> str:
        return f"{self.ns}:lease:{partition}"

    def reply(self, instance: str) -> str:
        return f"{self.ns}:reply:{instance}"


def partition_of(session_key: str, partitions: int) -> int:
    """The partition of a session: CRC-32 of its UTF-8 key (the same in every process)."""
    return zlib.crc32(session_key.encode("utf-8")) % partitions


def own_context(context: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """``context`` without the gateway's base keys (when they are the base's own objects)."""
    return {
        k: v
        for k, v in context.items()
        if k != "gateway" and not (k in BASE_KEYS and base.get(k) is v)
    }


def encode_event(
    event: HookEvent,
    base: dict[str, Any],
    only: tuple[str, ...] | None,
    reply_to: str | None,
) -> str:
    """The ``e`` field of ``event``'s stream entry (raises ``TypeError``/``ValueError`` for a
    context JSON cannot hold)."""
    record: dict[str, Any] = {
        "id": event.id,
        "type": event.type,
        "action": event.action,
        "session": event.session_key,
        "ts": event.created,
        "posted": time.time(),
        "ctx": own_context(event.context, base),
    }
    if only:
        record["only"] = list(only)
    if event.chain:
        record["chain"] = list(event.chain)
    if event.trace:
        record["trace"] = True
    if reply_to is not None:
        record["reply"] = reply_to
    return _encode(record)


def peek_id(raw: bytes) -> str | None:
    """The ``id`` of an ``e`` field :func:`encode_event` wrote (its first key), without decoding
    the rest; ``None`` for any other form (the caller decodes it whole)."""
    if raw[:7] != b'{"id":"':
        return None
    end = raw.find(b'"', 7)
    return raw[7:end].decode("ascii", "replace") if end > 0 else None


def decode_event(
    raw: bytes, base: Callable[[], dict[str, Any]]
) -> tuple[HookEvent, float, tuple[str, ...] | None, str | None]:
    """``(event, posted epoch seconds, only, reply_to)`` of an ``e`` field; ``ValueError``,
    ``KeyError`` or ``TypeError`` for one no instance wrote."""
    record = loads(raw)
    gateway = base()
    event: HookEvent = HookEvent(
        type=record["type"],
        action=record["action"],
        session_key=record["session"],
        created=float(record["ts"]),
        # The base first: a stored workspaceDir is another agent's (hooks/agents.py).
        context={**{k: gateway[k] for k in BASE_KEYS if k in gateway}, **record["ctx"]},
        trace=bool(record.get("trace")),
        chain=tuple(record.get("chain") or ()),
    )
    event.id = record["id"]
    only = tuple(record["only"]) if record.get("only") else None
    return event, float(record["posted"]), only, record.get("reply")


def encode_reply(event: HookEvent, report: tuple[int, int, int], base: dict[str, Any]) -> str:
    """What the dispatching instance sends back to the poster: the event's messages, merged
    result, ``halted``, its own context (handlers may have changed it) and the counts."""
    return _encode(
        {
            "id": event.id,
            "messages": reply_lines(event),
            "result": event.result,
            "halted": event.halted,
            "ctx": own_context(event.context, base),
            "report": list(report),
        }
    )


def apply_reply(event: HookEvent, record: dict[str, Any]) -> tuple[int, int, int]:
    """Put a reply's fields on the poster's own ``event``; returns the report counts."""
    event.messages[:] = record["messages"]
    event.result = record["result"]
    event.halted = bool(record["halted"])
    event.context.update(record["ctx"])
    handlers, errors, timeouts = record["report"]
    return int(handlers), int(errors), int(timeouts)


def dead_record(event: HookEvent, letters: list[tuple[str, str, int]], raw: str) -> str:
    """A dead letter as kept in ``<ns>:dead``: the entry (to retry it) and who failed how."""
    return _encode(
        {
            "entry": raw,
            "at": time.time(),
            "letters": [{"hook": h, "error": e, "attempts": a} for h, e, a in letters],
            "event": event.key,
            "session": event.session_key,
            "timestamp": iso_utc(event.timestamp),
        }
    )
