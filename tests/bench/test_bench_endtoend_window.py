"""The end-to-end benchmark runs its load generator again when no request completed in the
window (a fresh daemon's first replies on a busy machine), and fails, saying so, only when the
second run has none either; a run's result carries the daemon's CPU a message."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import endtoend

MISSED: dict[str, Any] = {"latency_ms": None}
LOADED: dict[str, Any] = {"latency_ms": {"p50": 1.0}, "requests": 10, "completed": 20}


def daemon() -> Any:
    """A stand-in whose event loop uses 0.5 ms of CPU and whose process 1 ms per reading."""
    readings = iter((n * 0.0005, n * 0.001) for n in range(10))
    return SimpleNamespace(
        socket_path=Path("/tmp/x.sock"),
        log=lambda: "the daemon's log",
        cpu_seconds=lambda: next(readings),
    )


def test_a_missed_window_is_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [MISSED, LOADED]
    monkeypatch.setattr(endtoend, "child_json", lambda argv, timeout: runs.pop(0))
    out = endtoend.load(daemon(), 1.0, 0.3)
    # the second run's CPU (one reading before it, one after), over its 20 replies
    assert out == {**LOADED, "loop_us": pytest.approx(25.0), "process_us": pytest.approx(50.0)}
    assert runs == []


def test_two_missed_windows_fail_with_the_daemons_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endtoend, "child_json", lambda argv, timeout: MISSED)
    with pytest.raises(RuntimeError, match=r"(?s)twice: the machine is too busy.*the daemon's log"):
        endtoend.load(daemon(), 1.0, 0.3)
