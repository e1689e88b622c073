"""What each handler did with one event: the per-handler outcome record, and traced dispatch.

:class:`HandlerOutcome` is the one record of a handler's run. Every dispatch returns the records
of the handlers that failed or timed out (what retries need); a traced dispatch
(``event.trace``, the ``trace: true`` request field, ``gatewayd send|trigger --trace``)
returns one for every handler, in order, with what it changed: messages it added and context
keys it added, changed or removed.

:func:`run_traced` is that traced dispatch. It is kept apart from ``HookRegistry.dispatch``
on purpose: a trace snapshots the context around every handler, which the hot path never pays.

:func:`not_loaded` explains the hooks that subscribe to an event but did not run, from the
last load's records (``invalid``, ``ineligible``, ``disabled``, ``failed``, ...), and
:func:`why_nothing_ran` turns that into the one sentence a trace shows when no handler ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from operator import attrgetter
from time import perf_counter
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from gatewayd.hooks.agents import AgentsSpec, in_scope
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.results import merge_result
from gatewayd.hooks.runners import (
    Outcome,
    finish_async,
    report_failure,
    run_command,
    run_sync,
)
from gatewayd.hooks.stats import running
from gatewayd.hooks.vocabulary import resolve_all

if TYPE_CHECKING:
    from gatewayd.hooks.registry import HookRegistry


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


def _fingerprint(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # circular, or keys that cannot be compared
        return repr(value)
    except RecursionError:  # nested deeper than json (or repr) goes: compared by identity
        return f"<{type(value).__name__} at {id(value):#x}>"


def _snapshot(context: Mapping[str, Any]) -> dict[str, str]:
    return {key: _fingerprint(value) for key, value in context.items() if key != "cfg"}


def _changes(before: dict[str, str], context: Mapping[str, Any]) -> dict[str, list[str]]:
    after = _snapshot(context)
    return {
        "added": sorted(k for k in after if k not in before),
        "changed": sorted(k for k in after if k in before and after[k] != before[k]),
        "removed": sorted(k for k in before if k not in after),
    }


async def _run_async(handler: Handler, event: HookEvent, timeout_s: float) -> Outcome:
    call = handler.call
    assert call is not None
    running.hook = handler.hook
    try:
        coro = call(event, handler.ctx) if handler.takes_ctx else call(event)
        yielded = coro.send(None)
    except StopIteration as stop:
        if stop.value is not None:
            merge_result(event, handler.hook, stop.value)
        return Outcome.OK
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            raise
        return report_failure(handler, event, exc)
    finally:
        running.hook = None
    return await finish_async(handler, event, coro, yielded, timeout_s)


async def run_traced(
    registry: HookRegistry, event: HookEvent, plan: Iterable[Handler]
) -> list[HandlerOutcome]:
    """Run ``plan`` for ``event`` as dispatch does, recording every handler's outcome and
    changes; the counters are updated as in an untraced dispatch."""
    outcomes: list[HandlerOutcome] = []
    base_cfg = event.context.get("cfg", _NO_CFG)
    for handler in plan:
        if event.halted:  # a handler blocked or cancelled: the rest do not run
            break
        if base_cfg is not _NO_CFG:  # each hook's own cfg view, as in dispatch (cfgview.py)
            event.context["cfg"] = base_cfg if handler.cfg is None else handler.cfg
        timeout_s = handler.timeout_s or registry.default_timeout_s
        messages_before = len(event.messages)
        context_before = _snapshot(event.context)
        t0 = perf_counter()
        if handler.kind is HandlerKind.ASYNC:
            outcome = await _run_async(handler, event, timeout_s)
        elif handler.kind is HandlerKind.SYNC:
            outcome = await run_sync(handler, event, timeout_s, registry.hook_threads())
        elif handler.kind is HandlerKind.NODE:
            outcome = await handler.node.run(event, timeout_s)
        else:
            outcome = await run_command(handler, event, timeout_s)
        seconds = perf_counter() - t0
        handler.stats.record(seconds)
        changed = {
            "messages": [str(m) for m in event.messages[messages_before:]],
            "context": _changes(context_before, event.context),
        }
        if outcome is Outcome.OK:
            outcomes.append(
                HandlerOutcome(
                    handler.hook, "", "ok", handler.language, round(seconds * 1000, 3), changed
                )
            )
        else:
            outcomes.append(failure(handler, outcome, seconds)._replace(changed=changed))
    if base_cfg is not _NO_CFG:
        event.context["cfg"] = base_cfg
    return outcomes


_NO_CFG: Any = object()


def _subscribes(events: Iterable[str], key: str) -> bool:
    etype = key.partition(":")[0]
    keys, _ = resolve_all(list(events))  # written names: message_received is message:received
    return any(e in (key, etype, "*") for e in keys)


def not_loaded(records: Iterable[Any], key: str) -> list[HandlerOutcome]:
    """``skipped`` records for the hooks of the last load that subscribe to ``key`` but are
    not registered (``records``: the load's ``HookRecord`` list), with status and reasons."""
    skipped = []
    for record in records:
        if record.status == "ready" or not _subscribes(record.events, key):
            continue
        reasons = "; ".join(record.reasons)
        skipped.append(
            HandlerOutcome(
                record.name,
                f"{record.status}: {reasons}" if reasons else record.status,
                "skipped",
                "command" if record.handler and not record.handler.endswith(".py") else "python",
                0.0,
            )
        )
    return skipped


def not_serving(
    records: Iterable[Any], key: str, session_key: str, agents: AgentsSpec
) -> list[HandlerOutcome]:
    """``skipped`` records for the ready hooks that subscribe to ``key`` but do not serve this
    session's agent (``gatewayd/hooks/agents.py``), each saying whose sessions it serves."""
    agent, serving, subagent = agents.scope(session_key)
    ready = [r for r in records if r.status == "ready" and _subscribes(r.events, key)]
    served = in_scope(ready, attrgetter("scope"), attrgetter("name"), agent, serving, subagent)
    ran = {id(r) for r in served}
    replacing = {r.scope.replaces: r.name for r in served if r.scope.replaces}
    where = f"agent {agent!r}" + (f", subagent {subagent!r}" if subagent else "")
    skipped = []
    for record in ready:
        if id(record) in ran:
            continue
        scope = record.scope
        if scope.serves(agent, serving, subagent):  # served, but a scoped hook replaces it
            why = f"replaced by {replacing[record.name]} for {where}"
        elif scope.agents is not None and agent not in scope.agents:
            only = ", ".join(record.agents or ())
            why = f"restricted to agents {only} (its agents list); the event is of {where}"
        else:
            owner = scope.label()
            why = (
                f"it belongs to {owner}, whose hooks serve only its sessions; the event is of "
                f"{where}"
            )
        skipped.append(HandlerOutcome(record.name, f"ready, but {why}", "skipped", "python", 0.0))
    return skipped


def why_nothing_ran(key: str, skipped: list[HandlerOutcome]) -> str:
    """The sentence a trace shows for an event no handler ran for."""
    if not skipped:
        return f"no hook subscribes to {key}"
    listed = "; ".join(f"{s.hook} is {s.error}" for s in skipped)
    return f"no handler ran for {key}: {listed}"


def trace_entry(
    event: HookEvent,
    outcomes: Iterable[HandlerOutcome] | None,
    records: Iterable[Any],
    agents: AgentsSpec | None = None,
) -> dict[str, Any]:
    """One event of a trace reply: ``{event, handlers: [...], reason?}``. ``outcomes`` is
    ``None`` for an event the shutdown left undispatched; ``records`` are the last load's;
    with ``agents``, ready hooks that do not serve the event's agent are listed as skipped."""
    if outcomes is None:
        return {"event": event.key, "handlers": [], "reason": "not dispatched: the gateway stopped"}
    ran = list(outcomes)
    records = list(records)
    skipped = not_loaded(records, event.key)
    if agents is not None:
        skipped += not_serving(records, event.key, event.session_key, agents)
    entry: dict[str, Any] = {
        "event": event.key,
        "handlers": [o.to_json() for o in [*ran, *skipped]],
    }
    if not ran:
        entry["reason"] = why_nothing_ran(event.key, skipped)
    return entry
