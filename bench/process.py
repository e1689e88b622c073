"""Running a daemon under measurement: spawn it, catch its ``READY=1``, talk to it, stop it.

:class:`Daemon` starts any command (``gatewayd run`` or the minimal reference daemon) with
``NOTIFY_SOCKET`` pointing at a datagram socket of ours, exactly as systemd would, so that
"started" means what it means in production: the daemon said ``READY=1``. Its output goes to a
log file (JSON lines for gatewayd) that benchmarks may read afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.harness import PYTHON, REPO, rss_kib

GATEWAYD = [PYTHON, "-m", "gatewayd"]
MINIMAL = [PYTHON, str(REPO / "bench" / "reference" / "minimal_daemon.py")]
READY_TIMEOUT_S = 30.0


class DaemonError(RuntimeError):
    """The daemon under measurement did not start, answer or stop as expected."""


class Daemon:
    """A daemon process; use as a context manager (``with Daemon(...) as d:``)."""

    def __init__(self, argv: list[str], env: dict[str, str], workdir: Path, socket_path: Path):
        self.argv = argv
        self.env = dict(env)
        self.workdir = workdir
        self.socket_path = socket_path
        self.log_path = workdir / f"daemon-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None
        """Seconds from spawn to ``READY=1``."""
        self.ready_at: float | None = None
        """``time.time()`` when ``READY=1`` arrived."""
        self._notify: socket.socket | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Daemon:
        notify_path = self.workdir / f"notify-{time.monotonic_ns()}.sock"
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._notify.bind(str(notify_path))
        self.env["NOTIFY_SOCKET"] = str(notify_path)
        log = self.log_path.open("wb")
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        log.close()
        deadline = start + READY_TIMEOUT_S
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or self.proc.poll() is not None:
                self.kill()
                raise DaemonError(
                    f"{' '.join(self.argv)} did not send READY=1 (exit {self.proc.returncode}); "
                    f"log:\n{self.log()[-3000:]}"
                )
            self._notify.settimeout(min(remaining, 0.5))
            try:
                data = self._notify.recv(4096)
            except TimeoutError:
                continue
            if b"READY=1" in data.split(b"\n"):
                self.ready_s = time.perf_counter() - start
                self.ready_at = time.time()
                return self

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_events(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (others skipped)."""
        events = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
        return events

    def rss_mib(self) -> float:
        return rss_kib(self.pid) / 1024

    def rss_tree_mib(self) -> float:
        """RSS of the process and its live children (gatewayd's journal writer) together."""
        return sum(rss_kib(pid) for pid in _tree(self.pid)) / 1024

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time used so far (user + system): ``(its main thread, the whole process)``,
        the whole process being every thread of it and of its live children (gatewayd's
        journal writer). For gatewayd the main thread is the event loop's."""
        pid = self.pid
        loop = _task_cpu(f"/proc/{pid}/task/{pid}/stat")
        return loop, sum(_task_cpu(f"/proc/{one}/stat") for one in _tree(pid))

    def request(self, payload: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """One request over the control socket; the reply as a dict."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.socket_path))
            sock.sendall(json.dumps(payload).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise DaemonError(f"connection closed before a reply to {payload}")
                buf += chunk
        reply: dict[str, Any] = json.loads(buf)
        return reply

    def stop(self, timeout: float = 30.0) -> float:
        """SIGTERM, wait; returns seconds from the signal to the exit. Raises on a bad exit."""
        assert self.proc is not None
        start = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise DaemonError(f"{' '.join(self.argv)} did not stop within {timeout} s") from None
        elapsed = time.perf_counter() - start
        if code != 0:
            raise DaemonError(f"{' '.join(self.argv)} exited {code}; log:\n{self.log()[-3000:]}")
        return elapsed

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        if self._notify is not None:
            self._notify.close()
            with_path = self.env.get("NOTIFY_SOCKET")
            if with_path and os.path.exists(with_path):
                os.unlink(with_path)
            self._notify = None

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    pids = [pid]
    while pids:
        one = pids.pop()
        try:
            for task in os.listdir(f"/proc/{one}/task"):
                with open(f"/proc/{one}/task/{task}/children") as f:
                    pids += [int(child) for child in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        found.append(one)
    return found


_TICK = os.sysconf("SC_CLK_TCK")


def _task_cpu(stat_path: str) -> float:
    """utime + stime, in seconds, from a ``/proc/.../stat`` file (fields 14 and 15)."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def gatewayd(state: Path, env: dict[str, str], *extra: str) -> Daemon:
    """``gatewayd run`` on ``state`` (its default socket path), logging JSON lines."""
    argv = [*GATEWAYD, "run", "--log-format", "json", *extra]
    return Daemon(argv, env, state.parent, state / "run" / "gatewayd.sock")


def minimal(workdir: Path, env: dict[str, str]) -> Daemon:
    """The minimal reference daemon (``reference/minimal_daemon.py``) on ``workdir/min.sock``."""
    path = workdir / "min.sock"
    return Daemon([*MINIMAL, str(path)], env, workdir, path)
