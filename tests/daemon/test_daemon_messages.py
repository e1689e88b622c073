"""The message path over a real gateway (in-process, through the control socket): event order,
commands, sessions, replies, bootstrap."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.transcript import read_messages
from tests.support.control import AsyncControl
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook, recorder
from tests.support.state import eventually, eventually_async, read_records, session_table

pytestmark = pytest.mark.anyio

KEEP = (
    "from",
    "content",
    "channelId",
    "sessionKey",
    "timestamp",
    "sessionEntry",
    "previousSessionEntry",
    "sessionId",
    "sessionFile",
    "commandSource",
    "senderId",
    "args",
    "workspaceDir",
    "to",
    "reason",
    "agentId",
    "conversationId",
    "messageId",
    "metadata",
    "success",
    "error",
)

pytestmark = pytest.mark.anyio


def _order_hooks(write_hook: WriteHook, hooks: Path) -> None:
    # Replies with the event key, so the reply itself shows the dispatch order.
    write_hook(
        hooks,
        "order",
        events=["message:received", "session", "command", "agent:bootstrap"],
        handler=recorder(keep=KEEP, reply="event.messages.append(event.key)"),
    )
    write_hook(hooks, "sent", events=["message:sent"], handler=recorder("sent.jsonl", keep=KEEP))


async def _send(control: AsyncControl, text: str, key: str = "agent:main:main") -> dict[str, Any]:
    return await control.ok("message", sessionKey=key, text=text, senderId="alice", channel="test")


async def test_new_and_reset_event_order_reply_and_sessions(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    _order_hooks(write_hook, state_dir / "hooks")
    daemon = await start_gateway()
    async with daemon.control() as control:
        first = await _send(control, "hello")
        assert first["command"] is None
        assert first["messages"] == ["message:received", "session:start", "agent:bootstrap"]

        new = await _send(control, "/new fresh start")
        assert new["command"] == "new"
        assert new["messages"] == [
            "message:received",
            "session:end",
            "command:new",
            "session:start",
            "agent:bootstrap",
        ]
        reset = await _send(control, "/reset")
        assert reset["command"] == "reset"
        assert reset["messages"] == [
            *new["messages"][:2],
            "command:reset",
            "session:start",
            "agent:bootstrap",
        ]
        stop = await _send(control, "/stop")
        assert (stop["command"], stop["messages"]) == ("stop", ["message:received", "command:stop"])
        deploy = await _send(control, "/deploy prod  now")
        assert deploy["command"] == "deploy"
        assert deploy["messages"] == ["message:received", "command:deploy"]
        not_a_command = await _send(control, "/Deploy or /x")
        assert not_a_command["command"] is None

        # /new on a session key that never had a session: no session:end.
        other = await _send(control, "/new", key="other")
        assert other["messages"] == [
            "message:received",
            "command:new",
            "session:start",
            "agent:bootstrap",
        ]
        status = (await control.ok("status"))["status"]
        assert status["sessions"] == 2

    records = read_records(state_dir)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_key.setdefault(r["key"], []).append(r)

    received = by_key["message:received"][0]["ctx"]
    assert received["from"] == "alice"
    assert received["content"] == "hello"
    assert received["channelId"] == "test"
    assert received["sessionKey"] == "agent:main:main"
    # OpenClaw's message context: epoch milliseconds, agentId, conversationId, messageId.
    assert isinstance(received["timestamp"], int)
    assert abs(received["timestamp"] / 1000 - time.time()) < 3600
    assert received["agentId"] == "main"
    assert received["conversationId"] == "agent:main:main"
    assert len(received["messageId"]) == 32
    assert received["metadata"] == {"provider": "test", "surface": "test", "senderId": "alice"}

    starts = [r["ctx"] for r in by_key["session:start"]]
    first_id, second_id, third_id = (s["sessionId"] for s in starts[:3])
    assert len({first_id, second_id, third_id}) == 3
    ended = by_key["session:end"][0]["ctx"]
    assert ended["sessionId"] == first_id
    assert ended["reason"] == "new"

    cmd_new = by_key["command:new"][0]["ctx"]
    assert cmd_new["previousSessionEntry"]["sessionId"] == first_id
    assert cmd_new["sessionEntry"]["sessionId"] == first_id
    assert cmd_new["sessionId"] == first_id
    assert cmd_new["sessionFile"] == str(state_dir / "sessions" / f"{first_id}.jsonl")
    assert cmd_new["args"] == "fresh start"
    assert cmd_new["commandSource"] == "test"
    assert cmd_new["senderId"] == "alice"
    assert cmd_new["workspaceDir"] == str(state_dir / "workspace")
    assert by_key["command:reset"][0]["ctx"]["previousSessionEntry"]["sessionId"] == second_id
    assert by_key["command:deploy"][0]["ctx"]["args"] == "prod  now"
    stop_ctx = by_key["command:stop"][0]["ctx"]
    assert stop_ctx["sessionId"] == third_id and stop_ctx["previousSessionEntry"] is None
    fresh = next(r for r in by_key["command:new"] if r["session"] == "other")["ctx"]
    assert fresh["previousSessionEntry"] is None and fresh["sessionEntry"] is None

    # The transcript of the first session: the message and its reply.
    lines = (state_dir / "sessions" / f"{first_id}.jsonl").read_text().splitlines()
    header = json.loads(lines[0])  # OpenClaw's session header, then its message entries
    assert header | {"timestamp": None} == {
        "type": "session",
        "version": 4,
        "id": first_id,
        "timestamp": None,
        "cwd": str(state_dir / "workspace"),
    }
    transcript = list(read_messages(lines))
    assert [(t["role"], t["text"]) for t in transcript] == [
        ("user", "hello"),
        ("assistant", "message:received"),
        ("assistant", "session:start"),
        ("assistant", "agent:bootstrap"),
    ]
    index = session_table(state_dir)
    assert index["agent:main:main"]["sessionId"] == third_id
    assert set(index) == {"agent:main:main", "other"}

    # Every reply line delivered fired message:sent.
    total_replies = sum(
        len(r["messages"]) for r in (first, new, reset, stop, deploy, not_a_command, other)
    )
    await eventually(
        lambda: len(read_records(state_dir, "sent.jsonl")) >= total_replies,
        what="message:sent events",
    )
    sent = read_records(state_dir, "sent.jsonl")
    assert len(sent) == total_replies
    assert sent[0]["ctx"]["to"] == "alice"
    assert sent[0]["ctx"]["content"] == "message:received"
    assert sent[0]["ctx"]["channelId"] == "test"
    assert await daemon.stop() == 0

    # Sessions survive a restart: no session:start for a known key.
    before = len(read_records(state_dir))
    again = await start_gateway()
    async with again.control() as control:
        assert (await _send(control, "still here"))["messages"] == ["message:received"]
    assert [r["key"] for r in read_records(state_dir)[before:]] == ["message:received"]
    lines = (state_dir / "sessions" / f"{third_id}.jsonl").read_text().splitlines()
    user, reply = json.loads(lines[-2]), json.loads(lines[-1])
    assert reply["parentId"] == user["id"]  # the new run goes on from the last entry
    assert user["parentId"] == json.loads(lines[-3])["id"]
    assert user["message"] | {"timestamp": None} == {
        "role": "user",
        "content": [{"type": "text", "text": "still here"}],
        "senderId": "alice",
        "channel": "test",
        "timestamp": None,
    }
    assert await again.stop() == 0


async def _has_reply(control: AsyncControl, wait_s: float) -> bool:
    """Whether a reply comes within ``wait_s`` (one that does is read: the test fails on it)."""
    with anyio.move_on_after(wait_s):
        await control.read()
        return True
    return False


async def test_per_session_order_under_concurrency(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "stepper",
        events=["command:step"],
        handler=recorder(keep=("n",), before="await asyncio.sleep(random.random() / 500)").replace(
            "import asyncio", "import asyncio, random"
        ),
    )
    daemon = await start_gateway({"gateway": {"queue": {"capacity": 32, "concurrency": 4}}})
    sessions, per_session = 8, 60
    clients = [await daemon.control().connect() for _ in range(sessions)]
    for s, control in enumerate(clients):
        await control.send_raw(
            b"".join(
                json.dumps(
                    {
                        "id": n,
                        "op": "trigger",
                        "event": "command:step",
                        "sessionKey": f"lane-{s}",
                        "context": {"n": n},
                        "wait": n % 10 == 0,
                    }
                ).encode()
                + b"\n"
                for n in range(per_session)
            )
        )
    for control in clients:
        for _ in range(per_session):
            reply = await control.read()
            assert reply is not None and reply["ok"], reply
        await control.aclose()
    # The records themselves, not the dispatched count (which gateway:startup is part of).
    await eventually(
        lambda: len(read_records(state_dir)) >= sessions * per_session,
        what="every step recorded",
    )
    seen: dict[str, list[int]] = {}
    for record in read_records(state_dir):
        seen.setdefault(record["session"], []).append(record["ctx"]["n"])
    assert set(seen) == {f"lane-{s}" for s in range(sessions)}
    for lane, ns in seen.items():
        assert ns == list(range(per_session)), f"{lane} out of order: {ns}"
    assert await daemon.stop() == 0


async def test_slow_hook_delays_only_its_own_session(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    release = state_dir / "release"
    write_hook(
        state_dir / "hooks",
        "gate",
        events=["command:slow", "command:quick"],
        handler=f"""
