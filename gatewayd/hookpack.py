"""What a hook source holds: its hooks, found and validated, before anything is installed.

A *source* (what ``gatewayd hooks install`` is given) is one of:

* a hook directory (it holds ``HOOK.md``);
* a hook pack: a directory whose manifest lists hook directories inside it, either
  ``pyproject.toml`` with ``[tool.eliza] hooks = ["hooks/a", "hooks/b"]`` or ``hooks.yaml`` with
  ``hooks: [hooks/a, hooks/b]`` (both may be present if they list the same hooks);
* either of them packed as ``.tar.gz``, ``.tgz`` or ``.zip``, at the archive's top level or
  inside its one top-level directory. Members are checked by :mod:`gatewayd.archives` and
  unpacked into a private temporary directory the caller gives, never into the state dir.

:func:`read_source` checks every hook and reports every problem at once (:class:`InstallError`):
``HOOK.md`` parses (:func:`gatewayd.hooks.metadata.read_manifest`), the name is valid
(:func:`gatewayd.authoring.name_problem`), a handler exists (:func:`find_handler`), a Python
handler compiles, the directory holds only regular files and directories (no symlinks, devices
or FIFOs), and no two hooks of a pack share a name. Nothing here writes outside ``work``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from gatewayd.archives import ArchiveError, extract, is_archive
from gatewayd.authoring import name_problem
from gatewayd.hooks.discovery import find_handler
from gatewayd.hooks.metadata import HookManifest, ManifestError, read_manifest
from gatewayd.paths import is_inside
from gatewayd.yamlio import YamlError, load_yaml

SKIPPED_DIRS: Final = frozenset({"__pycache__", ".git", ".hg", ".svn", "__MACOSX"})
"""Directories never installed (nor hashed): caches and version-control metadata."""
SKIPPED_SUFFIXES: Final = (".pyc", ".pyo")
SKIPPED_FILES: Final = frozenset({".DS_Store"})
LINK_FIX: Final = "replace it with a copy of its target (hooks are installed without links)"


class InstallError(Exception):
    """An install or uninstall refused; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


# -- reading a source --------------------------------------------------------------------------


def hook_files(directory: Path, label: str) -> tuple[list[str], list[str]]:
    """``(files, problems)``: the relative POSIX paths of the regular files under ``directory``
    (sorted; caches and VCS metadata left out) and why any entry cannot be installed."""
    files: list[str] = []
    problems: list[str] = []

    def unreadable(exc: OSError) -> None:
        problems.append(f"{label}: cannot read {exc.filename}: {exc.strerror or exc}")

    for current, dirnames, filenames in os.walk(directory, onerror=unreadable):
        base = Path(current)
        rel_base = base.relative_to(directory)
        for name in list(dirnames):
            st = os.lstat(base / name)
            if name in SKIPPED_DIRS:
                dirnames.remove(name)
            elif stat.S_ISLNK(st.st_mode):
                dirnames.remove(name)
                rel = (rel_base / name).as_posix()
                problems.append(f"{label}/{rel}: is a symlink; {LINK_FIX}")
        for name in filenames:
            rel = (rel_base / name).as_posix()
            if name in SKIPPED_FILES or name.endswith(SKIPPED_SUFFIXES):
                continue
            mode = os.lstat(base / name).st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{label}/{rel}: is a symlink; {LINK_FIX}")
            elif not stat.S_ISREG(mode):
                problems.append(f"{label}/{rel}: is not a regular file (a device, FIFO or socket)")
            else:
                files.append(rel)
    return sorted(files), problems


