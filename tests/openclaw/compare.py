"""One case's verdicts, OpenClaw's and gatewayd's, side by side: the disagreements between them.

Both verdicts are keyed by hook directory (its real path). For each hook OpenClaw lists (the
winner of its name, with a handler) and each hook gatewayd lists as not ``shadowed``:

* ``listed``: whether each side has the hook as the one for its name;
* ``runs``: OpenClaw registered its handler (its loader imported it) / gatewayd's status is
  ``ready`` (after the JS/TS imports were tried, as ``hooks check`` does);
* ``name``, and, where gatewayd read the HOOK.md (status not ``invalid``): ``events`` (as
  written, trimmed), ``eligible`` (OpenClaw's loader's own check when its enable policy lets
  the hook in, else its status view's ``requirementsSatisfied``) and ``missing`` by kind.

A gatewayd hook OpenClaw does not list is a disagreement only when gatewayd runs it: a hook
gatewayd lists as ``failed`` (no handler) or ``invalid`` is one OpenClaw leaves out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from gatewayd.hooks.loader import HookRecord

KINDS = ("bins", "anyBins", "env", "config", "os")


@dataclass(frozen=True)
class Verdict:
    """What one side decided for one hook directory."""

    name: str
    runs: bool
    events: tuple[str, ...] | None
    """``None`` where the side did not read the HOOK.md (gatewayd: ``invalid``)."""
    eligible: bool | None
    missing: dict[str, list[str]] | None
    detail: str = ""


def _real(path: str) -> str:
    return os.path.realpath(path)


def openclaw_verdicts(answer: dict[str, Any]) -> dict[str, Verdict]:
    """OpenClaw's verdict per hook directory, from ``oracle.mjs``'s answer for one case."""
    registered: set[str] = set()
    for urls in answer.get("registered", {}).values():
        for url in urls:
            registered.add(_real(os.path.dirname(urlparse(url).path)))
    verdicts = {}
    for hook in answer.get("status") or []:
        directory = _real(os.path.dirname(hook["filePath"]))
        eligible = hook["requirementsSatisfied"]
        if hook["enabledByConfig"] and hook["included"] is not None:
            eligible = hook["included"]
        verdicts[directory] = Verdict(
            name=hook["name"],
            runs=directory in registered,
            events=tuple(hook["events"]),
            eligible=eligible,
            missing={kind: list(hook["missing"].get(kind, [])) for kind in KINDS},
            detail=hook.get("blockedReason") or "",
        )
    return verdicts


def gatewayd_verdicts(records: list[HookRecord]) -> tuple[dict[str, Verdict], set[str]]:
    """gatewayd's verdict per hook directory (those not ``shadowed``), and the directories of
    the hooks it lists as ``shadowed``."""
    verdicts = {}
    shadowed = set()
    for record in records:
        directory = _real(record.path)
        if record.status == "shadowed":
            shadowed.add(directory)
            continue
        read = record.status != "invalid"
        verdicts[directory] = Verdict(
            name=record.name,
            runs=record.status == "ready",
            events=tuple(e.strip() for e in record.events) if read else None,
            eligible=record.eligible if read else None,
            missing={k: list(record.missing.get(k, ())) for k in KINDS} if read else None,
            detail=f"{record.status}: {'; '.join(record.reasons)}",
        )
    return verdicts, shadowed


def disagreements(
    openclaw: dict[str, Verdict], gatewayd: dict[str, Verdict], root: str
) -> list[str]:
    """Every way the two verdicts differ, one line each (paths relative to the case)."""
    lines: list[str] = []

    def rel(path: str) -> str:
        return os.path.relpath(path, root)

    for directory in sorted(set(openclaw) | set(gatewayd)):
        ours, theirs = gatewayd.get(directory), openclaw.get(directory)
        where = rel(directory)
        if theirs is None:
            assert ours is not None
            if ours.runs:
                lines.append(
                    f"{where}: gatewayd runs it ({ours.detail}); OpenClaw does not list it"
                )
            continue
        if ours is None:
            lines.append(
                f"{where}: OpenClaw lists it as {theirs.name!r} (runs={theirs.runs}); gatewayd "
                "lists it shadowed or not at all"
            )
            continue
        if ours.name != theirs.name:
            lines.append(f"{where}: name: OpenClaw {theirs.name!r}, gatewayd {ours.name!r}")
        if ours.runs != theirs.runs:
            lines.append(
                f"{where}: runs: OpenClaw {theirs.runs} ({theirs.detail or 'loadable'}), "
                f"gatewayd {ours.runs} ({ours.detail})"
            )
        if ours.events is None:
            continue
        if ours.events != theirs.events:
            lines.append(f"{where}: events: OpenClaw {theirs.events}, gatewayd {ours.events}")
        if ours.eligible != theirs.eligible:
            lines.append(
                f"{where}: eligible: OpenClaw {theirs.eligible}, gatewayd {ours.eligible} "
                f"({ours.detail})"
            )
        if ours.missing != theirs.missing:
            lines.append(f"{where}: missing: OpenClaw {theirs.missing}, gatewayd {ours.missing}")
    return lines
