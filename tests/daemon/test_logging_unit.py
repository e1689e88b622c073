"""The log's writers (:mod:`gatewayd.logging`) on real pipes and files: a line that cannot be
written is dropped and never raised, a broken stream's descriptor goes to ``/dev/null`` and
comes back when the process guards restore it, journald priorities on the journal's own stream
only, and ``gateway.log.file``: JSON lines, rotated by size, and a FIFO no one reads refused
with the fix instead of freezing the loop. ``tests/hardening/test_log_safety.py`` has the same
guarantees on a real ``gatewayd run``."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from gatewayd.logging import (
    LogFile,
    SafeLogger,
    _file_sink,
    configure_logging,
    journal_stream,
    resume_logging,
)


@pytest.fixture
def no_log_file() -> Iterator[None]:
    """The log file a test opened is closed after it (the sink is the process's)."""
    yield
    _file_sink(None)


def test_a_full_pipe_drops_the_line_and_keeps_the_stream() -> None:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETFL, os.O_NONBLOCK)
    with os.fdopen(read_fd, "rb") as reader, os.fdopen(write_fd, "w") as stream:
        logger = SafeLogger(stream)
        line = "x" * 4096
        while logger.dropped == 0:  # until the pipe's buffer is full
            logger.info(line)
        assert not logger.broken
        os.read(reader.fileno(), 1 << 20)  # the shipper catches up
        logger.info("after")
        assert logger.dropped == 1 and not logger.broken


def test_a_pipe_whose_reader_went_away_is_given_up_and_resumed() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the log shipper exited
    with os.fdopen(write_fd, "w") as stream:
        logger = SafeLogger(stream)
        logger.error("lost")  # EPIPE: dropped, never raised
        assert logger.broken and logger.dropped == 1
        assert os.readlink(f"/proc/self/fd/{write_fd}") == os.devnull
        logger.error("also lost")
        assert logger.dropped == 2
        print("a hook's print", file=stream, flush=True)  # fd 2 at /dev/null: no EPIPE
        resume_logging([write_fd + 1000])  # not its descriptor: still given up
        assert logger.broken
        resume_logging([write_fd])  # the guards restored it
        assert not logger.broken
        logger.info("written")
        assert logger.dropped == 2


def test_priorities_prefix_each_line_on_the_journals_stream_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal"
    with path.open("w") as stream, (tmp_path / "other").open("w") as other:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert journal_stream(stream) and not journal_stream(other)
        configure_logging("debug", "json", stream)
        log = structlog.get_logger("t")
        log.debug("d")
        log.info("i")
        log.warning("w")
        log.error("e", detail="two\nlines")
    lines = path.read_text().splitlines()
    assert [line[:3] for line in lines] == ["<7>", "<6>", "<4>", "<3>"]
    assert json.loads(lines[3][3:])["detail"] == "two\nlines"
    for value in ("", "nonsense", "1:x"):
        monkeypatch.setenv("JOURNAL_STREAM", value)
        assert not journal_stream(other)


def test_the_log_file_gets_json_lines_and_rotates_by_size(
    tmp_path: Path, no_log_file: None
) -> None:
    path = tmp_path / "logs" / "gatewayd.log"  # the directory is created
    spec = LogFile(path, max_bytes=2000, backups=2)
    with (tmp_path / "stderr").open("w") as stderr:
        configure_logging("info", "console", stderr, log_file=spec)
        log = structlog.get_logger("t")
        for n in range(60):
            log.info("line", n=n, pad="p" * 40)
        configure_logging("info", "console", stderr, log_file=spec)  # a reload: the same file
        log.info("after reload")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[-1]["event"] == "after reload"
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "gatewayd.log",
        "gatewayd.log.1",
        "gatewayd.log.2",
    ]
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())
    assert "[info     ] line" in (tmp_path / "stderr").read_text().splitlines()[0]


def test_a_fifo_no_one_reads_is_refused_with_the_fix(tmp_path: Path, no_log_file: None) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    with (tmp_path / "stderr").open("w") as stderr:
        configure_logging("info", "json", stderr, log_file=LogFile(fifo))
        structlog.get_logger("t").info("to stderr only")
    lines = [json.loads(line) for line in (tmp_path / "stderr").read_text().splitlines()]
    failed, line = lines
    assert failed["event"] == "log.file_failed" and failed["path"] == str(fifo)
    assert "no process reads" in failed["error"] and "gateway.log.file" in failed["fix"]
    assert line["event"] == "to stderr only"
