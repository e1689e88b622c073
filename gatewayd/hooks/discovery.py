"""Finding hooks on disk: the roots, the hook directories in them, and who wins a name conflict.

Roots, lowest precedence first (docs/design.md s. 2, OpenClaw's order): the bundled hooks,
``hooks.load.extraDirs`` (each must resolve under the state dir, else it is rejected with a
reason), the managed hooks (``<state>/hooks``) and the workspace hooks (``<workspace>/hooks``). A
root that does not exist is simply empty.

A hook is an immediate subdirectory of a root holding ``HOOK.md`` (or a Hermes ``HOOK.yaml``),
or a directory an OpenClaw hook pack lists (a subdirectory whose ``package.json`` has
``openclaw.hooks``: the listed directories inside it, in that order); an extra dir may itself be
a hook or a pack. Entries are taken in sorted order (dot-directories are ignored). Its name is
the manifest's ``name``, or the directory name when the manifest is unreadable, so that a broken
override still claims its name and is seen as broken instead of the lower-precedence hook
running in its place. A later root wins a conflict and the loser is marked shadowed; of two
same-name hooks in one root the later wins, in the bundled root the first (as OpenClaw's
``resolveHookEntries`` merges them).

Then the agents' roots (``hooks/agents.py``): each subagent of the default agent
(``<workspace>/subagents/<subId>/hooks``), then each other configured agent's workspace hooks and
its subagents'. A hook in one of these is named ``<name>@<agentId>`` (``<name>@<agentId>/<subId>``
for a subagent's): it takes part in no name conflict outside its own root, because it replaces a
shared hook only within its own scope, when the registry plans an event.

A root also holds single-file hooks (Eve's shape): a ``.py``/``.ts``/``.js``/``.mjs`` file
outside any hook directory that calls ``define_hook(`` / ``defineHook(``, named by its path
without the suffix (``auth/load-profile``); the rule and what is skipped are in
``filescan.py``. They come after the root's hook directories, so a directory wins a name both
claim. Their events are in the code, so their manifest is a stand-in with none.

Handler lookup, first match wins: ``handler.py``, ``handler.ts``, ``handler.js``,
``handler.mjs``, ``handler`` (executable), then the same for ``index`` -- a few ``stat`` calls per
hook, no directory walk (a hook with none is listed once, to name what it holds instead).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from gatewayd.atomic import not_regular, read_regular
from gatewayd.hooks.agents import SUBAGENTS_DIR
from gatewayd.hooks.filescan import scan_files
from gatewayd.hooks.metadata import MAX_HOOK_MD_BYTES as MAX_MANIFEST
from gatewayd.hooks.metadata import HookManifest, ManifestCache, ManifestError
from gatewayd.hooks.names import normalize_name, shown
from gatewayd.hooks.spec import LoadSpec
from gatewayd.paths import is_inside

MANIFEST_FILES: Final = ("HOOK.md", "HOOK.yaml")
"""What makes a directory a hook: a ``HOOK.md``, else a Hermes ``HOOK.yaml``."""

SOURCES: Final = ("bundled", "extra", "managed", "workspace")
"""Root sources in precedence order, lowest first (OpenClaw's: bundled, then its extra dirs and
managed hooks, then the workspace)."""

PACK_MANIFEST: Final = "package.json"
"""A hook pack's manifest: its ``openclaw.hooks`` lists the hook directories in the pack."""

LATER_WINS: Final = frozenset({"extra", "managed", "workspace"})
"""Sources where, of two hooks of one name in one root, the later (sorted) wins, as OpenClaw
merges them; in the bundled root the first wins."""

HANDLER_FILES: Final = (
    ("handler.py", False),
    ("handler.ts", False),
    ("handler.js", False),
    ("handler.mjs", False),
    ("handler", True),
    ("index.py", False),
    ("index.ts", False),
    ("index.js", False),
    ("index.mjs", False),
    ("index", True),
)
"""Handler file names in lookup order, and whether each must be executable (a command hook).
``.ts``/``.js``/``.mjs`` handlers run in the Node worker (``gatewayd.hooks.node``)."""

