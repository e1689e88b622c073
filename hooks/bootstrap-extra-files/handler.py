"""bootstrap-extra-files: add glob-matched bootstrap files to ``agent:bootstrap``.

A plain (sync) handler, run in a worker thread: it reads files. It builds the new list aside and
swaps it into ``context["bootstrapFiles"]`` in one slice assignment at the end, so a failure
half-way leaves the gateway's list untouched. Every candidate is checked three ways: its basename
is a standard bootstrap name, its real path is inside the workspace's real path (checked again on
the opened descriptor, so a directory swapped for a symlink after the check is still caught), and
it is a regular file of at most 2 MiB.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Mapping, MutableSequence
from pathlib import Path
from typing import Any

from gatewayd.hooks import BootstrapContext, HookContext, HookEvent
from gatewayd.paths import is_inside
from gatewayd.sessions import BOOTSTRAP_NAMES

STANDARD_NAMES = frozenset(BOOTSTRAP_NAMES)  # the gateway's own list: one place to change
MINIMAL_NAMES = frozenset({"AGENTS.md", "TOOLS.md", "SOUL.md", "IDENTITY.md", "USER.md"})
"""What subagent and cron sessions keep."""
MAX_BYTES = 2 * 1024 * 1024
SETTING_KEYS = ("paths", "patterns", "files")


class Refused(Exception):
    """A matched path that may not be added; the message is the reason."""


def is_minimal_session(session_key: str) -> bool:
    return ":subagent:" in session_key or ":cron:" in session_key


def configured_globs(ctx: Any) -> list[str]:
    """The entry's ``paths``, ``patterns`` and ``files``, in that order; bad settings logged."""
    globs: list[str] = []
    for key in SETTING_KEYS:
        value = ctx.config.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            ctx.log.warning(
                "bootstrap_extra_files.bad_setting",
                key=f"hooks.entries.{ctx.hook_key}.{key}",
                value=value,
                fix="use a list of globs relative to the workspace",
            )
            continue
        globs += [v for v in value if v.strip()]
    return globs


def expand(workspace: Path, pattern: str) -> list[str]:
    """Absolute paths matched by ``pattern`` (relative to ``workspace``), sorted."""
    if not glob.has_magic(pattern):
        return [os.path.join(workspace, pattern)]
    if "**" in pattern.split("/"):
        return sorted(os.path.join(workspace, m) for m in _recursive_matches(workspace, pattern))
    matches = glob.glob(pattern, root_dir=workspace, recursive=True)
    return sorted(os.path.join(workspace, m) for m in matches)


MAX_WALKED = 100_000
"""Directory entries a ``**`` pattern looks at, at most (a workspace is not a disk)."""


def _recursive_matches(workspace: Path, pattern: str) -> list[str]:
    """What ``glob(pattern, recursive=True)`` matches, except that ``**`` never descends into a
    symlinked directory: ``glob`` does, so two links back up (``a -> .``, ``b -> .``) made
    ``**/AGENTS.md`` walk 2**40 paths, a thread past its timeout running (and growing) for ever.
    Hidden names are matched only by a pattern part that starts with ``.``, as glob does. The
    walk starts at the pattern's leading directories without wildcards (absolute, or ``..``)."""
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = "/".join(parts[:first]) or "."
    rest: list[str] = []
    for part in parts[first:]:
        if part not in ("", ".") and not (part == "**" and rest[-1:] == ["**"]):
            rest.append(part)  # **/** is **: matched once, not once per way to split
    root = os.path.join(workspace, base)
    dirs_only = pattern.endswith("/")  # as in glob: a trailing / matches directories only
    # a trailing ** matches the directory it starts from, as glob does (not the workspace)
    matches = [os.path.normpath(base)] if base != "." and _matches([], rest) else []
    walked = 0
    for top, dirs, files in os.walk(root):  # never follows a symlinked directory
        rel = os.path.relpath(top, root)
        prefix = [] if rel == "." else rel.split(os.sep)
        for name in sorted(dirs) if dirs_only else sorted(files) + sorted(dirs):
            walked += 1
            if _matches([*prefix, name], rest):
                matches.append(os.path.normpath(os.path.join(base, *prefix, name)))
        if walked > MAX_WALKED:
            break
    return matches


def _matches(names: list[str], parts: list[str]) -> bool:
    """Whether the relative path ``names`` matches the pattern ``parts`` (``**``: any number of
    directories, none hidden)."""
    if not parts:
        return not names
    head, rest = parts[0], parts[1:]
    if head == "**":
        if _matches(names, rest):
            return True
        # ** takes a directory, or, last in the pattern, anything under it
        takes = len(names) > 1 or not rest
        return takes and not names[0].startswith(".") and _matches(names[1:], parts)
    if not names or (names[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], head) and _matches(names[1:], rest)


def read_checked(path: str, workspace_real: str) -> tuple[str, str]:
    """``(real path, text)`` of an allowed bootstrap file; raises :class:`Refused` with why not."""
    if os.path.basename(path) not in STANDARD_NAMES:
        raise Refused("not a bootstrap file name (" + ", ".join(sorted(STANDARD_NAMES)) + ")")
    real = os.path.realpath(path)
    if not is_inside(real, workspace_real):
        raise Refused(f"resolves to {real}, outside the workspace {workspace_real}")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Refused("not found") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("not a regular file")
        opened = f"/proc/self/fd/{fd}"  # Linux: where the descriptor really points
        if os.path.exists(opened) and not is_inside(os.readlink(opened), workspace_real):
            raise Refused(f"moved outside the workspace while being opened ({os.readlink(opened)})")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise Refused(f"larger than {MAX_BYTES} bytes (2 MiB)")
    return real, data.decode("utf-8", errors="replace")


def known_paths(files: list[Any]) -> set[str]:
    """Real paths of the entries already in the list."""
    paths = set()
    for entry in files:
        if isinstance(entry, Mapping) and entry.get("path") and not entry.get("missing"):
            paths.add(os.path.realpath(str(entry["path"])))
    return paths


def extend(files: list[Any], workspace: Path, globs: list[str], log: Any) -> None:
    """Append the allowed files matched by ``globs`` to ``files``, skipping ones already there."""
    workspace_real = os.path.realpath(workspace)
    seen = known_paths(files)
    for pattern in globs:
        for path in expand(workspace, pattern):
            try:
                real, text = read_checked(path, workspace_real)
            except (Refused, OSError) as why:
                log.info("bootstrap_extra_files.refused", path=path, glob=pattern, reason=str(why))
                continue
            if real in seen:
                continue
            seen.add(real)
            files.append(
                {"name": os.path.basename(path), "path": path, "content": text, "missing": False}
            )


def handler(event: HookEvent[BootstrapContext], ctx: HookContext) -> None:
    """Extend and filter ``event.context["bootstrapFiles"]`` in place; never raises."""
    try:
        files = event.context.setdefault("bootstrapFiles", [])
        if not isinstance(files, MutableSequence):
            raise TypeError(f"context['bootstrapFiles'] is a {type(files).__name__}, not a list")
        new = list(files)
        globs = configured_globs(ctx)
        if globs:
            workspace = Path(ctx.workspace_dir)  # never the event's: a client may write that
            extend(new, workspace, globs, ctx.log)
        if is_minimal_session(event.session_key):
            new = [f for f in new if isinstance(f, Mapping) and f.get("name") in MINIMAL_NAMES]
        files[:] = new
    except Exception as exc:
        ctx.log.error(
            "bootstrap_extra_files.failed",
            session_key=event.session_key,
            error=f"{type(exc).__name__}: {exc}",
        )
