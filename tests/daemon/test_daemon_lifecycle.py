"""``gatewayd run`` from start to exit: start order, gateway:startup, refusal, shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import time
from pathlib import Path

import pytest

from tests.support.cli import gatewayd
from tests.support.control import Control
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook, recorder
from tests.support.state import parse_ts, read_records, wait_until, write_config


def test_start_order_and_startup_delay(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "startup-probe",
        events=["gateway:startup"],
        handler=recorder(
            keep=("workspaceDir", "cfg"),
            reply="record['gateway'] = None",
        )
        + """
    gw = event.context.get("gateway")
    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "gateway.txt"), "w") as f:
        f.write(" ".join([
            type(gw).__name__,
            str(callable(getattr(gw, "deliver", None))),
            str(hasattr(gw, "registry") or hasattr(gw, "config")),
        ]))
""",
    )
    daemon = start_daemon()
    _, ready_at, ready = daemon.notify.wait_for("READY")
    assert ready["STATUS"].startswith("running: "), ready
    assert ready["MAINPID"] == str(daemon.proc.pid)

    records = wait_until(lambda: read_records(state_dir), what="the gateway:startup hook")
    # Start order: hooks loaded -> channels up -> ready, then the startup event.
    assert (
        daemon.log_index("hooks.loaded")
        < daemon.log_index("channels.up")
        < daemon.log_index("gateway.ready")
    )
    channels_up = parse_ts(daemon.wait_log("channels.up")["timestamp"])
    fired = records[0]["t"]
    # 250 ms after every channel listens (1 ms of slack for the loop's clock resolution),
    # and a generous upper bound only to catch "never" or "much later".
    assert 0.249 <= fired - channels_up < 10.0, fired - channels_up
    assert fired > ready_at  # READY=1 was sent before the startup hook ran
    assert records[0]["key"] == "gateway:startup"
    assert records[0]["session"] == "gateway:startup"
    assert records[0]["ctx"]["workspaceDir"] == str(state_dir / "workspace")
    assert records[0]["ctx"]["cfg"]["gateway"]["startupHookDelayMs"] == 250
    # A handle with what a hook may do (deliver), not the daemon's internals.
    assert (state_dir / "gateway.txt").read_text() == "HookGateway True False"

    with daemon.control() as control:
        status = control.ok("status")["status"]
    assert status["startup_fired"] is True
    assert status["pid"] == daemon.proc.pid
    assert status["channels"][0]["listening"] is True
    assert status["hooks"]["registered"] >= 1
    assert daemon.stop() == 0


def test_a_client_filling_the_startup_session_does_not_end_the_daemon(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """A client may post to the session ``gateway:startup`` too. With that session full when
    the gateway posted its own event, the QueueFull (after ``perSessionWaitMs``) left the
    startup task and ended the daemon. The gateway's event is not held by the per-session
    bound: it is accepted and its hooks run once the session's slow events are done."""
    hooks = state_dir / "hooks"
    # The client's event must be in the session before the gateway posts its own (2 s after
    # the channels listen), and still dispatching then (3 s): with a delay of 0.5 s the time
    # from READY to the trigger alone outlasted it at a load average of 10, and the gateway's
    # event ran first.
    write_hook(
        hooks, "slow", events=["command:slow"], handler=recorder(before="await asyncio.sleep(3)")
    )
    write_hook(hooks, "startup-probe", events=["gateway:startup"], handler=recorder())
    queue = {"perSessionMax": 1, "perSessionWaitMs": 100}
    daemon = start_daemon({"gateway": {"startupHookDelayMs": 2000, "queue": queue}})
    with daemon.control() as control:
        # Dispatching for three seconds: the session is full until then.
        control.ok("trigger", event="command:slow", sessionKey="gateway:startup", wait=False)
    records = wait_until(
        lambda: len(found := read_records(state_dir)) == 2 and found, what="both hooks to run"
    )
    assert [r["key"] for r in records] == ["command:slow", "gateway:startup"]
    with daemon.control() as control:
        assert control.ok("status")["status"]["startup_fired"] is True
    assert daemon.stop() == 0


def test_invalid_config_lists_every_error_and_exits_78(state_dir: Path) -> None:
    write_config(
        state_dir,
        {"gateway": {"queue": {"capacity": 0}}, "hooks": {"timeoutMs": "soon"}, "bogus": 1},
    )
    proc = gatewayd(state_dir, "run")
    assert proc.returncode == 78, proc.stderr
    assert "gateway.queue.capacity" in proc.stderr
    assert "hooks.timeoutMs" in proc.stderr
    assert "bogus" in proc.stderr
    assert not (state_dir / "run" / "gatewayd.sock").exists()


