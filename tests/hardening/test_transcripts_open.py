"""Transcripts are kept open between appends: a transcript removed, renamed or replaced
under the daemon must not swallow lines; they go on to a file at the transcript's path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio

from gatewayd.sessions import SessionEntry, SessionManager
from gatewayd.transcript import Turn, message_lines, read_messages
from gatewayd.transcript_files import OPEN_TRANSCRIPTS, TranscriptLimits
from tests.support.fixtures import StartDaemon
from tests.support.state import session_table


def contents(path: Path) -> list[Any]:
    return [m["text"] for m in read_messages(path.read_bytes().splitlines())]


def append(manager: SessionManager, entry: SessionEntry, *texts: str) -> None:
    async def run() -> None:
        await manager.append(entry, [("user", t, None) for t in texts])

    anyio.run(run)


def started(tmp_path: Path, limits: TranscriptLimits | None = None) -> tuple[SessionManager, Any]:
    manager = SessionManager(tmp_path / "sessions", limits)
    manager.load()

    async def start() -> SessionEntry:
        return await manager.start("agent:main:a")

    return manager, anyio.run(start)


def test_a_removed_transcript_is_created_again_with_the_next_line(tmp_path: Path) -> None:
    manager, entry = started(tmp_path)
    path = entry.session_file
    append(manager, entry, "one")
    path.unlink()
    append(manager, entry, "two")
    assert contents(path) == ["two"]
    manager.close()


def test_a_renamed_transcript_keeps_its_lines_and_the_path_gets_the_next(tmp_path: Path) -> None:
    manager, entry = started(tmp_path)
    path = entry.session_file
    append(manager, entry, "one")
    moved = path.with_name("archived.jsonl")
    path.rename(moved)
    append(manager, entry, "two")
    assert contents(moved) == ["one"]
    assert contents(path) == ["two"]
    # A file put back at the path (another inode) is appended to, not the one open before.
    moved.rename(path)
    append(manager, entry, "three")
    assert contents(path) == ["one", "three"]
    manager.close()


def test_a_transcript_replaced_by_a_symlink_is_not_written_through_it(tmp_path: Path) -> None:
    manager, entry = started(tmp_path)
    path = entry.session_file
    append(manager, entry, "one")
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(b"")
    path.unlink()
    path.symlink_to(elsewhere)
    append(manager, entry, "two")  # refused (O_NOFOLLOW) and logged, as before
    assert elsewhere.read_bytes() == b""
    path.unlink()
    append(manager, entry, "three")
    assert contents(path) == ["three"]
    manager.close()


def test_open_transcripts_are_bounded_and_rotation_still_applies(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path / "sessions", TranscriptLimits(max_bytes=300, backups=1))
    manager.load()

    async def run() -> list[SessionEntry]:
        entries = [await manager.start(f"k{i}") for i in range(100)]
        for round_ in range(3):
            for entry in entries:
                await manager.append(entry, [("user", f"{round_}-" + "x" * 100, None)])
        return entries

    entries = anyio.run(run)
    open_fds = len(os.listdir("/proc/self/fd"))
    manager.close()
    assert open_fds - len(os.listdir("/proc/self/fd")) == OPEN_TRANSCRIPTS
    for entry in entries:  # each line ~170 bytes: every append after the first rotates
        path = entry.session_file
        assert contents(path) == ["2-" + "x" * 100]
        assert contents(path.with_name(path.name + ".1")) == ["1-" + "x" * 100]


def test_a_transcript_moved_away_under_a_running_daemon_gets_the_next_message(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("message", sessionKey="a", text="one")
        path = Path(session_table(state_dir)["a"]["sessionFile"])
        path.rename(path.with_name("kept.jsonl"))
        control.ok("message", sessionKey="a", text="two")
        path.unlink(missing_ok=True)  # removed this time
        control.ok("message", sessionKey="a", text="three")
    assert contents(path) == ["three"]
    assert contents(path.with_name("kept.jsonl")) == ["one"]
    assert daemon.stop() == 0


TEXTS = [
    "",
    "hello gateway",
    'quotes " and \\ backslash',
    "control \x00 \x01 \x1f \t \n \r \x7f",
    "unicode é ü 中文 \u2028 \u2029 🎉",
    "a lone surrogate \ud800 and \udfff",
    "/new args",
]


def test_a_message_line_is_openclaws_entry_of_its_text() -> None:
    """Each line is one JSON entry, ``message.content`` the text as one text part, whatever
    the text holds (control characters, line separators, a lone surrogate)."""
    for text in TEXTS:
        for extra in ({}, {"senderId": text, "channel": "control"}, {"blocked": text}):
            turn: Turn = ("user", text, extra)
            line, last = message_lines([turn], "p0", "2025-01-31T09:15:02.347Z", 7)
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            entry = json.loads(line)
            assert entry["type"] == "message" and entry["id"] == last
            assert entry["parentId"] == "p0"
            assert entry["message"] == {
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "timestamp": 7,
                **extra,
            }


def test_a_backup_that_cannot_be_rotated_does_not_swallow_the_next_lines(tmp_path: Path) -> None:
    """A directory named like a transcript backup: every rotation failed, and each line that
    would have rotated the transcript was dropped. Now the lines go on past the limit."""
    manager, entry = started(tmp_path, TranscriptLimits(max_bytes=200, backups=2))
    path = entry.session_file
    path.with_name(f"{path.name}.2").mkdir()
    texts = [f"line {n} " + "x" * 60 for n in range(8)]
    for text in texts:
        append(manager, entry, text)
    assert contents(path.with_name(f"{path.name}.1")) + contents(path) == texts
    manager.close()


def test_a_huge_last_line_is_ended_not_searched_to_the_start(tmp_path: Path) -> None:
    """A transcript of 1 GiB with no newline (sparse: made by hand): the torn-tail check read
    all of it backwards on the event loop before the first append (8 GiB: 18 s frozen) and
    then cut it to nothing. Beyond ``TORN_SCAN`` the last line is ended, and kept."""
    manager, entry = started(tmp_path, TranscriptLimits(max_bytes=0))
    path = entry.session_file
    with path.open("wb") as f:
        f.truncate(1 << 30)
    append(manager, entry, "one")
    assert path.stat().st_size > 1 << 30
    with path.open("rb") as f:
        f.seek((1 << 30) - 1)
        tail = f.read()
    assert tail.splitlines()[0] == b"\0"
    assert [m["text"] for m in read_messages(tail.splitlines()[1:])] == ["one"]
    manager.close()
