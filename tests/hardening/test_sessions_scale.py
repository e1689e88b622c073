"""The session table scales (each new session costs a short append, not a
rewrite of every entry). Measured in bytes the process writes (``/proc/self/io``), not time."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from gatewayd.sessions import JOURNAL_NAME, SessionManager

SESSIONS = 10_000
ENTRY_BYTES = 200  # one sessions.json entry is about this long


def written() -> int:
    """Bytes this process has passed to write() so far (``wchar``)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


@pytest.mark.slow
def test_ten_thousand_sessions_write_linear_bytes_not_quadratic(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    manager = SessionManager(directory)
    manager.load()

    async def start_all() -> None:
        limit = anyio.Semaphore(64)  # many clients at once, as a busy gateway sees them

        async def one(i: int) -> None:
            async with limit:
                await manager.start(f"agent:main:user{i}")

        async with anyio.create_task_group() as tg:
            for i in range(SESSIONS):
                tg.start_soon(one, i)

    before = written()
    anyio.run(start_all)
    total = written() - before
    # Rewriting the table on every change writes SESSIONS**2 / 2 entries (~10 GB here); the
    # journal with amortized compaction writes a small constant number of entries per change.
    assert total < SESSIONS * 40 * ENTRY_BYTES, f"{total} bytes written"

    reread = SessionManager(directory)
    reread.load()
    assert len(reread) == SESSIONS
    assert reread.get("agent:main:user9999") == manager.get("agent:main:user9999")
    snapshot = json.loads((directory / "sessions.json").read_bytes())
    assert len(snapshot) == SESSIONS  # loading folded the journal into the snapshot
    assert not (directory / JOURNAL_NAME).exists() or not (directory / JOURNAL_NAME).stat().st_size
