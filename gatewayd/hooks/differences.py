"""Where OpenClaw 2026.9.6 would treat a hook otherwise, on purpose: said on the hook.

docs/design.md lists gatewayd's deliberate differences from OpenClaw ("Deliberate differences
from OpenClaw", each with an id; ``tests/openclaw`` fails on any other). A hook moving over from
OpenClaw that meets one of them gets a line saying what OpenClaw would do and naming the
difference, which ``gatewayd hooks check`` and ``hooks info`` show beside its warnings. Those
lines are facts, not problems: they are not warnings (``--strict`` does not fail on them).

Said on the hook: ``eliza-metadata`` (gatewayd reads its Eliza or Milady block, OpenClaw its
OpenClaw block), ``gatewayd-fields-checked`` (a field OpenClaw ignores made it ``invalid``),
``workspace-hooks-run`` (a workspace hook runs without an entry enabling it),
``workspace-wins-names`` (a workspace hook replaces a shared one) and
``broken-override-claims-name`` (a hook without a handler keeps a lower root's hook of its name
from running). ``hooks-on-by-default`` and ``message-direction`` hold for every hook and event
alike and are said in the docs only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from gatewayd.hooks.frontmatter import (
    NoFrontmatter,
    manifest_block,
    parse_metadata_text,
    read_frontmatter,
)
from gatewayd.hooks.metadata import OPENCLAW_NAMESPACES, ManifestError, read_manifest
from gatewayd.hooks.records import HookRecord

REFERENCE: Final = "OpenClaw 2026.9.6"
SHARED_SOURCES: Final = frozenset({"bundled", "extra", "managed"})
_CHECKED_FIELD = re.compile(r"\.(timeoutMs|priority|background|agents) must be ")


def said(difference: str, text: str) -> str:
    """One line: what OpenClaw would do, and the id of the difference in docs/design.md."""
    return f"{REFERENCE} {text} (deliberate difference '{difference}', docs/design.md)"


def openclaw_differences(
    records: list[HookRecord], explicitly_enabled: Callable[[str], bool]
) -> Mapping[int, list[str]]:
    """``id(record) -> lines`` for the records of one load that meet a deliberate difference.

    ``explicitly_enabled(hook_key)``: whether the config sets ``hooks.entries.<hookKey>.enabled:
    true`` itself (OpenClaw's condition for running a workspace hook)."""
    shadowed: dict[str, list[HookRecord]] = {}
    for record in records:
        if record.status == "shadowed":
            shadowed.setdefault(record.name, []).append(record)
    found: dict[int, list[str]] = {}
    for record in records:
        lines = _for_record(record, shadowed.get(record.name, []), explicitly_enabled)
        if lines:
            found[id(record)] = lines
    return found


def _for_record(
    record: HookRecord, shadowed: list[HookRecord], explicitly_enabled: Callable[[str], bool]
) -> list[str]:
    lines: list[str] = []
    if record.status == "shadowed":
        return lines
    if record.source != "bundled" and (found := _blocks(record)) is not None:
        lines.append(
            said(
                "eliza-metadata",
                f"reads this hook's metadata.{found[1]} block, not its metadata.{found[0]} "
                "block that gatewayd reads first",
            )
        )
    for reason in record.reasons if record.status == "invalid" else ():
        if match := _CHECKED_FIELD.search(reason):
            lines.append(
                said(
                    "gatewayd-fields-checked",
                    f"ignores {match.group(1)}, so it would load this hook with it ignored",
                )
            )
    workspace = record.source == "workspace"
    if workspace and record.status == "ready" and not explicitly_enabled(record.hook_key):
        lines.append(
            said(
                "workspace-hooks-run",
                "runs a workspace hook only with hooks.internal.entries."
                f"{record.hook_key}.enabled: true",
            )
        )
    if workspace:
        for other in shadowed:
            if other.source in SHARED_SOURCES:
                lines.append(
                    said(
                        "workspace-wins-names",
                        f"keeps the {other.source} hook of this name ({other.path}) and "
                        "ignores this one",
                    )
                )
    if record.status == "failed" and any(r.startswith("no handler in ") for r in record.reasons):
        for other in shadowed:
            lines.append(
                said(
                    "broken-override-claims-name",
                    "leaves a hook directory without a handler out, so it would run the "
                    f"{other.source} hook of this name ({other.path}) instead",
                )
            )
    return lines


def _blocks(record: HookRecord) -> tuple[str, str] | None:
    """``(gatewayd's namespace, OpenClaw's)`` when the hook's HOOK.md has both an Eliza or
    Milady block, which gatewayd reads first, and an OpenClaw one, which OpenClaw reads (on the
    ``metadata:`` line, as JSON or JSON5); None otherwise (also for a HOOK.md that cannot be
    read: its own problems are reported elsewhere)."""
    path = Path(record.path) / "HOOK.md"
    try:
        manifest = read_manifest(path)
        front = read_frontmatter(path.read_text(encoding="utf-8"), str(path))
    except (ManifestError, NoFrontmatter, OSError, UnicodeDecodeError):
        return None
    if manifest.namespace is None or manifest.namespace in OPENCLAW_NAMESPACES:
        return None
    text = front.values.get("metadata")
    theirs, _ = manifest_block(parse_metadata_text(text) if text else None, OPENCLAW_NAMESPACES)
    return None if theirs is None else (manifest.namespace, theirs)
