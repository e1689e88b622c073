"""The asynchronous client (:class:`gatewayd.client.Client`) against a real ``gatewayd run``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

import gatewayd
from gatewayd.client import (
    Client,
    ConnectionLost,
    GatewayError,
    NotRunning,
    RequestTimeout,
    UnknownEvent,
    UnsupportedProtocol,
    wire,
)
from tests.support.daemon import Daemon
from tests.support.fixtures import NewDaemon, StartDaemon
from tests.support.hooks import WriteHook

pytestmark = pytest.mark.anyio

GUARD = """
async def handler(event):
    if event.context.get("toolName") == "rm":
        return {"block": True, "reason": "no rm"}
    return {"params": {**event.context.get("params", {}), "checked": True}}
"""

ECHO = """
async def handler(event):
    event.messages.append("echo: " + event.context.get("content", event.context.get("say", "")))
"""

SLOW = """
import asyncio

ACTIVE = [0, 0]  # now, most at once

async def handler(event):
    if event.action == "peak":
        event.messages.append(str(ACTIVE[1]))
        return
    ACTIVE[0] += 1
    ACTIVE[1] = max(ACTIVE)
    await asyncio.sleep(float(event.context.get("seconds", 0.3)))
    ACTIVE[0] -= 1
    event.messages.append("slept")
"""

SAY = """
async def handler(event, ctx):
    await ctx.gateway.send(event.context["to"], event.context["text"])
