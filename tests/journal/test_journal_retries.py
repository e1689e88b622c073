"""Per-hook retries, dead letters and ``gatewayd events list|show|retry|purge`` on a real gateway.

A hook with ``retries`` that fails until a flag file exists: it is retried (alone: the other
hook on the same event runs once), then dead-lettered with the hook, the error and the attempt
count; ``events`` lists and shows it, ``retry`` runs only the failed hook again (now fixed) and
``purge`` deletes what is done. The same commands work on the journal file with no daemon, a
retry made then is dispatched at the next start, and ``status`` reports the journal. The memory
journal leaves no file behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.journal.journal_support import events_cli, read_records, recording_hook
from tests.support.cli import Result, gatewayd, off_loop, ok
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.state import eventually, eventually_async

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = {
    "gateway": {"queue": {"retainDone": 100}},
    "hooks": {
        "entries": {
            "command-logger": {"enabled": False},
            "flaky": {"retries": 2, "retryBackoffMs": 20},
        }
    },
}


def _json(proc: Result) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(proc).stdout)
    return data


async def _listed(state_dir: Path, state: str) -> dict[str, Any]:
    """``events list --state STATE --json`` once it lists something: done and dead marks are not
    waited for, they reach the file up to 20 ms after the dispatch (and the test harness's CLI
    can ask sooner)."""

    async def found() -> dict[str, Any] | None:
        data = _json(await off_loop(events_cli, state_dir, "list", "--state", state, "--json"))
        return data if data["events"] else None

    return await eventually_async(found, timeout=30, what=f"a {state} event in the journal")


async def test_retries_dead_letters_and_the_events_commands(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "steady", events=["command:work"], handler=recording_hook("steady.jsonl"))
    flaky = recording_hook("flaky.jsonl", fail_unless="fixed")
    write_hook(hooks, "flaky", events=["command:work"], handler=flaky)
    daemon = await start_gateway(CONFIG)
    async with daemon.control() as control:
        reply = await control.ok("trigger", event="command:work", sessionKey="s", context={"n": 1})
        status = (await control.ok("status"))["status"]["queue"]
    assert reply["messages"] == []
    assert status["retried"] == 2 and status["dead_lettered"] == 1
    assert status["journal"]["dead_letters"] == 1
    attempts = read_records(state_dir, "flaky.jsonl")
    assert len(attempts) == 3 and all(a.get("failed") for a in attempts)  # 1 + 2 retries
    event_id = attempts[0]["id"]
    assert {a["id"] for a in attempts} == {event_id}
    assert len(read_records(state_dir, "steady.jsonl")) == 1  # not re-run by the retries
    line = await daemon.wait_log("hook.dead_letter", hook="flaky")
    assert line["attempts"] == 3 and line["event_id"] == event_id

    listed = await _listed(state_dir, "dead")
    (dead,) = listed["events"]
    assert dead["id"] == event_id and dead["state"] == "dead"
    (letter,) = dead["deadLetters"]
    assert letter["hook"] == "flaky" and letter["attempts"] == 3
    assert "RuntimeError: not yet" in letter["error"]
    shown = _json(await off_loop(events_cli, state_dir, "show", event_id, "--json"))
    assert shown["context"] == {"n": 1} and shown["event"] == "command:work"
    text = await off_loop(events_cli, state_dir, "list")
    assert text.returncode == 0 and event_id in text.stdout and "flaky failed 3x" in text.stdout

    bad = await off_loop(events_cli, state_dir, "retry", "nope-1")
    assert bad.returncode == 1 and "no event 'nope-1'" in bad.stderr

    (state_dir / "fixed").touch()
    retried = _json(await off_loop(events_cli, state_dir, "retry", event_id, "--json"))
    assert retried["retried"] == [event_id]
    await eventually(lambda: len(read_records(state_dir, "flaky.jsonl")) == 4, what="the retry")
    assert read_records(state_dir, "flaky.jsonl")[-1] == {
        **read_records(state_dir, "flaky.jsonl")[-1],
        "id": event_id,
        "n": 1,
    }
    assert len(read_records(state_dir, "steady.jsonl")) == 1  # only the failed hook re-ran
    async with daemon.control() as control:

        async def retried_done() -> dict[str, Any] | None:
            j: dict[str, Any] = (await control.ok("status"))["status"]["queue"]["journal"]
            return j if j["pending"] == 0 else None

        journal = await eventually_async(retried_done, what="the retried event done")
    assert journal["dead_letters"] == 0
    done = await _listed(state_dir, "done")
    assert [e["id"] for e in done["events"]] == [event_id]
    assert _json(await off_loop(events_cli, state_dir, "purge", "--all", "--json"))["purged"] == 1
    status_text = ok(await off_loop(gatewayd, state_dir, "status")).stdout
    assert "journal:" in status_text and "0 dead letters" in status_text
    assert await daemon.stop() == 0


async def test_events_commands_without_a_daemon_and_retry_at_the_next_start(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    flaky = recording_hook("flaky.jsonl", fail_unless="fixed")
    write_hook(hooks, "flaky", events=["command:work"], handler=flaky)
    daemon = await start_gateway(CONFIG)
    async with daemon.control() as control:
        for n in range(3):
            await control.ok("trigger", event="command:work", sessionKey=f"s{n}", context={"n": n})
    assert await daemon.stop() == 0

    listed = _json(await off_loop(events_cli, state_dir, "list", "--state", "dead", "--json"))
    ids = [e["id"] for e in listed["events"]]
    assert len(ids) == 3
    assert _json(await off_loop(events_cli, state_dir, "purge", ids[0], "--json"))["purged"] == 1
    pending = await off_loop(events_cli, state_dir, "purge", "--all")
    assert pending.returncode == 0 and "purged 2 events" in pending.stdout
    # Nothing dead any more; make new dead letters, then retry one with the daemon stopped.
    daemon = await start_gateway()
    async with daemon.control() as control:
        await control.ok("trigger", event="command:work", sessionKey="later", context={"n": 7})
    assert await daemon.stop() == 0
    (dead,) = _json(await off_loop(events_cli, state_dir, "list", "--state", "dead", "--json"))[
        "events"
    ]
    retry = await off_loop(events_cli, state_dir, "retry", dead["id"])
    assert retry.returncode == 0 and "when gatewayd next starts" in retry.stdout
    (state_dir / "fixed").touch()
    daemon = await start_gateway()
    await eventually(
        lambda: any(
            r["id"] == dead["id"] and not r.get("failed")
            for r in read_records(state_dir, "flaky.jsonl")
        ),
        what="the retried dead letter dispatched at the start",
    )
    assert (await daemon.wait_log("journal.recovered"))["pending"] == 1
    assert await daemon.stop() == 0


async def test_the_memory_journal_leaves_no_file_and_the_events_command_says_so(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    """What the memory journal keeps while it runs is the contract suite's
    (tests/journal/test_journal_contract.py); nothing of it survives the process."""
    daemon = await start_gateway({**CONFIG, "gateway": {"queue": {"journal": "memory"}}})
    async with daemon.control() as control:
        await control.ok("trigger", event="command:work", sessionKey="m", context={"n": 5})
        assert (await control.ok("status"))["status"]["queue"]["journal"]["backend"] == "memory"
    assert await daemon.stop() == 0
    assert not (state_dir / "journal" / "events.db").exists()
    gone = await off_loop(events_cli, state_dir, "list")
    assert gone.returncode == 1 and "no journal at" in gone.stderr
