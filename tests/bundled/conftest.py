"""Fixtures for the bundled hooks' tests.

``make_ctx`` builds the ``HookContext`` the loader would pass a hook, under ``tmp_path`` (for
calling a handler directly); ``make_daemon`` gives a real ``gatewayd run`` on its own state dir.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks import HookContext

from .daemon import Daemon
from .hookutil import RecordingLog


@pytest.fixture
def make_ctx(tmp_path: Path) -> Callable[..., HookContext]:
    """``make_ctx(name, config={}, workspace=None)``: a context under ``tmp_path/state``."""

    def make(
        name: str, config: Mapping[str, Any] | None = None, workspace: Path | None = None
    ) -> HookContext:
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        ws = workspace or state / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        return HookContext(
            hook_name=name,
            hook_key=name,
            config={"enabled": True, "env": {}, "timeoutMs": None, **(config or {})},
            env={},
            log=RecordingLog(),
            state_dir=state,
            workspace_dir=ws,
        )

    return make


MakeDaemon = Callable[..., Daemon]


@pytest.fixture
def make_daemon() -> Iterator[MakeDaemon]:
    """``make_daemon(entries={})``: a :class:`Daemon` (not started) on a fresh state dir.

    Its config sets ``hooks.entries`` to ``entries``, fires ``gateway:startup`` without delay and
    turns the file watcher off (these tests never edit hooks). Every daemon is stopped and its
    state dir removed afterwards.
    """
    daemons: list[Daemon] = []

    def make(entries: Mapping[str, Any] | None = None) -> Daemon:
        state = Path(tempfile.mkdtemp(prefix="gw5-", dir="/tmp"))
        config = {
            "gateway": {"startupHookDelayMs": 0},
            "hooks": {"load": {"watch": False}, "entries": dict(entries or {})},
        }
        (state / "gatewayd.yaml").write_text(json.dumps(config))  # JSON is YAML
        (state / "workspace").mkdir()
        daemon = Daemon(state)
        daemons.append(daemon)
        return daemon

    yield make
    for daemon in daemons:
        try:
            daemon.stop()
        finally:
            shutil.rmtree(daemon.state, ignore_errors=True)
