"""Hermes hooks: a ``HOOK.yaml`` and a ``handler.py`` whose ``handle(event_type, context)`` runs.

Hermes (the Python agent gateway) discovers ``~/.hermes/hooks/<name>/HOOK.yaml`` (``name``,
``description``, ``events``) beside a ``handler.py`` defining ``handle(event_type: str, context:
dict)``, async or not. Such a directory dropped into a gatewayd hook root loads as it is: the
manifest is read by :mod:`gatewayd.hooks.metadata` (the same fields, at the top level), its event
names by :mod:`gatewayd.hooks.vocabulary` (``command:*``, ``session:reset``, ``agent:start``), and
:func:`hermes_handler` adapts ``handle`` to a gatewayd handler.

``handle`` gets the event name the way the hook subscribed to it (a hook on ``session:reset`` is
called with ``"session:reset"`` for ``/new`` and ``/reset``; ``command:*`` with the command's own
``command:<name>``), and a context holding this gateway's fields plus the keys Hermes hooks read:
``platform`` (the channel), ``user_id`` (the sender), ``session_id``, ``session_key``, and for
commands ``command`` and ``args``, for messages ``message``. A Hermes handler has no reply.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import HandlerSignatureError
from gatewayd.hooks.vocabulary import ALIASES, resolve

ENTRY_POINT = "handle"
"""The function a Hermes ``handler.py`` must define."""


def hermes_context(event: HookEvent) -> dict[str, Any]:
    """The event's context with the keys Hermes hooks read added (never overwriting one)."""
    ctx: dict[str, Any] = dict(event.context)
    entry = ctx.get("sessionEntry")
    session_id = ctx.get("sessionId")
    if session_id is None and isinstance(entry, dict):
        session_id = entry.get("sessionId")
    extra: dict[str, Any] = {
        "platform": ctx.get("channelId") or ctx.get("commandSource"),
        "user_id": ctx.get("senderId") or ctx.get("from") or ctx.get("to"),
        "session_id": session_id,
        "session_key": ctx.get("sessionKey") or event.session_key,
    }
    if event.type == "command":
        extra["command"] = event.action
        extra["args"] = ctx.get("args", "")
    if event.type == "message":
        extra["message"] = ctx.get("content")
    for key, value in extra.items():
        ctx.setdefault(key, value)
    return ctx


def _names_by_key(events: Iterable[str]) -> dict[str, str]:
    """For a hook's subscriptions, the name to call ``handle`` with for each dispatch key."""
    names: dict[str, str] = {}
    for written in events:
        if written in ALIASES and not written.endswith(":*"):
            for key in resolve(written).keys:
                names.setdefault(key, written)
    return names


def hermes_handler(
    fn: Callable[..., Any], events: Iterable[str], where: str = ENTRY_POINT
) -> Callable[[HookEvent], Any]:
    """Wrap Hermes' ``handle(event_type, context)`` as a gatewayd ``handler(event)``; async
    stays async (awaited on the loop), a plain ``def`` stays sync (run in a worker thread).
    Raises :class:`HandlerSignatureError` when ``handle`` cannot take those two arguments."""
    try:
        inspect.signature(fn).bind("command:new", {})
    except (TypeError, ValueError) as exc:
        raise HandlerSignatureError(
            f"{where}: {ENTRY_POINT}() cannot be called as handle(event_type, context) ({exc}); "
            "a Hermes handler.py defines `async def handle(event_type: str, context: dict)`"
        ) from None
    names = _names_by_key(events)

    def name_of(event: HookEvent) -> str:
        return names.get(event.key, event.key)

    if inspect.iscoroutinefunction(fn):

        async def call_async(event: HookEvent) -> None:
            await fn(name_of(event), hermes_context(event))

        call_async.__qualname__ = getattr(fn, "__qualname__", ENTRY_POINT)
        return call_async

    def call(event: HookEvent) -> None:
        fn(name_of(event), hermes_context(event))

    call.__qualname__ = getattr(fn, "__qualname__", ENTRY_POINT)
    return call
