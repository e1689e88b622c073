"""Files and permissions are safe under any umask and any root.

A real ``gatewayd run`` (and the real CLI) as root: a umask of 000, hook files another user may
write, a symlink where the lock file goes, a config edited by root for a daemon user, a trigger
whose context points a bundled hook elsewhere, and a config file deleted under a running daemon.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import gatewayd
from tests.support.control import Control
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until, write_config

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def hook_status(control: Control) -> dict[str, dict[str, Any]]:
    return {h["name"]: h for h in control.ok("hooks")["hooks"]}


def test_state_and_workspace_dirs_are_private_under_umask_000(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    state = state_dir / "fresh" / "state"
    daemon = start_daemon(
        env={"ELIZA_STATE_DIR": str(state)},
        prefix=["sh", "-c", 'umask 000; exec "$@"', "sh"],
    )
    with Control(state / "run" / "gatewayd.sock") as control:
        control.ok("message", sessionKey="s", text="/new")  # sessions, logs, memory
    for directory in (
        state_dir / "fresh",
        state,
        state / "run",
        state / "workspace",
        state / "sessions",
        state / "logs",
    ):
        assert mode(directory) == 0o700, f"{directory}: {mode(directory):o}"
    for transcript in (state / "sessions").iterdir():
        assert mode(transcript) & 0o077 == 0, transcript
    assert daemon.stop() == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_hook_files_other_users_may_write_are_refused(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "tidy")
    loose = write_hook(hooks, "loose")
    (loose / "handler.py").chmod(0o666)
    foreign = write_hook(hooks, "foreign")
    os.chown(foreign / "handler.py", NOBODY, NOBODY)
    shared = state_dir / "shared"
    write_hook(shared, "in-shared-root")
    shared.chmod(0o775)
    daemon = start_daemon({"hooks": {"load": {"extraDirs": [str(shared)]}}})
    with daemon.control() as control:
        listing = hook_status(control)
    assert listing["tidy"]["status"] == "ready"
    reasons = {name: " ".join(listing[name]["reasons"]) for name in listing}
    assert listing["loose"]["status"] == "failed"
    assert "writable by other users (mode 666)" in reasons["loose"]
    assert listing["foreign"]["status"] == "failed"
    assert f"owned by uid {NOBODY}" in reasons["foreign"]
    assert listing["in-shared-root"]["status"] == "failed"
    assert f"its directory {shared} is writable by other users" in reasons["in-shared-root"]
    assert daemon.stop() == 0


def test_the_lock_file_is_never_opened_through_a_symlink(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    victim = state_dir / "precious.txt"
    victim.write_text("do not truncate me\n")
    run = state_dir / "run"
    run.mkdir(mode=0o700)
    (run / "gatewayd.sock.lock").symlink_to(victim)
    daemon = start_daemon(wait_ready=False)
    assert daemon.wait() == 1
    assert "is a symbolic link, which gatewayd never follows" in daemon.stderr_text()
    assert victim.read_text() == "do not truncate me\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_config_edit_as_root_keeps_the_owner_and_mode(state_dir: Path) -> None:
    config = write_config(state_dir, {"logging": {"level": "info"}})
    os.chown(config, NOBODY, NOBODY)
    config.chmod(0o640)
    done = gatewayd(state_dir, "hooks", "disable", "command-logger")
    assert done.returncode == 0, done.stderr
    st = config.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o640)
    assert "command-logger" in config.read_text()


def test_a_trigger_cannot_point_session_memory_outside_the_state_dir(
    start_daemon: StartDaemon, state_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = elsewhere / "not-a-transcript.jsonl"
    planted.write_text(json.dumps({"role": "user", "content": "private notes"}) + "\n")
    daemon = start_daemon()
    with daemon.control() as control:
        control.ok(
            "trigger",
            event="command:new",
            sessionKey="s",
            context={
                "previousSessionEntry": {"sessionId": "x", "sessionFile": str(planted)},
                "workspaceDir": str(elsewhere),
            },
        )
        control.ok(
            "trigger",
            event="command:new",
            sessionKey="s",
            context={"previousSessionEntry": {"sessionId": "../../etc/passwd"}},
        )
    refused = daemon.wait_log("session_memory.refused")
    assert "outside the sessions dir" in refused["reason"]
    # The log is read from the daemon's stderr on a thread: the second line may follow later.
    wait_until(lambda: len(daemon.events("session_memory.refused")) == 2, what="the second refusal")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["not-a-transcript.jsonl"]
    assert not (state_dir / "workspace" / "memory").exists()
    assert daemon.stop() == 0


def test_deleting_the_config_file_keeps_disabled_hooks_disabled(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    write_hook(state_dir / "hooks", "probe")
    daemon = start_daemon({"hooks": {"entries": {"probe": {"enabled": False}}}})
    (state_dir / "gatewayd.yaml").unlink()
    with daemon.control() as control:
        reply = control.request("reload")
        assert reply["ok"] is False and reply["error"]["code"] == "reload_refused", reply
        assert "was deleted" in reply["error"]["message"]
        assert hook_status(control)["probe"]["status"] == "disabled"
    assert daemon.wait_log("config.deleted")["path"] == str(state_dir / "gatewayd.yaml")
    assert daemon.stop() == 0
