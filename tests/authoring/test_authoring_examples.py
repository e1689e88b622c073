"""Every example hook of the author's guide (``docs/examples/*``) loaded by a real ``gatewayd run``
and fired through the control socket, checking the reply the guide documents.

The examples are copied under the daemon's state dir and listed in ``hooks.load.extraDirs``.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.cli import RunCli, ok
from tests.support.fixtures import StartDaemon
from tests.support.state import read_records, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
TESTED = {
    "audit-trail",
    "bootstrap-date",
    "deploy",
    "hello",
    "sh-ping",
    "shout",
    "slow-lookup",
    "welcome",
}
ENTRIES = {
    "welcome": {"greeting": "Hi from the docs"},
    "deploy": {"target": "staging", "env": {"DEPLOY_TOKEN": "not-a-real-token"}},
}


def copy_examples(state: Path) -> Path:
    root = state / "examples"
    for hook in EXAMPLES.iterdir():
        if (hook / "HOOK.md").is_file():
            shutil.copytree(hook, root / hook.name)
    return root


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.iterdir() if p.is_dir()} == TESTED
    guide = (EXAMPLES.parent / "hooks.md").read_text()
    for name in TESTED:
        assert f"examples/{name}" in guide, f"docs/hooks.md does not show the {name} example"


def test_examples_answer_as_documented(
    start_daemon: StartDaemon, state_dir: Path, run_cli: RunCli
) -> None:
    copy_examples(state_dir)
    (state_dir / "workspace").mkdir()
    (state_dir / "workspace" / "AGENTS.md").write_text("# Agents\n")
    gw = start_daemon(
        {
            "gateway": {"startupHookDelayMs": 0},
            "hooks": {"load": {"extraDirs": ["examples"]}, "entries": ENTRIES},
        },
        watch=True,
    )
    with gw.control() as control:
        hooks = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert {name: hooks[name]["status"] for name in TESTED} == dict.fromkeys(TESTED, "ready")
        assert {hooks[name]["source"] for name in TESTED} == {"extra"}

        def say(text: str, sender: str = "ada") -> list[str]:
            reply: list[str] = control.ok("message", sessionKey="docs", text=text, senderId=sender)[
                "messages"
            ]
            return reply

        assert say("hi") == ["Hi from the docs"]  # welcome: session:start of a new key
        assert say("/hello Ada") == ["Hello, Ada!"]
        assert say("/hello") == ["Hello, ada!"]
        assert say("/new") == ["Hi from the docs (a fresh session, after /new)"]
        assert say("/ping") == ["pong from sh-ping (command:ping, session docs)"]
        assert say("/shout hello world") == ["HELLO WORLD!"]
        assert say("/lookup cats") == ["cats: found"]
        assert say("/lookup slowpoke") == ["slowpoke: the lookup took too long, try again later"]
        assert say("/deploy v1.2.3") == ["deploying v1.2.3 to staging"]
        reply = control.ok("trigger", event="command:hello", sessionKey="t", context={"args": "Bo"})
        assert reply["messages"] == ["Hello, Bo!"]

        days = {datetime.now(UTC).date()}
        files = control.ok("bootstrap", sessionKey="docs")["bootstrapFiles"]
        days.add(datetime.now(UTC).date())
        agents = [f for f in files if f["name"] == "AGENTS.md"]
        assert [f["content"] for f in agents] in [
            [f"# Agents\n\nToday is {day:%Y-%m-%d} (UTC).\n"] for day in days
        ]

    def audit() -> list[dict[str, Any]]:
        return read_records(state_dir, "logs/audit-trail.jsonl")

    wait_until(lambda: any(r["content"] == "Hello, Ada!" for r in audit()), what="audit lines")
    lines = audit()
    assert {
        "event": "message:received",
        "sessionKey": "docs",
        "peer": "ada",
        "channelId": "control",
        "content": "/hello Ada",
    } in lines
    assert {
        "event": "message:sent",
        "sessionKey": "docs",
        "peer": "ada",
        "channelId": "control",
        "content": "Hello, Ada!",
    } in lines
    assert gw.events("hook.error") == [] and gw.events("hook.timeout") == []
    assert [r["word"] for r in gw.events("slow_lookup.deadline")] == ["slowpoke"]

    # Without its settings, deploy is ineligible and says why (as its HOOK.md documents); --local:
    # this process evaluates the bare config, not the running daemon with its own.
    bare = state_dir / "bare.yaml"
    bare.write_text(json.dumps({"hooks": {"load": {"extraDirs": ["examples"]}}}))
    info = json.loads(
        ok(run_cli("hooks", "info", "deploy", "--local", "--json", "--config", str(bare))).stdout
    )
    assert info["status"] == "ineligible"
    assert info["reasons"] == [
        "Env missing: DEPLOY_TOKEN",
        "Config missing: hooks.entries.deploy.target",
    ]
