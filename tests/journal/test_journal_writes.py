"""How the SQLite journal's writer thread writes (gatewayd/journal/sqlite.py), in-process on a
real file: a batch of one kind of event (bound with three values a row) and a mixed batch store
the same rows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.journal import store
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import TriggerQueue


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as reader:
        found = reader.execute(
            "SELECT seq, session, type, action, ts, context, only, state FROM events ORDER BY seq"
        ).fetchall()
    reader.close()
    return found


def expected(events: list[HookEvent]) -> list[tuple[Any, ...]]:
    return [
        (
            int(ev.id.rsplit("-", 1)[1]),
            ev.session_key,
            ev.type,
            ev.action,
            ev.created,
            store_context(ev),
            None,
            store.PENDING,
        )
        for ev in events
    ]


def store_context(ev: HookEvent) -> str:
    return json.dumps(ev.context, separators=(",", ":")) if ev.context else "{}"


@pytest.mark.parametrize(
    "batch",
    [
        # one kind, one session: the shared-values INSERT
        [("command", "work", "agent:main:s", {})] * 5,
        # one kind, several sessions, a non-ASCII key and contexts
        [("message", "received", f"agent:main:ß{i % 3}", {"n": i}) for i in range(7)],
        # mixed kinds: six values a row
        [("command", "work", "s", {}), ("message", "received", "s", {"n": 1})] * 3,
    ],
    ids=["one-kind", "one-kind-contexts", "mixed"],
)
def test_a_batch_is_stored_as_posted_whatever_its_kinds(
    tmp_path: Path, batch: list[tuple[str, str, str, dict[str, Any]]]
) -> None:
    path = tmp_path / "events.db"
    events = [create_hook_event(t, a, key, dict(ctx)) for t, a, key, ctx in batch]

    async def main() -> None:
        journal = SqliteJournal(path, base=dict)
        queue = TriggerQueue(capacity=64, journal=journal)
        assert await journal.open() == []
        await queue.post_all(events)  # one loop turn: one batch, one commit
        assert journal.commits == 1
        await journal.close()

    run(main)
    assert rows(path) == expected(events)


def test_a_batch_with_a_gap_in_its_seqs_is_stored_as_posted(tmp_path: Path) -> None:
    """A ``gateway`` event takes a seq but is not journaled: the batch around it cannot number
    its rows from the first seq (the shared-values INSERT), and is written row by row."""
    path = tmp_path / "events.db"
    events = [create_hook_event("command", "work", "s", {"n": n}) for n in range(4)]

    async def main() -> None:
        journal = SqliteJournal(path, base=dict)
        TriggerQueue(capacity=64, journal=journal)  # binds the journal's delivery
        assert await journal.open() == []
        journal.append(events[0], None, 0.0)
        journal.append(events[1], None, 0.0)
        journal.append(create_hook_event("gateway", "startup", "gateway", {}), None, 0.0)
        journal.append(events[2], None, 0.0)
        commit = journal.append(events[3], None, 0.0)
        assert commit is not None
        await commit.wait()
        await journal.close()

    run(main)
    assert [r[0] for r in rows(path)] == [1, 2, 4, 5]
    assert rows(path) == expected(events)
