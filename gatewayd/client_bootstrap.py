"""``gatewayd bootstrap --session KEY [--json]``: the bootstrap files a session would get.

Asks a running daemon with the control op ``bootstrap``, which fires ``agent:bootstrap`` for the
session (so ``bootstrap-extra-files`` and any other hook have their say) and returns the final
``bootstrapFiles``. Light like the other client commands: the request goes through
:func:`gatewayd.client.request` (plain ``socket`` and ``json``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from gatewayd.client import WAIT_TIMEOUT_S, request


def format_files(session_key: str, files: list[Any]) -> str:
    """One line per file: name, size in bytes (or ``missing``), path."""
    lines = [f"bootstrap files for {session_key}: {len(files)}"]
    for entry in files:
        entry = entry if isinstance(entry, dict) else {}
        name = str(entry.get("name") or "?")
        if entry.get("missing"):
            size = "missing"
        else:
            size = f"{len(str(entry.get('content') or '').encode()):,} B"
        lines.append(f"  {name:<13} {size:>12}  {entry.get('path') or ''}")
    return "\n".join(lines)


def cli_bootstrap(args: argparse.Namespace) -> int:
    """Print the session's bootstrap files; ``--json`` prints the op's reply as is."""
    reply = request(args, {"op": "bootstrap", "sessionKey": args.session}, WAIT_TIMEOUT_S)
    files = reply.get("bootstrapFiles")
    files = files if isinstance(files, list) else []
    if args.json:
        print(json.dumps({"bootstrapFiles": files}, indent=2, ensure_ascii=False))
    else:
        print(format_files(args.session, files))
    return 0
