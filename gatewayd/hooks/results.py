"""What handlers return: merged into the event as its declared result fields, checked.

A handler may return a dict (a command hook: a JSON object with ``result``; a JS handler: an
object). Only the fields the event's schema declares (:attr:`EventSpec.results
<gatewayd.hooks.schema.EventSpec.results>`) are merged; every other key is ignored, so a handler
that returns its whole event or context (``return event`` ends many OpenClaw handlers) changes
nothing and puts nothing of the context (``cfg``, with the hook's own ``env``) into a reply.

Each declared field is checked before anything is merged: its value must be JSON (no value that
contains itself, nested at most :data:`MAX_DEPTH` levels, at most :data:`MAX_VALUES` values) of
the field's type (a context field's declared type, ``block``/``cancel`` a bool, ``reason`` a
string). A return with one bad field is refused whole (``hook.bad_result`` names the field and
the fix): the caller gets the other handlers' decision, never a reply that cannot be encoded.

Merging (:class:`~gatewayd.hooks.schema.Merge`): ``block`` and ``cancel`` and their ``reason``:
the first true one wins, with its handler's reason (a false one before it keeps nothing, as
OpenClaw's true blocks stick); ``content``, ``params``, ``message``: the last wins;
``prependContext``: joined.
A returned field that is also a context field is written to the context, so a later handler
sees the rewrite. When the event's ``stop`` field (``block``, ``cancel``) becomes true the chain
ends: :attr:`HookEvent.halted` is set and no lower-priority handler runs.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.schema import EventSpec, Merge, spec_for
from gatewayd.hooks.stats import exc_text

log = structlog.get_logger("gatewayd.hooks")

ALIASES = {"blockReason": "reason", "cancelReason": "reason"}
"""OpenClaw's names for a result field, and this project's."""

MAX_DEPTH: Final = 64
"""Levels a returned field's value may nest (as a hook's own setting in the config may)."""
MAX_VALUES: Final = 100_000
"""Values (each string, number, list and object counts one) a returned field may hold: the
check runs on the event loop."""
LOG_TEXT: Final = 1000
"""Characters of a returned text (a block's reason) written to a log line."""

RESULT_TYPES: Final[Mapping[str, type | tuple[type, ...]]] = {
    "block": bool,
    "cancel": bool,
    "reason": str,
    "systemPrompt": str,
}
"""The type of each result field that is not a context field (those have their context type)."""

_JSON_LEAVES = (str, int, float, bool, type(None))
_TYPE_NAMES = {
    bool: "a bool",
    str: "a string",
    dict: "an object",
    list: "a list",
    int: "an integer",
    float: "a number",
}


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
    if spec is None or not spec.results:
        return  # the event takes no result: a returned event or context is no decision
    try:
        fields = _declared(spec, value)
        problem = next(
            (p for key, item in fields.items() if (p := _field_problem(spec, key, item))), None
        )
    except BaseException as exc:  # a mapping of the hook's own whose methods raise (anything:
        # no await here, so no cancellation); left to propagate, it ended the event's dispatch
        log.warning(
            "hook.bad_result",
            hook=hook,
            event_key=event.key,
            got=type(value).__name__,
            error=f"{type(exc).__name__}: {exc_text(exc)}",
            fix="return None or a plain dict of str, number, bool, list and dict values",
        )
        return
    if problem is not None:
        log.warning(
            "hook.bad_result",
            hook=hook,
            event_key=event.key,
            error=problem,
            fix="return the event's result fields as plain JSON values of their types "
            "(docs/hooks.md, Hooks that decide); nothing this handler returned was used",
        )
        return
    if fields:
        _merge(event, hook, spec, fields)


def _declared(spec: EventSpec, value: Mapping[Any, Any]) -> dict[str, Any]:
    """The declared result fields of ``value`` (aliases renamed); every other key dropped."""
    merges = spec.results
    fields: dict[str, Any] = {}
    for raw_key, item in value.items():
        key = ALIASES.get(raw_key, raw_key) if type(raw_key) is str else raw_key
        if type(key) is str and key in merges:
            fields[key] = item
    return fields


def _merge(event: HookEvent, hook: str, spec: EventSpec, fields: dict[str, Any]) -> None:
    merges = spec.results
    own = spec.fields
    result = event.result
    if result is None:
        result = event.result = {}
    context: Any = event.context
    stop = spec.stop
    stops = stop is not None and fields.get(stop) is True
    stopped = stop is not None and bool(result.get(stop))
    for key, item in fields.items():
        how = merges[key]
        if how is Merge.FIRST:
            # The first *true* block or cancel wins, with its own reason: an earlier handler's
            # false (it allows) keeps no slot, or a permissive hook would turn a guard off.
            if key in result and (stopped or not (stops and key in (stop, "reason"))):
                continue
            result[key] = item
        elif how is Merge.JOIN and result.get(key) and item:
            result[key] = f"{result[key]}\n\n{item}"
        else:
            result[key] = item
        if key in own:
            context[key] = result[key]
    if spec.stop is not None and result.get(spec.stop):
        event.halted = True
        log.info(
            f"hook.{spec.stop}",
            hook=hook,
            event_key=event.key,
            session_key=event.session_key,
            reason=log_text(result.get("reason")),
        )


def log_text(value: Any) -> Any:
    """``value`` as a log line may carry it: a string past :data:`LOG_TEXT` characters cut, with
    its length (a 60 MB reason once went into the log whole)."""
    if isinstance(value, str) and len(value) > LOG_TEXT:
        return f"{value[:LOG_TEXT]}... ({len(value)} characters)"
    return value


def _field_problem(spec: EventSpec, key: str, value: Any) -> str | None:
    """Why ``value`` cannot be result field ``key`` of ``spec``'s event, or None."""
    expected = _field_types(spec).get(key)
    if expected is not None and not _is(value, expected):
        names = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in expected)
        return f"{key}: expected {names}, got {type(value).__name__}"
    count = [0]
    problem = _json_problem(value, 1, set(), count)
    return f"{key}: {problem}" if problem is not None else None


