"""Hooks that decide, against a real gateway (in-process, over its control socket): priority,
block and rewrite of inbound and outbound messages, the agent runtime's decision events,
send-later to a subscribed client, the re-entrancy bound and background hooks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gatewayd.transcript import read_messages
from tests.support.cli import gatewayd, off_loop
from tests.support.control import AsyncControl
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.state import eventually

pytestmark = pytest.mark.anyio


def transcript(state: Path) -> list[dict[str, Any]]:
    files = sorted((state / "sessions").glob("*.jsonl"))
    return [m for f in files for m in read_messages(f.read_text().splitlines())]


async def test_priority_orders_python_command_and_config_overrides(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    # Load order alone would be a-late, b-cmd, c-first; priorities say otherwise.
    write_hook(hooks, "a-late", events=["command:go"], meta={"priority": 300})
    write_hook(
        hooks,
        "b-cmd",
        events=["command:go"],
        handler="#!/bin/sh\necho b-cmd\n",
        handler_file="handler",
        meta={"priority": 50},
    )
    write_hook(hooks, "c-first", events=["command:go"], meta={"priority": 10})
    write_hook(hooks, "d-default", events=["command"])  # type-level, default 100
    daemon = await start_gateway({"hooks": {"entries": {"a-late": {"priority": 1}}}})
    async with daemon.control() as ctl:
        reply = await ctl.ok("message", sessionKey="s1", text="/go")
    # hooks.entries.a-late.priority (1) beats its HOOK.md (300).
    assert reply["messages"] == ["a-late", "c-first", "b-cmd", "d-default"]

    order = await off_loop(
        gatewayd, state_dir, "hooks", "order", "command:go", "--json", env={"PATH": "/usr/bin:/bin"}
    )
    assert order.returncode == 0, order.stderr
    listed = [h for h in json.loads(order.stdout)["handlers"] if h["source"] == "managed"]
    assert [(h["hook"], h["priority"], h["kind"]) for h in listed] == [
        ("a-late", 1, "async"),
        ("c-first", 10, "async"),
        ("b-cmd", 50, "command"),
        ("d-default", 100, "async"),
    ]


BLOCKER = """
async def handler(event):
    text = event.context["content"]
    if "secret" in text:
        return {"block": True, "reason": "contains a secret"}
    if text.startswith("/shout"):
        return {"content": text.upper().replace("/SHOUT", "/echo")}
"""

ECHO = """
async def handler(event):
    event.messages.append("echo " + event.context["args"])
"""

LATER = """
async def handler(event):
    event.messages.append("later saw " + event.context["content"])
"""


async def test_inbound_block_and_rewrite(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "guard", events=["message:received"], handler=BLOCKER, meta={"priority": 1})
    write_hook(hooks, "later", events=["message:received"], handler=LATER)
    write_hook(hooks, "echo", events=["command:echo"], handler=ECHO)
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        blocked = await ctl.ok("message", sessionKey="s1", text="my secret is 42")
        assert blocked["messages"] == []
        assert blocked["blocked"] is True and blocked["reason"] == "contains a secret"
        rewritten = await ctl.ok("message", sessionKey="s1", text="/shout hi")
    # The rewrite reached the later hook, the command parser and the transcript.
    assert rewritten["command"] == "echo"
    assert rewritten["messages"] == ["later saw /echo HI", "echo HI"]
    await eventually(lambda: len(transcript(state_dir)) >= 3, what="the transcript")
    users = [r["text"] for r in transcript(state_dir) if r.get("role") == "user"]
    assert users == ["/echo HI"]  # the blocked message is not recorded (hooks.recordBlocked)
    assert (await daemon.wait_log("message.blocked"))["reason"] == "contains a secret"
    send = await off_loop(gatewayd, state_dir, "send", "a secret", "--session", "s1")
    assert send.returncode == 0 and send.stdout == ""
    assert send.stderr == "blocked: contains a secret\n"


SENDING = """
async def handler(event):
    content = event.context["content"]
    if "password" in content:
        return {"cancel": True, "reason": "would leak"}
    return {"content": content.replace("darn", "d**n")}
"""

SENT_RECORDER = """
import json, os
def handler(event):
    c = event.context
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "sent.jsonl"), "a") as f:
        f.write(json.dumps({k: c.get(k) for k in ("content", "success", "reason")}) + "\\n")
"""

TALKER = """
async def handler(event):
    event.messages.extend(["oh darn", "the password is hunter2", "bye"])
