"""What a reload says it did: files, hooks added / changed / removed / failed; exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.state import eventually

pytestmark = pytest.mark.anyio


def reply(text: str) -> str:
    return f"async def handler(event):\n    event.messages.append({text!r})\n"


async def test_reload_reports_changes_and_fails_on_failed_hooks(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "alpha", events=["command:x"], handler=reply("a1"))
    write_hook(hooks, "beta", events=["command:x"], handler=reply("b"))
    write_hook(hooks, "off", events=["command:x"], handler=reply("off"))
    daemon = await start_gateway({"hooks": {"entries": {"off": {"enabled": False}}}})

    (hooks / "alpha" / "handler.py").write_text(reply("a2"))
    shutil.rmtree(hooks / "beta")
    write_hook(hooks, "gamma", events=["command:x"], handler=reply("g"))
    write_hook(hooks, "delta", events=["command:x"], handler="raise RuntimeError('broken')\n")
    result = await off_loop(gatewayd, state_dir, "reload")
    assert result.returncode == 1, result
    out = result.stdout.splitlines()
    assert out[0].startswith("reloaded: 6 hooks registered")  # with the 4 bundled
    assert "1 disabled" in out[0] and "1 failed" in out[0]  # the statuses, by name
    assert "  added    gamma" in out
    assert "  changed  alpha" in out
    assert "  removed  beta" in out
    # The status word of hooks list, with the reason (docs/design.md section 2).
    assert any(line.startswith("  failed     delta: import failed: ") for line in out), out
    assert "error: the reload went through, but 1 hook failed to load: delta" in result.stderr

    # The log line is written before the reply, but read from the daemon's pipe by a thread.
    done = await daemon.wait_log("reload.done", result="partial")
    assert done["level"] == "warning"
    changes = done["changes"]
    assert (changes["added"], changes["changed"], changes["removed"]) == (
        ["gamma"],
        ["alpha"],
        ["beta"],
    )
    assert [f.partition(":")[0] for f in changes["failed"]] == ["delta"]
    assert changes["files"] == [] and changes["filesChanged"] == 0  # not from the watcher
    async with daemon.control() as control:
        status = (await control.ok("status"))["status"]
        assert status["last_reload"]["result"] == "partial"
        assert status["hooks"]["statuses"] == {"disabled": 1, "failed": 1, "ready": 6}
        assert (await control.ok("trigger", event="command:x", sessionKey="s"))["messages"] == [
            "a2",
            "g",
        ]

    write_hook(hooks, "delta", events=["command:x"], handler=reply("d"))
    fixed = await off_loop(gatewayd, state_dir, "reload", "--json")
    assert fixed.returncode == 0, fixed
    doc = json.loads(fixed.stdout)
    assert doc["failed"] == [] and doc["changes"]["added"] == ["delta"]
    assert doc["changes"]["changed"] == doc["changes"]["removed"] == []
    await daemon.wait_log("reload.done", result="ok")
    assert (await off_loop(gatewayd, state_dir, "status")).stdout.count("1 disabled") == 1


async def test_a_watched_edit_names_the_files_and_the_hook(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "alpha", events=["command:x"], handler=reply("a1"))
    daemon = await start_gateway(watch=True)
    await daemon.wait_log("watch.started")
    handler = hooks / "alpha" / "handler.py"
    handler.write_text(reply("a2"))

    def changed_line() -> dict[str, Any] | None:
        for record in daemon.events("reload.done"):
            if "alpha" in record.get("changes", {}).get("changed", []):
                return record
        return None

    done = await eventually(changed_line, what="a reload.done naming alpha")
    assert done["trigger"] == "watch"
    assert str(handler) in done["changes"]["files"]
    assert done["changes"]["filesChanged"] >= 1
    assert len([r for r in daemon.events("reload.done") if r is done]) == 1