import asyncio, os

async def handler(event):
    if event.action == "slow":
        for _ in range(3000):  # at most 30 s
            if os.path.exists({str(release)!r}):
                break
            await asyncio.sleep(0.01)
    event.messages.append(event.action + " " + event.session_key)
""",
    )
    daemon = await start_gateway({"hooks": {"timeoutMs": 60000}})
    slow, same, other, daemon_status = [await daemon.control().connect() for _ in range(4)]
    # Pipelined behind a ping: the ping's reply must not wait for the slow one.
    await slow.send_raw(
        b'{"id": 0, "op": "ping"}\n'
        b'{"id": 1, "op": "trigger", "event": "command:slow", "sessionKey": "A"}\n'
    )
    assert await slow.read() == {"id": 0, "ok": True, "pong": True}

    async def started() -> bool:
        return bool((await daemon_status.ok("status"))["status"]["queue"]["sessions"] == 1)

    await eventually_async(started, what="the slow event to start")
    await same.send_raw(
        b'{"id": 2, "op": "trigger", "event": "command:quick", "sessionKey": "A"}\n'
    )
    # Another session is not held up by session A's slow hook...
    quick = await other.ok("trigger", event="command:quick", sessionKey="B")
    assert quick["messages"] == ["quick B"]
    # ...while A's next event waits behind its slow one, in order.
    assert not await _has_reply(slow, 0.3)
    assert not await _has_reply(same, 0.05)
    release.touch()
    assert await slow.read() == {"id": 1, "ok": True, "messages": ["slow A"]}
    assert await same.read() == {"id": 2, "ok": True, "messages": ["quick A"]}
    for control in (slow, same, other, daemon_status):
        await control.aclose()
    assert await daemon.stop() == 0


async def test_bootstrap_op_and_agent_bootstrap_on_session_start(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    workspace = state_dir / "workspace"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# agents\n")
    (workspace / "SOUL.md").write_text("be kind\n")
    (workspace / "README.md").write_text("not a bootstrap file\n")
    write_hook(
        state_dir / "hooks",
        "add-file",
        events=["agent:bootstrap"],
        # The path is a Path object on purpose: non-JSON values reach the wire as strings.
        handler="""
