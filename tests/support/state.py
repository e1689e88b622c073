"""A test's state dir and what a child process needs to use it.

A state dir is a short path under ``/tmp`` (``/tmp/gdXXXXXX``): a Unix socket path has at most
107 bytes, more than pytest's ``tmp_path`` leaves room for. :func:`clean_env` is the environment
every ``gatewayd`` subprocess of the suite runs with: the host's ``GATEWAYD_*`` settings, config
path and systemd variables removed, ``ELIZA_STATE_DIR`` set.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import yaml

T = TypeVar("T")

HOST_ONLY = ("GATEWAYD_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
"""Variables of the host that must not reach a test's ``gatewayd`` (besides ``GATEWAYD_*``)."""


def new_state_dir() -> Path:
    """A fresh, short, empty state dir; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix="gd", dir="/tmp"))


def is_host_setting(name: str) -> bool:
    """True for an environment variable that would make a child see the host's settings."""
    return name.upper().startswith("GATEWAYD_") or name in HOST_ONLY


def clean_env(state: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` minus the host's settings, with ``ELIZA_STATE_DIR=state``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not is_host_setting(k)}
    env["ELIZA_STATE_DIR"] = str(state)
    env.update(extra or {})
    return env


def write_config(state: Path, config: Mapping[str, Any]) -> Path:
    """Write ``config`` as ``state/gatewayd.yaml``; return its path."""
    path = state / "gatewayd.yaml"
    path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    return path


def session_table(state: Path) -> dict[str, Any]:
    """The daemon's session table as it is on disk (``<state>/sessions/sessions.json``)."""
    table: dict[str, Any] = json.loads((state / "sessions" / "sessions.json").read_bytes())
    return table


def read_records(state: Path, file: str = "record.jsonl") -> list[dict[str, Any]]:
    """The JSON lines of ``state/file`` (empty when it does not exist yet)."""
    path = state / file
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parse_ts(value: str) -> float:
    """A log line's ISO timestamp as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def wait_until(
    predicate: Callable[[], T | Literal[False] | None], timeout: float = 60.0, what: str = ""
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that (typed without
    the ``None``/``False`` it returns while waiting).

    The timeout is a generous bound so a broken daemon fails the test instead of hanging it;
    it is never a threshold the test asserts.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


async def eventually(
    predicate: Callable[[], T | Literal[False] | None],
    timeout: float = 60.0,  # noqa: ASYNC109 - wait_until's arguments: the calls read the same
    what: str = "",
) -> T:
    """:func:`wait_until` for async tests: the event loop (and a gateway serving in it) runs
    while it polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await anyio.sleep(0.02)


async def eventually_async(
    probe: Callable[[], Awaitable[T | Literal[False] | None]],
    timeout: float = 60.0,  # noqa: ASYNC109 - wait_until's arguments: the calls read the same
    what: str = "",
) -> T:
    """:func:`eventually` for a probe that is itself awaited (a request to the gateway)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}")
        await anyio.sleep(0.02)
