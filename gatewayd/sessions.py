"""Sessions: one per sessionKey, their transcripts, and the files an agent boots with.

:class:`SessionManager` keeps the session table in ``<state>/sessions/sessions.json`` (a map of
sessionKey to entry, replaced atomically on every change, read back at start so sessions survive
a restart) and appends each session's transcript to ``<state>/sessions/<sessionId>.jsonl``, one
JSON object per line::

    {"role": "user", "content": "hi", "timestamp": "2025-01-31T09:15:02.347Z",
     "senderId": "cli", "channel": "control"}
    {"role": "assistant", "content": "hello", "timestamp": "2025-01-31T09:15:02.351Z"}

It only keeps state; which events a message causes is the command router's business
(``commands.py``). :func:`read_bootstrap_files` builds ``agent:bootstrap``'s
``context["bootstrapFiles"]`` from the workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gatewayd.timestamps import iso_now

log = structlog.get_logger("gatewayd.sessions")

INDEX_NAME = "sessions.json"

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


class SessionManager:
    """The session table and transcripts under one directory (``<state>/sessions``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.index_path = directory / INDEX_NAME
        self._sessions: dict[str, SessionEntry] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def load(self) -> None:
        """Read the index written by an earlier run; a damaged index is set aside, not fatal."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            raw = json.loads(self.index_path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict):
                raise ValueError(f"the top level is a {type(raw).__name__}, not an object")
            sessions = {
                key: SessionEntry(
                    session_key=key,
                    session_id=str(value["sessionId"]),
                    session_file=self.directory / f"{value['sessionId']}.jsonl",
                    created_at=str(value.get("createdAt") or ""),
                )
                for key, value in raw.items()
            }
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            aside = self.index_path.with_name(f"{INDEX_NAME}.damaged-{os.getpid()}")
            with contextlib.suppress(OSError):
                os.replace(self.index_path, aside)
            log.error(
                "sessions.index_damaged",
                path=str(self.index_path),
                error=f"{type(exc).__name__}: {exc}",
                moved_to=str(aside),
                fix="sessions start afresh; the old transcripts stay in the sessions dir",
            )
            return
        self._sessions = sessions

    def get(self, session_key: str) -> SessionEntry | None:
        return self._sessions.get(session_key)

    def start(self, session_key: str) -> SessionEntry:
        """Begin a new session for ``session_key`` (replacing any current one) and save."""
        session_id = os.urandom(8).hex()
        entry = SessionEntry(
            session_key=session_key,
            session_id=session_id,
            session_file=self.directory / f"{session_id}.jsonl",
            created_at=iso_now(),
        )
        self._sessions[session_key] = entry
        self._save()
        return entry

    def end(self, session_key: str) -> SessionEntry | None:
        """End the current session of ``session_key``; its transcript stays. Returns it."""
        entry = self._sessions.pop(session_key, None)
        if entry is not None:
            self._save()
        return entry

    def append(self, entry: SessionEntry, role: str, content: str, **extra: Any) -> None:
        """Append one message to ``entry``'s transcript; a write failure is logged, not raised."""
        record = {"role": role, "content": content, "timestamp": iso_now(), **extra}
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        try:
            fd = os.open(entry.session_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.error(
                "sessions.transcript_failed",
                session_key=entry.session_key,
                path=str(entry.session_file),
                error=str(exc),
            )

    def _save(self) -> None:
        data = {key: entry.to_json() for key, entry in self._sessions.items()}
        payload = json.dumps(data, ensure_ascii=False, indent=1).encode()
        tmp = self.index_path.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.index_path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.error("sessions.index_failed", path=str(self.index_path), error=str(exc))


def read_bootstrap_files(workspace: Path) -> list[dict[str, Any]]:
    """``[{name, path, content, missing}]`` for each standard file present in ``workspace``.

    Blocking file reads: call it in a worker thread. An unreadable file is left out and logged.
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
            content = path.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            log.warning("bootstrap.unreadable", path=str(path), error=str(exc))
            continue
        files.append({"name": name, "path": str(path), "content": content, "missing": False})
    return files
