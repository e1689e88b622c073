"""Restarts that are not crashes: SIGTERM with a full queue, and a journal damaged by hand (on
the in-process gateway, the SIGTERM and kill -9 cases on a ``gatewayd run`` process).

* SIGTERM while a slow hook has a full queue and the drain deadline is short: the shutdown line
  counts what was left and says it is kept in the journal; the next daemon dispatches exactly
  those, first and in order, and every accepted event is dispatched.
* A journal garbled or truncated while the daemon was stopped: the next start sets the file
  aside (renamed, ``journal.set_aside`` naming it), starts a new journal and works.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.journal.journal_support import read_records, recording_hook
from tests.support.control import Control
from tests.support.fixtures import StartDaemon, StartGateway
from tests.support.hooks import WriteHook
from tests.support.state import eventually, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NO_LOGGER = {"entries": {"command-logger": {"enabled": False}}}


def post_pipelined(
    socket_path: Path, count: int, accepted: list[int], done: threading.Event
) -> None:
    """Send ``count`` triggers at once and note each ``n`` whose reply says queued."""
    control = Control(socket_path)
    try:
        control.send_raw(
            b"".join(
                json.dumps(
                    {
                        "id": n,
                        "op": "trigger",
                        "event": "command:work",
                        "sessionKey": "one",
                        "context": {"n": n},
                        "wait": False,
                    }
                ).encode()
                + b"\n"
                for n in range(count)
            )
        )
        while (reply := control.read()) is not None:
            if reply.get("ok"):
                accepted.append(reply["id"])
    except OSError:
        pass
    finally:
        control.close()
        done.set()


def test_sigterm_with_a_full_queue_keeps_what_the_deadline_left(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "slow", events=["command:work"], handler=recording_hook(delay_s=0.2))
    config = {
        "gateway": {"drainTimeoutMs": 300, "queue": {"capacity": 4, "concurrency": 1}},
        "hooks": NO_LOGGER,
    }
    daemon = start_daemon(config)
    accepted: list[int] = []
    finished = threading.Event()
    poster = threading.Thread(target=post_pipelined, args=(daemon.socket, 20, accepted, finished))
    poster.start()
    wait_until(lambda: len(accepted) >= 4, what="the queue filling up")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait() == 0
    poster.join(30)
    line = daemon.shutdown_line()
    first = [r["n"] for r in read_records(state_dir)]
    assert line["left"] > 0 and line["journaled"] == line["left"]
    assert line["summary"].endswith(f" - {line['left']} kept in the journal")
    assert len(first) + line["left"] == len(accepted)

    daemon = start_daemon()
    assert daemon.wait_log("journal.recovered")["pending"] == line["left"]
    wait_until(lambda: len(read_records(state_dir)) >= len(accepted), what="the replay")
    assert daemon.stop() == 0
    records = read_records(state_dir)
    second = [r["n"] for r in records[len(first) :]]
    assert first + second == sorted(accepted)  # each once, in order: nothing lost or repeated
    assert {r["pid"] for r in records[len(first) :]} == {daemon.proc.pid}


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["garbled", "truncated"])
async def test_a_damaged_journal_is_set_aside_and_the_daemon_starts(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook, damage: str
) -> None:
    write_hook(state_dir / "hooks", "rec", events=["command:work"], handler=recording_hook())
    daemon = await start_gateway({"gateway": {"queue": {"retainDone": 10000}}, "hooks": NO_LOGGER})
    async with daemon.control() as control:
        for n in range(300):
            await control.ok(
                "trigger", event="command:work", sessionKey=f"s{n % 7}", context={"n": n}
            )
    assert await daemon.stop() == 0
    journal = state_dir / "journal" / "events.db"
    size = journal.stat().st_size
    assert size > 4096
    if damage == "garbled":
        with journal.open("r+b") as f:
            f.seek(0)
            f.write(b"this is not what SQLite wrote" * 100)
    else:
        os.truncate(journal, size // 2)

    daemon = await start_gateway()
    aside = await daemon.wait_log("journal.set_aside")
    moved = Path(aside["file"])
    assert moved.parent == journal.parent and moved.name.startswith("events.db.damaged-")
    assert os.stat(moved).st_size > 0 and journal.exists()
    async with daemon.control() as control:
        reply = await control.ok(
            "trigger", event="command:work", sessionKey="after", context={"n": -1}
        )
        status: dict[str, Any] = (await control.ok("status"))["status"]["queue"]["journal"]
    assert reply["messages"] == []
    assert status["pending"] == 0 and status["backend"] == "sqlite"
    assert read_records(state_dir)[-1]["n"] == -1
    assert await daemon.stop() == 0


@pytest.mark.anyio
async def test_a_journal_that_cannot_be_opened_stops_the_start_and_the_daemon_exits(
    start_gateway: StartGateway, state_dir: Path
) -> None:
    """A file where the journal's directory goes: the start fails naming the journal, and the
    daemon exits 1. It used to hang after its shutdown line began: the journal's close handed
    its last job to the writer thread the failed open had already ended."""
    (state_dir / "journal").write_text("not a directory\n")
    daemon = await start_gateway()
    assert daemon.exit_code == 1
    failed = await daemon.wait_log("gateway.start_failed")
    assert f"cannot open the journal {state_dir / 'journal' / 'events.db'}" in failed["error"]
    assert daemon.shutdown_line()["exit_code"] == 1


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["fifo", "directory"])
async def test_a_journal_path_that_is_no_file_is_set_aside_and_the_daemon_starts(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook, kind: str
) -> None:
    """SQLite answers a FIFO with "disk I/O error" and a directory with "unable to open": the
    daemon used to refuse to start on either."""
    write_hook(state_dir / "hooks", "rec", events=["command:work"], handler=recording_hook())
    journal = state_dir / "journal" / "events.db"
    journal.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(journal)
    else:
        journal.mkdir()
    daemon = await start_gateway({"hooks": NO_LOGGER})
    aside = await daemon.wait_log("journal.set_aside")
    assert "not a regular file" in aside["reason"]
    moved = Path(aside["file"])
    assert moved.name.startswith("events.db.damaged-")
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISDIR)(os.lstat(moved).st_mode)
    async with daemon.control() as control:
        await control.ok("trigger", event="command:work", sessionKey="after", context={"n": 1})
        status: dict[str, Any] = (await control.ok("status"))["status"]["queue"]["journal"]
    assert status["backend"] == "sqlite" and journal.is_file()
    assert read_records(state_dir)[-1]["n"] == 1
    assert await daemon.stop() == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("CREATE TABLE other (a); PRAGMA user_version = 1;", "no table meta"),
        ("CREATE TABLE other (a); PRAGMA user_version = -1;", "no table meta"),
        ("ALTER TABLE events DROP COLUMN done_at;", "table events lacks done_at"),
    ],
    ids=["other-program", "negative-version", "column-dropped"],
)
async def test_an_sqlite_file_with_a_version_and_not_the_tables_is_set_aside(
    start_gateway: StartGateway, state_dir: Path, script: str, reason: str
) -> None:
    """An SQLite file that claims a schema version and lacks the journal's tables (another
    program's, or one edited by hand): every start failed with "no such table: meta"."""
    daemon = await start_gateway({"hooks": NO_LOGGER})
    assert await daemon.stop() == 0
    journal = state_dir / "journal" / "events.db"
    if "other" in script:
        journal.unlink()
    db = sqlite3.connect(journal, isolation_level=None)
    db.executescript(script)
    db.close()

    daemon = await start_gateway()
    aside = await daemon.wait_log("journal.set_aside")
    assert reason in aside["reason"] and "not a gatewayd journal" in aside["reason"]
    async with daemon.control() as control:
        await control.ok("trigger", event="command:work", sessionKey="after", context={"n": 1})
    assert await daemon.stop() == 0


