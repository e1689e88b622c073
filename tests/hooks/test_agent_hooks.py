"""Hooks per agent and per subagent (gatewayd/hooks/agents.py, docs/hooks.md section 2.2).

Against a real gateway (in-process) with two configured agents, each with its own workspace: each
agent's workspace hooks answer only its sessions, shared hooks answer everyone unless they
restrict themselves (in HOOK.md or in the config), a subagent's session runs the subagent's
hooks instead of its agent's, an agent's hook replaces a shared one of the same plain name only
in its own scope, and a subagent's hooks dir created while the daemon runs is loaded live. The
rule itself (session keys, scopes, plans) is also checked in-process, where it is cheap to cover
every case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.config import ConfigError, load_config
from gatewayd.hooks.agents import AgentsSpec, HookScope, parse_session_key
from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.handlers import make_handler
from gatewayd.hooks.registry import HookRegistry
from tests.node.node_support import WHEEL_NODE
from tests.support.cli import RunCli, ok
from tests.support.fixtures import StartGateway
from tests.support.hooks import write_hook_dir
from tests.support.inprocess import InProcess
from tests.support.state import eventually_async, write_config

# Each hook answers a message with its name and what the event says about its agent.
SAYS = """
async def handler(event):
    c = event.context
    event.messages.append(
        f"NAME agent={c.get('agentId')} sub={c.get('subagentId')} ws={c.get('workspaceDir')}"
    )
"""


def says(name: str, hook_name: str | None = None) -> str:
    return SAYS.replace("NAME", hook_name or name)


def received(root: Path, name: str, *, said: str | None = None, **meta: Any) -> Path:
    """A ``message:received`` hook in ``root`` answering ``<said> agent=... sub=... ws=...``."""
    return write_hook_dir(
        root, name, events=["message:received"], handler=says(name, said), meta=meta or None
    )


async def lines(daemon: InProcess, session: str) -> dict[str, str]:
    """The reply to a message on ``session``: each hook's line by the word it starts with."""
    reply = (await daemon.send("hello", session=session))["messages"]
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in reply}


@pytest.fixture
def agents_setup(state_dir: Path) -> dict[str, Path]:
    """Two configured agents besides the default one, and hooks for all of them."""
    managed = state_dir / "hooks"
    main_ws = state_dir / "workspace"
    ops_ws = state_dir / "ws-ops"
    support_ws = state_dir / "workspace-support"  # its default location
    received(managed, "everyone")
    received(managed, "audit", said="shared-audit")
    received(managed, "ops-only", agents=["ops"])
    received(managed, "by-config")  # restricted to support by hooks.entries below
    received(main_ws / "hooks", "main-own")
    received(ops_ws / "hooks", "audit", said="ops-audit")
    received(support_ws / "hooks", "audit", said="support-audit")
    received(ops_ws / "subagents" / "researcher" / "hooks", "digest")
    write_config(
        state_dir,
        {
            "agents": {"ops": {"workspace": str(ops_ws)}, "support": {}},
            "hooks": {"entries": {"by-config": {"agents": ["support"]}}},
        },
    )
    return {"main": main_ws, "ops": ops_ws, "support": support_ws}


