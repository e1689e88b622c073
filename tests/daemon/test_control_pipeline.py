"""One connection pipelining its requests, on a real daemon with the durable journal.

The requests a client sends without waiting are admitted in the order sent and answered in that
order; the triggers among them share group commits and their waits overlap; a bad line is
answered in its place; a client past the in-flight window is read more slowly, never dropped.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gatewayd.channels.admission import MAX_IN_FLIGHT
from tests.support.control import Control
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

ORDER = """
import json

SEEN = {}

async def handler(event):
    if event.action == "report":
        event.messages.append(json.dumps(SEEN.get(event.session_key, [])))
    else:
        SEEN.setdefault(event.session_key, []).append(event.context["n"])
"""

GATE = """
import asyncio, os

async def handler(event):
    marker = event.context["marker"]
    if event.action == "mark":
        open(marker, "w").close()
        event.messages.append("marked")
        return
    for _ in range(200):  # 10 s at most
        if os.path.exists(marker):
            event.messages.append("saw the mark")
            return
        await asyncio.sleep(0.05)
    event.messages.append("no mark")
"""

SAY = """
async def handler(event, ctx):
    await ctx.gateway.send(event.context["to"], "hello")
"""


@pytest.fixture
def daemon(write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path) -> Iterator[Daemon]:
    write_hook(
        state_dir / "hooks", "order", events=["command:order", "command:report"], handler=ORDER
    )
    write_hook(state_dir / "hooks", "gate", events=["command:gate", "command:mark"], handler=GATE)
    write_hook(state_dir / "hooks", "say", events=["command:say"], handler=SAY)
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    yield daemon
    assert daemon.stop() == 0


def line(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode() + b"\n"


def order(n: int, session: str) -> dict[str, Any]:
    return {
        "id": n,
        "op": "trigger",
        "event": "command:order",
        "sessionKey": session,
        "context": {"n": n},
        "wait": False,
    }


def test_pipelined_triggers_share_commits_and_are_answered_and_dispatched_in_order(
    daemon: Daemon,
) -> None:
    count, sessions = 600, ("a", "b", "c")
    data = []
    for n in range(count):
        if n == 100:
            data.append(b"{not json\n")  # answered in its place, the rest carries on
        data.append(line(order(n, sessions[n % 3])))
    with daemon.control() as control:
        control.send_raw(b"".join(data))
        for n in range(count):
            if n == 100:
                bad = control.read()
                assert bad is not None and bad["error"]["code"] == "bad_json", bad
            assert control.read() == {"id": n, "ok": True, "queued": True}
        for s, session in enumerate(sessions):
            report = control.ok("trigger", event="command:report", sessionKey=session)
            assert json.loads(report["messages"][0]) == list(range(s, count, 3))
        journal = control.ok("status")["status"]["queue"]["journal"]
    assert journal["backend"] == "sqlite"
    # Answered one at a time, each request had a commit of its own (1 event per commit).
    assert journal["events_per_commit"] > 2, journal


def test_waited_triggers_on_one_connection_are_dispatched_together(
    daemon: Daemon, state_dir: Path
) -> None:
    marker = str(state_dir / "mark")
    with daemon.control() as control:
        control.send_raw(
            line({"id": 1, "op": "trigger", "event": "command:gate", "sessionKey": "first",
                  "context": {"marker": marker}})
            + line({"id": 2, "op": "trigger", "event": "command:mark", "sessionKey": "second",
                    "context": {"marker": marker}})
            + line({"id": 3, "op": "ping"})
        )  # fmt: skip
        # The first waits for the second's hook: it sees the mark only if the second was
        # dispatched while the first still waited. The replies keep the request order.
        assert control.read() == {"id": 1, "ok": True, "messages": ["saw the mark"]}
        assert control.read() == {"id": 2, "ok": True, "messages": ["marked"]}
        assert control.read() == {"id": 3, "ok": True, "pong": True}


def test_a_client_past_the_in_flight_window_is_read_more_slowly_and_loses_nothing(
    daemon: Daemon,
) -> None:
    count = 3 * MAX_IN_FLIGHT
    with Control(daemon.socket, timeout=120) as control:
        # Everything is written before any reply is read: the daemon stops reading at the
        # window, the socket buffers fill, and the writer waits until replies are taken.
        writer = threading.Thread(
            target=control.send_raw,
            args=(b"".join(line(order(n, "window")) for n in range(count)),),
        )
        writer.start()
        replies = [control.read() for _ in range(count)]
        writer.join(60)
        assert [r and r["id"] for r in replies] == list(range(count))
        assert all(r and r["queued"] for r in replies)
        report = control.ok("trigger", event="command:report", sessionKey="window")
    assert json.loads(report["messages"][0]) == list(range(count))


def test_subscribe_after_pipelined_requests_answers_them_first(daemon: Daemon) -> None:
    with daemon.control() as control:
        control.send_raw(
            line(order(1, "sub"))
            + line({"id": 2, "op": "ping"})
            + line({"id": 3, "op": "subscribe", "sessionKey": "agent:main:sub"})
            + line({"id": 4, "op": "ping"})  # after subscribe: read and ignored
        )
        assert control.read() == {"id": 1, "ok": True, "queued": True}
        assert control.read() == {"id": 2, "ok": True, "pong": True}
        assert control.read() == {"id": 3, "ok": True, "subscribed": "agent:main:sub"}
        daemon.request(
            "trigger", event="command:say", sessionKey="s", context={"to": "agent:main:sub"}
        )
        # The next line is the session's message, not a reply to the ping after subscribe.
        assert control.read() == {
            "event": "message",
            "sessionKey": "agent:main:sub",
            "content": "hello",
        }
