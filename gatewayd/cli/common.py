"""What the command modules of :mod:`gatewayd.cli` share: reading the config, printing JSON.

Commands that read the config import it through :func:`load_config_or_exit`, so an invalid
config file (or ``GATEWAYD_*`` variable) is reported the same way, every error on its own line,
and ends every such command with exit code 78 (:data:`gatewayd.exits.EXIT_CONFIG`).
"""

from __future__ import annotations

import json
import sys

from gatewayd.exits import EXIT_CONFIG, print_config_error

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:  # the config stack (pydantic) is imported only by commands that need it
    from typing import Any

    from gatewayd.config import Config


STATUS_ORDER = ("invalid", "shadowed", "ineligible", "disabled", "skipped", "failed", "ready")
"""A hook's status words, in the order they are decided; every command says them the same way."""
FAILING_STATUSES = frozenset({"failed", "invalid"})
"""Statuses that make ``hooks check`` and ``reload`` exit 1: the hook was meant to load and
cannot (the others are choices: shadowed, ineligible here, disabled, no events)."""


def status_counts(statuses: list[str]) -> str:
    """``1 invalid, 2 disabled``: how many hooks have each status but ``ready``, in order."""
    counts = [(word, statuses.count(word)) for word in STATUS_ORDER if word != "ready"]
    return ", ".join(f"{n} {word}" for word, n in counts if n)


def load_config_or_exit(explicit: str | None) -> Config:
    """The config for a command; an invalid one prints every error and exits 78."""
    from gatewayd.config import ConfigError, load_config

    try:
        return load_config(explicit)
    except ConfigError as exc:
        print_config_error(exc)
        raise SystemExit(EXIT_CONFIG) from None


def dump_json(data: Any) -> None:
    """``data`` as indented JSON (UTF-8 kept as is) on stdout, with a final newline."""
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
