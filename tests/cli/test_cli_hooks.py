"""Black-box tests of ``gatewayd hooks list|info|check`` and ``gatewayd config show|check``:
the real CLI against a temporary ``ELIZA_STATE_DIR``.

The checkout's bundled hooks are present too (that is what an installed gatewayd sees); the
tests look only at the hooks they write, and check that bundled ones are listed as bundled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import RunCli, ok
from tests.support.hooks import WriteHook


@pytest.fixture
def run_cli(run_cli_inline: RunCli) -> RunCli:
    """``hooks list|info|check`` and ``config show|check`` read files only: run by the
    test's own thread, where coverage measures them."""
    return run_cli_inline


def mine(listing: dict[str, Any], source: str | None = None) -> list[dict[str, Any]]:
    return [h for h in listing["hooks"] if h["source"] != "bundled" or source == "bundled"]


@pytest.fixture
def layered(state_dir: Path, write_hook: WriteHook) -> Path:
    """extra, managed and workspace hooks with a shared name, plus assorted problems."""
    (state_dir / "gatewayd.yaml").write_text(
        "hooks:\n  load:\n    extraDirs: [extra]\n  entries:\n    off-key: {enabled: false}\n"
    )
    write_hook(state_dir / "extra", "shared", meta={"emoji": "🅰"})
    write_hook(state_dir / "hooks", "shared")
    write_hook(state_dir / "workspace" / "hooks", "shared", meta={"emoji": "🔔"})
    write_hook(state_dir / "hooks", "off", meta={"hookKey": "off-key"})
    write_hook(state_dir / "hooks", "needy", meta={"requires": {"bins": ["no-such-bin-qq"]}})
    write_hook(
        state_dir / "hooks",
        "noisy",
        handler="print('hello from import')\nasync def handler(event):\n    pass\n",
    )
    return state_dir


def test_list_json_document(run_cli: RunCli, layered: Path) -> None:
    listing = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)
    assert listing["stateDir"] == str(layered)
    assert listing["workspaceDir"] == str(layered / "workspace")
    hooks = mine(listing)
    assert [(h["source"], h["name"], h["status"]) for h in hooks] == [
        ("extra", "shared", "shadowed"),
        ("managed", "needy", "ineligible"),
        ("managed", "noisy", "ready"),
        ("managed", "off", "disabled"),
        ("managed", "shared", "shadowed"),
        ("workspace", "shared", "ready"),
    ]
    shared = hooks[-1]
    assert set(shared) >= {
        "name", "hookKey", "description", "emoji", "source", "path", "handler", "events",
        "status", "eligible", "enabled", "reasons", "missing",
    }  # fmt: skip
    assert shared["emoji"] == "🔔"
    assert shared["path"] == str(layered / "workspace" / "hooks" / "shared")
    assert shared["handler"] == str(layered / "workspace" / "hooks" / "shared" / "handler.py")
    assert shared["events"] == ["command:new"]
    assert hooks[1]["missing"] == {
        "bins": ["no-such-bin-qq"], "anyBins": [], "env": [], "config": [], "os": [],
    }  # fmt: skip
    assert hooks[1]["reasons"] == ["Binary missing: no-such-bin-qq"]
    assert (hooks[3]["enabled"], hooks[3]["eligible"]) == (False, True)
    assert {h["source"] for h in listing["hooks"]} <= {"extra", "bundled", "managed", "workspace"}


def test_bundled_hooks_are_listed_as_bundled(run_cli: RunCli, state_dir: Path) -> None:
    bundled_root = Path(__file__).resolve().parents[2] / "hooks"
    expected = sorted(p.name for p in bundled_root.iterdir() if (p / "HOOK.md").is_file())
    listing = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)
    assert sorted(Path(h["path"]).name for h in listing["hooks"]) == expected
    assert all(h["source"] == "bundled" for h in listing["hooks"])


def test_hook_output_at_import_does_not_corrupt_json(run_cli: RunCli, layered: Path) -> None:
    result = ok(run_cli("hooks", "list", "--json"))
    json.loads(result.stdout)
    assert "hello from import" in result.stderr


