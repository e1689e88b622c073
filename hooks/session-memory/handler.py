"""session-memory: on ``/new`` and ``/reset``, save the ending session to ``<workspace>/memory/``.

A plain (sync) handler: the dispatcher runs it in a worker thread, so reading the transcript and
writing the file never block the event loop. The file is written to a temporary name and then
hard-linked to the first free ``<date>-<slug>[-N].md``: the link fails instead of replacing an
existing file, so concurrent sessions ending at once can never overwrite each other.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import unicodedata
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from gatewayd.hooks import CommandContext, HookContext, HookEvent
from gatewayd.transcript import read_messages

DEFAULT_MESSAGES = 15
MAX_MESSAGES = 10_000
"""Bound on ``messages``: past ``sys.maxsize`` the window (a deque) raised OverflowError."""
SLUG_MAX = 30
ROLES = ("user", "assistant")


@dataclass
class Conversation:
    """The part of a transcript this hook keeps: the first user text and the last messages."""

    last: deque[tuple[str, str]]
    """The last ``(role, text)`` pairs, at most as many as the deque's ``maxlen``."""
    first_user_text: str | None = None


def read_conversation(lines: Iterable[str], keep: int) -> Conversation:
    """User and assistant messages of a transcript, in either of its forms
    (:func:`gatewayd.transcript.read_messages`: OpenClaw's session entries, or the earlier
    ``{"role", "content"}`` lines).

    Slash commands are skipped, and so are the assistant lines answering them (up to the next
    user message): a session holding only ``/new`` and its reply is an empty session.
    """
    conv = Conversation(deque(maxlen=keep))
    in_command = False
    for message in read_messages(lines):
        role = message["role"]
        if role not in ROLES:
            continue
        text = message["text"].strip()
        if role == "user":
            in_command = text.startswith("/")
        if not text or in_command:
            continue
        if role == "user" and conv.first_user_text is None:
            conv.first_user_text = text
        conv.last.append((role, text))
    return conv


def slugify(text: str | None, fallback: str) -> str:
    """Lowercase ``[a-z0-9-]`` from the first words of ``text``, at most 30 chars, else fallback.

    Accents are folded first (``Ünïcode`` -> ``unicode``); other characters become ``-``.
    """
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(words) > SLUG_MAX:
        cut = words[: SLUG_MAX + 1]  # one more, to see whether the cut falls between two words
        words = cut[: cut.rfind("-")] if "-" in cut else cut[:SLUG_MAX]
    return words.strip("-") or fallback


def render(
    conv: Conversation, when: datetime, session_key: str, session_id: str, source: str
) -> str:
    """The Markdown memory file."""
    lines = [
        f"# Session {when:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"- Session key: {session_key}",
        f"- Session id: {session_id}",
        f"- Source: {source}",
        "",
        "## Conversation",
        "",
    ]
    lines += [f"{role}: {text}" for role, text in conv.last]
    return "\n".join(lines) + "\n"


def write_new_file(directory: Path, stem: str, content: str) -> Path:
    """Write ``content`` atomically to ``<stem>.md``, or ``<stem>-2.md``, ... : never overwrites."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".session-memory-", suffix=".tmp")
    try:
        # backslashreplace: a lone surrogate (a client's message or commandSource may carry
        # one as \ud800) is written as that escape instead of failing the whole file.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        n = 1
        while True:
            target = directory / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
            try:
                os.link(tmp, target)  # fails if target exists: the no-overwrite rule, race-free
                return target
            except FileExistsError:
                n += 1
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                # no hard links on this filesystem: claim the name, then move the content over it
                try:
                    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                except FileExistsError:
                    n += 1
                    continue
                os.replace(tmp, target)
                return target
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


class Refused(Exception):
    """A transcript path this hook will not read; the message says why."""


def open_transcript(path: str, sessions: Path) -> IO[str]:
    """Open ``path`` for reading if it is a regular file inside the sessions dir ``sessions``.

    The event's context names the file, and a ``gatewayd trigger`` client writes that context:
    anything else (``/etc/shadow``, ``../`` in a session id, a FIFO) raises :class:`Refused`.
    """
    real = os.path.realpath(path)
    root = os.path.realpath(sessions)
    if not real.startswith(root.rstrip(os.sep) + os.sep):
        raise Refused(f"{path} is outside the sessions dir {root}")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"{path} is not a regular file")
        return open(fd, encoding="utf-8", errors="replace", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def save(event: HookEvent[CommandContext], ctx: HookContext) -> None:
    """Write the memory file for the session ``event`` ends, or log why there is none."""
    context: Mapping[str, Any] = event.context or {}
    previous = context.get("previousSessionEntry")
    previous = previous if isinstance(previous, Mapping) else {}
    session_id = previous.get("sessionId") or context.get("sessionId")
    if not session_id:
        ctx.log.info("session_memory.skipped", reason="no session")  # /new on a fresh key
        return
    transcript = previous.get("sessionFile") or context.get("sessionFile")
    if not transcript:
        transcript = Path(ctx.state_dir) / "sessions" / f"{session_id}.jsonl"
    session_id = str(session_id)
    workspace = Path(ctx.workspace_dir)  # never the event's: a trigger's context is the client's

    try:
        with open_transcript(str(transcript), Path(ctx.state_dir) / "sessions") as f:
            keep = ctx.int_setting("messages", DEFAULT_MESSAGES, minimum=1, maximum=MAX_MESSAGES)
            conv = read_conversation(f, keep)
    except FileNotFoundError:
        ctx.log.info("session_memory.skipped", reason="no transcript", transcript=str(transcript))
        return
    except Refused as why:
        ctx.log.warning("session_memory.refused", transcript=str(transcript), reason=str(why))
        return
    if not conv.last:
        ctx.log.info("session_memory.skipped", reason="empty session", session_id=session_id)
        return

    when = event.timestamp.astimezone(UTC)
    stem = f"{when:%Y-%m-%d}-{slugify(conv.first_user_text, f'{when:%H%M}')}"
    source = str(context.get("commandSource") or "unknown")
    content = render(conv, when, event.session_key, session_id, source)
    path = write_new_file(workspace / "memory", stem, content)
    ctx.log.info("session_memory.saved", path=str(path), messages=len(conv.last))


def handler(event: HookEvent[CommandContext], ctx: HookContext) -> None:
    """Save the ending session's conversation; never raises."""
    try:
        save(event, ctx)
    except Exception as exc:
        ctx.log.error(
            "session_memory.failed",
            session_key=event.session_key,
            error=f"{type(exc).__name__}: {exc}",
        )
