"""Retrying failed handlers and dead letters: what happens after a dispatch in which one failed.

Per hook, ``hooks.entries.<hookKey>.retries`` (default 0) and ``retryBackoffMs`` (default
1000). With ``retries: 0`` a failure is logged and counted and the event is done, as it always
was. With ``retries: N`` a handler that failed (an exception, a timeout, a non-zero exit) is run
again, alone, up to N more times, waiting ``retryBackoffMs`` before the first retry and twice as
long before each next one; the event's session waits meanwhile, so its order holds. A handler
still failing after its last attempt becomes a dead letter (hook, last error, attempts) in the
journal, which ``gatewayd events`` lists and replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal.base import DeadLetter

if TYPE_CHECKING:
    from gatewayd.config import Config

log = structlog.get_logger("gatewayd.queue")

RetryPolicy = Callable[[str], tuple[int, float]]
"""Hook name -> ``(retries, first backoff in seconds)``."""


def NO_RETRIES(hook: str) -> tuple[int, float]:
    """The policy when nothing is configured: no hook is retried."""
    return 0, 0.0


def retry_policy(config: Config, hook_keys: Iterable[tuple[str, str]]) -> RetryPolicy:
    """The policy of ``config`` for hooks given as ``(name, hookKey)``; a hook registered in
    code is looked up by its name."""
    entries = config.settings.hooks.entries
    table: dict[str, tuple[int, float]] = {}
    for name, key in hook_keys:
        entry = entries.get(key)
        if entry is not None and entry.retries:
            table[name] = (entry.retries, entry.retry_backoff_ms / 1000)
    for key, entry in entries.items():
        if entry.retries and key not in table:
            table[key] = (entry.retries, entry.retry_backoff_ms / 1000)
    if not table:
        return NO_RETRIES

    def policy(hook: str) -> tuple[int, float]:
        return table.get(hook, (0, 0.0))

    return policy


@dataclass(slots=True)
class Settled:
    """What retrying did: the whole report, the dead letters, how many retries ran."""

    report: DispatchReport
    dead: list[DeadLetter] = field(default_factory=list)
    retried: int = 0


def failures(report: DispatchReport) -> list[tuple[str, str]]:
    """``(hook, error)`` of the handlers that failed or timed out in ``report``."""
    return [(o.hook, o.error) for o in report.outcomes if o.outcome in FAILED]


FAILED = frozenset({"error", "timeout"})


async def settle(
    registry: HookRegistry, event: HookEvent, report: DispatchReport, policy: RetryPolicy
) -> Settled:
    """Retry each handler that failed in ``report`` per ``policy``; see the module docstring."""
    handlers, errors, timeouts = report.handlers, report.errors, report.timeouts
    dead: list[DeadLetter] = []
    retried = 0
    for hook, error in failures(report):
        retries, backoff_s = policy(hook)
        if retries <= 0:
            continue
        attempts = 1
        while attempts <= retries:
            await anyio.sleep(backoff_s * (2 ** (attempts - 1)))
            attempts += 1
            retried += 1
            again = await registry.dispatch(event, (hook,))
            handlers += again.handlers
            errors += again.errors
            timeouts += again.timeouts
            if not (still := failures(again)):
                log.info("hook.retry_ok", hook=hook, event_id=event.id, attempts=attempts)
                break
            error = still[0][1]
        else:
            log.error(
                "hook.dead_letter",
                hook=hook,
                event_key=event.key,
                event_id=event.id,
                session_key=event.session_key,
                attempts=attempts,
                error=error,
                fix=f"fix the hook, then `gatewayd events retry {event.id}`",
            )
            dead.append((hook, error, attempts))
    return Settled(DispatchReport(handlers, errors, timeouts, report.outcomes), dead, retried)