def test_list_table_and_verbose(run_cli: RunCli, layered: Path) -> None:
    plain = ok(run_cli("hooks", "list")).stdout
    lines = plain.splitlines()
    assert lines[0].startswith("Hooks (")
    assert lines[1].split() == ["STATUS", "HOOK", "EVENTS", "SOURCE"]
    assert any(
        line.split() == ["ready", "🔔", "shared", "command:new", "workspace"] for line in lines
    )
    assert any(line.split() == ["disabled", "off", "command:new", "managed"] for line in lines)
    assert "Binary missing" not in plain
    verbose = ok(run_cli("hooks", "list", "--verbose")).stdout
    assert "    - Binary missing: no-such-bin-qq" in verbose
    assert "    - disabled in config" in verbose
    assert (
        f"    - shadowed by the workspace hook at {layered / 'workspace' / 'hooks' / 'shared'}"
        in verbose
    )


def test_list_eligible_only(run_cli: RunCli, layered: Path) -> None:
    listing = json.loads(ok(run_cli("hooks", "list", "--eligible", "--json")).stdout)
    names = {h["name"] for h in mine(listing)}
    assert "needy" not in names
    assert {"off", "noisy", "shared"} <= names
    assert all(h["eligible"] for h in listing["hooks"])
    assert "needy" not in ok(run_cli("hooks", "list", "--eligible")).stdout


def test_info_by_name_and_hook_key(run_cli: RunCli, layered: Path) -> None:
    by_key = json.loads(ok(run_cli("hooks", "info", "off-key", "--json")).stdout)
    assert (by_key["name"], by_key["hookKey"], by_key["status"]) == ("off", "off-key", "disabled")
    shared = json.loads(ok(run_cli("hooks", "info", "shared", "--json")).stdout)
    assert (shared["source"], shared["status"]) == ("workspace", "ready")  # the one in effect
    text = ok(run_cli("hooks", "info", "needy")).stdout
    assert "needy  [ineligible]" in text
    assert "reason:    Binary missing: no-such-bin-qq" in text
    assert "missing:   bins: no-such-bin-qq" in text


def test_info_not_found(run_cli: RunCli, layered: Path) -> None:
    result = run_cli("hooks", "info", "nope")
    assert result.returncode == 1
    # (the "noisy" hook's print at import time goes to stderr before it)
    assert result.stderr.endswith(
        '\nerror: hook "nope" not found (gatewayd hooks list shows them all)\n'
    )
    assert result.stdout == ""


def test_check_passes_with_only_ineligible_and_disabled_hooks(
    run_cli: RunCli, layered: Path
) -> None:
    result = ok(run_cli("hooks", "check"))
    assert result.stdout.splitlines()[0].startswith("Hooks: ")
    assert "ineligible  needy (managed" in result.stdout
    assert "    - Binary missing: no-such-bin-qq" in result.stdout
    report = json.loads(ok(run_cli("hooks", "check", "--json")).stdout)
    assert report["ok"] is True
    assert set(report["summary"]) == {
        "discovered",
        "eligible",
        "registered",
        "skipped",
        "failed",
        "warnings",
    }
    assert "needy: Binary missing: no-such-bin-qq" in report["summary"]["skipped"]
    assert {h["name"] for h in report["hooks"]} >= {"needy", "off", "shared"}


def test_check_fails_on_a_failed_or_invalid_hook(
    run_cli: RunCli, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "typo", events=["comand:new"])
    write_hook(
        hooks,
        "badtype",
        hook_md="---\nname: badtype\nmetadata:\n  eliza:\n    events: command:new\n---\n",
    )
    write_hook(hooks, "crashy", handler="import no_such_module_zz\n")
    write_hook(hooks, "nohandler", handler=None)
    result = run_cli("hooks", "check")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "unknown event type 'comand'" in out
    assert "did you mean command:new?" in out
    assert f"{hooks / 'crashy' / 'handler.py'}:1: ModuleNotFoundError" in out
    assert f"no handler in {hooks / 'nohandler'}" in out
    report = json.loads(run_cli("hooks", "check", "--json").stdout)
    assert report["ok"] is False
    failed = report["summary"]["failed"]
    assert any(line.startswith("crashy: import failed: ") for line in failed)
    assert any(line.startswith("nohandler: no handler in ") for line in failed)
    typo = next(h for h in report["hooks"] if h["name"] == "typo")
    assert typo["status"] == "ready"  # loads, with a warning: no emitter produces comand:new
    assert report["summary"]["warnings"] == 1


def test_extra_dir_outside_the_state_dir_is_rejected_visibly(
    run_cli: RunCli, state_dir: Path, tmp_path: Path, write_hook: WriteHook
) -> None:
    write_hook(tmp_path / "elsewhere", "outsider")
    (state_dir / "gatewayd.yaml").write_text(
        f"hooks: {{load: {{extraDirs: ['{tmp_path / 'elsewhere'}']}}}}\n"
    )
    result = ok(run_cli("hooks", "check"))
    assert "rejected root: hooks.load.extraDirs: " in result.stdout
    assert "outside the state dir" in result.stdout
    listing = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)
    assert "outsider" not in {h["name"] for h in listing["hooks"]}


