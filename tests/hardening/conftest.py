"""Hardening tests drive a real ``gatewayd run``: the daemon fixtures of ``tests/daemon`` are
reused here (``short_state``, ``start_daemon``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DAEMON_TESTS = Path(__file__).resolve().parents[1] / "daemon"
sys.path.insert(0, str(DAEMON_TESTS))


def _daemon_fixtures() -> object:
    spec = importlib.util.spec_from_file_location("daemon_fixtures", DAEMON_TESTS / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_fixtures = _daemon_fixtures()
short_state = _fixtures.short_state  # type: ignore[attr-defined]
start_daemon = _fixtures.start_daemon  # type: ignore[attr-defined]