_CODE_SUFFIXES: Final = frozenset(
    {".py", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".sh", ".bash"}
)
_HANDLER_NAMES: Final = tuple(filename for filename, _ in HANDLER_FILES)
_HANDLER_LIST: Final = (
    "handler.py, handler.ts, handler.js, handler.mjs, handler (executable), index.py, "
    "index.ts, index.js, index.mjs or index (executable)"
)


def _unrunnable(hook_dir: Path) -> list[str]:
    """Code-like files at the top of a hook directory that no lookup name matches."""
    try:
        names = sorted(os.listdir(hook_dir))
    except OSError:
        return []
    return [
        name
        for name in names
        if not name.startswith(".")
        and name not in _HANDLER_NAMES
        and os.path.splitext(name)[1].lower() in _CODE_SUFFIXES
    ]


def _unusable(hook_dir: Path) -> list[str]:
    """Why each handler name present in ``hook_dir`` is no file to run: a directory, a FIFO, a
    symlink leading nowhere or to itself. (Once reported as "none of which is a handler:
    rename handler.py to ... handler.py".)"""
    problems = []
    for filename in _HANDLER_NAMES:
        path = os.path.join(hook_dir, filename)
        try:
            os.lstat(path)
        except OSError:
            continue  # not there
        try:
            st = os.stat(path)
        except OSError as exc:
            problems.append(f"{path} is a symlink that cannot be followed ({exc.strerror})")
            continue
        if (why := not_regular(path, st.st_mode)) is not None:
            problems.append(why)
    return problems


@dataclass(frozen=True, slots=True)
class HookRoot:
    """One directory hooks are discovered in."""

    source: str
    """``extra``, ``bundled``, ``managed`` or ``workspace``."""
    path: Path
    real: Path
    """``os.path.realpath`` of ``path`` (computed even when it does not exist)."""
    agent: str | None = None
    """The agent whose workspace this is (``None``: a shared root)."""
    subagent: str | None = None
    """The subagent whose ``hooks`` dir this is."""
    qualifier: str | None = None
    """``<agentId>`` or ``<agentId>/<subId>``: what its hooks' names carry after ``@``
    (``None`` for the shared roots and the default agent's own workspace)."""

    @classmethod
    def at(
        cls,
        source: str,
        path: Path,
        agent: str | None = None,
        subagent: str | None = None,
        qualifier: str | None = None,
    ) -> HookRoot:
        """The root at ``path`` (resolved now, whether or not it exists)."""
        return cls(source, path, Path(os.path.realpath(path)), agent, subagent, qualifier)

    def qualify(self, name: str) -> str:
        """A hook name (or key) as this root's hooks carry it: ``name@<qualifier>``."""
        return f"{name}@{self.qualifier}" if self.qualifier else name


@dataclass(slots=True)
class FoundHook:
    """One hook directory, its parsed manifest (or why not), and whether it is shadowed."""

    root: HookRoot
    path: Path
    manifest: HookManifest | None
    errors: Sequence[str]
    """Why the ``HOOK.md`` is unusable (empty when ``manifest`` is set)."""
    handler: Path | None
    command: bool
    """True when the handler is an executable (a command hook), not a Python file."""
    handler_problem: str | None
    """Why no handler was found, when ``handler`` is None."""
    shadowed_by: str | None = None
    """Why another hook wins this one's name, when it does."""
    single_file: bool = False
    """A single-file hook: ``path`` and ``handler`` are its file, its events are in its code."""

    @property
    def name(self) -> str:
        """Its name: the manifest's (else the directory's), ``@<qualifier>`` in an agent's
        scoped root."""
        return self.root.qualify(self.manifest.name if self.manifest else _dir_name(self.path))

    @property
    def hook_key(self) -> str:
        """Its key in ``hooks.entries``, qualified as its name is."""
        return self.root.qualify(self.manifest.hook_key if self.manifest else _dir_name(self.path))


