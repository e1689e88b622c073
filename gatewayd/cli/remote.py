"""The client commands: ``gatewayd send | trigger | status | reload | bootstrap``.

Each asks the daemon over the control socket with the blocking client
(:class:`gatewayd.client.SyncClient`: plain ``socket`` and ``json``, never anyio or the daemon
stack) and prints the reply: text for people, the reply's fields as JSON with ``--json``. A
daemon that is not running, or a refused request, is ``error: ...`` and exit 1
(:mod:`gatewayd.client.errors`).
"""

from __future__ import annotations

import json
import sys

from gatewayd.cli.common import FAILING_STATUSES, status_counts
from gatewayd.cli.tracing import format_trace
from gatewayd.client import (
    QUICK_TIMEOUT_S,
    WAIT_TIMEOUT_S,
    ReloadRefused,
    SyncClient,
    request,
    socket_path,
)
from gatewayd.exits import UserError

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _socket(args: argparse.Namespace) -> str:
    """The socket that ``--socket``/``--config`` select (:func:`gatewayd.client.socket_path`)."""
    return socket_path(getattr(args, "socket", None), getattr(args, "config", None))


def _ask(args: argparse.Namespace, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """:func:`gatewayd.client.request` to the socket that ``--socket``/``--config`` select."""
    return request(_socket(args), payload, timeout_s)


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


def _not_ready(client: SyncClient) -> list[dict[str, Any]]:
    """The hooks of the daemon that are not ``ready`` (``hooks`` op), as ``{name, status,
    reasons}``: the status words of ``gatewayd hooks list``."""
    listing = client.call("hooks", timeout=QUICK_TIMEOUT_S)
    return [
        {"name": h.get("name"), "status": h.get("status"), "reasons": h.get("reasons") or []}
        for h in listing.get("hooks") or []
        if h.get("status") != "ready"
    ]


def _hook_lines(summary: dict[str, Any], not_ready: list[dict[str, Any]], verb: str) -> list[str]:
    """``3 registered of 5 discovered (1 invalid, 1 disabled)`` and one line per hook."""
    counts = status_counts([str(h["status"]) for h in not_ready])
    head = f"{summary.get('registered', 0)} {verb} of {summary.get('discovered', 0)} discovered"
    lines = [head + (f" ({counts})" if counts else "")]
    for hook in not_ready:
        why = "; ".join(str(r) for r in hook["reasons"]) or hook["status"]
        lines.append(f"  {hook['status']:<10} {hook['name']}: {why}")
    return lines


def _agent_lines(agents: dict[str, Any]) -> list[str]:
    """``agents:`` lines, when there is more than the one default agent to tell apart: each
    agent's ready hooks, and each subagent's."""
    many = len(agents) > 1 or any(a.get("subagents") for a in agents.values())
    if not many:
        return []
    lines = []
    for i, (agent, info) in enumerate(agents.items()):
        hooks = info.get("hooks") or []
        label = f"{agent} (default)" if info.get("default") else agent
        line = f"{'agents:' if i == 0 else '':<9} {label}: {len(hooks)} hooks"
        if hooks:
            line += f" ({', '.join(hooks)})"
        lines.append(line)
        for sub, names in (info.get("subagents") or {}).items():
            lines.append(f"{'':<11}subagent {sub}: {', '.join(names)}")
    return lines


def format_status(st: dict[str, Any], not_ready: list[dict[str, Any]] | None = None) -> str:
    """The human-readable ``gatewayd status``; ``not_ready`` from :func:`_not_ready`."""
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
    hook_lines = _hook_lines(hooks, not_ready or [], "registered")
    lines.append(f"hooks:    {hook_lines[0]}; {hooks.get('warnings', 0)} warnings")
    lines += hook_lines[1:]
    lines += _agent_lines(st.get("agents") or {})
    latency = queue.get("latency_ms") or {}
    lines.append(
        f"queue:    {queue.get('depth', 0)}/{queue.get('capacity', 0)} queued, "
        f"{queue.get('dispatched', 0)} dispatched, {queue.get('errors', 0)} failed, "
        f"{queue.get('timeouts', 0)} timed out; latency p50 {latency.get('p50', 0)} ms, "
        f"p99 {latency.get('p99', 0)} ms"
    )
    if queue.get("refused"):
        lines.append(
            f"          {queue['refused']} refused with queue_full (a session stayed at "
            f"gateway.queue.perSessionMax = {queue.get('per_session_max')})"
        )
    journal = queue.get("journal") or {}
    if journal.get("backend") == "sqlite":
        lines.append(
            f"journal:  {journal.get('path')} ({journal.get('size_bytes', 0):,} bytes), "
            f"{journal.get('pending', 0)} pending (oldest {journal.get('oldest_pending_age_s', 0)}"
            f" s), {journal.get('dead_letters', 0)} dead letters"
            + (" - DISK FULL" if journal.get("full") else "")
        )
    elif journal.get("backend") == "redis":
        lines.extend(_redis_lines(journal))
    elif journal:
        lines.append(f"journal:  memory, {journal.get('dead_letters', 0)} dead letters")
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
    """``gatewayd status [--socket PATH] [--config FILE] [--json]``."""
    return show_status(args.socket, args.config, args.json)


def show_status(socket: str | None, config: str | None, as_json: bool) -> int:
    """What ``gatewayd status`` prints, given its options (``main`` calls it directly for
    ``gatewayd status [--json]``, without building the parser)."""
    with SyncClient(socket_path(socket, config)) as client:
        status = client.call("status", timeout=QUICK_TIMEOUT_S)["status"]
        if as_json:
            _print_json(status)
        else:
            print(format_status(status, _not_ready(client)))
    return 0


def cli_reload(args: argparse.Namespace) -> int:
    """``gatewayd reload``: reload config and hooks, say what changed, and name every hook that
    is not ready with its status. A refused config is an error (exit 1), and so is a reload
    after which a hook is ``failed`` or ``invalid`` (as ``hooks check`` says): the other hooks
    run, and the failing ones are named with their reasons."""
    with SyncClient(_socket(args)) as client:
        try:
            reply = client.call("reload", timeout=WAIT_TIMEOUT_S)
        except ReloadRefused as exc:
            raise UserError(f"reload refused, the running config stays: {exc}") from None
        not_ready = _not_ready(client)
    result = reply["result"]
    failing = [h for h in not_ready if h["status"] in FAILING_STATUSES]
    changes = reply.get("changes") or {}
    if args.json:
        document = {**result, "ok": not failing, "notReady": not_ready}
        if "restartNeeded" in reply:
            document["restartNeeded"] = reply["restartNeeded"]
        _print_json(document if "changes" not in reply else {**document, "changes": changes})
    else:
        lines = _hook_lines(result, not_ready, "hooks registered")
        print(f"reloaded: {lines[0]}")
        for what in ("added", "changed", "removed"):
            if changes.get(what):
                print(f"  {what:<8} {', '.join(changes[what])}")
        if changes.get("filesChanged"):
            print(f"  files    {changes['filesChanged']} changed: {', '.join(changes['files'])}")
        if restart := reply.get("restartNeeded"):
            print(f"  needs a restart to take effect: {', '.join(restart)}")
        print("\n".join(lines[1:]), end="\n" if lines[1:] else "")
    if failing:
        names = ", ".join(f"{h['name']} ({h['status']})" for h in failing)
        n = len(failing)
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


def _redis_lines(journal: dict[str, Any]) -> list[str]:
    """The Redis queue in ``gatewayd status``: the connection, then the partitions owned."""
    down = f"UNREACHABLE for {journal.get('down_s')} s"
    state = "connected" if journal.get("connected") else down
    owned = journal.get("owned") or []
    lines = [
        f"queue on: redis {journal.get('url')} ({journal.get('namespace')}), {state}; instance "
        f"{journal.get('instance')} of {journal.get('instances')}, owns {len(owned)} of "
        f"{journal.get('partitions')} partitions, {journal.get('pending', 0)} pending here, "
        f"{journal.get('dead_letters', 0)} dead letters"
    ]
    parts = ", ".join(
        f"{p['partition']} (lag {p.get('lag')}, pending {p.get('pending')})" for p in owned
    )
    if parts:
        lines.append(f"owned:    {parts}")
    return lines
