"""``gatewayd run``: validate the config, set up logging, then serve in the foreground.

The daemon itself is :mod:`gatewayd.daemon`; this command only turns the command line into
its arguments. An invalid config lists every error and exits 78 before any hook code runs.
"""

from __future__ import annotations

import argparse

from gatewayd.cli.common import load_config_or_exit
from gatewayd.daemon import configure_logs, run_daemon
from gatewayd.logging import LogFormat, configure_logging


def cli_run(args: argparse.Namespace) -> int:
    """``gatewayd run [--log-level L] [--log-format F]``: serve until SIGTERM/SIGINT."""
    level: str | None = getattr(args, "log_level", None)
    fmt: LogFormat | None = getattr(args, "log_format", None)
    configure_logging(level or "info", fmt or "auto")
    config = load_config_or_exit(args.config)
    configure_logs(config, level, fmt)
    return run_daemon(config, args.config, (level, fmt))
