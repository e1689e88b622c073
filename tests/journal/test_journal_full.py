"""A full disk under the journal: each poster waits ``fullWaitMs`` at most, and a refused message
leaves nothing behind.

On main an event posted while an earlier batch was waiting out its ``fullWaitMs`` waited for
that, then for a ``fullWaitMs`` of its own (a message, twice), and a message whose events were
refused had created its session all the same. The journal's clock is made a test's own here
(``time.monotonic`` in :mod:`gatewayd.journal.group`), so the deadlines are checked, not timed.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import types
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.journal import group
from gatewayd.journal.base import Journal, JournalFull
from gatewayd.journal.sqlite import SqliteJournal
from tests.journal.backends import SqliteStore, fill, running
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

WAIT_S = 10.0
"""``fullWaitMs`` on the journal's own clock."""


class Clock:
    """``time`` for the group commit, its ``monotonic`` moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def module(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(monotonic=lambda: self.now, time=time.time)


class SlowlyFullStore(SqliteStore):
    def journal(self, *, retain_done: int = 0) -> Journal:
        return SqliteJournal(self.path, base=dict, retain_done=retain_done, full_wait_s=WAIT_S)


@pytest.mark.anyio
async def test_an_event_waits_full_wait_ms_from_its_own_post_not_after_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(group, "time", clock.module())
    store = SlowlyFullStore(tmp_path)
    store.limit()
    outcome: dict[str, BaseException | None] = {}
    try:
        async with running(store) as run:
            await run.post("s", 0)
            with store.full():

                async def post(name: str, session: str) -> None:
                    try:
                        await run.post(session, name)
                        outcome[name] = None
                    except JournalFull as exc:
                        outcome[name] = exc

                async with anyio.create_task_group() as tg:
                    tg.start_soon(post, "a", "s1")
                    await run.until(lambda: run.journal.stats()["full"], "the disk full")
                    clock.now += WAIT_S / 2
                    tg.start_soon(post, "b", "s2")  # behind a, while a waits
                    await anyio.sleep(0.2)
                    clock.now += WAIT_S / 2 + 1  # a's deadline passed, b's not yet
                    await run.until(lambda: "a" in outcome, "a refused")
                    assert "b" not in outcome, outcome  # b still has time of its own
                    clock.now += WAIT_S / 2  # b's own deadline passed: refused now
                    await run.until(lambda: "b" in outcome, "b refused at its own deadline")
    finally:
        store.close()
    assert isinstance(outcome["a"], JournalFull) and isinstance(outcome["b"], JournalFull)


RECEIVED = """
async def handler(event):
    pass
"""


def message(sock: Path, session: str, text: str) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(60)
        s.connect(str(sock))
        s.sendall(
            json.dumps({"id": 1, "op": "message", "sessionKey": session, "text": text}).encode()
            + b"\n"
        )
        data = b""
        while not data.endswith(b"\n"):
            data += s.recv(1 << 16)
    reply: dict[str, Any] = json.loads(data)
    return reply


def test_a_message_refused_for_a_full_disk_creates_no_session(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    journal = state_dir / "journal"
    journal.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(journal)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        # A hook hears session and command events (journaled), none message:received.
        write_hook(state_dir / "hooks", "hears", events=["session", "command"], handler=RECEIVED)
        daemon = start_daemon({"gateway": {"queue": {"fullWaitMs": 300}}})
        sock = state_dir / "run" / "gatewayd.sock"
        with daemon.control() as ctl:
            sessions = ctl.ok("status")["status"]["sessions"]
        filler = fill(journal)
        try:
            reply = message(sock, "agent:main:new-one", "/hello")
            assert reply["ok"] is False and reply["error"]["code"] == "journal_full", reply
            with daemon.control() as ctl:
                assert ctl.ok("status")["status"]["sessions"] == sessions
        finally:
            filler.unlink()
        # With room again, the same message starts its session.
        assert message(sock, "agent:main:new-one", "/hello")["ok"] is True
        with daemon.control() as ctl:
            assert ctl.ok("status")["status"]["sessions"] == sessions + 1
        assert daemon.stop() == 0
    finally:
        subprocess.run(["umount", "-l", str(journal)], check=False, capture_output=True)
