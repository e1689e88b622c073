"""``gatewayd hooks check`` says it on a hook that meets a deliberate difference from OpenClaw.

Each hook here is one an OpenClaw user moving over could have; the check names, on that hook,
what OpenClaw 2026.9.6 would do and the difference's id in docs/design.md (so that the table
and the check cannot drift apart), without counting it as a warning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gatewayd.hooks import differences
from tests.openclaw.test_differential import deliberate_ids
from tests.support.cli import RunCli
from tests.support.hooks import WriteHook


def check(run_cli_inline: RunCli, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_cli_inline("hooks", "check", "--json", *args)
    return done.returncode, json.loads(done.stdout)


def said(report: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """(name, source) -> the ids named in the hook's differences."""
    found: dict[tuple[str, str], list[str]] = {}
    for hook in report["hooks"]:
        ids = [
            line.split("deliberate difference '")[1].split("'")[0] for line in hook["differences"]
        ]
        if ids:
            found[(hook["name"], hook["source"])] = ids
    return found


def test_each_hook_that_meets_a_difference_says_which(
    state_dir: Path, write_hook: WriteHook, run_cli_inline: RunCli
) -> None:
    (state_dir / "gatewayd.yaml").write_text(
        "hooks:\n  entries:\n    opted: {enabled: true}\n", encoding="utf-8"
    )
    managed, workspace = state_dir / "hooks", state_dir / "workspace" / "hooks"
    write_hook(managed, "plain", namespace="openclaw")
    write_hook(managed, "eliza-only")  # not an OpenClaw hook: nothing to say
    write_hook(
        managed,
        "both",
        hook_md='---\nname: both\nmetadata: {"eliza": {"events": ["command:new"]}, '
        '"openclaw": {"events": ["command:reset"]}}\n---\n',
    )
    write_hook(managed, "typo", namespace="openclaw", meta={"priority": "high"})
    write_hook(managed, "session-memory", namespace="openclaw", handler=None)
    write_hook(workspace, "mine", namespace="openclaw")
    write_hook(workspace, "opted", namespace="openclaw")
    write_hook(workspace, "command-logger", namespace="openclaw")

    code, report = check(run_cli_inline)
    assert said(report) == {
        ("both", "managed"): ["eliza-metadata"],
        ("typo", "managed"): ["gatewayd-fields-checked"],
        ("session-memory", "managed"): ["broken-override-claims-name"],
        ("mine", "workspace"): ["workspace-hooks-run"],
        ("command-logger", "workspace"): ["workspace-hooks-run", "workspace-wins-names"],
    }
    hooks = {(h["name"], h["source"]): h for h in report["hooks"]}
    assert "command-logger" in hooks[("command-logger", "workspace")]["differences"][1]
    assert (
        code == 1
    )  # typo is invalid and session-memory failed, as before; the differences add nothing
    assert report["summary"]["warnings"] == 1  # the broken override's shadowing warning


def test_the_ids_said_are_the_ones_design_md_lists() -> None:
    source = Path(differences.__file__).read_text(encoding="utf-8")
    used = {part.split('"')[1] for part in source.split("said(\n")[1:]}
    assert used == {
        "eliza-metadata",
        "gatewayd-fields-checked",
        "workspace-hooks-run",
        "workspace-wins-names",
        "broken-override-claims-name",
    }
    assert used <= deliberate_ids()


def test_a_difference_is_no_warning_for_strict(
    state_dir: Path, write_hook: WriteHook, run_cli_inline: RunCli
) -> None:
    write_hook(state_dir / "workspace" / "hooks", "mine", namespace="openclaw")
    code, report = check(run_cli_inline, "--strict")
    assert said(report) == {("mine", "workspace"): ["workspace-hooks-run"]}
    assert code == 0
    text = run_cli_inline("hooks", "check").stdout
    assert "    ~ OpenClaw 2026.9.6 runs a workspace hook only with" in text
