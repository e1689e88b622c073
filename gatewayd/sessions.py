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
fsync). A write the disk refuses (full, quota) is logged and its journal lines kept and written
with the next change. Transcripts are appended on the event loop as messages happen
(:class:`gatewayd.transcript_files.TranscriptFiles`).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from gatewayd.atomic import append_whole, atomic_write, read_regular
from gatewayd.jsonenc import dumps, loads
from gatewayd.paths import ensure_private_dir
from gatewayd.timestamps import iso_now
from gatewayd.transcript import Turn
from gatewayd.transcript_files import TranscriptFiles, TranscriptLimits

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
        self._sessions: dict[str, SessionEntry] = {}
        self._journal_lines = 0
        self._pending: list[bytes] = []
        """Journal lines not yet written, in order."""
        self._queued = 0
        """Changes made so far (each pending write is one), and how many were written."""
        self._done = 0
        self._writing: anyio.Event | None = None
        """Set when the batch being written is done; None while nothing is being written."""
        self.transcripts = TranscriptFiles(limits or TranscriptLimits(), self.cwd)

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
            self.transcripts.release(entry.session_file)  # not appended to any more
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
        self.transcripts.append(entry, turns)

    def close(self) -> None:
        """Close the transcripts kept open (at shutdown)."""
        self.transcripts.close()

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
