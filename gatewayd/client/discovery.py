"""Where a running daemon's control socket is, by the same rules as the command line.

First found wins: the ``socket`` given (``--socket PATH``);
``$GATEWAYD_GATEWAY__CONTROL__SOCKET``; ``gateway.control.socket`` in the config file (the
``config`` given, ``--config``, else ``$GATEWAYD_CONFIG``, else
``$ELIZA_STATE_DIR/gatewayd.yaml``); ``$ELIZA_STATE_DIR/run/gatewayd.sock``. The locations
themselves come from :mod:`gatewayd.paths`.

Plain ``os`` and ``json``, and PyYAML only when a config file that may set the socket must be
read: the command line's client commands import this. A config file that cannot be read, or
cannot be parsed when it may set the socket, is a :class:`~gatewayd.client.errors.ConfigFileError`
(exit 78); the rest of the file is the daemon's to validate.
"""

from __future__ import annotations

import json
import os

from gatewayd.client.errors import ConfigFileError
from gatewayd.paths import SOCKET_ENV, config_file_choice, default_control_socket


def socket_path(socket: str | None = None, config: str | None = None) -> str:
    """The control socket's path, given ``--socket`` and ``--config`` (either may be None); see
    the module docstring for the order."""
    env = os.environ.get(SOCKET_ENV)
    configured = socket or (env if env and env != "null" else None)
    configured = configured or _config_socket(config)
    if configured:
        return os.path.expanduser(configured)
    return default_control_socket()


def _config_socket(explicit: str | None) -> str | None:
    """``gateway.control.socket`` from the config file, if one is in use and sets it."""
    path, required = config_file_choice(explicit)
    if not required and not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigFileError(
            f"cannot read the config file {path}: {exc.strerror or exc}"
        ) from None
    except ValueError as exc:  # not UTF-8
        raise ConfigFileError(f"cannot read the config file {path}: {exc}") from None
    if "socket" not in text:
        return None  # cannot set gateway.control.socket: spare the PyYAML import (~20 ms)
    from gatewayd.yamlio import YamlError, load_yaml  # only now: PyYAML is the slow import here

    try:
        data = load_yaml(text, path)
    except YamlError as exc:
        raise ConfigFileError(f"{exc} (run `gatewayd config check`)") from None
    value = data
    for key in ("gateway", "control", "socket"):
        value = value.get(key) if isinstance(value, dict) else None
    if value is not None and not isinstance(value, str):
        raise ConfigFileError(
            f"{path}: gateway.control.socket must be a path, got {json.dumps(value)} "
            "(run `gatewayd config check`)"
        )
    return value or None
