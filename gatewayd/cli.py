"""The ``gatewayd`` command line (DESIGN.md section 6).

This module only defines the arguments. Each subcommand names its implementation as
``"module:function"``, imported when that subcommand runs, so a client command such as
``gatewayd status`` never imports the daemon stack (anyio, pydantic, watchfiles).

Implementations take the parsed ``argparse.Namespace`` and return an exit code; a user-facing
failure is a :class:`CliError`, printed as one ``error: ...`` line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gatewayd import __version__

if TYPE_CHECKING:  # the config stack (pydantic) is imported only by commands that need it
    from gatewayd.config import Config, ConfigError

EXIT_CONFIG = 78  # EX_CONFIG: systemd's RestartPreventExitStatus keeps a bad config from looping


class CliError(Exception):
    """A failure to report as ``error: <message>`` with exit code ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def print_config_error(exc: ConfigError) -> None:
    """``error: invalid config SOURCE (N errors):`` and then every error, one per line."""
    count = len(exc.errors)
    print(
        f"error: invalid config {exc.source} ({count} error{'s' if count != 1 else ''}):",
        file=sys.stderr,
    )
    for line in exc.errors:
        print(f"  {line}", file=sys.stderr)


def load_config_or_exit(explicit: str | None) -> Config:
    """The config for a command; an invalid one prints every error and exits 78."""
    from gatewayd.config import ConfigError, load_config

    try:
        return load_config(explicit)
    except ConfigError as exc:
        print_config_error(exc)
        raise SystemExit(EXIT_CONFIG) from None


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file (default: $GATEWAYD_CONFIG, else $ELIZA_STATE_DIR/gatewayd.yaml)",
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _client(parser: argparse.ArgumentParser) -> None:
    """Flags of the commands that talk to a running daemon (gatewayd.client)."""
    _json_flag(parser)
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="control socket (default: $GATEWAYD_GATEWAY__CONTROL__SOCKET, the config's "
        "gateway.control.socket, else $ELIZA_STATE_DIR/run/gatewayd.sock)",
    )


def _command(sub: Any, name: str, target: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, **kwargs)
    parser.set_defaults(target=target)
    _common(parser)
    return parser


COMMANDS = (
    "run",
    "send",
    "trigger",
    "status",
    "reload",
    "bootstrap",
    "hooks",
    "config",
    "install-service",
)
"""Top-level commands, in ``--help`` order."""


def _add_run(sub: Any) -> None:
    p = _command(sub, "run", "gatewayd.daemon:cli_run", "run the daemon in the foreground")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", choices=["auto", "json", "console"])


def _add_send(sub: Any) -> None:
    p = _command(sub, "send", "gatewayd.client:cli_send", "send a message to a running daemon")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    p.add_argument("--sender", metavar="ID", help="sender id (default: cli)")
    p.add_argument("--channel", metavar="NAME", help="channel id (default: cli)")
    _client(p)


def _add_trigger(sub: Any) -> None:
    p = _command(sub, "trigger", "gatewayd.client:cli_trigger", "post an event to the queue")
    p.add_argument("event", metavar="TYPE:ACTION")
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    p.add_argument("--context", metavar="JSON", help="event context as a JSON object")
    p.add_argument("--no-wait", action="store_true", help="return once queued")
    _client(p)


def _add_status(sub: Any) -> None:
    p = _command(sub, "status", "gatewayd.client:cli_status", "show a running daemon's status")
    _client(p)


def _add_reload(sub: Any) -> None:
    p = _command(sub, "reload", "gatewayd.client:cli_reload", "reload config and hooks")
    _client(p)


def _add_bootstrap(sub: Any) -> None:
    p = _command(
        sub,
        "bootstrap",
        "gatewayd.client_bootstrap:cli_bootstrap",
        "show the bootstrap files a session gets (after agent:bootstrap hooks)",
    )
    p.add_argument("--session", required=True, metavar="KEY", help="session key")
    _client(p)


def _add_hooks(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="inspect hooks", description="inspect hooks")
    hsub = hooks.add_subparsers(dest="hooks_command", metavar="COMMAND", required=True)
    p = _command(hsub, "list", "gatewayd.cli_hooks:cli_list", "list hooks and their status")
    p.add_argument("--eligible", action="store_true", help="only hooks that can run here")
    p.add_argument("--verbose", "-v", action="store_true", help="show every reason")
    _json_flag(p)
    p = _command(hsub, "info", "gatewayd.cli_hooks:cli_info", "show one hook")
    p.add_argument("name", metavar="NAME", help="hook name or hookKey")
    _json_flag(p)
    p = _command(hsub, "check", "gatewayd.cli_hooks:cli_check", "report hooks that are not ready")
    _json_flag(p)
    for verb in ("enable", "disable"):
        p = _command(
            hsub, verb, f"gatewayd.cli_hooks:cli_{verb}", f"{verb} a hook in the config file"
        )
        p.add_argument("name", metavar="NAME", help="hook name or hookKey")

    p = _command(hsub, "new", "gatewayd.cli_authoring:cli_new", "scaffold a hook in $STATE/hooks")
    p.add_argument("name", metavar="NAME", help="lowercase letters, digits, - and _")
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
    p = _command(
        hsub,
        "install",
        "gatewayd.cli_authoring:cli_install",
        "install a hook or hook pack: a directory or a .tar.gz/.tgz/.zip archive",
    )
    p.add_argument("source", metavar="PATH|ARCHIVE")
    p.add_argument(
        "--link",
        action="store_true",
        help="list its directory in hooks.load.extraDirs instead of copying (under the state dir)",
    )
    p.add_argument("--force", action="store_true", help="replace installed hooks of the same name")
    p = _command(
        hsub, "uninstall", "gatewayd.cli_authoring:cli_uninstall", "remove what install created"
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="installed hook names")
    p.add_argument(
        "--force", action="store_true", help="also remove copies whose files changed since"
    )


def _add_config(sub: Any) -> None:
    config = sub.add_parser("config", help="inspect the config", description="inspect the config")
    csub = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    _command(csub, "show", "gatewayd.cli_hooks:cli_config_show", "print the effective config")
    _command(csub, "check", "gatewayd.cli_hooks:cli_config_check", "validate the config")


def _add_install_service(sub: Any) -> None:
    p = _command(sub, "install-service", "gatewayd.service:cli_install_service", "write a unit")
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; see ``gatewayd --help``.

    With ``only`` (a top-level command), just that command's parser is built: building all of
    them costs ~15 ms, a tenth of a client command such as ``gatewayd status``.
    """
    parser = argparse.ArgumentParser(
        prog="gatewayd", description="The Eliza event-hook gateway daemon and its client."
    )
    parser.add_argument("--version", action="version", version=f"gatewayd {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if only is None else (only,):
        globals()["_add_" + name.replace("-", "_")](sub)
    return parser


def _command_word(argv: Sequence[str]) -> str | None:
    """The top-level command named in ``argv``, if it is a known one."""
    args = iter(argv)
    for arg in args:
        if arg == "--config":
            next(args, None)
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _resolve(target: str) -> Callable[[argparse.Namespace], int]:
    module, _, func = target.partition(":")
    fn: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), func)
    return fn


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gatewayd`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(only=_command_word(argv)).parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    if args.target.startswith("gatewayd.daemon:"):
        # pydantic scans every installed distribution's entry points for plugins when it
        # builds its first model: ~50 ms of the daemon's start for plugins it does not use.
        # Set PYDANTIC_DISABLE_PLUGINS (even to "") to decide otherwise.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        return _resolve(args.target)(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gatewayd hooks list | head`
        return 0
