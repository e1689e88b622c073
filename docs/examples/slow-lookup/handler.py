"""slow-lookup: answer ``/lookup WORD`` from a slow source, within a deadline of its own."""

from __future__ import annotations

import asyncio

from gatewayd.hooks import HookContext, HookEvent

DEADLINE_S = 1.0
"""Below the hook's timeoutMs (3000 in HOOK.md): the user always gets an answer."""


async def slow_source(word: str) -> str:
    """Stands in for a network call; words starting with ``slow`` take 10 s."""
    await asyncio.sleep(10 if word.startswith("slow") else 0)
    return f"{word}: found"


async def handler(event: HookEvent, ctx: HookContext) -> None:
    """``command:lookup``: reply with the answer, or say it took too long."""
    word = event.context.get("args") or "nothing"
    try:
        answer = await asyncio.wait_for(slow_source(word), DEADLINE_S)
    except TimeoutError:
        ctx.log.warning("slow_lookup.deadline", word=word, deadline_s=DEADLINE_S)
        answer = f"{word}: the lookup took too long, try again later"
    event.messages.append(answer)
