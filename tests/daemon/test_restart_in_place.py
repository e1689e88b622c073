"""SIGUSR2: a restart in place, as OpenClaw's gateway restarts. Its hooks are told, as
OpenClaw tells them: ``gateway:shutdown`` with ``restartExpectedMs``, then
``gateway:pre-restart``; the same process (PID) then serves again, from a fresh interpreter."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.support.fixtures import StartDaemon
from tests.support.hooks import recorder, write_hook_dir
from tests.support.state import read_records, wait_until

LIFECYCLE = ["gateway:startup", "gateway:shutdown", "gateway:pre-restart"]


def test_sigusr2_restarts_in_place_and_tells_the_hooks_when_to_expect_it(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook_dir(
        state_dir / "hooks",
        "lifecycle",
        events=LIFECYCLE,
        handler=recorder(keep=("reason", "restartExpectedMs")),
    )
    daemon = start_daemon({"gateway": {"startupHookDelayMs": 0}})
    pid = daemon.proc.pid
    first_ready, _, _ = daemon.notify.wait_for("READY")
    wait_until(lambda: read_records(state_dir), what="the first gateway:startup")

    daemon.send_signal(signal.SIGUSR2)
    reloading, _, _ = daemon.notify.wait_for("RELOADING", after=first_ready + 1)
    _, _, ready = daemon.notify.wait_for("READY", after=reloading + 1)
    assert ready["MAINPID"] == str(pid)  # the same process serves again
    wait_until(lambda: len(read_records(state_dir)) >= 4, what="the new run's gateway:startup")
    records = read_records(state_dir)
    assert [r["key"] for r in records] == [
        "gateway:startup",
        "gateway:shutdown",
        "gateway:pre-restart",
        "gateway:startup",
    ]
    shutdown, pre_restart = records[1]["ctx"], records[2]["ctx"]
    assert shutdown["reason"] == pre_restart["reason"] == "SIGUSR2"
    expected = shutdown["restartExpectedMs"]
    # This run's own start, interpreter imports included: longer than its startup_ms (the
    # gateway built to READY), which leaves out the imports a restart repeats.
    assert isinstance(expected, int) and expected > daemon.events("gateway.ready")[0]["startup_ms"]
    assert pre_restart["restartExpectedMs"] == expected
    with daemon.control() as control:
        assert control.ok("status")["status"]["pid"] == pid

    # A plain stop: no restart expected (null, as OpenClaw sends it), no pre-restart.
    assert daemon.stop() == 0
    last = read_records(state_dir)[-1]
    assert last["key"] == "gateway:shutdown" and last["ctx"] == {
        "reason": "SIGTERM",
        "restartExpectedMs": None,
    }
