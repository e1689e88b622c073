"""Scaffolding a new hook: ``gatewayd hooks new NAME [--lang py|ts|js] [--events ...] [--command]``.

:func:`scaffold` writes ``<state>/hooks/NAME`` with a valid ``HOOK.md`` and a handler that runs as
written: a typed async ``handler.py`` (``--lang py``, the default), a typed ``handler.ts`` (``ts``:
Node strips the types itself, nothing to build), an ES module ``handler.js`` (``js``), or an
executable ``handler`` script (``--command``: a command hook, Python 3 reading the event JSON on
stdin). The directory is written under a temporary dot-name in the managed root and
renamed into place, so a running daemon's watcher sees the whole hook appear at once and loads
it; it never sees half a hook.

A name ``hooks new`` and ``hooks install`` create is checked by
:func:`gatewayd.hooks.names.slug_problem` (:func:`name_problem` here), the one home of every
hook-name rule. ``HOOK.md`` parsing itself stays in :mod:`gatewayd.hooks.metadata`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gatewayd.config import Config
from gatewayd.hooks.discovery import discover
from gatewayd.hooks.events import EventKeyError, parse_event_key
from gatewayd.hooks.names import MAX_SLUG, SLUG, slug_problem

NAME_RE: Final = SLUG
MAX_NAME: Final = MAX_SLUG
GUIDE: Final = "docs/hooks.md (the author's guide, in the gatewayd source tree)"
LANGS: Final = ("py", "ts", "js")
"""The languages ``hooks new --lang`` writes a handler in."""
HANDLER_FILES: Final = {"py": "handler.py", "ts": "handler.ts", "js": "handler.js"}


class AuthoringError(Exception):
    """A name, event key or target the scaffolder refuses; the message says why and the fix."""


name_problem = slug_problem
"""Why a name is not one ``hooks new`` / ``hooks install`` may create, or None."""


def check_name(name: str) -> None:
    """Raise :class:`AuthoringError` unless ``name`` is a valid hook name."""
    if problem := name_problem(name):
        raise AuthoringError(problem)


def parse_events(values: Iterable[str]) -> list[str]:
    """``["command:new,session:start", "agent"]`` -> validated keys, in order, without repeats."""
    keys: list[str] = []
    for value in values:
        for raw in value.split(","):
            key = raw.strip()
            if not key:
                continue
            try:
                parse_event_key(key)
            except EventKeyError as exc:
                raise AuthoringError(f"--events: {exc}") from None
            if key not in keys:
                keys.append(key)
    return keys


@dataclass(frozen=True, slots=True)
class Scaffolded:
    """What :func:`scaffold` wrote."""

    name: str
    path: Path
    files: tuple[str, ...]
    events: tuple[str, ...]
    command: bool
    lang: str


def _hook_md(name: str, description: str, events: Sequence[str], handler_file: str) -> str:
    # JSON is YAML: the user's description and the event keys are quoted safely.
    command = handler_file == "handler"
    requires = '\n    requires:\n      bins: ["python3"]' if command else ""
    handler = "`handler` (an executable)" if command else f"`{handler_file}`"
    return f"""\
---
name: {name}
description: {json.dumps(description, ensure_ascii=False)}
metadata:
  eliza:
    emoji: "🪝"
    events: {json.dumps(list(events))}{requires}
---

# {name}

{description}

Replace this paragraph with what the hook does, what it writes, and the settings it reads
from `hooks.entries.{name}` in `gatewayd.yaml`.

## Next steps

- The code is in {handler}. Save an edit and a running gatewayd reloads the hook at once.
- `events` above lists what it runs on: `type:action` (`command:new`), a whole type
  (`session`), or `"*"`. The author's guide lists every event and its context fields.
- `gatewayd hooks info {name}` shows its status; `gatewayd hooks check` explains any hook
  that does not load; the daemon's log has a `hook.error` line for every failure.
- Turn it off with `gatewayd hooks disable {name}`; remove it by deleting this directory.
- Guide: {GUIDE}.
"""


def _handler_py(name: str, events: Sequence[str]) -> str:
    runs_on = ", ".join(events)
    return f'''\
"""{name}: runs on {runs_on} (metadata.eliza.events in HOOK.md).

Save an edit and a running gatewayd reloads this module from source; module-level state does
not survive a reload, so keep anything lasting in files under ``ctx.state_dir``.
"""

from __future__ import annotations

from gatewayd.hooks import HookContext, HookEvent


async def handler(event: HookEvent, ctx: HookContext) -> None:
    """Called once per matching event, on the daemon's event loop: await, never block.

    ``event.key`` is ``type:action``, ``event.session_key`` the session, ``event.context`` the
    event's details. Append strings to ``event.messages`` to reply. ``ctx.config`` is this
    hook's ``hooks.entries.{name}`` entry, ``ctx.log`` a logger bound to the hook. Use a plain
    ``def`` for blocking code: it then runs in a worker thread.
    """
    ctx.log.info("{name}.fired", event_key=event.key, session_key=event.session_key)
    event.messages.append(f"{name} saw {{event.key}}")
'''


def _handler_ts(name: str, events: Sequence[str]) -> str:
    runs_on = ", ".join(events)
    return f"""\
