"""What batching the Node worker's channel could break, with real workers and real hook files.

Calls sent during one turn of the event loop go to the worker in one write and its answers come
back together: a call that times out in the middle of such a batch must fail alone (its late
reply dropped), a worker that dies with a batch in flight must fail each call in it with the
reason and lose nothing else (the queue's events all dispatched, each session's in order), and
what the channel sends once (a hook's ``cfg``) must still reach every call as its own copy.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.node import NodeHook, NodeRuntime
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.runners import Outcome
from gatewayd.triggers import TriggerQueue
from tests.node.node_support import WHEEL_NODE, wheel_binary, with_runtime, write_js_hook

pytestmark = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")

PACED = """
export default async (event) => {
  const { mode } = event.context;
  if (mode === "hang") await new Promise(() => {});
  if (mode === "late") await new Promise((r) => setTimeout(r, 400));
  event.messages.push(`done ${mode}`);
};
"""


async def load(runtime: NodeRuntime, *hooks: NodeHook) -> None:
    generation, errors = await runtime.load(wheel_binary(), list(hooks))
    assert errors == {}
    runtime.activate(generation)


def test_a_call_timing_out_in_the_middle_of_a_batch_fails_alone(tmp_path: Path) -> None:
    hook = NodeHook("paced", write_js_hook(tmp_path, "paced", {"handler.js": PACED}) / "handler.js")
    limits = {"first": 10.0, "hang": 0.3, "late": 0.1, "last": 10.0}

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        await load(runtime, hook)
        worker = runtime.workers[0]
        events = {mode: create_hook_event("command", "x", "s", {"mode": mode}) for mode in limits}
        outcomes: dict[str, Outcome] = {}

        async def run(mode: str) -> None:
            outcomes[mode] = await hook.run(events[mode], limits[mode])

        writes = worker.channel.writes
        async with anyio.create_task_group() as tg:
            for mode in limits:  # all four sent during one turn of the loop
                tg.start_soon(run, mode)
        sent = worker.channel.writes - writes
        await anyio.sleep(0.6)  # the late reply has come (and was dropped) by now
        after = create_hook_event("command", "x", "s", {"mode": "after"})
        outcomes["after"] = await hook.run(after, 10)
        return {
            "outcomes": outcomes,
            "messages": {mode: event.messages for mode, event in events.items()},
            "after": after.messages,
            "sent": sent,
            "same_worker": runtime.workers == [worker],
        }

    result = with_runtime(body)
    assert result["outcomes"] == {
        "first": Outcome.OK,
        "hang": Outcome.TIMEOUT,
        "late": Outcome.TIMEOUT,
        "last": Outcome.OK,
        "after": Outcome.OK,
    }
    # The timed-out calls changed nothing, the late one's reply included; the others did.
    assert result["messages"] == {
        "first": ["done first"],
        "hang": [],
        "late": [],
        "last": ["done last"],
    }
    assert result["after"] == ["done after"]
    # The first call went at once and the other three in one write; then a ping after each
    # timeout (the second may find the first's verdict still pending): 3 or 4, never 5 or 6.
    assert result["sent"] in (3, 4), result["sent"]
    assert result["same_worker"]  # the worker answered the ping: nothing was killed


CRASHER = """
import fs from "node:fs";
export default async (event) => {
  const { n, crash } = event.context;
  fs.appendFileSync(process.env.GATEWAYD_TEST_LOG, `${event.sessionKey} ${n}\\n`);
  if (crash) setTimeout(() => process.exit(3), 30);
  await new Promise((r) => setTimeout(r, crash ? 1000 : 60));
};
"""


def test_a_worker_dying_with_a_batch_in_flight_fails_each_call_and_loses_no_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions s0-s3, ten events each, through the trigger queue and the dispatcher; s0's
    fourth event's handler ends the worker while the other sessions' calls are in flight."""
    log = tmp_path / "ran.log"
    monkeypatch.setenv("GATEWAYD_TEST_LOG", str(log))
    hook = NodeHook(
        "crasher", write_js_hook(tmp_path, "crasher", {"handler.js": CRASHER}) / "handler.js"
    )
    sessions, per_session = 4, 10
    logged: list[MutableMapping[str, Any]] = []

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        await load(runtime, hook)
        first = runtime.workers[0].pid
        registry = HookRegistry(default_timeout_s=30.0)
        assert hook.handler is not None
        registry.set_file_hooks([(hook.handler, ["command:x"])])
        queue = TriggerQueue(256)
        dispatcher = Dispatcher(queue, registry, concurrency=sessions)
        with structlog.testing.capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                await tg.start(dispatcher.run)
                for n in range(per_session):
                    for s in range(sessions):
                        context = {"n": n, "crash": s == 0 and n == 3}
                        await queue.post(HookEvent("command", "x", f"s{s}", context=context))
                left = await dispatcher.drain(60.0)
        logged.extend(logs)
        return {
            "left": left,
            "dispatched": dispatcher.dispatched,
            "errors": dispatcher.errors,
            "restarted": runtime.workers[0].pid not in (None, first),
        }

    result = with_runtime(body)
    errors = [e for e in logged if e["event"] == "hook.error"]
    # Every accepted event was dispatched; the calls the crash caught failed, each with why.
    assert result["left"] == 0
    assert result["dispatched"] == sessions * per_session
    assert result["errors"] == len(errors) >= 1
    assert all("exited with code 3" in e["error"] for e in errors), errors
    assert any(e["session_key"] == "s0" for e in errors)
    assert result["restarted"]
    # Each session's events ran in post order, the crash's later ones in the new worker.
    ran: dict[str, list[int]] = {}
    for line in log.read_text().splitlines():
        key, n = line.split()
        ran.setdefault(key, []).append(int(n))
    for key, seen in ran.items():
        assert seen == sorted(seen), (key, seen)
    assert ran["s0"][-1] == per_session - 1
    # No event ran twice, and every one that did not fail ran.
    failed = {(e["session_key"]) for e in errors}
    for s in range(sessions):
        key = f"s{s}"
        assert len(set(ran[key])) == len(ran[key])
        if key not in failed:
            assert ran[key] == list(range(per_session)), (key, ran[key])


