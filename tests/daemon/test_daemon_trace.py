"""Tracing an event through a real daemon: one trace entry per outcome, and why nothing ran."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.inprocess import InProcess

OK = """
async def handler(event):
    event.messages.append("hello from ok")
    event.context["seen"] = True
"""
BOOM = """
async def handler(event):
    raise ValueError("boom")
"""
SLOW = """
import asyncio

async def handler(event):
    await asyncio.sleep(30)
"""
SYNC_PRINT = """
def handler(event):
    event.context["count"] = 2
"""

pytestmark = pytest.mark.anyio


def _hooks(write_hook: WriteHook, root: Path) -> None:
    write_hook(root, "a-ok", events=["command:ping"], handler=OK)
    write_hook(root, "b-boom", events=["command:ping"], handler=BOOM)
    write_hook(root, "c-slow", events=["command:ping"], handler=SLOW)
    write_hook(root, "d-sync", events=["command"], handler=SYNC_PRINT)
    write_hook(root, "e-off", events=["command:ping"])
    write_hook(
        root, "f-needs", events=["command:ping"], meta={"requires": {"bins": ["no-such-bin-xyz"]}}
    )
    write_hook(root, "g-broken", events=["session:start"], handler="raise ImportError('nope')\n")


def _config() -> dict[str, Any]:
    return {"hooks": {"entries": {"e-off": {"enabled": False}, "c-slow": {"timeoutMs": 300}}}}


def _by_hook(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["hook"]: h for h in entry["handlers"]}


async def test_trigger_trace_has_every_outcome(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway(_config())
    async with daemon.control() as control:
        reply = await control.ok(
            "trigger", event="command:ping", sessionKey="s1", context={"n": 1}, trace=True
        )
    assert reply["messages"] == ["hello from ok"]
    [entry] = reply["trace"]
    assert entry["event"] == "command:ping" and "reason" not in entry
    # Handlers that ran, in dispatch order (specific key, then type), then the skipped ones.
    mine = [h["hook"] for h in entry["handlers"] if h["hook"][1] == "-"]  # not the bundled
    assert mine == ["a-ok", "b-boom", "c-slow", "d-sync", "e-off", "f-needs"]
    hooks = _by_hook(entry)
    ok = hooks["a-ok"]
    assert ok["outcome"] == "ok" and ok["kind"] == "python" and ok["durationMs"] >= 0
    assert ok["changed"] == {
        "messages": ["hello from ok"],
        "context": {"added": ["seen"], "changed": [], "removed": []},
    }
    assert hooks["b-boom"]["outcome"] == "error"
    assert hooks["b-boom"]["error"] == "ValueError: boom"
    assert hooks["c-slow"]["outcome"] == "timeout"
    assert "300 ms" in hooks["c-slow"]["error"]
    assert hooks["d-sync"]["outcome"] == "ok"
    assert hooks["d-sync"]["changed"]["context"]["added"] == ["count"]
    assert hooks["e-off"]["outcome"] == "skipped"
    assert hooks["e-off"]["reason"] == "disabled: disabled in config"
    assert hooks["f-needs"]["outcome"] == "skipped"
    assert hooks["f-needs"]["reason"].startswith("ineligible: ")
    assert "no-such-bin-xyz" in hooks["f-needs"]["reason"]
    assert "g-broken" not in hooks  # it subscribes to another event


async def test_trace_says_why_nothing_ran(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway(_config())
    async with daemon.control() as control:
        none = await control.ok("trigger", event="message:received", sessionKey="s", trace=True)
        failed = await control.ok("trigger", event="session:start", sessionKey="s", trace=True)
        untraced = await control.ok("trigger", event="command:ping", sessionKey="s")
    assert none["trace"] == [
        {
            "event": "message:received",
            "handlers": [],
            "reason": "no hook subscribes to message:received",
        }
    ]
    [entry] = failed["trace"]
    assert entry["reason"].startswith("no handler ran for session:start: g-broken is failed: ")
    assert "ImportError: nope" in entry["reason"]
    assert "trace" not in untraced


async def test_message_trace_covers_every_event_it_caused(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway(_config())
    async with daemon.control() as control:
        reply = await control.ok("message", sessionKey="s2", text="/ping", trace=True)
    events = [entry["event"] for entry in reply["trace"]]
    assert events == ["message:received", "session:start", "agent:bootstrap", "command:ping"]
    assert reply["trace"][0]["reason"] == "no hook subscribes to message:received"
    assert _by_hook(reply["trace"][3])["a-ok"]["outcome"] == "ok"


async def _cli(daemon: InProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return await off_loop(
        gatewayd, daemon.state, *args, "--socket", str(daemon.socket), timeout=120
    )


async def test_cli_trace_flag(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway(_config())
    text = await _cli(daemon, "trigger", "command:ping", "--session", "s", "--trace")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "hello from ok"
    assert "-- trace --" in lines
    assert any(
        line.startswith("  error    b-boom (python)") and "ValueError: boom" in line
        for line in lines
    )
    assert any(line.startswith("  skipped  e-off (python)  disabled") for line in lines)
    as_json = await _cli(daemon, "send", "hi", "--session", "s3", "--trace", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["trace"][0]["event"] == "message:received"
    refused = await _cli(
        daemon, "trigger", "command:ping", "--session", "s", "--trace", "--no-wait"
    )
    assert refused.returncode != 0 and "--trace needs the dispatch" in refused.stderr
