"""sd_notify (:mod:`gatewayd.systemd`) against a real ``AF_UNIX`` datagram socket standing in for
systemd's: the address forms ``NOTIFY_SOCKET`` takes, each message's fields, a socket that went
away (logged once, never raised), and the watchdog period and pings. The daemon's own use of it
(``READY=1`` before the startup hook, ``RELOADING=1``, ``STOPPING=1``) is in the lifecycle and
reload tests, on a real ``gatewayd run``."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from gatewayd.systemd import Notifier, monotonic_usec, watchdog_interval, watchdog_loop
from tests.support.daemon import NotifySocket


def test_each_message_is_one_datagram_of_its_fields(tmp_path: Path) -> None:
    listener = NotifySocket(str(tmp_path / "notify"))
    notifier = Notifier({"NOTIFY_SOCKET": listener.address})
    try:
        assert notifier.enabled
        before = monotonic_usec()
        assert notifier.ready("serving 2 hooks")
        assert notifier.reloading()
        assert notifier.status("reloaded")
        assert notifier.watchdog()
        assert notifier.stopping("draining")
        listener.wait_for("STOPPING")
    finally:
        notifier.close()
        listener.close()
    ready, reloading, status, ping, stopping = (fields for _, fields in listener.messages)
    assert ready == {"READY": "1", "STATUS": "serving 2 hooks", "MAINPID": str(os.getpid())}
    assert reloading.keys() == {"RELOADING", "MONOTONIC_USEC"}
    assert before <= int(reloading["MONOTONIC_USEC"]) <= monotonic_usec()
    assert status == {"STATUS": "reloaded"}
    assert ping == {"WATCHDOG": "1"}
    assert stopping == {"STOPPING": "1", "STATUS": "draining"}


def test_an_abstract_socket_name_is_reached_by_its_at_sign() -> None:
    name = f"@gatewayd-test-{os.getpid()}-{id(object())}"
    listener = NotifySocket(name)
    notifier = Notifier({"NOTIFY_SOCKET": name})
    try:
        assert notifier.address == "\0" + name[1:]
        assert notifier.ready("up")
        listener.wait_for("READY")
    finally:
        notifier.close()
        listener.close()


def test_no_socket_is_a_no_op_and_a_relative_one_is_named_with_the_fix() -> None:
    assert not Notifier({}).enabled
    assert Notifier({}).ready("up") is False
    with capture_logs() as logs:
        relative = Notifier({"NOTIFY_SOCKET": "run/notify"})
    assert not relative.enabled
    [warning] = logs
    assert warning["event"] == "sd_notify.bad_socket"
    assert warning["notify_socket"] == "run/notify" and "absolute path" in warning["fix"]


def test_a_socket_gone_is_logged_once_and_never_raised(tmp_path: Path) -> None:
    listener = NotifySocket(str(tmp_path / "notify"))
    notifier = Notifier({"NOTIFY_SOCKET": listener.address})
    assert notifier.ready("up")
    listener.close()  # systemd's end went away: the path is gone
    with capture_logs() as logs:
        assert notifier.watchdog() is False
        assert notifier.watchdog() is False
    assert [entry["event"] for entry in logs] == ["sd_notify.failed"]
    assert logs[0]["message"] == "WATCHDOG=1"
    again = NotifySocket(listener.address)  # back: sent again, and a later loss logged again
    try:
        assert notifier.status("back")
        again.wait_for("STATUS", "back")
    finally:
        again.close()
        notifier.close()


@pytest.mark.parametrize(
    ("env", "interval"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "3000000"}, 1.5),
        ({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}, 1.5),
        ({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}, None),  # another process's
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
    ],
)
def test_the_watchdog_pings_at_half_its_period(env: dict[str, str], interval: float | None) -> None:
    with capture_logs() as logs:
        assert watchdog_interval(env) == interval
    bad = env.get("WATCHDOG_USEC") == "soon"
    assert [entry["event"] for entry in logs] == (["sd_notify.bad_watchdog_usec"] if bad else [])


def test_the_watchdog_loop_pings_until_cancelled(tmp_path: Path) -> None:
    listener = NotifySocket(str(tmp_path / "notify"))
    notifier = Notifier({"NOTIFY_SOCKET": listener.address})

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watchdog_loop, notifier, 0.01)
            await anyio.to_thread.run_sync(lambda: listener.wait_for("WATCHDOG", after=2))
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        notifier.close()
        listener.close()
    assert len(listener.messages) >= 3
