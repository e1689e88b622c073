"""What one load found: a record per hook discovered, and the load's result.

:class:`HookRecord` is one hook as ``gatewayd hooks list --json`` shows it, with one status
(the loader's module docstring lists them in the order they are checked). :class:`LoadResult`
is everything one build found and made, handed to the event loop to be swapped into a registry
at once (:meth:`LoadResult.apply`). :func:`hooks_listing` and :func:`agents_summary` are the
documents the ``hooks`` and ``status`` ops build from a load.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import structlog

from gatewayd.hooks.agents import HookScope, in_scope, plain_name
from gatewayd.hooks.handlers import Handler
from gatewayd.hooks.node.resolve import NodeBinary
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.spec import LoadSpec

log = structlog.get_logger("gatewayd.hooks")


@dataclass(slots=True)
class HookRecord:
    """One discovered hook, as ``gatewayd hooks list --json`` shows it."""

    name: str
    hook_key: str
    description: str
    emoji: str | None
    source: str
    """``extra``, ``bundled``, ``managed``, ``workspace`` or ``config`` (``hooks.handlers``)."""
    path: str
    handler: str | None
    events: list[str]
    status: str
    """``ready``, ``disabled``, ``ineligible``, ``failed``, ``shadowed``, ``skipped`` (no
    events) or ``invalid`` (unusable HOOK.md)."""
    eligible: bool
    enabled: bool
    reasons: list[str]
    missing: Mapping[str, Sequence[str]]
    warnings: list[str] = field(default_factory=list)
    """Problems that do not stop the hook (unknown keys in its metadata)."""
    agent: str | None = None
    """The agent whose workspace holds it (``None``: a shared hook; ``hooks/agents.py``)."""
    subagent: str | None = None
    """The subagent whose hooks dir holds it."""
    agents: list[str] | None = None
    """Its own restriction to some agents (``agents``), else ``None``."""

    @property
    def scope(self) -> HookScope:
        """Which events it serves, as its handlers' :class:`HookScope` says (a scoped hook's
        name is ``<plain name>@<agentId>[/<subId>]``: what it replaces is before the ``@``)."""
        qualified = self.agent is not None and "@" in self.name
        return HookScope(
            agent=self.agent,
            subagent=self.subagent,
            agents=frozenset(self.agents) if self.agents is not None else None,
            replaces=plain_name(self.name) if qualified else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (camelCase keys)."""
        return {
            "name": self.name,
            "hookKey": self.hook_key,
            "description": self.description,
            "emoji": self.emoji,
            "source": self.source,
            "path": self.path,
            "handler": self.handler,
            "events": list(self.events),
            "status": self.status,
            "eligible": self.eligible,
            "enabled": self.enabled,
            "reasons": list(self.reasons),
            "missing": {k: list(v) for k, v in self.missing.items()},
            "warnings": list(self.warnings),
            "agent": self.agent,
            "subagent": self.subagent,
            "agents": list(self.agents) if self.agents is not None else None,
        }

    def summary_line(self) -> str:
        """``name: reason; reason`` as the ``skipped`` / ``failed`` lists hold it."""
        return f"{self.name}: {'; '.join(self.reasons) or self.status}"


SKIPPED_STATUSES = frozenset({"invalid", "shadowed", "ineligible", "disabled", "skipped"})


