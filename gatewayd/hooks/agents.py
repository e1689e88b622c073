"""Agents and subagents: whose hooks serve an event (docs/design.md s. 2.3, docs/hooks.md).

A session key names its agent: ``agent:<agentId>:<rest>``; one whose rest starts with
``subagent:<subId>`` is a session of that agent's subagent ``<subId>``. Any other key (``main``,
``user-123``, ``gateway:startup``) and an event with no session belong to the default agent
(``agents.<id>.default: true``, else ``main``).

Which hooks run for an event:

* the shared hooks (extra dirs, bundled, managed), unless a hook restricts itself to some agents
  (``agents: [id, ...]`` in its metadata or ``hooks.entries.<hookKey>.agents``), when they run
  only for events whose ``agentId`` is listed (a subagent's events carry its parent's
  ``agentId``);
* the serving agent's own workspace hooks. The serving agent is the session key's agent when it
  is configured (``agents.<id>``), else the default agent: a single-agent setup needs no
  ``agents`` section and its workspace hooks serve every session as before;
* in a subagent session, the subagent's own hooks (``<agent workspace>/subagents/<subId>/hooks``)
  *instead of* its agent's workspace hooks, as Eve runs a subagent's ``agent/hooks/``.

A hook of a non-default agent's workspace or of a subagent is named ``<name>@<agentId>`` or
``<name>@<agentId>/<subId>`` (so two agents may each have an ``audit``), and within its scope it
replaces a shared hook of the plain name. The default agent's own workspace hooks keep their
plain names and, as before agents existed, replace a shared hook of the same name everywhere.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

T = TypeVar("T")
V = TypeVar("V")

DEFAULT_AGENT: Final = "main"
"""The default agent's id when no ``agents.<id>`` says ``default: true`` (OpenClaw's)."""

SUBAGENTS_DIR: Final = "subagents"
"""Under an agent's workspace: ``subagents/<subId>/hooks`` holds a subagent's hooks."""

_NO_AGENTS: Mapping[str, Path] = types.MappingProxyType({})


def parse_session_key(session_key: str, default: str = DEFAULT_AGENT) -> tuple[str, str | None]:
    """``(agentId, subagentId or None)`` of a session key; see the module docstring."""
    if not session_key.startswith("agent:"):
        return default, None
    parts = session_key.split(":", 4)
    if len(parts) < 3 or not parts[1] or not parts[2]:
        return default, None
    if parts[2] == "subagent" and len(parts) > 3 and parts[3]:
        return parts[1], parts[3]
    return parts[1], None


@dataclass(frozen=True, slots=True)
class AgentsSpec:
    """The configured agents: the default one and each other agent's workspace."""

    default: str = DEFAULT_AGENT
    workspaces: Mapping[str, Path] = field(default_factory=lambda: _NO_AGENTS)
    """``agents.<id>.workspace`` of each configured agent other than the default (whose
    workspace is the load spec's ``workspace_dir``)."""

    def scope(self, session_key: str) -> tuple[str, str, str | None]:
        """``(agentId, serving agent, subagentId or None)`` of a session key."""
        agent, subagent = parse_session_key(session_key, self.default)
        serving = agent if agent in self.workspaces else self.default
        return agent, serving, subagent

    def agent_ids(self) -> list[str]:
        """Every configured agent, the default first."""
        return [self.default, *sorted(a for a in self.workspaces if a != self.default)]

    def to_json(self) -> dict[str, Any]:
        """``{default, ids}``: what the ``hooks`` op and ``hooks list --json`` say of them."""
        return {"default": self.default, "ids": self.agent_ids()}


@dataclass(frozen=True, slots=True)
class HookScope:
    """Which events a file hook serves (see the module docstring)."""

    agent: str | None = None
    """The agent whose workspace holds the hook; ``None``: a shared hook."""
    subagent: str | None = None
    """The subagent whose ``hooks`` dir holds it (with ``agent``)."""
    agents: frozenset[str] | None = None
    """The hook's own restriction (``agents: [...]``); ``None``: no restriction."""
    replaces: str | None = None
    """A scoped hook's plain name: the shared hook it replaces in its scope."""

    def serves(self, agent: str, serving: str, subagent: str | None) -> bool:
        """Whether an event of ``agent`` (served by ``serving``, in ``subagent``) runs it."""
        if self.agent is not None and (self.agent != serving or self.subagent != subagent):
            return False
        return self.agents is None or agent in self.agents

    def label(self) -> str | None:
        """``<agentId>`` or ``<agentId>/<subId>`` of a scoped hook, else ``None``."""
        if self.agent is None:
            return None
        return self.agent if self.subagent is None else f"{self.agent}/{self.subagent}"


SHARED: Final = HookScope()
"""The scope of a hook that serves every agent."""


def plain_name(name: str) -> str:
    """``audit`` of a scoped hook's ``audit@ops`` or ``audit@ops/res`` (agent ids hold no
    ``@``), else ``name`` itself."""
    return name.rpartition("@")[0] or name


def entry_for(entries: Mapping[str, V], hook_key: str) -> V | None:
    """``hooks.entries.<hook_key>``; a scoped hook's key (``audit@ops``) falls back to its
    plain one (``audit``) when it has no entry of its own."""
    found = entries.get(hook_key)
    if found is None and "@" in hook_key:
        found = entries.get(plain_name(hook_key))
    return found


def in_scope(
    items: Iterable[T],
    scope_of: Callable[[T], HookScope],
    name_of: Callable[[T], str | None],
    agent: str,
    serving: str,
    subagent: str | None,
) -> list[T]:
    """The items (handlers, or records of hooks) that serve an event of ``agent`` (served by
    ``serving``, in ``subagent``), in order: those whose scope serves it, less a shared one
    whose name a scoped one that serves it replaces. ``name_of`` gives the name a replacement
    matches (``None``: never replaced, e.g. a handler registered in code)."""
    here = [item for item in items if scope_of(item).serves(agent, serving, subagent)]
    replaced = {scope.replaces for item in here if (scope := scope_of(item)).replaces}
    if not replaced:
        return here
    return [
        item for item in here if scope_of(item).agent is not None or name_of(item) not in replaced
    ]
