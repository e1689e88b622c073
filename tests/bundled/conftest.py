"""Fixtures for the bundled hooks' tests.

``make_ctx`` builds the ``HookContext`` the loader would pass a hook, under ``tmp_path`` (for
calling a handler directly), logging into ``log_records``; ``make_daemon`` gives a real
``gatewayd run`` (not started) configured for the bundled hooks; :func:`install_recorder` adds a
workspace hook that records each inbound message and echoes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from gatewayd.hooks import HookContext
from tests.support.daemon import Daemon
from tests.support.fixtures import NewDaemon
from tests.support.hooks import recorder, write_hook_dir
from tests.support.state import read_records

MakeCtx = Callable[..., HookContext]
MakeDaemon = Callable[..., Daemon]


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
def make_daemon(new_daemon: NewDaemon) -> MakeDaemon:
    """``make_daemon(entries={})``: a :class:`Daemon` (not started) with an empty workspace.

    Its config sets ``hooks.entries`` to ``entries`` and fires ``gateway:startup`` without delay.
    """

    def make(entries: Mapping[str, Any] | None = None) -> Daemon:
        daemon = new_daemon(
            {"gateway": {"startupHookDelayMs": 0}, "hooks": {"entries": dict(entries or {})}}
        )
        daemon.workspace.mkdir()
        return daemon

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
