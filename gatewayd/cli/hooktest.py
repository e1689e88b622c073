"""``gatewayd hooks test NAME``: fire one hook at a sample event and show what it did.

In the running daemon when there is one (the ``test`` control op: its environment, config and
counters), else in this process (``--local`` asks for that, ``--daemon`` insists on the daemon).
The event is ``--event TYPE:ACTION`` or the hook's first event, with a context of the right
shape for it (:func:`gatewayd.hooks.tester.sample_context`) and ``--context JSON`` merged over
it. Prints the replies, then the trace (outcome, time, changes per handler, or why the hook did
not run); a hook's own logging and prints show on stderr as ``hook.log`` / ``hook.output`` lines.
Exit 0 when every handler of the hook ran ``ok``, 1 otherwise, and 1 too when the event is one
the gateway never fires (a misspelt ``message:recieved`` runs here, never in production): the
event's warning, with the closest known name, is printed and is ``warnings`` in ``--json``. A
hook name that matches none says which hook was meant.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gatewayd.cli.tracing import format_trace
from gatewayd.client import WAIT_TIMEOUT_S, request, socket_path
from gatewayd.exits import EXIT_OK, UserError, did_you_mean

EXIT_HOOK_FAILED = 1


def _context(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--context is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UserError(f"--context must be a JSON object, got {type(value).__name__}")
    return value


def _in_daemon(args: argparse.Namespace, context: dict[str, Any]) -> dict[str, Any] | None:
    path = socket_path(args.socket, args.config)
    payload = {
        "op": "test",
        "hook": args.name,
        "event": args.event or "",
        "context": context,
        "sessionKey": args.session,
    }
    try:
        return request(path, payload, WAIT_TIMEOUT_S)
    except UserError as exc:
        if not args.daemon and str(exc).startswith("gatewayd is not running"):
            return None
        if "[unknown_hook]" in str(exc):
            listed = request(path, {"op": "hooks"}, WAIT_TIMEOUT_S).get("hooks") or []
            known = {str(h.get(k)) for h in listed for k in ("name", "hookKey") if h.get(k)}
            message = str(exc).replace(" [unknown_hook]", "")
            raise UserError(f"{message}{did_you_mean(args.name, known)}") from None
        raise


def _in_process(args: argparse.Namespace, context: dict[str, Any]) -> dict[str, Any]:
    import anyio

    from gatewayd.cli.common import load_config_or_exit
    from gatewayd.hooks.capture import capture_hook_output
    from gatewayd.hooks.cfgview import public_cfg
    from gatewayd.hooks.events import EventKeyError, parse_event_key
    from gatewayd.hooks.handlers import HandlerKind
    from gatewayd.hooks.loader import HookLoader
    from gatewayd.hooks.registry import HookRegistry
    from gatewayd.hooks.stats import bind_loop_thread
    from gatewayd.hooks.tester import test_hook
    from gatewayd.logging import configure_logging

    if args.event:
        try:
            etype, action = parse_event_key(args.event)
        except EventKeyError as exc:
            raise UserError(str(exc)) from None
        if etype == "*" or not action:
            raise UserError(f"--event {args.event!r} needs an action: TYPE:ACTION")
    config = load_config_or_exit(args.config)
    configure_logging("warning", "auto", sys.stderr)
    spec = config.load_spec()
    loader = HookLoader()
    try:
        result = loader.build(spec)
        registry = HookRegistry(default_timeout_s=spec.timeout_ms / 1000)
        registry.set_file_hooks(result.handlers)
        if any(h.kind is HandlerKind.NODE for h in registry.handlers_of(args.name)):
            raise UserError(
                f"{args.name} is a JS/TS hook: test it in a running daemon (start gatewayd run, "
                "then run this again)"
            )
        base = {"cfg": public_cfg(config.effective()), "workspaceDir": str(config.paths.workspace)}
        configure_logging("info", "auto", sys.stderr)  # the hook's own lines, now

        async def run() -> dict[str, Any]:
            bind_loop_thread()
            return await test_hook(
                registry, result.records, args.name, args.event, context, base, args.session
            )

        with capture_hook_output():
            try:
                return anyio.run(run)
            except LookupError:
                known = {r.name for r in result.records} | {r.hook_key for r in result.records}
                raise UserError(
                    f'hook "{args.name}" not found{did_you_mean(args.name, known)} '
                    "(gatewayd hooks list --local shows them all)"
                ) from None
    finally:
        loader.close()


def _never_fired(event: str) -> list[str]:
    """The warnings of an event the gateway never fires (none for one it fires)."""
    from gatewayd.hooks.vocabulary import resolve

    return list(resolve(event).warnings)


def cli_test(args: argparse.Namespace) -> int:
    """``gatewayd hooks test NAME [--event TYPE:ACTION] [--context JSON] [--json]``."""
    context = _context(args.context)
    reply = None if args.local else _in_daemon(args, context)
    where = "in the running daemon"
    if reply is None:
        reply = _in_process(args, context)
        where = "in this process (no daemon running)" if not args.local else "in this process"
    if warnings := _never_fired(str(reply.get("event") or "")):
        # It ran here, on a sample; in production nothing ever fires it.
        reply = {**reply, "passed": False, "warnings": warnings}
    if args.json:
        print(json.dumps({"view": "daemon" if "daemon" in where else "local", **reply}, indent=2))
    else:
        print(f"hooks test {reply['hook']} with {reply['event']}, {where}")
        for message in reply.get("messages") or []:
            print(message)
        print("-- trace --")
        print(format_trace(reply.get("trace") or []))
        for warning in reply.get("warnings") or ():
            print(f"warning: {warning}")
        print("ok" if reply.get("passed") else "FAILED")
    return EXIT_OK if reply.get("passed") else EXIT_HOOK_FAILED
