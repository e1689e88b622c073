"""Reload (SIGHUP and the ``reload`` op) and the sd_notify messages on a test NOTIFY_SOCKET."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook, recorder
from tests.support.state import read_records, wait_until, write_config


def _monotonic_usec() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def test_sd_notify_ready_reloading_stopping_watchdog(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon(env={"WATCHDOG_USEC": "200000"})
    notify = daemon.notify
    ready_i, _, ready = notify.wait_for("READY")
    assert ready["STATUS"].startswith("running: ")
    # Pings every half period from the event loop: several arrive while it idles.
    first_ping, _, _ = notify.wait_for("WATCHDOG", after=0)
    notify.wait_for("WATCHDOG", after=first_ping + 1)

    before = _monotonic_usec()
    daemon.send_signal(signal.SIGHUP)
    reload_i, _, reloading = notify.wait_for("RELOADING")
    after = _monotonic_usec()
    assert reload_i > ready_i
    assert before <= int(reloading["MONOTONIC_USEC"]) <= after
    notify.wait_for("READY", after=reload_i + 1)

    assert daemon.stop() == 0
    stop_i, _, stopping = notify.wait_for("STOPPING")
    assert stop_i > reload_i
    assert stopping["STATUS"].startswith("stopping on SIGTERM")


def test_sd_notify_abstract_socket(start_daemon: StartDaemon, state_dir: Path) -> None:
    daemon = start_daemon(notify_address=f"@gatewayd-test-{os.getpid()}-{state_dir.name}")
    _, _, ready = daemon.notify.wait_for("READY")
    assert ready["MAINPID"] == str(daemon.proc.pid)
    assert daemon.stop() == 0


def test_sighup_and_reload_op_pick_up_hooks_and_startup_fires_once(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "boot-counter", events=["gateway:startup"], handler=recorder("startup.jsonl"))
    daemon = start_daemon()
    wait_until(lambda: read_records(state_dir, "startup.jsonl"), what="gateway:startup")
    with daemon.control() as control:
        assert control.ok("trigger", event="command:ping", sessionKey="s")["messages"] == []

        # A new hook on disk, then SIGHUP: it answers afterwards.
        write_hook(
            hooks,
            "pinger",
            events=["command:ping"],
            handler="async def handler(event):\n    event.messages.append('pong')\n",
        )
        daemon.send_signal(signal.SIGHUP)
        reload_i, _, _ = daemon.notify.wait_for("RELOADING")
        daemon.notify.wait_for("READY", after=reload_i + 1)
        assert control.ok("trigger", event="command:ping", sessionKey="s")["messages"] == ["pong"]
        status = control.ok("status")["status"]
        assert status["reloads"] == 1
        assert status["last_reload"]["trigger"] == "SIGHUP"
        assert status["last_reload"]["result"] == "ok"
        assert status["last_reload"]["duration_ms"] >= 0

        # The reload op returns the load summary.
        result = control.ok("reload")["result"]
        assert set(result) == {
            "discovered",
            "eligible",
            "registered",
            "skipped",
            "failed",
            "statuses",
            "notReady",
            "warnings",
        }
        assert result["registered"] == status["hooks"]["registered"]
        status = control.ok("status")["status"]
        assert status["reloads"] == 2
        assert status["last_reload"]["trigger"] == "op"

    # gateway:startup fired once for the process, never again on reload.
    assert len(read_records(state_dir, "startup.jsonl")) == 1
    assert daemon.stop() == 0


def test_invalid_config_on_reload_is_refused_and_the_running_one_kept(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "pinger",
        events=["command:ping"],
        handler="async def handler(event):\n    event.messages.append('pong')\n",
    )
    daemon = start_daemon({"gateway": {"queue": {"capacity": 77}}})
    write_config(state_dir, {"gateway": {"queue": {"capacity": "lots"}}, "typo": True})
    with daemon.control() as control:
        reply = control.request("reload")
        assert reply["ok"] is False
        assert reply["error"]["code"] == "reload_refused"
        assert "gateway.queue.capacity" in reply["error"]["message"]
        assert "typo" in reply["error"]["message"]

        daemon.send_signal(signal.SIGHUP)
        daemon.wait_log("reload.refused", trigger="SIGHUP")
        status = wait_until(
            lambda: (s := control.ok("status")["status"])["reloads"] == 2 and s,
            what="the SIGHUP reload to finish",
        )
        assert status["last_reload"]["result"] == "refused"
        assert status["queue"]["capacity"] == 77  # the running config stays
        assert control.ok("trigger", event="command:ping", sessionKey="s")["messages"] == ["pong"]
    assert daemon.stop() == 0
