"""gatewayd as a real systemd service: systemd 252 as PID 1 in a container, the unit written by
``gatewayd install-service``, and every behaviour the unit promises exercised for real.

One container serves the whole module (booting systemd costs seconds); the tests run in file
order and each starts by putting the service in the state it needs.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator

import pytest

import gatewayd
from tests.container.e2e_docker import (
    REPO,
    SYSTEMD_RUN_OPTS,
    Container,
    SystemdImage,
    wait_until,
)

pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    # One worker for this module (its unit and container are module-scoped); the Docker image
    # module has a group of its own, so the two run side by side once the images are built.
    pytest.mark.xdist_group("container-systemd"),
]

UNIT = "gatewayd.service"
STATE = "/var/lib/gatewayd"
VENV = "/opt/gatewayd"
GATEWAYD = f"{VENV}/bin/gatewayd"
UNIT_DIR = "/etc/systemd/system"


class Service:
    """The container and the questions the tests ask it."""

    def __init__(self, ctr: Container) -> None:
        self.ctr = ctr

    def systemctl(self, *args: str, check: bool = True) -> str:
        return self.ctr.exec("systemctl", *args, check=check, timeout=120).stdout.strip()

    def show(self, *props: str) -> dict[str, str]:
        out = self.systemctl("show", UNIT, *(f"--property={p}" for p in props))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def gatewayd(self, *args: str, check: bool = True) -> str:
        done = self.ctr.exec(
            GATEWAYD, *args, env=[f"ELIZA_STATE_DIR={STATE}"], check=check, timeout=60
        )
        return done.stdout

    def status(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.gatewayd("status", "--json"))
        return data

    def reply(self, text: str, session: str = "e2e") -> str:
        done = self.ctr.exec(
            GATEWAYD,
            "send",
            text,
            "--session",
            session,
            env=[f"ELIZA_STATE_DIR={STATE}"],
            check=False,
            timeout=60,
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    def journal(self, invocation: str) -> str:
        return self.ctr.exec(
            "journalctl",
            "--no-pager",
            "--output=cat",
            f"_SYSTEMD_INVOCATION_ID={invocation}",
            check=False,
        ).stdout

    def write_hook(self, name: str, events: list[str], handler: str) -> None:
        hook_md = f"---\nname: {name}\nmetadata: {{eliza: {{events: {json.dumps(events)}}}}}\n---\n"
        self.ctr.write_file(f"{STATE}/hooks/{name}/HOOK.md", hook_md)
        self.ctr.write_file(f"{STATE}/hooks/{name}/handler.py", textwrap.dedent(handler))

    def diagnostics(self) -> str:
        """What systemd and the daemon say: unit state, status, the hooks dir, the journal."""
        state = self.systemctl("status", UNIT, "--no-pager", "--lines=0", check=False)
        status = self.gatewayd("status", "--json", check=False)
        listing = self.ctr.exec("ls", "-laR", f"{STATE}/hooks", check=False).stdout
        journal = self.ctr.exec(
            "journalctl", "--no-pager", "--unit", UNIT, "--output=cat", "--lines=40", check=False
        ).stdout
        return f"{state}\nstatus: {status}\nhooks:\n{listing}\njournal:\n{journal}"

    def ensure_active(self) -> None:
        if self.show("ActiveState")["ActiveState"] != "active":
            self.systemctl("reset-failed", UNIT, check=False)
            self.systemctl("start", UNIT)

    def main_pid(self) -> int:
        return int(self.show("MainPID")["MainPID"])


# As docs/operations.md's systemd section installs it (a venv at /opt/gatewayd, `pip install` of
# the package, without the [node] extra), from this checkout's wheel; pip keeps no cache.
INSTALL = f'python3 -m venv {VENV} && {VENV}/bin/pip install --quiet "$1" && {GATEWAYD} --version'
INSTALL_ENV = ("PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1")


@pytest.fixture(scope="module")
def svc(systemd_image: SystemdImage) -> Iterator[Service]:
    """A booted systemd container with gatewayd installed in a venv at ``/opt/gatewayd`` from
    this checkout's wheel, and the unit installed by ``gatewayd install-service``."""
    wheel = systemd_image.wheel
    ctr = Container.run(
        systemd_image.image,
        "gatewayd-e2e-systemd",
        *SYSTEMD_RUN_OPTS,
        f"--volume={wheel.parent}:/wheels:ro",
    )
    try:
        # The stand-in base image has "/" at 0700 (see ensure_traversable_root): the service's
        # dynamic user could not reach /opt. A real Debian system has 0755.
        ctr.exec("chmod", "0755", "/")
        state = wait_until(
            lambda: (
                ctr.exec(
                    "systemctl", "is-system-running", "--wait", check=False, timeout=120
                ).stdout.strip()
                in ("running", "degraded")
                or None
            ),
            120,
            "systemd to finish booting",
        )
        assert state
        # After the boot: systemd mounts a fresh /tmp while it boots, under pip's feet.
        installed = ctr.exec(
            "sh", "-c", INSTALL, "sh", f"/wheels/{wheel.name}", env=INSTALL_ENV, timeout=600
        )
        assert installed.stdout.strip() == f"gatewayd {gatewayd.__version__}", installed.stdout
        out = ctr.exec(GATEWAYD, "install-service").stdout
        assert f"wrote {UNIT_DIR}/{UNIT}" in out
        yield Service(ctr)
    finally:
        ctr.remove()


