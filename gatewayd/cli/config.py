"""``gatewayd config show|check``: the effective config, and whether it is valid.

``show`` prints the config a ``gatewayd run`` started now would use (file, env overrides and
defaults applied) as YAML; ``check`` lists every error with its key path. Exit codes: ``check``
0 valid, 1 invalid; ``show`` 78 when the config is invalid.
"""

from __future__ import annotations

import argparse

import yaml

from gatewayd.cli.common import load_config_or_exit
from gatewayd.config import ConfigError, load_config
from gatewayd.exits import EXIT_FAILED, print_config_error


def cli_config_show(args: argparse.Namespace) -> int:
    """``gatewayd config show``: the effective config as YAML (defaults and env applied),
    secret-looking values and every ``env`` value shown as ``<redacted>``."""
    config = load_config_or_exit(args.config)
    print(f"# effective config; source: {config.source_label}")
    print(
        yaml.safe_dump(
            config.shown(), sort_keys=False, allow_unicode=True, default_flow_style=False
        ),
        end="",
    )
    return 0


def cli_config_check(args: argparse.Namespace) -> int:
    """``gatewayd config check``: every validation error with its key path; exit 1 if any."""
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_FAILED
    print(f"config OK: {config.source_label}")
    return 0
