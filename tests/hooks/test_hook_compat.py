"""Hooks and configs written for OpenClaw, Milady and Hermes, loaded by the real loader:
aliases dispatch, opt-in hooks, a broken copy shadowing a bundled hook, Hermes handlers,
``requires.config`` against the right tree and the agent's own JSON5 config, and an OpenClaw
``hooks`` section with its webhook keys."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.config import Config, ConfigError, load_config
from gatewayd.hooks import HookEvent, create_hook_event
from gatewayd.hooks.loader import HookRecord, LoadResult
from gatewayd.hooks.registry import HookRegistry
from tests.hooks.hooks_support import Build, Roots
from tests.support.cli import RunCli
from tests.support.hooks import WriteHook


def fire(result: LoadResult, key: str, context: dict[str, Any] | None = None) -> HookEvent:
    registry = HookRegistry()
    registry.set_file_hooks(result.handlers)
    etype, _, action = key.partition(":")
    event = create_hook_event(etype, action, "agent:ops:main", context or {})
    anyio.run(registry.dispatch, event)
    return event


def record(result: LoadResult, name: str) -> HookRecord:
    return next(r for r in result.records if r.name == name)


def test_plugin_hook_names_and_aliases_dispatch(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "starts", events=["session_start", "gateway-start"])
    write_hook(roots.managed, "resets", events=["session:reset"])
    result = build()
    assert fire(result, "session:start").messages == ["starts"]
    assert fire(result, "gateway:startup").messages == ["starts"]
    assert fire(result, "command:reset").messages == ["resets"]
    assert record(result, "starts").warnings == []


def test_a_misspelled_event_loads_ready_with_a_warning(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "typo", events=["message:recieved", "command:new"])
    result = build()
    rec = record(result, "typo")
    assert rec.status == "ready"
    (warning,) = rec.warnings
    assert "did you mean message:received?" in warning
    assert result.warnings == 1
    assert result.summary()["warnings"] == 1
    assert fire(result, "command:new").messages == ["typo"]


def test_an_opt_in_hook_stays_off_until_the_config_enables_it(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "optin", frontmatter={"enabled": False})
    rec = record(build(), "optin")
    assert rec.status == "disabled"
    assert rec.reasons == [
        "off by default (enabled: false in its HOOK.md): turn it on with "
        "`gatewayd hooks enable optin` (hooks.entries.optin.enabled: true)"
    ]
    on = build({"hooks": {"internal": {"entries": {"optin": {"enabled": True}}}}})
    assert record(on, "optin").status == "ready"
    assert fire(on, "command:new").messages == ["optin"]


def test_hooks_enable_writes_an_explicit_true_for_an_opt_in_hook(
    roots: Roots, write_hook: WriteHook, run_cli: RunCli
) -> None:
    write_hook(roots.managed, "optin", frontmatter={"enabled": False})
    result = run_cli("hooks", "enable", "optin")
    assert result.returncode == 0, result.stderr
    assert "enabled hook optin" in result.stdout
    listing = json.loads(run_cli("hooks", "list", "--json").stdout)
    (hook,) = (h for h in listing["hooks"] if h["name"] == "optin")
    assert hook["status"] == "ready"


@pytest.mark.parametrize("broken", ["invalid", "no handler", "import fails"])
def test_a_broken_copy_shadowing_a_bundled_hook_is_loud(
    roots: Roots, build: Build, write_hook: WriteHook, broken: str
) -> None:
    original = write_hook(roots.bundled, "shipped")
    if broken == "invalid":
        copy = write_hook(roots.managed, "shipped", hook_md="---\nname: shipped\nalways: [1]\n")
    elif broken == "no handler":
        copy = write_hook(roots.managed, "shipped", handler=None)
    else:
        copy = write_hook(roots.managed, "shipped", handler="import no_such_module_zz\n")
    result = build()
    assert record(result, "shipped").status == "shadowed"
    winner = next(r for r in result.records if r.path == str(copy))
    (warning,) = (w for w in winner.warnings if "shadows the bundled hook" in w)
    assert f"shadows the bundled hook 'shipped' at {original}" in warning
    assert f"Fix or remove {copy}" in warning
    assert "neither runs" in warning


def test_a_working_override_of_a_bundled_hook_is_quiet(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.bundled, "shipped")
    copy = write_hook(roots.managed, "shipped")
    winner = next(r for r in build().records if r.path == str(copy))
    assert (winner.status, winner.warnings) == ("ready", [])


def _hermes(root: Path, name: str, events: list[str], handler: str) -> Path:
    hook_dir = root / name
    hook_dir.mkdir(parents=True)
    lines = "".join(f"  - {e}\n" for e in events)
    (hook_dir / "HOOK.yaml").write_text(
        f"name: {name}\ndescription: a Hermes hook\nevents:\n{lines}"
    )
    (hook_dir / "handler.py").write_text(textwrap.dedent(handler))
    return hook_dir


def test_a_hermes_hook_is_called_with_the_shapes_it_expects(
    roots: Roots, build: Build, tmp_path: Path
) -> None:
    out = tmp_path / "calls.jsonl"
    handler = f"""
        import json

        async def handle(event_type: str, context: dict):
            with open({str(out)!r}, "a") as f:
                keep = ("platform", "user_id", "session_key", "command", "args")
                f.write(json.dumps([event_type, {{k: context.get(k) for k in keep}}]) + "\\n")
        """
    _hermes(roots.managed, "hermes-commands", ["command:*"], handler)
    _hermes(roots.managed, "hermes-resets", ["session:reset"], handler)
    result = build()
    assert record(result, "hermes-commands").status == "ready"
    ctx = {"args": "now", "senderId": "ada", "commandSource": "telegram"}
    assert fire(result, "command:deploy", ctx).messages == []
    fire(result, "command:reset", {"senderId": "ada", "commandSource": "telegram"})
    calls = [json.loads(line) for line in out.read_text().splitlines()]
    common = {"platform": "telegram", "user_id": "ada", "session_key": "agent:ops:main"}
    reset = {**common, "command": "reset", "args": ""}
    assert calls == [
        ["command:deploy", {**common, "command": "deploy", "args": "now"}],
        ["session:reset", reset],  # hermes-resets: the name it subscribed with
        ["command:reset", reset],  # hermes-commands: command:* gets the command's own name
    ]


def test_a_sync_hermes_handle_runs_and_a_wrong_one_fails_to_load(
    roots: Roots, build: Build, tmp_path: Path
) -> None:
    out = tmp_path / "sync.txt"
    _hermes(
        roots.managed,
        "sync-hermes",
        ["command:ping"],
        "def handle(event_type, context):\n"
        f"    with open({str(out)!r}, 'w') as f:\n"
        "        f.write(event_type)\n",
    )
    _hermes(roots.managed, "bad-hermes", ["command:ping"], "def handle(event_type):\n    pass\n")
    _hermes(roots.managed, "no-handle", ["command:ping"], "def other(a, b):\n    pass\n")
    result = build()
    fire(result, "command:ping")
    assert out.read_text() == "command:ping"
    bad = record(result, "bad-hermes")
    assert bad.status == "failed"
    assert "handle() cannot be called as handle(event_type, context)" in bad.reasons[0]
    missing = record(result, "no-handle")
    assert missing.status == "failed"
    assert "export 'handle' not found (callables defined: other)" in missing.reasons[0]


def test_requires_config_reads_hooks_internal_paths(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(
        roots.managed,
        "needs",
        meta={"requires": {"config": ["hooks.internal.entries.needs.enabled"]}},
    )
    assert record(build(), "needs").reasons == [
        "Config missing: hooks.internal.entries.needs.enabled"
    ]
    on = build({"hooks": {"internal": {"entries": {"needs": {"enabled": True}}}}})
    assert record(on, "needs").status == "ready"


def test_requires_config_outside_gatewayd_reads_the_agent_config_file(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "chat", meta={"requires": {"config": ["chatHistory.enabled"]}})
    (reason,) = record(build(), "chat").reasons
    assert "not a gatewayd key; set agent.configFile" in reason
    agent_file = roots.state / "openclaw.json"
    agent_file.write_text(
        "{\n  // JSON5: comments, unquoted keys, trailing commas\n"
        "  chatHistory: {enabled: false,},\n}\n"
    )
    config = {"agent": {"configFile": "openclaw.json"}}
    (reason,) = record(build(config), "chat").reasons
    assert reason == f"Config missing: chatHistory.enabled (not set, or false, in {agent_file})"
    agent_file.write_text("{chatHistory: {enabled: true}}")
    assert record(build(config), "chat").status == "ready"
    agent_file.write_text("{chatHistory: ")
    (reason,) = record(build(config), "chat").reasons
    assert f"agent.configFile {agent_file} is not valid JSON5" in reason
    agent_file.unlink()
    (reason,) = record(build(config), "chat").reasons
    assert f"agent.configFile {agent_file} does not exist" in reason


def test_an_openclaw_hooks_section_loads_unchanged(
    roots: Roots, config_for: Callable[..., Config]
) -> None:
    config = config_for(
        {
            "hooks": {
                "enabled": False,
                "token": "s3cret",
                "path": "/hooks",
                "mappings": [{"match": {"path": "gmail"}, "action": "agent"}],
                "gmail": {"account": "me@example.org"},
                "internal": {
                    "enabled": True,
                    "entries": {"session-memory": {"enabled": True, "messages": 5}},
                    "load": {"extraDirs": []},
                    "installs": {"pack": {"source": "npm", "hooks": ["x"]}},
                },
            }
        }
    )
    assert config.ignored == (
        "hooks.token",
        "hooks.path",
        "hooks.mappings",
        "hooks.gmail",
        "hooks.internal.installs",
        "hooks.enabled",
    )
    # hooks.enabled beside hooks.internal is OpenClaw's webhook switch; internal.enabled wins.
    assert config.settings.hooks.enabled is True
    assert config.entry("session-memory").setting("messages") == 5


def test_hooks_enabled_alone_is_gatewayds_switch(
    roots: Roots, config_for: Callable[..., Config]
) -> None:
    config = config_for({"hooks": {"enabled": False}})
    assert config.settings.hooks.enabled is False
    assert config.ignored == ()


def test_a_config_error_names_the_key_as_written(roots: Roots) -> None:
    (roots.state / "gatewayd.yaml").write_text(
        "hooks:\n  internal:\n    entries:\n      x: {enabled: maybe}\n    timeoutMs: soon\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config()
    text = "\n".join(info.value.errors)
    assert "hooks.internal.entries.x.enabled: expected true or false" in text
    assert "hooks.internal.timeoutMs: " in text
    assert "hooks.entries.x" not in text


def test_trace_finds_a_hook_that_subscribed_by_another_systems_name(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    from gatewayd.hooks.trace import not_loaded

    write_hook(roots.managed, "off", events=["message_received"])
    result = build({"hooks": {"entries": {"off": {"enabled": False}}}})
    (skipped,) = not_loaded(result.records, "message:received")
    assert skipped[0] == "off"
    assert not_loaded(result.records, "message:sent") == []


def test_hooks_test_picks_the_event_another_systems_name_stands_for() -> None:
    from gatewayd.hooks.tester import default_event

    assert default_event("x", ["message_received"]) == "message:received"
    assert default_event("x", ["comand:new", "command:*"]) == "command:x"
