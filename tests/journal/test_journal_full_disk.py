"""A full filesystem under the journal: producers wait, then get ``journal_full``; no corruption.

The journal directory is a small tmpfs (``mount -t tmpfs -o size=...``, as root; skipped with
the reason where mounting is refused). A filler file takes the rest of its space; triggers then
wait ``gateway.queue.fullWaitMs`` and fail with the error ``journal_full`` while the daemon keeps
answering ``status`` (which says ``full``). With the filler gone, triggers are accepted and
dispatched again; after a restart the journal opens cleanly (not set aside) and nothing accepted
is pending twice.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journal.journal_support import read_records, recording_hook
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def small_fs(state_dir: Path) -> Iterator[Path]:
    """``<state>/journal`` as a 2 MiB tmpfs, unmounted afterwards."""
    target = state_dir / "journal"
    target.mkdir(mode=0o700)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs was refused here: {proc.stderr.strip() or proc.returncode}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def fill(directory: Path) -> Path:
    """Write a file until the filesystem is full; return it."""
    filler = directory / "filler"
    block = b"\0" * 65536
    with filler.open("wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with contextlib.suppress(OSError), filler.open("ab") as f:  # the last partial block
        while True:
            f.write(b"\0" * 512)
            f.flush()
    return filler


def test_a_full_disk_makes_producers_wait_then_fail_clearly(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook, small_fs: Path
) -> None:
    write_hook(state_dir / "hooks", "rec", events=["command:work"], handler=recording_hook())
    config = {
        "gateway": {"queue": {"fullWaitMs": 500}},
        "hooks": {"entries": {"command-logger": {"enabled": False}}},
    }
    daemon = start_daemon(config)
    with daemon.control() as control:
        control.ok("trigger", event="command:work", sessionKey="s", context={"n": 0})
        filler = fill(small_fs)
        refused = None
        for n in range(1, 200):  # until the WAL cannot grow: then every post is refused
            reply = control.request(
                "trigger", event="command:work", sessionKey="s", context={"n": n}, wait=False
            )
            if not reply["ok"]:
                refused = reply
                break
        assert refused is not None, "the journal never ran out of space"
        assert refused["error"]["code"] == "journal_full", refused
        assert "full" in refused["error"]["message"] and "free space" in refused["error"]["message"]
        status = control.ok("status")["status"]
        assert status["state"] == "running" and status["queue"]["journal"]["full"] is True
        assert status["queue"]["journal"]["refused"] >= 1
        daemon.wait_log("journal.full")

        filler.unlink()
        control.ok("trigger", event="command:work", sessionKey="s", context={"n": 1000})
        daemon.wait_log("journal.space_recovered")
        status = control.ok("status")["status"]["queue"]["journal"]
        assert status["full"] is False
    accepted_last = 1000
    wait_until(
        lambda: any(r["n"] == accepted_last for r in read_records(state_dir)),
        what="the event after the disk had room again",
    )
    assert daemon.stop() == 0

    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("status")["status"]["queue"]["journal"]["pending"] == 0
    assert not daemon.events("journal.set_aside")
    assert not list(small_fs.glob("*.damaged-*"))
    assert daemon.stop() == 0
    ns = [r["n"] for r in read_records(state_dir)]
    assert ns == sorted(ns) and len(ns) == len(set(ns))  # in order, nothing twice
