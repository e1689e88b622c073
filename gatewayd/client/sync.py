"""The blocking client: one request after another on one connection (the command line's).

:class:`SyncClient` is the small synchronous API over the client's protocol core
(:mod:`gatewayd.client.wire`): plain ``socket`` and ``json``, so ``gatewayd status`` answers
in a few tens of milliseconds without importing anyio (the asynchronous
:class:`~gatewayd.client.Client` is the one for programs). Failures raise the same
:mod:`gatewayd.client.errors` as the asynchronous client.

    with SyncClient(socket_path()) as gw:
        status = gw.call("status")["status"]
"""

from __future__ import annotations

import socket

from gatewayd.client.errors import ConnectionLost, DaemonError, RequestTimeout
from gatewayd.client.wire import (
    CONNECT_TIMEOUT_S,
    check_hello,
    connect_failure,
    decode,
    encode,
    hello_fields,
    hello_refused,
    outcome,
)

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from typing import Any

QUICK_TIMEOUT_S = 30.0
"""Bound on replies that do not wait for hooks (``status``, ``hooks``, ``events``)."""
WAIT_TIMEOUT_S = 600.0
"""Bound on replies that wait for hooks (``message``, ``trigger``, ``reload``, ``test``)."""


class SyncClient:
    """One blocking connection to the daemon at ``path``; connects at once (raising
    :class:`~gatewayd.client.errors.NotRunning` and the like). Use as a context manager."""

    def __init__(self, path: str, *, connect_timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.path = path
        self._next_id = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(connect_timeout)
            self._sock.connect(path)
        except OSError as exc:
            self._sock.close()
            raise connect_failure(path, exc) from None
        self._file = self._sock.makefile("rb")

    def call(
        self, op: str, fields: dict[str, Any] | None = None, *, timeout: float = QUICK_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send one request and return its reply's fields (without ``id`` and ``ok``); a
        refusal raises its :class:`~gatewayd.client.errors.DaemonError`."""
        self._next_id += 1
        req_id = self._next_id
        line = encode(req_id, op, fields or {})
        self._sock.settimeout(timeout)
        try:
            self._sock.sendall(line)
            while True:
                data = self._file.readline()
                if not data:
                    raise ConnectionLost(
                        "gatewayd closed the connection without replying (is it shutting down?)"
                    )
                reply = decode(data)
                if reply.get("id") == req_id or reply.get("id") is None:
                    return outcome(reply)  # id null: refused before reading it (busy, ...)
        except TimeoutError:
            raise RequestTimeout(
                f"no reply from gatewayd within {timeout:g} s ({self.path})"
            ) from None
        except OSError as exc:
            raise ConnectionLost(f"lost the connection to gatewayd ({self.path}): {exc}") from None

    def hello(self) -> dict[str, Any]:
        """The handshake (docs/design.md section 3): what the daemon serves, once this client's
        protocol is one of them (else :class:`~gatewayd.client.errors.UnsupportedProtocol`)."""
        try:
            fields = self.call("hello", hello_fields())
        except DaemonError as exc:
            raise hello_refused(exc, self.path) from None
        return check_hello(fields, self.path)

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(path: str, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One request (``payload``: ``op`` and its fields) on a connection of its own; the reply's
    fields. What each command of the command line sends."""
    fields = dict(payload)
    op = fields.pop("op")
    with SyncClient(path) as client:
        return client.call(op, fields, timeout=timeout_s)
