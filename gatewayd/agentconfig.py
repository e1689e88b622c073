"""The agent's own config file (``agent.configFile``): read for hooks' ``requires.config``.

Hooks written for Eliza, Milady or OpenClaw require keys of *their agent's* config, such as
``chatHistory.enabled`` or ``browser.enabled``, which are no part of gatewayd's schema. When
``agent.configFile`` names that file (``~/.eliza/eliza.json``, ``~/.openclaw/openclaw.json``),
such keys are read from it. It is JSON5, as those agents write it (comments, trailing commas,
unquoted keys); plain JSON is JSON5. The file is only read, never written, and a missing or
broken file is not a config error: it is the reason the requirement is unmet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gatewayd.atomic import read_regular

MAX_AGENT_CONFIG_BYTES = 4 << 20
"""An agent config larger than this is not read (it is the reason a requirement is unmet)."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What was read from ``agent.configFile``: its data, or why there is none."""

    path: Path | None = None
    """The file, ``None`` when ``agent.configFile`` is not set."""
    data: Any = field(default_factory=lambda: MappingProxyType({}))
    error: str | None = None
    """Why the file could not be used (unreadable, not JSON5, not an object)."""


def read_agent_config(configured: str | os.PathLike[str] | None, base: Path) -> AgentConfig:
    """Read ``agent.configFile`` (``~`` expanded, relative to ``base``); never raises."""
    if configured is None:
        return AgentConfig()
    path = Path(os.path.expanduser(configured))
    if not path.is_absolute():
        path = base / path
    try:
        # Read on the event loop (config.load_spec): a FIFO there froze the whole daemon, a
        # link to /dev/zero read until memory ran out; read_regular refuses both unread.
        text = read_regular(path, MAX_AGENT_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        return AgentConfig(path, error=f"agent.configFile {path} does not exist")
    except (OSError, UnicodeDecodeError) as exc:
        return AgentConfig(path, error=f"agent.configFile {path} cannot be read: {exc}")
    # Imported here, not at the top: pyjson5 adds ~4.8 MiB to the daemon's RSS, and a daemon
    # without agent.configFile never needs it.
    import pyjson5

    try:
        data = pyjson5.decode(text)
    except pyjson5.Json5Exception as exc:
        return AgentConfig(path, error=f"agent.configFile {path} is not valid JSON5: {exc}")
    if not isinstance(data, dict):
        kind = type(data).__name__
        return AgentConfig(path, error=f"agent.configFile {path} must hold an object, got {kind}")
    return AgentConfig(path, data)