@dataclass(slots=True)
class Discovery:
    """Every hook found, in load order (root precedence, then sorted), and rejected roots."""

    roots: list[HookRoot]
    hooks: list[FoundHook]
    rejected_roots: list[str] = field(default_factory=list)
    """Why each refused root was left out: an extraDir outside the state dir, a root (or a
    ``subagents`` dir) that exists but cannot be listed."""
    not_hooks: list[str] = field(default_factory=list)
    """``path: reason`` for each code file in a root that is not a single-file hook."""


class UnreadableRoot(Exception):
    """A hook root that exists but cannot be listed (a symlink loop, no permission, EIO);
    the message says which, and what to do."""


def _unreadable(path: Path, exc: OSError) -> str:
    return (
        f"{path}: cannot be listed ({exc.strerror or exc}); its hooks are not loaded until "
        "it can be (fix its permissions, or the symlink it is)"
    )


def hook_roots(spec: LoadSpec) -> tuple[list[HookRoot], list[str]]:
    """The roots in precedence order (lowest first), and a reason per rejected extraDir."""
    state_real = Path(os.path.realpath(spec.state_dir))
    roots: list[HookRoot] = [HookRoot.at("bundled", spec.bundled_hooks)]
    rejected: list[str] = []
    for raw in spec.extra_dirs:
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = spec.state_dir / path
        real = Path(os.path.realpath(path))
        if not is_inside(real, state_real):
            rejected.append(
                f"hooks.load.extraDirs: {raw} resolves to {real}, outside the state dir "
                f"{state_real}; move it (or a symlink to it) under the state dir"
            )
            continue
        roots.append(HookRoot("extra", path, real))
    roots.append(HookRoot.at("managed", spec.managed_hooks))
    agents = spec.agents
    default = agents.default
    roots.append(HookRoot.at("workspace", spec.workspace_hooks, default))
    roots.extend(_subagent_roots(spec.workspace_dir, default, rejected))
    for agent in sorted(a for a in agents.workspaces if a != default):
        workspace = agents.workspaces[agent]
        roots.append(HookRoot.at("workspace", workspace / "hooks", agent, qualifier=agent))
        roots.extend(_subagent_roots(workspace, agent, rejected))
    return roots, rejected


def subagents_dirs(spec: LoadSpec) -> list[Path]:
    """Each agent workspace's ``subagents`` dir, existing or not (what the watcher watches,
    so that a subagent created later is seen)."""
    workspaces = [spec.workspace_dir, *spec.agents.workspaces.values()]
    return [workspace / SUBAGENTS_DIR for workspace in workspaces]


def _subagent_roots(workspace: Path, agent: str, rejected: list[str]) -> list[HookRoot]:
    """``<workspace>/subagents/<subId>/hooks`` of each subagent that has one, sorted; why the
    ``subagents`` dir cannot be read, when it exists and cannot, goes to ``rejected``."""
    base = workspace / SUBAGENTS_DIR
    try:
        names = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        rejected.append(_unreadable(base, exc))
        return []
    roots = []
    for sub in names:
        path = base / sub / "hooks"
        if sub.startswith(".") or ":" in sub or not path.is_dir():
            continue
        roots.append(HookRoot.at("workspace", path, agent, sub, f"{agent}/{sub}"))
    return roots


def find_handler(hook_dir: Path) -> tuple[Path | None, bool, str | None]:
    """``(handler, is_command, problem)`` for a hook directory; see :data:`HANDLER_FILES`."""
    not_executable: list[str] = []
    prefix = f"{hook_dir}{os.sep}"
    for filename, executable in HANDLER_FILES:
        try:
            st = os.stat(prefix + filename)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if executable and not st.st_mode & 0o111:
            not_executable.append(filename)
            continue
        return hook_dir / filename, executable, None
    problem = f"no handler in {hook_dir}: expected {_HANDLER_LIST}"
    if unusable := _unusable(hook_dir):
        problem += f"; {'; '.join(unusable)}: put the handler's code in a regular file of that name"
    if found := _unrunnable(hook_dir):
        entry = next((n for n in found if os.path.splitext(n)[0] in ("handler", "index")), None)
        if entry is not None:
            stem = os.path.splitext(entry)[0]
            hint = (
                f"rename {entry} to {stem}.ts, {stem}.js or {stem}.py (TSX needs a build step; "
                "plain TypeScript and CommonJS or ESM .js load as they are)"
            )
        else:
            hint = "name its entry file handler.ts, handler.js or handler.py"
        problem += f"; found {', '.join(found)}, none of which is a handler: {hint}"
    if not_executable:
        names = " and ".join(not_executable)
        problem += f"; {names} exists but is not executable (chmod +x it)"
    return None, False, problem


