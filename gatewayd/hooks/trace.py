"""Tracing a dispatch: what each handler did with one event, and why others did not run.

A traced dispatch (``event.trace``: the ``trace: true`` request field, ``gatewayd send|trigger
--trace``, ``gatewayd hooks test``) runs through the one dispatch engine like any other
(:mod:`gatewayd.hooks.engine`), with a :class:`TraceRecorder` watching it: before each handler
it notes the reply lines and a fingerprint of the context, after it records the handler's
outcome, duration and what it changed (messages added; context keys added, changed, removed).
An untraced dispatch has no recorder and pays for none of this.

:func:`not_loaded` explains the hooks that subscribe to an event but did not run, from the
last load's records (``invalid``, ``ineligible``, ``disabled``, ``failed``, ...), and
:func:`misspelt` names the hooks subscribed to a name nothing fires whose closest known name is
the event (a misspelt ``message:recieved`` in the trace of ``message:received``), and
:func:`why_nothing_ran` turns that into the one sentence a trace shows when no handler ran.
:func:`trace_entry` is one event of a trace reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

from gatewayd.hooks.agents import AgentsSpec, in_scope
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import Handler
from gatewayd.hooks.outcomes import DispatchReport, HandlerOutcome, failure, report_of
from gatewayd.hooks.runners import Outcome
from gatewayd.hooks.vocabulary import resolve, resolve_all, suggest


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


class TraceRecorder:
    """Records every handler's run of one traced dispatch (the engine calls :meth:`before` and
    :meth:`after` around each handler); :meth:`report` is the dispatch's report."""

    __slots__ = ("_context", "_messages", "outcomes")

    def __init__(self) -> None:
        self.outcomes: list[HandlerOutcome] = []
        self._messages = 0
        self._context: dict[str, str] = {}

    def before(self, handler: Handler, event: HookEvent) -> None:
        """``handler`` is about to run: note what it may change."""
        self._messages = len(event.messages)
        self._context = _snapshot(event.context)

    def after(self, handler: Handler, event: HookEvent, outcome: Outcome, seconds: float) -> None:
        """``handler`` ran for ``seconds`` with ``outcome``: record it and what it changed."""
        changed = {
            "messages": [str(m) for m in event.messages[self._messages :]],
            "context": _changes(self._context, event.context),
        }
        if outcome is Outcome.OK:
            record = HandlerOutcome(
                handler.hook, "", "ok", handler.language, round(seconds * 1000, 3), changed
            )
        else:
            record = failure(handler, outcome, seconds)._replace(changed=changed)
        self.outcomes.append(record)

    def report(self) -> DispatchReport:
        """The report of the dispatch: every handler that ran, in order."""
        return report_of(self.outcomes)


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


def misspelt(records: Iterable[Any], key: str) -> list[HandlerOutcome]:
    """``skipped`` records for the hooks that subscribe to a name nothing fires whose closest
    known name is ``key`` (``message:recieved`` in the trace of ``message:received``): the
    did-you-mean of the load's warning, where the event is looked at."""
    skipped = []
    for record in records:
        for name in record.events:
            if resolve(name).warnings and suggest(name) == key:
                skipped.append(
                    HandlerOutcome(
                        record.name,
                        f"subscribed to {name!r}, which nothing fires (did you mean {key}?)",
                        "skipped",
                        "python",
                        0.0,
                    )
                )
                break
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
    skipped = not_loaded(records, event.key) + misspelt(records, event.key)
    if agents is not None:
        skipped += not_serving(records, event.key, event.session_key, agents)
    entry: dict[str, Any] = {
        "event": event.key,
        "handlers": [o.to_json() for o in [*ran, *skipped]],
    }
    if not ran:
        entry["reason"] = why_nothing_ran(event.key, skipped)
    return entry
