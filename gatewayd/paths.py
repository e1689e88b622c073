"""Where gatewayd keeps things: the state dir, the files under it, and the "is inside" check.

Every location is derived here, from the state dir (env ``ELIZA_STATE_DIR``, default
``~/.eliza``), the config file choice (``--config``, ``$GATEWAYD_CONFIG``,
``<state>/gatewayd.yaml``) and the config's own settings; nothing else in the package invents a
location of its own. Light on purpose (``os`` and ``pathlib`` only): the client commands use it
to find the control socket without importing the config stack.
"""

from __future__ import annotations

import functools
import os

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from pathlib import Path

STATE_ENV = "ELIZA_STATE_DIR"
CONFIG_ENV = "GATEWAYD_CONFIG"
SOCKET_ENV = "GATEWAYD_GATEWAY__CONTROL__SOCKET"
"""The env override of ``gateway.control.socket`` (the client reads it without the config)."""
CONFIG_NAME = "gatewayd.yaml"
HOOK_DEPTH_ENV = "GATEWAYD_HOOK_DEPTH"
"""Set in a command hook's environment: how deep in a cause chain an event the hook posts is
(the handled event's depth plus one). The client sends it as a ``message``'s or ``trigger``'s
``depth`` (``gatewayd.client.wire``), and the daemon counts it toward ``hooks.maxDepth``."""

# The rules below work on strings (os.path): the client commands use them to find the control
# socket, and importing pathlib would add ~5 ms to every ``gatewayd status``.


def state_dir_str() -> str:
    """The state dir: ``$ELIZA_STATE_DIR`` or ``~/.eliza``, with ``~`` expanded, not resolved."""
    raw = os.environ.get(STATE_ENV)
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".eliza")


def default_config_path(state: str | os.PathLike[str] | None = None) -> str:
    """``<state>/gatewayd.yaml``: the config file read when none is named."""
    return os.path.join(state_dir_str() if state is None else state, CONFIG_NAME)


def config_file_choice(explicit: str | os.PathLike[str] | None = None) -> tuple[str, bool]:
    """Which config file to read, and whether it was named (``--config``, ``$GATEWAYD_CONFIG``)
    and so must exist; an unnamed default that does not exist means built-in defaults."""
    if explicit:
        return os.path.expanduser(explicit), True
    if env := os.environ.get(CONFIG_ENV):
        return os.path.expanduser(env), True
    return default_config_path(), False


def default_control_socket(state: str | os.PathLike[str] | None = None) -> str:
    """``<state>/run/gatewayd.sock``: the socket unless ``gateway.control.socket`` is set."""
    return os.path.join(state_dir_str() if state is None else state, "run", "gatewayd.sock")


def default_workspace(state: str | os.PathLike[str]) -> str:
    """``<state>/workspace``: the agent workspace unless ``workspace.dir`` is set."""
    return os.path.join(state, "workspace")


def is_inside(
    path: str | os.PathLike[str], parent: str | os.PathLike[str], *, strict: bool = False
) -> bool:
    """True when ``path`` is ``parent`` or below it (only below it with ``strict``).

    A plain comparison of normalized paths: resolve symlinks first (``os.path.realpath``) when
    the question is where a file really is.
    """
    p, root = os.fspath(path), os.fspath(parent).rstrip(os.sep)
    return p.startswith(root + os.sep) or (not strict and p == (root or os.sep))


# The Path-valued side, for everything but the client.


def state_dir() -> Path:
    """:func:`state_dir_str` as a ``Path``."""
    from pathlib import Path

    return Path(state_dir_str())


@functools.cache
def package_dir() -> Path:
    """The installed ``gatewayd`` package directory (resolved)."""
    from pathlib import Path

    return Path(__file__).resolve().parent


def bundled_hooks_dir() -> Path:
    """The bundled hooks: inside the installed wheel, or ``<checkout>/hooks`` in a source tree."""
    installed = package_dir() / "_bundled" / "hooks"
    if installed.is_dir():
        return installed
    return package_dir().parent / "hooks"


def bundled_hooks_is_checkout() -> bool:
    """True when the bundled hooks are a source checkout's ``hooks/`` (worth watching for edits)."""
    return not (package_dir() / "_bundled" / "hooks").is_dir()


def default_config_file() -> Path:
    """The commented default config shipped with the package (``config/gatewayd.yaml``)."""
    installed = package_dir() / "_bundled" / CONFIG_NAME
    if installed.is_file():
        return installed
    return package_dir().parent / "config" / CONFIG_NAME


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents as ``0700`` whatever the umask; returns it.

    Directories that already exist keep their mode (the operator chose it). Raises ``OSError``.
    """
    missing: list[Path] = []
    node = path
    while not node.is_dir():
        missing.append(node)
        if node.parent == node:
            break
        node = node.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # made by someone else meanwhile: theirs
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    return path


class Paths:
    """The resolved locations for one state dir and config (built by ``gatewayd.config``).

    A plain class: a ``NamedTuple`` would import typing and build its class with ``exec``, ~3 ms
    of every ``gatewayd status`` that never uses it.
    """

    __slots__ = ("config_file", "control_socket", "state", "workspace")

    def __init__(self, *, state: Path, workspace: Path, control_socket: Path, config_file: Path):
        self.state = state
        self.workspace = workspace
        self.control_socket = control_socket
        self.config_file = config_file
        """The file the config came from, else where one would be (``<state>/gatewayd.yaml``):
        the file that commands editing the config write and that the watcher reloads on."""

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
