"""What a reload changed: files, and hooks added, changed, removed and failed, by name.

The daemon keeps a :func:`fingerprints` of the hooks of each load (size and mtime of the files in
each ready hook's directory, or of a single-file hook's file) and, after a reload,
:func:`load_changes` compares the two loads:

``added``    ready now, and was not before (new, or it recovered from another status);
``changed``  ready before and now, and its record (events, path, ...) or its files changed;
``removed``  ready before, and now gone or not ready for another reason than a failure;
``failed``   failed now (``name: reason``), whatever it was before.

``files`` are the paths the watcher reported (empty for ``SIGHUP`` and the ``reload`` op).
The result goes on the one ``reload.done`` line, into the ``reload`` reply and into
``status.last_reload``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the loader fingerprints a stuck import's hook with this module's function
    from gatewayd.hooks.records import HookRecord

Fingerprint = tuple[tuple[str, int, int], ...]

DEEP_FILES = 1000
"""Files a deep :func:`fingerprint` looks at, at most."""

MAX_FILES = 50
"""Changed paths listed on the reload line (the count is always given)."""


def fingerprint(path: str, *, deep: bool = False) -> Fingerprint:
    """``(name, mtime_ns, size)`` of the entries at a hook directory's top level, or of a
    single-file hook's one file, sorted; hidden names and ``__pycache__`` left out. ``deep``:
    of every file under the directory instead (names relative to it, at most
    :data:`DEEP_FILES`): whether a stuck import's hook changed (``hooks/loader.py``)."""
    if os.path.isfile(path):
        try:
            st = os.stat(path)
        except OSError:
            return ()
        return ((os.path.basename(path), st.st_mtime_ns, st.st_size),)
    if deep:
        return _deep(path)
    found = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                found.append((entry.name, st.st_mtime_ns, st.st_size))
    except OSError:
        return ()
    return tuple(sorted(found))


def _deep(directory: str) -> Fingerprint:
    found = []
    for top, dirs, files in os.walk(directory):  # an unreadable directory is left out
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for name in files:
            full = os.path.join(top, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            found.append((os.path.relpath(full, directory), st.st_mtime_ns, st.st_size))
            if len(found) >= DEEP_FILES:
                return tuple(sorted(found))
    return tuple(sorted(found))


def fingerprints(records: Iterable[HookRecord]) -> dict[str, Fingerprint]:
    """The fingerprint of each ready hook's directory (runs file I/O: call off the loop)."""
    return {r.name: fingerprint(r.path) for r in records if r.status == "ready"}


def load_changes(
    old: Iterable[HookRecord],
    new: Iterable[HookRecord],
    old_prints: dict[str, Fingerprint],
    new_prints: dict[str, Fingerprint],
    files: Iterable[str] = (),
) -> dict[str, Any]:
    """``{files, filesChanged, added, changed, removed, failed}``; see the module docstring."""
    before = {r.name: r for r in old if r.status != "shadowed"}
    after = {r.name: r for r in new if r.status != "shadowed"}
    ready_before = {n for n, r in before.items() if r.status == "ready"}
    ready_after = {n for n, r in after.items() if r.status == "ready"}
    failed = sorted(
        f"{name}: {'; '.join(r.reasons) or 'failed'}"
        for name, r in after.items()
        if r.status == "failed"
    )
    failed_names = {n for n, r in after.items() if r.status == "failed"}
    changed = sorted(
        name
        for name in ready_before & ready_after
        if before[name].to_json() != after[name].to_json()
        or old_prints.get(name) != new_prints.get(name)
    )
    paths = sorted(set(files))
    return {
        "files": paths[:MAX_FILES],
        "filesChanged": len(paths),
        "added": sorted(ready_after - ready_before),
        "changed": changed,
        "removed": sorted(ready_before - ready_after - failed_names),
        "failed": failed,
    }
