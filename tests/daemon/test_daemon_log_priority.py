"""journald priorities (the ``<N>`` prefix under ``JOURNAL_STREAM``) and ``NO_COLOR``."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import structlog

from gatewayd.logging import LogFormat, configure_logging
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

# Sets JOURNAL_STREAM to the device:inode of the daemon's own stderr, as systemd does.
AS_SYSTEMD = ["sh", "-c", 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$@"', "sh"]


def test_daemon_lines_carry_their_priority_under_journald(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "boom",
        events=["command:boom"],
        handler="async def handler(event):\n    raise ValueError('boom')\n",
    )
    daemon = start_daemon(prefix=AS_SYSTEMD)
    with daemon.control() as control:
        control.ok("trigger", event="command:boom", sessionKey="s")

    def error_line() -> str | None:
        return next((s for s in daemon.stderr_lines if '"event": "hook.error"' in s), None)

    line = wait_until(error_line, what="the hook.error line")
    assert line.startswith('<3>{"hook": "boom"')
    assert daemon.stop() == 0
    lines = daemon.stderr_text().splitlines()
    assert lines and all(re.match(r"<[3467]>\{", line) for line in lines), lines[:5]
    ready = next(line for line in lines if '"event": "gateway.ready"' in line)
    assert ready.startswith("<6>")


def _render(tmp_path: Path, fmt: LogFormat, journal: bool) -> str:
    out = tmp_path / f"log-{fmt}-{journal}.txt"
    with out.open("w", encoding="utf-8") as stream:
        st = os.fstat(stream.fileno())
        os.environ["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}" if journal else "1:2"
        configure_logging("debug", fmt, stream)
        log = structlog.get_logger("test")
        log.debug("d.line")
        log.warning("w.line")
        try:
            raise KeyError("k")
        except KeyError:
            log.exception("e.line")
        stream.flush()
    configure_logging("info", "json", io.StringIO())
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_priority_prefix_on_every_line_only_for_the_journal_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: LogFormat
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "")
    text = _render(tmp_path, fmt, journal=True)
    lines = text.splitlines()
    assert lines[0].startswith("<7>") and "d.line" in lines[0]
    assert lines[1].startswith("<4>") and "w.line" in lines[1]
    assert lines[2].startswith("<3>") and "e.line" in lines[2]
    # The traceback of the error (its own lines in console form) keeps priority 3.
    assert all(line.startswith("<3>") for line in lines[2:])
    assert "KeyError" in text
    plain = _render(tmp_path, fmt, journal=False)  # JOURNAL_STREAM names another file
    assert not any(line.startswith("<") for line in plain.splitlines())


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_color_turns_off_the_console_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    for no_color, coloured in (("", True), ("1", False)):
        monkeypatch.setenv("NO_COLOR", no_color)
        stream = _Tty()
        configure_logging("info", "auto", stream)
        structlog.get_logger("test").warning("hello", key="value")
        assert ("\x1b[" in stream.getvalue()) is coloured, stream.getvalue()
    configure_logging("info", "json", io.StringIO())
