"""The ``events`` request (control op and ``gatewayd events``): checking it, one shape for all.

A request is ``{"action": "list"|"show"|"retry"|"purge", ...}``:

``list``   ``state`` (pending, done, dead, all; default all), ``sessionKey``, ``limit`` (1-10000,
           default 50): the newest matching events, oldest first;
``show``   ``eventId``: one event with its context and dead letters;
``retry``  ``ids`` (a list of event ids) or ``all: true``: dead-lettered events dispatched again,
           to the hooks that failed only;
``purge``  ``ids`` or ``all: true``: dead-lettered and done events deleted (never pending ones).

:func:`parse_request` raises ``ValueError`` with a message naming the field and the fix.
"""

from __future__ import annotations

from typing import Any

ACTIONS = ("list", "show", "retry", "purge")
STATES = ("pending", "done", "dead", "all")
MAX_LIMIT = 10_000


def parse_request(req: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(action, keyword arguments for the store)``; ``ValueError`` for a bad request."""
    action = req.get("action")
    if action not in ACTIONS:
        raise ValueError(f"field 'action' must be one of {', '.join(ACTIONS)}, got {action!r}")
    if action == "list":
        state = req.get("state") or "all"
        if state not in STATES:
            raise ValueError(f"field 'state' must be one of {', '.join(STATES)}, got {state!r}")
        session = req.get("sessionKey")
        if session is not None and not isinstance(session, str):
            raise ValueError("field 'sessionKey' must be a string")
        limit = req.get("limit", 50)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"field 'limit' must be an integer from 1 to {MAX_LIMIT}")
        return action, {"state": state, "session": session, "limit": limit}
    if action == "show":
        event_id = req.get("eventId")
        if not isinstance(event_id, str) or not event_id:
            raise ValueError("field 'eventId' must be an event id such as 3f9a1c2e-17")
        return action, {"id": event_id}
    ids = req.get("ids")
    if req.get("all") is True:
        if ids:
            raise ValueError("give either 'ids' or 'all': true, not both")
        return action, {"ids": None}
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{action} needs 'ids' (a list of event ids) or 'all': true")
    return action, {"ids": list(dict.fromkeys(ids))}
