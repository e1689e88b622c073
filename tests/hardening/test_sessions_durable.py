"""Nothing written is lost or torn (the session table and transcripts).

A real ``gatewayd run`` on a real (small) disk: a nearly full filesystem, torn lines left by
``kill -9``, session keys UTF-8 cannot encode, session ids that point outside ``sessions/``,
and transcripts bounded by ``sessions.transcriptMaxBytes``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gatewayd.transcript import read_messages
from tests.support.control import Control
from tests.support.fixtures import StartDaemon
from tests.support.state import session_table, write_config

MESSAGE_KEYS = 40


def transcript_lines(path: Path) -> list[dict[str, Any]]:
    """The messages of a transcript; raises on a line that is not whole JSON."""
    lines = path.read_bytes().splitlines()
    for line in lines:
        json.loads(line)
    return list(read_messages(lines))


@pytest.fixture
def small_disk(state_dir: Path) -> Iterator[Path]:
    """``<state>/sessions`` on its own 512 KiB tmpfs (root only; skipped where refused)."""
    sessions = state_dir / "sessions"
    sessions.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(sessions)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield sessions
    finally:
        subprocess.run(["umount", "-l", str(sessions)], check=False)


def fill(directory: Path, leave: int) -> Path:
    """Fill the filesystem of ``directory``, then free ``leave`` bytes; returns the filler."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
        os.ftruncate(fd, os.fstat(fd).st_size - leave)
    finally:
        os.close(fd)
    return filler


def test_sessions_json_survives_a_nearly_full_disk(
    start_daemon: StartDaemon, state_dir: Path, small_disk: Path
) -> None:
    daemon = start_daemon()
    with daemon.control() as control:
        for i in range(MESSAGE_KEYS):
            control.ok("message", sessionKey=f"user:{i:03d}", text="hi")
        assert len(session_table(state_dir)) == MESSAGE_KEYS
        filler = fill(small_disk, leave=4096)  # one page: less than the table takes
        for i in range(MESSAGE_KEYS, MESSAGE_KEYS + 10):
            control.ok("message", sessionKey=f"user:{i:03d}", text="on a full disk")
            assert len(session_table(state_dir)) >= MESSAGE_KEYS  # always whole, never torn
        assert daemon.events("sessions.compact_failed") or daemon.events("sessions.index_failed")
        filler.unlink()
        control.ok("message", sessionKey="user:after", text="space again")
    assert daemon.stop() == 0
    assert not [p.name for p in small_disk.iterdir() if p.name.endswith(".tmp")]

    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("status")["status"]["sessions"] == MESSAGE_KEYS + 11
    table = session_table(state_dir)
    assert {f"user:{i:03d}" for i in range(MESSAGE_KEYS + 10)} | {"user:after"} == set(table)
    assert daemon.stop() == 0


