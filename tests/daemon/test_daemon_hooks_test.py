"""``gatewayd hooks test NAME``: one hook against a sample event, in or out of the daemon."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.inline import gatewayd_inline

GREET = """
async def handler(event):
    ctx = event.context
    print("greeting", ctx["senderId"])
    event.messages.append(f"hi {ctx['senderId']} args={ctx['args']!r} at {event.session_key}")
"""
ECHO = """
def handler(event):
    event.messages.append("echo " + event.context["content"])
    event.context["content"] = event.context["content"].upper()
"""
BOOM = """
async def handler(event):
    raise ValueError("nope")
"""

pytestmark = pytest.mark.anyio


def _hooks(write_hook: WriteHook, root: Path) -> None:
    write_hook(root, "greet", events=["command:greet"], handler=GREET)
    write_hook(root, "echo", events=["message:received"], handler=ECHO)
    write_hook(root, "boom", events=["command"], handler=BOOM)


def test_hooks_test_out_of_the_daemon(write_hook: WriteHook, state_dir: Path) -> None:
    """Out of the daemon ``hooks test`` loads and runs the hook in its own process: run by the
    test's thread, where coverage measures it."""
    _hooks(write_hook, state_dir / "hooks")
    greet = gatewayd_inline(state_dir, "hooks", "test", "greet")
    assert greet.returncode == 0, greet.stderr
    lines = greet.stdout.splitlines()
    assert lines[0] == "hooks test greet with command:greet, in this process (no daemon running)"
    assert lines[1] == "hi hooks-test args='' at agent:main:hooks-test"
    assert any(line.startswith("  ok       greet (python)") for line in lines)
    assert lines[-1] == "ok"
    assert "hook.output" in greet.stderr and "greeting hooks-test" in greet.stderr

    echo = gatewayd_inline(
        state_dir,
        "hooks",
        "test",
        "echo",
        "--context",
        '{"content": "yo"}',
        "--json",
        "--local",
    )
    assert echo.returncode == 0, echo.stderr
    doc = json.loads(echo.stdout)
    assert (doc["view"], doc["event"], doc["messages"], doc["passed"]) == (
        "local",
        "message:received",
        ["echo yo"],
        True,
    )
    [handler] = doc["trace"][0]["handlers"]
    assert handler["changed"]["context"]["changed"] == ["content"]

    boom = gatewayd_inline(state_dir, "hooks", "test", "boom", "--event", "command:other")
    assert boom.returncode == 1
    assert "boom with command:other" in boom.stdout.splitlines()[0]
    assert "  error    boom (python)" in boom.stdout and "ValueError: nope" in boom.stdout
    assert boom.stdout.splitlines()[-1] == "FAILED"

    missing = gatewayd_inline(state_dir, "hooks", "test", "nosuch")
    assert missing.returncode == 1 and 'hook "nosuch" not found' in missing.stderr
    bad = gatewayd_inline(state_dir, "hooks", "test", "greet", "--context", "[1]")
    assert bad.returncode == 1 and "--context must be a JSON object" in bad.stderr


async def test_hooks_test_in_the_daemon_uses_its_view_not_its_counters(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway(env={"GATEWAYD_HOOKS__ENTRIES__ECHO__ENABLED": "false"})
    greet = await off_loop(
        gatewayd, state_dir, "hooks", "test", "greet", "--context", '{"args": "x"}'
    )
    assert greet.returncode == 0, greet.stderr
    lines = greet.stdout.splitlines()
    assert lines[0] == "hooks test greet with command:greet, in the running daemon"
    assert lines[1] == "hi hooks-test args='x' at agent:main:hooks-test"
    # The hook's print went to the daemon's log, tagged.
    await daemon.wait_log("hook.output", hook="greet", line="greeting hooks-test")
    async with daemon.control() as control:
        hooks = (await control.ok("hooks"))["hooks"]
    # A test run is no call of the hook's: its counters do not count it.
    assert next(h for h in hooks if h["name"] == "greet")["stats"]["calls"] == 0

    # Disabled in the daemon's environment (not in this shell's): it says so and fails.
    echo = await off_loop(gatewayd, state_dir, "hooks", "test", "echo")
    assert echo.returncode == 1
    assert "echo did not run: it is disabled: disabled in config" in echo.stdout
    local = await off_loop(gatewayd, state_dir, "hooks", "test", "echo", "--local")
    assert local.returncode == 0, local.stderr

    unknown = await off_loop(gatewayd, state_dir, "hooks", "test", "nosuch", "--daemon")
    assert unknown.returncode == 1 and "no hook 'nosuch' in the running daemon" in unknown.stderr
    assert await daemon.stop() == 0
    refused = await off_loop(gatewayd, state_dir, "hooks", "test", "greet", "--daemon")
    assert refused.returncode == 1 and "gatewayd is not running" in refused.stderr
