"""The suite's one client of the control socket: JSON lines over a Unix stream socket.

A :class:`Control` is one connection: :meth:`Control.request` sends ``{"id", "op", ...}`` and
reads the reply with the same id; :meth:`Control.ok` also asserts ``ok: true``. For the wire
protocol's edge cases it can send raw bytes and read raw replies.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0


class Control:
    """One client connection to a daemon's control socket."""

    def __init__(self, path: Path | str, timeout: float = TIMEOUT_S) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(str(path))
        except BaseException:
            self.sock.close()
            raise
        self.file = self.sock.makefile("rb")
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        """Send ``data`` as is (no framing added)."""
        self.sock.sendall(data)

    def read(self) -> dict[str, Any] | None:
        """The next reply line, or None at end of stream."""
        line = self.file.readline()
        if not line:
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply (whatever ``ok`` says)."""
        self._next_id += 1
        self.send_raw(json.dumps({"id": self._next_id, "op": op, **fields}).encode() + b"\n")
        reply = self.read()
        assert reply is not None, f"connection closed instead of replying to {op}"
        assert reply["id"] == self._next_id, reply
        return reply

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """:meth:`request`, asserting the reply says ``ok: true``."""
        reply = self.request(op, **fields)
        assert reply["ok"] is True, reply
        return reply

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