// {name}: runs on {runs_on} (metadata.eliza.events in HOOK.md).
//
// Node runs this file as written: its type stripper erases the types (no build, nothing to
// install; Node >= 22.18, or the Node 24 of the gatewayd[node] extra). Save an edit and a
// running gatewayd imports it again. Types only: `enum` and `namespace` need code generation,
// which the stripper does not do (use a const object).

/** The event, as OpenClaw's InternalHookEvent: what a handler gets. */
interface HookEvent {{
  type: string; // "command", "session", "agent", "gateway", "message"
  action: string; // "new", "received", ...: event.type + ":" + event.action is the key
  sessionKey: string;
  context: Record<string, unknown>; // the event's details (docs/hooks.md, section 4)
  timestamp: Date;
  messages: string[]; // push strings to reply
}}

/** Called once per matching event. Return nothing, or fields to merge (`{{ block: true }}`). */
export default async function handler(event: HookEvent): Promise<void> {{
  console.log(`{name}: ${{event.type}}:${{event.action}} on ${{event.sessionKey}}`); // hook.console
  event.messages.push(`{name} saw ${{event.type}}:${{event.action}}`);
}}
"""


def _handler_js(name: str, events: Sequence[str]) -> str:
    runs_on = ", ".join(events)
    return f"""\
// {name}: runs on {runs_on} (metadata.eliza.events in HOOK.md).
//
// An ES module, run by Node as written (Node >= 18). Save an edit and a running gatewayd
// imports it again.

/**
 * Called once per matching event. `event` is OpenClaw's InternalHookEvent: type, action,
 * sessionKey, context (the event's details), timestamp (a Date) and messages (push strings to
 * reply). Return nothing, or fields to merge (`{{ block: true }}`).
 */
export default async function handler(event) {{
  console.log(`{name}: ${{event.type}}:${{event.action}} on ${{event.sessionKey}}`); // hook.console
  event.messages.push(`{name} saw ${{event.type}}:${{event.action}}`);
}}
"""


def _handler_command(name: str, events: Sequence[str]) -> str:
    runs_on = ", ".join(events)
    return f'''\
#!/usr/bin/env python3
"""{name}: a command hook, run on {runs_on} (metadata.eliza.events in HOOK.md).

The event arrives as one JSON object on stdin: type, action, sessionKey, timestamp, messages,
context. Environment: ELIZA_HOOK_NAME, ELIZA_EVENT (type:action), ELIZA_SESSION_KEY, plus
hooks.entries.{name}.env. Each non-empty stdout line is a reply message (or print one JSON
object {{"messages": [...]}}); stderr goes to the daemon's log when the exit code is not 0.
Any executable works here: replace this with a shell script or a binary, keep it chmod +x.
"""

import json
import sys


def main() -> int:
    event = json.load(sys.stdin)
    print(f"{name} saw {{event['type']}}:{{event['action']}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _existing(config: Config, name: str) -> str | None:
    """Where a hook called ``name`` already is, if anywhere; else None."""
    target = config.paths.managed_hooks / name
    if os.path.lexists(target):
        return f"{target} already exists"
    for hook in discover(config.load_spec()).hooks:
        if hook.name == name:
            effect = "be shadowed by it" if hook.root.source == "workspace" else "shadow it"
            return (
                f"a {hook.root.source} hook named {name!r} exists at {hook.path} (a new one "
                f"would {effect}); pick another name, or copy that directory and edit the copy"
            )
    return None


def scaffold(
    config: Config,
    name: str,
    events: Sequence[str] = (),
    *,
    command: bool = False,
    description: str | None = None,
    lang: str = "py",
) -> Scaffolded:
    """Write a new hook ``name`` into the managed root of ``config``; see the module docstring.

    ``events`` defaults to ``command:<name>`` (so ``/name`` tries it out); ``lang`` is one of
    :data:`LANGS`. Raises :class:`AuthoringError` for an invalid name, event or language, or a
    name already in use.
    """
    check_name(name)
    if lang not in LANGS:
        raise AuthoringError(f"--lang {lang!r}: choose one of {', '.join(LANGS)}")
    if command and lang != "py":
        raise AuthoringError(
            f"--command writes an executable script (a command hook, any language) and --lang "
            f"{lang} a {HANDLER_FILES[lang]}: choose one"
        )
    keys = list(events) or [f"command:{name}"]
    parse_events(keys)
    if where := _existing(config, name):
        raise AuthoringError(f"hook {name!r}: {where}")
    text = description or f"{name}: describe what this hook does in one line"
    handler_file = "handler" if command else HANDLER_FILES[lang]
    write = {"py": _handler_py, "ts": _handler_ts, "js": _handler_js}[lang]
    files = {
        "HOOK.md": _hook_md(name, text, keys, handler_file),
        handler_file: _handler_command(name, keys) if command else write(name, keys),
    }

    root = config.paths.managed_hooks
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".new-{name}-", suffix=".tmp", dir=root))
    try:
        for filename, content in files.items():
            path = staging / filename
            path.write_text(content, encoding="utf-8")
            path.chmod(0o755 if filename == "handler" else 0o644)
        staging.chmod(0o755)
        target = root / name
        if os.path.lexists(target):  # created since the check above
            raise AuthoringError(f"hook {name!r}: {target} already exists")
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Scaffolded(name, target, tuple(files), tuple(keys), command, lang)
