"""The log is not a way in or a way down.

A real ``gatewayd run``: a failing handler's local variables never reach the log, and a stderr
whose reader went away (a log shipper on a pipe that exited) never stops request handling.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.fixtures import NewDaemon, StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

SECRET = "tok-" + "9f2b7c1e5d"  # built at run time so the handler source holds no literal

FAILING = """
def handler(event):
    api_token = "tok-" + "9f2b7c1e5d"
    raise RuntimeError("the upstream refused us")
"""


def test_traceback_in_the_json_log_has_no_local_variables(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    write_hook(state_dir / "hooks", "leaky", events=["command:boom"], handler=FAILING)
    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("trigger", event="command:boom", sessionKey="s")
    record = daemon.wait_log("hook.error", hook="leaky")
    frames = record["exception"][0]["frames"]
    assert any(frame["name"] == "handler" for frame in frames), record
    assert all("locals" not in frame for frame in frames), frames
    assert SECRET not in daemon.stderr_text()
    assert daemon.stop() == 0


def test_a_closed_stderr_never_stops_request_handling(
    new_daemon: NewDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    # Every request below logs (hook errors, messages); the reader of stderr is gone by then.
    write_hook(state_dir / "hooks", "leaky", events=["command:boom"], handler=FAILING)
    daemon = new_daemon()
    read_end, write_end = os.pipe()
    try:
        try:
            daemon.start(stderr=write_end)
        finally:
            os.close(write_end)
        os.close(read_end)  # the shipper exits: every later write to fd 2 is EPIPE
        read_end = -1
        with daemon.control(timeout=30) as control:
            for i in range(20):
                control.ok("trigger", event="command:boom", sessionKey=f"s{i}")
                reply = control.ok("message", sessionKey=f"k{i}", text="hello")
                assert reply["command"] is None
            assert control.ok("ping")["pong"] is True
        with daemon.control(timeout=30) as control:
            assert control.ok("status")["status"]["state"] == "running"
        assert daemon.stop() == 0
    finally:
        if read_end >= 0:
            os.close(read_end)
    wait_until(lambda: not daemon.socket.exists(), what="socket gone")
