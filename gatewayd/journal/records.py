"""How an event's context becomes the JSON text the SQLite journal stores.

Every accepted event's context is encoded once, on the event loop as its batch is committed:
this is on the durable path's critical path, so it must be cheap: :func:`gatewayd.jsonenc.dumps`
(orjson), whose text decodes to what ``json.JSONEncoder(default=str).encode`` writes (checked
against it in tests/journal/test_journal_records.py).

A lone surrogate in a hook-set context value is written as its ``\\u`` escape (``\\udc80``,
read back the same), never handed to SQLite as text it cannot encode. Values JSON has no form
for are written as their ``str()``; a context that contains itself raises ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gatewayd.jsonenc import dumps

BASE_KEYS = ("cfg", "workspaceDir", "agentId")
"""Context every event carries (the gateway's base): not stored, put back on replay. Only the
base's own objects are left out: the default agent's; another agent's are stored as they are
(replay puts the base back first, then the stored context)."""

Encode = Callable[[Any], str]


def reference_encoder() -> Encode:
    """The encoder whose text :func:`make_encoder`'s decodes to: ``JSONEncoder(...).encode``."""
    return json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str).encode


def make_encoder() -> Encode:
    """The context encoder: compact JSON text, ``str()`` for values JSON has no form for."""
    return _encode


def _encode(value: Any) -> str:
    return dumps(value).decode()


def context_json(context: dict[str, Any], base: dict[str, Any], encode: Encode) -> str:
    """The event's own context as stored: without the gateway handle and without the base
    keys that are the gateway's own objects (put back on replay)."""
    if "cfg" not in context and "gateway" not in context:
        return encode(context)
    # A copy less the left-out keys, not a dict comprehension over every key: the same dict
    # (order kept), 3.5 -> 2.7 us for a `message:received` context (timeit); this runs on the
    # event loop for every durable event.
    own = context.copy()
    own.pop("gateway", None)
    for key in BASE_KEYS:
        if key in own and base.get(key) is own[key]:
            del own[key]
    return encode(own)
