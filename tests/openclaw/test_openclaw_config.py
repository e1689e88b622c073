"""An OpenClaw config read as gatewayd's: its ``agents`` section and its hooks switch."""

from __future__ import annotations

import json
from pathlib import Path

from gatewayd.config import load_config
from tests.support.cli import RunCli


def test_openclaw_agents_defaults_is_no_agent_named_defaults(state_dir: Path) -> None:
    config = {
        "agents": {
            "defaults": {"workspace": str(state_dir / "ws"), "skills": ["github"]},
            "entries": {
                "main": {"default": True},
                "docs": {"workspace": str(state_dir / "ws-docs"), "skills": ["docs-search"]},
            },
        }
    }
    path = state_dir / "gatewayd.yaml"
    path.write_text(json.dumps(config))
    loaded = load_config(path)
    assert loaded.paths.workspace == state_dir / "ws"
    assert loaded.agents.default == "main"
    assert set(loaded.settings.agents) == {"main", "docs"}
    assert loaded.agents.workspaces["docs"] == state_dir / "ws-docs"
    assert "defaults" not in loaded.settings.agents
    assert {"agents.defaults.skills", "agents.entries.docs.skills"} <= set(loaded.ignored)


def test_hooks_internal_enabled_false_is_reported_as_itself(
    state_dir: Path, run_cli: RunCli
) -> None:
    hook = state_dir / "hooks" / "h"
    hook.mkdir(parents=True)
    (hook / "HOOK.md").write_text(
        '---\nname: h\nmetadata: {"openclaw": {"events": ["command:h"]}}\n---\n'
    )
    (hook / "handler.py").write_text("def handler(event):\n    pass\n")
    (state_dir / "gatewayd.yaml").write_text(
        json.dumps({"hooks": {"internal": {"enabled": False}}})
    )
    listed = run_cli("hooks", "list", "--json", "--local")
    (record,) = [h for h in json.loads(listed.stdout)["hooks"] if h["name"] == "h"]
    assert record["status"] == "disabled"
    assert record["reasons"] == ["hooks.internal.enabled is false: no file hooks are loaded"]
