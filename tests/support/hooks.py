"""Hooks as tests need them: written to disk, recording what they saw, or bundled and imported.

* :func:`write_hook_dir`: a hook directory (``HOOK.md`` plus a handler) from a few arguments.
* :func:`hook_md` / :func:`hook_files`: a minimal valid hook as text, for archives and trees.
* :func:`recorder`: handler source that appends what it saw to a JSON-lines file in the state
  dir (read it back with :func:`tests.support.state.read_records`).
* :func:`load_bundled_hook`: ``hooks/<name>/handler.py`` imported by the daemon's own
  :class:`~gatewayd.hooks.importer.HookImporter`, exactly as ``gatewayd run`` imports it.
"""

from __future__ import annotations

import functools
import json
import os
import textwrap
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gatewayd.hooks.importer import HookImporter, package_name

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "hooks"

DEFAULT_HANDLER = "async def handler(event):\n    event.messages.append({name!r})\n"


def write_hook_dir(
    root: Path,
    name: str,
    *,
    events: Sequence[str] | None = ("command:new",),
    handler: str | None = DEFAULT_HANDLER,
    handler_file: str = "handler.py",
    meta: Mapping[str, Any] | None = None,
    frontmatter: Mapping[str, Any] | None = None,
    hook_md: str | None = None,
    dirname: str | None = None,
    namespace: str = "eliza",
) -> Path:
    """Write ``root/<dirname or name>/HOOK.md`` and a handler; return the hook directory.

    ``meta`` is merged into ``metadata.<namespace>`` (after ``events``), ``frontmatter`` into
    the top level. ``hook_md`` replaces the whole HOOK.md. ``handler`` is dedented and
    ``{name!r}`` in it is replaced by the hook name; None writes no handler. A handler file
    without a ``.py`` suffix is made executable (a command hook).
    """
    hook_dir = root / (dirname or name)
    hook_dir.mkdir(parents=True, exist_ok=True)
    if hook_md is None:
        ns: dict[str, Any] = {}
        if events is not None:
            ns["events"] = list(events)
        ns.update(meta or {})
        front: dict[str, Any] = {"name": name, "description": f"test hook {name}"}
        front.update(frontmatter or {})
        front["metadata"] = {namespace: ns}
        # JSON is YAML: the frontmatter below is exactly what the dict says.
        lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()]
        hook_md = "---\n" + "\n".join(lines) + "\n---\n\n# " + name + "\n"
    (hook_dir / "HOOK.md").write_text(hook_md, encoding="utf-8")
    if handler is not None:
        path = hook_dir / handler_file
        path.write_text(textwrap.dedent(handler).replace("{name!r}", repr(name)))
        if not handler_file.endswith(".py"):
            path.chmod(0o755)
    return hook_dir


class WriteHook(Protocol):
    """The ``write_hook`` fixture: :func:`write_hook_dir`."""

    def __call__(
        self,
        root: Path,
        name: str,
        *,
        events: Sequence[str] | None = ...,
        handler: str | None = ...,
        handler_file: str = ...,
        meta: Mapping[str, Any] | None = ...,
        frontmatter: Mapping[str, Any] | None = ...,
        hook_md: str | None = ...,
        dirname: str | None = ...,
        namespace: str = ...,
    ) -> Path: ...


HANDLER = "async def handler(event):\n    event.messages.append('{name} says hi')\n"


def hook_md(name: str, events: Iterable[str] = ("command:new",)) -> str:
    """A minimal ``HOOK.md`` for ``name`` listening to ``events``."""
    keys = ", ".join(f'"{e}"' for e in events)
    meta = f"metadata: {{eliza: {{events: [{keys}]}}}}"
    return f'---\nname: {name}\ndescription: "{name} hook"\n{meta}\n---\n\n# {name}\n'


def hook_files(name: str, events: Iterable[str] = ("command:new",)) -> dict[str, str]:
    """``{relative path: content}`` of a minimal valid Python hook replying ``<name> says hi``."""
    return {"HOOK.md": hook_md(name, events), "handler.py": HANDLER.format(name=name)}


RECORDER = """
import asyncio, json, os, time

async def handler(event):
    BEFORE
    ctx = event.context
    record = {
        "key": event.key,
        "session": event.session_key,
        "t": time.time(),
        "ctx": {k: v for k, v in ctx.items() if k in KEEP},
    }
    line = (json.dumps(record, default=str) + "\\n").encode()
    fd = os.open(
        os.path.join(os.environ["ELIZA_STATE_DIR"], FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, line)  # one write per record: concurrent handlers never tear a line
    finally:
        os.close(fd)
    REPLY
"""


def recorder(
    file: str = "record.jsonl", keep: Iterable[str] = (), reply: str = "", before: str = ""
) -> str:
    """Handler source that runs ``before`` (a statement, e.g. ``await asyncio.sleep(1)``),
    appends ``{key, session, t, ctx: <keep keys>}`` to ``file`` in the state dir, then runs
    ``reply`` (e.g. ``event.messages.append("x")``)."""
    return (
        RECORDER.replace("FILE", repr(file))
        .replace("KEEP", repr(set(keep)))
        .replace("BEFORE", before or "pass")
        .replace("REPLY", reply or "pass")
    )


@functools.cache
def _importer() -> HookImporter:
    """The suite's own importer, made on first use: its root package is its own, so nothing it
    loads collides with what a test's ``HookLoader`` imports from the same directory."""
    importer = HookImporter()
    importer.install()
    return importer


def load_bundled_hook(name: str) -> types.ModuleType:
    """``hooks/<name>/handler.py`` freshly imported the way the daemon's loader imports it (as
    a module of a per-hook package, registered in ``sys.modules`` while its code runs)."""
    directory = os.path.realpath(BUNDLED / name)
    importer = _importer()
    package = package_name(importer.root, name, directory, "bundled")
    return importer.load(package, directory, "handler.py", allow_links=True)


FD_LEAKER = """
import os

held: list[int] = []

def handler(event):
    if event.action == "leak":  # every descriptor the process may still open
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
    else:
        while held:
            os.close(held.pop())
    event.messages.append(f"held {len(held)}")
"""
"""A Python hook for ``command:leak`` (open descriptors until none is left: EMFILE for every
later open, socket and accept in the daemon) and ``command:free`` (close them); it replies
``held N``. Run the daemon under a low ``ulimit -n`` (``prefix``)."""
