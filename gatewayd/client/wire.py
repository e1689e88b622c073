"""The client's side of the wire protocol (docs/design.md section 3), for both of its APIs.

What the asynchronous :class:`~gatewayd.client.Client` and the blocking
:class:`~gatewayd.client.SyncClient` share: encoding a request line (with the daemon's line
limit checked before sending), reading a reply into its fields or the typed error it carries
(:mod:`gatewayd.client.errors`), the handshake's check, and what a failed connect means.
Standard library only: the command line's client commands import it.
"""

from __future__ import annotations

import json
import os

from gatewayd import __version__
from gatewayd.client.errors import (
    BadRequest,
    CannotConnect,
    DaemonError,
    GatewayError,
    NotRunning,
    ProtocolError,
    UnsupportedProtocol,
    daemon_error,
)
from gatewayd.paths import HOOK_DEPTH_ENV

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
"""The protocol version this client speaks (``hello``)."""
CLIENT = f"gatewayd.client/{__version__}"
"""What ``hello`` tells the daemon this client is."""
MAX_LINE = 1 << 20
"""The daemon's longest request line, newline excluded (``hello``'s ``maxLineBytes``)."""
CONNECT_TIMEOUT_S = 5.0


CAUSING_OPS = frozenset({"message", "trigger"})
"""The ops whose events a hook's process may cause: they carry its ``depth``."""


def hook_depth() -> int:
    """``$GATEWAYD_HOOK_DEPTH``: set when this process is a command hook's (or runs under one),
    how deep the events it causes are; 0 elsewhere. A value that is no whole number of 0 or
    more raises :class:`BadRequest` naming it."""
    raw = os.environ.get(HOOK_DEPTH_ENV)
    if raw is None or not raw.strip():
        return 0
    try:
        depth = int(raw)
    except ValueError:
        depth = -1
    if depth < 0:
        raise BadRequest(
            f"{HOOK_DEPTH_ENV}={raw!r} is not a depth (a whole number, 0 or more): gatewayd sets "
            "it for the command hooks it runs; unset it, or leave it as the daemon set it"
        )
    return depth


def encode(req_id: int, op: str, fields: dict[str, Any]) -> bytes:
    """One request line. A line over :data:`MAX_LINE` raises :class:`BadRequest` unsent (the
    daemon would discard it and answer without its id); a value JSON cannot carry (NaN, an
    object) raises ``ValueError``/``TypeError``. A ``message`` or ``trigger`` sent from a
    command hook's process carries its :func:`hook_depth` (unless ``fields`` gives one), so
    the events a hook causes through the client count toward ``hooks.maxDepth``."""
    if op in CAUSING_OPS and "depth" not in fields and (depth := hook_depth()):
        fields = {**fields, "depth": depth}
    line = json.dumps({"id": req_id, "op": op, **fields}, allow_nan=False).encode()
    if len(line) > MAX_LINE:
        raise BadRequest(
            f"a {op} request of {len(line):,} bytes is over the daemon's line limit of "
            f"{MAX_LINE:,} bytes: send less in one request",
            code="line_too_long",
        )
    return line + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """A reply line as a dict (``id``, ``ok``, ...); :class:`ProtocolError` when it is none."""
    try:
        reply = json.loads(line)
    except ValueError:
        raise ProtocolError(f"the daemon sent a line that is not JSON: {line[:120]!r}") from None
    if type(reply) is not dict or "ok" not in reply:
        raise ProtocolError(f"the daemon sent a line that is not a reply: {line[:120]!r}")
    return reply


def outcome(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply's own fields (without ``id`` and ``ok``), or the :class:`DaemonError` it
    carries raised."""
    if reply.pop("ok") is not True:
        error = reply.get("error")
        error = error if type(error) is dict else {}
        raise daemon_error(str(error.get("code", "?")), str(error.get("message", "failed")))
    reply.pop("id", None)
    return reply


def hello_fields() -> dict[str, Any]:
    """What ``hello`` says: this client's protocol version and name."""
    return {"protocol": PROTOCOL, "client": CLIENT}


def check_hello(fields: dict[str, Any], path: str) -> dict[str, Any]:
    """The ``hello`` reply, once this client's protocol is one the daemon serves (the daemon
    checks too; this covers a daemon that answers with a range it does not enforce)."""
    newest, oldest = fields.get("protocol"), fields.get("minProtocol")
    if type(newest) is not int or type(oldest) is not int:
        raise ProtocolError(f"the daemon at {path} answered hello without its protocol range")
    daemon = (fields.get("daemon") or {}).get("version", "?")
    serves = f"gatewayd {daemon} at {path} serves protocol {oldest} to {newest}"
    if newest < PROTOCOL:
        raise UnsupportedProtocol(
            f"{serves}; this client ({CLIENT}) speaks protocol {PROTOCOL}: upgrade gatewayd to "
            f"a release that serves protocol {PROTOCOL}"
        )
    if oldest > PROTOCOL:
        raise UnsupportedProtocol(
            f"{serves}; this client ({CLIENT}) speaks protocol {PROTOCOL}: upgrade the client "
            f"to one that speaks protocol {oldest} or newer"
        )
    return fields


def hello_refused(exc: DaemonError, path: str) -> GatewayError:
    """What a refused ``hello`` means: a daemon older than the handshake answers
    ``unknown_op``."""
    if exc.code == "unknown_op":
        return UnsupportedProtocol(
            f"gatewayd at {path} predates the hello handshake: upgrade gatewayd to a release "
            f"that serves protocol {PROTOCOL}"
        )
    return exc


def connect_failure(path: str, exc: OSError) -> CannotConnect:
    """Why connecting to ``path`` failed, for a person."""
    if isinstance(exc, FileNotFoundError):
        return NotRunning(f"gatewayd is not running (no socket at {path})")
    if isinstance(exc, ConnectionRefusedError):
        return NotRunning(f"gatewayd is not running (nothing listening on {path}: a stale socket)")
    if isinstance(exc, PermissionError):
        return CannotConnect(
            f"cannot connect to {path}: permission denied (the daemon runs as another user; "
            "run this as that user or root)"
        )
    return CannotConnect(f"cannot connect to {path}: {exc.strerror or exc}")