import pathlib

def handler(event):
    files = event.context["bootstrapFiles"]
    event.context["seen"] = [f["name"] for f in files]
    files.append({"name": "TOOLS.md", "path": pathlib.Path("/virtual/TOOLS.md"), "content": "x",
                  "missing": False})
""",
    )
    write_hook(
        state_dir / "hooks",
        "bootstrap-recorder",
        events=["agent:bootstrap"],
        handler=recorder(keep=("seen", "sessionKey", "workspaceDir", "sessionId")),
    )
    daemon = await start_gateway()
    async with daemon.control() as control:
        files = (await control.ok("bootstrap", sessionKey="agent:main:main"))["bootstrapFiles"]
        assert files == [
            {
                "name": "AGENTS.md",
                "path": str(workspace / "AGENTS.md"),
                "content": "# agents\n",
                "missing": False,
            },
            {
                "name": "SOUL.md",
                "path": str(workspace / "SOUL.md"),
                "content": "be kind\n",
                "missing": False,
            },
            {"name": "TOOLS.md", "path": "/virtual/TOOLS.md", "content": "x", "missing": False},
        ]
        await control.ok("message", sessionKey="agent:main:main", text="hi")
    records = read_records(state_dir)
    assert [r["ctx"]["seen"] for r in records] == [["AGENTS.md", "SOUL.md"]] * 2
    assert records[0]["ctx"]["sessionId"] is None  # the op, before any session
    assert records[1]["ctx"]["sessionId"]  # on session start
    assert records[1]["ctx"]["workspaceDir"] == str(workspace)
    assert await daemon.stop() == 0


async def test_boot_md_delivers_through_the_gateway_handle(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    """The bundled boot-md hook calls ``context["gateway"].deliver(..., wait=False)``."""
    workspace = state_dir / "workspace"
    workspace.mkdir()
    (workspace / "BOOT.md").write_text("check the inbox\n")
    write_hook(
        state_dir / "hooks",
        "inbox",
        events=["message:received"],
        handler=recorder(keep=("from", "channelId", "content")),
    )
    daemon = await start_gateway()
    records = await eventually(lambda: read_records(state_dir), what="BOOT.md delivered")
    assert records[0]["session"] == "agent:main:boot"
    assert records[0]["ctx"] == {
        "from": "boot-md",
        "channelId": "boot",
        "content": "check the inbox\n",
    }
    await daemon.wait_log("boot_md.ran")
    assert await daemon.stop() == 0