def content_hash(directory: Path, files: list[str]) -> str:
    """sha256 over the hook's files in sorted order of relative path: for each file its path
    (UTF-8), a NUL byte, its length (8 bytes, big-endian) and its bytes."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        data = (directory / rel).read_bytes()
        digest.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def tree_hash(directory: Path) -> str | None:
    """:func:`content_hash` of the files now under ``directory``; None when it also holds
    something install never creates (a symlink, a FIFO) or cannot be read."""
    files, problems = hook_files(directory, str(directory))
    return None if problems else content_hash(directory, files)


@dataclass(frozen=True, slots=True)
class CheckedHook:
    """One hook of a source that passed every check."""

    name: str
    directory: Path
    """Where its files are now (the source tree, or the private extraction directory)."""
    member: str
    """Its path inside the source (``.`` when the source is the hook itself)."""
    label: str
    """How messages name it: the source path, ``pack.tgz:hooks/a`` inside an archive."""
    manifest: HookManifest
    files: tuple[str, ...]
    command: bool
    warnings: tuple[str, ...]


def _compile_problem(path: Path, label: str) -> str | None:
    """A Python handler's syntax error, as ``label:line: SyntaxError: msg``; None if it compiles."""
    try:
        source = path.read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings are the author's business
            compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{label}:{exc.lineno}: SyntaxError: {exc.msg}"
    except (OSError, ValueError) as exc:
        return f"{label}: cannot compile: {exc}"
    return None


def check_hook(directory: Path, label: str, member: str) -> tuple[CheckedHook | None, list[str]]:
    """Validate one hook directory; returns the checked hook (None when unusable) and problems."""
    files, problems = hook_files(directory, label)
    if "HOOK.md" not in files:
        return None, [*problems, f"{label}: no HOOK.md (a hook directory starts with one)"]
    manifest: HookManifest | None = None
    try:
        manifest = read_manifest(directory / "HOOK.md", source=f"{label}/HOOK.md")
    except ManifestError as exc:
        problems += exc.errors
    name = manifest.name if manifest else directory.name
    if bad_name := name_problem(name):
        problems.append(f"{label}/HOOK.md: name: {bad_name}")
    handler, command, missing = find_handler(directory)
    if handler is None:
        problems.append((missing or "no handler").replace(str(directory), label))
    elif not command and (problem := _compile_problem(handler, f"{label}/{handler.name}")):
        problems.append(problem)
    if manifest is None or problems:
        return None, problems
    notes = list(manifest.warnings)
    if not manifest.events:
        notes.append(f"{label}/HOOK.md: no events in metadata.eliza.events: it will never run")
    return CheckedHook(
        name, directory, member, label, manifest, tuple(files), command, tuple(notes)
    ), []


def _relative_entry(root: Path, entry: Any, where: str) -> tuple[Path | None, str | None]:
    """A manifest entry as a directory inside ``root``, or why it is not one."""
    if not isinstance(entry, str) or not entry.strip():
        return None, f"{where}: entries must be non-empty strings (hook directories), got {entry!r}"
    posix = PurePosixPath(entry)
    if posix.is_absolute() or ".." in posix.parts:
        return None, f"{where}: {entry!r} must be a relative path inside the pack, without '..'"
    path = root.joinpath(*posix.parts)
    real, root_real = os.path.realpath(path), os.path.realpath(root)
    if not is_inside(real, root_real):
        return None, f"{where}: {entry!r} resolves outside the pack (a symlink?)"
    if not path.is_dir():
        return None, f"{where}: {entry!r} is not a directory in the pack"
    return path, None


def read_pack_manifest(root: Path, label: str) -> tuple[list[str] | None, str | None, list[str]]:
    """``(entries, manifest file name, problems)``; entries is None when ``root`` has neither
    a ``pyproject.toml`` with ``[tool.eliza] hooks`` nor a ``hooks.yaml``."""
    found: dict[str, Any] = {}
    problems: list[str] = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            problems.append(f"{label}/pyproject.toml: not valid TOML: {exc}")
        else:
            eliza = data.get("tool", {}).get("eliza")
            if isinstance(eliza, dict) and "hooks" in eliza:
                found["pyproject.toml"] = eliza["hooks"]
            elif eliza is not None:
                problems.append(f"{label}/pyproject.toml: [tool.eliza] has no 'hooks' list")
    hooks_yaml = root / "hooks.yaml"
    if hooks_yaml.is_file():
        try:
            data = load_yaml(hooks_yaml.read_text(encoding="utf-8"), f"{label}/hooks.yaml")
        except (YamlError, UnicodeDecodeError, OSError) as exc:
            problems.append(f"{label}/hooks.yaml: {exc}")
        else:
            if isinstance(data, dict) and "hooks" in data:
                found["hooks.yaml"] = data["hooks"]
            else:
                problems.append(f"{label}/hooks.yaml: expected a mapping with a 'hooks' list")
    for name, value in found.items():
        if not isinstance(value, list):
            key = "[tool.eliza] hooks" if name == "pyproject.toml" else "hooks"
            problems.append(f"{label}/{name}: {key} must be a list of hook directories")
    if problems:
        return None, None, problems
    if len(found) == 2 and found["pyproject.toml"] != found["hooks.yaml"]:
        return (
            None,
            None,
            [
                f"{label}: pyproject.toml [tool.eliza] hooks and hooks.yaml list different hooks; "
                "keep one manifest"
            ],
        )
    if not found:
        return None, None, []
    name, entries = next(iter(found.items()))
    return list(entries), name, []


