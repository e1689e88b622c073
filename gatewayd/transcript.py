"""Transcripts in OpenClaw's session format: the lines gatewayd writes, and how any are read.

A session's transcript (``<state>/sessions/<sessionId>.jsonl``) is JSON lines as OpenClaw 2026.9.6
writes a session file (its ``session-manager`` and ``session-entry-codec``), so a hook written
for OpenClaw that reads ``sessionFile`` finds the messages where it looks. A file gatewayd starts
begins with OpenClaw's header, then one ``message`` entry per message, each naming the entry
before it (``parentId``; ``null`` for the first)::

    {"type":"session","version":4,"id":"3f1c9a0e7b2d4c65","timestamp":"2025-01-31T09:15:02.340Z",
     "cwd":"/var/lib/gatewayd/workspace"}
    {"type":"message","id":"9a3c51d07e2f0001","parentId":null,"timestamp":"2025-01-31T09:15:02.347Z",
     "message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1738314902347,
                "senderId":"cli","channel":"control"}}
    {"type":"message","id":"9a3c51d07e2f0002","parentId":"9a3c51d07e2f0001",...,
     "message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"timestamp":...}}

``message.timestamp`` is Unix epoch milliseconds, the entry's ``timestamp`` ISO 8601 (both as
OpenClaw writes them). gatewayd's own fields ride on the message, where OpenClaw's reader keeps
unknown fields: ``senderId`` and ``channel`` on a user message, ``blocked`` (the reason) on one a
``message:received`` hook blocked (``hooks.recordBlocked``). Entry ids are a random per-process
prefix and a counter (unique within a file; OpenClaw reads any non-empty string).

Transcripts gatewayd wrote before, one ``{"role", "content", "timestamp", ...}`` object per line,
are read as they are (:func:`read_messages` takes both forms, in one file too: new lines are
appended to an old file without a header, and OpenClaw's reader numbers a file without one
itself).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from gatewayd.jsonenc import dumps, loads

SESSION_VERSION: Final = 4
"""The session-file version OpenClaw 2026.9.6 writes for a new session (``version`` in the
header; its reader takes 3 and later as they are)."""

TAIL_SCAN: Final = 64 * 1024
"""How much of a transcript's end :func:`last_entry_id` reads for the last entry's id."""


Turn = tuple[str, str, "Mapping[str, Any] | None"]
"""One message to append: ``(role, text, extra)``; ``role`` is ``user`` or ``assistant``,
``extra`` gatewayd's own fields for the message (``senderId``, ``channel``, ``blocked``) or
``None``. A plain tuple: a ``NamedTuple`` took 0.5 us to build against 0.07 (timeit), and a
message appends four."""


_PREFIX = os.urandom(6).hex()
_numbers = itertools.count(1)


def _new_prefix() -> None:
    """A forked child draws its own prefix (parent and child would hand out the same ids)."""
    global _PREFIX, _numbers
    _PREFIX = os.urandom(6).hex()
    _numbers = itertools.count(1)


os.register_at_fork(after_in_child=_new_prefix)


def entry_id() -> str:
    """A fresh entry id: 12 random hex digits drawn once per process, then a counter."""
    return "%s%04x" % (_PREFIX, next(_numbers))  # noqa: UP031 (0.33 us; an f-string 0.50)


def header_line(session_id: str, created_at: str, cwd: str) -> bytes:
    """The first line of a transcript: OpenClaw's session header."""
    return dumps(
        {
            "type": "session",
            "version": SESSION_VERSION,
            "id": session_id,
            "timestamp": created_at,
            "cwd": cwd,
        },
        newline=True,
    )


def message_lines(
    turns: Iterable[Turn], parent: str | None, at: str, at_ms: int
) -> tuple[bytes, str | None]:
    """The entries of ``turns``, in order, chained from ``parent``; and the last one's id.

    ``at`` is the entries' ISO timestamp, ``at_ms`` the messages' (epoch ms): one instant for a
    batch, as one append writes it. One ``dumps`` a line (the line's whole cost, ~1.5 us)."""
    out = []
    for role, text, extra in turns:
        ident = entry_id()
        message: dict[str, Any] = {
            "role": role,
            "content": [{"type": "text", "text": text}],
            "timestamp": at_ms,
        }
        if extra:
            message.update(extra)
        out.append(
            dumps(
                {
                    "type": "message",
                    "id": ident,
                    "parentId": parent,
                    "timestamp": at,
                    "message": message,
                },
                newline=True,
            )
        )
        parent = ident
    return b"".join(out), parent


def last_entry_id(fd: int, size: int) -> str | None:
    """The ``id`` of the last whole line of the file open on ``fd`` (``size`` bytes), when that
    line is an entry with one; ``None`` otherwise (an empty file, a line of the earlier form, one
    longer than :data:`TAIL_SCAN`). Reads the last 4 KiB, and up to :data:`TAIL_SCAN` only when
    the last line is longer."""
    for span in (4096, TAIL_SCAN):
        start = max(0, size - span)
        tail = os.pread(fd, size - start, start).rstrip(b"\n")
        cut = tail.rfind(b"\n")
        if cut >= 0 or start == 0:
            break
    else:
        return None  # the line began before what was read
    try:
        record = loads(tail[cut + 1 :])
    except ValueError:
        return None
    ident = record.get("id") if isinstance(record, dict) and "type" in record else None
    return ident if isinstance(ident, str) and ident else None


def _text(content: Any) -> str:
    """A message's text: a string as it is; a list of parts, its text parts joined by lines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        )
    return "" if content is None else str(content)


def message_of(record: Any) -> dict[str, Any] | None:
    """One transcript line's message, in either form, as ``{role, text, timestamp, ...}`` (the
    message's other fields kept: ``senderId``, ``channel``, ``blocked``, ...); ``None`` for a
    line that is no message (the header, OpenClaw's other entry types, a stray value)."""
    if not isinstance(record, Mapping):
        return None
    kind = record.get("type")
    if kind is None and "role" in record:  # the earlier form: the message is the line
        message: Mapping[str, Any] = record
        content = record.get("text")
        if content is None:
            content = record.get("content")
    elif kind == "message" and isinstance(record.get("message"), Mapping):
        message = record["message"]
        content = message.get("content")
    else:
        return None
    role = message.get("role")
    if not isinstance(role, str):
        return None
    found = {k: v for k, v in message.items() if k not in ("role", "content", "text")}
    return {**found, "role": role, "text": _text(content)}


def read_messages(lines: Iterable[str | bytes]) -> Iterator[dict[str, Any]]:
    """The messages of a transcript's lines, in order (see :func:`message_of`). A line that is
    not JSON (a torn last line of a live transcript) is skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError:
            continue
        message = message_of(record)
        if message is not None:
            yield message


__all__ = [
    "SESSION_VERSION",
    "Turn",
    "entry_id",
    "header_line",
    "last_entry_id",
    "message_lines",
    "message_of",
    "read_messages",
]
