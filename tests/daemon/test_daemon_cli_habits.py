"""The CLI habits that need a running daemon: ``send -`` and ``--json`` on every client command.

Real ``gatewayd`` subprocesses against a real ``gatewayd run``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import gatewayd
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

ECHO = """
async def handler(event):
    event.messages.append("got: " + event.context["content"])
"""


def send_stdin(state: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``gatewayd send - ARGS`` with ``text`` on its stdin."""
    return gatewayd(state, "send", "-", *args, input=text, timeout=120)


def test_send_dash_reads_the_message_from_stdin(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "echo", events=["message:received"], handler=ECHO)
    daemon = start_daemon()
    # Several lines, a tab and non-ASCII arrive as typed; only the final line break goes.
    text = "first line\n\tsecond: ünïcode ✓\n"
    sent = send_stdin(state_dir, text, "--session", "s", "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["messages"] == ["got: first line\n\tsecond: ünïcode ✓"]
    # A plain "-" typed as the argument with empty stdin is an error, not an empty message.
    empty = send_stdin(state_dir, "", "--session", "s")
    assert empty.returncode == 1
    assert "no text on stdin" in empty.stderr
    assert daemon.stop() == 0


def test_every_client_command_prints_json(start_daemon: StartDaemon, state_dir: Path) -> None:
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
        done = gatewayd(state_dir, *args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        assert key in json.loads(done.stdout), (args, done.stdout)
    assert daemon.stop() == 0