@dataclass
class LoadResult:
    """What one load found and built; see :meth:`summary` and :meth:`apply`."""

    discovered: int
    eligible: int
    registered: int
    skipped: list[str]
    failed: list[str]
    records: list[HookRecord]
    handlers: list[tuple[Handler, Sequence[str]]]
    """Ready file hooks and their event keys, in load order (for ``set_file_hooks``)."""
    rejected_roots: list[str] = field(default_factory=list)
    """Roots left out, with why: ``hooks.load.extraDirs`` entries that resolve outside the state
    dir, roots (and ``subagents`` dirs) that exist but cannot be listed."""
    not_hooks: list[str] = field(default_factory=list)
    """``path: reason`` for each code file in a root that is not a single-file hook."""
    node_binary: NodeBinary | None = None
    """The Node chosen to run this load's JS/TS handlers (``None`` when there are none)."""
    node_records: dict[Handler, HookRecord] = field(default_factory=dict)
    """Each JS/TS handler's record: its module is imported after the build, by the Node
    worker (``gatewayd.hooks.node.loading``), and a failure there is :meth:`fail`."""

    def fail(self, handler: Handler, reason: str) -> None:
        """Mark a built handler's hook ``failed`` with ``reason`` and drop it from the load."""
        record = self.node_records[handler]
        record.status, record.reasons = "failed", [reason]
        self.handlers = [(h, keys) for h, keys in self.handlers if h is not handler]
        self.registered = sum(r.status == "ready" for r in self.records)
        self.failed.append(record.summary_line())

    @property
    def warnings(self) -> int:
        """How many warnings the hooks carry (unknown event names, unknown keys, ...)."""
        return sum(len(record.warnings) for record in self.records)

    def summary(self) -> dict[str, Any]:
        """``{discovered, eligible, registered, skipped, failed, warnings}`` (the ``reload``
        reply; ``warnings`` is a count)."""
        return {
            "discovered": self.discovered,
            "eligible": self.eligible,
            "registered": self.registered,
            "skipped": list(self.skipped),
            "failed": list(self.failed),
            "warnings": self.warnings,
        }

    def apply(self, registry: HookRegistry, spec: LoadSpec) -> None:
        """Swap these file hooks into ``registry`` (code hooks stay) and log the outcome.

        Call it on the event loop: it is one atomic swap plus the log lines, no I/O.
        """
        registry.default_timeout_s = spec.timeout_ms / 1000
        registry.agents = spec.agents
        registry.set_file_hooks(self.handlers)
        self.log()

    def log(self) -> None:
        """One line per hook that is not ready (and per warning), then one summary line."""
        for problem in self.rejected_roots:
            log.warning("hooks.root_rejected", reason=problem)
        for record in self.records:
            for warning in record.warnings:
                log.warning("hook.warning", hook=record.name, warning=warning)
            if record.status == "ready":
                continue
            level: Callable[..., Any] = {
                "failed": log.error,
                "invalid": log.warning,
                "disabled": log.debug,
            }.get(record.status, log.info)
            level(
                f"hook.{record.status}", hook=record.name, path=record.path, reasons=record.reasons
            )
        log.info(
            "hooks.loaded",
            discovered=self.discovered,
            eligible=self.eligible,
            registered=self.registered,
            skipped=len(self.skipped),
            failed=len(self.failed),
            warnings=self.warnings,
        )


def hooks_listing(spec: LoadSpec, result: LoadResult) -> dict[str, Any]:
    """The ``gatewayd hooks list --json`` document: ``{stateDir, workspaceDir, agents,
    hooks}``; ``agents`` is the default agent's id and every configured agent's."""
    return {
        "stateDir": str(spec.state_dir),
        "workspaceDir": str(spec.workspace_dir),
        "agents": spec.agents.to_json(),
        "hooks": [record.to_json() for record in result.records],
    }


def serving_records(records: list[HookRecord], agent: str, serving: str) -> list[HookRecord]:
    """The records of the hooks that serve ``agent``'s sessions (``serving``: whose hooks do,
    the agent itself when configured, else the default agent): shared ones, less those its
    own hooks replace, its own, and its subagents' (each as it would serve its subagent)."""
    own = {
        id(r)
        for r in in_scope(records, attrgetter("scope"), attrgetter("name"), agent, serving, None)
    }
    return [
        r
        for r in records
        if id(r) in own or (r.subagent is not None and r.scope.serves(agent, serving, r.subagent))
    ]


def agents_summary(spec: LoadSpec, records: list[HookRecord]) -> dict[str, Any]:
    """Which ready hooks serve each configured agent (the ``status`` op's ``agents``):
    ``{id: {default, workspace, hooks: [...], subagents: {subId: [...]}}}``."""
    agents = spec.agents
    summary: dict[str, Any] = {}
    for agent in agents.agent_ids():
        ready = [r for r in serving_records(records, agent, agent) if r.status == "ready"]
        subagents: dict[str, list[str]] = {}
        for record in ready:
            if record.subagent is not None:
                subagents.setdefault(record.subagent, []).append(record.name)
        summary[agent] = {
            "default": agent == agents.default,
            "workspace": str(agents.workspaces.get(agent, spec.workspace_dir)),
            "hooks": [r.name for r in ready if r.subagent is None],
            "subagents": subagents,
        }
    return summary


__all__ = [
    "SKIPPED_STATUSES",
    "HookRecord",
    "LoadResult",
    "agents_summary",
    "hooks_listing",
    "serving_records",
]