def _is(value: Any, expected: tuple[type, ...]) -> bool:
    if type(value) is bool:  # a bool is an int to isinstance: only where a bool is asked for
        return bool in expected
    return isinstance(value, expected)


def _json_problem(value: Any, depth: int, path: set[int], count: list[int]) -> str | None:
    """Why ``value`` is no JSON a reply can carry, or None (recursion bounded by the depth)."""
    count[0] += 1
    if count[0] > MAX_VALUES:
        return f"holds more than {MAX_VALUES:,} values"
    if isinstance(value, _JSON_LEAVES):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value} is not JSON"
        return None
    if not isinstance(value, list | tuple | dict):
        return f"a {type(value).__name__} is not JSON"
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if id(value) in path:
        return "contains itself (a circular structure)"
    path.add(id(value))
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str:
                return f"key {key!r} is not a string"
            if (problem := _json_problem(item, depth + 1, path, count)) is not None:
                return problem
    else:
        for item in value:
            if (problem := _json_problem(item, depth + 1, path, count)) is not None:
                return problem
    path.discard(id(value))
    return None


def _field_types(spec: EventSpec) -> dict[str, tuple[type, ...] | None]:
    """Each result field of ``spec`` -> the types its value may have (None: any JSON)."""
    found = _FIELD_TYPES.get(spec.key)
    if found is None:
        found = _FIELD_TYPES[spec.key] = _types_of(spec)
    return found


_FIELD_TYPES: dict[str, dict[str, tuple[type, ...] | None]] = {}


def _types_of(spec: EventSpec) -> dict[str, tuple[type, ...] | None]:
    try:
        hints = typing.get_type_hints(spec.context)
    except Exception:  # an annotation that cannot be resolved: the table alone
        hints = {}
    found: dict[str, tuple[type, ...] | None] = {}
    for key in spec.results:
        if key in hints and key not in RESULT_TYPES:
            found[key] = _runtime_types(hints[key])
        else:
            declared = RESULT_TYPES.get(key)
            found[key] = (
                (declared if isinstance(declared, tuple) else (declared,)) if declared else None
            )
    return found


def _runtime_types(annotation: Any) -> tuple[type, ...] | None:
    """The plain types an annotation (``str``, ``dict[str, Any]``, ``X | None``) allows, or
    None for any JSON (``Any``, or what this does not know)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_runtime_types(arg) for arg in typing.get_args(annotation)]
        if any(part is None for part in parts):
            return None
        return tuple(t for part in parts if part for t in part)
    plain = origin or annotation
    if plain is type(None):
        return (type(None),)
    if plain in (dict, Mapping) or typing.is_typeddict(plain):
        return (dict,)
    if plain in (list, tuple):
        return (list, tuple)
    if plain is float:
        return (int, float)
    if plain in (str, int, bool):
        return (plain,)
    return None
