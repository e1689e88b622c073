"""``gatewayd hooks list|info``: the running daemon's view against this shell's view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook

BOOM = """
async def handler(event):
    if event.context.get("fail"):
        raise KeyError("user")
    event.messages.append("fine")
"""

pytestmark = pytest.mark.anyio


async def test_daemon_view_differs_from_the_local_view_and_says_so(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hook_dir = write_hook(state_dir / "hooks", "picky", events=["command:go"], handler=BOOM)
    # The daemon's environment disables the hook; this shell's does not.
    daemon = await start_gateway(env={"GATEWAYD_HOOKS__ENTRIES__PICKY__ENABLED": "false"})
    local = await off_loop(gatewayd, state_dir, "hooks", "list", "--local", "--json")
    assert local.returncode == 0, local.stderr
    local_doc = json.loads(local.stdout)
    assert local_doc["view"] == "local"
    assert next(h for h in local_doc["hooks"] if h["name"] == "picky")["status"] == "ready"

    default = await off_loop(
        gatewayd, state_dir, "hooks", "list", "--json"
    )  # a daemon runs: its view
    doc = json.loads(default.stdout)
    assert doc["view"] == "daemon"
    picky = next(h for h in doc["hooks"] if h["name"] == "picky")
    assert (picky["status"], picky["stats"]) == ("disabled", None)

    text = await off_loop(gatewayd, state_dir, "hooks", "list")
    assert "the running daemon's view (socket " in text.stdout.splitlines()[0]
    text_local = await off_loop(gatewayd, state_dir, "hooks", "list", "--local")
    assert "this process's view" in text_local.stdout.splitlines()[0]
    assert await daemon.stop() == 0

    # No daemon: the default falls back to the local view; --daemon refuses.
    fallback = json.loads((await off_loop(gatewayd, state_dir, "hooks", "list", "--json")).stdout)
    assert fallback["view"] == "local"
    refused = await off_loop(gatewayd, state_dir, "hooks", "info", "picky", "--daemon")
    assert refused.returncode == 1 and "gatewayd is not running" in refused.stderr

    # With the hook enabled in the daemon too, info shows its counters and last error.
    daemon = await start_gateway()
    async with daemon.control() as control:
        await control.ok("trigger", event="command:go", sessionKey="s")
        await control.ok("trigger", event="command:go", sessionKey="s", context={"fail": True})
    info = await off_loop(gatewayd, state_dir, "hooks", "info", "picky")
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[0].startswith("(the running daemon's view")
    counters = next(line for line in lines if line.strip().startswith("counters:"))
    assert "calls 2, errors 1, timeouts 0, stalls 0" in counters
    last = next(line for line in lines if line.strip().startswith("last error:"))
    assert f"KeyError: 'user' at {hook_dir / 'handler.py'}:4" in last
    as_json = json.loads(
        (await off_loop(gatewayd, state_dir, "hooks", "info", "picky", "--json")).stdout
    )
    assert as_json["view"] == "daemon" and as_json["stats"]["errors"] == 1
    listed = (await off_loop(gatewayd, state_dir, "hooks", "list", "-v")).stdout
    row = next(line for line in listed.splitlines() if "picky" in line and "ready" in line)
    assert row.split()[-4:-1] == ["2", "1", "0"]
    assert "last error: " in listed
