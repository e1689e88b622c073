"""Which hooks ``gatewayd hooks list|info`` shows: the running daemon's, or this process's.

Two views of the same records (:class:`~gatewayd.hooks.loader.HookRecord`):

``daemon``  the ``hooks`` op of the running daemon: what it loaded (with the environment and
            config *it* started with), each hook with its counters (calls, errors, timeouts,
            stalls, last error, p50/p99);
``local``   this process loads the hooks as a ``gatewayd run`` started now would, with this
            shell's environment (no counters).

``--daemon`` asks for the first (an error when no daemon runs), ``--local`` for the second; by
default the daemon's view is shown when one is running, else the local one. Every output says
which view it is, since an environment variable set in one shell and not the other gives
different answers.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

from gatewayd.cli.common import load_config_or_exit
from gatewayd.client import QUICK_TIMEOUT_S, request, socket_path
from gatewayd.exits import UserError
from gatewayd.hooks.agents import DEFAULT_AGENT
from gatewayd.hooks.loader import SKIPPED_STATUSES, HookLoader, HookRecord
from gatewayd.hooks.node.loading import check_node_hooks
from gatewayd.logging import configure_logging


@dataclass
class HookView:
    """The records shown, where they came from, and the daemon's counters by hook name."""

    view: str
    """``daemon`` or ``local``."""
    source: str
    """For the header: the daemon's socket, or the state dir loaded here."""
    state_dir: str
    workspace_dir: str
    records: list[HookRecord]
    stats: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    rejected_roots: list[str] = field(default_factory=list)
    default_agent: str = DEFAULT_AGENT
    agent_ids: list[str] = field(default_factory=lambda: [DEFAULT_AGENT])
    """The configured agents, the default first."""

    def serving(self, agent: str) -> str:
        """Whose hooks serve ``agent``'s sessions: its own when configured, else the default
        agent's (``gatewayd/hooks/agents.py``)."""
        return agent if agent in self.agent_ids else self.default_agent

    def header(self) -> str:
        if self.view == "daemon":
            return f"the running daemon's view ({self.source})"
        return f"this process's view: the hooks a gatewayd started now would load ({self.source})"

    def totals(self) -> str:
        records = self.records
        counts: dict[str, int] = {}
        for record in records:
            counts[record.status] = counts.get(record.status, 0) + 1
        skipped = sum(counts.get(status, 0) for status in SKIPPED_STATUSES)
        by_status = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        return (
            f"{len(records)} discovered, {sum(r.eligible for r in records)} eligible, "
            f"{counts.get('ready', 0)} registered, {skipped} skipped, "
            f"{counts.get('failed', 0)} failed, {sum(len(r.warnings) for r in records)} warnings"
            + (f": {by_status}" if by_status else "")
        )

    def listing(self, records: list[HookRecord]) -> dict[str, Any]:
        """The ``--json`` document of ``records`` in this view."""
        hooks = []
        for record in records:
            data = record.to_json()
            if self.view == "daemon":
                data["stats"] = self.stats.get(record.name)
            hooks.append(data)
        return {
            "view": self.view,
            "stateDir": self.state_dir,
            "workspaceDir": self.workspace_dir,
            "agents": {"default": self.default_agent, "ids": list(self.agent_ids)},
            "hooks": hooks,
        }


def record_from_json(data: dict[str, Any]) -> HookRecord:
    """A :class:`HookRecord` from its ``to_json()`` form (the ``hooks`` op's records)."""
    return HookRecord(
        name=data["name"],
        hook_key=data.get("hookKey") or data["name"],
        description=data.get("description") or "",
        emoji=data.get("emoji"),
        source=data.get("source") or "",
        path=data.get("path") or "",
        handler=data.get("handler"),
        events=list(data.get("events") or []),
        status=data.get("status") or "",
        eligible=bool(data.get("eligible")),
        enabled=bool(data.get("enabled")),
        reasons=list(data.get("reasons") or []),
        missing={k: list(v) for k, v in (data.get("missing") or {}).items()},
        warnings=list(data.get("warnings") or []),
        agent=data.get("agent"),
        subagent=data.get("subagent"),
        agents=list(data["agents"]) if data.get("agents") is not None else None,
    )


def _daemon_view(args: argparse.Namespace, required: bool) -> HookView | None:
    path = socket_path(getattr(args, "socket", None), args.config)
    try:
        reply = request(path, {"op": "hooks"}, QUICK_TIMEOUT_S)
    except UserError as exc:
        if not required and str(exc).startswith("gatewayd is not running"):
            return None
        raise
    agents = reply.get("agents") or {}
    return HookView(
        view="daemon",
        source=f"socket {path}",
        state_dir=str(reply.get("stateDir") or ""),
        workspace_dir=str(reply.get("workspaceDir") or ""),
        records=[record_from_json(h) for h in reply.get("hooks") or []],
        stats={h["name"]: h.get("stats") for h in reply.get("hooks") or []},
        default_agent=str(agents.get("default") or DEFAULT_AGENT),
        agent_ids=[str(a) for a in agents.get("ids") or [DEFAULT_AGENT]],
    )


def local_view(args: argparse.Namespace) -> HookView:
    """Load the hooks here as ``gatewayd run`` would; hook output and logs go to stderr."""
    config = load_config_or_exit(args.config)
    configure_logging("warning", "auto", sys.stderr)
    with contextlib.redirect_stdout(sys.stderr):
        loader = HookLoader()
        try:
            result = loader.build(config.load_spec())
            # JS/TS imports are tried, as hooks check and the daemon do: one verdict everywhere.
            check_node_hooks(result)
        finally:
            loader.close()
    return HookView(
        view="local",
        source=f"state dir {config.paths.state}",
        state_dir=str(config.paths.state),
        workspace_dir=str(config.paths.workspace),
        records=result.records,
        rejected_roots=list(result.rejected_roots),
        default_agent=config.agents.default,
        agent_ids=config.agents.agent_ids(),
    )


def hook_view(args: argparse.Namespace) -> HookView:
    """The view ``--daemon`` / ``--local`` (or the default) asks for; see the module doc."""
    if getattr(args, "local", False):
        return local_view(args)
    view = _daemon_view(args, required=getattr(args, "daemon", False))
    return view if view is not None else local_view(args)


def stats_line(stats: dict[str, Any] | None) -> str:
    """``calls 12, errors 1, timeouts 0, stalls 0, p50 0.2 ms, p99 3.1 ms``."""
    if not stats:
        return "not registered in the daemon"
    return (
        f"calls {stats.get('calls', 0)}, errors {stats.get('errors', 0)}, "
        f"timeouts {stats.get('timeouts', 0)}, stalls {stats.get('stalls', 0)}, "
        f"p50 {stats.get('p50Ms', 0)} ms, p99 {stats.get('p99Ms', 0)} ms"
    )


def last_error_line(stats: dict[str, Any] | None) -> str | None:
    """``<time> <message> at <file:line>`` of the last error, if there was one."""
    last = (stats or {}).get("lastError")
    if not last:
        return None
    where = f" at {last['where']}" if last.get("where") else ""
    return f"{last.get('time')} {last.get('message')}{where}"