def pack_hooks(directory: Path) -> list[str] | None:
    """The hook paths a pack's ``package.json`` lists under ``openclaw.hooks`` (trimmed, empty
    ones dropped), or ``None`` when ``directory`` is no hook pack: no such file, no JSON object,
    no list there, or an empty one (then its own ``HOOK.md``, if any, makes it a hook)."""
    try:
        data = read_regular(directory / PACK_MANIFEST, MAX_MANIFEST)
        manifest = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    section = manifest.get("openclaw") if isinstance(manifest, dict) else None
    listed = section.get("hooks") if isinstance(section, dict) else None
    if not isinstance(listed, list):
        return None
    paths = [item.strip() for item in listed if isinstance(item, str) and item.strip()]
    return paths or None


def _manifest_of(hook_dir: Path) -> tuple[str, bytes | None] | None:
    """``(manifest file name, its bytes)`` when ``hook_dir`` is a hook directory; the bytes are
    ``None`` when the manifest is not a readable regular file (reading it again says why)."""
    prefix = f"{hook_dir}{os.sep}"
    # The usual case first: a HOOK.md that reads is a regular file, so it is read without
    # asking isfile() first (a stat per hook: ~2.5 us of each hook's cold load).
    try:
        return MANIFEST_FILES[0], read_regular(prefix + MANIFEST_FILES[0], MAX_MANIFEST)
    except OSError:
        pass
    manifest = next((m for m in MANIFEST_FILES if os.path.isfile(prefix + m)), None)
    if manifest is None:
        # A HOOK.md that is there but no file (a directory, a FIFO, a dangling link) still
        # makes a hook: reading it fails and says why, rather than the hook just vanishing.
        manifest = next((m for m in MANIFEST_FILES if os.path.lexists(prefix + m)), None)
    return None if manifest is None else (manifest, None)


def _candidate(directory: Path) -> Iterator[tuple[Path, str, bytes | None]]:
    """The hooks of one candidate directory: the hooks its pack lists (each inside it, in the
    order listed), else itself when it holds a manifest."""
    listed = pack_hooks(directory)
    if listed is None:
        if (found := _manifest_of(directory)) is not None:
            yield directory, *found
        return
    base = os.path.realpath(directory)
    for entry in listed:
        hook_dir = Path(os.path.normpath(directory / entry))
        if not is_inside(Path(os.path.realpath(hook_dir)), Path(base)):
            continue  # OpenClaw ignores a pack path outside the pack
        if hook_dir.is_dir() and (found := _manifest_of(hook_dir)) is not None:
            yield hook_dir, *found


def _entries(root: HookRoot) -> Iterator[tuple[str, Path, str, bytes | None]]:
    """``(top-level name, hook directory, manifest file name, its bytes)`` of each hook in
    ``root``: the hooks of each directory at its top, sorted by name (a hook pack's as its
    ``package.json`` lists them). An extra dir may itself be a pack or a hook, and then holds
    only those. Raises :class:`UnreadableRoot` for a root that exists but cannot be listed."""
    if root.source == "extra" and root.path.is_dir():
        own = list(_candidate(root.path))
        if own or pack_hooks(root.path) is not None:
            for hook_dir, manifest, data in own:
                yield "", hook_dir, manifest, data
            return
    try:
        with os.scandir(root.path) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise UnreadableRoot(_unreadable(root.path, exc)) from exc
    for entry in entries:
        name = entry.name
        if name.startswith(".") or name == "__pycache__":
            continue
        # is_dir() comes from the directory listing (no stat) except for a symlink; a file
        # is skipped without looking for a manifest inside it.
        try:
            if not entry.is_dir():
                continue
        except OSError:  # a symlink whose target cannot be read: no manifest to be found
            continue
        for hook_dir, manifest, data in _candidate(root.path / name):
            yield name, hook_dir, manifest, data


