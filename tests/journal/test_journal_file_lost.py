"""The journal file deleted, replaced or overwritten under a running daemon.

SQLite goes on writing a file deleted under it (the unlinked inode) or whose header was
overwritten (its cache): on main, 200 events answered ``queued`` after a deletion, 152 of them
never dispatched after kill -9 and a restart, nothing logged; after a header overwrite, 160
acknowledged events set aside at the restart. Now the writer checks the file before it
acknowledges a write: the write that found it lost is refused (``journal_error``, never
``queued``), ``journal.file_lost`` is logged, the journal is restored from the daemon's open
copy, and every event acknowledged, before or after, is dispatched after a kill -9 and restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatewayd.hooks.events import HookEvent
from gatewayd.journal.writes import SQLITE_HEADER, FileWatch
from tests.journal.backends import Dispatched, Handler, SqliteStore, running
from tests.journal.journal_support import read_records, recording_hook
from tests.support.control import Control
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

GATE = """
import asyncio, json, os

STATE = os.environ["ELIZA_STATE_DIR"]


async def handler(event):
    # Held until the gate opens: the events stay pending in the journal meanwhile.
    while not os.path.exists(os.path.join(STATE, "open")):
        await asyncio.sleep(0.05)
    with open(os.path.join(STATE, "record.jsonl"), "a") as f:
        f.write(json.dumps({"n": event.context.get("n"), "pid": os.getpid()}) + "\\n")
"""
CONFIG = {
    "gateway": {"queue": {"concurrency": 1}},
    "hooks": {"entries": {"command-logger": {"enabled": False}}},
}


def post(ctl: Control, n: int) -> bool:
    """Post event ``n`` (not waited for); whether it was acknowledged (``queued``)."""
    reply = ctl.request(
        "trigger", event="command:work", sessionKey=f"s{n % 3}", context={"n": n}, wait=False
    )
    if reply["ok"]:
        assert reply.get("queued") is True, reply
        return True
    assert reply["error"]["code"] == "journal_error", reply
    return False


def delete(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def overwrite_header(db: Path) -> None:
    with open(db, "r+b") as f:
        f.write(os.urandom(100))


def replace(db: Path) -> None:
    other = db.with_name("other.db")
    other.write_bytes(db.read_bytes())
    os.replace(other, db)


@pytest.mark.parametrize("harm", [delete, overwrite_header, replace], ids=lambda h: h.__name__)
def test_every_event_acknowledged_around_a_lost_file_is_dispatched_after_kill_9(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook, harm: Callable[[Path], None]
) -> None:
    write_hook(state_dir / "hooks", "gated", events=["command:work"], handler=GATE)
    daemon = start_daemon(CONFIG)
    db = state_dir / "journal" / "events.db"
    acknowledged: list[int] = []
    with daemon.control() as ctl:
        for n in range(20):
            assert post(ctl, n)
            acknowledged.append(n)
        harm(db)
        refused = 0
        for n in range(20, 60):
            if post(ctl, n):
                acknowledged.append(n)
            else:
                refused += 1
    lost = daemon.wait_log("journal.file_lost")
    assert "under the running daemon" in lost["problem"], lost
    daemon.wait_log("journal.restored")
    assert refused >= 1  # the write that found the file lost was refused, not acknowledged
    assert len(acknowledged) > 40, acknowledged  # the journal took events again once restored
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.wait()
    (state_dir / "open").touch()
    again = start_daemon(CONFIG)
    assert not again.events("journal.set_aside")

    def dispatched() -> set[int]:
        return {r["n"] for r in read_records(state_dir) if r["n"] is not None}

    wait_until(lambda: set(acknowledged) <= dispatched(), what="every acknowledged event")
    assert again.stop() == 0


def test_a_recording_hook_sees_each_event_once_when_nothing_is_lost(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """The check before each acknowledgement changes nothing when the file is left alone."""
    write_hook(state_dir / "hooks", "rec", events=["command:work"], handler=recording_hook())
    daemon = start_daemon(CONFIG)
    with daemon.control() as ctl:
        for n in range(50):
            assert post(ctl, n)
    wait_until(lambda: len(read_records(state_dir)) == 50, what="50 dispatches")
    assert not daemon.events("journal.file_lost")
    assert daemon.stop() == 0


# -- any damage to a journal file at rest: opened whole, or set aside; never the end of a start --

PENDING = 12


def ignore(*args: Any) -> None:
    """Where a journal opened only to read what it recovered sends its items."""


def _journal_with_pending(directory: Path) -> tuple[SqliteStore, list[str]]:
    store = SqliteStore(directory)
    never = anyio.Event()

    def blocked(seen: list[Dispatched]) -> Handler:
        async def handler(event: HookEvent) -> None:
            await never.wait()

        return handler

    async def fill() -> list[str]:
        async with running(store, {"blocked": blocked}, drain_s=0.05) as run:
            return [(await run.post("s", n)).id for n in range(PENDING)]

    return store, anyio.run(fill)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    where=st.one_of(st.integers(min_value=0, max_value=99), st.integers(min_value=100)),
    data=st.binary(min_size=1, max_size=64),
)
def test_a_damaged_journal_file_is_opened_whole_or_set_aside(
    tmp_path_factory: pytest.TempPathFactory, where: int, data: bytes
) -> None:
    store, ids = _journal_with_pending(tmp_path_factory.mktemp("j"))
    size = store.path.stat().st_size
    with open(store.path, "r+b") as f:
        f.seek(where % size)
        f.write(data)

    async def reopen() -> tuple[list[str], list[MutableMapping[str, Any]]]:
        journal = store.journal()
        journal.bind(ignore, ignore, ignore)
        with structlog.testing.capture_logs() as logs:
            items = await journal.open()
            await journal.close()
        return [item[0].id for item in items], logs

    recovered, logs = anyio.run(reopen)
    set_aside = [r for r in logs if r["event"] == "journal.set_aside"]
    if set_aside:
        assert recovered == [], recovered
        return
    # Opened: every pending event is there, but a row whose values the damage made unreadable
    # (dead-lettered alone, said by journal.unreadable).
    unreadable = sum(r["events"] for r in logs if r["event"] == "journal.unreadable")
    assert set(recovered) <= set(ids), (recovered, ids)
    assert len(ids) - len(recovered) == unreadable, (recovered, ids, logs)


@settings(max_examples=200, deadline=None)
@given(offset=st.integers(min_value=0, max_value=99), data=st.binary(min_size=1, max_size=16))
def test_the_writer_sees_its_file_changed_exactly_when_its_header_is(
    tmp_path_factory: pytest.TempPathFactory, offset: int, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("w") / "events.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        watch = FileWatch(str(path))
        assert watch.problem() is None
        with open(path, "r+b") as f:
            f.seek(offset)
            before = f.read(len(data))
            f.seek(offset)
            f.write(data)
        header_changed = (
            offset < len(SQLITE_HEADER) and before[: 16 - offset] != data[: 16 - offset]
        )
        problem = watch.problem()
        assert (problem is not None) is header_changed, (problem, offset, data)