NUMBERS = """
export default (event) => {
  event.messages.push(JSON.stringify([event.context.x, event.context.y]));
};
"""


@pytest.mark.parametrize("opaque", [False, True], ids=["json", "with-opaque"])
def test_a_float_that_is_not_finite_reaches_js_as_null(tmp_path: Path, opaque: bool) -> None:
    """``json.dumps`` writes NaN and Infinity, which JSON.parse refuses: such a line once made
    the worker unable to read the rest of its channel."""
    hook = NodeHook(
        "numbers", write_js_hook(tmp_path, "numbers", {"handler.js": NUMBERS}) / "handler.js"
    )
    context: dict[str, Any] = {"x": math.nan, "y": math.inf}
    if opaque:  # a value JSON has no form for: the event is encoded value by value
        context["z"] = object()

    async def body(runtime: NodeRuntime) -> tuple[list[Outcome], list[str]]:
        await load(runtime, hook)
        event = create_hook_event("command", "x", "s", context)
        outcomes = [await hook.run(event, 10)]
        again = create_hook_event("command", "x", "s", {"x": 1, "y": 2})
        outcomes.append(await hook.run(again, 10))
        return outcomes, [*event.messages, *again.messages]

    outcomes, messages = with_runtime(body)
    assert outcomes == [Outcome.OK, Outcome.OK]
    assert messages == ["[null,null]", "[1,2]"]


CFG_READER = """
export default (event) => {
  const cfg = event.context.cfg;
  event.messages.push(JSON.stringify(cfg));
  cfg.hooks.flavor = "changed by the handler";
  cfg.extra = true;
};
"""


def test_each_call_gets_its_own_copy_of_a_cfg_sent_once(tmp_path: Path) -> None:
    hook = NodeHook(
        "cfg", write_js_hook(tmp_path, "cfg", {"handler.js": CFG_READER}) / "handler.js"
    )
    first = {"hooks": {"flavor": "mint"}}
    second = {"hooks": {"flavor": "lime"}}

    async def body(runtime: NodeRuntime) -> list[str]:
        await load(runtime, hook)
        seen: list[str] = []
        for cfg in (first, first, first, second, second):
            event = create_hook_event("command", "x", "s", {"cfg": cfg, "kept": 1})
            assert await hook.run(event, 10) is Outcome.OK
            assert event.context["cfg"] is cfg  # a handler's cfg is never taken back
            seen += event.messages
        return seen

    seen = with_runtime(body)
    assert seen == [
        '{"hooks":{"flavor":"mint"}}',
        '{"hooks":{"flavor":"mint"}}',
        '{"hooks":{"flavor":"mint"}}',
        '{"hooks":{"flavor":"lime"}}',
        '{"hooks":{"flavor":"lime"}}',
    ]
    assert first == {"hooks": {"flavor": "mint"}}
