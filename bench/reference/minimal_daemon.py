"""The floor for a daemon on this stack: what any gatewayd-like process costs before it does work.

    python bench/reference/minimal_daemon.py SOCKET_PATH

Imports the libraries gatewayd runs on (anyio, uvloop, watchfiles, structlog, PyYAML, pydantic,
pydantic-settings), starts a uvloop event loop, listens on a Unix socket, says ``READY=1`` to
``$NOTIFY_SOCKET``, and answers newline-delimited JSON requests in order per connection: a
``message`` gets a fixed three-line reply (as three no-op hooks would give), anything else
``{"ok": true}``. SIGTERM or SIGINT stops it with exit 0.

No queue, no hooks, no sessions, no validation: every figure gatewayd is compared with here is
what the machine, CPython and these libraries cost, not a competing design.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path

import anyio
import anyio.abc
import pydantic  # noqa: F401  (imported for its footprint, as gatewayd does)
import pydantic_settings  # noqa: F401
import structlog  # noqa: F401
import uvloop  # noqa: F401
import watchfiles  # noqa: F401
import yaml  # noqa: F401
from anyio.streams.buffered import BufferedByteReceiveStream

REPLY = ["reply-0", "reply-1", "reply-2"]


async def serve_connection(stream: anyio.abc.SocketStream) -> None:
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        while True:
            try:
                line = await reader.receive_until(b"\n", 1 << 20)
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                return
            req = json.loads(line)
            if req.get("op") == "message":
                reply = {"id": req.get("id"), "ok": True, "messages": REPLY, "command": None}
            else:
                reply = {"id": req.get("id"), "ok": True}
            await stream.send(json.dumps(reply).encode() + b"\n")


def notify_ready() -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(f"READY=1\nMAINPID={os.getpid()}".encode(), socket.MSG_DONTWAIT, address)


async def main(path: Path) -> None:
    listener = await anyio.create_unix_listener(path)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve_connection)
        notify_ready()
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                break
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    socket_path = Path(sys.argv[1])
    socket_path.unlink(missing_ok=True)
    anyio.run(main, socket_path, backend="asyncio", backend_options={"use_uvloop": True})
    socket_path.unlink(missing_ok=True)
