"""hello: reply to ``/hello [name]`` with a greeting."""

from __future__ import annotations

from gatewayd.hooks import HookEvent


async def handler(event: HookEvent) -> None:
    """``command:hello``: ``args`` is the text after ``/hello``."""
    name = event.context.get("args") or event.context.get("senderId") or "there"
    event.messages.append(f"Hello, {name}!")
