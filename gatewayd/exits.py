"""Exit codes and user-facing error reports, shared by the daemon and the command line.

Both ``gatewayd run`` (:mod:`gatewayd.server`) and every other command (:mod:`gatewayd.cli`)
end with one of these codes and report a bad config the same way, so this module sits below
both of them and imports neither. It stays light (no pydantic): client commands import it.

Exit codes, for every command:

* 0 (:data:`EXIT_OK`): done;
* 1 (:data:`EXIT_FAILED`): the command failed (``error: ...`` on stderr), or a daemon that
  could not start or was stopped by a second signal;
* 2: a usage error (argparse);
* 69 (:data:`EXIT_UNAVAILABLE`, ``EX_UNAVAILABLE``): ``gatewayd run`` could not reach the
  shared queue's server (``gateway.queue.backend: redis``) at start;
* 78 (:data:`EXIT_CONFIG`, ``EX_CONFIG`` of sysexits.h): the config file or a ``GATEWAYD_*``
  variable is invalid; systemd's ``RestartPreventExitStatus=78`` keeps a bad config from looping;
* 130 (:data:`EXIT_INTERRUPTED`): interrupted by Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

# `typing.TYPE_CHECKING`, without importing typing: the modules `gatewayd status` imports
# (this one, paths, client, cli.app, cli.remote, cli.common, cli.tracing) import typing only for
# the type checker, which reads any `TYPE_CHECKING` as true. typing costs ~2 ms of the command's
# ~20 (``python -X importtime``).
TYPE_CHECKING = False

if TYPE_CHECKING:  # the config stack (pydantic) is imported only where a config is loaded
    from typing import TextIO

    from gatewayd.config import ConfigError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 69
EXIT_CONFIG = 78
EXIT_INTERRUPTED = 130


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the known word closest to ``word`` (difflib), else ``""``."""
    import difflib  # only on this error path: client commands start without it

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class UserError(Exception):
    """A failure to report as one ``error: <message>`` line, ending the command with
    ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def print_config_error(exc: ConfigError, file: TextIO | None = None) -> None:
    """``error: invalid config SOURCE (N errors):`` and then every error, one per line."""
    out = sys.stderr if file is None else file
    count = len(exc.errors)
    plural = "s" if count != 1 else ""
    print(f"error: invalid config {exc.source} ({count} error{plural}):", file=out)
    for line in exc.errors:
        print(f"  {line}", file=out)
