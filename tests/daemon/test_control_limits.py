"""No client can take the control socket away from the others.

A real ``gatewayd run`` with ``gateway.control.maxConnections`` and ``idleTimeoutMs`` set low: one
connection over the cap is answered ``busy``; a client that sends nothing, trickles a line a
byte at a time, or never reads its replies is cut off; a slow hook is not. And a daemon whose
file descriptors run out (``prlimit`` on the running process) keeps going and serves again once
clients leave.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.control import Control
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

IDLE_MS = 1500
"""Short enough for a test, long enough that a loaded machine's pauses stay far below it."""

SLOW = """
import asyncio

async def handler(event):
    await asyncio.sleep(float(event.context["seconds"]))
    event.messages.append("done")
"""


def error_code(line: bytes) -> str:
    reply: dict[str, Any] = json.loads(line)
    assert reply["ok"] is False and reply["id"] is None, reply
    code: str = reply["error"]["code"]
    return code


def connections(control: Control) -> int:
    count: int = control.ok("status")["status"]["channels"][0]["connections"]
    return count


@pytest.fixture
def daemon(write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path) -> Iterator[Daemon]:
    write_hook(state_dir / "hooks", "slow", events=["command:slow"], handler=SLOW)
    daemon = start_daemon(
        {
            "gateway": {"control": {"maxConnections": 4, "idleTimeoutMs": IDLE_MS}},
            "hooks": {"entries": {"command-logger": {"enabled": False}}},
        }
    )
    yield daemon
    assert daemon.stop() == 0, daemon.stderr_text()[-3000:]


def test_one_connection_over_the_cap_is_answered_busy(daemon: Daemon) -> None:
    held = [daemon.control() for _ in range(4)]
    try:
        for control in held:
            assert control.ok("ping")["pong"] is True
        with daemon.control() as extra:
            extra.send_raw(b'{"id": 1, "op": "ping"}\n')  # written after connecting: no EPIPE
            line = extra.file.readline()
            assert error_code(line) == "busy", line
            assert b"gateway.control.maxConnections" in line
            assert extra.file.readline() == b""  # and closed
        daemon.wait_log("control.busy", max_connections=4)
        held.pop().close()
        # The slot is free once the daemon has seen that close.
        wait_until(lambda: _ping_once(daemon), what="a connection once one was closed")
    finally:
        for control in held:
            control.close()


def _ping_once(daemon: Daemon) -> bool:
    with daemon.control() as control:
        control.send_raw(b'{"id": 1, "op": "ping"}\n')
        return json.loads(control.file.readline()).get("pong") is True


def test_a_silent_client_is_cut_off_and_a_slow_hook_is_not(daemon: Daemon) -> None:
    with daemon.control() as silent, daemon.control() as busy_hook:
        # A request whose hook takes longer than the idle timeout: the wait is the daemon's.
        busy_hook.send_raw(
            json.dumps(
                {
                    "id": 1,
                    "op": "trigger",
                    "event": "command:slow",
                    "sessionKey": "s",
                    "context": {"seconds": 3 * IDLE_MS / 1000},
                }
            ).encode()
            + b"\n"
        )
        line = silent.file.readline()  # nothing sent: cut off after the timeout
        assert error_code(line) == "idle_timeout", line
        assert b"gateway.control.idleTimeoutMs" in line
        assert silent.file.readline() == b""
        assert busy_hook.read() == {"id": 1, "ok": True, "messages": ["done"]}
        assert busy_hook.ok("ping")["pong"] is True
    daemon.wait_log("control.idle_timeout", idle_timeout_ms=IDLE_MS)


def test_a_client_active_for_longer_than_the_timeout_keeps_its_connection(
    daemon: Daemon,
) -> None:
    with daemon.control() as control:
        started = time.monotonic()
        while time.monotonic() - started < 2.5 * IDLE_MS / 1000:
            assert control.ok("ping")["pong"] is True
            time.sleep(IDLE_MS / 1000 / 10)


def test_a_line_trickled_a_byte_at_a_time_is_cut_off(daemon: Daemon) -> None:
    """Slowloris: each byte arrives well within the timeout, the line never does."""
    line = b'{"id": 1, "op": "ping", "pad": "' + b"x" * 2000 + b'"}\n'
    with daemon.control() as control:
        control.sock.settimeout(0.05)
        reply = b""
        for byte in line:
            try:
                control.send_raw(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                reply = control.sock.recv(4096)
            except TimeoutError:
                continue
            break
        else:
            pytest.fail(f"the whole {len(line)}-byte line went through a byte at a time")
        control.sock.settimeout(30)
        # The daemon writes its reply and closes with our unread bytes still queued, so
        # the close may arrive as a reset once the reply has been read.
        while not reply.endswith(b"\n"):
            try:
                chunk = control.sock.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
        assert error_code(reply) == "idle_timeout", reply


def test_a_client_that_never_reads_its_replies_is_cut_off(daemon: Daemon) -> None:
    with daemon.control() as observer:
        hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            hog.connect(str(daemon.socket))
            hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hog.settimeout(0.5)
            request = b'{"id": 1, "op": "hooks"}\n' * 100
            sent = 0
            # Keep asking for large replies without reading one: the daemon's writes stall.
            while sent < 50_000:
                try:
                    hog.sendall(request)
                except TimeoutError:
                    break  # the daemon stopped reading: it is stuck writing to us
                except (BrokenPipeError, ConnectionResetError):
                    break  # already cut off
                sent += 100
            assert connections(observer) == 2
            wait_until(lambda: connections(observer) == 1, what="the hog cut off", timeout=60)
        finally:
            hog.close()
        assert observer.ok("ping")["pong"] is True


# -- file descriptors ---------------------------------------------------------------------


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
def test_out_of_file_descriptors_backs_off_and_serves_again(start_daemon: StartDaemon) -> None:
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    pid = daemon.proc.pid
    with daemon.control() as control:
        assert control.ok("ping")["pong"] is True
    headroom = 6
    limit = _open_fds(pid) + headroom
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
    clients: list[socket.socket] = []
    try:
        # More clients than descriptors left: the kernel queues them (the listen backlog), the
        # daemon accepts until accept() fails with EMFILE.
        for _ in range(headroom + 10):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            clients.append(sock)
            sock.settimeout(30)
            sock.connect(str(daemon.socket))
            sock.sendall(b'{"id": 1, "op": "ping"}\n')
        record = daemon.wait_log("control.accept_failed", errno="EMFILE")
        assert "LimitNOFILE" in record["note"]
        assert daemon.proc.poll() is None
        # The first client was accepted before the descriptors ran out: it has its answer.
        first = clients[0].makefile("rb")
        try:
            assert json.loads(first.readline()) == {"id": 1, "ok": True, "pong": True}
        finally:
            first.close()
    finally:
        for sock in clients:
            sock.close()
    # Every client gone: the daemon serves new ones again.
    wait_until(lambda: _ping_once(daemon), timeout=60, what="a ping once descriptors are free")
    daemon.wait_log("control.accept_recovered")
    assert daemon.proc.poll() is None
