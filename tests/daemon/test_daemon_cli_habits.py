"""The CLI habits that need a running daemon: ``send -`` and ``--json`` on every client command.

Real ``gatewayd`` subprocesses against a real ``gatewayd run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from daemon_support import StartDaemon, WriteHook

ECHO = """
async def handler(event):
    event.messages.append("got: " + event.context["content"])
"""


def gatewayd(state: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gatewayd", *args],
        env={**os.environ, "ELIZA_STATE_DIR": str(state)},
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_send_dash_reads_the_message_from_stdin(
    write_hook: WriteHook, start_daemon: StartDaemon, short_state: Path
) -> None:
    write_hook(short_state / "hooks", "echo", events=["message:received"], handler=ECHO)
    daemon = start_daemon()
    # Several lines, a tab and non-ASCII arrive as typed; only the final line break goes.
    text = "first line\n\tsecond: ünïcode ✓\n"
    sent = gatewayd(short_state, "send", "-", "--session", "s", "--json", stdin=text)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["messages"] == ["got: first line\n\tsecond: ünïcode ✓"]
    # A plain "-" typed as the argument with empty stdin is an error, not an empty message.
    empty = gatewayd(short_state, "send", "-", "--session", "s", stdin="")
    assert empty.returncode == 1
    assert "no text on stdin" in empty.stderr
    assert daemon.stop() == 0


def test_every_client_command_prints_json(start_daemon: StartDaemon, short_state: Path) -> None:
    daemon = start_daemon()
    cases = {
        ("status",): "pid",
        ("reload",): "registered",
        ("send", "/new", "--session", "j"): "messages",
        ("trigger", "command:nothing", "--session", "j"): "messages",
        ("trigger", "command:nothing", "--session", "j", "--no-wait"): "queued",
        ("bootstrap", "--session", "j"): "bootstrapFiles",
    }
    for args, key in cases.items():
        done = gatewayd(short_state, *args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        assert key in json.loads(done.stdout), (args, done.stdout)
    assert daemon.stop() == 0