def test_install_service_writes_the_repository_unit_with_this_interpreter(svc: Service) -> None:
    installed = svc.ctr.exec("cat", f"{UNIT_DIR}/{UNIT}").stdout
    template = (REPO / "systemd" / UNIT).read_text()
    assert re.search(r"^ExecStart=/opt/gatewayd/bin/gatewayd run$", installed, re.MULTILINE)
    strip = re.compile(r"^ExecStart=.*$", re.MULTILINE)
    assert strip.sub("", installed) == strip.sub("", template)
    # systemd 252 here: no Type=notify-reload drop-in.
    assert svc.ctr.exec(
        "test", "-e", f"{UNIT_DIR}/{UNIT}.d/notify-reload.conf", check=False
    ).returncode


def test_enable_start_reaches_active_through_ready(svc: Service) -> None:
    svc.systemctl("enable", "--now", UNIT)  # Type=notify: returns once READY=1 arrived
    props = svc.show("ActiveState", "SubState", "Type", "MainPID", "StatusText")
    assert (props["ActiveState"], props["SubState"], props["Type"]) == (
        "active",
        "running",
        "notify",
    )
    pid = props["MainPID"]
    uid = svc.ctr.exec("stat", "-c", "%u", f"/proc/{pid}").stdout.strip()
    assert uid != "0", "the daemon must not run as root"
    status = svc.status()
    assert status["pid"] == int(pid)
    # The sandbox leaves the state dir writable: the control socket and the run dir are there.
    assert svc.ctr.exec("test", "-S", f"{STATE}/run/gatewayd.sock", check=False).returncode == 0


def test_a_dropped_in_hook_replies_and_an_edit_changes_the_reply(svc: Service) -> None:
    svc.ensure_active()
    handler = "async def handler(event):\n    event.messages.append('greeter {v}')\n"
    svc.write_hook("greeter", ["command:new"], handler.format(v="v1"))
    wait_until(
        lambda: "greeter v1" in svc.reply("/new"),
        60,
        "the new hook's reply",
        explain=svc.diagnostics,
    )
    svc.write_hook("greeter", ["command:new"], handler.format(v="v2"))
    wait_until(
        lambda: "greeter v2" in svc.reply("/new"),
        60,
        "the edited hook's reply",
        explain=svc.diagnostics,
    )
    assert svc.show("ActiveState")["ActiveState"] == "active"


