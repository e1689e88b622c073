"""Fixtures for the bundled hooks' tests.

``make_ctx`` builds the ``HookContext`` the loader would pass a hook, under ``tmp_path`` (for
calling a handler directly), logging into ``log_records``; ``make_daemon`` sets up a real gateway
configured for the bundled hooks, to start in the test's own loop (:class:`Setup`);
:func:`install_recorder` adds a workspace hook that records each inbound message and echoes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from gatewayd.hooks import HookContext
from tests.support.fixtures import StartGateway
from tests.support.hooks import recorder, write_hook_dir
from tests.support.inprocess import InProcess
from tests.support.state import read_records, write_config

MakeCtx = Callable[..., HookContext]


class Setup:
    """A state dir with its config and an empty workspace: a gateway not started yet."""

    def __init__(self, state: Path, start_gateway: StartGateway) -> None:
        self.state = state
        self.workspace = state / "workspace"
        self._start = start_gateway

    async def start(self) -> InProcess:
        """Start a gateway on it (again after a stop: a new start, as a new process's)."""
        return await self._start()


MakeDaemon = Callable[..., Setup]


@pytest.fixture
def make_ctx(tmp_path: Path, log_records: list[MutableMapping[str, Any]]) -> MakeCtx:
    """``make_ctx(name, config={}, workspace=None)``: a context under ``tmp_path/state``; what
    the hook logs lands in the ``log_records`` fixture."""

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
            log=structlog.get_logger("gatewayd.hook").bind(hook=name),
            state_dir=state,
            workspace_dir=ws,
        )

    return make


@pytest.fixture
def make_daemon(state_dir: Path, start_gateway: StartGateway) -> MakeDaemon:
    """``make_daemon(entries={})``: a :class:`Setup` with an empty workspace, whose config sets
    ``hooks.entries`` to ``entries`` and fires ``gateway:startup`` without delay."""

    def make(entries: Mapping[str, Any] | None = None) -> Setup:
        write_config(
            state_dir,
            {"gateway": {"startupHookDelayMs": 0}, "hooks": {"entries": dict(entries or {})}},
        )
        setup = Setup(state_dir, start_gateway)
        setup.workspace.mkdir()
        return setup

    return make


def install_recorder(workspace: Path) -> Path:
    """A workspace hook that appends each ``message:received`` to ``<state>/received.jsonl``
    and replies ``echo: <text>`` (so transcripts hold assistant messages too)."""
    return write_hook_dir(
        workspace / "hooks",
        "recorder",
        events=["message:received"],
        handler=recorder(
            "received.jsonl",
            keep=("from", "content", "channelId"),
            reply='event.messages.append("echo: " + event.context.get("content", ""))',
        ),
    )


def received(state: Path) -> list[dict[str, Any]]:
    """What the recorder saw: ``{from, content, channelId, sessionKey}`` per message."""
    return [{**r["ctx"], "sessionKey": r["session"]} for r in read_records(state, "received.jsonl")]
