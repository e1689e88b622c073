"""Fixtures for the authoring and install tests (helpers are in ``authoring_support.py``).

* ``daemon(config=None)``: a real ``gatewayd run`` (live reload on) on a short state dir under
  ``/tmp`` (a Unix socket path is limited to 107 bytes), started with ``ELIZA_STATE_DIR`` pointing
  there and ready once systemd's ``READY=1`` arrives on a test notify socket. The helpers come
  from ``tests/daemon/daemon_support.py``. Every daemon is killed at teardown.
* ``cli_in(state)``: ``python -m gatewayd ARGS`` against another state dir (the daemon's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
from authoring_support import CliIn, StartDaemon
from daemon_support import Daemon, NotifySocket


def _clean_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAYD_")}
    env.pop("NOTIFY_SOCKET", None)
    env["ELIZA_STATE_DIR"] = str(state)
    return env


def run_in(state: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m gatewayd ARGS`` with ``ELIZA_STATE_DIR=state``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "gatewayd", *args],
        env=_clean_env(state),
        cwd=state,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def cli_in() -> CliIn:
    return run_in


@pytest.fixture
def daemon_state() -> Iterator[Path]:
    """A fresh, short state dir (``/tmp/gaXXXXXX``) with an empty workspace."""
    path = Path(tempfile.mkdtemp(prefix="ga", dir="/tmp"))
    (path / "workspace").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(daemon_state: Path) -> Iterator[StartDaemon]:
    """``daemon(config=None, env=None)``: start ``gatewayd run`` on ``daemon_state``."""
    started: list[tuple[Daemon, NotifySocket]] = []

    def start(
        config: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> Daemon:
        settings: dict[str, Any] = {"gateway": {"startupHookDelayMs": 0}}
        settings.update(config or {})
        (daemon_state / "gatewayd.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        notify = NotifySocket(str(daemon_state / f"notify{len(started)}"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "gatewayd", "run", "--log-format", "json"],
            env={
                **_clean_env(daemon_state),
                "NOTIFY_SOCKET": notify.address,
                "PYTHONUNBUFFERED": "1",
                **(env or {}),
            },
            cwd=daemon_state,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        running = Daemon(proc, daemon_state, notify)
        started.append((running, notify))
        try:
            notify.wait_for("READY")
        except AssertionError:
            raise AssertionError(
                f"daemon not ready (exit {proc.poll()}):\n{running.stderr_text()}"
            ) from None
        return running

    yield start
    for running, notify in started:
        running.close()
        notify.close()