def _top_level(root: Path) -> list[str]:
    return [n for n in os.listdir(root) if not n.startswith(".") and n not in SKIPPED_DIRS]


def _wrapped(root: Path, label: str) -> bool:
    """True when an unpacked archive is one directory holding the hook or pack."""
    entries = _top_level(root)
    return (
        not (root / "HOOK.md").is_file()
        and read_pack_manifest(root, label)[0] is None
        and len(entries) == 1
        and (root / entries[0]).is_dir()
    )


@dataclass(slots=True)
class SourceHooks:
    """What a source holds: its hooks, checked, and whether it is a pack."""

    source: Path
    pack: bool
    manifest: str | None
    hooks: list[CheckedHook]
    archive: bool


def read_source(source: Path, work: Path) -> SourceHooks:
    """Find and validate every hook in ``source``; archives are unpacked into ``work`` (an
    empty private directory). Raises :class:`InstallError` listing every problem."""
    label = str(source)
    archive = is_archive(source) and source.is_file()
    if archive:
        try:
            extract(source, work)
        except ArchiveError as exc:
            raise InstallError(exc.problems) from None
        root, prefix = work, f"{source.name}:"
        if _wrapped(root, prefix):
            root = root / _top_level(root)[0]  # the usual tarball layout: pack-1.0/...
    elif source.is_dir():
        root, prefix = source, ""
    elif source.exists():
        raise InstallError(
            [f"{source}: not a hook directory and not a .tar.gz, .tgz or .zip archive"]
        )
    else:
        raise InstallError([f"{source}: no such file or directory"])

    def name_of(path: Path) -> str:
        """The path inside the source (``.`` for the source itself)."""
        return path.relative_to(work if archive else root).as_posix()

    def label_of(path: Path) -> str:
        """How messages name ``path``: ``pack.tgz:dir/hook``, or the path on disk."""
        if archive:
            return f"{prefix}{name_of(path)}" if path != work else source.name
        return str(path) if path != root else label

    if (root / "HOOK.md").is_file():
        hook, problems = check_hook(root, label_of(root), name_of(root) if archive else ".")
        if hook is None:
            raise InstallError(problems)
        return SourceHooks(source, False, None, [hook], archive)

    entries_list, manifest, problems = read_pack_manifest(root, label_of(root))
    if problems:
        raise InstallError(problems)
    if entries_list is None:
        raise InstallError(
            [
                f"{label_of(root)}: neither a hook (no HOOK.md) nor a hook pack (no pyproject.toml "
                "with [tool.eliza] hooks = [...], no hooks.yaml with hooks: [...])"
            ]
        )
    where = f"{label_of(root)}/{manifest}"
    if not entries_list:
        raise InstallError([f"{where}: lists no hooks"])
    hooks: list[CheckedHook] = []
    for entry in entries_list:
        path, problem = _relative_entry(root, entry, where)
        if path is None:
            problems.append(problem or f"{where}: bad entry {entry!r}")
            continue
        hook, hook_problems = check_hook(path, label_of(path), name_of(path))
        problems += hook_problems
        if hook is not None:
            hooks.append(hook)
    seen: dict[str, CheckedHook] = {}
    for hook in hooks:
        if hook.name in seen:
            problems.append(
                f"{hook.label}: hook name {hook.name!r} is also used by {seen[hook.name].label}"
            )
        seen[hook.name] = hook
    if problems:
        raise InstallError(problems)
    return SourceHooks(source, True, manifest, hooks, archive)
