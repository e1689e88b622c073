"""One session's backlog never stalls other sessions (per-lane bounds).

A real gateway (in-process, over its control socket) with a hook that blocks session ``A``'s
events until the test creates a gate file: a client floods ``A`` with pipelined triggers while
another client posts to ``B``. Without a per-session bound the flood fills
``gateway.queue.capacity`` and ``B`` waits behind it for as long as ``A``'s hook is stuck; with
it, ``B`` is accepted and dispatched at once, ``A``'s producers get back-pressure (then
``queue_full`` naming the session and the key), and every event ``A`` got accepted is
dispatched, in order, once the gate opens. No timings are asserted: the test checks order and
acceptance, with generous bounds only so a broken daemon fails. The queue's ``accepted`` counts
the gateway's own ``gateway:startup`` event too: the bound on ``A`` is checked against what was
accepted before the flood, once that event was posted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RunCli, off_loop
from tests.support.control import AsyncControl
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.inprocess import InProcess
from tests.support.state import eventually, eventually_async, read_records

pytestmark = pytest.mark.anyio

GATED = """
import asyncio, json, os, time

async def handler(event):
    state = os.environ["ELIZA_STATE_DIR"]
    if event.action == "flood":
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(state, "gate")) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    line = json.dumps({"session": event.session_key, "n": event.context.get("n")}) + "\\n"
    fd = os.open(os.path.join(state, "record.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    event.messages.append(f"{event.action} {event.session_key}")
"""


async def _gated_daemon(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path, queue: dict[str, Any]
) -> InProcess:
    """The gateway with the gated hook; returned once its own ``gateway:startup`` event was
    accepted (``startupHookDelayMs: 0``), which the queue's ``accepted`` counts too."""
    write_hook(
        state_dir / "hooks",
        "gated",
        events=["command:flood", "command:quick"],
        handler=GATED,
        meta={"timeoutMs": 180_000},
    )
    queue = {"concurrency": 2, "journal": "sqlite", **queue}
    daemon = await start_gateway({"gateway": {"startupHookDelayMs": 0, "queue": queue}})
    await daemon.wait_log("gateway.startup_posted")
    return daemon


async def _flood(ctl: AsyncControl, session: str, count: int) -> None:
    """Pipeline ``count`` fire-and-forget triggers for ``session`` without reading replies."""
    lines = [
        json.dumps(
            {
                "id": n,
                "op": "trigger",
                "event": "command:flood",
                "sessionKey": session,
                "context": {"n": n},
                "wait": False,
            }
        )
        for n in range(count)
    ]
    await ctl.send_raw(("\n".join(lines) + "\n").encode())


async def test_a_flooded_session_does_not_stall_another(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    daemon = await _gated_daemon(
        write_hook,
        start_gateway,
        state_dir,
        {"capacity": 16, "perSessionMax": 4, "perSessionWaitMs": 120_000},
    )
    async with daemon.control() as flooder, daemon.control() as other:
        # What the queue had accepted before: the gateway's own gateway:startup event.
        before = (await other.ok("status"))["status"]["queue"]["accepted"]
        await _flood(flooder, "A", 40)

        # A's lane is full and its connection is held (back-pressure), with A's hook stuck.
        async def a_accepted() -> bool:
            queue = (await other.ok("status"))["status"]["queue"]
            return bool(queue["accepted"] - before >= 4)

        await eventually_async(a_accepted, what="A's first events accepted")
        reply = await other.ok("trigger", event="command:quick", sessionKey="B")
        assert reply["messages"] == ["quick B"]
        assert read_records(state_dir) == [{"session": "B", "n": None}]  # A still stuck
        queue = (await other.ok("status"))["status"]["queue"]
        assert queue["per_session_max"] == 4 and queue["refused"] == 0
        # A holds at most its bound (B's one is done)
        assert queue["accepted"] - before <= 4 + 1

        (state_dir / "gate").touch()
        replies = [await flooder.read() for _ in range(40)]
    assert [r["id"] for r in replies if r] == list(range(40))
    assert all(r and r["ok"] and r["queued"] for r in replies)  # back-pressure, no refusal
    records = await eventually(
        lambda: len(read_records(state_dir)) == 41 and read_records(state_dir)
    )
    assert [r["n"] for r in records if r["session"] == "A"] == list(range(40))
    assert daemon.events("queue.session_full") == []


async def test_a_session_that_stays_full_gets_queue_full_and_nothing_accepted_is_lost(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path, run_cli: RunCli
) -> None:
    daemon = await _gated_daemon(
        write_hook,
        start_gateway,
        state_dir,
        {"perSessionMax": 2, "perSessionWaitMs": 100},
    )
    async with daemon.control() as flooder, daemon.control() as other:
        await _flood(flooder, "A", 12)
        replies = [await flooder.read() for _ in range(12)]
        assert all(r is not None for r in replies)
        accepted = [r["id"] for r in replies if r and r["ok"]]
        refused = [r for r in replies if r and not r["ok"]]
        assert accepted[:2] == [0, 1] and refused  # the gate is shut: A stays full
        for r in refused:
            assert r["error"]["code"] == "queue_full"
            assert "session 'A'" in r["error"]["message"]
            assert "gateway.queue.perSessionMax" in r["error"]["message"]
        # Another session is still accepted and dispatched, and the daemon still answers.
        quick = await other.ok("trigger", event="command:quick", sessionKey="B")
        assert quick["messages"] == ["quick B"]
        status = (await other.ok("status"))["status"]["queue"]
        assert status["refused"] == len(refused)
        shown = await off_loop(run_cli, "status")
        assert shown.returncode == 0, shown.stderr
        assert f"{len(refused)} refused with queue_full" in shown.stdout
        assert "gateway.queue.perSessionMax = 2" in shown.stdout
        (state_dir / "gate").touch()
        total = len(accepted) + 1
        records = await eventually(
            lambda: len(read_records(state_dir)) == total and read_records(state_dir)
        )
    assert [r["n"] for r in records if r["session"] == "A"] == accepted
    full = daemon.events("queue.session_full")
    assert len(full) == 1  # once per episode, not once per refused event
    assert full[0]["session_key"] == "A" and "perSessionMax" in full[0]["fix"]
