"""The event vocabulary: every name a hook may subscribe with, and what it means here.

The events themselves (keys, context types, whether the gateway fires them) are declared in
:mod:`gatewayd.hooks.schema`; this module owns the *names*. A ``HOOK.md`` (or ``HOOK.yaml``)
may name an event

* by this project's key, ``type:action`` (``command:new``, ``agent:before_tool_call``), a
  whole type (``command``) or ``*``;
* by an OpenClaw plugin-hook name, ``message_sending``, ``before_tool_call``, ... in ``_`` or
  ``-`` spelling (``message-sending``), mapped by :data:`PLUGIN_HOOKS`;
* by OpenClaw's internal event names, which are keys of this gateway's too
  (``session:compact:before``, ``message:transcribed``, ...);
* by a Hermes name: ``command:*`` (every command), ``agent:start``, ``session:reset``;
* by an Eve stream name (``session.started``, ``message.completed``, ...), mapped by
  :data:`EVE_EVENTS` where this gateway has the same moment; one it has no equivalent for is
  kept with a warning that says what to use instead, an unknown dotted name suggests the
  nearest Eve name.

The mapping rule for plugin-hook names: where OpenClaw has an internal event for the same moment,
the name maps to it (``message_received`` -> ``message:received``, ``gateway_start`` ->
``gateway:startup``); otherwise the type is
the noun the name is about and the action is the rest of the name (``message_sending`` ->
``message:sending``, ``agent_end`` -> ``agent:end``, ``before_agent_start`` ->
``agent:before_start``), and hooks the agent runtime posts belong to the agent run
(``before_tool_call`` -> ``agent:before_tool_call``, ``before_compaction`` ->
``agent:before_compaction``; OpenClaw fires its internal ``session:compact:before`` for the
same compaction, a second event of its own shape, and so does an agent runtime here).

:func:`resolve` turns one written name into the dispatch keys it stands for plus warnings. No name
makes a hook invalid: an unknown one is kept as written (nothing emits it, and the warning says so
and suggests the nearest known name), and a known event this gateway never fires is named as
such, so a subscription that can never run is never silent.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Final

from gatewayd.hooks.events import EVENT_TYPES
from gatewayd.hooks.schema import EVENTS

PLUGIN_HOOKS: Final = {
    "message_received": "message:received",
    "message_sending": "message:sending",
    "message_sent": "message:sent",
    "session_start": "session:start",
    "session_end": "session:end",
    "gateway_start": "gateway:startup",
    "gateway_stop": "gateway:shutdown",
    "before_compaction": "agent:before_compaction",
    "after_compaction": "agent:after_compaction",
    "before_agent_start": "agent:before_start",
    "agent_end": "agent:end",
    "before_tool_call": "agent:before_tool_call",
    "after_tool_call": "agent:after_tool_call",
    "tool_result_persist": "agent:tool_result_persist",
    "before_model_resolve": "agent:before_model_resolve",
    "before_prompt_build": "agent:before_prompt_build",
    "agent_turn_prepare": "agent:turn_prepare",
    "before_agent_reply": "agent:before_reply",
    "model_call_started": "agent:model_call_started",
    "model_call_ended": "agent:model_call_ended",
    "llm_input": "agent:llm_input",
    "llm_output": "agent:llm_output",
    "before_agent_finalize": "agent:before_finalize",
    "before_reset": "agent:before_reset",
    "before_message_write": "agent:before_message_write",
    "subagent_spawned": "agent:subagent_spawned",
    "subagent_progress": "agent:subagent_progress",
    "subagent_ended": "agent:subagent_ended",
    "subagent_delivery_target": "agent:subagent_delivery_target",
    "heartbeat_prompt_contribution": "agent:heartbeat_prompt_contribution",
}
"""OpenClaw plugin-hook names (``_`` spelling) and the event each one is here."""

PLUGIN_HOOKS_NEVER: Final[dict[str, str]] = {
    "inbound_claim": "inbound messages here come through the control socket, which no plugin "
    "claims: use message:received (message_received), which may block or rewrite a message",
    "before_dispatch": "no reply is dispatched here by a channel plugin: use message:received "
    "(message_received) to block a message or answer it before anything else sees it",
    "reply_dispatch": "replies here are the handlers' event.messages, delivered by the gateway "
    "itself: use message:sending (message_sending) to rewrite or cancel each reply line",
    "reply_payload_sending": "a reply here is lines of text, not OpenClaw's reply payloads: use "
    "message:sending (message_sending) to rewrite or cancel each line",
    "channel_pairing_requested": "channels here do not pair senders (the control socket "
    "admits its own uid only)",
    "before_agent_run": "its input-gate decision ({outcome: pass|block}) is OpenClaw's agent "
    "runner's: block a turn in agent:before_start or a message in message:received",
    "resolve_exec_env": "no exec tool runs here (it is the agent runtime's)",
    "cron_reconciled": "there is no cron here",
    "cron_changed": "there is no cron here",
    "skill_proposal_evaluate": "there are no skills here",
    "skill_proposal_changed": "there are no skills here",
    "skill_changed": "there are no skills here",
    "before_install": "installing (gatewayd hooks install) is a command, not the daemon's "
    "work: no hook runs for it",
}
"""OpenClaw 2026.9.6's plugin-hook names that never run here, and why (with what to use)."""

ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "command:*": ("command",),
    "agent:start": ("agent:before_start",),
    "session:reset": ("command:new", "command:reset"),
}
"""Names Hermes uses for events this gateway has, and the keys they stand for. OpenClaw's
internal event names are this gateway's own keys (``session:compact:before``): a hook subscribed
with one gets the event as OpenClaw builds it, ``type`` ``session``, ``action``
``compact:before``."""

