"""What a real daemon tells about its hooks: counters, captured hook output, stalls, log file."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

TALKER = """
import logging

log = logging.getLogger("talker.mod")

async def handler(event):
    log.warning("careful %s", 42)
    log.debug("below the level")
    print("printed", "line")
    event.messages.append("talked")
"""
SYNC_TALKER = """
import logging, sys

def handler(event):
    print("from a thread")
    print("to stderr", file=sys.stderr)
    logging.getLogger("sync.mod").info("sync info")
"""
FLAKY = """
async def handler(event):
    if event.context.get("fail"):
        raise RuntimeError("asked to fail")
"""
BLOCKER = """
import time

async def handler(event):
    time.sleep(1.0)
"""


def _hook(daemon_hooks: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(h for h in daemon_hooks if h["name"] == name)


def test_hook_logging_and_prints_become_tagged_lines(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "talker", events=["command:talk"], handler=TALKER)
    write_hook(state_dir / "hooks", "sync-talker", events=["command:talk"], handler=SYNC_TALKER)
    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("trigger", event="command:talk", sessionKey="s")["messages"] == ["talked"]
    logged = daemon.wait_log("hook.log", hook="talker")
    assert (logged["level"], logged["logger"], logged["message"]) == (
        "warning",
        "talker.mod",
        "careful 42",
    )
    printed = daemon.wait_log("hook.output", hook="talker")
    assert (printed["stream"], printed["line"], printed["level"]) == (
        "stdout",
        "printed line",
        "info",
    )
    daemon.wait_log("hook.output", hook="sync-talker", stream="stdout", line="from a thread")
    err = daemon.wait_log("hook.output", hook="sync-talker", stream="stderr")
    assert (err["line"], err["level"]) == ("to stderr", "warning")
    info = daemon.wait_log("hook.log", hook="sync-talker")
    assert (info["level"], info["message"]) == ("info", "sync info")
    assert not [r for r in daemon.logs if r.get("message") == "below the level"]
    # Every stderr line is a JSON record: nothing a hook printed landed as bare text.
    assert daemon.stop() == 0
    bare = [line for line in daemon.stderr_text().splitlines() if not line.startswith("{")]
    assert bare == []


def test_daemon_view_counts_calls_errors_and_the_last_error(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    hook_dir = write_hook(state_dir / "hooks", "flaky", events=["command:go"], handler=FLAKY)
    daemon = start_daemon()
    with daemon.control() as control:
        for i in range(5):
            control.ok("trigger", event="command:go", sessionKey="s", context={"fail": i == 3})
        listing = control.ok("hooks")
    assert listing["view"] == "daemon"
    flaky = _hook(listing["hooks"], "flaky")
    stats = flaky["stats"]
    assert (stats["calls"], stats["errors"], stats["timeouts"], stats["stalls"]) == (5, 1, 0, 0)
    assert stats["lastError"]["message"] == "RuntimeError: asked to fail"
    assert stats["lastError"]["where"] == f"{hook_dir / 'handler.py'}:4"
    assert stats["lastError"]["time"].endswith("Z")
    assert 0 <= stats["p50Ms"] <= stats["p99Ms"]
    # A hook that is not registered has no counters.
    assert all(h["stats"] is None for h in listing["hooks"] if h["status"] != "ready")


def test_a_blocking_hook_is_named_by_the_lag_monitor(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "blocker", events=["command:block"], handler=BLOCKER)
    daemon = start_daemon({"gateway": {"loopLagWarnMs": 200}})
    with daemon.control() as control:
        control.ok("trigger", event="command:block", sessionKey="s")
        stalled = daemon.wait_log("loop.stalled", hook="blocker")
        assert stalled["level"] == "warning" and stalled["lag_ms"] >= 200
        assert "blocker blocked the event loop" in stalled["fix"]
        stats = _hook(control.ok("hooks")["hooks"], "blocker")["stats"]
        assert stats["stalls"] >= 1
        status = control.ok("status")["status"]
    assert status["loop_lag"]["stalls"] >= 1 and status["loop_lag"]["warn_ms"] == 200


def test_log_file_gets_json_lines_and_rotates(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "flaky", events=["command:go"], handler=FLAKY)
    config = {"gateway": {"log": {"file": "logs/gatewayd.log", "maxBytes": 4096, "backups": 2}}}
    daemon = start_daemon(config)
    log_file = state_dir / "logs" / "gatewayd.log"
    with daemon.control() as control:
        for _ in range(20):  # each failure logs a traceback: several KiB in all
            control.ok("trigger", event="command:go", sessionKey="s", context={"fail": True})
    assert daemon.stop() == 0
    rotated = log_file.with_name("gatewayd.log.1")
    wait_until(rotated.exists, what="the log file to rotate")
    assert not log_file.with_name("gatewayd.log.3").exists()  # backups: 2
    records = [
        json.loads(line)
        for path in (rotated, log_file)
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert {r["event"] for r in records} >= {"hook.error", "gateway.shutdown"}
    assert all(r["level"] in ("debug", "info", "warning", "error") for r in records)


def test_a_log_file_that_cannot_be_opened_is_reported_and_the_daemon_runs_on(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """``gateway.log.file`` under a path that is a regular file: at start and on a reload
    (SIGHUP, which ran in the root task group: the OSError ended the daemon) the error is
    logged with the fix, lines go to stderr only, and the rest of the config applies."""
    (state_dir / "notadir").write_text("a file, not a directory\n")
    write_hook(state_dir / "hooks", "greet", events=["command:hello"])
    bad = {"gateway": {"log": {"file": "notadir/gatewayd.log"}}}
    daemon = start_daemon(bad)
    failed = daemon.wait_log("log.file_failed")
    assert failed["path"] == str(state_dir / "notadir" / "gatewayd.log"), failed
    assert "gateway.log.file" in failed["fix"]

    config = state_dir / "gatewayd.yaml"
    config.write_text(json.dumps({"gateway": {"log": {"file": "logs/gatewayd.log"}}}))
    daemon.send_signal(signal.SIGHUP)
    assert wait_until(lambda: (state_dir / "logs" / "gatewayd.log").exists(), what="log file")
    config.write_text(json.dumps({**bad, "hooks": {"entries": {"greet": {"enabled": False}}}}))
    daemon.send_signal(signal.SIGHUP)

    def reloaded() -> dict[str, Any] | None:
        with daemon.control() as control:
            status = control.ok("status")["status"]
        return status if status["reloads"] == 2 else None

    status = wait_until(reloaded, what="the second reload")
    assert status["last_reload"]["result"] == "ok", status["last_reload"]
    assert len(daemon.events("log.file_failed")) == 2
    with daemon.control() as control:  # the hook disabled in the same edit
        assert control.ok("message", sessionKey="s", text="/hello")["messages"] == []
    assert daemon.stop() == 0
