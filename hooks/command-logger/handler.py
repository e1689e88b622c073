"""command-logger: append one JSON line per command to ``<state>/logs/commands.log``.

A plain (sync) handler, so the dispatcher runs it in a worker thread and the file I/O never blocks
the event loop. Concurrent commands are serialised by an exclusive ``flock`` on a lock file next
to the log: it excludes other threads (each call opens its own file description), older
generations of this module still running after a hook reload, and other processes. Inside the
lock, rotation and the single ``O_APPEND`` write of the line happen as one step.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gatewayd.hooks import CommandContext, HookContext, HookEvent
from gatewayd.timestamps import iso_utc

LOG_NAME = "commands.log"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5


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


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if needed)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def rotate(path: Path, backups: int) -> None:
    """Shift ``path.N-1`` -> ``path.N`` ... ``path`` -> ``path.1``, dropping the oldest."""
    if backups == 0:
        path.unlink(missing_ok=True)
        return
    for n in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


def append_line(path: Path, line: bytes, *, max_bytes: int, backups: int) -> None:
    """Append ``line`` to ``path`` as one write, rotating first if it would pass ``max_bytes``."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locked(path.with_name(f"{path.name}.lock")):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if max_bytes and size and size + len(line) > max_bytes:
            rotate(path, backups)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(line)
            while view:  # a regular file takes it in one write; loop only on a short write
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def handler(event: HookEvent[CommandContext], ctx: HookContext) -> None:
    """Log one ``command:<name>`` event; never raises."""
    path = Path(ctx.state_dir) / "logs" / LOG_NAME
    try:
        append_line(
            path,
            format_line(event),
            max_bytes=ctx.int_setting("maxBytes", DEFAULT_MAX_BYTES),
            backups=ctx.int_setting("backups", DEFAULT_BACKUPS),
        )
    except Exception as exc:
        ctx.log.error(
            "command_logger.failed",
            path=str(path),
            action=event.action,
            error=f"{type(exc).__name__}: {exc}",
        )
