"""What a dispatch did: one record per handler that ran (or failed), and the dispatch's report.

:class:`HandlerOutcome` is the one record of a handler's run. Every dispatch returns a
:class:`DispatchReport` with the records of the handlers that failed or timed out (what retries
need); a traced dispatch (``event.trace``) has one for every handler, in order, with what it
changed (:class:`gatewayd.hooks.trace.TraceRecorder`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from gatewayd.hooks.handlers import Handler
from gatewayd.hooks.runners import Outcome


class HandlerOutcome(NamedTuple):
    """One handler's run: ``outcome`` is ``ok``, ``error``, ``timeout`` or ``skipped``."""

    hook: str
    error: str
    """The error message, the timeout, or why it was skipped; ``""`` when ``ok``."""
    outcome: str
    kind: str
    """``python``, ``command`` or ``js``."""
    duration_ms: float
    changed: Mapping[str, Any] | None = None
    """Traced runs only: ``{messages: [...added], context: {added, changed, removed}}``."""

    def to_json(self) -> dict[str, Any]:
        """The wire form of one trace entry."""
        data: dict[str, Any] = {
            "hook": self.hook,
            "kind": self.kind,
            "outcome": self.outcome,
            "durationMs": self.duration_ms,
        }
        if self.error:
            data["reason" if self.outcome == "skipped" else "error"] = self.error
        if self.changed is not None:
            data["changed"] = dict(self.changed)
        return data


class DispatchReport(NamedTuple):
    """What one dispatch did: handlers run, and how many of them failed or timed out."""

    handlers: int
    errors: int
    timeouts: int
    outcomes: tuple[HandlerOutcome, ...] = ()
    """Per-handler records, in plan order: of every handler when the event is traced, else
    only of those that failed or timed out."""


def failure(handler: Handler, outcome: Outcome, seconds: float) -> HandlerOutcome:
    """The record of a handler that just failed or timed out (its message from its stats)."""
    last = handler.stats.last_error
    return HandlerOutcome(
        handler.hook,
        last[1] if last is not None else outcome.value,
        outcome.value,
        handler.language,
        round(seconds * 1000, 3),
    )


def report_of(outcomes: list[HandlerOutcome]) -> DispatchReport:
    """The report of a dispatch whose handlers' records are ``outcomes``."""
    return DispatchReport(
        len(outcomes),
        sum(o.outcome == "error" for o in outcomes),
        sum(o.outcome == "timeout" for o in outcomes),
        tuple(outcomes),
    )


__all__ = ["DispatchReport", "HandlerOutcome", "failure", "report_of"]
