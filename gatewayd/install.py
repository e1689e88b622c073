"""Installing hooks and hook packs into the managed root, and removing exactly what was installed.

``gatewayd hooks install SOURCE [--link] [--force]`` and ``gatewayd hooks uninstall NAME...``.
What a source may be, and how it is validated, is :mod:`gatewayd.hookpack`; everything there is
checked before this module writes anything.

:func:`plan_install` then checks the hooks against what is installed (a name already taken is
refused unless ``force``), and :func:`apply_install` writes, under a lock:

* a copy is staged in ``<state>/hooks/.install-XXXX.tmp/`` (a dot-directory, which discovery
  ignores) and each hook is renamed into ``<state>/hooks/<name>``; with ``force`` the old
  directory is first renamed aside into the staging directory, the new one renamed in, and the
  staging directory (with the old one) deleted. A failure part-way puts everything back.
* a link (``--link``) copies nothing: the hook's parent directory is added to
  ``hooks.load.extraDirs`` in the config file. Only directories under the state dir can be
  linked (discovery refuses extraDirs outside it), and only when that parent holds no other
  hooks (they would be loaded too).

Every install is recorded in ``<state>/hooks/.installs.json`` (replaced atomically; writers are
serialized by ``flock`` on ``.installs.lock``): per hook its ``kind`` (``copy`` or ``link``),
``source``, ``member`` (its path inside the source), ``path``, ``installedAt``, ``sha256`` (see
:func:`gatewayd.hookpack.content_hash`) and, for a link, the ``extraDir`` entry it added (null
when the entry was already there). :func:`uninstall` removes the copied directory, or the
extraDirs entry it added, and the record; it refuses a hook install did not create.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gatewayd.atomic import atomic_write, read_regular
from gatewayd.config import Config
from gatewayd.config_edit import add_extra_dir, remove_extra_dir
from gatewayd.exits import did_you_mean
from gatewayd.hookpack import (
    CheckedHook,
    InstallError,
    SourceHooks,
    content_hash,
    read_source,
    tree_hash,
)
from gatewayd.hooks.discovery import SOURCES, discover
from gatewayd.paths import is_inside
from gatewayd.timestamps import iso_now

RECORDS_NAME: Final = ".installs.json"
RECORDS_LIMIT: Final = 16 << 20
"""The largest install-record file read (a record is a few hundred bytes a hook)."""
LOCK_NAME: Final = ".installs.lock"
RECORDS_VERSION: Final = 1


# -- the record of installs --------------------------------------------------------------------


class InstallRecords:
    """``<state>/hooks/.installs.json``: name -> record; see the module docstring."""

    def __init__(self, managed: Path) -> None:
        self.path = managed / RECORDS_NAME
        self.hooks: dict[str, dict[str, Any]] = {}

    @classmethod
    def load(cls, managed: Path) -> InstallRecords:
        """Read the records; a missing file is none. Raises :class:`InstallError` when damaged
        (it is never overwritten blindly: it is what uninstall relies on)."""
        records = cls(managed)
        try:
            # read_regular: a FIFO or device put there would otherwise block this read for ever
            raw = json.loads(read_regular(records.path, RECORDS_LIMIT).decode("utf-8"))
        except FileNotFoundError:
            return records
        except (OSError, ValueError) as exc:
            raise InstallError(
                [
                    f"{records.path}: cannot read the install records: {exc}; fix the file or "
                    "move it aside (installed hooks stay, but uninstall will not know them)"
                ]
            ) from None
        hooks = raw.get("hooks") if isinstance(raw, dict) else None
        if not isinstance(hooks, dict) or not all(isinstance(v, dict) for v in hooks.values()):
            raise InstallError(
                [
                    f'{records.path}: not an install record (expected {{"version": 1, "hooks": '
                    "{...}}); fix the file or move it aside"
                ]
            )
        records.hooks = hooks
        return records

    def save(self) -> None:
        """Replace the file atomically (:func:`gatewayd.atomic.atomic_write`)."""
        data = {"version": RECORDS_VERSION, "hooks": dict(sorted(self.hooks.items()))}
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, text, mode=0o644, keep_mode=False)


@contextlib.contextmanager
def _locked(managed: Path) -> Iterator[None]:
    """Serialize installers and uninstallers of one managed root (``flock``)."""
    managed.mkdir(parents=True, exist_ok=True)
    fd = os.open(managed / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- planning ------------------------------------------------------------------------------------


@dataclass(slots=True)
class InstallPlan:
    """Everything checked; what :func:`apply_install` will do."""

    source: SourceHooks
    link: bool
    force: bool
    extra_dirs: list[str] = field(default_factory=list)
    """For a link: the extraDirs entries to add (absolute paths)."""
    replacing: dict[str, str] = field(default_factory=dict)
    """Hook name -> what ``force`` replaces (a description)."""
    notes: list[str] = field(default_factory=list)
    """Warnings that do not stop the install (shadowing, HOOK.md warnings, no events)."""


def _describe(record: Mapping[str, Any]) -> str:
    return f"installed {record.get('installedAt', '?')} from {record.get('source', '?')}"


def _shadow_notes(config: Config, plan: InstallPlan) -> list[str]:
    """How the new hooks relate to same-name hooks in other roots."""
    mine = "extra" if plan.link else "managed"
    names = {h.name for h in plan.source.hooks}
    # Not a conflict: the linked directories themselves, and what --force replaces.
    own = {os.path.realpath(h.directory) for h in plan.source.hooks}
    if not plan.link:
        own |= {os.path.realpath(config.paths.managed_hooks / n) for n in names}
    notes = []
    for found in discover(config.load_spec()).hooks:
        if found.name not in names or os.path.realpath(found.path) in own:
            continue
        if SOURCES.index(found.root.source) > SOURCES.index(mine):
            notes.append(
                f"{found.name}: the {found.root.source} hook at {found.path} has the same name "
                "and wins; the installed one will be listed as shadowed"
            )
        else:
            notes.append(
                f"{found.name}: replaces the {found.root.source} hook at {found.path} "
                "(a later hook root wins a name conflict)"
            )
    return notes


def _plan_copy(config: Config, plan: InstallPlan, records: InstallRecords) -> list[str]:
    problems = []
    managed = config.paths.managed_hooks
    for hook in plan.source.hooks:
        target = managed / hook.name
        record = records.hooks.get(hook.name)
        if record is not None and record.get("kind") == "link":
            problems.append(
                f"{hook.name}: already installed as a link ({_describe(record)}); run "
                f"gatewayd hooks uninstall {hook.name} first"
            )
        elif os.path.lexists(target):
            what = _describe(record) if record else "not installed by gatewayd hooks install"
            if plan.force:
                plan.replacing[hook.name] = f"{target} ({what})"
            else:
                problems.append(
                    f"{hook.name}: {target} already exists ({what}); --force replaces it"
                )
    return problems


def _plan_link(config: Config, plan: InstallPlan, records: InstallRecords) -> list[str]:
    problems: list[str] = []
    paths = config.paths
    state_real = os.path.realpath(paths.state)
    if plan.source.archive:
        return [f"{plan.source.source}: --link needs a directory; an archive can only be copied"]
    listed = {
        os.path.realpath(d if d.is_absolute() else paths.state / d)
        for d in (Path(os.path.expanduser(p)) for p in config.settings.hooks.load.extra_dirs)
    }
    fixed_roots = {
        os.path.realpath(p)
        for p in (paths.managed_hooks, paths.workspace_hooks, paths.bundled_hooks)
    }
    names = {h.name for h in plan.source.hooks}
    own = {os.path.realpath(h.directory) for h in plan.source.hooks}
    for hook in plan.source.hooks:
        real = os.path.realpath(hook.directory)
        if not is_inside(real, state_real):
            problems.append(
                f"{hook.label}: resolves to {real}, outside the state dir {state_real}; --link "
                "only works under the state dir (move it there, or install without --link to "
                "copy it)"
            )
            continue
        root = str(Path(os.path.abspath(hook.directory)).parent)
        root_real = os.path.realpath(root)
        if root_real == state_real or not is_inside(root_real, state_real):
            problems.append(
                f"{hook.label}: its parent {root} would be the hooks.load.extraDirs entry, and "
                f"that must be a directory inside the state dir {state_real}; move the hook "
                "into a directory of its own under the state dir"
            )
            continue
        if root_real in fixed_roots:
            problems.append(
                f"{hook.label}: is already in the hook root {root}; it is loaded without --link"
            )
            continue
        if root_real not in listed and root not in plan.extra_dirs:
            others = sorted(
                entry.name
                for entry in Path(root).iterdir()
                if not entry.name.startswith(".")
                and (entry / "HOOK.md").is_file()
                and os.path.realpath(entry) not in own
            )
            if others:
                problems.append(
                    f"{hook.label}: linking adds its parent {root} to hooks.load.extraDirs, "
                    f"which would also load {', '.join(others)}; give the hook a directory of "
                    "its own or install those too"
                )
                continue
            plan.extra_dirs.append(root)
        record = records.hooks.get(hook.name)
        managed_copy = paths.managed_hooks / hook.name
        if record is not None and record.get("kind") == "copy":
            problems.append(
                f"{hook.name}: already installed as a copy ({_describe(record)}); run "
                f"gatewayd hooks uninstall {hook.name} first"
            )
        elif record is None and os.path.lexists(managed_copy):
            problems.append(
                f"{hook.name}: {managed_copy} exists and would shadow the linked hook; remove "
                "it or give the hook another name"
            )
        elif record is not None:
            if not plan.force:
                problems.append(
                    f"{hook.name}: already linked ({_describe(record)}); --force re-links it"
                )
                continue
            plan.replacing[hook.name] = f"the link {_describe(record)}"
            old_dir = record.get("extraDir")
            sharing = sorted(
                n
                for n, r in records.hooks.items()
                if old_dir and old_dir != root and r.get("extraDir") == old_dir and n not in names
            )
            if sharing:
                problems.append(
                    f"{hook.name}: its current link through {old_dir} is shared with "
                    f"{', '.join(sharing)}; uninstall those together first"
                )
    return problems


def plan_install(
    config: Config, source: SourceHooks, *, link: bool = False, force: bool = False
) -> InstallPlan:
    """Check ``source`` against what is installed; raise :class:`InstallError` with every
    conflict. Writes nothing."""
    plan = InstallPlan(source, link, force)
    records = InstallRecords.load(config.paths.managed_hooks)
    problems = (_plan_link if link else _plan_copy)(config, plan, records)
    if problems:
        raise InstallError(problems)
    for hook in source.hooks:
        plan.notes += hook.warnings
    plan.notes += _shadow_notes(config, plan)
    return plan


# -- writing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Installed:
    """One hook installed: where, how, and its content hash."""

    name: str
    path: Path
    kind: str
    sha256: str
    replaced: str | None


def _copy_hook(hook: CheckedHook, dest: Path) -> str:
    """Copy ``hook``'s files into the new directory ``dest`` (fsynced; executables 0755, the
    rest 0644); returns the :func:`content_hash` of what was written."""
    dest.mkdir(mode=0o755)
    for rel in hook.files:
        src = hook.directory / rel
        target = dest / rel
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        data = src.read_bytes()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(target, 0o755 if src.stat().st_mode & 0o111 else 0o644)
    return content_hash(dest, list(hook.files))


def _record(plan: InstallPlan, hook: CheckedHook, path: Path, digest: str) -> dict[str, Any]:
    return {
        "kind": "link" if plan.link else "copy",
        "source": str(plan.source.source),
        "member": hook.member,
        "path": str(path),
        "installedAt": iso_now(),
        "sha256": digest,
    }


def _apply_copy(config: Config, plan: InstallPlan, records: InstallRecords) -> list[Installed]:
    managed = config.paths.managed_hooks
    staging = Path(tempfile.mkdtemp(prefix=".install-", suffix=".tmp", dir=managed))
    moved: list[tuple[str, Path | None]] = []  # (name, where the replaced one was put aside)
    try:
        (staging / "new").mkdir()
        (staging / "old").mkdir()
        digests = {h.name: _copy_hook(h, staging / "new" / h.name) for h in plan.source.hooks}
        try:
            for hook in plan.source.hooks:
                target = managed / hook.name
                aside: Path | None = None
                if os.path.lexists(target):
                    if not plan.force:  # appeared since planning
                        raise InstallError([f"{hook.name}: {target} already exists"])
                    aside = staging / "old" / hook.name
                    os.rename(target, aside)
                try:
                    os.rename(staging / "new" / hook.name, target)
                except BaseException:
                    if aside is not None:
                        os.rename(aside, target)
                    raise
                moved.append((hook.name, aside))
            for hook in plan.source.hooks:
                path = managed / hook.name
                records.hooks[hook.name] = _record(plan, hook, path, digests[hook.name])
            records.save()
        except BaseException:
            (staging / "undo").mkdir(exist_ok=True)
            for name, aside in reversed(moved):
                os.rename(managed / name, staging / "undo" / name)
                if aside is not None:
                    os.rename(aside, managed / name)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [
        Installed(h.name, managed / h.name, "copy", digests[h.name], plan.replacing.get(h.name))
        for h in plan.source.hooks
    ]


def _apply_link(config: Config, plan: InstallPlan, records: InstallRecords) -> list[Installed]:
    path = config.paths.config_file
    names = {h.name for h in plan.source.hooks}
    added = [d for d in plan.extra_dirs if add_extra_dir(path, d)]
    unlisted: list[str] = []
    try:
        old_dirs = {
            r["extraDir"] for n, r in records.hooks.items() if n in names and r.get("extraDir")
        }
        installed = []
        for hook in plan.source.hooks:
            directory = Path(os.path.abspath(hook.directory))
            digest = content_hash(hook.directory, list(hook.files))
            record = _record(plan, hook, directory, digest)
            root = str(directory.parent)
            previous = records.hooks.get(hook.name, {}).get("extraDir")
            record["extraDir"] = root if root in added or previous == root else None
            records.hooks[hook.name] = record
            installed.append(
                Installed(hook.name, directory, "link", digest, plan.replacing.get(hook.name))
            )
        still_used = {r.get("extraDir") for r in records.hooks.values()}
        unlisted += [old for old in old_dirs - still_used if remove_extra_dir(path, old)]
        records.save()
    except BaseException:  # put the config file back as it was
        for d in added:
            remove_extra_dir(path, d)
        for d in unlisted:
            add_extra_dir(path, d)
        raise
    return installed


def apply_install(config: Config, plan: InstallPlan) -> list[Installed]:
    """Write what ``plan`` says (see the module docstring); re-checks conflicts under the lock.
    Raises :class:`InstallError` when something changed since planning, ``ConfigError`` when
    the config file cannot be edited, ``OSError`` on a write failure (rolled back)."""
    managed = config.paths.managed_hooks
    with _locked(managed):
        records = InstallRecords.load(managed)
        fresh = InstallPlan(plan.source, plan.link, plan.force)
        problems = (_plan_link if plan.link else _plan_copy)(config, fresh, records)
        if problems:
            raise InstallError(problems)
        fresh.notes = plan.notes
        if plan.link:
            return _apply_link(config, fresh, records)
        return _apply_copy(config, fresh, records)


def install(
    config: Config, source: Path, *, link: bool = False, force: bool = False
) -> tuple[InstallPlan, list[Installed]]:
    """Read, check and install ``source``; see the module docstring. Raises
    :class:`InstallError` (nothing written) or ``ConfigError``/``OSError`` (rolled back)."""
    source = Path(os.path.abspath(os.path.expanduser(source)))
    with tempfile.TemporaryDirectory(prefix="gatewayd-install-") as work:
        hooks = read_source(source, Path(work))
        plan = plan_install(config, hooks, link=link, force=force)
        return plan, apply_install(config, plan)


# -- uninstall -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Uninstalled:
    """One hook removed: what was removed."""

    name: str
    kind: str
    removed: str
    """The directory deleted or the extraDirs entry removed (or why nothing was left to)."""


def _not_installed(config: Config, name: str, installed: Sequence[str] = ()) -> str:
    target = config.paths.managed_hooks / name
    if os.path.lexists(target):
        return (
            f"{name}: {target} was not installed by gatewayd hooks install (no record in "
            f"{RECORDS_NAME}); delete the directory yourself if you mean to"
        )
    for found in discover(config.load_spec()).hooks:
        if found.name == name:
            return (
                f"{name}: is the {found.root.source} hook at {found.path}, not installed by "
                f"gatewayd hooks install; turn it off with gatewayd hooks disable {name}"
            )
    records = config.paths.managed_hooks / RECORDS_NAME
    return f"{name}: no installed hook of that name{did_you_mean(name, installed)} (see {records})"


def uninstall(config: Config, names: list[str], *, force: bool = False) -> list[Uninstalled]:
    """Remove what install created for each of ``names`` and their records.

    Refuses (:class:`InstallError`, nothing removed) a name install did not create, a copied
    hook whose files changed since (unless ``force``), and one hook of several linked through
    the same extraDirs entry unless all of them are named.
    """
    managed = config.paths.managed_hooks
    if not (managed / RECORDS_NAME).exists():
        raise InstallError([_not_installed(config, n) for n in names])
    with _locked(managed):
        records = InstallRecords.load(managed)
        installed = sorted(records.hooks)
        problems = [_not_installed(config, n, installed) for n in names if n not in records.hooks]
        wanted = set(names)
        for name in names:
            record = records.hooks.get(name)
            if record is None:
                continue
            if record.get("kind") == "copy":
                path = managed / name
                if path.is_dir() and not force and tree_hash(path) != record.get("sha256"):
                    problems.append(
                        f"{name}: {path} changed since it was installed ({_describe(record)}); "
                        "--force removes it anyway"
                    )
            elif extra := record.get("extraDir"):
                sharing = sorted(
                    n
                    for n, r in records.hooks.items()
                    if r.get("extraDir") == extra and n not in wanted
                )
                if sharing:
                    problems.append(
                        f"{name}: is linked through the hooks.load.extraDirs entry {extra} "
                        f"together with {', '.join(sharing)}; uninstall them together: "
                        f"gatewayd hooks uninstall {' '.join(sorted(wanted | set(sharing)))}"
                    )
        if problems:
            raise InstallError(problems)
        removed: list[Uninstalled] = []
        cfg_path = config.paths.config_file
        unlisted: set[str] = set()
        for name in dict.fromkeys(names):
            record = records.hooks[name]
            if record.get("kind") == "copy":
                path = managed / name
                if os.path.lexists(path):
                    trash = Path(tempfile.mkdtemp(prefix=".uninstall-", suffix=".tmp", dir=managed))
                    os.rename(path, trash / name)
                    shutil.rmtree(trash, ignore_errors=True)
                    removed.append(Uninstalled(name, "copy", f"deleted {path}"))
                else:
                    removed.append(Uninstalled(name, "copy", f"{path} was already gone"))
            else:
                extra = record.get("extraDir")
                if extra in unlisted:
                    what = f"{extra} was removed from hooks.load.extraDirs with it"
                elif extra and remove_extra_dir(cfg_path, extra):
                    unlisted.add(extra)
                    what = f"removed {extra} from hooks.load.extraDirs in {cfg_path}"
                elif extra:
                    what = f"{extra} was no longer in hooks.load.extraDirs"
                else:
                    what = "its directory was listed in hooks.load.extraDirs before; left there"
                removed.append(Uninstalled(name, "link", what))
            del records.hooks[name]
            records.save()
        return removed
