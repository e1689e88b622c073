"""The in-memory journal (``gateway.queue.journal: memory``): today's queue, nothing durable.

Events get an id and go straight to the queue's lanes; a restart loses what was queued. Dead
letters are kept in memory (the newest :data:`MAX_DEAD`) so that ``gatewayd events`` can still
list, retry and purge them while the daemon runs.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from gatewayd.hooks.events import HookEvent
from gatewayd.journal.base import Commit, DeadLetter, Item, Journal
from gatewayd.journal.records import BASE_KEYS
from gatewayd.journal.requests import parse_request
from gatewayd.timestamps import iso_utc

MAX_DEAD = 1000


class MemoryJournal(Journal):
    """See the module docstring."""

    backend = "memory"
    durable = False

    def __init__(self) -> None:
        self.prefix = f"m{secrets.token_hex(3)}"
        self._seq = 0
        self._dead: OrderedDict[str, tuple[HookEvent, list[tuple[str, str, int, float]]]] = (
            OrderedDict()
        )

    async def open(self) -> list[Item]:
        return []

    def next_id(self) -> str:
        self._seq += 1
        return f"{self.prefix}-{self._seq}"

    def append(
        self, event: HookEvent, ticket: Any, posted: float, only: tuple[str, ...] | None = None
    ) -> Commit | None:
        self._seq += 1
        event.id = f"{self.prefix}-{self._seq}"
        self._deliver(((event, ticket, posted, 0, only),))
        return None

    def done(self, seq: int) -> None:
        """Nothing to record."""

    def dead(self, event: HookEvent, seq: int, letters: Sequence[DeadLetter]) -> None:
        at = time.time()
        self._dead[event.id] = (event, [(h, e, a, at) for h, e, a in letters])
        while len(self._dead) > MAX_DEAD:
            self._dead.popitem(last=False)

    def _record(self, event: HookEvent, full: bool) -> dict[str, Any]:
        letters = self._dead[event.id][1]
        record: dict[str, Any] = {
            "id": event.id,
            "event": event.key,
            "sessionKey": event.session_key,
            "timestamp": iso_utc(event.timestamp),
            "state": "dead",
            "doneAt": iso_utc(letters[0][3]),
            "only": None,
            "deadLetters": [
                {"hook": h, "error": e, "attempts": a, "at": iso_utc(at)} for h, e, a, at in letters
            ],
        }
        if full:
            record["context"] = {k: v for k, v in event.context.items() if k not in BASE_KEYS}
        return record

    def _ids(self, ids: list[str] | None) -> list[str]:
        if ids is None:
            return list(self._dead)
        for event_id in ids:
            if event_id not in self._dead:
                raise ValueError(
                    f"no dead letter {event_id} (the memory journal keeps only dead letters, "
                    "and only until the daemon stops)"
                )
        return ids

    async def query(self, request: dict[str, Any]) -> dict[str, Any]:
        action, args = parse_request(request)
        if action == "list":
            chosen = []
            if args["state"] in ("dead", "all"):
                chosen = [
                    event
                    for event, _ in self._dead.values()
                    if args["session"] is None or event.session_key == args["session"]
                ]
            records = [self._record(e, False) for e in chosen[-args["limit"] :]]
            return {"events": records, "journal": self.stats()}
        if action == "show":
            if args["id"] not in self._dead:
                raise ValueError(
                    f"no event {args['id']} (the memory journal keeps dead letters only)"
                )
            return {"event": self._record(self._dead[args["id"]][0], True)}
        ids = self._ids(args["ids"])
        if action == "purge":
            for event_id in ids:
                del self._dead[event_id]
            return {"purged": len(ids)}
        items: list[Item] = []
        for event_id in ids:
            event, letters = self._dead.pop(event_id)
            event.messages = []
            only = tuple(sorted(h for h, *_ in letters))
            items.append((event, None, time.perf_counter(), 0, only))
        self._restore(items)
        return {"retried": [item[0].id for item in items]}

    def stats(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "pending": None,
            "dead_letters": sum(len(letters) for _, letters in self._dead.values()),
        }

    async def close(self) -> None:
        """Nothing to write."""
