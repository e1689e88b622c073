"""JSON for the text gatewayd writes on every event (control replies, transcript lines, journal
and Redis entries), and :func:`loads` for JSON read back from files and Redis.

:func:`dumps` is orjson (a C extension: 0.2 us for a ``message`` reply against 1.7 us for
``json.JSONEncoder.encode``, timeit) with one promise orjson alone does not keep: whatever the
value, the text decodes to what ``json.dumps(value, default=str)`` writes. orjson refuses three
things json writes (a string with a lone surrogate, an integer past 64 bits, nesting past 254
levels) and writes ``NaN`` and the infinities as ``null``; for those values :func:`dumps` writes
what json writes instead, ASCII-only (a lone surrogate as its ``\\u`` escape, ``\\udc80`` say,
which decodes to the same string). A value that contains itself raises ``ValueError``, as json
does.

Decoding stays json's: ``orjson.loads`` reads an integer past 64 bits as a float (its digits
lost) and refuses a lone surrogate's escape (``\\udc80``) that json reads as the string it was
written from.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

_OPTIONS = (
    orjson.OPT_NON_STR_KEYS  # 1, True, None as keys: "1", "true", "null", as json writes them
    # A dataclass or a datetime is written as its str(), as json's default=str writes it.
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
_LINE = _OPTIONS | orjson.OPT_APPEND_NEWLINE


def _default(value: Any) -> Any:
    """What a value orjson has no form for is written as: a float subclass as its number (json
    writes it so), anything else as its ``str()``."""
    if isinstance(value, float):
        return float(value)
    return str(value)


def dumps(value: Any, *, allow_nan: bool = True, newline: bool = False) -> bytes:
    """``value`` as compact UTF-8 JSON (``newline``: with a ``\\n`` after it).

    Values JSON has no form for are written as their ``str()``, keys that are not strings as
    their text. ``NaN`` and the infinities are written ``NaN``/``Infinity`` (json's extension,
    read back by :func:`loads`), or with ``allow_nan=False`` raise ``ValueError``. Thread-safe:
    nothing is shared between calls."""
    try:
        text = orjson.dumps(value, default=_default, option=_LINE if newline else _OPTIONS)
    except TypeError:  # a lone surrogate, an int past 64 bits, deep nesting, a cycle, a str()
        pass
    else:
        # NaN, Infinity: written null. Only a text with a null can hold one (a null key, rare,
        # is left to json: a NaN key is written "NaN" there).
        if b"null" not in text or (b'"null":' not in text and not _nonfinite(value)):
            return text
    text = json.dumps(
        value, ensure_ascii=True, separators=(",", ":"), allow_nan=allow_nan, default=_default
    ).encode()
    return text + b"\n" if newline else text


def _nonfinite(value: Any) -> bool:
    """Whether ``value`` holds a float orjson wrote as ``null`` (NaN, an infinity) as a value.

    One pass with a stack, exact types first: a ``message`` reply (its ``command`` is null)
    is walked in ~0.4 us, against ~1 us for a recursive walk (timeit)."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            push(item.values())
        elif kind is list or kind is tuple:
            push(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            push(item.values())
        elif isinstance(item, list | tuple):
            push(item)
    return False


def loads(data: bytes | str) -> Any:
    """``json.loads``, with JSON nested past the stack (1,000 lists deep) a ``ValueError`` like
    any other text that is not what was written: its ``RecursionError`` would otherwise escape
    the callers that catch ``ValueError`` for damage (a ``sessions.json`` edited by hand stops
    every start, a Redis entry written by hand ends the task reading its stream)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