"""


async def test_outbound_rewrite_and_cancel_and_what_message_sent_reports(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "filter", events=["message:sending"], handler=SENDING)
    write_hook(hooks, "sent", events=["message:sent"], handler=SENT_RECORDER)
    write_hook(hooks, "talker", events=["command:talk"], handler=TALKER)
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        reply = await ctl.ok("message", sessionKey="s1", text="/talk")
    assert reply["messages"] == ["oh d**n", "bye"]
    path = state_dir / "sent.jsonl"
    await eventually(lambda: path.exists() and len(path.read_text().splitlines()) == 3, what="sent")
    sent = [json.loads(line) for line in path.read_text().splitlines()]
    assert sent == [
        {"content": "oh d**n", "success": True, "reason": None},
        {"content": "the password is hunter2", "success": False, "reason": "would leak"},
        {"content": "bye", "success": True, "reason": None},
    ]
    assistant = [r["text"] for r in transcript(state_dir) if r.get("role") == "assistant"]
    assert assistant == ["oh d**n", "bye"]


TOOL_GUARD = """
async def handler(event):
    if event.context["toolName"] == "rm":
        return {"block": True, "blockReason": "rm is not allowed"}
"""

TOOL_PARAMS = """
def handler(event):
    params = dict(event.context["params"])
    params["safe"] = True
    return {"params": params}
"""

TOOL_AFTER = """
async def handler(event):
    # Sees the rewrite of the hook before it.
    return {"params": {**event.context["params"], "seen_safe": event.context["params"]["safe"]}}
"""

TOOL_NEVER = """
async def handler(event):
    return {"params": {"ran": "after a block"}}
"""

PREPEND = """
async def handler(event):
    return {{"prependContext": {text!r}}}
"""

SLOW = """
import asyncio
async def handler(event):
    await asyncio.sleep(30)
"""


async def test_decision_events_merge_results_in_priority_order(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(
        hooks, "guard", events=["agent:before_tool_call"], handler=TOOL_GUARD, meta={"priority": 1}
    )
    write_hook(hooks, "params", events=["agent:before_tool_call"], handler=TOOL_PARAMS)
    write_hook(
        hooks,
        "after",
        events=["agent:before_tool_call"],
        handler=TOOL_AFTER,
        meta={"priority": 200},
    )
    write_hook(
        hooks,
        "never",
        events=["agent:before_tool_call"],
        handler=TOOL_NEVER,
        meta={"priority": 999},
    )
    for name, text, prio in (("mem", "memory says hi", 20), ("rules", "be brief", 10)):
        write_hook(
            hooks,
            name,
            events=["agent:before_start"],
            handler=PREPEND.format(text=text),
            meta={"priority": prio},
        )
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        allowed = await ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:main",
            context={"toolName": "ls", "params": {"path": "/"}},
        )
        blocked = await ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:main",
            context={"toolName": "rm", "params": {"path": "/"}},
        )
        start = await ctl.ok(
            "trigger",
            event="agent:before_start",
            sessionKey="agent:main:main",
            context={"prompt": "hello"},
        )
    # `never` (priority 999) ran last in the allowed call and its rewrite won (last wins).
    assert allowed["result"] == {"params": {"ran": "after a block"}}
    assert "timedOut" not in allowed
    # The first block wins and ends the chain: no params hook ran after it.
    assert blocked["result"] == {"block": True, "reason": "rm is not allowed"}
    # prependContext is joined in priority order.
    assert start["result"] == {"prependContext": "be brief\n\nmemory says hi"}
    assert (await daemon.wait_log("hook.block"))["hook"] == "guard"


async def test_decision_event_deadline_returns_the_result_so_far(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "params", events=["agent:before_tool_call"], handler=TOOL_PARAMS)
    write_hook(
        hooks, "slow", events=["agent:before_tool_call"], handler=SLOW, meta={"priority": 500}
    )
    # The deadline is far past what the fast hook needs (300 ms was not always enough for a
    # sync handler's first thread on a loaded machine under coverage) and far short of the slow
    # hook's 30 s. drainTimeoutMs: the stop at the end does not wait that hook out either.
    config = {"hooks": {"decisionTimeoutMs": 3000}, "gateway": {"drainTimeoutMs": 200}}
    daemon = await start_gateway(config)
    began = time.monotonic()
    async with daemon.control() as ctl:
        reply = await ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:main",
            context={"toolName": "ls", "params": {}},
        )
        assert time.monotonic() - began < 25  # never waits the slow hook out (30 s)
        assert reply["timedOut"] is True
        assert reply["result"] == {"params": {"safe": True}}
        # The daemon still answers.
        assert (await ctl.ok("ping"))["pong"] is True


async def test_a_traced_decision_past_its_deadline_says_its_handlers_still_run(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    """``trace: true`` goes through the same path: the reply comes at the deadline, and its
    trace says the event is still running, not that the gateway stopped."""
    write_hook(state_dir / "hooks", "slow", events=["agent:before_tool_call"], handler=SLOW)
    config = {"hooks": {"decisionTimeoutMs": 300}, "gateway": {"drainTimeoutMs": 200}}
    daemon = await start_gateway(config)
    async with daemon.control() as ctl:
        reply = await ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:main",
            context={"toolName": "ls", "params": {}},
            trace=True,
        )
    assert reply["timedOut"] is True
    assert reply["trace"] == [
        {
            "event": "agent:before_tool_call",
            "handlers": [],
            "reason": "still running after hooks.decisionTimeoutMs (300 ms)",
        }
    ]


SENDER = """
async def handler(event, ctx):
    for i in range(5):
        ok = await ctx.gateway.send("agent:main:chat", f"update {i}")
        event.messages.append(f"{i}:{ok}")
