"""``gatewayd send | trigger | status | reload`` as subprocesses against a real gateway (serving
in the test's process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook

ECHO = """
async def handler(event):
    event.messages.append("echo: " + event.context.get("content", event.context.get("say", "")))
    event.messages.append("second line")
"""

pytestmark = pytest.mark.anyio


def test_no_daemon_running(state_dir: Path) -> None:
    socket = state_dir / "run" / "gatewayd.sock"
    for args in (
        ["status"],
        ["status", "--json"],
        ["send", "hi", "--session", "s"],
        ["trigger", "command:x", "--session", "s"],
        ["reload"],
    ):
        proc = gatewayd(state_dir, *args)
        assert proc.returncode == 1, args
        assert proc.stderr == f"error: gatewayd is not running (no socket at {socket})\n", args
        assert proc.stdout == ""


async def test_client_commands(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks", "echo", events=["message:received", "command:echo"], handler=ECHO
    )
    daemon = await start_gateway()

    status = await off_loop(gatewayd, state_dir, "status")
    assert status.returncode == 0, status.stderr
    assert f"(pid {os.getpid()}," in status.stdout
    assert "hooks:" in status.stdout and "queue:" in status.stdout

    as_json = await off_loop(gatewayd, state_dir, "status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["pid"] == os.getpid()
    assert data["queue"]["capacity"] == 1024

    send = await off_loop(
        gatewayd, state_dir, "send", "hello there", "--session", "agent:main:main"
    )
    assert send.returncode == 0, send.stderr
    assert send.stdout == "echo: hello there\nsecond line\n"
    send_json = await off_loop(gatewayd, state_dir, "send", "/new", "--session", "k", "--json")
    assert json.loads(send_json.stdout) == {
        "messages": ["echo: /new", "second line"],
        "command": "new",
    }

    trig = await off_loop(
        gatewayd,
        state_dir,
        "trigger",
        "command:echo",
        "--session",
        "s",
        "--context",
        '{"say": "yo"}',
    )
    assert (trig.returncode, trig.stdout) == (0, "echo: yo\nsecond line\n"), trig.stderr
    queued = await off_loop(
        gatewayd, state_dir, "trigger", "command:echo", "--session", "s", "--no-wait"
    )
    assert (queued.returncode, queued.stdout) == (0, "queued\n")
    bad_event = await off_loop(gatewayd, state_dir, "trigger", "comand:echo", "--session", "s")
    assert bad_event.returncode == 1
    assert bad_event.stderr.startswith("error: unknown event type 'comand'")
    bad_context = await off_loop(
        gatewayd, state_dir, "trigger", "command:echo", "--session", "s", "--context", "[1]"
    )
    assert bad_context.returncode == 1
    assert bad_context.stderr == "error: --context must be a JSON object, got list\n"

    reload = await off_loop(gatewayd, state_dir, "reload")
    assert reload.returncode == 0, reload.stderr
    assert reload.stdout.startswith("reloaded: ")
    reload_json = json.loads((await off_loop(gatewayd, state_dir, "reload", "--json")).stdout)
    assert set(reload_json) == {
        *("discovered", "eligible", "registered", "skipped", "failed", "statuses"),
        *("changes", "ok", "notReady", "warnings"),
    }
    assert await daemon.stop() == 0


async def test_socket_from_flag_env_and_config_file(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    custom = state_dir / "ctl" / "gw.sock"
    daemon = await start_gateway({"gateway": {"control": {"socket": str(custom)}}})
    assert custom.exists()
    # From the config file, with no flag.
    proc = await off_loop(gatewayd, state_dir, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["channels"][0]["address"] == str(custom)
    # --socket and the env override beat the file.
    other = state_dir / "nowhere.sock"
    flag = await off_loop(gatewayd, state_dir, "status", "--socket", str(other))
    assert flag.stderr == f"error: gatewayd is not running (no socket at {other})\n"
    env = await off_loop(
        gatewayd, state_dir, "status", env={"GATEWAYD_GATEWAY__CONTROL__SOCKET": str(other)}
    )
    assert env.stderr == f"error: gatewayd is not running (no socket at {other})\n"
    assert (await off_loop(gatewayd, state_dir, "status", "--socket", str(custom))).returncode == 0
    assert await daemon.stop() == 0


async def test_client_does_not_import_the_daemon_stack(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    daemon = await start_gateway()
    code = (
        "import sys\n"
        "from gatewayd.cli import main\n"
        "rc = main(['status', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'anyio', 'pydantic', 'pydantic_settings', 'structlog', 'watchfiles', 'uvloop'} "
        "or m.startswith('gatewayd.hooks'))\n"
        "print('HEAVY', heavy, rc, file=sys.stderr)\n"
    )
    proc = await off_loop(
        subprocess.run,
        [sys.executable, "-c", code],
        env={**os.environ, "ELIZA_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "HEAVY [] 0" in proc.stderr, proc.stderr
    assert await daemon.stop() == 0