def test_a_torn_transcript_line_is_cut_off_before_the_next_append(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("message", sessionKey="a", text="one")
    assert daemon.stop() == 0
    transcript = Path(session_table(state_dir)["a"]["sessionFile"])
    with transcript.open("ab") as f:  # what a daemon killed in the middle of a write leaves
        f.write(b'{"role": "user", "content": "half a li')

    daemon = start_daemon()
    with daemon.control() as control:
        control.ok("message", sessionKey="a", text="two")
    assert [r["text"] for r in transcript_lines(transcript)] == ["one", "two"]
    assert daemon.wait_log("sessions.transcript_repaired")["path"] == str(transcript)
    assert daemon.stop() == 0


@pytest.mark.slow
def test_kill_9_during_large_writes_leaves_every_line_whole(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    rng = random.Random(13)
    big = "x" * (900 * 1024)  # near the control line limit: a write the kernel may cut short
    for round_ in range(4):
        daemon = start_daemon()
        stop = threading.Event()

        def flood(sock: Path = daemon.socket, stop: threading.Event = stop) -> None:
            with contextlib.suppress(OSError, AssertionError, ValueError), Control(sock) as c:
                while not stop.is_set():
                    c.request("message", sessionKey="big", text=big)

        threads = [threading.Thread(target=flood) for _ in range(2)]
        for thread in threads:
            thread.start()
        threading.Event().wait(0.3 + rng.random())
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.wait()
        stop.set()
        for thread in threads:
            thread.join(30)
        daemon.close()
        # The next run appends after whatever the kill left: every line must still parse.
        daemon = start_daemon()
        with daemon.control() as control:
            control.ok("message", sessionKey="big", text=f"after kill {round_}")
        assert daemon.stop() == 0
    for path in (state_dir / "sessions").glob("*.jsonl*"):
        transcript_lines(path)  # raises on a torn line
    journal = state_dir / "sessions" / "sessions.journal"
    if journal.exists():  # emptied (or never needed) when the snapshot holds the whole table
        for line in journal.read_bytes().splitlines():
            json.loads(line)


def test_a_torn_journal_line_is_skipped_and_the_rest_kept(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    sessions = state_dir / "sessions"
    sessions.mkdir()
    (sessions / "sessions.journal").write_bytes(
        b'{"k": "kept", "id": "0123abcd", "at": "2025-01-01T00:00:00.000Z"}\n{"k": "torn", "i'
    )
    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("status")["status"]["sessions"] == 1
    assert daemon.wait_log("sessions.journal_line_skipped")["line"] == 2
    assert set(session_table(state_dir)) == {"kept"}
    assert daemon.stop() == 0


def test_session_files_nested_past_the_stack_are_damaged_not_fatal(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    """JSON 100000 lists deep in ``sessions.json`` or a ``sessions.journal`` line raised
    ``RecursionError`` out of the start (not the ``ValueError`` of any other bad JSON): the
    daemon could not start again. Now the snapshot is set aside and the line skipped."""
    deep = b"[" * 100_000 + b"]" * 100_000
    sessions = state_dir / "sessions"
    sessions.mkdir()
    (sessions / "sessions.json").write_bytes(b'{"a": ' + deep + b"}")
    (sessions / "sessions.journal").write_bytes(
        b'{"k": ' + deep + b'}\n{"k": "kept", "id": "0123abcd", "at": "2025-01-01T00:00:00.000Z"}\n'
    )
    daemon = start_daemon()
    assert "nested too deeply" in daemon.wait_log("sessions.index_damaged")["error"]
    skipped = daemon.wait_log("sessions.journal_line_skipped")
    assert skipped["line"] == 1 and "nested too deeply" in skipped["reason"]
    with daemon.control() as control:
        control.ok("message", sessionKey="new", text="hello")
    assert set(session_table(state_dir)) == {"kept", "new"}
    assert daemon.stop() == 0


def test_keys_utf8_cannot_encode_never_break_the_table(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon()
    with daemon.control() as control:
        # A session key that is not Unicode text is refused with its reason, before anything
        # (the durable queue, the session table) would have to store it.
        control.send_raw(
            b'{"id": 1, "op": "message", "sessionKey": "agent:\\ud800", "text": "hi"}\n'
        )
        reply = control.read()
        assert reply is not None and reply["ok"] is False, reply
        assert reply["error"]["code"] == "bad_request" and "surrogate" in reply["error"]["message"]
        # Text that is not Unicode in a message on a valid key is kept, escaped, and read back.
        control.send_raw(b'{"id": 2, "op": "message", "sessionKey": "odd", "text": "hi \\udfff"}\n')
        reply = control.read()
        assert reply is not None and reply["ok"] is True, reply
        control.ok("message", sessionKey="plain", text="hello")
    assert daemon.stop() == 0

    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("status")["status"]["sessions"] == 2
    table = session_table(state_dir)
    assert set(table) == {"odd", "plain"}
    lines = transcript_lines(Path(table["odd"]["sessionFile"]))
    assert lines[0]["text"] == "hi \udfff"
    assert daemon.stop() == 0


def test_session_ids_that_point_outside_sessions_are_refused(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    sessions = state_dir / "sessions"
    sessions.mkdir()
    escaped = state_dir / "escaped.jsonl"
    (sessions / "sessions.json").write_text(
        json.dumps(
            {
                "evil": {"sessionId": "../escaped", "createdAt": ""},
                "slash": {"sessionId": "a/b", "createdAt": ""},
                "good": {"sessionId": "abcd1234", "createdAt": ""},
            }
        )
    )
    daemon = start_daemon()
    with daemon.control() as control:
        assert control.ok("status")["status"]["sessions"] == 1
        for key in ("evil", "slash", "good"):
            control.ok("message", sessionKey=key, text="hi")
    skipped = daemon.wait_log("sessions.entries_skipped")
    assert sorted(skipped["keys"]) == ["evil", "slash"]
    assert not escaped.exists()
    assert not (sessions / "a").exists()
    assert transcript_lines(sessions / "abcd1234.jsonl")[0]["text"] == "hi"
    for key in ("evil", "slash"):
        assert Path(session_table(state_dir)[key]["sessionFile"]).parent == sessions
    assert daemon.stop() == 0


def test_transcripts_rotate_at_the_configured_size(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon({"sessions": {"transcriptMaxBytes": 400, "transcriptBackups": 2}})
    with daemon.control() as control:
        for i in range(12):
            control.ok("message", sessionKey="r", text=f"message number {i:02d}")
    assert daemon.stop() == 0
    current = Path(session_table(state_dir)["r"]["sessionFile"])
    files = sorted(p.name for p in current.parent.glob(f"{current.name}*"))
    assert files == [current.name, f"{current.name}.1", f"{current.name}.2"]
    for name in files:
        path = current.parent / name
        assert 0 < path.stat().st_size <= 400
        transcript_lines(path)
    last = transcript_lines(current)[-1]
    assert last["text"] == "message number 11"


def test_a_reload_applies_the_new_transcript_size(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon({"sessions": {"transcriptMaxBytes": 0}})
    with daemon.control() as control:
        for i in range(6):
            control.ok("message", sessionKey="r", text=f"message number {i:02d}")
        write_config(state_dir, {"sessions": {"transcriptMaxBytes": 400, "transcriptBackups": 1}})
        control.ok("reload")
        control.ok("message", sessionKey="r", text="the first under the new bound")
    assert daemon.stop() == 0
    current = Path(session_table(state_dir)["r"]["sessionFile"])
    assert current.with_name(f"{current.name}.1").stat().st_size > 400  # rotated whole
    assert [line["text"] for line in transcript_lines(current)] == ["the first under the new bound"]
