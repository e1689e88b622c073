"""The ``gatewayd`` argument parser: every command, its flags and its help (argparse).

Each command's parser records its key (``"status"``, ``"hooks list"``) as ``command_key``;
:mod:`gatewayd.cli.app` looks the key up in its table of handlers. Building the parser imports
nothing but argparse, so a client command such as ``gatewayd status`` stays fast; with
``only=`` just one top-level command's parser is built.

A mistyped command or choice is answered with the closest known one (``unknown command
'stauts'; did you mean 'status'?``), the habit of git and pip.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from gatewayd import __version__
from gatewayd.exits import did_you_mean


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            known = [str(choice) for choice in choices]
            what = "command" if isinstance(action, argparse._SubParsersAction) else "choice"
            raise argparse.ArgumentError(
                action,
                f"unknown {what} {value!r}{did_you_mean(str(value), known)} "
                f"(choose from {', '.join(known)})",
            )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file (default: $GATEWAYD_CONFIG, else $ELIZA_STATE_DIR/gatewayd.yaml)",
    )


def _json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def _trace_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        action="store_true",
        help="also show what each handler did (outcome, time, changes) and why none ran",
    )


def _view_flags(parser: argparse.ArgumentParser) -> None:
    """``hooks list|info``: whose view (gatewayd.cli.hookview)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--daemon",
        action="store_true",
        help="the running daemon's hooks and counters (the default when one runs)",
    )
    group.add_argument(
        "--local",
        action="store_true",
        help="load the hooks in this process, as a gatewayd started now would",
    )
    parser.add_argument(
        "--socket", metavar="PATH", help="the daemon's control socket (as for gatewayd status)"
    )


def _client(parser: argparse.ArgumentParser) -> None:
    """Flags of the commands that talk to a running daemon (gatewayd.client)."""
    _json_flag(parser)
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="control socket (default: $GATEWAYD_GATEWAY__CONTROL__SOCKET, the config's "
        "gateway.control.socket, else $ELIZA_STATE_DIR/run/gatewayd.sock)",
    )


