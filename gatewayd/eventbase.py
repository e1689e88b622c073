"""The context every event starts from: ``cfg``, the session's agent and that agent's workspace.

Every event the gateway builds (a message's, a trigger's, ``gateway:startup``, a journal replay)
carries ``cfg`` (the effective config as hooks see it, :func:`~gatewayd.hooks.cfgview.public_cfg`:
read-only by convention), ``agentId`` (and ``subagentId``) of its session key, and that agent's
``workspaceDir`` (the default agent's for an agent not in ``agents``). :class:`EventBases` builds
those dicts once per agent and per session key and hands out the same dict again: every event of
a session takes its base, so a lookup must cost one dict probe, not parsing the key.

Agent ids and session keys come from clients, so each cache is bounded and starts afresh when
full. A reload replaces the config and with it every base (:meth:`EventBases.update`).
"""

from __future__ import annotations

from typing import Any

from gatewayd.config import Config
from gatewayd.hooks.agents import parse_session_key
from gatewayd.hooks.cfgview import public_cfg

MAX_AGENT_BASES = 1024
"""Bases kept per ``(agent, subagent)`` before the cache starts afresh."""
MAX_SESSION_BASES = 4 * MAX_AGENT_BASES
"""Bases kept per session key before that cache starts afresh."""


class EventBases:
    """The base context of each session's events; call it with a session key (or none for the
    default agent's). Treat the dicts it returns as read-only: they are shared."""

    __slots__ = ("_agents", "_by_agent", "_by_session", "_cfg", "_default", "_workspace")

    def __init__(self, config: Config) -> None:
        self._by_agent: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._by_session: dict[str, dict[str, Any]] = {}
        self.update(config)

    def update(self, config: Config) -> None:
        """Take a new config's ``cfg``, agents and workspaces (a reload); every base is new."""
        self._cfg = public_cfg(config.effective())  # each hook sees its own entry: cfgview.py
        self._agents = config.agents
        self._workspace = config.paths.workspace
        self._by_agent = {}
        self._by_session = {}
        self._default = self._agent_base(config.agents.default, None)

    def __call__(self, session_key: str | None = None, /) -> dict[str, Any]:
        """The base of ``session_key``'s events (``None``: the default agent's)."""
        if session_key is None:
            return self._default
        found = self._by_session.get(session_key)
        if found is None:
            if len(self._by_session) >= MAX_SESSION_BASES:
                self._by_session.clear()
            found = self._agent_base(*parse_session_key(session_key, self._agents.default))
            self._by_session[session_key] = found
        return found

    def _agent_base(self, agent: str, subagent: str | None) -> dict[str, Any]:
        found = self._by_agent.get((agent, subagent))
        if found is None:
            if len(self._by_agent) >= MAX_AGENT_BASES:
                self._by_agent.clear()
            workspace = self._agents.workspaces.get(agent) or self._workspace
            found = {"cfg": self._cfg, "workspaceDir": str(workspace), "agentId": agent}
            if subagent is not None:
                found["subagentId"] = subagent
            self._by_agent[(agent, subagent)] = found
        return found


__all__ = ["MAX_AGENT_BASES", "EventBases"]
