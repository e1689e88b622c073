"""Transcript files: each session's ``<sessionId>.jsonl``, appended to as messages happen.

:class:`TranscriptFiles` writes the lines :mod:`gatewayd.transcript` makes. Lines are appended
on the event loop when they are made, one ``write`` per call and no fsync: a page-cache append
costs 2 to 10 us, a worker-thread hop ~120 us of CPU on the 2-core bench machine, and the
daemon's log lines are written the same way. The most recently written transcripts
(:data:`OPEN_TRANSCRIPTS`) stay open between appends; each append first checks (``lstat``) that
the path still names the open file, so a transcript removed, renamed or replaced under the
daemon is opened (created) again at its path and its next lines land there, not in the file that
was moved away. A write the disk refuses (full, quota) is logged and its lines dropped; a
part-written line is cut back, and a transcript's torn last line (a daemon killed mid-write) is
cut off before the first append of a run (one over 16 MiB is ended with a newline instead:
:data:`gatewayd.atomic.TORN_SCAN`). A transcript over ``sessions.transcriptMaxBytes`` is rotated
to ``<sessionId>.jsonl.1`` ... (``transcriptBackups``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from gatewayd.atomic import append_whole, rotate, trim_torn_tail
from gatewayd.timestamps import iso_now
from gatewayd.transcript import Turn, header_line, last_entry_id, message_lines

log = structlog.get_logger("gatewayd.sessions")

OPEN_TRANSCRIPTS = 64
"""Transcripts kept open between appends (the most recently written ones)."""


class TranscriptOwner(Protocol):
    """What a transcript's header and path come from: a session."""

    @property
    def session_key(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def session_file(self) -> Path: ...
    @property
    def created_at(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TranscriptLimits:
    """``sessions.transcriptMaxBytes`` (0: unbounded) and ``sessions.transcriptBackups``."""

    max_bytes: int = 10 * 1024 * 1024
    backups: int = 3


class _OpenTranscripts:
    """The transcripts kept open for appending, at most ``limit``, the least recently written
    closed first: path -> ``(fd, st_dev, st_ino)``.

    :meth:`get` checks, with one ``lstat`` of the path, that the path still names the open
    file (a transcript removed, renamed or replaced under the daemon no longer does): then it
    returns the descriptor and the file's current size, else closes it and returns ``(-1, 0)``.
    Kept open, an append costs the ``lstat`` and the ``write`` instead of ``open``, two
    ``fstat``, ``write`` and ``close``: daemon CPU per message, memory journal, 116 -> 106 us
    (``message`` ops under load, median of 6 interleaved rounds)."""

    __slots__ = ("files", "last_ids", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.files: dict[Path, tuple[int, int, int]] = {}
        """In order of last use, oldest first (a dict keeps insertion order)."""
        self.last_ids: dict[Path, str | None] = {}
        """Each open transcript's last entry id: the ``parentId`` of its next message."""

    def get(self, path: Path) -> tuple[int, int]:
        held = self.files.pop(path, None)
        if held is None:
            return -1, 0
        fd, dev, ino = held
        try:
            info = os.lstat(path)
        except OSError:
            info = None
        if info is None or info.st_ino != ino or info.st_dev != dev:
            os.close(fd)
            return -1, 0
        self.files[path] = held  # the most recently used now
        return fd, info.st_size

    def keep(self, path: Path, fd: int, info: os.stat_result) -> None:
        self.close(path)
        files = self.files
        while len(files) >= self.limit:
            oldest = next(iter(files))
            os.close(files.pop(oldest)[0])
            self.last_ids.pop(oldest, None)
        files[path] = (fd, info.st_dev, info.st_ino)

    def close(self, path: Path) -> None:
        self.last_ids.pop(path, None)
        held = self.files.pop(path, None)
        if held is not None:
            with contextlib.suppress(OSError):
                os.close(held[0])

    def close_all(self) -> None:
        for path in list(self.files):
            self.close(path)


class TranscriptFiles:
    """The transcripts of one sessions directory, as they are appended to."""

    def __init__(self, limits: TranscriptLimits, cwd: Callable[[str], str]) -> None:
        self.limits = limits
        self.cwd = cwd
        """The ``cwd`` of a session key's transcript header: its agent's workspace."""
        self._checked: set[Path] = set()
        """Transcripts whose tail was checked for a torn line in this run."""
        self._open = _OpenTranscripts(OPEN_TRANSCRIPTS)

    def append(self, entry: TranscriptOwner, turns: Iterable[Turn]) -> None:
        """Append ``turns`` to ``entry``'s transcript: one write, on the event loop (see the
        module docstring); a failure is logged.

        The descriptor stays open for the next append (:class:`_OpenTranscripts`): an ``lstat``
        of the path and a ``write`` a message instead of ``open``, two ``fstat``, ``write`` and
        ``close``. The ``lstat`` is also how a transcript removed or renamed under the daemon
        (or replaced by anything else) is noticed: the path no longer names the open file, so
        it is opened (created) again and no line goes to the file that left. An empty file gets
        the header first; the lines are encoded once, after the file is known (again only when
        the append rotates it)."""
        path = entry.session_file
        turns = list(turns)
        at, at_ms = iso_now(), time.time_ns() // 1_000_000
        try:
            fd, size = self._open.get(path)
            if fd < 0:
                fd, size = self._open_transcript(path)
            data, last = self._lines(entry, turns, size, at, at_ms)
            limits = self.limits
            if limits.max_bytes and size and size + len(data) > limits.max_bytes:
                self._open.close(path)
                try:
                    self._rotate(path)
                except OSError as exc:
                    # Something in a backup's place (a directory named like one): the lines go
                    # on past the limit, not nowhere (they were dropped, every one, until fixed).
                    log.error(
                        "sessions.rotate_failed",
                        path=str(path),
                        error=str(exc),
                        fix=f"move aside what is not a transcript backup beside {path.name}",
                    )
                fd, size = self._open_transcript(path)
                data, last = self._lines(entry, turns, size, at, at_ms)
            try:
                append_whole(fd, data, size)
            except OSError:
                self._open.close(path)  # opened afresh next time, whatever went wrong
                raise
            self._open.last_ids[path] = last
        except OSError as exc:
            log.error("sessions.transcript_failed", path=str(path), error=str(exc))

    def _lines(
        self, entry: TranscriptOwner, turns: list[Turn], size: int, at: str, at_ms: int
    ) -> tuple[bytes, str | None]:
        """The bytes that append ``turns`` to a transcript of ``size`` bytes: the header first
        when it is empty, the first message's parent its last entry otherwise."""
        if size:
            return message_lines(turns, self._open.last_ids.get(entry.session_file), at, at_ms)
        head = header_line(entry.session_id, entry.created_at, self.cwd(entry.session_key))
        data, last = message_lines(turns, None, at, at_ms)
        return head + data, last

    def _open_transcript(self, path: Path) -> tuple[int, int]:
        """Open ``path`` for appending and keep it open; its torn tail is cut off the first
        time in this run. Returns the descriptor and the file's size."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{path} is not a regular file")
            size = info.st_size
            if path not in self._checked:
                self._checked.add(path)
                if cut := trim_torn_tail(fd):
                    log.warning("sessions.transcript_repaired", path=str(path), cut_bytes=cut)
                size = os.fstat(fd).st_size  # cut, or a newline ending an overlong last line
            last = last_entry_id(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self._open.keep(path, fd, info)
        self._open.last_ids[path] = last
        return fd, size

    def release(self, path: Path) -> None:
        """Close ``path`` if it is kept open: its session ended, nothing more is appended."""
        self._open.close(path)

    def close(self) -> None:
        """Close the transcripts kept open (at shutdown)."""
        self._open.close_all()

    def _rotate(self, path: Path) -> None:
        """``<id>.jsonl`` -> ``<id>.jsonl.1`` -> ... ``.<backups>``; the oldest is dropped."""
        rotate(path, self.limits.backups)
        log.info("sessions.transcript_rotated", path=str(path), backups=self.limits.backups)
