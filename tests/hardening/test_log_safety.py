"""Class 5 of issue 13: the log is not a way in or a way down.

A real ``gatewayd run``: a failing handler's local variables never reach the log, and a stderr
whose reader went away (a log shipper on a pipe that exited) never stops request handling.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from daemon_support import Control, NotifySocket, StartDaemon, WriteHook, wait_until

SECRET = "tok-" + "9f2b7c1e5d"  # built at run time so the handler source holds no literal

FAILING = """
def handler(event):
    api_token = "tok-" + "9f2b7c1e5d"
    raise RuntimeError("the upstream refused us")
"""


def test_traceback_in_the_json_log_has_no_local_variables(
    start_daemon: StartDaemon, short_state: Path, write_hook: WriteHook
) -> None:
    write_hook(short_state / "hooks", "leaky", events=["command:boom"], handler=FAILING)
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
    short_state: Path, write_hook: WriteHook
) -> None:
    # Every request below logs (hook errors, messages); the reader of stderr is gone by then.
    write_hook(short_state / "hooks", "leaky", events=["command:boom"], handler=FAILING)
    notify = NotifySocket(str(short_state / "notify"))
    read_end, write_end = os.pipe()
    env = {
        **os.environ,
        "ELIZA_STATE_DIR": str(short_state),
        "NOTIFY_SOCKET": notify.address,
        "GATEWAYD_HOOKS__LOAD__WATCH": "false",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatewayd", "run", "--log-format", "json"],
        env=env,
        cwd=short_state,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=write_end,
    )
    os.close(write_end)
    try:
        notify.wait_for("READY")
        os.close(read_end)  # the shipper exits: every later write to fd 2 is EPIPE
        read_end = -1
        with Control(short_state / "run" / "gatewayd.sock", timeout=30) as control:
            for i in range(20):
                control.ok("trigger", event="command:boom", sessionKey=f"s{i}")
                reply = control.ok("message", sessionKey=f"k{i}", text="hello")
                assert reply["command"] is None
            assert control.ok("ping")["pong"] is True
        with Control(short_state / "run" / "gatewayd.sock", timeout=30) as control:
            assert control.ok("status")["status"]["state"] == "running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if read_end >= 0:
            os.close(read_end)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        notify.close()
    wait_until(lambda: not (short_state / "run" / "gatewayd.sock").exists(), what="socket gone")