"""

SESSION = "agent:main:main"


@pytest.fixture
def hooks(write_hook: WriteHook, state_dir: Path) -> None:
    root = state_dir / "hooks"
    write_hook(root, "guard", events=["agent:before_tool_call"], handler=GUARD)
    write_hook(root, "echo", events=["message:received", "command:echo"], handler=ECHO)
    write_hook(root, "slow", events=["command:slow", "command:peak"], handler=SLOW)
    write_hook(root, "say", events=["command:say"], handler=SAY)


@pytest.fixture
def daemon(hooks: None, start_daemon: StartDaemon) -> Iterator[Daemon]:
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    yield daemon
    assert daemon.stop() == 0


@pytest.fixture
async def gw(daemon: Daemon) -> AsyncIterator[Client]:
    async with Client(str(daemon.socket)) as client:
        yield client


async def test_the_handshake_and_every_op(gw: Client, daemon: Daemon) -> None:
    assert gw.info is not None
    assert gw.info["daemon"] == {"name": "gatewayd", "version": gatewayd.__version__}
    assert "agent:before_tool_call" in gw.info["decisions"]
    await gw.ping()
    reply = await gw.message(SESSION, "hello", sender_id="u1", channel="chat")
    assert reply == {"messages": ["echo: hello"], "command": None}
    assert (await gw.trigger("command:echo", "s", {"say": "yo"}))["messages"] == ["echo: yo"]
    assert await gw.trigger("command:echo", "s", {"say": "later"}, wait=False) == {"queued": True}
    blocked = await gw.decide("agent:before_tool_call", SESSION, {"toolName": "rm", "params": {}})
    assert blocked["result"] == {"block": True, "reason": "no rm"}
    allowed = await gw.decide(
        "agent:before_tool_call", SESSION, {"toolName": "ls", "params": {"path": "/"}}
    )
    assert allowed["result"] == {"params": {"path": "/", "checked": True}}
    assert (await gw.status())["pid"] == daemon.proc.pid
    assert {h["name"] for h in (await gw.hooks())["hooks"]} >= {"guard", "echo", "slow"}
    assert (await gw.reload())["outcome"] == "ok"
    assert "events" in await gw.events("list", limit=5)
    tested = await gw.test("echo", event="command:echo", context={"say": "t"})
    assert tested["passed"] and tested["messages"] == ["echo: t"]
    files = await gw.bootstrap(SESSION)
    assert all(set(f) >= {"name", "path", "missing"} for f in files), files


async def test_refusals_are_typed_errors_with_the_daemons_code(gw: Client) -> None:
    with pytest.raises(UnknownEvent) as refused:
        await gw.trigger("nope:x", "s")
    assert refused.value.code == "unknown_event"
    assert "unknown event type 'nope'" in refused.value.message
    assert str(refused.value).endswith("[unknown_event]")
    with pytest.raises(GatewayError, match="must not be empty") as empty:
        await gw.message(" ", "hi")
    assert empty.value.code == "bad_request"
    await gw.ping()  # the connection carries on


async def test_many_requests_in_flight_share_one_connection(gw: Client, daemon: Daemon) -> None:
    replies: dict[int, object] = {}

    async def post(n: int) -> None:
        replies[n] = await gw.trigger("command:echo", f"s{n % 7}", {"say": str(n)}, wait=False)

    async with anyio.create_task_group() as tg:
        for n in range(600):
            tg.start_soon(post, n)
    assert replies == {n: {"queued": True} for n in range(600)}
    channels = (await gw.status())["channels"]
    assert channels[0]["connections"] == 1


async def test_the_in_flight_window_bounds_what_one_client_holds(daemon: Daemon) -> None:
    async with Client(str(daemon.socket), max_in_flight=2) as gw:
        async with anyio.create_task_group() as tg:
            for n in range(5):  # five sessions: the daemon would run them all at once
                tg.start_soon(gw.trigger, "command:slow", f"w{n}", {"seconds": 0.2})
        peak = await gw.trigger("command:peak", "w")
    assert peak["messages"] == ["2"]


async def test_a_call_past_its_timeout_raises_and_the_connection_carries_on(
    daemon: Daemon,
) -> None:
    async with Client(str(daemon.socket), wait_timeout=1.0) as gw:
        with pytest.raises(RequestTimeout, match=r"no reply to trigger within 1 s"):
            await gw.trigger("command:slow", "t", {"seconds": 2.5})
        await gw.ping()
        await anyio.sleep(2)  # the late reply comes meanwhile: nobody waits for it any more
        assert (await gw.status())["pid"] == daemon.proc.pid


async def test_a_restarted_daemon_is_reached_again(hooks: None, new_daemon: NewDaemon) -> None:
    config = {"hooks": {"entries": {"command-logger": {"enabled": False}}}}
    first = new_daemon(config).start()
    async with Client(str(first.socket), quick_timeout=2) as gw:
        await gw.ping()
        assert await anyio.to_thread.run_sync(first.stop) == 0
        with pytest.raises((ConnectionLost, NotRunning)) as down:
            await gw.ping()  # in flight as it went away, or no daemon to reconnect to
        assert "gatewayd" in str(down.value)
        second = await anyio.to_thread.run_sync(new_daemon(config).start)
        with anyio.fail_after(30):
            status = await gw.status()  # reconnects, with a growing pause
        assert status["pid"] == second.proc.pid
        assert await anyio.to_thread.run_sync(second.stop) == 0


async def test_subscribe_yields_what_hooks_send_and_survives_a_restart(
    hooks: None, new_daemon: NewDaemon
) -> None:
    config = {"hooks": {"entries": {"command-logger": {"enabled": False}}}}
    first = new_daemon(config).start()
    target = "agent:main:room"
    async with Client(str(first.socket)) as gw, gw.subscribe(target) as messages:
        await gw.trigger("command:say", "s", {"to": target, "text": "one"})
        assert await anext(messages) == {"event": "message", "sessionKey": target, "content": "one"}
        assert await anyio.to_thread.run_sync(first.stop) == 0
        second = await anyio.to_thread.run_sync(new_daemon(config).start)

        async def say_until_heard() -> None:
            with anyio.fail_after(30):
                while True:  # until the subscription is back: sent before, nobody heard it
                    await gw.trigger("command:say", "s", {"to": target, "text": "two"})
                    await anyio.sleep(0.1)

        async with anyio.create_task_group() as tg:
            tg.start_soon(say_until_heard)
            with anyio.fail_after(30):
                heard = await anext(messages)
            tg.cancel_scope.cancel()
        assert heard["content"] == "two"
        assert await anyio.to_thread.run_sync(second.stop) == 0


async def test_a_protocol_the_daemon_does_not_serve_names_what_to_upgrade(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "PROTOCOL", 2)
    with pytest.raises(UnsupportedProtocol) as refused:
        async with Client(str(daemon.socket)):
            pass
    assert "upgrade gatewayd to a release that serves protocol 2" in str(refused.value)


async def test_no_daemon_is_not_running_with_the_socket_named(state_dir: Path) -> None:
    missing = state_dir / "run" / "gatewayd.sock"
    with pytest.raises(NotRunning) as refused:
        async with Client():
            pass
    assert str(refused.value) == f"gatewayd is not running (no socket at {missing})"


def test_the_typed_decisions_follow_the_event_schema() -> None:
    """The result fields the client types for a decision event are the schema's, so the two
    cannot drift."""
    from typing import get_args

    from gatewayd.client import types
    from gatewayd.hooks.schema import DECISION_EVENTS, EVENTS

    results = {
        "message:received": types.InboundDecision,
        "message:sending": types.OutboundDecision,
        "agent:before_start": types.StartDecision,
        "agent:before_tool_call": types.ToolCallDecision,
        "agent:tool_result_persist": types.PersistDecision,
    }
    assert set(results) == set(get_args(types.DecisionEvent)) <= DECISION_EVENTS
    for event, result in results.items():
        assert set(result.__annotations__) == set(EVENTS[event].results), (
            f"gatewayd/client/types.py: {result.__name__} must have the result fields of "
            f"{event} in gatewayd/hooks/schema.py"
        )


def test_the_command_line_gets_the_same_errors(daemon: Daemon) -> None:
    from gatewayd.client import SyncClient, UnknownEvent

    with SyncClient(str(daemon.socket)) as client:
        assert client.hello()["protocol"] == wire.PROTOCOL
        with pytest.raises(UnknownEvent):
            client.call("trigger", {"event": "nope:x", "sessionKey": "s"})
        assert json.dumps(client.call("ping")) == '{"pong": true}'