EVE_EVENTS: Final[dict[str, tuple[str, ...]]] = {
    "session.started": ("session:start",),
    "session.completed": ("session:end",),
    "message.received": ("message:received",),
    "message.completed": ("message:sent",),
    "turn.started": ("agent:before_start",),
    "turn.completed": ("agent:end",),
    "actions.requested": ("agent:before_tool_call",),
    "action.result": ("agent:after_tool_call",),
    "compaction.requested": ("agent:before_compaction",),
    "compaction.completed": ("agent:after_compaction",),
}
"""Eve's stream events that have an equivalent here, and the keys they stand for."""

EVE_UNMAPPED: Final[dict[str, str]] = {
    "turn.failed": "agent:end fires after every turn: subscribe to turn.completed and read "
    "event.context['success'] and ['error']",
    "turn.cancelled": "agent:end fires after every turn: subscribe to turn.completed",
    "session.waiting": "sessions do not park here: subscribe to message.completed (message:sent)",
    "session.failed": "sessions do not fail here: subscribe to session.completed (session:end)",
    "step.started": "model steps are the agent runtime's: subscribe to turn.started",
    "step.completed": "model steps are the agent runtime's: subscribe to turn.completed",
    "step.failed": "model steps are the agent runtime's: subscribe to turn.completed",
    "message.appended": "replies are not streamed: subscribe to message.completed",
    "reasoning.appended": "reasoning is not streamed: subscribe to turn.completed",
    "reasoning.completed": "reasoning is not streamed: subscribe to turn.completed",
    "action.input.appended": "tool input is not streamed: subscribe to actions.requested",
    "action.partial": "tool progress is not streamed: subscribe to action.result",
    "input.requested": "no human-input requests here",
    "input.resolved": "no human-input requests here",
    "task.started": "no tasks here: subscribe to actions.requested",
    "task.detached": "no tasks here: subscribe to action.result",
    "task.settled": "no tasks here: subscribe to action.result",
    "result.completed": "no structured results here: subscribe to turn.completed",
    "authorization.required": "no connection authorization here",
    "authorization.completed": "no connection authorization here",
    "subagent.called": "subagent calls are tool calls here: subscribe to actions.requested",
    "subagent.completed": "subagent calls are tool calls here: subscribe to action.result",
    "context.cleared": "subscribe to command:new and command:reset",
}
"""Eve's stream events with no equivalent here, and what to use instead."""