def scan(
    root: HookRoot, manifests: ManifestCache, not_hooks: list[str] | None = None
) -> list[FoundHook]:
    """The hooks in one root: directories in sorted order, with manifests parsed and handlers
    looked up, then single-file hooks; ``not_hooks`` gets why other code files are not hooks."""
    found = []
    hook_dirs: set[str] = set()
    own = False
    for name, hook_dir, manifest_file, data in _entries(root):
        hook_dirs.add(name)
        own = own or not name
        hook_md = hook_dir / manifest_file
        manifest: HookManifest | None = None
        errors: Sequence[str] = ()
        try:
            manifest = manifests.read(hook_md, source=str(hook_md), data=data)
        except ManifestError as exc:
            errors = exc.errors
        handler, command, problem = find_handler(hook_dir)
        found.append(FoundHook(root, hook_dir, manifest, errors, handler, command, problem))
    if own:  # an extra dir that is itself a hook or a pack: its files are its hooks'
        return found
    files, notes = scan_files(root.path, hook_dirs)
    if not_hooks is not None:
        not_hooks.extend(notes)
    for file in files:
        stand_in = HookManifest(path=file.path, name=file.name, hook_key=file.name)
        hook = FoundHook(
            root,
            file.path,
            stand_in,
            (),
            None if file.problem else file.path,
            False,
            file.problem,
            single_file=True,
        )
        found.append(hook)
    return found


def discover(spec: LoadSpec, manifests: ManifestCache | None = None) -> Discovery:
    """Scan every root and resolve name conflicts; nothing is imported. ``manifests`` caches
    parsed HOOK.md files across scans (re-parsed whenever a file's bytes change); without one
    every HOOK.md is parsed afresh."""
    if manifests is None:
        manifests = ManifestCache()
    roots, rejected = hook_roots(spec)
    hooks: list[FoundHook] = []
    not_hooks: list[str] = []
    winner: dict[str, FoundHook] = {}
    for root in roots:
        in_root: dict[str, FoundHook] = {}
        try:
            found = scan(root, manifests, not_hooks)
        except UnreadableRoot as exc:  # was an OSError out of every load, the first included
            rejected.append(str(exc))
            continue
        for hook in found:
            hooks.append(hook)
            name = hook.name
            first = in_root.get(name)
            if first is not None:
                if root.source not in LATER_WINS:
                    hook.shadowed_by = (
                        f"duplicate name {name!r} in the {root.source} root: "
                        f"{first.path} comes first and wins"
                    )
                    continue
                first.shadowed_by = (
                    f"duplicate name {name!r} in the {root.source} root: {hook.path} comes "
                    "later and wins (as OpenClaw merges hooks of one root)"
                )
                in_root[name] = hook
                if winner.get(name) is first:
                    winner[name] = hook
                continue
            in_root[name] = hook
            if root.qualifier is not None:
                continue  # replaces a shared hook only in its own scope (the registry's plan)
            previous = winner.get(name)
            if previous is not None:
                previous.shadowed_by = (
                    f"shadowed by the {root.source} hook at {hook.path} "
                    f"(a later root wins a name conflict)"
                )
            winner[name] = hook
    manifests.retain_read()
    return Discovery(roots, hooks, rejected, not_hooks)


def _dir_name(path: Path) -> str:
    """The name of a hook whose HOOK.md could not be read: its directory's, normalised and
    escaped (it may be what made the hook invalid)."""
    return shown(normalize_name(path.name))
