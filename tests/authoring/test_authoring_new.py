"""``gatewayd hooks new``: what it writes, that the result loads and runs, and what it refuses.

Everything goes through the real CLI in a subprocess against a temporary state dir; the
scaffolded hooks are then loaded by ``gatewayd hooks list --json`` (the daemon's own loader).
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gatewayd.authoring import name_problem
from gatewayd.hooks.metadata import read_manifest
from tests.support.archives import tree
from tests.support.cli import RunCli, ok, refused
from tests.support.hooks import WriteHook


def listing(run_cli: RunCli) -> dict[str, dict[str, object]]:
    hooks = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)["hooks"]
    return {h["name"]: h for h in hooks if h["source"] != "bundled"}


def test_new_python_hook_is_valid_typed_async_and_loads(run_cli: RunCli, state_dir: Path) -> None:
    out = ok(run_cli("hooks", "new", "greeter", "--events", "command:new,session:start")).stdout
    hook_dir = state_dir / "hooks" / "greeter"
    assert f"created hook greeter in {hook_dir}" in out
    assert "gatewayd send /new --session test" in out
    assert sorted(os.listdir(hook_dir)) == ["HOOK.md", "handler.py"]
    assert [p.name for p in (state_dir / "hooks").iterdir()] == ["greeter"]  # no staging left

    manifest = read_manifest(hook_dir / "HOOK.md")
    assert (manifest.name, manifest.events, manifest.warnings) == (
        "greeter",
        ("command:new", "session:start"),
        (),
    )
    body = (hook_dir / "HOOK.md").read_text().split("---", 2)[2]
    assert "## Next steps" in body and "gatewayd hooks info greeter" in body

    module = ast.parse((hook_dir / "handler.py").read_text())
    assert ast.get_docstring(module)
    imports = [
        n for n in module.body if isinstance(n, ast.ImportFrom) and n.module == "gatewayd.hooks"
    ]
    assert {a.name for a in imports[0].names} == {"HookEvent", "HookContext"}
    (fn,) = [n for n in module.body if isinstance(n, ast.AsyncFunctionDef)]
    assert fn.name == "handler" and ast.get_docstring(fn)
    assert [ast.unparse(a.annotation) for a in fn.args.args if a.annotation] == [
        "HookEvent",
        "HookContext",
    ]
    assert fn.returns is not None and ast.unparse(fn.returns) == "None"

    hook = listing(run_cli)["greeter"]
    assert (hook["status"], hook["source"], hook["events"]) == (
        "ready",
        "managed",
        ["command:new", "session:start"],
    )


def test_new_defaults_to_its_own_command_and_a_description(
    run_cli: RunCli, state_dir: Path
) -> None:
    out = ok(run_cli("hooks", "new", "deploy_2", "--description", 'Ship it: "now"')).stdout
    assert "gatewayd send /deploy_2 --session test" in out
    manifest = read_manifest(state_dir / "hooks" / "deploy_2" / "HOOK.md")
    assert manifest.events == ("command:deploy_2",)
    assert manifest.description == 'Ship it: "now"'


def test_new_command_hook_is_an_executable_that_answers(run_cli: RunCli, state_dir: Path) -> None:
    out = ok(run_cli("hooks", "new", "pinger", "--command", "--events", "command:ping")).stdout
    hook_dir = state_dir / "hooks" / "pinger"
    assert "handler     an executable script" in out
    assert sorted(os.listdir(hook_dir)) == ["HOOK.md", "handler"]
    handler = hook_dir / "handler"
    assert stat.S_IMODE(handler.stat().st_mode) == 0o755
    assert handler.read_text().startswith("#!/usr/bin/env python3\n")
    event = {"type": "command", "action": "ping", "sessionKey": "s", "messages": [], "context": {}}
    run = subprocess.run(
        [str(handler)], input=json.dumps(event), capture_output=True, text=True, timeout=30
    )
    assert (run.returncode, run.stdout) == (0, "pinger saw command:ping\n"), run.stderr
    assert read_manifest(hook_dir / "HOOK.md").requires.bins == ["python3"]
    hook = listing(run_cli)["pinger"]
    assert (hook["status"], hook["handler"]) == ("ready", str(handler))


@pytest.mark.parametrize(("lang", "handler"), [("ts", "handler.ts"), ("js", "handler.js")])
def test_new_node_hook_is_typed_or_plain_and_loads(
    run_cli: RunCli, state_dir: Path, lang: str, handler: str
) -> None:
    out = ok(run_cli("hooks", "new", f"greeter-{lang}", "--lang", lang)).stdout
    hook_dir = state_dir / "hooks" / f"greeter-{lang}"
    assert f"{handler}  export default async function handler(event)" in out
    assert sorted(os.listdir(hook_dir)) == ["HOOK.md", handler]
    code = (hook_dir / handler).read_text()
    assert "export default async function handler(event" in code
    assert ("interface HookEvent" in code) is (lang == "ts")
    assert f"`{handler}`" in (hook_dir / "HOOK.md").read_text()
    made = json.loads(ok(run_cli("hooks", "info", f"greeter-{lang}", "--json")).stdout)
    assert (made["status"], made["handler"]) == ("ready", str(hook_dir / handler)), made


def test_new_refuses_a_command_hook_in_another_language(run_cli: RunCli, state_dir: Path) -> None:
    refused(run_cli("hooks", "new", "x", "--command", "--lang", "ts"), "choose one")
    usage = run_cli("hooks", "new", "x", "--lang", "rb")
    assert usage.returncode == 2 and "'rb'" in usage.stderr, usage.stderr
    assert not (state_dir / "hooks" / "x").exists()


INVALID = ["Greeter", "-lead", "_lead", "has space", "dot.name", "slash/name", "..", "é", "x" * 65]


def test_name_rule() -> None:
    for name in ["", *INVALID]:
        assert name_problem(name), name
    for name in ("a", "0day", "a-b_c", "x" * 64, "boot-md", "session-memory"):
        assert name_problem(name) is None, name


@pytest.mark.parametrize("name", ["dot.name", "-lead", ""])
def test_new_refuses_invalid_names(run_cli: RunCli, state_dir: Path, name: str) -> None:
    refused(run_cli("hooks", "new", "--", name), "hook name")
    assert not (state_dir / "hooks").exists()


def test_new_accepts_the_longest_name(run_cli: RunCli, state_dir: Path) -> None:
    ok(run_cli("hooks", "new", "x" * 64))
    assert os.listdir(state_dir / "hooks") == ["x" * 64]


def test_new_refuses_an_existing_name_and_changes_nothing(
    run_cli: RunCli, state_dir: Path, write_hook: WriteHook
) -> None:
    ok(run_cli("hooks", "new", "taken"))
    before = tree(state_dir)
    refused(run_cli("hooks", "new", "taken"), f"{state_dir / 'hooks' / 'taken'} already exists")
    refused(run_cli("hooks", "new", "taken", "--command"), "already exists")
    write_hook(state_dir / "workspace" / "hooks", "ws-hook")
    before = tree(state_dir)
    refused(run_cli("hooks", "new", "ws-hook"), "a workspace hook named 'ws-hook' exists")
    refused(run_cli("hooks", "new", "boot-md"), "a bundled hook named 'boot-md' exists")
    assert tree(state_dir) == before


def test_new_refuses_unknown_events(run_cli: RunCli, state_dir: Path) -> None:
    refused(run_cli("hooks", "new", "x", "--events", "comand:new"), "unknown event type 'comand'")
    refused(run_cli("hooks", "new", "x", "--events", "command:new,bad key"), "malformed event key")
    assert not (state_dir / "hooks" / "x").exists()
