"""The ``gatewayd`` entry point: parse the command line, run the command's handler, exit.

:data:`HANDLERS` is the table from each command's key (set by :mod:`gatewayd.cli.parser`) to
the module of :mod:`gatewayd.cli` and the function that implements it. The module is imported
only when its command runs, so ``gatewayd status`` never imports the daemon stack (anyio,
pydantic, structlog, the hooks package).

A handler takes the parsed ``argparse.Namespace`` and returns the exit code; a user-facing
failure is a :class:`~gatewayd.exits.UserError`, printed as one ``error: ...`` line on stderr.
The exit codes are those of :mod:`gatewayd.exits`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from gatewayd.exits import EXIT_INTERRUPTED, EXIT_OK, UserError

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    import argparse

Handler = Callable[["argparse.Namespace"], int]

HANDLERS: dict[str, tuple[str, str]] = {
    "run": ("run", "cli_run"),
    "send": ("remote", "cli_send"),
    "trigger": ("remote", "cli_trigger"),
    "status": ("remote", "cli_status"),
    "reload": ("remote", "cli_reload"),
    "bootstrap": ("remote", "cli_bootstrap"),
    "hooks list": ("hooks", "cli_list"),
    "hooks info": ("hooks", "cli_info"),
    "hooks check": ("hooks", "cli_check"),
    "hooks test": ("hooktest", "cli_test"),
    "hooks order": ("hooks", "cli_order"),
    "hooks enable": ("hooks", "cli_enable"),
    "hooks disable": ("hooks", "cli_disable"),
    "hooks new": ("authoring", "cli_new"),
    "hooks install": ("authoring", "cli_install"),
    "hooks uninstall": ("authoring", "cli_uninstall"),
    "config show": ("config", "cli_config_show"),
    "config check": ("config", "cli_config_check"),
    "events list": ("events", "cli_list"),
    "events show": ("events", "cli_show"),
    "events retry": ("events", "cli_retry"),
    "events purge": ("events", "cli_purge"),
    "install-service": ("service", "cli_install_service"),
    "completion": ("completion", "cli_completion"),
}
"""Command key -> (module under ``gatewayd.cli``, function)."""


def handler(key: str) -> Handler:
    """The function implementing the command ``key`` (importing its module now)."""
    import importlib

    module, func = HANDLERS[key]
    fn: Handler = getattr(importlib.import_module(f"gatewayd.cli.{module}"), func)
    return fn


def _status_without_parser(argv: list[str]) -> tuple[None, None, bool] | None:
    """The arguments of :func:`~gatewayd.cli.remote.show_status` (socket, config, as_json)
    for ``gatewayd status [--json]``, as the parser would give them, or None.

    The command a monitor runs in a loop is answered without argparse: building the parser
    (help formatter, message lookups: ``shutil``, ``gettext``, ``locale``) was a third of its
    wall time, and importing argparse ~2 ms more. Anything else goes
    through the parser.
    """
    if argv == ["status"] or argv == ["status", "--json"]:
        return None, None, len(argv) == 2
    return None


def _parse_and_run(argv: list[str]) -> int:
    from gatewayd.cli.parser import build_parser, command_word

    args = build_parser(only=command_word(argv)).parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    if args.command_key == "run":
        # pydantic scans every installed distribution's entry points for plugins when it
        # builds its first model: ~50 ms of the daemon's start for plugins it does not use.
        # Set PYDANTIC_DISABLE_PLUGINS (even to "") to decide otherwise.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    return handler(args.command_key)(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gatewayd`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if (status := _status_without_parser(argv)) is not None:
            from gatewayd.cli.remote import show_status

            return show_status(*status)
        return _parse_and_run(argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gatewayd hooks list | head`
        return EXIT_OK
