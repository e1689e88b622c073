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


def write_requiring_hook(state_dir: Path, requires: list[str]) -> None:
    hook = state_dir / "hooks" / "needs"
    hook.mkdir(parents=True)
    meta = {"openclaw": {"events": ["command:needs"], "requires": {"config": requires}}}
    (hook / "HOOK.md").write_text(f"---\nname: needs\nmetadata: {json.dumps(meta)}\n---\n")
    (hook / "handler.py").write_text("def handler(event):\n    pass\n")


def test_openclaw_sections_in_gatewayd_yaml_meet_requirements_and_are_named_as_such(
    state_dir: Path, run_cli: RunCli
) -> None:
    """``channels``, ``plugins``, ``browser`` written in gatewayd.yaml (no agent.configFile):
    accepted, read for the hook's requirements, and named by ``config check`` as read for
    nothing else. Before, each was refused as an unknown key."""
    write_requiring_hook(state_dir, ["channels.telegram.enabled", "plugins.entries.x"])
    config = {
        "channels": {"telegram": {"enabled": True, "botToken": "t0ken"}},
        "plugins": {"entries": {"x": {"enabled": True}}},
        "browser": {"enabled": False},
    }
    (state_dir / "gatewayd.yaml").write_text(json.dumps(config))
    checked = run_cli("config", "check")
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    for key in ("browser", "channels", "plugins"):
        assert f"requirements only: {key}: OpenClaw's; read only for hooks' requires.config" in (
            "\n".join(lines)
        )
    report = json.loads(run_cli("config", "check", "--json").stdout)
    assert report["requirementsOnly"] == ["browser", "channels", "plugins"]
    listed = run_cli("hooks", "list", "--json", "--local")
    (record,) = [h for h in json.loads(listed.stdout)["hooks"] if h["name"] == "needs"]
    assert record["status"] == "ready", record["reasons"]
    # cfg (what hooks see of the config) does not carry them: only requirements read them.
    assert "channels" not in load_config(state_dir / "gatewayd.yaml").effective()


def test_a_false_openclaw_key_in_gatewayd_yaml_says_where_it_was_read(
    state_dir: Path, run_cli: RunCli
) -> None:
    write_requiring_hook(state_dir, ["browser.enabled"])
    (state_dir / "gatewayd.yaml").write_text(json.dumps({"browser": {"enabled": False}}))
    listed = run_cli("hooks", "list", "--json", "--local")
    (record,) = [h for h in json.loads(listed.stdout)["hooks"] if h["name"] == "needs"]
    assert record["status"] == "ineligible"
    assert record["reasons"] == [
        f"Config missing: browser.enabled (not set, or false, in {state_dir / 'gatewayd.yaml'})"
    ]


def test_gatewayds_own_sections_and_unknown_ones_are_still_refused(
    state_dir: Path, run_cli: RunCli
) -> None:
    (state_dir / "gatewayd.yaml").write_text(
        json.dumps({"browsr": {"enabled": True}, "gateway": {"nope": 1}, "channels": {}})
    )
    checked = run_cli("config", "check")
    assert checked.returncode == 78
    assert "browsr" in checked.stderr and "gateway.nope: unknown key" in checked.stderr
    assert "channels" not in checked.stderr
