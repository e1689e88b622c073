"""The suite's one way to run a real ``gatewayd run``: :class:`Daemon`.

A :class:`Daemon` is a state dir plus how to start the daemon on it; :meth:`Daemon.start` runs
``[*prefix, python, -m, gatewayd, run, --log-format, json]`` with a clean environment
(:func:`tests.support.state.clean_env`), a real datagram socket as systemd's ``NOTIFY_SOCKET``
(:class:`NotifySocket`), and returns once ``READY=1`` arrived on it. The daemon's stderr is read
on a thread into :attr:`Daemon.logs` (the JSON log records of the current run). ``start`` may be
called again after ``stop``: each run has its own process, notify socket and log records.

The file watcher is off unless ``watch=True``: reloads then happen only when a test asks for one.
Every wait is bounded by a generous deadline that only exists so a broken daemon fails the test
instead of hanging it.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.control import Control
from tests.support.state import clean_env

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
_NOTIFY_NAMES = itertools.count()


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
        self._closed = True  # the reader thread ends at its next timeout or on the closed socket
        self.sock.close()
        if not self.address.startswith("@"):
            with contextlib.suppress(OSError):
                os.unlink(self.address)


class Daemon:
    """``gatewayd run`` on ``state``: started by :meth:`start`, as often as a test needs."""

    def __init__(
        self,
        state: Path,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        prefix: Sequence[str] = (),
        notify_address: str | None = None,
    ) -> None:
        self.state = state
        self.workspace = state / "workspace"
        """The default workspace dir (``workspace.dir`` unset)."""
        self.socket = state / "run" / "gatewayd.sock"
        """The default control socket path."""
        self.env = {"GATEWAYD_HOOKS__LOAD__WATCH": "true" if watch else "false", **(env or {})}
        self.prefix = tuple(prefix)
        """Runs the daemon under another command (``unshare ... sh -c '...'``)."""
        self.notify_address = notify_address
        self.logs: list[dict[str, Any]] = []
        """The JSON log records of the current run, in order."""
        self.stderr_lines: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._notify: NotifySocket | None = None
        self._reader: threading.Thread | None = None
        self._reader_waiting = False
        self._cond = threading.Condition()

    # -- process ---------------------------------------------------------------------------

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self._proc is not None, "the daemon was never started"
        return self._proc

    @property
    def notify(self) -> NotifySocket:
        assert self._notify is not None, "the daemon was never started"
        return self._notify

    def start(self, *, wait_ready: bool = True, stderr: int | None = None) -> Daemon:
        """Start a new run; with ``wait_ready``, return once ``READY=1`` arrived.

        ``stderr`` (a file descriptor) sends the daemon's log there instead of to
        :attr:`logs`, for tests of what happens to the log's reader.
        """
        assert self._proc is None or self._proc.poll() is not None, "the daemon is running"
        self._release()
        self._reader = None
        address = self.notify_address or str(self.state / f"notify{next(_NOTIFY_NAMES)}")
        self._notify = NotifySocket(address)
        self.logs, self.stderr_lines = [], []
        env = clean_env(self.state, {"NOTIFY_SOCKET": address, "PYTHONUNBUFFERED": "1", **self.env})
        args = ["run", "--log-format", "json"]
        self._proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "gatewayd", *args],
            env=env,
            cwd=self.state,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr is None else stderr,
        )
        if stderr is None:
            self._reader = threading.Thread(
                target=self._read_stderr, args=(self._proc,), daemon=True
            )
            self._reader.start()
        if wait_ready:
            try:
                self._notify.wait_for("READY")
            except AssertionError:
                raise AssertionError(
                    f"daemon not ready (exit {self._proc.poll()}):\n{self.stderr_text()}"
                ) from None
        return self

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        partial = b""
        while True:
            self._reader_waiting = True  # unset below only once read() returned
            chunk = os.read(fd, 65536)
            self._reader_waiting = False
            if not chunk:
                break
            *lines, partial = (partial + chunk).split(b"\n")
            with self._cond:
                for raw in lines:
                    line = raw.decode(errors="replace")
                    self.stderr_lines.append(line)
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        if isinstance(record, dict):
                            self.logs.append(record)
                self._cond.notify_all()
        with self._cond:
            if partial:
                self.stderr_lines.append(partial.decode(errors="replace"))
            self._cond.notify_all()

    def _caught_up(self, timeout: float = 5.0) -> None:
        """Return once every log byte the daemon has written so far is in :attr:`logs`.

        The daemon writes a log line before the reply it belongs to, but the test reads the pipe
        on a thread: without this, a record of a request just answered may not be there yet.
        Caught up = nothing left unread in the pipe and the reader back in ``read()``."""
        proc = self._proc
        if proc is None or proc.stderr is None or self._reader is None:
            return
        deadline = time.monotonic() + timeout
        while self._reader.is_alive() and time.monotonic() < deadline:
            try:
                unread = struct.unpack(
                    "i", fcntl.ioctl(proc.stderr.fileno(), termios.FIONREAD, b"\0\0\0\0")
                )[0]
            except (OSError, ValueError):
                return  # the pipe was closed: the reader has seen its end
            if unread == 0 and self._reader_waiting:
                # A read() that has just returned may still wait for the GIL to say so: give
                # it the GIL once, then look again.
                time.sleep(0.001)
                if self._reader_waiting:
                    return
            time.sleep(0.002)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Wait for the process to exit (and its stderr to be read); its exit code."""
        rc = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        return rc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        """Send ``sig`` (if it still runs) and wait; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def _release(self) -> None:
        """Kill the process if it still runs and release its pipe and notify socket."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            if self._reader is not None:
                self._reader.join(10)
            if proc.stderr is not None:
                proc.stderr.close()
        notify, self._notify = self._notify, None
        if notify is not None:
            notify.close()

    def close(self) -> None:
        """The end of the test: kill what still runs, release everything."""
        self._release()

    # -- log records ---------------------------------------------------------------------

    def wait_log(
        self, event: str, timeout: float = START_TIMEOUT_S, **match: Any
    ) -> dict[str, Any]:
        """The first log record of this run named ``event`` whose fields include ``match``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for record in self.logs:
                    if record.get("event") == event and all(
                        record.get(k) == v for k, v in match.items()
                    ):
                        return record
                left = deadline - time.monotonic()
                reader_done = self._reader is None or not self._reader.is_alive()
                if left <= 0 or (self.proc.poll() is not None and reader_done):
                    raise AssertionError(
                        f"no log event {event} {match or ''}; stderr:\n" + self.stderr_text()
                    )
                self._cond.wait(min(left, 0.2))

    def events(self, event: str) -> list[dict[str, Any]]:
        """Every log record of this run named ``event`` (all the daemon wrote until now)."""
        self._caught_up()
        with self._cond:
            return [r for r in self.logs if r.get("event") == event]

    def log_index(self, event: str) -> int:
        """The position of the first ``event`` record among this run's records."""
        self._caught_up()
        with self._cond:
            for i, record in enumerate(self.logs):
                if record.get("event") == event:
                    return i
        raise AssertionError(f"no log event {event}")

    def stderr_text(self) -> str:
        with self._cond:
            return "\n".join(self.stderr_lines)

    def failure_summary(self, tail: int) -> str | None:
        """For a failed test's report: the run's state and its last ``tail`` log lines
        (None if it was never started)."""
        if self._proc is None:
            return None
        rc = self._proc.poll()
        state = "still running" if rc is None else f"exited with {rc}"
        with self._cond:
            lines = self.stderr_lines[-tail:]
            skipped = len(self.stderr_lines) - len(lines)
        of_all = f" of {skipped + len(lines)}" if skipped else ""
        head = f"gatewayd run (pid {self._proc.pid}) {state}; its last {len(lines)} log lines"
        return "\n".join([f"{head}{of_all}:", *lines])

    def shutdown_line(self) -> dict[str, Any]:
        lines = self.events("gateway.shutdown")
        assert len(lines) == 1, f"expected one gateway.shutdown line, got {lines}"
        return lines[0]

    # -- control socket ------------------------------------------------------------------

    def control(self, timeout: float = 60.0) -> Control:
        """A new connection to the control socket (use it as a context manager)."""
        return Control(self.socket, timeout)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """One request on its own connection; the reply, which must say ``ok: true``."""
        with self.control() as control:
            reply = control.request(op, **fields)
        assert reply.get("ok") is True, f"{op} failed: {reply}\n{self.stderr_text()}"
        return reply

    def send(
        self, text: str, session: str = "agent:main:main", sender: str = "u1", channel: str = "t"
    ) -> dict[str, Any]:
        """An inbound message (the ``message`` op); the reply."""
        return self.request(
            "message", sessionKey=session, text=text, senderId=sender, channel=channel
        )
