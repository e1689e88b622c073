"""command-logger: append one JSON line per command to ``<state>/logs/commands.log``.

An async handler that never waits: it formats the line and adds it to the log's buffer. The
first line buffered in a turn of the event loop schedules one flush at the end of that turn
(``loop.call_soon``), which writes every buffered line, in order, with one ``O_APPEND`` write
(one per file when a rotation falls inside the batch). A thread hop per line (the sync handler
this was) cost ~120 us of CPU per command on the bench machine; a batch write costs a few us
per batch.

The flush holds an exclusive ``flock`` on a lock file next to the log, so rotation and the write
happen as one step also against other processes sharing the state dir. The lock is taken
without blocking: while another process holds it, the flush is tried again 10 ms later and the
lines wait in the buffer (in order, nothing dropped). Lines from handlers of older generations
of this module (after a hook reload) are flushed by their own module's buffer on the same loop,
so they never interleave either.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatewayd.atomic import rotate
from gatewayd.hooks import CommandContext, HookContext, HookEvent
from gatewayd.timestamps import iso_utc

LOG_NAME = "commands.log"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5
MAX_BACKUPS = 1000
"""A rotation renames each backup in turn, on the event loop: a billion froze the daemon."""
RETRY_S = 0.01
"""How long a flush waits before trying again while another process holds the lock."""


def format_line(event: HookEvent[CommandContext]) -> bytes:
    """The log line for one command event, newline included."""
    context: Mapping[str, Any] = event.context or {}
    record = {
        "timestamp": iso_utc(event.timestamp),
        "action": event.action,
        "sessionKey": event.session_key,
        "senderId": str(context.get("senderId") or "unknown"),
        "source": str(context.get("commandSource") or "unknown"),
    }
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


_WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK


def _write(path: Path, data: bytes) -> None:
    # O_NONBLOCK: a FIFO put where the log goes held the event loop in open() until some
    # process read it; now that open fails (ENXIO), and a full FIFO's write does (EAGAIN).
    # On a regular file it changes nothing.
    try:
        fd = os.open(path, _WRITE_FLAGS, 0o600)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        raise OSError(exc.errno, f"{path} is a FIFO, not a regular file; move it away") from None
    try:
        view = memoryview(data)
        while view:  # a regular file takes it in one write; loop only on a short write
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def append_lines(path: Path, lines: list[bytes], *, max_bytes: int, backups: int) -> None:
    """Append ``lines`` to ``path`` (the caller holds the lock): one write per file, rotating
    first whenever the next line would take the log past ``max_bytes``."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    chunk: list[bytes] = []
    for line in lines:
        if max_bytes and size and size + len(line) > max_bytes:
            if chunk:
                _write(path, b"".join(chunk))
                chunk = []
            rotate(path, backups)
            size = 0
        chunk.append(line)
        size += len(line)
    if chunk:
        _write(path, b"".join(chunk))


@dataclass
class _Pending:
    """The lines buffered for one log file and the settings of the latest."""

    lines: list[tuple[bytes, str]] = field(default_factory=list)
    """``(line, command action)``; the action names a failed line in the log."""
    max_bytes: int = DEFAULT_MAX_BYTES
    backups: int = DEFAULT_BACKUPS
    log: Any = None
    """The latest handler call's ``ctx.log`` (bound to this hook's name)."""
    scheduled: bool = False


_pending: dict[Path, _Pending] = {}


def flush(path: Path) -> None:
    """Write what is buffered for ``path`` now (the end of a loop turn); never raises."""
    pending = _pending.get(path)
    if pending is None:
        return
    pending.scheduled = False
    if not pending.lines:
        return
    lock = path.with_name(f"{path.name}.lock")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        _failed(pending, path, pending.lines, exc)
        pending.lines = []
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process is writing: never wait on the loop
            pending.scheduled = True
            asyncio.get_running_loop().call_later(RETRY_S, flush, path)
            return
        lines, pending.lines = pending.lines, []
        try:
            append_lines(
                path,
                [line for line, _ in lines],
                max_bytes=pending.max_bytes,
                backups=pending.backups,
            )
        except OSError as exc:
            _failed(pending, path, lines, exc)
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def _failed(pending: _Pending, path: Path, lines: list[tuple[bytes, str]], exc: OSError) -> None:
    pending.log.error(
        "command_logger.failed",
        path=str(path),
        action=lines[0][1],
        lines=len(lines),
        error=f"{type(exc).__name__}: {exc}",
    )


async def handler(event: HookEvent[CommandContext], ctx: HookContext) -> None:
    """Buffer one ``command:<name>`` event's line; written at the end of this loop turn."""
    path = Path(ctx.state_dir) / "logs" / LOG_NAME
    pending = _pending.get(path)
    if pending is None:
        pending = _pending[path] = _Pending()
    pending.max_bytes = ctx.int_setting("maxBytes", DEFAULT_MAX_BYTES)
    pending.backups = ctx.int_setting("backups", DEFAULT_BACKUPS, maximum=MAX_BACKUPS)
    pending.log = ctx.log
    pending.lines.append((format_line(event), event.action))
    if not pending.scheduled:
        pending.scheduled = True
        asyncio.get_running_loop().call_soon(flush, path)
