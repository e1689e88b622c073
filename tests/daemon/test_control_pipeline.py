"""One connection pipelining its requests, on a real daemon with the durable journal.

The requests a client sends without waiting are admitted in the order sent and answered in that
order; the triggers among them share group commits and their waits overlap; a bad line is
answered in its place; a client past the in-flight window is read more slowly, never dropped.
"""

from __future__ import annotations

import json
import socket
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
from tests.support.state import wait_until

ORDER = """
import json
import socket

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

SLOW_RECEIVE = """
import asyncio

async def handler(event):
    if event.context.get("content") == "/noted slowly":
        await asyncio.sleep(4.5)
    elif event.context.get("content") == "/noted soon":
        await asyncio.sleep(1.0)
"""

BIG = """
async def handler(event):
    event.messages.append("x" * 4_000_000)  # more than the socket buffers hold
"""

NAP = """
import asyncio

async def handler(event):
    await asyncio.sleep(0.3)
    event.messages.append("rested")
"""

NO_LOGGER = {"hooks": {"entries": {"command-logger": {"enabled": False}}}}

NOTED = """
import os

async def handler(event):
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "noted.log"), "a") as f:
        f.write(event.session_key + "\\n")
"""

SAY = """
async def handler(event, ctx):
    await ctx.gateway.send(event.context["to"], "hello")
"""


@pytest.fixture
def hooks(write_hook: WriteHook, state_dir: Path) -> None:
    root = state_dir / "hooks"
    write_hook(root, "order", events=["command:order", "command:report"], handler=ORDER)
    write_hook(root, "gate", events=["command:gate", "command:mark"], handler=GATE)
    write_hook(root, "say", events=["command:say"], handler=SAY)
    write_hook(root, "slow-receive", events=["message:received"], handler=SLOW_RECEIVE)
    write_hook(root, "noted", events=["command:noted"], handler=NOTED)
    write_hook(root, "big", events=["command:big"], handler=BIG)
    write_hook(root, "nap", events=["command:nap"], handler=NAP)


@pytest.fixture
def daemon(hooks: None, start_daemon: StartDaemon) -> Iterator[Daemon]:
    daemon = start_daemon(NO_LOGGER)
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


def test_a_client_cut_off_mid_message_does_not_cut_the_message_short(
    hooks: None, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """A client that does not read its replies is cut off by the idle timeout while the
    message after them still runs its message:received hook: the message is carried out whole
    (its command runs), as for a client that waits."""
    daemon = start_daemon({**NO_LOGGER, "gateway": {"control": {"idleTimeoutMs": 1500}}})
    with daemon.control() as control:
        control.send_raw(
            line({"id": 1, "op": "trigger", "event": "command:big", "sessionKey": "big"})
            + line({"id": 2, "op": "message", "sessionKey": "cut", "text": "/noted slowly"})
        )
        daemon.wait_log("control.idle_timeout")  # its reply never read, mid-message
    noted = state_dir / "noted.log"
    wait_until(lambda: noted.exists() and noted.read_text() == "cut\n", what="the command")
    assert daemon.stop() == 0


def test_a_client_gone_before_its_replies_ends_its_connection_quietly(
    daemon: Daemon, state_dir: Path
) -> None:
    """The trigger's reply (after 0.3 s) finds the client gone while the message after it
    still runs: the message runs whole, and the connection ends without an error logged."""
    with daemon.control() as control:
        control.send_raw(
            line({"id": 1, "op": "trigger", "event": "command:nap", "sessionKey": "nap"})
            + line({"id": 2, "op": "message", "sessionKey": "soon", "text": "/noted soon"})
        )
        control.sock.shutdown(socket.SHUT_RDWR)
    noted = state_dir / "noted.log"
    wait_until(lambda: noted.exists() and noted.read_text() == "soon\n", what="the command")
    wait_until(
        lambda: daemon.request("status")["status"]["channels"][0]["connections"] == 1,
        what="the connection closed",
    )
    assert not daemon.events("control.connection_failed")
