"""``gatewayd events`` on the Redis queue: dead letters shared by every instance, and pending.

Dead letters live in the hash ``<ns>:dead`` (event id -> record with the stream entry), so any
instance lists, shows, retries (the entry is posted again to its partition, limited to the hooks
that failed) and purges them. ``pending`` lists the events this instance holds undone; the
others' are in their own ``status`` (per partition: lag and pending).
"""

from __future__ import annotations

import json
from typing import Any

from gatewayd.journal.redis_state import RedisState
from gatewayd.journal.requests import parse_request
from gatewayd.jsonenc import loads
from gatewayd.timestamps import iso_utc


def _record(event_id: str, raw: bytes, full: bool) -> dict[str, Any]:
    try:
        dead = loads(raw)
        entry = loads(dead["entry"])
        record: dict[str, Any] = {
            "id": event_id,
            "event": dead["event"],
            "sessionKey": dead["session"],
            "timestamp": dead["timestamp"],
            "state": "dead",
            "doneAt": iso_utc(dead["at"]),
            "only": entry.get("only"),
            "deadLetters": [{**letter, "at": iso_utc(dead["at"])} for letter in dead["letters"]],
        }
        if full:
            record["context"] = entry["ctx"]
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise _unreadable(event_id, exc) from None
    return record


def _unreadable(event_id: str, exc: Exception) -> ValueError:
    """A dead letter no instance wrote (put into ``<ns>:dead`` by hand): the error names it and
    the fix, not a bare JSON parser message that said nothing of where."""
    return ValueError(
        f"the dead letter {event_id} in the Redis queue cannot be read "
        f"({type(exc).__name__}: {exc}); remove it with `gatewayd events purge {event_id}`"
    )


def _pending(journal: RedisState, session: str | None) -> list[dict[str, Any]]:
    out = []
    for partition, entry_id, raw in journal._inflight.values():
        entry = json.loads(raw)
        if session is not None and entry["session"] != session:
            continue
        out.append(
            {
                "id": entry["id"],
                "event": f"{entry['type']}:{entry['action']}",
                "sessionKey": entry["session"],
                "timestamp": iso_utc(entry["ts"]),
                "state": "pending",
                "partition": partition,
                "entry": entry_id.decode(),
                "only": entry.get("only"),
                "deadLetters": [],
            }
        )
    return out


async def query_dead(journal: RedisState, request: dict[str, Any]) -> dict[str, Any]:
    """Serve the ``events`` op (see :mod:`gatewayd.journal.requests`)."""
    action, args = parse_request(request)
    client, key = journal._client, journal.keys.dead
    if action == "list":
        records: list[dict[str, Any]] = []
        if args["state"] in ("pending", "all"):
            records += _pending(journal, args["session"])
        if args["state"] in ("dead", "all"):
            everything = await client.hgetall(key)
            dead = [_record(k.decode(), v, False) for k, v in everything.items()]
            records += sorted(
                (r for r in dead if args["session"] in (None, r["sessionKey"])),
                key=lambda r: r["doneAt"],
            )
        return {"events": records[-args["limit"] :], "journal": journal.stats()}
    if action == "show":
        raw = await client.hget(key, args["id"])
        if raw is None:
            raise ValueError(f"no dead letter {args['id']} in the Redis queue {journal.keys.ns}")
        return {"event": _record(args["id"], raw, True)}
    ids = args["ids"]
    if ids is None:
        ids = [k.decode() for k in await client.hkeys(key)]
    found = await client.hmget(key, ids) if ids else []
    missing = [i for i, raw in zip(ids, found, strict=True) if raw is None]
    if missing:
        raise ValueError(f"no dead letter {missing[0]} in the Redis queue {journal.keys.ns}")
    pipe = client.pipeline(transaction=True)
    if action == "retry":
        for event_id, raw in zip(ids, found, strict=True):
            try:
                dead = loads(raw)
                only = tuple(sorted({letter["hook"] for letter in dead["letters"]}))
                partition, entry = journal.retry_raw(dead["entry"], only)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise _unreadable(event_id, exc) from None
            pipe.xadd(journal.keys.stream(partition), {"e": entry})
    if ids:
        pipe.hdel(key, *ids)
    pipe.hlen(key)
    # What the hash holds now: a count kept by dead() alone is one too many after a partition
    # was taken over and an event dead-lettered twice (one key, two calls).
    journal._dead_letters = int((await pipe.execute())[-1])
    if action == "retry":
        return {"retried": ids}
    return {"purged": len(ids)}
