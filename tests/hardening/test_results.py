"""What a handler returns is merged only as its event's declared result fields, checked.

A handler that returns its whole event (``return event``, common at the end of an OpenClaw JS
handler) or its context must not turn the event into something else for the hooks after it,
nor carry the context (with the hook's own ``env`` in ``cfg``) into a ``trigger`` reply. A
decision result that is not JSON (circular, nested past the limit) or not of its field's type
(``params`` that is no object) is refused with ``hook.bad_result``: the runtime still gets a
decision, from the handlers whose results were good. A huge reason is bounded in the log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatewayd.hooks import create_hook_event
from gatewayd.hooks.results import MAX_DEPTH, merge_result
from gatewayd.hooks.schema import EVENTS, spec_for
from tests.node.node_support import WHEEL_NODE, write_js_hook
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

SECRET = "s3cret-env-value-71b9"

JS_RETURNS_EVENT = {
    "handler.js": """
        export default async (event) => {
          event.messages.push("js ran");
          return event;
        };
    """
}
PY_RETURNS_CONTEXT = """
async def handler(event):
    event.messages.append("py-ctx ran")
    return event.context
"""
PY_SEES = """
async def handler(event):
    event.messages.append("next sees " + type(event.context.get("timestamp")).__name__)
"""


def secret_entries(*keys: str) -> dict[str, Any]:
    return {"hooks": {"entries": {key: {"env": {"HOOK_TOKEN": SECRET}} for key in keys}}}


@pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")
def test_a_js_handler_returning_its_event_changes_nothing_and_leaks_no_env(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "returns-event", JS_RETURNS_EVENT, events=["message:received"])
    write_hook(hooks, "sees", events=["message:received"], handler=PY_SEES, meta={"priority": 500})
    daemon = start_daemon(secret_entries("returns-event"))
    with daemon.control() as ctl:
        reply = ctl.ok(
            "trigger",
            event="message:received",
            sessionKey="agent:main:r",
            context={"content": "hi", "timestamp": 1700000000000},
        )
    assert reply["messages"] == ["js ran", "next sees int"], reply
    assert SECRET not in json.dumps(reply), reply
    assert reply.get("result", {}) == {}, reply


def test_a_python_handler_returning_its_context_leaks_no_env(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(
        hooks,
        "returns-ctx",
        events=["agent:before_tool_call"],
        handler=PY_RETURNS_CONTEXT,
        meta={"priority": 1},
    )
    daemon = start_daemon(secret_entries("returns-ctx"))
    with daemon.control() as ctl:
        reply = ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:r",
            context={"toolName": "ls", "params": {"path": "/tmp"}},
        )
    assert SECRET not in json.dumps(reply), reply
    # Its params (a declared field, unchanged) are the only thing merged.
    assert reply["result"] == {"params": {"path": "/tmp"}}, reply


CIRCULAR = """
async def handler(event):
    params = {"path": "/"}
    params["self"] = params
    return {"params": params}
"""
DEEP = """
async def handler(event):
    params = {}
    inner = params
    for _ in range(200):
        inner["x"] = {}
        inner = inner["x"]
    return {"params": params}
"""
NOT_A_DICT = """
async def handler(event):
    return {"params": "notadict"}
"""
HUGE_REASON = """
async def handler(event):
    return {"block": True, "reason": "r" * 5_000_000}
"""
ALLOWS = """
async def handler(event):
    return {"params": {"path": "/safe"}}
