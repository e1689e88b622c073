"""``gatewayd config show|check``: the effective config, and whether it is valid.

``show`` prints the config a ``gatewayd run`` started now would use (file, env overrides and
defaults applied), as YAML or with ``--json`` as ``{"source", "config"}``; ``check`` lists every
error with its key path (or the ``GATEWAYD_*`` variable it came from), with ``--json`` as
``{"ok", "source", "errors"}``. Both exit 78 when the config is invalid, like every command.
"""

from __future__ import annotations

import argparse

import yaml

from gatewayd.cli.common import dump_json, load_config_or_exit
from gatewayd.config import IGNORED_NOTE, REQUIREMENTS_NOTE, ConfigError, load_config
from gatewayd.exits import EXIT_CONFIG, print_config_error


def cli_config_show(args: argparse.Namespace) -> int:
    """``gatewayd config show [--json]``: the effective config (defaults and env applied),
    secret-looking values and every ``env`` value shown as ``<redacted>``."""
    config = load_config_or_exit(args.config)
    if args.json:
        dump_json({"source": config.source_label, "config": config.shown()})
        return 0
    print(f"# effective config; source: {config.source_label}")
    print(
        yaml.safe_dump(
            config.shown(), sort_keys=False, allow_unicode=True, default_flow_style=False
        ),
        end="",
    )
    return 0


def cli_config_check(args: argparse.Namespace) -> int:
    """``gatewayd config check [--json]``: every validation error with its key path; exit 78
    if there is one."""
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        if args.json:
            dump_json({"ok": False, "source": exc.source, "errors": exc.errors})
        else:
            print_config_error(exc)
        return EXIT_CONFIG
    if args.json:
        dump_json(
            {
                "ok": True,
                "source": config.source_label,
                "errors": [],
                "ignored": list(config.ignored),
                "requirementsOnly": sorted(config.requirements),
            }
        )
    else:
        print(f"config OK: {config.source_label}")
        for key in config.ignored:
            print(f"ignored: {key}: {IGNORED_NOTE}")
        for key in sorted(config.requirements):
            print(f"requirements only: {key}: {REQUIREMENTS_NOTE}")
    return 0
