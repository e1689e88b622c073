"""Changing the user's config file on their behalf, keeping their keys, order and comments.

``gatewayd hooks enable|disable`` write ``hooks.entries.<hookKey>.enabled`` and ``gatewayd hooks
install --link`` / ``uninstall`` add and remove ``hooks.load.extraDirs`` entries, all through a
round-trip YAML editor (ruamel.yaml): each checks that the result is still a valid config and
replaces the file atomically (:func:`gatewayd.atomic.atomic_write`: the old file's mode and owner
kept), so a running daemon's watcher sees one complete new version and reloads it.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gatewayd.atomic import atomic_write, read_regular
from gatewayd.config import (
    MAX_CONFIG_BYTES,
    ConfigError,
    Settings,
    fold_internal,
    format_errors,
    read_config_file,
)
from gatewayd.yamlio import load_yaml


def _yaml() -> YAML:
    yaml = YAML()  # round-trip, YAML 1.2
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.representer.add_representer(  # keep `key: null` as written, not `key:`
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    return yaml


def _child(parent: CommentedMap, key: str) -> CommentedMap:
    node = parent.get(key)
    if node is None:
        node = CommentedMap()
        parent[key] = node
    elif not isinstance(node, CommentedMap):
        raise ConfigError(str(key), [f"{key}: expected a mapping, got {type(node).__name__}"])
    if not node and node.fa.flow_style():
        node.fa.set_block_style()  # `entries: {}` grows into a readable block
    return node


def set_hook_enabled(path: Path, hook_key: str, enabled: bool, *, explicit: bool = False) -> bool:
    """Set ``hooks.entries.<hook_key>.enabled`` in the YAML file at ``path`` (created if absent).
    ``explicit``: write ``enabled: true`` even where no entry means enabled (an opt-in hook,
    ``enabled: false`` in its HOOK.md, runs only when the config says ``true``).

    Entries kept under ``hooks.internal.entries`` (OpenClaw/Milady layout) are edited there.
    Returns False when the file already said so. Raises :class:`ConfigError` if the file is not
    valid YAML, or if the edited config would not validate (the file is then left untouched).
    """
    yaml = _yaml()
    text = _read_text(path)
    if text.strip():
        read_config_file(path)  # a clear error for a broken file, before ruamel's own
        doc = yaml.load(text)
    else:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise ConfigError(str(path), [f"{path}: the top level must be a mapping of keys"])
    hooks = _child(doc, "hooks")
    internal = hooks.get("internal")
    section = internal if isinstance(internal, CommentedMap) and "entries" in internal else hooks
    entry = _child(_child(section, "entries"), hook_key)
    if entry.get("enabled", True) is enabled and ("enabled" in entry or (enabled and not explicit)):
        return False  # already so (an entry without `enabled` is enabled)
    entry["enabled"] = enabled
    out = io.StringIO()
    yaml.dump(doc, out)
    new_text = out.getvalue()
    _validate(path, new_text)
    _atomic_write(path, new_text)
    return True


def _load_document(path: Path) -> tuple[YAML, CommentedMap]:
    """The round-trip editor and the file's document (an empty map when absent or empty)."""
    yaml = _yaml()
    text = _read_text(path)
    if not text.strip():
        return yaml, CommentedMap()
    read_config_file(path)  # a clear error for a broken file, before ruamel's own
    doc = yaml.load(text)
    if not isinstance(doc, CommentedMap):
        raise ConfigError(str(path), [f"{path}: the top level must be a mapping of keys"])
    return yaml, doc


def _save_document(path: Path, yaml: YAML, doc: CommentedMap) -> None:
    out = io.StringIO()
    yaml.dump(doc, out)
    text = out.getvalue()
    _validate(path, text)
    _atomic_write(path, text)


def _extra_dirs(doc: CommentedMap, create: bool) -> CommentedSeq | None:
    """``hooks.load.extraDirs`` (under ``hooks.internal`` when the file keeps ``load`` there)."""
    hooks = _child(doc, "hooks") if create else doc.get("hooks")
    if not isinstance(hooks, CommentedMap):
        return None
    internal = hooks.get("internal")
    section = internal if isinstance(internal, CommentedMap) and "load" in internal else hooks
    load = _child(section, "load") if create else section.get("load")
    if not isinstance(load, CommentedMap):
        return None
    found = load.get("extraDirs")
    if found is None:
        if not create:
            return None
        found = load["extraDirs"] = CommentedSeq()
    if not isinstance(found, CommentedSeq):
        raise ConfigError("hooks.load.extraDirs", [f"expected a list, got {type(found).__name__}"])
    dirs: CommentedSeq = found
    if not dirs and dirs.fa.flow_style():
        dirs.fa.set_block_style()  # `extraDirs: []` grows into a readable block
    return dirs


def add_extra_dir(path: Path, directory: str) -> bool:
    """Append ``directory`` to ``hooks.load.extraDirs`` in the YAML file at ``path`` (created
    if absent). Returns False, changing nothing, when the list already holds that exact string.
    Raises :class:`ConfigError` if the file is not valid YAML or the result would not validate.
    """
    yaml, doc = _load_document(path)
    dirs = _extra_dirs(doc, create=True)
    assert dirs is not None
    if directory in [str(d) for d in dirs]:
        return False
    dirs.append(directory)
    _save_document(path, yaml, doc)
    return True


def remove_extra_dir(path: Path, directory: str) -> bool:
    """Remove every ``hooks.load.extraDirs`` entry that is exactly ``directory`` from the file at
    ``path``. Returns False when there was none (the file is then left as it is)."""
    if not path.exists():
        return False
    yaml, doc = _load_document(path)
    dirs = _extra_dirs(doc, create=False)
    if dirs is None or directory not in [str(d) for d in dirs]:
        return False
    for i in reversed(range(len(dirs))):
        if str(dirs[i]) == directory:
            del dirs[i]
    _save_document(path, yaml, doc)
    return True


def _validate(path: Path, text: str) -> None:
    raw: Any = load_yaml(text, str(path)) or {}
    folded = fold_internal(raw)
    try:
        Settings.model_validate(folded.raw)
    except ValidationError as exc:
        raise ConfigError(str(path), format_errors(exc, folded.from_internal)) from None


def _read_text(path: Path) -> str:
    """The file's text, "" when absent; a FIFO, device or oversized file is a ConfigError."""
    if not path.exists():
        return ""
    try:
        return read_regular(path, MAX_CONFIG_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read {path}: {exc}"]) from None


def _atomic_write(path: Path, text: str) -> None:
    """Replace the config file whole; a symlinked config is written where the link points, and
    the file keeps its mode and (when run as root) its owner, so ``sudo gatewayd hooks
    disable`` leaves a file the daemon's user can still read."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o600)
