"""Finding single-file hooks in a hook root, and saying why every other code file is not one.

A file in a root is a *single-file hook* (Eve's shape) when all of these hold:

* its suffix is ``.py``, ``.ts``, ``.js`` or ``.mjs``;
* it is not inside a hook directory (a directory holding ``HOOK.md`` or ``HOOK.yaml``: those
  files belong to that hook), nor under a directory named ``node_modules``, ``__pycache__``,
  ``tests``, ``__tests__`` or starting with ``.``;
* it is not a test or a declaration file: ``test_*.py``, ``*_test.py``, ``conftest.py``,
  ``*.test.*``, ``*.spec.*``, ``*.d.ts``, nor ``__init__.py``;
* its source calls ``define_hook(`` (Python) or ``defineHook(`` (JS/TS).

Everything else is a helper (imported by hooks, never run as one), listed by ``gatewayd hooks
check`` with the reason. The hook's name is the file's path relative to the root without the
suffix, ``/``-separated (``auth/load-profile.ts`` is ``auth/load-profile``); each segment must
be a hook name (lowercase letters, digits, ``-``, ``_``), else the hook fails with the rename.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gatewayd.atomic import NotRegularFile, read_regular
from gatewayd.hooks.names import SLUG

HOOK_SUFFIXES: Final = (".py", ".ts", ".js", ".mjs")
"""What a single-file hook may be; ``.ts``/``.js``/``.mjs`` run in the Node worker."""
SKIPPED_DIRS: Final = frozenset({"node_modules", "__pycache__", "tests", "__tests__"})
_OTHER_CODE: Final = frozenset({".tsx", ".jsx", ".cjs", ".mts", ".cts"})
_TEST_FILE: Final = re.compile(
    r"^(test_.*\.py|.*_test\.py|conftest\.py|__init__\.py|.*\.(test|spec)\.(ts|js|mjs)|.*\.d\.ts)$"
)
_MARKER: Final = {
    ".py": re.compile(rb"\bdefine_hook\s*\("),
    ".ts": re.compile(rb"\bdefineHook\s*\("),
    ".js": re.compile(rb"\bdefineHook\s*\("),
    ".mjs": re.compile(rb"\bdefineHook\s*\("),
}
MAX_DEPTH: Final = 8
MAX_READ: Final = 1 << 20
MANIFEST_FILES: Final = ("HOOK.md", "HOOK.yaml")


@dataclass(frozen=True, slots=True)
class HookFile:
    """One single-file hook found: its name, its file, and why its name is unusable (if so)."""

    name: str
    path: Path
    problem: str | None = None


def is_hook_dir(path: Path) -> bool:
    return any(os.path.isfile(path / manifest) for manifest in MANIFEST_FILES)


def _calls_define(path: Path, suffix: str) -> bool | None:
    """Whether the head of ``path`` calls define_hook/defineHook; None when it is not a
    regular file (read by :func:`read_regular`: a FIFO named ``x.py`` in a root waited for a
    writer, and the load, every later reload and the start with it)."""
    try:
        head = read_regular(path, MAX_READ, head=True)
    except NotRegularFile:
        return None
    except OSError:
        return False
    return _MARKER[suffix].search(head) is not None


def _name_problem(relative: str, name: str) -> str | None:
    if all(SLUG.fullmatch(segment) for segment in name.split("/")):
        return None
    fixed = "/".join(
        re.sub(r"[^a-z0-9_-]+", "-", segment.lower()).strip("-") or "hook"
        for segment in name.split("/")
    )
    return (
        f"{relative}: hook name {name!r} (its path without the suffix) is not lowercase "
        f"letters, digits, '-' and '_' in each part; rename the file (e.g. to "
        f"{fixed}{os.path.splitext(relative)[1]})"
    )


def scan_files(
    root: Path, hook_dirs: Container[str] = frozenset()
) -> tuple[list[HookFile], list[str]]:
    """The single-file hooks under ``root`` (sorted by path) and ``path: why not a hook`` for
    every other code file and skipped directory (see the module docstring). ``hook_dirs``: names
    of directories at the top of ``root`` the caller already knows hold a manifest."""
    found: list[HookFile] = []
    notes: list[str] = []

    def walk(directory: Path, prefix: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            if name.startswith(".") or name == "__pycache__":
                continue
            if depth == 1 and name in hook_dirs and name not in SKIPPED_DIRS:
                continue  # a hook directory: its files are that hook's
            path = directory / name
            relative = prefix + name
            if path.is_dir():
                if name in SKIPPED_DIRS:
                    notes.append(f"{path}/: {name} is never searched for hooks")
                elif not is_hook_dir(path) and depth < MAX_DEPTH:
                    walk(path, relative + "/", depth + 1)
                continue
            stem, suffix = os.path.splitext(name)
            if suffix in _OTHER_CODE:
                notes.append(
                    f"{path}: {suffix} is not a hook suffix (a single-file hook is .py, .ts, "
                    ".js or .mjs); rename it if it is a hook"
                )
                continue
            if suffix not in HOOK_SUFFIXES:
                continue
            if _TEST_FILE.match(name):
                notes.append(f"{path}: a test, package or declaration file, never a hook")
                continue
            calls = _calls_define(path, suffix)
            if calls is None:
                notes.append(f"{path}: not a regular file (a FIFO, device or socket), never a hook")
                continue
            if not calls:
                call = "define_hook(events=...)" if suffix == ".py" else "defineHook({events})"
                notes.append(f"{path}: a helper (it does not call {call}), not a hook")
                continue
            hook_name = prefix + stem
            found.append(HookFile(hook_name, path, _name_problem(relative, hook_name)))

    walk(root, "", 1)
    return found, notes
