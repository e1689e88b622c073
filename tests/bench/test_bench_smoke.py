"""Every benchmark runs end to end at tiny sizes, so that ``make bench`` does not rot.

Each test runs ``python -m bench NAME --scale smoke`` exactly as ``make bench`` runs it (a fresh
interpreter per benchmark, real daemons, real sockets, real files) into a temporary results
directory, and checks the shape of what it wrote: the section ran, its figures are finite
numbers, every baseline a figure names exists, and the Markdown shows the section. No figure is
compared with anything: the numbers of a smoke run mean nothing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = [
    "dispatch",
    "endtoend",
    "commands",
    "livereload",
    "reload",
    "scale",
    "startup",
    "startuphook",
    "watch",
    "decisions",
    "nodehooks",
    "journal",
    "connect",
    "redis",
]
"""The modules ``python -m bench`` runs (``bench.__main__.BENCHMARKS``): one per benchmark
target, plus the watcher."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def run_bench(name: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAYD_", "ELIZA_"))}
    return subprocess.run(
        [sys.executable, "-m", "bench", name, "--scale", "smoke", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_benchmark_runs_at_smoke_scale(name: str, tmp_path: Path) -> None:
    proc = run_bench(name, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]

    data: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text())
    assert data["scale"] == "smoke"
    assert data["machine"]["cores"] >= 1
    assert data["machine"]["libraries"]["anyio"]
    (section,) = data["sections"]
    assert section["key"] == name
    assert section["pending"] is None, section["pending"]
    figures = {fig["key"]: fig for fig in section["figures"]}
    assert figures, f"{name} measured nothing"
    compared = [fig for fig in figures.values() if fig["vs"]]
    assert compared, f"{name} compares no figure with a baseline"
    for fig in figures.values():
        assert isinstance(fig["value"], int | float) and math.isfinite(fig["value"]), fig
        for key in fig["vs"]:
            assert key in figures, f"{fig['key']} compares with missing baseline {key}"
            assert set(fig["ratios"]) == set(fig["vs"])

    markdown = (tmp_path / "latest.md").read_text()
    assert section["title"] in markdown
    for fig in compared:
        assert fig["label"] in markdown


def test_unknown_benchmark_is_refused(tmp_path: Path) -> None:
    proc = run_bench("no-such-bench", tmp_path)
    assert proc.returncode == 2
    assert "unknown benchmark no-such-bench" in proc.stderr
    assert not (tmp_path / "latest.json").exists()