_EVE_SHAPE = re.compile(r"^[a-z]+(?:\.[a-z]+)+$")
_SHAPE = re.compile(r"^[a-z]+(?::[A-Za-z0-9_.:-]+)?$")
_COMMAND_ACTION = re.compile(r"^[a-z0-9_-]+$")


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one written event name means: the keys a handler is registered for, and warnings."""

    name: str
    keys: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def known_names() -> list[str]:
    """Every name :func:`resolve` accepts without a warning (bar ``command:<name>``)."""
    names = [*EVENTS, *sorted(EVENT_TYPES), *PLUGIN_HOOKS, *ALIASES]
    return list(dict.fromkeys(names))


def _actions_by_type() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for key in EVENTS:
        action = key.partition(":")[2]
        if action:
            found.setdefault(action, []).append(key)
    return found


def suggest(name: str) -> str | None:
    """The known name nearest to ``name`` (``message:recieved`` -> ``message:received``).

    A command's action under another type means the command (``session:new`` ->
    ``command:new``); then a close name of the same type, then the same action under another
    type (``gateway:end`` -> ``session:end``), then the closest name of all.
    """
    etype, _, action = name.partition(":")
    candidates = [*known_names(), "command:new", "command:reset", "command:stop"]
    if action:
        if action in ("new", "reset", "stop"):
            return f"command:{action}"
        same_type = [c for c in candidates if c.startswith(f"{etype}:")]
        close = difflib.get_close_matches(name, same_type, n=1, cutoff=0.75)
        if close:
            return close[0]
        elsewhere = [k for k in _actions_by_type().get(action, []) if not k.startswith(etype)]
        if elsewhere:
            return elsewhere[0]
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


def _not_fired(name: str, key: str) -> str:
    via = f" ({name} is {key} here)" if name != key else ""
    never = EVENTS[key].never if key in EVENTS else ""
    because = f" because {never}" if never else ""
    return (
        f"events: {key}{via} is a known event, but this gateway never fires it{because}: "
        "the hook will not run for it"
    )


def _unknown(name: str, why: str) -> str:
    hint = suggest(name)
    did_you_mean = f"; did you mean {hint}?" if hint else ""
    never = "no emitter produces it, so the hook never runs for it"
    return f"events: {name!r}: {why}; {never}{did_you_mean}"


@functools.lru_cache(maxsize=1024)
def resolve(name: str) -> Resolution:
    """The dispatch keys ``name`` stands for, and why it may never run (see the module doc).

    Cached: a name always means the same (the vocabulary is fixed when the module loads), and a
    load of 1,000 hooks resolves the same few names 2,000 times (~2 us each)."""
    written = name.strip()
    if written == "*":
        return Resolution(written, ("*",))
    if _EVE_SHAPE.match(written):
        return _resolve_eve(written)
    plugin = written.lower().replace("-", "_")
    if plugin in PLUGIN_HOOKS_NEVER:
        warning = (
            f"events: {written!r}: an OpenClaw plugin hook that never runs here because "
            f"{PLUGIN_HOOKS_NEVER[plugin]}"
        )
        return Resolution(written, (), (warning,))
    if plugin in PLUGIN_HOOKS:
        key = PLUGIN_HOOKS[plugin]
        fired = EVENTS[key].fired
        return Resolution(written, (key,), () if fired else (_not_fired(written, key),))
    if written in ALIASES:
        keys = ALIASES[written]
        idle = [k for k in keys if k in EVENTS and not EVENTS[k].fired]
        warnings = tuple(_not_fired(written, k) for k in idle)
        return Resolution(written, keys, warnings)
    if not _SHAPE.match(written):
        return Resolution(written, (), (_unknown(written, "not an event name ('type:action')"),))
    etype, _, action = written.partition(":")
    if etype not in EVENT_TYPES:
        why = f"unknown event type {etype!r} (known: {', '.join(sorted(EVENT_TYPES))})"
        return Resolution(written, (), (_unknown(written, why),))
    if not action:
        return Resolution(written, (written,))
    if etype == "command":
        if _COMMAND_ACTION.match(action):
            return Resolution(written, (written,))
        why = "a command name is [a-z0-9_-]+ (what follows '/' in a message)"
        return Resolution(written, (written,), (_unknown(written, why),))
    spec = EVENTS.get(written)
    if spec is None:
        why = f"no {etype} event is called {action!r}"
        return Resolution(written, (written,), (_unknown(written, why),))
    return Resolution(written, (written,), () if spec.fired else (_not_fired(written, written),))


def _resolve_eve(written: str) -> Resolution:
    """An Eve stream name: its keys here, or a warning saying there is none (and what to use)."""
    keys = EVE_EVENTS.get(written)
    if keys is not None:
        idle = [k for k in keys if not EVENTS[k].fired]
        return Resolution(written, keys, tuple(_not_fired(written, k) for k in idle))
    instead = EVE_UNMAPPED.get(written)
    never = "no emitter produces it, so the hook never runs for it"
    if instead is not None:
        warning = f"events: {written!r}: an Eve event with no equivalent here ({instead}); {never}"
        return Resolution(written, (), (warning,))
    names = [*EVE_EVENTS, *EVE_UNMAPPED]
    close = difflib.get_close_matches(written, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    warning = f"events: {written!r}: not an Eve event name (known: {', '.join(EVE_EVENTS)}); "
    return Resolution(written, (), (warning + never + hint,))


def posted_key(name: str) -> str:
    """The event key a client's name for an event stands for: an OpenClaw plugin-hook name
    (``before_tool_call``, ``message-sending``) is its key here (``agent:before_tool_call``,
    ``message:sending``); any other name is itself."""
    return PLUGIN_HOOKS.get(name.strip().lower().replace("-", "_"), name)


def resolve_all(names: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(keys, warnings)`` for a hook's whole ``events`` list, keys deduplicated in order."""
    keys: list[str] = []
    warnings: list[str] = []
    for name in names:
        outcome = resolve(name)
        keys.extend(outcome.keys)
        warnings.extend(outcome.warnings)
    return tuple(dict.fromkeys(keys)), tuple(warnings)
