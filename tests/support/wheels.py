"""gatewayd's wheel built from this checkout, for the tests that install it somewhere else.

* :func:`copy_source`: what a wheel is built from (the package, whatever the wheel
  force-includes, ``pyproject.toml``, ``README.md``), without bytecode caches, into a new tree.
* :func:`build_wheel`: ``python -m build --wheel --no-isolation`` of such a tree.
* :func:`checkout_wheel`: both, for this checkout as it is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a command to completion (5 minutes at most); fail with its output if it fails."""
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, check=False, **kw
    )  # type: ignore[call-overload]
    assert result.returncode == 0, (
        f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result  # type: ignore[no-any-return]


def copy_source(dest: Path) -> Path:
    """Copy what the wheel is built from into ``dest`` (created); returns ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".keep")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel_cfg = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]
    # The package plus whatever the wheel force-includes (hooks/, config/, ...).
    for name in [*wheel_cfg["packages"], *wheel_cfg.get("force-include", {})]:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    return dest


def build_wheel(src: Path, outdir: Path) -> Path:
    """Build the wheel of the source tree ``src`` into ``outdir``; returns its path."""
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", outdir, src)
    (wheel,) = outdir.glob("gatewayd-*.whl")
    return wheel


def checkout_wheel(outdir: Path) -> Path:
    """Build this checkout's wheel into ``outdir`` (created), from a copy of its source made
    there and removed after; returns the wheel's path."""
    src = copy_source(outdir / "src")
    try:
        return build_wheel(src, outdir)
    finally:
        shutil.rmtree(src)
