"""A real ``redis-server`` for the Redis queue tests, and gatewayd instances sharing it.

* :class:`RedisServer`: Debian's ``redis-server`` on a private unix socket under a temporary
  dir (no TCP port), with the append-only file fsynced on every write, so that a restart
  (:meth:`RedisServer.restart`) keeps every entry; :meth:`RedisServer.stop` and
  :meth:`RedisServer.start` take it away and bring it back on the same socket and data.
* :func:`instance_config`: the config of one gatewayd instance on that server.
* :func:`redis_cli`: a synchronous ``redis`` client on the socket, to look at the keys.

``.ci/run`` installs ``redis-server``; without it these tests fail with that message.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """``redis-server`` on ``<dir>/redis.sock``; see the module docstring."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))
        self.socket = self.dir / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        assert Path(SERVER).exists(), "redis-server is not installed (.ci/run installs it)"
        self.proc = subprocess.Popen(
            [
                SERVER,
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--dir", str(self.dir),
                "--appendonly", "yes",
                "--appendfsync", "always",
                "--save", "",
                "--daemonize", "no",
                "--loglevel", "warning",
                "--logfile", str(self.dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return self
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.dir / "redis.log").read_text(errors="replace")
                    raise AssertionError(f"redis-server did not start:\n{log}") from None
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=10)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: the append-only file is complete)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def instance_config(
    url: str,
    *,
    lease_ms: int = 1500,
    partitions: int = 8,
    concurrency: int = 4,
    capacity: int = 256,
    wait_ms: int = 30_000,
    entries: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The config of one instance on ``url`` (the bundled hooks off: only the tests' run)."""
    return {
        "gateway": {
            "queue": {
                "backend": "redis",
                "capacity": capacity,
                "concurrency": concurrency,
                "redis": {
                    "url": url,
                    "partitions": partitions,
                    "leaseMs": lease_ms,
                    "waitMs": wait_ms,
                },
            },
            "startupHookDelayMs": 0,
        },
        "hooks": {"entries": {"command-logger": {"enabled": False}, **(entries or {})}},
    }
