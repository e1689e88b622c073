"""The client commands: ``gatewayd send | trigger | status | reload | bootstrap``.

Each sends one request over the control socket (:mod:`gatewayd.client`: plain ``socket`` and
``json``, never the daemon stack) and prints the reply: text for people, the reply's fields as
JSON with ``--json``. A daemon that is not running, or a failed reply, is ``error: ...`` and
exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gatewayd.cli.tracing import format_trace
from gatewayd.client import QUICK_TIMEOUT_S, WAIT_TIMEOUT_S, request, socket_path
from gatewayd.exits import UserError


def _ask(args: argparse.Namespace, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """:func:`gatewayd.client.request` to the socket that ``--socket``/``--config`` select."""
    path = socket_path(getattr(args, "socket", None), getattr(args, "config", None))
    return request(path, payload, timeout_s)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _print_messages(messages: list[str]) -> None:
    for message in messages:
        print(message)


def _text(arg: str) -> str:
    """The message: ``arg``, or with ``-`` all of stdin less one final line break."""
    if arg != "-":
        return arg
    text = sys.stdin.read()
    text = text[:-1] if text.endswith("\n") else text
    text = text[:-1] if text.endswith("\r") else text
    if not text:
        raise UserError("no text on stdin (gatewayd send - reads the message from stdin)")
    return text


def cli_send(args: argparse.Namespace) -> int:
    """``gatewayd send TEXT|- --session KEY``: print the reply, one message per line."""
    reply = _ask(
        args,
        {
            "op": "message",
            "sessionKey": args.session,
            "text": _text(args.text),
            "senderId": args.sender or "cli",
            "channel": args.channel or "cli",
            **({"trace": True} if args.trace else {}),
        },
        WAIT_TIMEOUT_S,
    )
    if args.json:
        _print_json(reply)
    else:
        _print_messages(reply.get("messages") or [])
        if reply.get("blocked"):
            print(f"blocked: {reply.get('reason')}", file=sys.stderr)
        _print_trace(reply)
    return 0


def _print_trace(reply: dict[str, Any]) -> None:
    if "trace" in reply:
        print("-- trace --")
        print(format_trace(reply["trace"]))


def cli_trigger(args: argparse.Namespace) -> int:
    """``gatewayd trigger TYPE:ACTION --session KEY``: print the messages (or ``queued``)."""
    context: Any = {}
    if args.context:
        try:
            context = json.loads(args.context)
        except ValueError as exc:
            raise UserError(f"--context is not valid JSON: {exc}") from None
        if not isinstance(context, dict):
            raise UserError(f"--context must be a JSON object, got {type(context).__name__}")
    payload = {
        "op": "trigger",
        "event": args.event,
        "sessionKey": args.session,
        "context": context,
        "wait": not args.no_wait,
    }
    if args.trace:
        if args.no_wait:
            raise UserError("--trace needs the dispatch: drop --no-wait")
        payload["trace"] = True
    reply = _ask(args, payload, WAIT_TIMEOUT_S)
    if args.json:
        _print_json(reply)
    elif args.no_wait:
        print("queued")
    else:
        _print_messages(reply.get("messages") or [])
        _print_trace(reply)
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
        f"{len(failed)} failed{_by_status(hooks.get('statuses'))})"
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
    status = _ask(args, {"op": "status"}, QUICK_TIMEOUT_S)["status"]
    if args.json:
        _print_json(status)
    else:
        print(format_status(status))
    return 0


def _by_status(statuses: dict[str, int] | None) -> str:
    """``: 3 ready, 1 disabled`` (empty when there are none)."""
    if not statuses:
        return ""
    return ": " + ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))


def cli_reload(args: argparse.Namespace) -> int:
    """``gatewayd reload``: reload config and hooks. A refused config is an error; so is a
    reload that went through with hooks that failed to load (exit 1 after the report)."""
    try:
        reply = _ask(args, {"op": "reload"}, WAIT_TIMEOUT_S)
    except UserError as exc:
        if "[reload_refused]" in str(exc):
            raise UserError(f"reload refused, the running config stays: {exc}") from None
        raise
    result = reply["result"]
    skipped, failed = result.get("skipped") or [], result.get("failed") or []
    if args.json:
        _print_json(result if "changes" not in reply else {**result, "changes": reply["changes"]})
    else:
        print(
            f"reloaded: {result.get('registered', 0)} hooks registered "
            f"({result.get('discovered', 0)} discovered, {result.get('eligible', 0)} eligible, "
            f"{len(skipped)} skipped, {len(failed)} failed{_by_status(result.get('statuses'))})"
        )
        changes = reply.get("changes") or {}
        for what in ("added", "changed", "removed"):
            if changes.get(what):
                print(f"  {what:<8} {', '.join(changes[what])}")
        if changes.get("filesChanged"):
            print(f"  files    {changes['filesChanged']} changed: {', '.join(changes['files'])}")
        for item in skipped:
            print(f"  skipped  {item}")
        for item in failed:
            print(f"  FAILED   {item}", file=sys.stderr)
    if failed:
        names = ", ".join(item.partition(":")[0] for item in failed)
        n = len(failed)
        raise UserError(
            f"the reload went through, but {n} hook{'s' * (n != 1)} failed to load: {names} "
            "(fix them and reload again; gatewayd hooks check shows why)"
        )
    return 0


def format_files(session_key: str, files: list[Any]) -> str:
    """One line per file: name, size in bytes (or ``missing``), path."""
    lines = [f"bootstrap files for {session_key}: {len(files)}"]
    for entry in files:
        entry = entry if isinstance(entry, dict) else {}
        name = str(entry.get("name") or "?")
        if entry.get("missing"):
            size = "missing"
        else:
            size = f"{len(str(entry.get('content') or '').encode()):,} B"
        lines.append(f"  {name:<13} {size:>12}  {entry.get('path') or ''}")
    return "\n".join(lines)


def cli_bootstrap(args: argparse.Namespace) -> int:
    """``gatewayd bootstrap --session KEY [--json]``: the bootstrap files a session would get.

    The control op ``bootstrap`` fires ``agent:bootstrap`` for the session (so
    ``bootstrap-extra-files`` and any other hook have their say) and returns the final
    ``bootstrapFiles``; ``--json`` prints them as the op returns them."""
    reply = _ask(args, {"op": "bootstrap", "sessionKey": args.session}, WAIT_TIMEOUT_S)
    files = reply.get("bootstrapFiles")
    files = files if isinstance(files, list) else []
    if args.json:
        print(json.dumps({"bootstrapFiles": files}, indent=2, ensure_ascii=False))
    else:
        print(format_files(args.session, files))
    return 0