def _command(sub: Any, key: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of the command ``key`` (``"status"``, ``"hooks list"``): its handler is
    ``HANDLERS[key]`` in :mod:`gatewayd.cli.app`."""
    name = key.rpartition(" ")[2]
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, **kwargs)
    parser.set_defaults(command_key=key)
    _common(parser)
    return parser


def _add_run(sub: Any) -> None:
    p = _command(sub, "run", "run the daemon in the foreground")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", choices=["auto", "json", "console"])


def _add_send(sub: Any) -> None:
    p = _command(sub, "send", "send a message to a running daemon")
    p.add_argument("text", metavar="TEXT", help="the message; - reads it from stdin")
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    p.add_argument("--sender", metavar="ID", help="sender id (default: cli)")
    p.add_argument("--channel", metavar="NAME", help="channel id (default: cli)")
    _trace_flag(p)
    _client(p)


def _add_trigger(sub: Any) -> None:
    p = _command(sub, "trigger", "post an event to the queue")
    p.add_argument("event", metavar="TYPE:ACTION")
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    p.add_argument("--context", metavar="JSON", help="event context as a JSON object")
    p.add_argument("--no-wait", action="store_true", help="return once queued")
    _trace_flag(p)
    _client(p)


def _add_status(sub: Any) -> None:
    p = _command(sub, "status", "show a running daemon's status")
    _client(p)


def _add_reload(sub: Any) -> None:
    p = _command(sub, "reload", "reload config and hooks")
    _client(p)


def _add_bootstrap(sub: Any) -> None:
    p = _command(
        sub,
        "bootstrap",
        "show the bootstrap files a session gets (after agent:bootstrap hooks)",
    )
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    _client(p)


def _add_hooks(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="inspect hooks", description="inspect hooks")
    hsub = hooks.add_subparsers(dest="hooks_command", metavar="COMMAND", required=True)
    p = _command(hsub, "hooks list", "list hooks and their status")
    p.add_argument("--eligible", action="store_true", help="only hooks that can run here")
    p.add_argument(
        "--agent",
        metavar="ID",
        help="only the hooks that serve this agent's sessions (shared, its own, its subagents')",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show every reason")
    _json_flag(p)
    _view_flags(p)
    p = _command(hsub, "hooks info", "show one hook")
    p.add_argument("name", metavar="NAME", help="hook name or hookKey")
    _json_flag(p)
    _view_flags(p)
    p = _command(hsub, "hooks test", "fire one hook at a sample event; show replies and trace")
    p.add_argument("name", metavar="NAME", help="hook name or hookKey")
    p.add_argument(
        "--event", metavar="TYPE:ACTION", help="the event (default: the hook's first event)"
    )
    p.add_argument("--context", metavar="JSON", help="context fields over the sample's")
    p.add_argument("--session", metavar="KEY", default="agent:main:hooks-test", help="session key")
    _json_flag(p)
    _view_flags(p)
    p = _command(hsub, "hooks check", "report hooks that are not ready")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 on warnings too (unknown event names, ...)"
    )
    _json_flag(p)
    p = _command(hsub, "hooks order", "the hooks an event runs, in order")
    p.add_argument("event", metavar="TYPE:ACTION", help="the event, e.g. message:received")
    p.add_argument(
        "--session",
        metavar="KEY",
        help="the plan for this session key's agent (default: the default agent's)",
    )
    _json_flag(p)
    for verb in ("enable", "disable"):
        p = _command(hsub, f"hooks {verb}", f"{verb} a hook in the config file")
        p.add_argument("name", metavar="NAME", help="hook name or hookKey")
        _json_flag(p)

    p = _command(hsub, "hooks new", "scaffold a hook in $STATE/hooks")
    p.add_argument("name", metavar="NAME", help="lowercase letters, digits, - and _")
    p.add_argument(
        "--lang",
        # gatewayd.authoring.LANGS, not imported here: that module loads the config and discovery
        choices=("py", "ts", "js"),
        default="py",
        help="the handler's language: py (handler.py, the default), ts (handler.ts), js "
        "(handler.js); TypeScript and JavaScript run in Node as written",
    )
    p.add_argument(
        "--events",
        action="append",
        metavar="KEYS",
        help="comma-separated event keys, e.g. command:new,session:start (default: command:NAME)",
    )
    p.add_argument(
        "--command",
        dest="command_hook",
        action="store_true",
        help="write an executable handler script (a command hook) instead of handler.py",
    )
    p.add_argument("--description", metavar="TEXT", help="the one-line description in HOOK.md")
    _json_flag(p)
    p = _command(
        hsub,
        "hooks install",
        "install a hook or hook pack: a directory or a .tar.gz/.tgz/.zip archive",
    )
    p.add_argument("source", metavar="PATH|ARCHIVE")
    p.add_argument(
        "--link",
        action="store_true",
        help="list its directory in hooks.load.extraDirs instead of copying (under the state dir)",
    )
    p.add_argument("--force", action="store_true", help="replace installed hooks of the same name")
    _json_flag(p)
    p = _command(hsub, "hooks uninstall", "remove what install created")
    p.add_argument("names", nargs="+", metavar="NAME", help="installed hook names")
    p.add_argument(
        "--force", action="store_true", help="also remove copies whose files changed since"
    )
    _json_flag(p)


def _add_config(sub: Any) -> None:
    config = sub.add_parser("config", help="inspect the config", description="inspect the config")
    csub = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    _json_flag(_command(csub, "config show", "print the effective config"))
    _json_flag(_command(csub, "config check", "validate the config"))


def _add_install_service(sub: Any) -> None:
    p = _command(sub, "install-service", "write a unit")
    p.description = "Write the systemd unit for this installation (its interpreter and paths)."
    p.add_argument("--user", action="store_true", help="a user unit (systemctl --user)")
    p.add_argument("--stdout", "--dry-run", action="store_true", help="print it, write nothing")
    p.add_argument("--unit-dir", metavar="DIR", help="where to write it (default: systemd's)")
    p.add_argument("--force", action="store_true", help="replace a unit that differs")
    p.add_argument("--now", action="store_true", help="then daemon-reload and enable --now")
    p.add_argument(
        "--notify-reload",
        choices=["auto", "yes", "no"],
        default="auto",
        help="add the Type=notify-reload drop-in (auto: on systemd 253+)",
    )
    _json_flag(p)


def _add_completion(sub: Any) -> None:
    p = _command(sub, "completion", "print a shell completion script")
    p.description = (
        "Print the completion script for bash or zsh, e.g. "
        'eval "$(gatewayd completion bash)" in ~/.bashrc.'
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell")


def _add_events(sub: Any) -> None:
    events = sub.add_parser(
        "events", help="inspect and replay the event journal", description="the event journal"
    )
    esub = events.add_subparsers(dest="events_command", metavar="COMMAND", required=True)
    p = _command(esub, "events list", "list journaled events (newest last)")
    p.add_argument("--state", choices=["pending", "done", "dead", "all"], default="all")
    p.add_argument("--session", metavar="KEY", help="only this session's events")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N (default 50)")
    _client(p)
    p = _command(esub, "events show", "show one event, its context and its dead letters")
    p.add_argument("id", metavar="ID")
    _client(p)
    for verb, text in (
        ("retry", "dispatch dead-lettered events again, to the hooks that failed"),
        ("purge", "delete dead-lettered and done events (never pending ones)"),
    ):
        p = _command(esub, f"events {verb}", text)
        p.add_argument("ids", nargs="*", metavar="ID")
        p.add_argument("--all", action="store_true", help="every dead letter (or done event)")
        _client(p)


BUILDERS: dict[str, Callable[[Any], None]] = {
    "run": _add_run,
    "send": _add_send,
    "trigger": _add_trigger,
    "status": _add_status,
    "reload": _add_reload,
    "bootstrap": _add_bootstrap,
    "hooks": _add_hooks,
    "config": _add_config,
    "events": _add_events,
    "install-service": _add_install_service,
    "completion": _add_completion,
}
"""Each top-level command and the function adding its parser, in ``--help`` order."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; see ``gatewayd --help``.

    With ``only`` (a top-level command), just that command's parser is built: building all of
    them costs ~15 ms, a tenth of a client command such as ``gatewayd status``.
    """
    parser = Parser(
        prog="gatewayd", description="The Eliza event-hook gateway daemon and its client."
    )
    parser.add_argument("-V", "--version", action="version", version=f"gatewayd {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in BUILDERS if only is None else (only,):
        BUILDERS[name](sub)
    return parser


def command_parsers(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every command's own parser by its key (``"status"``, ``"hooks list"``), groups (``hooks``,
    ``config``) included, in ``--help`` order."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                key = f"{prefix} {name}".strip()
                found[key] = sub
                found.update(command_parsers(sub, key))
    return found


def is_group(parser: argparse.ArgumentParser) -> bool:
    """True for a parser that only holds subcommands (``hooks``, ``config``)."""
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def command_word(argv: Sequence[str]) -> str | None:
    """The top-level command named in ``argv``, if it is a known one."""
    args = iter(argv)
    for arg in args:
        if arg == "--config":
            next(args, None)
        elif not arg.startswith("-"):
            return arg if arg in BUILDERS else None
    return None
