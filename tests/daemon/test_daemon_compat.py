"""Hooks and a config written for OpenClaw and Hermes, against a real gateway: plugin-hook
names fire, a misspelled event is a counted warning (not a silent no-op), an opt-in hook stays
off, a Hermes hook is called, and the OpenClaw webhook keys are logged as ignored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.state import clean_env, eventually


@pytest.mark.anyio
async def test_openclaw_and_hermes_hooks_in_a_real_daemon(
    state_dir: Path, start_gateway: StartGateway, write_hook: WriteHook
) -> None:
    managed = state_dir / "hooks"
    write_hook(managed, "aliased", events=["message_received"])
    write_hook(managed, "typo", events=["message:recieved"])
    write_hook(managed, "optin", events=["message"], frontmatter={"enabled": False})
    calls = state_dir / "hermes.jsonl"
    hermes = managed / "hermes-cmds"
    hermes.mkdir(parents=True)
    (hermes / "HOOK.yaml").write_text("name: hermes-cmds\nevents: ['command:*']\n")
    (hermes / "handler.py").write_text(
        "import json\n\n"
        "def handle(event_type, context):\n"
        f"    with open({str(calls)!r}, 'a') as f:\n"
        "        f.write(json.dumps([event_type, context['platform'], context['args']]) + '\\n')\n"
    )
    config = {
        "hooks": {
            "enabled": True,
            "token": "webhook-secret",
            "mappings": [],
            "internal": {"enabled": True, "entries": {"aliased": {"enabled": True}}},
        }
    }
    daemon = await start_gateway(config)
    ignored = await daemon.wait_log("config.ignored")
    assert sorted(ignored["keys"]) == ["hooks.enabled", "hooks.mappings", "hooks.token"]

    reply = await daemon.send("hello there", channel="telegram")
    assert reply["messages"] == ["aliased"]  # not typo (never fires), not optin (off)
    await daemon.send("/deploy v2", channel="telegram")
    await eventually(lambda: calls.exists() and calls.read_text().count("\n") == 1)
    assert json.loads(calls.read_text()) == ["command:deploy", "telegram", "v2"]

    status = (await daemon.request("status"))["status"]
    assert status["hooks"]["warnings"] == 1
    assert any(s.startswith("optin: off by default") for s in status["hooks"]["skipped"])
    warning = next(line for line in daemon.events("hook.warning") if line["hook"] == "typo")
    assert "did you mean message:received?" in warning["warning"]

    shown = await anyio.run_process(
        [sys.executable, "-m", "gatewayd", "status"], env=clean_env(state_dir), check=True
    )
    text = shown.stdout.decode()
    assert "; 1 warnings" in text
    assert await daemon.stop() == 0


def test_hooks_check_strict_fails_on_warnings_only(state_dir: Path, write_hook: WriteHook) -> None:
    managed = state_dir / "hooks"
    write_hook(managed, "fine")
    env = clean_env(state_dir)

    def check(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gatewayd", "hooks", "check", *flags],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert check("--strict").returncode == 0
    write_hook(managed, "typo", events=["session:new"])
    lenient = check()
    assert lenient.returncode == 0, lenient.stdout
    assert "1 warnings" in lenient.stdout
    assert "did you mean command:new?" in lenient.stdout
    strict = check("--strict")
    assert strict.returncode == 1
    assert json.loads(check("--strict", "--json").stdout)["ok"] is False
