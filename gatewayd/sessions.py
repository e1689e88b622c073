"""Sessions: one per sessionKey, their transcripts, and the files an agent boots with.

:class:`SessionManager` keeps the session table in ``<state>/sessions/``:

* ``sessions.json``: a snapshot, a map of sessionKey to ``{sessionKey, sessionId, sessionFile,
  createdAt}`` (the format earlier versions wrote on every change, read as it is);
* ``sessions.journal``: one JSON line per change since the snapshot (``{"k": key, "id": ...,
  "at": ...}`` for a started session, ``{"k": key}`` for an ended one), fsynced, replayed over
  the snapshot at start. Once the journal holds more lines than 1/16 of the table, the snapshot
  is rewritten whole (atomically) and the journal emptied: a table of under 16 sessions keeps
  ``sessions.json`` current on every change; a large one costs a short append per change plus,
  amortized, 16 entries of snapshot. Replaying a journal over a snapshot that already holds it
  gives the same table, so a crash between the two steps loses nothing.

Each session's transcript is ``<state>/sessions/<sessionId>.jsonl``, in OpenClaw's session
format (:mod:`gatewayd.transcript`): a header line when the file is started, then one ``message``
entry per message, each naming the one before it (``parentId``). Transcripts of the earlier form
(one ``{"role", "content", "timestamp"}`` object per line) are read as they are and appended to.

The table's journal and snapshot are written in a worker thread, one batch at a time, in the
order the changes were made on the event loop (concurrent changes share one write and one
fsync). Transcript lines are appended on the event loop when they are made, one ``write`` per
call and no fsync: a page-cache append costs 2 to 10 us, a worker-thread hop ~120 us of CPU on
the 2-core bench machine, and the daemon's log lines are written the
same way. The most recently written transcripts (:data:`OPEN_TRANSCRIPTS`) stay open between
appends; each append first checks (``lstat``) that the path still names the open file, so a
transcript removed, renamed or replaced under the daemon is opened (created) again at its path
and its next lines land there, not in the file that was moved away. A write the disk refuses
(full, quota) is logged; journal lines are kept and written with the next change, transcript
lines are dropped; a part-written line is cut back, and a transcript's torn last line (a daemon
killed mid-write) is cut off before the first append of a run (one over 16 MiB is ended with a
newline instead: :data:`gatewayd.atomic.TORN_SCAN`). A transcript over
``sessions.transcriptMaxBytes`` is rotated to ``<sessionId>.jsonl.1`` ... (``transcriptBackups``).

Session ids are checked (``[A-Za-z0-9_-]``, at most 128 characters) wherever they come from, so
no entry can name a file outside the sessions dir; keys may be any string, including ones that
UTF-8 cannot encode (lone surrogates), which are written ``\\u``-escaped.

It only keeps state; which events a message causes is the command router's business
(``commands.py``). :func:`read_bootstrap_files` builds ``agent:bootstrap``'s
``context["bootstrapFiles"]`` from the workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from gatewayd.atomic import append_whole, atomic_write, read_regular, trim_torn_tail
from gatewayd.jsonenc import dumps, loads
from gatewayd.paths import ensure_private_dir
from gatewayd.timestamps import iso_now
from gatewayd.transcript import Turn, header_line, last_entry_id, message_lines

log = structlog.get_logger("gatewayd.sessions")

INDEX_NAME = "sessions.json"
JOURNAL_NAME = "sessions.journal"
COMPACT_DIVISOR = 16
"""The journal is folded into the snapshot once it has more lines than 1/16 of the table: a
small table's snapshot is always current; a large one costs 16 entries' bytes per change."""
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_BOOTSTRAP_BYTES = 2 * 1024 * 1024
UNBOUNDED = 1 << 62
"""The size bound of the session table and journal: none (they hold every session)."""
OPEN_TRANSCRIPTS = 64
"""Transcripts kept open between appends (the most recently written ones)."""

BOOTSTRAP_NAMES = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
    "memory.md",
)
"""The workspace's standard bootstrap files, in the order an agent reads them."""