def test_a_hook_error_reaches_the_journal_at_priority_err(svc: Service) -> None:
    # The daemon prefixes each line with its syslog priority under JOURNAL_STREAM (<3> error).
    svc.ensure_active()
    svc.write_hook(
        "boomer", ["command:boom"], "async def handler(event):\n    raise KeyError('x')\n"
    )
    try:

        def errors() -> str:
            svc.reply("/boom")
            return svc.ctr.exec(
                "journalctl", "--no-pager", "--unit", UNIT, "-p", "err", "--output=cat", check=False
            ).stdout

        wait_until(lambda: '"hook": "boomer"' in errors() or None, 60, "hook.error at -p err")
        lines = errors().splitlines()
        assert any('"event": "hook.error"' in line for line in lines)
        assert not any('"event": "gateway.ready"' in line for line in lines), "info is not err"
    finally:
        svc.ctr.exec("rm", "-rf", f"{STATE}/hooks/boomer", check=False)


def test_systemctl_reload_keeps_it_active_and_reloads(svc: Service) -> None:
    svc.ensure_active()
    pid, before = svc.main_pid(), svc.status()["reloads"]
    assert isinstance(before, int)
    svc.systemctl("reload", UNIT)
    wait_until(
        lambda: svc.status()["reloads"] == before + 1,
        60,
        "the SIGHUP reload to finish",
        explain=svc.diagnostics,
    )
    assert svc.show("ActiveState")["ActiveState"] == "active"
    assert svc.main_pid() == pid, "a reload must not restart the process"


def test_kill_9_is_followed_by_a_restart(svc: Service) -> None:
    svc.ensure_active()
    # The hook whose reply proves the restarted daemon loaded its hooks: written here, so the
    # test does not lean on the edit test having run before it.
    handler = "async def handler(event):\n    event.messages.append('greeter v2')\n"
    svc.write_hook("greeter", ["command:new"], handler)
    wait_until(lambda: "greeter v2" in svc.reply("/new"), 60, "the greeter hook to load")
    pid, restarts = svc.main_pid(), int(svc.show("NRestarts")["NRestarts"])
    svc.ctr.exec("kill", "-9", str(pid))

    def restarted() -> bool:
        props = svc.show("ActiveState", "MainPID", "NRestarts")
        return (
            props["ActiveState"] == "active"
            and props["MainPID"] not in ("0", str(pid))
            and int(props["NRestarts"]) == restarts + 1
        )

    wait_until(restarted, 90, "systemd to restart the killed daemon", explain=svc.diagnostics)
    assert "greeter v2" in svc.reply("/new"), "the restarted daemon loads the hooks again"


def test_the_watchdog_restarts_a_daemon_whose_loop_is_blocked(svc: Service) -> None:
    dropin = f"{UNIT_DIR}/{UNIT}.d/50-e2e-watchdog.conf"
    svc.ctr.write_file(dropin, "[Service]\nWatchdogSec=2s\n")
    try:
        svc.systemctl("daemon-reload")
        svc.systemctl("reset-failed", UNIT, check=False)
        svc.systemctl("restart", UNIT)
        # A realistic mistake: blocking I/O in an async handler stops the event loop.
        svc.write_hook(
            "blocker",
            ["command:arm", "command:block"],
            """\
            import time

            async def handler(event):
                if event.action == "arm":
                    event.messages.append("armed")
                else:
                    time.sleep(60)
            """,
        )
        wait_until(
            lambda: "armed" in svc.reply("/arm"),
            60,
            "the blocker hook to load",
            explain=svc.diagnostics,
        )
        pid, invocation = svc.main_pid(), svc.show("InvocationID")["InvocationID"]
        # The loop may block before the "queued" reply is written: then the client sees the
        # connection close when the watchdog kills the daemon. Either way the event is in.
        posted = svc.ctr.exec(
            GATEWAYD,
            "trigger",
            "command:block",
            "--session",
            "blocker",
            "--no-wait",
            env=[f"ELIZA_STATE_DIR={STATE}"],
            check=False,
            timeout=120,
        )
        assert posted.returncode == 0 or "closed the connection" in posted.stderr, posted.stderr
        wait_until(
            lambda: (
                svc.main_pid() not in (0, pid)
                and svc.show("ActiveState")["ActiveState"] == "active"
            ),
            90,
            "the watchdog to kill and systemd to restart the blocked daemon",
            explain=svc.diagnostics,
        )
        assert (
            "Watchdog timeout"
            in svc.ctr.exec(
                "journalctl", "--no-pager", "--unit", UNIT, "--output=cat", check=False
            ).stdout
        )
        assert svc.journal(invocation), "the blocked invocation logged before it stopped"
    finally:
        svc.ctr.exec("rm", "-rf", dropin, f"{STATE}/hooks/blocker")
        svc.systemctl("daemon-reload")
        # The restarted daemon may still be blocked by the redelivered event (the journal keeps
        # it until it finishes or is dead-lettered): end that instance, so the next test starts
        # from a daemon without the blocker hook.
        svc.systemctl("kill", "--signal=KILL", UNIT, check=False)
        svc.systemctl("reset-failed", UNIT, check=False)
        svc.systemctl("restart", UNIT, check=False)