"""


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (CIRCULAR, "contains itself"),
        (DEEP, "nested deeper than"),
        (NOT_A_DICT, "params: expected an object"),
    ],
    ids=["circular", "deep", "notadict"],
)
def test_a_bad_decision_result_is_refused_and_the_runtime_gets_a_decision(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path, source: str, why: str
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "allows", events=["agent:before_tool_call"], handler=ALLOWS)
    write_hook(
        hooks, "bad", events=["agent:before_tool_call"], handler=source, meta={"priority": 200}
    )
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok(
            "trigger",
            event="agent:before_tool_call",
            sessionKey="agent:main:d",
            context={"toolName": "rm", "params": {"path": "/"}},
        )
    assert reply["result"] == {"params": {"path": "/safe"}}, reply
    record = daemon.wait_log("hook.bad_result")
    assert record["hook"] == "bad" and why in record["error"], record


def test_a_huge_block_reason_is_bounded_in_the_log(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "huge", events=["agent:before_tool_call"], handler=HUGE_REASON)
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok(
            "trigger", event="agent:before_tool_call", sessionKey="agent:main:h", context={}
        )
    assert reply["result"]["block"] is True and len(reply["result"]["reason"]) == 5_000_000
    record = daemon.wait_log("hook.block")
    assert len(json.dumps(record)) < 4096, len(json.dumps(record))
    assert record["reason"].endswith("(5000000 characters)"), record["reason"][-80:]


# -- the merge itself, on any value a handler can return -------------------------------------

JSON_LEAF = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
KEYS = sorted({k for spec in EVENTS.values() for k in spec.results} | {"context", "timestamp"})
RETURNED = st.dictionaries(st.sampled_from([*KEYS, "blockReason", "type", "x"]), JSON, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(sorted(EVENTS)), values=st.lists(RETURNED, min_size=1, max_size=3))
def test_merged_results_are_declared_fields_of_their_declared_types(
    key: str, values: list[dict[str, Any]]
) -> None:
    etype, _, action = key.partition(":")
    event = create_hook_event(etype, action or "x", "s", {"content": "c", "timestamp": 5})
    before = dict(event.context)
    for value in values:
        merge_result(event, "h", value)
    spec = spec_for(event.key)
    declared = set(spec.results) if spec is not None else set()
    assert set(event.result or {}) <= declared
    json.dumps(event.result)  # always JSON: a reply can carry it
    # Only declared fields that are also context fields were written to the context.
    for name, value in event.context.items():
        if before.get(name) != value:
            assert name in declared, name
    assert event.context["timestamp"] == 5 or "timestamp" in declared


@settings(max_examples=100, deadline=None)
@given(depth=st.integers(min_value=1, max_value=3 * MAX_DEPTH))
def test_nesting_is_merged_up_to_the_limit_and_refused_past_it(depth: int) -> None:
    params: dict[str, Any] = {}
    inner = params
    for _ in range(depth - 1):
        inner["x"] = {}
        inner = inner["x"]
    event = create_hook_event("agent", "before_tool_call", "s", {})
    merge_result(event, "h", {"params": params})
    assert ("params" in (event.result or {})) is (depth <= MAX_DEPTH)


HUGE_INBOUND_BLOCK = """
async def handler(event):
    return {"block": True, "reason": "n" * 5_000_000}
"""


def test_a_huge_inbound_block_reason_is_bounded_in_every_log_line(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks", "guard", events=["message:received"], handler=HUGE_INBOUND_BLOCK
    )
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok("message", sessionKey="agent:main:b", text="hello")
    assert reply["blocked"] is True and len(reply["reason"]) == 5_000_000
    for event in ("hook.block", "message.blocked"):
        record = daemon.wait_log(event)
        assert len(json.dumps(record)) < 4096, (event, len(json.dumps(record)))


@pytest.mark.parametrize(
    ("key", "stop"), [("agent:before_tool_call", "block"), ("message:sending", "cancel")]
)
def test_a_handler_that_allows_cannot_keep_a_later_one_from_blocking(key: str, stop: str) -> None:
    """``{block: false}`` returned first once took the first-wins slot, and the later
    ``{block: true}`` was dropped: a permissive hook turned a guard off. A true block sticks
    (as OpenClaw's stickyTrue), with the blocking handler's reason."""
    etype, _, action = key.partition(":")
    event = create_hook_event(etype, action, "s", {"content": "c", "params": {}})
    merge_result(event, "permissive", {stop: False, "reason": "fine by me"})
    assert not event.halted
    merge_result(event, "guard", {stop: True, "reason": "not allowed"})
    assert event.halted
    assert event.result == {stop: True, "reason": "not allowed"}, event.result
    merge_result(event, "late", {stop: False, "reason": "too late"})
    assert event.result == {stop: True, "reason": "not allowed"}, event.result
