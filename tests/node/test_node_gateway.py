"""A JS hook's gateway handle: ``ctx.gateway`` (and ``gateway`` of "gatewayd/hooks"), as Python's.

Against a real gateway (in-process, over its control socket) and real Node: a JS hook sends to a
subscribed client later, after its call returned; a loop of JS hooks delivering to each other
stops at ``hooks.maxDepth`` and waiting on one's own session is an error, as for Python hooks;
outside a daemon each use fails saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks.engine import dispatching
from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.node import NodeHook, NodeRuntime
from gatewayd.hooks.node.gateway import CAUSES_KEPT, cause_of, remember_cause
from gatewayd.hooks.node.worker import NodeWorker
from tests.node.node_support import WHEEL_NODE, wheel_binary, with_runtime, write_js_hook
from tests.node.test_node_reload import say
from tests.support.control import AsyncControl
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook

pytestmark = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")

LATER = """
import { gateway } from "gatewayd/hooks";
export default (event, ctx) => {
  // After the call returned: from a timer, once through each form of the handle.
  setTimeout(async () => {
    const first = await ctx.gateway.send("agent:main:chat", `later ${event.sessionKey}`);
    await gateway.send("agent:main:chat", `then ${first}`, { channel: "js" });
  }, 200);
  event.messages.push("scheduled");
};
"""

AGAIN = """
import fs from "node:fs";
import path from "node:path";
export default async (event, ctx) => {
  fs.appendFileSync(path.join(process.env.ELIZA_STATE_DIR, "again.log"), event.sessionKey + "\\n");
  await ctx.gateway.deliver(event.sessionKey + "x", "/again more", { wait: false });
};
"""

SELF_WAIT = """
export default async (event, ctx) => {
  await ctx.gateway.deliver(event.sessionKey, "hello", { wait: true });
};
"""


async def read_stream(sub: AsyncControl, n: int) -> list[dict[str, Any]]:
    lines = [await sub.read() for _ in range(n)]
    assert all(line is not None for line in lines), f"stream closed after {lines}"
    return [line for line in lines if line is not None]


@pytest.mark.anyio
async def test_a_js_hook_sends_later_to_a_subscribed_client(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "later",
        events=["command:notify"],
        handler=LATER,
        handler_file="handler.js",
    )
    daemon = await start_gateway()
    async with daemon.control() as sub:
        await sub.send_raw(b'{"id": 1, "op": "subscribe", "sessionKey": "agent:main:chat"}\n')
        (ack,) = await read_stream(sub, 1)
        assert ack["subscribed"] == "agent:main:chat"
        async with daemon.control() as ctl:
            reply = await ctl.ok("message", sessionKey="s2", text="/notify")
        assert reply["messages"] == ["scheduled"]
        got = await read_stream(sub, 2)
    assert [m["content"] for m in got] == ["later s2", "then true"]


@pytest.mark.anyio
async def test_js_hooks_looping_through_the_gateway_stop_at_max_depth(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "again", events=["command:again"], handler=AGAIN, handler_file="handler.js")
    write_hook(
        hooks, "selfwait", events=["command:selfwait"], handler=SELF_WAIT, handler_file="handler.js"
    )
    daemon = await start_gateway({"hooks": {"maxDepth": 4}})
    async with daemon.control() as ctl:
        await ctl.ok("message", sessionKey="r", text="/again go")
        line = await daemon.wait_log("hook.error", hook="again", timeout=60)
        assert "hooks.maxDepth (4) reached" in line["error"]
        assert "command:again -> command:again" in line["error"]
        assert (await ctl.ok("message", sessionKey="w", text="/selfwait"))["messages"] == []
    assert "pass wait=False" in (await daemon.wait_log("hook.error", hook="selfwait"))["error"]
    assert len((state_dir / "again.log").read_text().split()) == 4


def test_outside_a_daemon_the_gateway_says_there_is_none(tmp_path: Path) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "lonely",
        {
            "handler.js": """
                export default async (event, ctx) => {
                  try { await ctx.gateway.send("s", "hi"); }
                  catch (err) { event.messages.push(err.message); }
                };
            """
        },
    )
    hook = NodeHook("lonely", hook_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> Any:
        generation, errors = await runtime.load(wheel_binary(), [hook])
        assert errors == {}
        runtime.activate(generation)
        return await say(hook)

    _, messages = with_runtime(body)
    assert messages == [
        "gateway.send: no gateway outside a running daemon (gatewayd hooks "
        "check, list and test import and run hooks without one)"
    ]


def test_a_call_older_than_the_kept_ones_has_no_cause() -> None:
    worker = NodeWorker(wheel_binary(), typescript=False, on_log=lambda *_: None)
    event = create_hook_event("command", "new", "s")
    token = dispatching.set(event)
    try:
        for call_id in range(1, CAUSES_KEPT + 11):
            remember_cause(worker, call_id)
    finally:
        dispatching.reset(token)
    assert cause_of(worker, CAUSES_KEPT + 10) is event
    assert cause_of(worker, 11) is event
    assert cause_of(worker, 10) is None  # its slot holds a later call
    assert cause_of(worker, None) is None
