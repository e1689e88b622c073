"""bootstrap-date: add today's date to the AGENTS.md an agent session boots with."""

from __future__ import annotations

from pathlib import Path

from gatewayd.hooks import HookEvent


async def handler(event: HookEvent) -> None:
    """``agent:bootstrap``: edit ``context["bootstrapFiles"]`` in place."""
    files = event.context.get("bootstrapFiles")
    if not isinstance(files, list):
        return
    line = f"Today is {event.timestamp:%Y-%m-%d} (UTC)."
    for entry in files:
        if entry.get("name") == "AGENTS.md":
            entry["content"] = f"{str(entry.get('content') or '').rstrip()}\n\n{line}\n"
            return
    path = Path(event.context.get("workspaceDir") or ".") / "AGENTS.md"
    files.append({"name": "AGENTS.md", "path": str(path), "content": f"{line}\n", "missing": False})
