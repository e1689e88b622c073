"""audit-trail: one JSON line per message in ``<state>/logs/audit-trail.jsonl``."""

from __future__ import annotations

import json

from gatewayd.hooks import HookContext, HookEvent


def handler(event: HookEvent, ctx: HookContext) -> None:
    """``message:received`` and ``message:sent``; blocking file I/O, so a plain ``def``."""
    context = event.context
    record = {
        "event": event.key,
        "sessionKey": event.session_key,
        "peer": context.get("from") or context.get("to"),
        "channelId": context.get("channelId"),
        "content": context.get("content"),
    }
    path = ctx.state_dir / "logs" / "audit-trail.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:  # one write per line: lines never interleave
        log.write(json.dumps(record, ensure_ascii=False) + "\n")
