"""The client commands: ``gatewayd send | trigger | status | reload`` over the control socket.

Deliberately light: plain ``socket`` and ``json`` (and PyYAML only when a config file must be
read to find the socket), never the daemon stack (anyio, pydantic, structlog, the hooks
package), so ``gatewayd status`` answers in a few tens of milliseconds.

The socket is, first found wins: ``--socket PATH``; ``$GATEWAYD_GATEWAY__CONTROL__SOCKET``;
``gateway.control.socket`` in the config file (``--config``, ``$GATEWAYD_CONFIG``,
``$ELIZA_STATE_DIR/gatewayd.yaml``); ``$ELIZA_STATE_DIR/run/gatewayd.sock``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from gatewayd.cli import CliError

SOCKET_ENV = "GATEWAYD_GATEWAY__CONTROL__SOCKET"
CONNECT_TIMEOUT_S = 5.0
QUICK_TIMEOUT_S = 30.0
"""Bound on ``status`` and ``ping`` replies."""
WAIT_TIMEOUT_S = 600.0
"""Bound on replies that wait for hooks (``send``, ``trigger``, ``reload``)."""


def _state_dir() -> str:
    raw = os.environ.get("ELIZA_STATE_DIR")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".eliza")


def _config_socket(explicit: str | None) -> str | None:
    """``gateway.control.socket`` from the config file, if one is in use and sets it."""
    path = explicit or os.environ.get("GATEWAYD_CONFIG")
    if path:
        path = os.path.expanduser(path)
    else:
        path = os.path.join(_state_dir(), "gatewayd.yaml")
        if not os.path.exists(path):
            return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    if "socket" not in text:
        return None  # cannot set gateway.control.socket: spare the PyYAML import (~20 ms)
    from gatewayd.yamlio import YamlError, load_yaml  # only now: PyYAML is the slow import here

    try:
        data = load_yaml(text, path)
    except YamlError as exc:
        raise CliError(f"{exc} (run `gatewayd config check`)") from None
    value = data
    for key in ("gateway", "control", "socket"):
        value = value.get(key) if isinstance(value, dict) else None
    return str(value) if value else None


def socket_path(args: argparse.Namespace) -> str:
    """Where the daemon listens; see the module docstring for the order."""
    explicit = getattr(args, "socket", None)
    env = os.environ.get(SOCKET_ENV)
    configured = explicit or (env if env and env != "null" else None)
    configured = configured or _config_socket(getattr(args, "config", None))
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(_state_dir(), "run", "gatewayd.sock")


def request(args: argparse.Namespace, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one request and return the reply's fields; a failed reply raises :class:`CliError`."""
    path = socket_path(args)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except FileNotFoundError:
            raise CliError(f"gatewayd is not running (no socket at {path})") from None
        except ConnectionRefusedError:
            raise CliError(
                f"gatewayd is not running (nothing listening on {path}: a stale socket)"
            ) from None
        except PermissionError:
            raise CliError(
                f"cannot connect to {path}: permission denied (the daemon runs as another user; "
                "run this as that user or root)"
            ) from None
        except OSError as exc:
            raise CliError(f"cannot connect to {path}: {exc.strerror or exc}") from None
        sock.settimeout(timeout_s)
        try:
            sock.sendall(json.dumps({"id": 1, **payload}).encode() + b"\n")
            line = _read_line(sock)
        except TimeoutError:
            raise CliError(f"no reply from gatewayd within {timeout_s:g} s ({path})") from None
        except OSError as exc:
            raise CliError(f"lost the connection to gatewayd ({path}): {exc}") from None
    finally:
        sock.close()
    if not line:
        raise CliError("gatewayd closed the connection without replying (is it shutting down?)")
    reply: dict[str, Any] = json.loads(line)
    if not reply.get("ok"):
        error = reply.get("error") or {}
        raise CliError(f"{error.get('message', 'request failed')} [{error.get('code', '?')}]")
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


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _print_messages(messages: list[str]) -> None:
    for message in messages:
        print(message)


def cli_send(args: argparse.Namespace) -> int:
    """``gatewayd send TEXT --session KEY``: print the reply, one message per line."""
    reply = request(
        args,
        {
            "op": "message",
            "sessionKey": args.session,
            "text": args.text,
            "senderId": args.sender or "cli",
            "channel": args.channel or "cli",
        },
        WAIT_TIMEOUT_S,
    )
    if args.json:
        _print_json(reply)
    else:
        _print_messages(reply.get("messages") or [])
    return 0


