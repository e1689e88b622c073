"""welcome: greet each new session; a plain ``def``, so it runs in a worker thread."""

from __future__ import annotations

from gatewayd.hooks import HookContext, HookEvent

from .text import render


def greet(event: HookEvent, ctx: HookContext) -> None:
    """``session:start``: ``reason`` is ``message`` (a new session key), ``new`` or ``reset``."""
    greeting = str(ctx.config.get("greeting") or "Welcome!")
    event.messages.append(render(greeting, event.context.get("reason")))