def test_systemctl_stop_exits_cleanly_with_the_shutdown_line(svc: Service) -> None:
    svc.ensure_active()
    invocation = svc.show("InvocationID")["InvocationID"]
    svc.systemctl("stop", UNIT)
    props = svc.show("ActiveState", "Result", "ExecMainStatus")
    assert (props["ActiveState"], props["Result"], props["ExecMainStatus"]) == (
        "inactive",
        "success",
        "0",
    )
    wait_until(lambda: "shutdown on SIGTERM" in svc.journal(invocation), 30, "the shutdown line")


def test_a_broken_config_leaves_the_unit_failed_not_restarting(svc: Service) -> None:
    svc.ctr.write_file(f"{STATE}/gatewayd.yaml", "gateway:\n  startupHookDelayMs: soon\n")
    try:
        svc.systemctl("stop", UNIT, check=False)  # a running unit would make `start` a no-op
        svc.systemctl("reset-failed", UNIT, check=False)
        started = svc.ctr.exec("systemctl", "start", UNIT, check=False, timeout=120)
        assert started.returncode != 0
        props = svc.show("ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")
        # A scheduled restart would show as activating/auto-restart; failed means none is coming.
        assert props == {
            "ActiveState": "failed",
            "SubState": "failed",
            "Result": "exit-code",
            "ExecMainStatus": "78",
            "NRestarts": "0",
        }
        invocation = svc.show("InvocationID")["InvocationID"]
        assert "startupHookDelayMs" in svc.journal(invocation)
    finally:
        svc.ctr.exec("rm", "-f", f"{STATE}/gatewayd.yaml")


def test_the_user_unit_runs_under_a_lingering_users_manager(svc: Service) -> None:
    ctr = svc.ctr
    ctr.exec("useradd", "--create-home", "alice")
    ctr.exec("loginctl", "enable-linger", "alice")
    uid = ctr.exec("id", "-u", "alice").stdout.strip()
    manager = f"/run/user/{uid}/systemd/private"
    wait_until(
        lambda: ctr.exec("test", "-S", manager, check=False).returncode == 0,
        60,
        "alice's user manager",
    )
    env = ["HOME=/home/alice", f"XDG_RUNTIME_DIR=/run/user/{uid}"]
    out = ctr.exec(GATEWAYD, "install-service", "--user", "--now", user="alice", env=env).stdout
    assert "wrote /home/alice/.config/systemd/user/gatewayd.service" in out
    active = ctr.exec("systemctl", "--user", "is-active", UNIT, user="alice", env=env)
    assert active.stdout.strip() == "active"
    status = ctr.exec(GATEWAYD, "status", "--json", user="alice", env=env).stdout
    assert json.loads(status)["channels"][0]["address"] == "/home/alice/.eliza/run/gatewayd.sock"
    ctr.exec("systemctl", "--user", "stop", UNIT, user="alice", env=env, timeout=120)