def test_hooks_disabled_by_env_override(
    run_cli: RunCli, state_dir: Path, write_hook: WriteHook
) -> None:
    write_hook(state_dir / "hooks", "mine")
    listing = json.loads(
        ok(run_cli("hooks", "list", "--json", env={"GATEWAYD_HOOKS__ENABLED": "false"})).stdout
    )
    assert {h["status"] for h in listing["hooks"]} == {"disabled"}


def test_config_show_prints_the_effective_config(run_cli: RunCli, state_dir: Path) -> None:
    config = state_dir / "custom.yaml"
    config.write_text("hooks:\n  internal:\n    entries:\n      my-hook: {apiKey: k, limit: 3}\n")
    result = ok(
        run_cli(
            "config", "show", "--config", str(config), env={"GATEWAYD_HOOKS__TIMEOUTMS": "5000"}
        )
    )
    assert result.stdout.startswith(f"# effective config; source: {config}\n")
    effective = yaml.safe_load(result.stdout)
    assert effective["hooks"]["timeoutMs"] == 5000
    assert effective["hooks"]["entries"]["my-hook"]["apiKey"] == "<redacted>"
    assert effective["hooks"]["entries"]["my-hook"]["limit"] == 3
    assert effective["hooks"]["enabled"] is True
    assert effective["workspace"]["dir"] == str(state_dir / "workspace")
    assert effective["gateway"]["control"]["socket"] == str(state_dir / "run" / "gatewayd.sock")


def test_config_check_ok(run_cli: RunCli, state_dir: Path) -> None:
    assert ok(run_cli("config", "check")).stdout == "config OK: built-in defaults\n"


def test_config_check_lists_every_error_with_its_key_path(run_cli: RunCli, state_dir: Path) -> None:
    config = state_dir / "bad.yaml"
    config.write_text(
        "gateway:\n  queue: {capacity: 0, colour: red}\n"
        "hooks:\n  timeoutMs: soon\n  load: {extraDir: []}\n"
        "mystery: 1\n"
    )
    result = run_cli("config", "check", "--config", str(config))
    assert result.returncode == 78
    err = result.stderr
    assert err.startswith(f"error: invalid config {config} (5 errors):\n")
    for path in (
        "gateway.queue.capacity:",
        "gateway.queue.colour: unknown key",
        "hooks.timeoutMs:",
        "hooks.load.extraDir: unknown key",
        "mystery: unknown key",
    ):
        assert f"\n  {path}" in err, path
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("- a\n- b\n", "the top level must be a mapping of keys, got a list"),
        ("hooks: {enabled: true\n", "invalid YAML"),
    ],
    ids=["top-level-list", "syntax-error"],
)
def test_config_check_unusable_files(
    run_cli: RunCli, state_dir: Path, content: str, expected: str
) -> None:
    config = state_dir / "bad.yaml"
    config.write_text(content)
    result = run_cli("config", "check", "--config", str(config))
    assert result.returncode == 78
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_syntax_error_names_the_line(run_cli: RunCli, state_dir: Path) -> None:
    config = state_dir / "bad.yaml"
    config.write_text("hooks:\n  enabled: true\n  entries: {a: [1, 2}\n")
    result = run_cli("config", "check", "--config", str(config))
    assert f"{config}:3:" in result.stderr


def test_missing_config_file(run_cli: RunCli, state_dir: Path) -> None:
    result = run_cli("config", "check", "--config", str(state_dir / "nope.yaml"))
    assert result.returncode == 78
    assert f"config file not found: {state_dir / 'nope.yaml'}" in result.stderr


def test_other_commands_refuse_a_bad_config_with_ex_config(
    run_cli: RunCli, state_dir: Path
) -> None:
    (state_dir / "gatewayd.yaml").write_text("hooks: {bogus: 1}\n")
    for args in (("hooks", "list"), ("hooks", "check", "--json"), ("config", "show")):
        result = run_cli(*args)
        assert result.returncode == 78, args
        assert result.stderr.startswith(f"error: invalid config {state_dir / 'gatewayd.yaml'}")
        assert "  hooks.bogus: unknown key" in result.stderr
        assert result.stdout == ""
