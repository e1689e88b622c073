"""Fixtures for the bundled hooks' tests.

``make_ctx`` builds the ``HookContext`` the loader would pass a hook, under ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks import HookContext

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