def cli_trigger(args: argparse.Namespace) -> int:
    """``gatewayd trigger TYPE:ACTION --session KEY``: print the messages (or ``queued``)."""
    context: Any = {}
    if args.context:
        try:
            context = json.loads(args.context)
        except ValueError as exc:
            raise CliError(f"--context is not valid JSON: {exc}") from None
        if not isinstance(context, dict):
            raise CliError(f"--context must be a JSON object, got {type(context).__name__}")
    payload = {
        "op": "trigger",
        "event": args.event,
        "sessionKey": args.session,
        "context": context,
        "wait": not args.no_wait,
    }
    reply = request(args, payload, WAIT_TIMEOUT_S)
    if args.json:
        _print_json(reply)
    elif args.no_wait:
        print("queued")
    else:
        _print_messages(reply.get("messages") or [])
    return 0


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{seconds:.1f}s"
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def format_status(st: dict[str, Any]) -> str:
    """The human-readable ``gatewayd status``."""
    hooks, queue = st.get("hooks") or {}, st.get("queue") or {}
    lines = [
        f"gatewayd {st.get('version')} {st.get('state', 'running')} "
        f"(pid {st.get('pid')}, up {_duration(float(st.get('uptime_s') or 0))}, {st.get('loop')})",
        f"config:   {st.get('config')}",
    ]
    for ch in st.get("channels") or []:
        n = ch.get("connections", 0)
        lines.append(
            f"{ch.get('name')}:  {ch.get('address')} "
            f"({'listening' if ch.get('listening') else 'closed'}, {n} connection{'s' * (n != 1)})"
        )
    skipped, failed = hooks.get("skipped") or [], hooks.get("failed") or []
    lines.append(
        f"hooks:    {hooks.get('registered', 0)} registered ({hooks.get('discovered', 0)} "
        f"discovered, {hooks.get('eligible', 0)} eligible, {len(skipped)} skipped, "
        f"{len(failed)} failed)"
    )
    lines += [f"  skipped  {item}" for item in skipped]
    lines += [f"  FAILED   {item}" for item in failed]
    latency = queue.get("latency_ms") or {}
    lines.append(
        f"queue:    {queue.get('depth', 0)}/{queue.get('capacity', 0)} queued, "
        f"{queue.get('dispatched', 0)} dispatched, {queue.get('errors', 0)} failed, "
        f"{queue.get('timeouts', 0)} timed out; latency p50 {latency.get('p50', 0)} ms, "
        f"p99 {latency.get('p99', 0)} ms"
    )
    lines.append(f"sessions: {st.get('sessions', 0)}")
    lines.append(f"startup:  {'fired' if st.get('startup_fired') else 'pending'}")
    last = st.get("last_reload")
    reloads = f"reloads:  {st.get('reloads', 0)}"
    if last:
        reloads += (
            f" (last {last.get('time')} by {last.get('trigger')}: {last.get('result')}, "
            f"{last.get('duration_ms')} ms)"
        )
    lines.append(reloads)
    return "\n".join(lines)


def cli_status(args: argparse.Namespace) -> int:
    """``gatewayd status [--json]``."""
    status = request(args, {"op": "status"}, QUICK_TIMEOUT_S)["status"]
    if args.json:
        _print_json(status)
    else:
        print(format_status(status))
    return 0


def cli_reload(args: argparse.Namespace) -> int:
    """``gatewayd reload``: reload config and hooks; a refused config is an error."""
    try:
        result = request(args, {"op": "reload"}, WAIT_TIMEOUT_S)["result"]
    except CliError as exc:
        if "[reload_refused]" in str(exc):
            raise CliError(f"reload refused, the running config stays: {exc}") from None
        raise
    if args.json:
        _print_json(result)
        return 0
    skipped, failed = result.get("skipped") or [], result.get("failed") or []
    print(
        f"reloaded: {result.get('registered', 0)} hooks registered "
        f"({result.get('discovered', 0)} discovered, {result.get('eligible', 0)} eligible, "
        f"{len(skipped)} skipped, {len(failed)} failed)"
    )
    for item in skipped:
        print(f"  skipped  {item}")
    for item in failed:
        print(f"  FAILED   {item}", file=sys.stderr)
    return 0
