"""How a trace reads on a terminal (``gatewayd send|trigger --trace``, ``gatewayd hooks test``).

A trace is the list the control channel returns under ``trace``: one entry per event, in
dispatch order, each ``{event, handlers: [{hook, kind, outcome, durationMs, error|reason,
changed}], reason?}`` (see :mod:`gatewayd.hooks.trace`). Plain ``json`` only: client commands
never import the daemon stack.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from typing import Any

FAILED_OUTCOMES = frozenset({"error", "timeout"})


def _changes(changed: dict[str, Any] | None) -> str:
    if not changed:
        return ""
    parts = []
    if messages := changed.get("messages"):
        parts.append(f"+{len(messages)} message{'s' * (len(messages) != 1)}")
    context = changed.get("context") or {}
    for what in ("added", "changed", "removed"):
        if keys := context.get(what):
            parts.append(f"context {what}: {', '.join(keys)}")
    return "; ".join(parts) if parts else "no changes"


def format_trace(trace: list[dict[str, Any]]) -> str:
    """The trace as text: one line per event, one indented line per handler."""
    lines = []
    for entry in trace:
        lines.append(
            f"{entry.get('event')}" + (f": {entry['reason']}" if "reason" in entry else "")
        )
        for h in entry.get("handlers") or []:
            outcome = str(h.get("outcome"))
            head = f"  {outcome:<8} {h.get('hook')} ({h.get('kind')})"
            if outcome == "skipped":
                lines.append(f"{head}  {h.get('reason', '')}")
                continue
            line = f"{head} {h.get('durationMs', 0)} ms"
            if outcome in FAILED_OUTCOMES:
                line += f"  {h.get('error', '')}"
            if changes := _changes(h.get("changed")):
                line += f"  [{changes}]"
            lines.append(line)
    return "\n".join(lines)


def trace_failed(trace: list[dict[str, Any]]) -> bool:
    """Whether a handler in the trace failed or timed out."""
    return any(
        h.get("outcome") in FAILED_OUTCOMES for entry in trace for h in entry.get("handlers") or []
    )