@pytest.mark.anyio
async def test_a_pending_row_damaged_by_hand_is_dead_lettered_and_the_rest_redelivered(
    start_gateway: StartGateway, state_dir: Path, write_hook: WriteHook
) -> None:
    """One pending row whose context is no JSON object (written with sqlite3 while the daemon
    was stopped): every start used to fail with a traceback. Now it is dead-lettered, the others
    are redelivered in order and the daemon starts; `events retry` names the fix."""
    write_hook(state_dir / "hooks", "rec", events=["command:work"], handler=recording_hook())
    daemon = await start_gateway({"gateway": {"queue": {"retainDone": 100}}, "hooks": NO_LOGGER})
    async with daemon.control() as control:
        for n in range(3):
            await control.ok("trigger", event="command:work", sessionKey="s", context={"n": n})
    assert await daemon.stop() == 0
    db = sqlite3.connect(state_dir / "journal" / "events.db", isolation_level=None)
    db.execute("UPDATE events SET state = 0, done_at = NULL")  # as if never finished
    # The second trigger's row (not seq 2: gateway:startup takes a seq when it comes first).
    db.execute("UPDATE events SET context = '[not json' WHERE context = '{\"n\":1}'")
    db.close()

    daemon = await start_gateway()
    unreadable = await daemon.wait_log("journal.unreadable")
    assert unreadable["events"] == 1 and "no JSON" in unreadable["reason"]
    await eventually(lambda: len(read_records(state_dir)) == 5, what="the two redelivered")
    assert [r["n"] for r in read_records(state_dir)] == [0, 1, 2, 0, 2]
    async with daemon.control() as control:
        (dead,) = (await control.ok("events", action="list", state="dead"))["events"]
        assert dead["id"] == unreadable["first"] and dead["deadLetters"][0]["hook"] == "(journal)"
        refused = await control.request("events", action="retry", ids=[dead["id"]])
        assert not refused["ok"] and f"events purge {dead['id']}" in refused["error"]["message"]
        assert (await control.ok("events", action="purge", ids=[dead["id"]]))["purged"] == 1
    assert await daemon.stop() == 0


def test_the_writer_process_does_not_outlive_a_daemon_killed_with_sigkill(
    start_daemon: StartDaemon,
) -> None:
    """The kernel kills the journal's writer process with the daemon: a writer that could not
    have noticed (stopped, here, as it could be busy or descheduled under load) never commits
    behind the next daemon's recovery. A clean stop ends the writer too."""
    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("trigger", event="command:work", sessionKey="s", context={})
    writers = children(daemon.proc.pid)
    assert writers, "no writer process beside the daemon"
    for pid in writers:
        os.kill(pid, signal.SIGSTOP)  # it cannot read its pipe's end and exit on its own
    try:
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.wait()
        wait_until(lambda: not any(alive(pid) for pid in writers), what="the writer gone")
    finally:
        for pid in writers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("trigger", event="command:work", sessionKey="s", context={})
    writers = children(daemon.proc.pid)
    assert writers
    assert daemon.stop() == 0
    wait_until(lambda: not any(alive(pid) for pid in writers), what="the writer gone")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie, dead and not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
