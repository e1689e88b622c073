"""The control socket's wire protocol: every op, every kind of bad input, and backpressure (a
real gateway in-process, its socket driven by async and by blocking clients)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.control import Control
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook
from tests.support.inprocess import InProcess
from tests.support.state import eventually_async

pytestmark = pytest.mark.anyio

COUNTER = """
import asyncio, collections, json

COUNTS = collections.Counter()

async def handler(event):
    if event.action == "report":
        event.messages.append(json.dumps(COUNTS))
    else:
        COUNTS[str(event.context["n"])] += 1
        if len(COUNTS) % 16 == 0:
            await asyncio.sleep(0.001)  # slower than 32 clients can post: the queue fills
"""


@pytest.fixture
async def daemon(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> AsyncIterator[InProcess]:
    write_hook(
        state_dir / "hooks",
        "echo",
        events=["command:echo"],
        handler="async def handler(event):\n    event.messages.append(event.context['say'])\n",
    )
    write_hook(
        state_dir / "hooks",
        "counter",
        events=["command:count", "command:report"],
        handler=COUNTER,
    )
    # The bundled command-logger would write each of the 20,000 commands to its log.
    # The in-memory journal: these tests fill the lanes themselves (with the durable journal each
    # client waits for its group commit instead; tests/journal covers that path).
    daemon = await start_gateway(
        {
            "gateway": {"queue": {"capacity": 64, "concurrency": 4, "journal": "memory"}},
            "hooks": {"entries": {"command-logger": {"enabled": False}}},
        }
    )
    yield daemon
    assert await daemon.stop() == 0


async def test_ops(daemon: InProcess, state_dir: Path) -> None:
    async with daemon.control() as control:
        assert await control.ok("ping") == {"id": 1, "ok": True, "pong": True}
        status = (await control.ok("status"))["status"]
        for key in (
            "pid",
            "version",
            "uptime_s",
            "startup_fired",
            "channels",
            "hooks",
            "queue",
            "reloads",
            "last_reload",
        ):
            assert key in status, key
        assert set(status["hooks"]) >= {"discovered", "eligible", "registered", "skipped", "failed"}
        assert set(status["queue"]) >= {"depth", "capacity", "dispatched", "errors", "timeouts"}
        assert status["queue"]["capacity"] == 64
        assert status["last_reload"] is None

        reply = await control.ok(
            "trigger", event="command:echo", sessionKey="s", context={"say": "hi"}
        )
        assert reply["messages"] == ["hi"]
        queued = await control.ok(
            "trigger", event="command:echo", sessionKey="s", context={"say": "x"}, wait=False
        )
        assert queued["queued"] is True and "messages" not in queued

        message = await control.ok("message", sessionKey="s", text="plain text")
        assert message["messages"] == [] and message["command"] is None

        listing = await control.ok("hooks")
        names = {hook["name"] for hook in listing["hooks"]}
        assert {"echo", "counter"} <= names
        assert listing["stateDir"] == str(state_dir)

        assert (await control.ok("bootstrap", sessionKey="s"))["bootstrapFiles"] == []


BAD_INPUTS = [
    (b"{not json}\n", "bad_json"),
    (b"\xff\xfe\n", "bad_json"),
    (b"[1, 2]\n", "bad_request"),
    (b'"ping"\n', "bad_request"),
    (b"\n", "bad_request"),
    (b'{"id": 7}\n', "bad_request"),
    (b'{"id": 7, "op": 5}\n', "bad_request"),
    (b'{"id": 7, "op": "explode"}\n', "unknown_op"),
    (b'{"id": 7, "op": "message", "text": "hi"}\n', "bad_request"),
    (b'{"id": 7, "op": "message", "sessionKey": "s", "text": 5}\n', "bad_request"),
    (b'{"id": 7, "op": "message", "sessionKey": "", "text": "x"}\n', "bad_request"),
    (b'{"id": 7, "op": "trigger", "sessionKey": "s"}\n', "bad_request"),
    (b'{"id": 7, "op": "trigger", "event": "command:x", "sessionKey": 3}\n', "bad_request"),
    (
        b'{"id": 7, "op": "trigger", "event": "command:x", "sessionKey": "s", "wait": "yes"}\n',
        "bad_request",
    ),
    (
        b'{"id": 7, "op": "trigger", "event": "command:x", "sessionKey": "s", "context": []}\n',
        "bad_request",
    ),
    (b'{"id": 7, "op": "trigger", "event": "comand:new", "sessionKey": "s"}\n', "unknown_event"),
    (b'{"id": 7, "op": "trigger", "event": "command", "sessionKey": "s"}\n', "unknown_event"),
    (b'{"id": 7, "op": "trigger", "event": "*", "sessionKey": "s"}\n', "unknown_event"),
    (b'{"id": 7, "op": "bootstrap"}\n', "bad_request"),
]


async def test_bad_input_gets_an_error_reply_and_the_connection_lives(daemon: InProcess) -> None:
    bystander = await daemon.control().connect()
    async with daemon.control() as control:
        for raw, code in BAD_INPUTS:
            await control.send_raw(raw)
            reply = await control.read()
            assert reply is not None, raw
            assert reply["ok"] is False, raw
            assert reply["error"]["code"] == code, (raw, reply)
            assert reply["error"]["message"], raw
            if raw.startswith(b'{"id": 7'):
                assert reply["id"] == 7
            assert (await control.ok("ping"))["pong"] is True  # the same connection carries on

        # A line over 1 MiB, sent in pieces; then a normal request on the same connection.
        await control.send_raw(b'{"id": 1, "op": "ping", "pad": "' + b"x" * (1 << 20) + b'"}\n')
        reply = await control.read()
        assert reply is not None and reply["error"]["code"] == "line_too_long"
        assert (await control.ok("ping"))["pong"] is True
        # Exactly 1 MiB is still allowed.
        body = b'{"id": 9, "op": "ping", "pad": "'
        tail = b'"}'
        line = body + b"y" * ((1 << 20) - len(body) - len(tail)) + tail
        assert len(line) == 1 << 20
        await control.send_raw(line + b"\n")
        assert await control.read() == {"id": 9, "ok": True, "pong": True}
    assert (await bystander.ok("ping"))["pong"] is True
    await bystander.aclose()
    # A client that vanishes mid-request does not hurt the daemon either.
    half = Control(daemon.socket)  # connect() and send() on a Unix socket do not wait for it
    half.send_raw(b'{"id": 1, "op": "trig')
    half.close()
    async with daemon.control() as control:
        assert (await control.ok("status"))["status"]["channels"][0]["listening"] is True


async def test_backpressure_without_loss(daemon: InProcess) -> None:
    """20,000 events from 32 concurrent clients into a 64-slot queue: each dispatched once."""
    clients, per_client = 32, 625
    errors: list[str] = []

    def client(c: int) -> None:
        try:
            with Control(daemon.socket, timeout=120) as control:
                control.send_raw(
                    b"".join(
                        json.dumps(
                            {
                                "id": i,
                                "op": "trigger",
                                "event": "command:count",
                                "sessionKey": f"client-{c % 16}",
                                "context": {"n": c * per_client + i},
                                "wait": False,
                            }
                        ).encode()
                        + b"\n"
                        for i in range(per_client)
                    )
                )
                for i in range(per_client):
                    reply = control.read()
                    if reply != {"id": i, "ok": True, "queued": True}:
                        errors.append(f"client {c}: {reply}")
                        return
        except Exception as exc:
            errors.append(f"client {c}: {exc!r}")

    # Blocking clients on threads of their own, as 32 programs would be; joined off the loop.
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await anyio.to_thread.run_sync(thread.join, 120)
    assert not errors, errors[:5]
    total = clients * per_client
    async with daemon.control() as control:

        async def all_dispatched() -> dict[str, Any] | None:
            q: dict[str, Any] = (await control.ok("status"))["status"]["queue"]
            return q if q["dispatched"] >= total else None

        queue = await eventually_async(all_dispatched, what="every event dispatched")
        assert queue["peak"] == 64  # the queue was full: producers really waited
        assert queue["errors"] == 0
        report = await control.ok("trigger", event="command:report", sessionKey="report")
    counts = json.loads(report["messages"][0])
    assert len(counts) == total
    assert set(counts.values()) == {1}
    assert {int(n) for n in counts} == set(range(total))
