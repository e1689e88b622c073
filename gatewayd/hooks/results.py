"""What handlers return: merging results into the event, in priority order.

A handler may return a dict (a command hook: a JSON object with ``result``; a JS handler: an
object). Its fields merge into ``event.result`` as the event's schema says
(:class:`~gatewayd.hooks.schema.Merge`): ``block`` and ``cancel`` and their ``reason``: the first
wins; ``content``, ``params``, ``message``: the last wins; ``prependContext``: joined. A returned
field that is also a context field is written to the context, so a later handler sees the
rewrite. When the event's ``stop`` field (``block``, ``cancel``) becomes true the chain ends:
:attr:`HookEvent.halted` is set and no lower-priority handler runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.schema import Merge, spec_for
from gatewayd.hooks.stats import exc_text

log = structlog.get_logger("gatewayd.hooks")

ALIASES = {"blockReason": "reason", "cancelReason": "reason"}
"""OpenClaw's names for a result field, and this project's."""


def reply_lines(event: HookEvent) -> list[str]:
    """``event.messages`` as the reply's lines, each ``str()``-ed (a handler may append any
    object). Never raises for what a handler left there: an object whose ``str()`` raises is a
    line naming its type, and ``messages`` replaced by what is no list (``None``) is no lines;
    both are logged with the fix. Either once failed the whole reply (``internal``), the other
    handlers' lines with it."""
    messages: Any = event.messages
    try:
        return [m if type(m) is str else str(m) for m in messages]
    except BaseException:  # what a handler left there: the slow path says what (no await here)
        pass
    fix = "append str lines to event.messages; do not replace the list"
    try:
        items = list(messages)
    except BaseException:  # not iterable: no lines
        log.warning(
            "hook.bad_messages",
            event_key=event.key,
            session_key=event.session_key,
            got=type(messages).__name__,
            fix=fix,
        )
        return []
    lines = []
    for item in items:
        try:
            lines.append(item if type(item) is str else str(item))
        except BaseException as exc:  # the item's own __str__
            line = f"<a {type(item).__name__} whose str() raised {type(exc).__name__}>"
            log.warning(
                "hook.bad_messages",
                event_key=event.key,
                session_key=event.session_key,
                got=line,
                fix=fix,
            )
            lines.append(line)
    return lines


def merge_result(event: HookEvent, hook: str, value: Any) -> None:
    """Merge what handler ``hook`` returned into ``event``; ``None`` is nothing to merge."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        log.warning(
            "hook.bad_result",
            hook=hook,
            event_key=event.key,
            got=type(value).__name__,
            fix="return None or a dict of result fields",
        )
        return
    spec = spec_for(event.key)
    merges = spec.results if spec is not None else {}
    own = spec.fields if spec is not None else ()
    result = event.result
    if result is None:
        result = event.result = {}
    context: Any = event.context
    try:
        for raw_key, item in value.items():
            key = str(ALIASES.get(raw_key, raw_key))
            how = merges.get(key, Merge.LAST)
            if how is Merge.FIRST:
                if key in result:
                    continue
                result[key] = item
            elif how is Merge.JOIN and result.get(key) and item:
                result[key] = f"{result[key]}\n\n{item}"
            else:
                result[key] = item
            if key in own:
                context[key] = result[key]
        if spec is not None and spec.stop is not None and result.get(spec.stop):
            event.halted = True
            log.info(
                f"hook.{spec.stop}",
                hook=hook,
                event_key=event.key,
                session_key=event.session_key,
                reason=result.get("reason"),
            )
    except BaseException as exc:  # a mapping or value of the hook's own whose methods raise
        # (anything: no await here, so no cancellation). Left to propagate, it ended the
        # event's dispatch: the handlers after this one never ran.
        log.warning(
            "hook.bad_result",
            hook=hook,
            event_key=event.key,
            got=type(value).__name__,
            error=f"{type(exc).__name__}: {exc_text(exc)}",
            fix="return None or a plain dict of str, number, bool, list and dict values",
        )
