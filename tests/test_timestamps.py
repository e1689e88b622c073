"""Every timestamp gatewayd writes has the one form of gatewayd/timestamps.py: ISO 8601 UTC with
milliseconds and a ``Z`` (docs/design.md section 7), whoever writes it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import anyio

from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.stats import HookStats
from gatewayd.hooks.tester import sample_context
from gatewayd.journal.memory import MemoryJournal
from gatewayd.timestamps import iso_now, iso_utc

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def test_iso_utc_writes_milliseconds_and_z_for_a_datetime_and_epoch_seconds() -> None:
    moment = datetime(2025, 1, 31, 9, 15, 2, 347_891, tzinfo=UTC)
    assert iso_utc(moment) == "2025-01-31T09:15:02.347Z"
    assert iso_utc(moment.timestamp()) == "2025-01-31T09:15:02.347Z"
    assert ISO_MS_Z.match(iso_now())


def test_an_events_wire_form_carries_the_one_timestamp_form() -> None:
    event = create_hook_event("command", "new", "agent:main:t", {})
    event.timestamp = datetime(2025, 1, 31, 9, 15, 2, 347_891, tzinfo=UTC)
    assert event.to_json()["timestamp"] == "2025-01-31T09:15:02.347Z"


def test_the_memory_journals_listing_carries_the_one_timestamp_form() -> None:
    journal = MemoryJournal()
    delivered: list[object] = []
    journal.bind(delivered.extend, print, print)
    event = create_hook_event("command", "new", "agent:main:t", {})
    event.timestamp = datetime(2025, 1, 31, 9, 15, 2, 347_891, tzinfo=UTC)
    journal.append(event, None, 0.0)
    assert len(delivered) == 1
    journal.dead(event, 0, [("h", "boom", 1)])
    shown = anyio.run(journal.query, {"action": "show", "eventId": event.id})["event"]
    assert shown["timestamp"] == "2025-01-31T09:15:02.347Z"
    assert ISO_MS_Z.match(shown["doneAt"])
    assert ISO_MS_Z.match(shown["deadLetters"][0]["at"])


def test_a_sample_events_times_carry_the_one_timestamp_form() -> None:
    context = sample_context("session:patch")
    assert ISO_MS_Z.match(context["sessionEntry"]["createdAt"]), context


def test_a_hooks_last_error_time_carries_the_one_timestamp_form() -> None:
    stats = HookStats()
    stats.error("RuntimeError: boom", None)
    assert ISO_MS_Z.match(stats.to_json()["lastError"]["time"])
