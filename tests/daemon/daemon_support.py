"""Helpers for black-box tests of ``gatewayd run`` (imported by the tests and conftest.py).

* :class:`NotifySocket`: a real datagram socket standing in for systemd's ``NOTIFY_SOCKET``.
* :class:`Control`: a control-socket client speaking JSON lines.
* :class:`Daemon`: a running ``gatewayd run`` subprocess, its log records and notify messages.
* :func:`recorder`: source of a hook handler that appends what it saw to a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


def parse_ts(value: str) -> float:
    """A log line's ISO timestamp as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class NotifySocket:
    """A real ``AF_UNIX`` datagram socket standing in for systemd's notify socket."""

    def __init__(self, address: str) -> None:
        self.address = address  # a path, or "@name" for the abstract namespace
        bind_to = "\0" + address[1:] if address.startswith("@") else address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(bind_to)
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self._cond:
                self.messages.append((time.time(), fields))
                self._cond.notify_all()

    def wait_for(
        self, key: str, value: str = "1", *, after: int = 0, timeout: float = START_TIMEOUT_S
    ) -> tuple[int, float, dict[str, str]]:
        """The first message at index >= ``after`` with ``key=value``: (index, time, fields)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(after, len(self.messages)):
                    at, fields = self.messages[i]
                    if fields.get(key) == value:
                        return i, at, fields
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no {key}={value} on NOTIFY_SOCKET within {timeout}s; got {self.messages}"
                    )
                self._cond.wait(left)

    def close(self) -> None:
        self._closed = True
        self.sock.close()
        if not self.address.startswith("@"):
            with contextlib.suppress(OSError):
                os.unlink(self.address)


class Control:
    """A client connection to the control socket."""

    def __init__(self, path: Path | str, timeout: float = 60.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> dict[str, Any] | None:
        """The next reply line, or None at end of stream."""
        line = self.file.readline()
        return json.loads(line) if line else None

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        self._next_id += 1
        self.send_raw(json.dumps({"id": self._next_id, "op": op, **fields}).encode() + b"\n")
        reply = self.read()
        assert reply is not None, f"connection closed instead of replying to {op}"
        assert reply["id"] == self._next_id, reply
        return reply

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.request(op, **fields)
        assert reply["ok"] is True, reply
        return reply

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Daemon:
    """A running ``gatewayd run`` subprocess and what it said."""

    def __init__(self, proc: subprocess.Popen[bytes], state: Path, notify: NotifySocket) -> None:
        self.proc = proc
        self.state = state
        self.notify = notify
        self.socket = state / "run" / "gatewayd.sock"
        self.logs: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._cond:
                self.stderr_lines.append(line)
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if isinstance(record, dict):
                        self.logs.append(record)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_log(
        self, event: str, timeout: float = START_TIMEOUT_S, **match: Any
    ) -> dict[str, Any]:
        """The first log record named ``event`` whose fields include ``match``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for record in self.logs:
                    if record.get("event") == event and all(
                        record.get(k) == v for k, v in match.items()
                    ):
                        return record
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no log event {event} {match or ''}; stderr:\n" + self.stderr_text()
                    )
                self._cond.wait(min(left, 0.2))

    def events(self, event: str) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.logs if r.get("event") == event]

    def log_index(self, event: str) -> int:
        with self._cond:
            for i, record in enumerate(self.logs):
                if record.get("event") == event:
                    return i
        raise AssertionError(f"no log event {event}")

    def stderr_text(self) -> str:
        with self._cond:
            return "\n".join(self.stderr_lines)

    def control(self, timeout: float = 60.0) -> Control:
        return Control(self.socket, timeout)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        rc = self.proc.wait(timeout)
        self._reader.join(timeout)
        return rc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def close(self) -> None:
        """Kill the process if it still runs and release its pipe."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def shutdown_line(self) -> dict[str, Any]:
        lines = self.events("gateway.shutdown")
        assert len(lines) == 1, f"expected one gateway.shutdown line, got {lines}"
        return lines[0]


RECORDER = """
import asyncio, json, os, time

async def handler(event):
    BEFORE
    ctx = event.context
    record = {
        "key": event.key,
        "session": event.session_key,
        "t": time.time(),
        "ctx": {k: v for k, v in ctx.items() if k in KEEP},
    }
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], FILE), "a") as f:
        f.write(json.dumps(record, default=str) + "\\n")
    REPLY
"""


def recorder(
    file: str = "record.jsonl", keep: tuple[str, ...] = (), reply: str = "", before: str = ""
) -> str:
    """Handler source that runs ``before`` (a statement, e.g. ``await asyncio.sleep(1)``),
    appends ``{key, session, t, ctx: <keep keys>}`` to ``file`` in the state dir, then runs
    ``reply`` (e.g. ``event.messages.append("x")``)."""
    return (
        RECORDER.replace("FILE", repr(file))
        .replace("KEEP", repr(set(keep)))
        .replace("BEFORE", before or "pass")
        .replace("REPLY", reply or "pass")
    )


def read_records(state: Path, file: str = "record.jsonl") -> list[dict[str, Any]]:
    path = state / file
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy (generous bound, never a threshold)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.02)


StartDaemon = Callable[..., Daemon]
"""The ``start_daemon`` fixture: ``start_daemon(config=None, *, env=None, wait_ready=True)``."""
WriteHook = Callable[..., Path]
"""The suite-wide ``write_hook`` fixture (tests/conftest.py)."""


def write_config(state: Path, config: Mapping[str, Any]) -> Path:
    path = state / "gatewayd.yaml"
    path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    return path
