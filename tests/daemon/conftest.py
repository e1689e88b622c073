"""Fixtures for black-box tests of ``gatewayd run`` (helpers are in ``daemon_support.py``).

* ``short_state``: a fresh state dir under ``/tmp`` with a short name (a Unix socket path has
  at most 107 bytes, more than pytest's ``tmp_path`` leaves room for).
* ``start_daemon(config=None, env=None, wait_ready=True, prefix=())``: start
  ``[*prefix, python, -m, gatewayd, run]`` on ``short_state`` with a test ``NOTIFY_SOCKET``;
  returns a :class:`Daemon` once ``READY=1`` arrived. Every daemon still running at teardown
  is killed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from daemon_support import Daemon, NotifySocket, StartDaemon, write_config


@pytest.fixture
def short_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, short state dir (``/tmp/gdXXXXXX``), set as ``$ELIZA_STATE_DIR``."""
    path = Path(tempfile.mkdtemp(prefix="gd", dir="/tmp"))
    monkeypatch.setenv("ELIZA_STATE_DIR", str(path))
    monkeypatch.delenv("GATEWAYD_CONFIG", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    for name in list(os.environ):
        if name.upper().startswith("GATEWAYD_"):
            monkeypatch.delenv(name)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start_daemon(short_state: Path) -> Iterator[StartDaemon]:
    """Start ``gatewayd run`` subprocesses on ``short_state``; all are killed at teardown."""
    started: list[Daemon] = []
    notifies: list[NotifySocket] = []

    def start(
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        notify_address: str | None = None,
        prefix: Sequence[str] = (),
    ) -> Daemon:
        if config is not None:
            write_config(short_state, config)
        notify = NotifySocket(notify_address or str(short_state / f"notify{len(notifies)}"))
        notifies.append(notify)
        full_env = {
            **os.environ,
            "ELIZA_STATE_DIR": str(short_state),
            "NOTIFY_SOCKET": notify.address,
            "PYTHONUNBUFFERED": "1",
            # No file watcher: reloads in these tests happen only when a test asks for one.
            "GATEWAYD_HOOKS__LOAD__WATCH": "false",
            **(env or {}),
        }
        proc = subprocess.Popen(
            # ``prefix`` runs the daemon under another command (``unshare ... sh -c '...'``).
            [*prefix, sys.executable, "-m", "gatewayd", "run", "--log-format", "json"],
            env=full_env,
            cwd=short_state,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        daemon = Daemon(proc, short_state, notify)
        started.append(daemon)
        if wait_ready:
            try:
                notify.wait_for("READY")
            except AssertionError:
                raise AssertionError(
                    f"daemon not ready (exit {proc.poll()}):\n{daemon.stderr_text()}"
                ) from None
        return daemon

    yield start
    for daemon in started:
        daemon.close()
    for notify in notifies:
        notify.close()