def json_line(record: Any) -> bytes:
    """``record`` as one UTF-8 JSON line; text UTF-8 cannot encode is ``\\u``-escaped."""
    return dumps(record, newline=True)


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """One session: its key, its id and where its transcript is."""

    session_key: str
    session_id: str
    session_file: Path
    created_at: str

    def to_json(self) -> dict[str, Any]:
        """The index / event-context form: ``{sessionKey, sessionId, sessionFile, createdAt}``."""
        return {
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
            "sessionFile": str(self.session_file),
            "createdAt": self.created_at,
        }


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


class SessionsUnusable(Exception):
    """The sessions directory cannot be made or used (a file in its place): the start fails."""


class SessionManager:
    """The session table and transcripts under one directory (``<state>/sessions``)."""

    def __init__(
        self,
        directory: Path,
        limits: TranscriptLimits | None = None,
        cwd: Callable[[str], str] | None = None,
    ) -> None:
        self.directory = directory
        self.cwd = cwd or (lambda _key: os.getcwd())
        """The ``cwd`` of a session key's transcript header: its agent's workspace."""
        self.index_path = directory / INDEX_NAME
        self.journal_path = directory / JOURNAL_NAME
        self.limits = limits or TranscriptLimits()
        self._sessions: dict[str, SessionEntry] = {}
        self._journal_lines = 0
        self._pending: list[bytes] = []
        """Journal lines not yet written, in order."""
        self._queued = 0
        """Changes made so far (each pending write is one), and how many were written."""
        self._done = 0
        self._writing: anyio.Event | None = None
        """Set when the batch being written is done; None while nothing is being written."""
        self._checked: set[Path] = set()
        """Transcripts whose tail was checked for a torn line in this run."""
        self._open = _OpenTranscripts(OPEN_TRANSCRIPTS)

    def __len__(self) -> int:
        return len(self._sessions)

    def _entry(self, key: str, session_id: str, created_at: str) -> SessionEntry:
        return SessionEntry(key, session_id, self.directory / f"{session_id}.jsonl", created_at)

    # -- start: snapshot + journal -------------------------------------------------------------

    def load(self) -> None:
        """Read the table an earlier run left (blocking: call it in a worker thread).

        A damaged snapshot is set aside, not fatal; a torn or bad journal line is skipped.
        The journal is then folded into a fresh snapshot, so this run appends to an empty one.
        Raises :class:`SessionsUnusable` when the directory cannot be made.
        """
        try:
            ensure_private_dir(self.directory)
        except OSError as exc:  # a file where the directory goes: a traceback at start
            raise SessionsUnusable(
                f"cannot use the sessions directory {self.directory}: {exc.strerror or exc}; "
                "move what is at that path aside"
            ) from None
        self._sessions = self._read_snapshot()
        replayed = self._replay_journal()
        if replayed:
            self._compact(dict(self._sessions))

    def _read_snapshot(self) -> dict[str, SessionEntry]:
        try:
            # read_regular: a FIFO or device in its place would block or never end a read.
            raw = loads(read_regular(self.index_path, UNBOUNDED))
            if not isinstance(raw, dict):
                raise ValueError(f"the top level is a {type(raw).__name__}, not an object")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self._set_aside(
                self.index_path,
                "sessions.index_damaged",
                exc,
                "sessions start afresh; the old transcripts stay in the sessions dir",
            )
            return {}
        sessions: dict[str, SessionEntry] = {}
        bad: list[str] = []
        for key, value in raw.items():
            sid = value.get("sessionId") if isinstance(value, dict) else None
            if not isinstance(sid, str) or not SESSION_ID.fullmatch(sid):
                bad.append(key)
                continue
            sessions[key] = self._entry(key, sid, str(value.get("createdAt") or ""))
        if bad:
            log.error(
                "sessions.entries_skipped",
                path=str(self.index_path),
                keys=bad[:20],
                count=len(bad),
                reason="no sessionId, or one that is not [A-Za-z0-9_-]{1,128}",
            )
        return sessions

    def _replay_journal(self) -> int:
        """Apply the journal to the table; returns its size in bytes (0: nothing to fold)."""
        try:
            data = read_regular(self.journal_path, UNBOUNDED)
        except FileNotFoundError:
            return 0
        except OSError as exc:  # not a regular file, or unreadable: set aside, start from the table
            self._set_aside(
                self.journal_path,
                "sessions.journal_damaged",
                exc,
                "the sessions table is used as last written; changes after it are not replayed",
            )
            return 0
        lines = data.split(b"\n")
        skipped = 0
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = loads(line)
                key = record["k"]
                if not isinstance(key, str):
                    raise TypeError("the key is not a string")
                if "id" in record:
                    sid = record["id"]
                    if not isinstance(sid, str) or not SESSION_ID.fullmatch(sid):
                        raise ValueError(f"bad session id {sid!r}")
                    self._sessions[key] = self._entry(key, sid, str(record.get("at") or ""))
                else:
                    self._sessions.pop(key, None)
            except (ValueError, TypeError, KeyError) as exc:
                skipped += 1
                torn = number == len(lines) and not data.endswith(b"\n")
                log.warning(
                    "sessions.journal_line_skipped",
                    path=str(self.journal_path),
                    line=number,
                    reason="torn last line (killed mid-write)" if torn else str(exc),
                )
        return len(data)

    def _set_aside(self, path: Path, event: str, exc: Exception, fix: str) -> None:
        """Move a state file that cannot be used out of the way (``<name>.damaged-<pid>``)."""
        aside = path.with_name(f"{path.name}.damaged-{os.getpid()}")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        log.error(
            event,
            path=str(path),
            error=f"{type(exc).__name__}: {exc}",
            moved_to=str(aside),
            fix=fix,
        )

    # -- changes -------------------------------------------------------------------------------

    def get(self, session_key: str) -> SessionEntry | None:
        return self._sessions.get(session_key)

    async def start(self, session_key: str) -> SessionEntry:
        """Begin a new session for ``session_key`` (replacing any current one); saved on return."""
        entry = self._entry(session_key, os.urandom(8).hex(), iso_now())
        self._sessions[session_key] = entry
        line = {"k": session_key, "id": entry.session_id, "at": entry.created_at}
        await self._flushed(self._enqueue(json_line(line)))
        return entry

    async def end(self, session_key: str) -> SessionEntry | None:
        """End the current session of ``session_key``; its transcript stays. Returns it."""
        entry = self._sessions.pop(session_key, None)
        if entry is not None:
            self._open.close(entry.session_file)  # not appended to any more
            await self._flushed(self._enqueue(json_line({"k": session_key})))
        return entry

    async def put_back(self, session_key: str, entry: SessionEntry | None) -> None:
        """Make ``entry`` (None: no session) current again for ``session_key``: the undo of a
        :meth:`start` or :meth:`end` made for a message whose events were then refused."""
        if self._sessions.get(session_key) is entry:
            return
        if entry is None:
            await self.end(session_key)
            return
        self._sessions[session_key] = entry
        line = {"k": session_key, "id": entry.session_id, "at": entry.created_at}
        await self._flushed(self._enqueue(json_line(line)))

    async def append(self, entry: SessionEntry, turns: Iterable[Turn]) -> None:
        """Append messages to ``entry``'s transcript, in order: one write, made before this
        returns (failures are logged, see the module docstring)."""
        self._append_transcript(entry, turns)

    def _enqueue(self, line: bytes) -> int:
        self._pending.append(line)
        self._queued += 1
        return self._queued

    async def _flushed(self, upto: int) -> None:
        """Return once every change up to number ``upto`` was written (or tried and logged).

        One writer at a time takes everything pending into one batch (one write, one fsync);
        a change made meanwhile is taken by the next one. A caller whose change a batch already
        carried returns when that batch is done, without writing anything itself.
        """
        while self._done < upto:
            if self._writing is not None:
                await self._writing.wait()
                continue
            self._writing = anyio.Event()
            try:
                await self._write_pending()
            finally:
                self._writing.set()
                self._writing = None

    async def _write_pending(self) -> None:
        batch, self._pending, upto = self._pending, [], self._queued
        journal = len(batch)
        snapshot: dict[str, SessionEntry] | None = None
        if self._journal_lines + journal > len(self._sessions) // COMPACT_DIVISOR:
            snapshot = dict(self._sessions)  # exactly the table the batch leads to
        failed, compacted = await anyio.to_thread.run_sync(
            self._write, batch, snapshot, self._journal_lines == 0
        )
        if failed:
            self._pending[:0] = failed  # kept, in order, for the next batch
        if compacted:
            self._journal_lines = 0
        elif not failed:
            self._journal_lines += journal
        self._done = upto

    # -- the worker-thread side ----------------------------------------------------------------

    def _write(
        self,
        batch: list[bytes],
        snapshot: dict[str, SessionEntry] | None,
        journal_empty: bool,
    ) -> tuple[list[bytes], bool]:
        """Write ``batch`` (journal lines): the lines that could not be written, and whether the
        snapshot now holds the whole table (the journal is empty)."""
        # With an empty journal the new snapshot alone holds the batch. Otherwise the batch goes
        # to the journal first: replaying a journal over a snapshot that includes all of it
        # changes nothing, so a crash between the two steps is harmless.
        if snapshot is not None and journal_empty and self._compact(snapshot):
            return [], True
        try:
            self._append_journal(b"".join(batch))
        except OSError as exc:
            log.error(
                "sessions.index_failed",
                path=str(self.journal_path),
                error=str(exc),
                note="the change is kept in memory and written with the next one",
            )
            return batch, False
        return [], snapshot is not None and self._compact(snapshot)

    def _append_journal(self, data: bytes) -> None:
        ensure_private_dir(self.directory)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.journal_path, flags, 0o600)
        try:
            append_whole(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _compact(self, snapshot: dict[str, SessionEntry]) -> bool:
        """Write ``snapshot`` as ``sessions.json``, then empty the journal it contains.

        Returns False (logged) when the disk refused: the old snapshot and journal stay."""
        data = {key: entry.to_json() for key, entry in snapshot.items()}
        try:
            atomic_write(self.index_path, json.dumps(data, indent=1).encode(), keep_mode=False)
            flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.journal_path, flags)
            try:
                os.ftruncate(fd, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return True  # no journal yet
        except OSError as exc:  # the old snapshot and the journal still hold everything
            log.error("sessions.compact_failed", path=str(self.index_path), error=str(exc))
            return False
        return True

    def _append_transcript(self, entry: SessionEntry, turns: Iterable[Turn]) -> None:
        """Runs on the event loop (see the module docstring), unlike the rest of this part.

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
        self, entry: SessionEntry, turns: list[Turn], size: int, at: str, at_ms: int
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

    def close(self) -> None:
        """Close the transcripts kept open (at shutdown)."""
        self._open.close_all()

    def _rotate(self, path: Path) -> None:
        """``<id>.jsonl`` -> ``<id>.jsonl.1`` -> ... ``.<backups>``; the oldest is dropped."""
        backups = self.limits.backups
        if backups == 0:
            path.unlink(missing_ok=True)
            return
        for n in range(backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
        os.replace(path, path.with_name(f"{path.name}.1"))
        log.info("sessions.transcript_rotated", path=str(path), backups=backups)


def read_bootstrap_files(workspace: Path) -> list[dict[str, Any]]:
    """``[{name, path, content, missing}]`` for each standard file present in ``workspace``.

    Blocking file reads: call it in a worker thread. Only regular files are read (a FIFO or a
    device is never opened for reading), at most 2 MiB each; anything else is left out and
    logged.
    """
    files: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name in BOOTSTRAP_NAMES:
        path = workspace / name
        real = os.path.realpath(path)
        if real in seen:  # MEMORY.md and memory.md on a case-insensitive filesystem
            continue
        seen.add(real)
        try:
            content = read_regular_file(path, MAX_BOOTSTRAP_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            log.warning("bootstrap.unreadable", path=str(path), error=str(exc))
            continue
        files.append({"name": name, "path": str(path), "content": content, "missing": False})
    return files


def read_regular_file(path: Path, limit: int) -> str:
    """The text of ``path`` if it is a regular file of at most ``limit`` bytes; else ``OSError``
    (:func:`gatewayd.atomic.read_regular`: a FIFO or device is refused without a read)."""
    return read_regular(path, limit).decode("utf-8", errors="replace")
