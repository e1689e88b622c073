"""The control-socket client: find a running daemon's socket and send it one request.

Used by the client commands (``gatewayd send | trigger | status | reload | bootstrap``, in
:mod:`gatewayd.cli.remote`). Deliberately light: plain ``socket`` and ``json`` (and PyYAML only
when a config file must be read to find the socket), never the daemon stack (anyio, pydantic,
structlog, the hooks package), so ``gatewayd status`` answers in a few tens of milliseconds.

The socket is, first found wins: ``--socket PATH``; ``$GATEWAYD_GATEWAY__CONTROL__SOCKET``;
``gateway.control.socket`` in the config file (``--config``, ``$GATEWAYD_CONFIG``,
``$ELIZA_STATE_DIR/gatewayd.yaml``); ``$ELIZA_STATE_DIR/run/gatewayd.sock``. The locations
themselves come from :mod:`gatewayd.paths`. Failures raise :class:`~gatewayd.exits.UserError`
with a message saying what is wrong: exit 78 for a config file that cannot be read, or cannot
be parsed when it may set the socket (the rest of the file is the daemon's to validate), 1 for
everything else.
"""

from __future__ import annotations

import json
import os
import socket

from gatewayd.exits import EXIT_CONFIG, UserError
from gatewayd.paths import SOCKET_ENV, config_file_choice, default_control_socket

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from typing import Any

CONNECT_TIMEOUT_S = 5.0
QUICK_TIMEOUT_S = 30.0
"""Bound on ``status`` and ``ping`` replies."""
WAIT_TIMEOUT_S = 600.0
"""Bound on replies that wait for hooks (``send``, ``trigger``, ``reload``)."""


def _config_socket(explicit: str | None) -> str | None:
    """``gateway.control.socket`` from the config file, if one is in use and sets it."""
    path, required = config_file_choice(explicit)
    if not required and not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UserError(
            f"cannot read the config file {path}: {exc.strerror or exc}", EXIT_CONFIG
        ) from None
    except ValueError as exc:  # not UTF-8
        raise UserError(f"cannot read the config file {path}: {exc}", EXIT_CONFIG) from None
    if "socket" not in text:
        return None  # cannot set gateway.control.socket: spare the PyYAML import (~20 ms)
    from gatewayd.yamlio import YamlError, load_yaml  # only now: PyYAML is the slow import here

    try:
        data = load_yaml(text, path)
    except YamlError as exc:
        raise UserError(f"{exc} (run `gatewayd config check`)", EXIT_CONFIG) from None
    value = data
    for key in ("gateway", "control", "socket"):
        value = value.get(key) if isinstance(value, dict) else None
    if value is not None and not isinstance(value, str):
        raise UserError(
            f"{path}: gateway.control.socket must be a path, got {json.dumps(value)} "
            "(run `gatewayd config check`)",
            EXIT_CONFIG,
        )
    return value or None


def socket_path(explicit: str | None = None, config: str | None = None) -> str:
    """Where the daemon listens, given ``--socket`` and ``--config`` (either may be None); see
    the module docstring for the order."""
    env = os.environ.get(SOCKET_ENV)
    configured = explicit or (env if env and env != "null" else None)
    configured = configured or _config_socket(config)
    if configured:
        return os.path.expanduser(configured)
    return default_control_socket()


def request(path: str, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one request to the socket at ``path`` and return the reply's fields (without ``id``
    and ``ok``); no daemon there, no reply or a failed reply raises :class:`UserError`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except FileNotFoundError:
            raise UserError(f"gatewayd is not running (no socket at {path})") from None
        except ConnectionRefusedError:
            raise UserError(
                f"gatewayd is not running (nothing listening on {path}: a stale socket)"
            ) from None
        except PermissionError:
            raise UserError(
                f"cannot connect to {path}: permission denied (the daemon runs as another user; "
                "run this as that user or root)"
            ) from None
        except OSError as exc:
            raise UserError(f"cannot connect to {path}: {exc.strerror or exc}") from None
        sock.settimeout(timeout_s)
        try:
            sock.sendall(json.dumps({"id": 1, **payload}).encode() + b"\n")
            line = _read_line(sock)
        except TimeoutError:
            raise UserError(f"no reply from gatewayd within {timeout_s:g} s ({path})") from None
        except OSError as exc:
            raise UserError(f"lost the connection to gatewayd ({path}): {exc}") from None
    finally:
        sock.close()
    if not line:
        raise UserError("gatewayd closed the connection without replying (is it shutting down?)")
    reply: dict[str, Any] = json.loads(line)
    if not reply.get("ok"):
        error = reply.get("error") or {}
        raise UserError(f"{error.get('message', 'request failed')} [{error.get('code', '?')}]")
    reply.pop("id", None)
    reply.pop("ok", None)
    return reply


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if b"\n" in chunk:
            return b"".join(chunks).split(b"\n", 1)[0]
