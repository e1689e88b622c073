"""What the hook library needs to know to load hooks: a small, frozen load spec.

The library (discovery, eligibility, loader, watcher) reads only this, never the application's
config model, so it can be used and tested on its own. The daemon builds one from its config
(``Config.load_spec()``) on every start and reload.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatewayd.hooks.agents import AgentsSpec, entry_for

_EMPTY: Mapping[str, Any] = types.MappingProxyType({})

MAX_TIMEOUT_MS = 365 * 24 * 3600 * 1000
"""The longest handler timeout a HOOK.md may set: a year, the bound the config puts on every
``...Ms`` setting (``config.MAX_MS``). A far longer one overflowed the float of seconds the
loader computes, and ended the daemon at its load."""


@dataclass(frozen=True, slots=True)
class EntrySpec:
    """One ``hooks.entries.<hookKey>`` entry: the typed keys, and the whole entry as written."""

    enabled: bool = True
    explicit: bool = False
    """Whether the config wrote ``enabled`` (an opt-in hook runs only when it did, as true)."""
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    timeout_ms: int | None = None
    priority: int | None = None
    agents: frozenset[str] | None = None
    """``agents``: the agents this hook serves (``None``: whatever its metadata says)."""
    settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """The entry with Eliza key names (``enabled``, ``env``, ``timeoutMs`` and the hook's own
    settings): what ``ctx.config`` shows the hook."""


DEFAULT_ENTRY = EntrySpec()


@dataclass(frozen=True, slots=True)
class LegacyHandlerSpec:
    """One ``hooks.handlers[]`` entry: a module file run for one event."""

    event: str
    module: str
    export: str | None = None


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """``hooks.load`` settings of the watcher."""

    watch: bool = True
    debounce_ms: int = 5
    poll: bool = False
    poll_interval_ms: int = 300


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """``hooks.node``: which Node runs JS/TS hooks (see ``gatewayd.hooks.node.resolve``)."""

    path: str | None = None
    """``hooks.node.path``: tried before ``node`` on ``PATH``."""
    wheel: bool = True
    """``hooks.node.wheel``: false never uses the Node of the ``gatewayd[node]`` extra."""


@dataclass(frozen=True, slots=True)
class AgentConfigSpec:
    """The agent's own config file (``agent.configFile``), for ``requires.config`` keys that are
    not gatewayd's: its data, where it came from, and why it is unusable (if it is)."""

    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    source: str | None = None
    """The file read; ``None`` when ``agent.configFile`` is not set."""
    error: str | None = None
    written: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """OpenClaw's sections written in gatewayd's own config file (``browser``, ``channels``,
    ...): read first, each section in place of the agent file's."""
    written_in: str = "gatewayd.yaml"
    """Where :attr:`written` came from (for the reasons a requirement is unmet)."""


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """Everything one load reads besides the files themselves."""

    state_dir: Path
    workspace_dir: Path
    bundled_hooks: Path
    managed_hooks: Path
    workspace_hooks: Path
    extra_dirs: tuple[str, ...] = ()
    """``hooks.load.extraDirs`` as written: relative ones are under ``state_dir``."""
    enabled: bool = True
    """``hooks.enabled``: false lists every hook as disabled and loads none."""
    enabled_key: str = "hooks.enabled"
    """Where the config wrote that switch (``hooks.internal.enabled`` in an OpenClaw config):
    what the reason of a hook it disables names."""
    timeout_ms: int = 30_000
    entries: Mapping[str, EntrySpec] = field(default_factory=lambda: _EMPTY)
    handlers: tuple[LegacyHandlerSpec, ...] = ()
    effective_config: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """The effective config as plain data: what ``requires.config`` dot paths look at."""
    config_file: Path | None = None
    """The config file in use (relative ``hooks.handlers`` modules resolve beside it)."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    agent: AgentConfigSpec = field(default_factory=AgentConfigSpec)
    agents: AgentsSpec = field(default_factory=AgentsSpec)
    """``agents``: the default agent and the other agents' workspaces (``hooks/agents.py``)."""

    def entry(self, hook_key: str) -> EntrySpec:
        """``hooks.entries.<hook_key>``, or the all-defaults entry. A scoped hook's key
        (``audit@ops``) falls back to its plain one (``audit``) when it has no entry."""
        return entry_for(self.entries, hook_key) or DEFAULT_ENTRY
