"""A real ``gatewayd run`` subprocess for the bundled hooks' black-box tests.

:class:`Daemon` runs the daemon on its own state dir (a short path under ``/tmp``: a Unix socket
path must stay under 108 bytes), talks to it over the control socket with plain ``socket`` and
``json``, and reads its JSON-lines log. Every wait is bounded by a generous deadline that only
exists so a broken daemon fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEADLINE_S = 30.0


class DaemonError(AssertionError):
    """The daemon did not do what the test waited for; the message includes its log."""


class Daemon:
    """One ``gatewayd run`` process on ``state`` (its config: ``state/gatewayd.yaml``)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.workspace = state / "workspace"
        self.socket = state / "run" / "gatewayd.sock"
        self.log_path = state / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> Daemon:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAYD_")}
        env["ELIZA_STATE_DIR"] = str(self.state)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gatewayd", "run", "--log-format", "json"],
                env=env,
                cwd=self.state,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self.wait_for(lambda: self._ping(), "the control socket to answer ping")
        return self

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(DEADLINE_S)
                raise DaemonError(f"gatewayd ignored SIGTERM\n{self.log_text()}") from None
        return proc.returncode

    # -- control socket ----------------------------------------------------------------------

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request; return the reply (``ok`` must be true)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(DEADLINE_S)
            sock.connect(str(self.socket))
            sock.sendall(json.dumps({"id": 1, "op": op, **fields}).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
        reply: dict[str, Any] = json.loads(buf)
        if not reply.get("ok"):
            raise DaemonError(f"{op} failed: {reply}\n{self.log_text()}")
        return reply

    def send(
        self, text: str, session: str = "agent:main:main", sender: str = "u1", channel: str = "t"
    ) -> dict[str, Any]:
        return self.request(
            "message", sessionKey=session, text=text, senderId=sender, channel=channel
        )

    def _ping(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise DaemonError(f"gatewayd exited with {self.proc.returncode}\n{self.log_text()}")
        try:
            return bool(self.request("ping").get("pong"))
        except OSError:
            return False

    # -- logs --------------------------------------------------------------------------------

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def logs(self, event: str | None = None) -> list[dict[str, Any]]:
        """JSON log records of the current run, optionally only those of one event."""
        with self.log_path.open("rb") as f:
            f.seek(self._log_offset)
            lines = f.read().decode(errors="replace").splitlines()
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and (event is None or record.get("event") == event):
                records.append(record)
        return records

    def wait_log(self, event: str) -> dict[str, Any]:
        """The first record of ``event`` in this run, waiting for it to appear."""
        self.wait_for(lambda: bool(self.logs(event)), f"a {event!r} log record")
        return self.logs(event)[0]

    def wait_for(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            if time.monotonic() > deadline:
                raise DaemonError(f"timed out waiting for {what}\n{self.log_text()}")
            time.sleep(0.02)


RECORDER_HOOK_MD = """---
name: recorder
description: "test: record message:received events, and echo them as a reply"
metadata: {"eliza": {"events": ["message:received"]}}
---
"""

RECORDER_HANDLER = """
import json, os

def handler(event, ctx):
    record = {k: event.context.get(k) for k in ("from", "content", "channelId")}
    record["sessionKey"] = event.session_key
    line = (json.dumps(record) + "\\n").encode()
    path = os.path.join(ctx.state_dir, "received.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    event.messages.append("echo: " + event.context.get("content", ""))
"""


def install_recorder(workspace: Path) -> Path:
    """A workspace hook that appends each ``message:received`` to ``<state>/received.jsonl``
    and replies ``echo: <text>`` (so transcripts hold assistant messages too)."""
    hook = workspace / "hooks" / "recorder"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "HOOK.md").write_text(RECORDER_HOOK_MD)
    (hook / "handler.py").write_text(RECORDER_HANDLER)
    return hook


def received(state: Path) -> list[dict[str, Any]]:
    path = state / "received.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
