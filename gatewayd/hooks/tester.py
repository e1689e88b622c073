"""Firing one hook at a sample event (``gatewayd hooks test``, the ``test`` control op).

:func:`sample_context` builds a context of the right shape for an event from its
:data:`~gatewayd.hooks.schema.EVENTS` spec: every declared field, with a plausible value for its
name and type (``sessionKey`` is the test's session, ``timestamp`` now, ``content`` a sample
message, ``args`` empty, a session entry for the session fields, ...). ``--context JSON`` is
merged over it.

:func:`test_hook` runs that hook's handlers alone, traced (each handler's outcome, time and
changes), through the registry's dispatch but not the queue (``HookRegistry.dispatch`` with
``handlers``), and returns ``{hook, event, messages, trace,
passed}``. A hook that is not registered runs nothing: the trace says why (its status and reasons
in the last load). The daemon runs it in its own process (its environment, config, counters);
the CLI runs it in a fresh loader when no daemon runs.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from gatewayd.hooks.events import HookEvent, create_hook_event, parse_event_key
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.results import reply_lines
from gatewayd.hooks.schema import BASE_FIELDS, EVENTS, spec_for
from gatewayd.hooks.stats import HookStats
from gatewayd.hooks.vocabulary import resolve_all
from gatewayd.timestamps import iso_now

SAMPLE_SESSION = "agent:main:hooks-test"

_BY_NAME: Mapping[str, Any] = {
    "content": "hello from gatewayd hooks test",
    "from": "hooks-test",
    "to": "hooks-test",
    "senderId": "hooks-test",
    "channelId": "hooks-test",
    "commandSource": "hooks-test",
    "args": "",
    "prompt": "hello from gatewayd hooks test",
    "toolName": "sample_tool",
    "toolCallId": "call-1",
    "reason": "hooks-test",
    "success": True,
    "bootstrapFiles": [],
    "messages": [],
    "params": {},
}


def _value(name: str, kind: Any, session_key: str) -> Any:
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name == "sessionKey":
        return session_key
    if name == "timestamp":
        return iso_now()
    if name in ("sessionId",):
        return "hooks-test-session"
    if name in ("sessionEntry", "previousSessionEntry"):
        return {
            "sessionKey": session_key,
            "sessionId": "hooks-test-session",
            "sessionFile": "",
            "createdAt": iso_now(),
        }
    origin = typing.get_origin(kind) or kind
    if origin in (int, float):
        return 0
    if origin is bool:
        return False
    if origin in (list, tuple):
        return []
    if origin is dict:
        return {}
    return ""


def sample_context(key: str, session_key: str = SAMPLE_SESSION) -> dict[str, Any]:
    """A context for ``key`` with every field its spec declares (see the module docstring)."""
    spec = spec_for(key)
    if spec is None:
        return {}
    try:
        hints = typing.get_type_hints(spec.context)
    except (NameError, TypeError):  # an annotation that cannot be resolved here
        hints = {}
    sample = {
        name: _value(name, hints.get(name, str), session_key)
        for name in spec.fields
        if name not in BASE_FIELDS and name != "gateway"
    }
    if spec.direction is not None:
        sample["direction"] = spec.direction
    return sample


def default_event(name: str, events: Iterable[str]) -> str:
    """The event a hook is tested with when none is given: its first ``type:action``; for a
    bare type the action is the hook's name (``command`` -> ``command:<name>``). Names of
    other systems count as what they stand for (``message_received`` -> ``message:received``)."""
    keys, _ = resolve_all(list(events))
    for key in keys:
        etype, action = parse_event_key(key)
        if etype == "*":
            continue
        if action:
            return key
        family = next((k for k in EVENTS if k.startswith(f"{etype}:")), None)
        return f"{etype}:{name}" if etype == "command" or family is None else family
    return "message:received"


def uncounted(handler: Handler) -> Handler:
    """``handler`` with counters of its own: a test run is no call of the hook's (its calls,
    errors, timeouts and durations in ``hooks list``, ``status`` and the metrics)."""
    copy = dataclasses.replace(handler, stats=HookStats())
    if handler.kind is HandlerKind.NODE:
        copy.node = handler.node.counted_on(copy)
    return copy


def _why(record: Any) -> str:
    reasons = "; ".join(record.reasons)
    if record.status == "ready":
        return "ready, but registered in another process (reload the daemon)"
    return f"{record.status}: {reasons}" if reasons else str(record.status)


async def test_hook(
    registry: HookRegistry,
    records: Iterable[Any],
    name: str,
    key: str | None,
    context: Mapping[str, Any],
    base: Mapping[str, Any],
    session_key: str = SAMPLE_SESSION,
) -> dict[str, Any]:
    """Run hook ``name`` (``records``: the last load's) against a sample ``key`` event; see
    the module docstring. Raises ``LookupError`` for a hook no record or handler has."""
    record = next(
        (r for r in records if name in (r.name, r.hook_key) and r.status != "shadowed"), None
    )
    handlers = registry.handlers_of(record.name if record is not None else name)
    if record is None and not handlers:
        raise LookupError(name)
    hook = record.name if record is not None else name
    key = key or default_event(hook, record.events if record is not None else ())
    etype, _, action = key.partition(":")
    sample = {**sample_context(key, session_key), **context}
    event: HookEvent = create_hook_event(etype, action, session_key, {**base, **sample})
    event.trace = True
    entry: dict[str, Any] = {"event": key, "handlers": []}
    if handlers:
        report = await registry.dispatch(event, handlers=[uncounted(h) for h in handlers])
        entry["handlers"] = [o.to_json() for o in report.outcomes]
        ok = all(o.outcome == "ok" for o in report.outcomes)
    else:
        why = _why(record) if record is not None else "it has no handler"
        entry["reason"] = f"{hook} did not run: it is {why}"
        ok = False
    return {
        "hook": hook,
        "event": key,
        "messages": reply_lines(event),
        "trace": [entry],
        "passed": ok,
    }
