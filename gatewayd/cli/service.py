"""``gatewayd install-service``: write (or print) the systemd unit for this installation.

The unit is rendered by :mod:`gatewayd.service`; this command picks the unit directory, writes
the unit and its drop-in only when they differ (``--force`` to replace one edited by hand),
and with ``--now`` runs ``systemctl daemon-reload`` and ``enable --now``. Exit 0 done, 1 when a
file cannot be written or systemctl fails.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from gatewayd.cli.common import dump_json
from gatewayd.paths import state_dir
from gatewayd.service import (
    DROPIN_NAME,
    NOTIFY_RELOAD_SINCE,
    SYSTEM_STATE_DIR,
    UNIT_NAME,
    default_unit_dir,
    render,
    systemctl,
    systemd_version,
    write_unit_file,
)


def cli_install_service(args: argparse.Namespace) -> int:
    """``gatewayd install-service [--user] [--stdout] [--unit-dir DIR] [--force] [--now]``."""
    user: bool = args.user
    if args.notify_reload == "auto":
        version = systemd_version()
        notify_reload = version is not None and version >= NOTIFY_RELOAD_SINCE
    else:
        notify_reload = args.notify_reload == "yes"
    rendered = render(user, notify_reload)
    for note in rendered.notes:
        print(f"note: {note}", file=sys.stderr)
    report: dict[str, Any] = {"unit": None, "dropin": None, "notes": list(rendered.notes)}
    if args.stdout:
        if args.json:
            dump_json({**report, "unitText": rendered.unit, "dropinText": rendered.dropin})
            return 0
        sys.stdout.write(rendered.unit)
        if rendered.dropin is not None:
            sys.stdout.write(f"\n# --- {UNIT_NAME}.d/{DROPIN_NAME} ---\n{rendered.dropin}")
        return 0

    unit_dir = Path(args.unit_dir) if args.unit_dir else default_unit_dir(user)
    unit_path = unit_dir / UNIT_NAME
    dropin_path = unit_dir / f"{UNIT_NAME}.d" / DROPIN_NAME
    lines = []
    changed = write_unit_file(unit_path, rendered.unit, args.force)
    report["unit"] = {"path": str(unit_path), "changed": changed}
    lines.append(f"{'wrote' if changed else 'unchanged'} {unit_path}")
    if rendered.dropin is not None:
        changed = write_unit_file(dropin_path, rendered.dropin, args.force)
        report["dropin"] = {"path": str(dropin_path), "changed": changed}
        lines.append(f"{'wrote' if changed else 'unchanged'} {dropin_path}")

    scope = ["--user"] if user else []
    steps = [
        shlex.join(["systemctl", *scope, "daemon-reload"]),
        shlex.join(["systemctl", *scope, "enable", "--now", UNIT_NAME]),
    ]
    if args.now:
        systemctl(user, "daemon-reload")
        systemctl(user, "enable", "--now", UNIT_NAME)
        lines.append(f"enabled and started {UNIT_NAME}")
    else:
        lines.append("next: " + " && ".join(steps))
    hooks = (state_dir() if user else SYSTEM_STATE_DIR) / "hooks"
    lines.append(f"hooks go in {hooks}/<name>/ (HOOK.md and a handler)")
    if args.json:
        next_steps = [] if args.now else steps
        dump_json({**report, "started": args.now, "next": next_steps, "hooksDir": str(hooks)})
    else:
        print("\n".join(lines))
    return 0
