"""The command line sits on top: every command has a handler, and nothing below imports it.

The parser and the handler table of :mod:`gatewayd.cli.app` are read as they are; the import
check reads every module's import statements (``ast``) and imports the daemon in a fresh
interpreter, so a cycle hidden behind a lazy import shows up too.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatewayd.cli.app import HANDLERS, _status_without_parser, handler
from gatewayd.cli.parser import build_parser, command_parsers, is_group
from gatewayd.cli.remote import cli_status

PACKAGE = Path(__file__).resolve().parents[2] / "gatewayd"


def test_every_command_has_a_handler_and_every_handler_a_command() -> None:
    keys = {key for key, sub in command_parsers(build_parser()).items() if not is_group(sub)}
    assert keys == set(HANDLERS), (
        f"commands without an entry in HANDLERS (gatewayd/cli/app.py): "
        f"{sorted(keys - set(HANDLERS))}; entries without a command: {sorted(set(HANDLERS) - keys)}"
    )
    for key in HANDLERS:
        assert callable(handler(key)), key


def test_each_command_records_its_own_key() -> None:
    parser = build_parser()
    assert parser.parse_args(["hooks", "list"]).command_key == "hooks list"
    assert parser.parse_args(["status"]).command_key == "status"
    assert parser.parse_args(["config", "check"]).command_key == "config check"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (lazy imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_nothing_outside_the_cli_package_imports_it() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(PACKAGE / "cli") or path.name == "__main__.py":
            continue
        bad = sorted(
            n
            for n in imported_modules(path)
            if n == "gatewayd.cli" or n.startswith("gatewayd.cli.")
        )
        if bad:
            offenders[str(path.relative_to(PACKAGE.parent))] = bad
    assert not offenders, f"modules below the CLI import it: {offenders}"


def test_the_daemon_runs_without_the_cli_package() -> None:
    code = (
        "import sys, gatewayd.server\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] == ['gatewayd', 'cli']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"]])
def test_status_without_the_parser_gives_what_the_parser_gives(argv: list[str]) -> None:
    fast = _status_without_parser(argv)
    assert fast is not None
    parsed = build_parser(only="status").parse_args(argv)
    parsed.config = None  # what main() fills in when --config was not given
    # cli_status passes (socket, config, json) to show_status, as the fast path does: an option
    # added to `status` must be added there too.
    assert vars(parsed) == {
        "command": "status",
        "command_key": "status",
        "socket": fast[0],
        "config": fast[1],
        "json": fast[2],
    }
    assert handler(parsed.command_key) is cli_status


def test_status_imports_nothing_a_stdlib_client_would_not(tmp_path: Path) -> None:
    """``gatewayd status`` (run by monitors in a loop) imports what a one-liner sending the same
    request imports (``json``, ``socket``), plus gatewayd's own client modules: no argparse,
    no typing, whose imports would be most of a run's cost. No daemon is needed: it fails to
    connect."""

    def modules_after(code: str, **env: str) -> tuple[set[str], str]:
        """The modules loaded once ``code`` ran in a fresh interpreter, and its stderr."""
        done = subprocess.run(
            [sys.executable, "-c", f"{code}; import sys; print(sorted(sys.modules))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, **env},
        )
        return set(ast.literal_eval(done.stdout)), done.stderr

    floor, _ = modules_after("import json, socket, sys")
    status, stderr = modules_after(
        "from gatewayd.cli.app import main; main(['status'])", ELIZA_STATE_DIR=str(tmp_path)
    )
    assert "gatewayd is not running" in stderr
    extra = status - floor
    assert {m for m in extra if m.split(".")[0] not in ("gatewayd", "__future__")} == set()


@pytest.mark.parametrize(
    "argv", [["status", "--socket", "/x"], ["status", "--config", "c.yaml"], ["reload"], []]
)
def test_any_other_command_line_goes_through_the_parser(argv: list[str]) -> None:
    assert _status_without_parser(argv) is None
