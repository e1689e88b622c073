"""The systemd unit for this installation, rendered and written (``gatewayd install-service``).

The units themselves are the files in the repository's ``systemd/`` (shipped in the wheel as
``gatewayd/_bundled/systemd``); this module only fills in what differs per machine: the
``ExecStart=`` of this interpreter's ``gatewayd``, the state dir of a user unit, ``ProtectHome=``
when the installation lives under a home directory, and the ``Type=notify-reload`` drop-in on
systemd 253 and later. Everything else stays exactly as reviewed in ``systemd/``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gatewayd.atomic import atomic_write
from gatewayd.exits import UserError
from gatewayd.paths import package_dir, state_dir

UNIT_NAME = "gatewayd.service"
DROPIN_NAME = "notify-reload.conf"
NOTIFY_RELOAD_SINCE = 253  # first systemd with Type=notify-reload
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEM_STATE_DIR = Path("/var/lib/gatewayd")  # StateDirectory=gatewayd in the system unit
HOME_ROOTS = (Path("/home"), Path("/root"), Path("/run/user"))


def units_dir() -> Path:
    """The unit templates: inside the installed wheel, or ``<checkout>/systemd``."""
    installed = package_dir() / "_bundled" / "systemd"
    return installed if installed.is_dir() else package_dir().parent / "systemd"


def exec_start_command() -> list[str]:
    """The command that runs this installation's daemon: its ``gatewayd`` script, else ``-m``."""
    script = Path(sys.executable).parent / "gatewayd"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "run"]
    return [sys.executable, "-m", "gatewayd", "run"]


def systemd_quote(word: str) -> str:
    """One ``ExecStart=`` word: ``%`` doubled (specifiers), quoted if it holds blanks or quotes."""
    word = word.replace("%", "%%")
    if re.search(r"[\s\"'\\;]", word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def under_home(path: Path) -> bool:
    """True when ``path`` is under ``/home``, ``/root`` or ``/run/user`` (ProtectHome hides it)."""
    return any(path.is_relative_to(root) for root in HOME_ROOTS)


def systemd_version() -> int | None:
    """The major version of the systemd on this machine (``systemctl --version``), or None."""
    try:
        out = subprocess.run(
            ["systemctl", "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"systemd (\d+)", out)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class Rendered:
    """A unit ready to write: its text, the drop-in (or None) and notes for the user."""

    unit: str
    dropin: str | None
    notes: list[str]


def _set_line(text: str, key: str, value: str, prefix: str = "") -> str:
    """Replace the first ``key=prefix...`` line (it must be there: the template is ours)."""
    pattern = re.compile(rf"^{re.escape(key)}={re.escape(prefix)}.*$", re.MULTILINE)
    if not pattern.search(text):
        where = units_dir()
        raise UserError(f"the unit template in {where} has no {key}={prefix} line to fill in")
    return pattern.sub(lambda _: f"{key}={value}", text, count=1)


def render(user: bool, notify_reload: bool) -> Rendered:
    """The unit (system, or ``user``) for this installation; see the module docstring."""
    template = units_dir() / ("user" if user else "") / UNIT_NAME
    try:
        text = template.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the unit template {template}: {exc.strerror}") from None
    command = exec_start_command()
    text = _set_line(text, "ExecStart", " ".join(systemd_quote(word) for word in command))
    notes: list[str] = []
    if user:
        if os.environ.get("ELIZA_STATE_DIR"):
            assignment = systemd_quote(f"ELIZA_STATE_DIR={state_dir()}")
            text = _set_line(text, "Environment", assignment, prefix="ELIZA_STATE_DIR=")
    else:
        install = [Path(sys.executable).parent, package_dir()]
        homed = [path for path in install if under_home(path)]
        if homed:
            text = _set_line(text, "ProtectHome", "read-only")
            notes.append(
                f"this installation lives under a home directory ({homed[0]}): the unit uses "
                "ProtectHome=read-only, and the service user must be able to read that path. "
                "Installing into /opt/gatewayd (python3 -m venv /opt/gatewayd) avoids both."
            )
    dropin = None
    if notify_reload:
        dropin = (units_dir() / DROPIN_NAME).read_text(encoding="utf-8")
    return Rendered(text, dropin, notes)


def write_unit_file(path: Path, text: str, force: bool) -> bool:
    """Write ``path`` atomically; False when it already holds ``text``.

    Raises :class:`UserError` saying why it cannot."""
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if current == text:
        return False
    if current is not None and not force:
        raise UserError(
            f"{path} exists and differs from the unit this installation needs; keep local "
            f"changes in a drop-in ({path}.d/*.conf) and rerun with --force to replace it"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text, mode=0o644, keep_mode=False, keep_owner=False)
    except PermissionError:
        hint = "run it as root (sudo gatewayd install-service), or use --user"
        raise UserError(f"cannot write {path}: permission denied; {hint}") from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    return True


def systemctl(user: bool, *args: str) -> None:
    command = ["systemctl", *(["--user"] if user else []), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"{shlex.join(command)} failed: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise UserError(f"{shlex.join(command)} failed: {detail[0]}")


def default_unit_dir(user: bool) -> Path:
    """``/etc/systemd/system``, or ``$XDG_CONFIG_HOME/systemd/user`` for a user unit."""
    if not user:
        return SYSTEM_UNIT_DIR
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "systemd" / "user"
