"""Where gatewayd keeps things: the state dir and the files under it (DESIGN.md section 2).

Every path is derived from the state dir (env ``ELIZA_STATE_DIR``, default ``~/.eliza``) and the
config; nothing else in the package invents a location of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def state_dir() -> Path:
    """The state dir: ``$ELIZA_STATE_DIR`` or ``~/.eliza``, with ``~`` expanded, not resolved."""
    raw = os.environ.get("ELIZA_STATE_DIR")
    return Path(raw).expanduser() if raw else Path.home() / ".eliza"


def bundled_hooks_dir() -> Path:
    """The bundled hooks: inside the installed wheel, or ``<checkout>/hooks`` in a source tree."""
    installed = PACKAGE_DIR / "_bundled" / "hooks"
    if installed.is_dir():
        return installed
    return PACKAGE_DIR.parent / "hooks"


def bundled_hooks_is_checkout() -> bool:
    """True when the bundled hooks are a source checkout's ``hooks/`` (worth watching for edits)."""
    return not (PACKAGE_DIR / "_bundled" / "hooks").is_dir()


def default_config_file() -> Path:
    """The commented default config shipped with the package (``config/gatewayd.yaml``)."""
    installed = PACKAGE_DIR / "_bundled" / "gatewayd.yaml"
    if installed.is_file():
        return installed
    return PACKAGE_DIR.parent / "config" / "gatewayd.yaml"


@dataclass(frozen=True, slots=True)
class Paths:
    """The resolved locations for one state dir and config."""

    state: Path
    workspace: Path
    control_socket: Path

    @property
    def managed_hooks(self) -> Path:
        return self.state / "hooks"

    @property
    def workspace_hooks(self) -> Path:
        return self.workspace / "hooks"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def sessions(self) -> Path:
        return self.state / "sessions"

    @property
    def bundled_hooks(self) -> Path:
        return bundled_hooks_dir()
