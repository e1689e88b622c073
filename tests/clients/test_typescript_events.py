"""The TypeScript client's event types are the schema's: regenerated, they equal the committed file.

``clients/typescript/src/events.ts`` is written from :mod:`gatewayd.hooks.schema` by
``clients/typescript/scripts/generate_events.py``; a change to the schema without the regenerated
file fails here, with the command that fixes it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "clients" / "typescript" / "scripts" / "generate_events.py"


def test_committed_event_types_match_the_schema() -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    """The check compares, it does not pass by default: a file one line off fails it."""
    events = GENERATOR.parent.parent / "src" / "events.ts"
    code = (
        "import runpy, sys\n"
        f"mod = runpy.run_path({str(GENERATOR)!r})\n"
        "text = mod['render']()\n"
        f"stale = {str(tmp_path / 'events.ts')!r}\n"
        "open(stale, 'w').write(text.replace('message:received', 'message:recieved', 1))\n"
        "mod['main'].__globals__['OUT'] = __import__('pathlib').Path(stale)\n"
        "sys.exit(mod['main'](['--check']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "differs from gatewayd/hooks/schema.py" in done.stderr
    assert events.exists()
