"""The suite's fork server (:mod:`tests.support.zygote`) runs ``python -m gatewayd`` as an
exec'd interpreter does: the same exit status, output and error text, input, and the status of a
run a signal ended. Each case runs both ways, in the same state dir, and compares."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import zygote
from tests.support.cli import execd
from tests.support.daemon import Daemon
from tests.support.state import clean_env, write_config

CASES = {
    "no command": ((), None, {}),
    "help": (("--help",), None, {}),
    "config show": (("config", "show"), None, {}),
    "not running": (("status",), None, {}),
    "stdin": (("send", "--session", "s", "-"), "hello", {}),
    "hooks list": (("hooks", "list", "--json"), None, {}),
    "another locale": (("config", "show"), None, {"LC_ALL": "C"}),
}


@pytest.mark.parametrize(("args", "input", "extra"), CASES.values(), ids=CASES.keys())
def test_a_run_is_the_same_forked_or_execd(
    state_dir: Path, args: tuple[str, ...], input: str | None, extra: dict[str, str]
) -> None:
    env = clean_env(state_dir, extra)
    forked = zygote.run(args, env=env, cwd=state_dir, input=input, timeout=60)
    reference = execd(args, env=env, cwd=state_dir, input=input, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        reference.returncode,
        reference.stdout,
        reference.stderr,
    )


def test_a_bad_config_is_the_same_forked_or_execd(state_dir: Path) -> None:
    write_config(state_dir, {"gateway": {"startupHookDelayMs": "soon"}})
    test_a_run_is_the_same_forked_or_execd(state_dir, ("config", "show"), None, {})
    forked = zygote.run(
        ("config", "show"), env=clean_env(state_dir), cwd=state_dir, input=None, timeout=60
    )
    assert forked.returncode == 78, forked  # the case is the one it means to be


@pytest.mark.skipif(not zygote.can_fork(()), reason="GATEWAYD_TESTS_EXEC=1: nothing is forked")
def test_a_daemon_ended_by_a_signal_says_so_as_popen_does(state_dir: Path) -> None:
    daemon = Daemon(state_dir).start()
    try:
        assert isinstance(daemon.proc, zygote.ZygoteChild)
        assert daemon.proc.poll() is None
        daemon.send_signal(signal.SIGKILL)
        assert daemon.wait() == -signal.SIGKILL
        assert daemon.proc.poll() == -signal.SIGKILL
    finally:
        daemon.close()


def test_a_run_that_outlives_its_timeout_is_killed_as_run_does(state_dir: Path) -> None:
    """``gatewayd run`` does not end by itself."""
    env = clean_env(state_dir, {"GATEWAYD_HOOKS__LOAD__WATCH": "false"})
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run(("run",), env=env, cwd=state_dir, input=None, timeout=1.0)
    status = zygote.run(("status",), env=env, cwd=state_dir, input=None, timeout=60)
    assert status.returncode == 1, status  # killed: nothing answers on its socket
