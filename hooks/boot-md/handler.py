"""boot-md: deliver ``<workspace>/BOOT.md`` as an inbound message when the gateway starts.

It delivers through ``ctx.gateway`` (the gateway handle every hook gets inside the daemon);
``deliver(..., wait=False)`` queues the message and returns at once. Waiting here would
deadlock: ``gateway:startup`` is being dispatched by the same dispatcher that has to process
the message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gatewayd.hooks import GatewayStartupContext, HookContext, HookEvent

BOOT_FILE = "BOOT.md"
SESSION_KEY = "agent:main:boot"
SENDER_ID = "boot-md"
CHANNEL = "boot"
MAX_BYTES = 1 << 20  # the control channel's limit for one message line


def read_boot_file(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist; raises ``ValueError`` over 1 MiB
    or when it is not a regular file (a FIFO, a device, ``/dev/zero`` behind a symlink)."""
    try:  # non-blocking, so a FIFO there is refused instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path} is over {MAX_BYTES} bytes; shorten it")
    return data.decode("utf-8", errors="replace")


async def handler(event: HookEvent[GatewayStartupContext], ctx: HookContext) -> None:
    """Deliver BOOT.md for this ``gateway:startup``; logs ran / skipped / failed, never raises."""
    context = event.context or {}
    path = Path(ctx.workspace_dir) / BOOT_FILE  # never the event's: a client may write that
    try:
        text = read_boot_file(path)
        if text is None:
            ctx.log.info("boot_md.skipped", reason="missing", path=str(path))
            return
        if not text.strip():
            ctx.log.info("boot_md.skipped", reason="empty", path=str(path))
            return
        gateway = ctx.gateway or context.get("gateway")
        if gateway is None:
            raise RuntimeError(
                "no gateway to deliver through: boot-md runs inside `gatewayd run` only"
            )
        await gateway.deliver(SESSION_KEY, text, sender_id=SENDER_ID, channel=CHANNEL, wait=False)
    except Exception as exc:
        ctx.log.error("boot_md.failed", path=str(path), error=f"{type(exc).__name__}: {exc}")
        return
    ctx.log.info("boot_md.ran", path=str(path), bytes=len(text.encode()), session_key=SESSION_KEY)