@pytest.mark.anyio
async def test_each_agents_hooks_answer_only_its_own_sessions(
    agents_setup: dict[str, Path], start_gateway: StartGateway
) -> None:
    daemon = await start_gateway()
    main_ws, ops_ws, support_ws = agents_setup["main"], agents_setup["ops"], agents_setup["support"]

    # A key that names no agent is the default agent's: shared hooks and main's own.
    assert await lines(daemon, "main") == {
        "everyone": f"agent=main sub=None ws={main_ws}",
        "shared-audit": f"agent=main sub=None ws={main_ws}",
        "main-own": f"agent=main sub=None ws={main_ws}",
    }
    # ops: its own audit replaces the shared one; ops-only is for it; main's hooks are not.
    assert await lines(daemon, "agent:ops:c1") == {
        "everyone": f"agent=ops sub=None ws={ops_ws}",
        "ops-only": f"agent=ops sub=None ws={ops_ws}",
        "ops-audit": f"agent=ops sub=None ws={ops_ws}",
    }
    # support: restricted by the config entry, its own audit from its default workspace.
    assert await lines(daemon, "agent:support:c1") == {
        "everyone": f"agent=support sub=None ws={support_ws}",
        "by-config": f"agent=support sub=None ws={support_ws}",
        "support-audit": f"agent=support sub=None ws={support_ws}",
    }
    # ops's subagent: its own hooks instead of ops's (so the shared audit again), and the
    # hooks restricted to ops still run: its events are ops's.
    assert await lines(daemon, "agent:ops:subagent:researcher:t1") == {
        "everyone": f"agent=ops sub=researcher ws={ops_ws}",
        "ops-only": f"agent=ops sub=researcher ws={ops_ws}",
        "shared-audit": f"agent=ops sub=researcher ws={ops_ws}",
        "digest": f"agent=ops sub=researcher ws={ops_ws}",
    }
    # An agent that is not configured is served by the default agent's hooks, under its id.
    assert await lines(daemon, "agent:guest:c1") == {
        "everyone": f"agent=guest sub=None ws={main_ws}",
        "shared-audit": f"agent=guest sub=None ws={main_ws}",
        "main-own": f"agent=guest sub=None ws={main_ws}",
    }
    # A subagent with no hooks dir of its own runs only the shared hooks.
    assert set(await lines(daemon, "agent:main:subagent:nobody:1")) == {"everyone", "shared-audit"}

    async with daemon.control() as ctl:
        hooks = {h["name"]: h for h in (await ctl.ok("hooks"))["hooks"]}
        status = (await ctl.ok("status"))["status"]
        traced = await ctl.ok("trigger", event="message:received", sessionKey="main", trace=True)
    # "Why didn't my hook fire?": the trace names the hooks that serve other agents.
    skipped = {h["hook"]: h["reason"] for h in traced["trace"][0]["handlers"] if "reason" in h}
    assert skipped["audit@ops"] == (
        "ready, but it belongs to ops, whose hooks serve only its sessions; the event is of "
        "agent 'main'"
    )
    assert skipped["ops-only"] == (
        "ready, but restricted to agents ops (its agents list); the event is of agent 'main'"
    )
    async with daemon.control() as ctl:
        traced = await ctl.ok(
            "trigger", event="message:received", sessionKey="agent:ops:t", trace=True
        )
    skipped = {h["hook"]: h["reason"] for h in traced["trace"][0]["handlers"] if "reason" in h}
    assert skipped["audit"] == "ready, but replaced by audit@ops for agent 'ops'"
    assert hooks["audit@ops"]["agent"] == "ops"
    assert hooks["audit@ops"]["hookKey"] == "audit@ops"
    assert hooks["digest@ops/researcher"]["subagent"] == "researcher"
    assert hooks["ops-only"]["agents"] == ["ops"]
    assert hooks["by-config"]["agents"] == ["support"]
    assert hooks["audit"]["status"] == "ready"  # replaced per scope, never shadowed
    assert hooks["audit@ops"]["stats"]["calls"] == 1
    assert hooks["audit"]["stats"]["calls"] == 4  # main, the subagents, guest
    agents = status["agents"]
    assert list(agents) == ["main", "ops", "support"]
    assert agents["main"]["default"] is True
    assert agents["ops"]["workspace"] == str(ops_ws)
    bundled = {h["name"] for h in hooks.values() if h["source"] == "bundled"}
    assert set(agents["ops"]["hooks"]) - bundled == {"audit@ops", "everyone", "ops-only"}
    assert agents["ops"]["subagents"] == {"researcher": ["digest@ops/researcher"]}
    assert set(agents["support"]["hooks"]) - bundled == {"audit@support", "by-config", "everyone"}
    assert set(agents["main"]["hooks"]) - bundled == {"audit", "everyone", "main-own"}


def test_hooks_list_by_agent(agents_setup: dict[str, Path], run_cli: RunCli) -> None:
    def names(*args: str) -> list[str]:
        listing = json.loads(ok(run_cli("hooks", "list", "--local", "--json", *args)).stdout)
        return sorted(h["name"] for h in listing["hooks"] if h["source"] != "bundled")

    assert names("--agent", "ops") == [
        "audit@ops",
        "digest@ops/researcher",
        "everyone",
        "ops-only",
    ]
    assert names("--agent", "main") == ["audit", "everyone", "main-own"]
    assert "audit@support" in names()
    text = ok(run_cli("hooks", "list", "--local", "--agent", "guest")).stdout
    assert "agent 'guest' is not in the config's agents (main, ops, support)" in text
    assert "main-own" in text and "audit@ops" not in text
    table = ok(run_cli("hooks", "list", "--local")).stdout
    assert "SERVES" in table
    row = next(line for line in table.splitlines() if "digest@ops/researcher" in line)
    assert "ops/researcher" in row.replace("digest@ops/researcher", "")


