"""What the gateway answers its channels: one :class:`Reply` for messages and triggers, and the
typed documents of the ``status``, ``hooks`` and ``reload`` ops.

:class:`Reply` goes from the router (a message) or the facade (a trigger) to the channel, which
turns it into wire fields (docs/design.md section 3). The ``TypedDict`` s carry exactly the keys
section 3 documents for their op; the design doc is the contract, these types hold the code to
it (mypy checks every place that builds one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.records import HookRecord, LoadResult


@dataclass(slots=True)
class Reply:
    """What a message or a waited trigger produced.

    Not ``frozen``: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, 1.14 us against 0.29 us here (timeit), and every ``message`` makes
    one.
    """

    messages: list[str]
    """The reply lines (for a message: those ``message:sending`` let through, as rewritten)."""
    command: str | None = None
    """The ``/name`` the message was, if any (messages only)."""
    blocked: str | None = None
    """Why a ``message:received`` handler blocked the message (then nothing else ran)."""
    result: dict[str, Any] | None = None
    """A trigger's merged handler results (always a dict for a decision event)."""
    timed_out: bool = False
    """A decision event passed ``hooks.decisionTimeoutMs``; ``result`` is what finished."""
    traced: list[tuple[HookEvent, DispatchReport | None]] = field(default_factory=list)
    """Traced only: each event it caused, in order, with its dispatch report (``None`` when it
    was not dispatched before the shutdown deadline)."""
    trace: list[dict[str, Any]] | None = None
    """Traced only: ``traced`` as the wire's trace entries (``{event, handlers, reason?}``)."""


class LoopLag(TypedDict):
    """``status.loop_lag``."""

    warn_ms: int
    stalls: int
    max_lag_ms: int


class HooksSummary(TypedDict):
    """A load's counts: ``status.hooks`` and the ``reload`` reply's ``result``."""

    discovered: int
    eligible: int
    registered: int
    skipped: list[str]
    failed: list[str]
    statuses: dict[str, int]
    warnings: int
    notReady: list[NotReady]
    """Every hook that is not ``ready``, each with its status: ``skipped`` and ``failed`` say
    why in one string, and ``skipped`` mixes the statuses."""


class NotReady(TypedDict):
    """A hook that is not ready: its name, its status (``invalid``, ``ineligible``, ...), why."""

    name: str
    status: str
    reasons: list[str]


class ReloadRecord(TypedDict):
    """One reload as ``status.last_reload`` shows it (and ``reload.done`` logs it)."""

    time: str
    duration_ms: float
    trigger: str
    result: str
    changes: NotRequired[dict[str, Any]]
    restartNeeded: NotRequired[list[str]]
    """Config keys whose new values wait for a restart (the queue's backend, its journal...)."""
    errors: NotRequired[list[str]]


class ReloadOutcome(ReloadRecord):
    """What a reload returns to its caller: its record plus the new load's summary (``None``
    when nothing was loaded)."""

    summary: HooksSummary | None


class ReloadReply(TypedDict):
    """The ``reload`` op's fields."""

    result: HooksSummary | None
    outcome: str
    changes: dict[str, Any] | None
    restartNeeded: NotRequired[list[str]]


class WatchStatus(TypedDict):
    """``status.watch``."""

    mode: str
    roots: list[str]
    files: list[str]


class StatusReply(TypedDict):
    """The ``status`` op's ``status`` (secret-looking values redacted)."""

    pid: int
    version: str
    state: str
    uptime_s: float
    startup_fired: bool
    loop: str
    loop_lag: LoopLag | None
    config: str
    channels: list[dict[str, Any]]
    hooks: HooksSummary
    agents: dict[str, Any]
    queue: dict[str, Any]
    threads: dict[str, int]
    sessions: int
    reloads: int
    last_reload: ReloadRecord | None
    watch: WatchStatus | None


class HooksReply(TypedDict):
    """The ``hooks`` op's fields."""

    view: str
    stateDir: str
    workspaceDir: str
    agents: dict[str, Any]
    hooks: list[dict[str, Any]]
    codeHooks: list[dict[str, Any]]


def statuses(records: Iterable[HookRecord]) -> dict[str, int]:
    """How many hooks have each status (``ready``, ``invalid``, ``ineligible``, ...)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.status] = counts.get(record.status, 0) + 1
    return counts


def summary_of(load: LoadResult) -> HooksSummary:
    """A load's counts with its hooks by status (``status.hooks``, a reload's ``result``)."""
    summary = load.summary()
    return {
        "discovered": summary["discovered"],
        "eligible": summary["eligible"],
        "registered": summary["registered"],
        "skipped": summary["skipped"],
        "failed": summary["failed"],
        "statuses": statuses(load.records),
        "warnings": summary["warnings"],
        "notReady": [
            {"name": r.name, "status": r.status, "reasons": list(r.reasons)}
            for r in load.records
            if r.status != "ready"
        ],
    }


__all__ = [
    "HooksReply",
    "HooksSummary",
    "LoopLag",
    "NotReady",
    "ReloadOutcome",
    "ReloadRecord",
    "ReloadReply",
    "Reply",
    "StatusReply",
    "WatchStatus",
    "statuses",
    "summary_of",
]