def test_socket_is_private(start_daemon: StartDaemon, state_dir: Path) -> None:
    (state_dir / "run").mkdir(mode=0o755)  # the default dir, too open: tightened
    daemon = start_daemon()
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    assert daemon.stop() == 0
    assert not daemon.socket.exists()  # removed on a clean exit

    # A directory the config names is the admin's: never chmod-ed, only warned about.
    shared = state_dir / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    again = start_daemon({"gateway": {"control": {"socket": str(shared / "gw.sock")}}})
    assert stat.S_IMODE((shared / "gw.sock").stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    again.wait_log("control.dir_shared", directory=str(shared))
    assert again.stop() == 0


def test_second_daemon_is_refused_and_stale_socket_replaced(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    # A crashed daemon's leftover: a socket file nobody listens on.
    run = state_dir / "run"
    run.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(run / "gatewayd.sock"))
    stale.close()

    first = start_daemon()
    first.wait_log("control.stale_socket_removed")
    second = start_daemon(wait_ready=False)
    assert second.wait(timeout=60) == 1
    assert "already running" in second.stderr_text()
    assert str(first.proc.pid) in second.stderr_text()
    # The first daemon still owns its socket and answers.
    with first.control() as control:
        assert control.ok("ping")["pong"] is True
    assert first.stop() == 0


def test_peer_credentials_other_uid_is_forbidden(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root: only root can connect as another uid to test SO_PEERCRED")
    daemon = start_daemon()
    # Open the filesystem gate on purpose, so only the peer-credential check stands.
    state_dir.chmod(0o755)
    daemon.socket.parent.chmod(0o755)
    daemon.socket.chmod(0o666)
    # A forked child drops to uid 65534 (nobody) and asks for a ping.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plain syscalls only, then _exit
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(20)
            sock.connect(str(daemon.socket))
            # The daemon may refuse and close before the request is written: read regardless.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b'{"id": 1, "op": "ping"}\n')
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            os.write(write_end, reply or b"EOF")
        except BaseException as exc:
            os.write(write_end, f"child failed: {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    assert '"forbidden"' in answer, answer
    assert "pong" not in answer
    daemon.wait_log("control.forbidden", peer_uid=65534)
    assert daemon.stop() == 0


def test_sigterm_with_a_full_queue_loses_nothing_accepted(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "slow-recorder",
        events=["command:work"],
        handler=recorder(keep=("n",), before="await asyncio.sleep(0.005)"),
    )
    daemon = start_daemon({"gateway": {"queue": {"capacity": 16, "concurrency": 2}}})
    clients = [daemon.control() for _ in range(4)]
    per_client = 100
    for c, control in enumerate(clients):
        lines = b"".join(
            json.dumps(
                {
                    "id": c * 1000 + i,
                    "op": "trigger",
                    "event": "command:work",
                    "sessionKey": f"s{c}",
                    "context": {"n": c * 1000 + i},
                    "wait": False,
                }
            ).encode()
            + b"\n"
            for i in range(per_client)
        )
        control.send_raw(lines)
    accepted: set[int] = set()
    refused = 0
    # Let some events in, then stop while the queue is full and clients are still posting.
    while len(accepted) < 40:
        reply = clients[0].read()
        assert reply is not None and reply["ok"], reply
        accepted.add(reply["id"])
    daemon.send_signal(signal.SIGTERM)
    for control in clients:
        while (reply := control.read()) is not None:
            if reply["ok"]:
                assert reply["queued"] is True
                accepted.add(reply["id"])
            else:
                assert reply["error"]["code"] == "shutting_down", reply
                refused += 1
        control.close()
    assert daemon.wait() == 0
    dispatched = [r["ctx"]["n"] for r in read_records(state_dir)]
    assert len(dispatched) == len(set(dispatched)), "an event was dispatched twice"
    assert set(dispatched) == accepted
    assert len(accepted) < 4 * per_client  # the signal really came while work was pending
    line = daemon.shutdown_line()
    assert line["left"] == 0
    assert line["signal"] == "SIGTERM"
    assert line["dispatched"] >= len(accepted)
    assert line["summary"].startswith("shutdown on SIGTERM - ")
    assert line["summary"].endswith(" - 0 left")
    notify_keys = [fields for _, fields in daemon.notify.messages]
    assert any(f.get("STOPPING") == "1" for f in notify_keys)


def test_drain_deadline_counts_what_is_left(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "very-slow",
        events=["command:work"],
        handler=recorder(keep=("n",), before="await asyncio.sleep(0.3)"),
    )
    daemon = start_daemon({"gateway": {"drainTimeoutMs": 500, "queue": {"concurrency": 1}}})
    with daemon.control() as control:
        for n in range(10):
            control.ok(
                "trigger", event="command:work", sessionKey="one", context={"n": n}, wait=False
            )
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait() == 0
    line = daemon.shutdown_line()
    done = len(read_records(state_dir))
    assert line["left"] > 0
    assert done + line["left"] == 10
    # Left events stay in the (default, durable) journal for the next start; the line says so.
    assert line["summary"].endswith(f" - {line['left']} left - {line['left']} kept in the journal")
    assert line["journaled"] == line["left"]
    daemon.wait_log("shutdown.left", left=line["left"])


def test_gateway_shutdown_fires_and_sigint_is_graceful(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "bye",
        events=["gateway:shutdown"],
        handler=recorder(keep=("reason",)),
    )
    daemon = start_daemon()
    assert daemon.stop(signal.SIGINT) == 0
    records = read_records(state_dir)
    assert [r["key"] for r in records] == ["gateway:shutdown"]
    assert records[0]["ctx"]["reason"] == "SIGINT"
    assert daemon.shutdown_line()["summary"].startswith("shutdown on SIGINT - ")


def test_second_signal_forces_exit(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "stuck",
        events=["gateway:shutdown"],
        handler="import asyncio\n\nasync def handler(event):\n    await asyncio.sleep(3600)\n",
    )
    daemon = start_daemon({"gateway": {"shutdownTimeoutMs": 600000}})
    daemon.send_signal(signal.SIGTERM)
    daemon.wait_log("shutdown.begin")
    time.sleep(0.1)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 1
    line = daemon.shutdown_line()
    assert line["forced"] is True
    assert line["summary"].startswith("forced exit on second SIGTERM")
    assert not Path(daemon.socket).exists()
    # The next daemon starts normally on the same state dir (the lock died with the process).
    again = start_daemon({"gateway": {"shutdownTimeoutMs": 100}})
    with Control(again.socket) as control:
        assert control.ok("ping")["pong"] is True
    assert again.stop() == 0
