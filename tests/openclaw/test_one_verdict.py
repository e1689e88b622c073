"""One verdict everywhere: ``hooks list`` and ``hooks info`` without a daemon say what ``hooks
check`` (and so the daemon) says, a JS/TS handler that fails to import included."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import RunCli


def test_a_js_hook_that_fails_to_import_is_failed_in_list_info_and_check(
    state_dir: Path, run_cli: RunCli
) -> None:
    hook = state_dir / "hooks" / "broken-js"
    hook.mkdir(parents=True)
    (hook / "HOOK.md").write_text(
        '---\nname: broken-js\nmetadata: {"openclaw": {"events": ["command:new"]}}\n---\n'
    )
    (hook / "handler.ts").write_text('throw new Error("boom at import");\nexport default 1;\n')

    listed = run_cli("hooks", "list", "--json", "--local")
    assert listed.returncode == 0, listed.stderr
    (record,) = [h for h in json.loads(listed.stdout)["hooks"] if h["name"] == "broken-js"]
    assert record["status"] == "failed", record
    assert "boom at import" in " ".join(record["reasons"])

    info = run_cli("hooks", "info", "broken-js", "--json", "--local")
    assert json.loads(info.stdout)["status"] == "failed", info.stdout

    check = run_cli("hooks", "check", "--json")
    assert check.returncode == 1
    assert "boom at import" in check.stdout
