"""Strict config booleans, the round-trip config editor, and ``gatewayd hooks enable|disable``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gatewayd.config import ConfigError, load_config
from gatewayd.config_edit import set_hook_enabled
from tests.support.cli import RunCli
from tests.support.hooks import WriteHook

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_cli(run_cli_inline: RunCli) -> RunCli:
    """``hooks enable|disable`` edit the config file only: run by the test's own
    thread, where coverage measures them."""
    return run_cli_inline


@pytest.mark.parametrize("word", ["yes", "on", "y", "flase", "enabled"])
def test_yaml11_words_are_not_booleans(tmp_path: Path, state_dir: Path, word: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"hooks:\n  enabled: {word}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.errors == [
        f"hooks.enabled: expected true or false (yes/no/on/off are not booleans here) "
        f"(got {word!r})"
    ]


def test_env_booleans(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAYD_HOOKS__ENABLED", "false")
    monkeypatch.setenv("GATEWAYD_HOOKS__LOAD__POLL", "1")
    settings = load_config().settings
    assert settings.hooks.enabled is False
    assert settings.hooks.load.poll is True


def test_editor_keeps_comments_nulls_and_key_order(tmp_path: Path) -> None:
    path = tmp_path / "gatewayd.yaml"
    original = (REPO / "config" / "gatewayd.yaml").read_text()
    path.write_text(original)
    assert set_hook_enabled(path, "my-hook", False) is True
    edited = path.read_text()
    # Only the entries line grew; every comment and `null` of the original is still there.
    assert [ln for ln in original.splitlines() if ln.strip().startswith("#")] == [
        ln for ln in edited.splitlines() if ln.strip().startswith("#")
    ]
    assert edited.count("null") == original.count("null")
    assert "  entries:\n    my-hook:\n      enabled: false\n" in edited
    assert load_config(path).entry("my-hook").enabled is False
    assert set_hook_enabled(path, "my-hook", False) is False  # already so: file untouched
    assert set_hook_enabled(path, "my-hook", True) is True
    assert load_config(path).entry("my-hook").enabled is True


def test_editor_creates_the_file_and_keeps_hook_settings(tmp_path: Path) -> None:
    path = tmp_path / "new" / "gatewayd.yaml"
    assert set_hook_enabled(path, "x", True) is False  # enabled by default: nothing to write
    assert not path.exists()
    assert set_hook_enabled(path, "x", False) is True
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    path.write_text("hooks:\n  entries:\n    x: {apiKey: secret}  # mine\n")
    set_hook_enabled(path, "x", False)
    assert "apiKey: secret" in path.read_text()
    assert "# mine" in path.read_text()


def test_editor_edits_openclaw_internal_layout(tmp_path: Path) -> None:
    path = tmp_path / "gatewayd.yaml"
    path.write_text("hooks:\n  internal:\n    entries:\n      a: {apiKey: k}\n")
    set_hook_enabled(path, "b", False)
    config = load_config(path)
    assert config.entry("a").setting("apiKey") == "k"  # not replaced by a new hooks.entries
    assert config.entry("b").enabled is False
    assert "entries:" not in path.read_text().split("internal:")[0]


def test_editor_refuses_to_write_an_invalid_config(tmp_path: Path) -> None:
    path = tmp_path / "gatewayd.yaml"
    broken = "hooks:\n  timeoutMS: 5\n"
    path.write_text(broken)
    with pytest.raises(ConfigError) as err:
        set_hook_enabled(path, "x", False)
    assert any("timeoutMS" in e for e in err.value.errors)
    assert path.read_text() == broken
    path.write_text("hooks: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        set_hook_enabled(path, "x", False)


def test_cli_enable_disable(state_dir: Path, write_hook: WriteHook, run_cli: RunCli) -> None:
    write_hook(
        state_dir / "hooks",
        "needs-git",
        meta={"hookKey": "ng", "requires": {"bins": ["no-such-binary-xyz"]}},
    )
    write_hook(state_dir / "hooks", "plain")
    result = run_cli("hooks", "disable", "plain")
    assert result.returncode == 0, result.stderr
    assert "disabled hook plain" in result.stdout
    listed = run_cli("hooks", "info", "plain", "--json")
    assert '"status": "disabled"' in listed.stdout
    # by hookKey; the hook cannot run here, and both facts are said
    assert run_cli("hooks", "disable", "ng").returncode == 0
    info = run_cli("hooks", "info", "needs-git", "--json").stdout
    assert "Binary missing: no-such-binary-xyz" in info and "disabled in config" in info
    enabled = run_cli("hooks", "enable", "ng")
    assert enabled.returncode == 0
    assert "cannot run here: Binary missing: no-such-binary-xyz" in enabled.stderr
    missing = run_cli("hooks", "enable", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        'error: hook "nope" not found (gatewayd hooks list shows them all)'
    )
    assert (state_dir / "gatewayd.yaml").exists()
    assert os.stat(state_dir / "gatewayd.yaml").st_mode & 0o077 == 0