@pytest.mark.anyio
async def test_agent_and_subagent_hooks_reload_live(
    agents_setup: dict[str, Path], start_gateway: StartGateway
) -> None:
    daemon = await start_gateway(watch=True)
    ops_ws = agents_setup["ops"]
    # A subagent that had no hooks dir gets one: its sessions pick it up without a restart.
    received(ops_ws / "subagents" / "writer" / "hooks", "draft")

    async def drafts() -> bool:
        return "draft" in await lines(daemon, "agent:ops:subagent:writer:1")

    await eventually_async(drafts, what="the new subagent's hook to answer")
    # An edit of an agent's hook is live for that agent, and no other agent sees it.
    handler = ops_ws / "hooks" / "audit" / "handler.py"
    handler.write_text(says("audit", "ops-audit-v2"), encoding="utf-8")

    async def edited() -> bool:
        return "ops-audit-v2" in await lines(daemon, "agent:ops:c2")

    await eventually_async(edited, what="the edited ops hook to answer")
    assert "ops-audit-v2" not in await lines(daemon, "agent:support:c2")
    assert "shared-audit" in await lines(daemon, "main")


# -- the rule, in-process ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("agent:ops:main", ("ops", None)),
        ("agent:ops:subagent:res", ("ops", "res")),
        ("agent:ops:subagent:res:task:1", ("ops", "res")),
        ("agent:ops:subagent:", ("ops", None)),  # no id: an ordinary session named so
        ("agent:ops", ("main", None)),  # no rest: not an agent key
        ("agent::x", ("main", None)),
        ("main", ("main", None)),
        ("gateway:startup", ("main", None)),
        ("", ("main", None)),
    ],
)
def test_session_keys_name_their_agent(key: str, expected: tuple[str, str | None]) -> None:
    assert parse_session_key(key) == expected


def test_the_registry_plans_per_agent_scope() -> None:
    agents = AgentsSpec(default="main", workspaces={"ops": Path("/w/ops")})

    def hook(name: str, scope: HookScope) -> Any:
        def run(event: Any) -> None:
            event.messages.append(name)

        handler = make_handler(run, hook=name)
        handler.source, handler.scope = "managed", scope
        return handler

    registry = HookRegistry()
    registry.agents = agents
    registry.set_file_hooks(
        (h, ["message:received"])
        for h in (
            hook("shared", HookScope()),
            hook("audit", HookScope()),
            hook("main-own", HookScope(agent="main")),
            hook("audit@ops", HookScope(agent="ops", replaces="audit")),
            hook("only-ops", HookScope(agents=frozenset({"ops"}))),
            hook("sub@ops/res", HookScope(agent="ops", subagent="res")),
        )
    )

    def ran(session: str) -> list[str]:
        event = create_hook_event("message", "received", session)
        anyio.run(registry.dispatch, event)
        return event.messages

    assert ran("main") == ["shared", "audit", "main-own"]
    assert ran("agent:ops:1") == ["shared", "audit@ops", "only-ops"]
    assert ran("agent:ops:subagent:res:1") == ["shared", "audit", "only-ops", "sub@ops/res"]
    assert ran("agent:other:1") == ["shared", "audit", "main-own"]
    assert registry.plan("message", "message:received", "agent:ops:1")[1].hook == "audit@ops"
    assert [h.hook for h in registry.plan("message", "message:received")] == [
        "shared",
        "audit",
        "main-own",
    ]


