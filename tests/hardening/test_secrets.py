"""Secrets stay where they belong (in-process gateway, real CLI and command hooks).

``config show`` and ``status`` redact secret-looking values and every ``env``; each hook sees
only its own ``hooks.entries.<key>`` settings and env in ``cfg``; a client's trigger context
cannot replace the gateway's ``cfg`` or ``workspaceDir``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cli import gatewayd, ok
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook, recorder
from tests.support.state import read_records, write_config

SECRETS = {"apiKey": "sk-live-0a1b2c", "token": "tok-3d4e5f", "env": "env-6a7b8c"}

pytestmark = pytest.mark.anyio


def secret_config() -> dict[str, object]:
    return {
        "hooks": {
            "entries": {
                "alpha": {
                    "apiKey": SECRETS["apiKey"],
                    "messages": 7,
                    "env": {"ALPHA_TOKEN": SECRETS["env"]},
                },
                "beta": {"token": SECRETS["token"], "colour": "blue"},
            }
        }
    }


def test_config_show_redacts_secrets_and_env(state_dir: Path) -> None:
    write_config(state_dir, secret_config())
    shown = ok(gatewayd(state_dir, "config", "show")).stdout
    for secret in SECRETS.values():
        assert secret not in shown
    entries = yaml.safe_load(shown)["hooks"]["entries"]
    assert entries["alpha"]["apiKey"] == "<redacted>"
    assert entries["alpha"]["env"] == {"ALPHA_TOKEN": "<redacted>"}
    assert entries["alpha"]["messages"] == 7  # not a secret: shown as it is
    assert entries["beta"] == {
        "enabled": True,
        "env": {},
        "timeoutMs": None,
        "priority": None,
        "agents": None,
        "retries": 0,
        "retryBackoffMs": 1000,
        "token": "<redacted>",
        "colour": "blue",
    }


async def test_status_and_reload_errors_never_echo_a_secret(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    daemon = await start_gateway(secret_config())
    bad = secret_config()
    bad["hooks"]["entries"]["alpha"]["env"] = [SECRETS["env"]]  # type: ignore[index]
    bad["hooks"]["entries"]["beta"]["token"] = {"nested": SECRETS["token"]}  # type: ignore[index]
    bad["gateway"] = {"queue": {"capacity": "many"}}  # an ordinary error keeps its value
    write_config(state_dir, bad)
    async with daemon.control() as control:
        reply = await control.request("reload")
        assert reply["ok"] is False and reply["error"]["code"] == "reload_refused", reply
        status = (await control.ok("status"))["status"]
    assert status["last_reload"]["result"] == "refused"
    text = json.dumps(reply) + json.dumps(status) + daemon.stderr_text()
    assert "hooks.entries.alpha.env: " in text  # the error still names the key
    assert "(got 'many')" in text
    for secret in (SECRETS["env"], SECRETS["token"]):
        assert secret not in text
    assert await daemon.stop() == 0


async def test_an_error_across_sections_never_echoes_the_config(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    """A check across sections (two default agents, an agent id no session key can carry)
    sees the whole config: its error names the keys and shows none of the values."""
    daemon = await start_gateway(secret_config())
    bad_agents: list[dict[str, object]] = [
        {"../x": {}},
        {"a": {"default": True}, "b": {"default": True}},
    ]
    for agents in bad_agents:
        write_config(state_dir, {**secret_config(), "agents": agents})
        async with daemon.control() as control:
            reply = await control.request("reload")
            status = (await control.ok("status"))["status"]
        assert reply["ok"] is False and reply["error"]["code"] == "reload_refused", reply
        text = json.dumps(reply) + json.dumps(status) + daemon.stderr_text()
        assert "agents" in reply["error"]["message"], reply
        for secret in SECRETS.values():
            assert secret not in text
    assert await daemon.stop() == 0


COMMAND_HOOK = """#!{python}
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "command.json"), "w") as f:
    json.dump(event["context"]["cfg"]["hooks"], f)
"""


async def test_each_hook_sees_only_its_own_entry_in_cfg(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    for name in ("alpha", "beta"):
        write_hook(
            hooks,
            name,
            events=["command:probe"],
            handler=recorder(file=f"{name}.jsonl", keep=("cfg", "workspaceDir")),
        )
    write_hook(
        hooks,
        "gamma",
        events=["command:probe"],
        handler=COMMAND_HOOK.replace("{python}", sys.executable),
        handler_file="handler",
    )
    daemon = await start_gateway(secret_config())
    async with daemon.control() as control:
        await control.ok("message", sessionKey="s", text="/probe")
    alpha = read_records(state_dir, "alpha.jsonl")[0]["ctx"]["cfg"]["hooks"]
    beta = read_records(state_dir, "beta.jsonl")[0]["ctx"]["cfg"]["hooks"]
    gamma = json.loads((state_dir / "command.json").read_text())

    # Its own entry, whole, where OpenClaw hooks look for it (and under hooks.entries).
    own_alpha = alpha["internal"]["entries"]["alpha"]
    assert own_alpha["apiKey"] == SECRETS["apiKey"]
    assert own_alpha["env"] == {"ALPHA_TOKEN": SECRETS["env"]}
    assert alpha["entries"]["alpha"] == own_alpha
    assert beta["internal"]["entries"]["beta"]["token"] == SECRETS["token"]
    # Another hook's entry: whether it is on and its timeout, nothing else.
    assert alpha["entries"]["beta"] == {"enabled": True, "timeoutMs": None}
    assert beta["entries"]["alpha"] == {"enabled": True, "timeoutMs": None}
    assert list(beta["internal"]["entries"]) == ["beta"]
    # A command hook gets the same view on stdin; it has no entry, so sees nobody's settings.
    assert gamma["entries"] == {
        "alpha": {"enabled": True, "timeoutMs": None},
        "beta": {"enabled": True, "timeoutMs": None},
    }
    for secret in SECRETS.values():
        assert secret not in json.dumps(beta["entries"]["alpha"]) + json.dumps(gamma)
    assert await daemon.stop() == 0


async def test_a_trigger_cannot_replace_cfg_or_workspace_dir(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook
) -> None:
    write_hook(
        state_dir / "hooks",
        "alpha",
        events=["command:probe"],
        handler=recorder(keep=("cfg", "workspaceDir", "extra")),
    )
    daemon = await start_gateway(secret_config())
    async with daemon.control() as control:
        await control.ok(
            "trigger",
            event="command:probe",
            sessionKey="s",
            context={"workspaceDir": "/etc", "cfg": {"hooks": {}}, "extra": 1},
        )
    seen = read_records(state_dir)[0]["ctx"]
    assert seen["workspaceDir"] == str(state_dir / "workspace")
    assert seen["cfg"]["hooks"]["internal"]["entries"]["alpha"]["messages"] == 7
    assert seen["extra"] == 1  # the client's own keys still arrive
    assert await daemon.stop() == 0