"""


async def read_stream(sub: AsyncControl, n: int) -> list[dict[str, Any]]:
    """The next ``n`` lines the subscriber reads (each bounded by its 60 s timeout)."""
    lines = [await sub.read() for _ in range(n)]
    assert all(line is not None for line in lines), f"stream closed after {lines}"
    return [line for line in lines if line is not None]


async def test_send_later_reaches_a_subscribed_client_in_order(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "sender", events=["command:notify"], handler=SENDER)
    write_hook(hooks, "filter", events=["message:sending"], handler=SENDING)
    daemon = await start_gateway()
    # Nobody subscribed yet: send() says it was not delivered.
    async with daemon.control() as ctl:
        assert (await ctl.ok("message", sessionKey="s2", text="/notify"))["messages"] == [
            f"{i}:False" for i in range(5)
        ]
    async with daemon.control() as sub:
        await sub.send_raw(b'{"id": 1, "op": "subscribe", "sessionKey": "agent:main:chat"}\n')
        (ack,) = await read_stream(sub, 1)
        assert ack == {"id": 1, "ok": True, "subscribed": "agent:main:chat"}
        async with daemon.control() as ctl:
            reply = await ctl.ok("message", sessionKey="s2", text="/notify")
        assert reply["messages"] == [f"{i}:True" for i in range(5)]
        got = await read_stream(sub, 5)
    assert [m["content"] for m in got] == [f"update {i}" for i in range(5)]
    assert {m["sessionKey"] for m in got} == {"agent:main:chat"}
    async with daemon.control() as ctl:  # the subscriber left: the daemon carries on
        assert (await ctl.ok("ping"))["pong"] is True


AGAIN = """
import os
async def handler(event, ctx):
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "again.log"), "a") as f:
        f.write(event.session_key + "\\n")
    await ctx.gateway.deliver(event.session_key + "x", "/again more", wait=False)
"""

SELF_WAIT = """
async def handler(event, ctx):
    await ctx.gateway.deliver(event.session_key, "hello", wait=True)
"""


async def test_reentrancy_is_bounded_and_self_wait_is_an_error(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "again", events=["command:again"], handler=AGAIN)
    write_hook(hooks, "selfwait", events=["command:selfwait"], handler=SELF_WAIT)
    daemon = await start_gateway({"hooks": {"maxDepth": 4}})
    async with daemon.control() as ctl:
        await ctl.ok("message", sessionKey="r", text="/again go")
        line = await daemon.wait_log("hook.error", timeout=30)
        assert "hooks.maxDepth (4) reached" in line["error"]
        assert "command:again -> command:again" in line["error"]
        # A handler waiting on its own session: an error naming the fix, not a deadlock.
        began = time.monotonic()
        assert (await ctl.ok("message", sessionKey="w", text="/selfwait"))["messages"] == []
        assert time.monotonic() - began < 20
    # (waited for: the log line may still be on its way through the daemon's stderr)
    assert "pass wait=False" in (await daemon.wait_log("hook.error", hook="selfwait"))["error"]
    sessions = (state_dir / "again.log").read_text().split()
    assert len(sessions) == 4  # the chain stopped at the configured depth
    async with daemon.control() as ctl:
        assert (await ctl.ok("ping"))["pong"] is True


BACKGROUND = """
import asyncio, os, time
async def handler(event):
    await asyncio.sleep(1.5)
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "bg.log"), "a") as f:
        f.write(f"{event.key} {time.time()}\\n")
"""


async def test_a_background_hook_does_not_delay_the_reply(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(
        hooks, "heavy", events=["command:new"], handler=BACKGROUND, meta={"background": True}
    )
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        reply = await ctl.ok("message", sessionKey="bg", text="/new")
        replied = time.time()
        assert reply["command"] == "new"
    log = state_dir / "bg.log"
    await eventually(log.exists, what="the background hook")
    key, finished = log.read_text().split()
    assert key == "command:new"
    # It finished after the reply was sent: the reply did not wait for its 1.5 s sleep.
    assert float(finished) >= replied