def test_agents_config_problems_name_the_key(state_dir: Path) -> None:
    def problems(config: dict[str, Any]) -> str:
        write_config(state_dir, config)
        with pytest.raises(ConfigError) as caught:
            load_config()
        return str(caught.value)

    assert "agents.ops:x: an agent id is letters, digits" in problems({"agents": {"ops:x": {}}})
    assert "agents: a, b all say default: true; keep it on one agent" in problems(
        {"agents": {"a": {"default": True}, "b": {"default": True}}}
    )
    assert "agents.main.workspace: the default agent's workspace is also set as workspace.dir" in (
        problems({"workspace": {"dir": "/w/a"}, "agents": {"main": {"workspace": "/w/b"}}})
    )
    assert "agents.ops.workspace: " in problems({"agents": {"ops": {"workspace": "workspace"}}})
    assert "is already the hooks dir of the default agent 'main' (workspace.dir); give each" in (
        problems({"agents": {"ops": {"workspace": "workspace"}}})
    )
    assert "is already the hooks dir of the managed hooks dir" in problems(
        {"agents": {"ops": {"workspace": "."}}}
    )
    assert "is already the hooks dir of agent 'a'" in problems(
        {"agents": {"a": {"workspace": "shared"}, "b": {"workspace": "shared"}}}
    )
    write_config(state_dir, {"agents": {"eve": {"default": True, "workspace": "eve-ws"}, "x": {}}})
    config = load_config()
    assert config.agents.default == "eve"
    assert config.paths.workspace == state_dir / "eve-ws"
    assert config.agents.workspaces == {"x": state_dir / "workspace-x"}


def test_hooks_order_for_a_session(agents_setup: dict[str, Path], run_cli: RunCli) -> None:
    def order(*args: str) -> list[str]:
        result = ok(run_cli("hooks", "order", "message:received", "--json", *args))
        shown = json.loads(result.stdout)
        return [h["hook"] for h in shown["handlers"]]

    default, ops = order(), order("--session", "agent:ops:c1")
    assert "main-own" in default and "audit" in default and "audit@ops" not in default
    assert "audit@ops" in ops and "audit" not in ops and "main-own" not in ops
    sub = order("--session", "agent:ops:subagent:researcher:1")
    assert "digest@ops/researcher" in sub and "audit@ops" not in sub


NOTES_PY = """
from gatewayd.hooks import define_hook


def noted(event, ctx):
    c = event.context
    event.messages.append(f"notes agent={ctx.agent.name} sub={c.get('subagentId')} ws=-")


hook = define_hook(events={"message.received": noted})
"""
PLAN_TS = """
import { defineHook } from "gatewayd/hooks";

type Ctx = { agent: { name: string } };
type Event = { context: Record<string, unknown>; messages: string[] };

export default defineHook({
  events: {
    "message.received": (event: Event, ctx: Ctx) => {
      event.messages.push(`plan agent=${ctx.agent.name} sub=${event.context.subagentId} ws=-`);
    },
  },
});
"""


@pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra (Node 24)")
@pytest.mark.anyio
async def test_single_file_hooks_of_an_agent_and_a_subagent(
    agents_setup: dict[str, Path], start_gateway: StartGateway
) -> None:
    ops_ws = agents_setup["ops"]
    (ops_ws / "hooks" / "notes.py").write_text(NOTES_PY, encoding="utf-8")
    sub_hooks = ops_ws / "subagents" / "researcher" / "hooks"
    (sub_hooks / "plan.ts").write_text(PLAN_TS, encoding="utf-8")
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        hooks = {h["name"]: h for h in (await ctl.ok("hooks"))["hooks"]}
    assert hooks["notes@ops"]["status"] == "ready", hooks["notes@ops"]
    assert hooks["plan@ops/researcher"]["status"] == "ready", hooks["plan@ops/researcher"]
    ops = await lines(daemon, "agent:ops:c1")
    assert ops["notes"] == "agent=ops sub=None ws=-" and "plan" not in ops
    sub = await lines(daemon, "agent:ops:subagent:researcher:1")
    assert sub["plan"] == "agent=ops sub=researcher ws=-" and "notes" not in sub
    main = await lines(daemon, "main")
    assert "notes" not in main and "plan" not in main


@pytest.mark.anyio
async def test_an_agent_added_to_the_config_gets_its_hooks_live(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    ops_ws = state_dir / "ws-ops"
    received(state_dir / "workspace" / "hooks", "main-own")
    received(ops_ws / "hooks", "audit", said="ops-audit")
    daemon = await start_gateway({}, watch=True)
    # Not configured yet: ops's sessions are the default agent's.
    assert set(await lines(daemon, "agent:ops:c1")) == {"main-own"}
    write_config(state_dir, {"agents": {"ops": {"workspace": str(ops_ws)}}})

    async def own() -> bool:
        return set(await lines(daemon, "agent:ops:c1")) == {"ops-audit"}

    await eventually_async(own, what="the config's new agent to get its own hooks")
    agent = (await lines(daemon, "agent:ops:c1"))["ops-audit"]
    assert agent == f"agent=ops sub=None ws={ops_ws}"
    assert set(await lines(daemon, "main")) == {"main-own"}
