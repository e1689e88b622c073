"""What every benchmark module shares: figures, targets, statistics, and the module entry point.

A benchmark module measures gatewayd and its baselines in the same process run and returns a
:class:`Section`: a list of :class:`Figure`. A gatewayd figure names the baselines it is compared
with (``vs``: keys of figures in the same section); a figure that others name and that names
none itself is a baseline, shown only beside them.
``ratio = value / baseline``, whatever the unit: for a rate above 1 is better, for a time or a
size below 1 is.

Each module is run as ``python -m bench.<module> [--scale full|smoke]`` in a fresh interpreter
and prints its section as one JSON line on stdout (progress goes to stderr). ``smoke`` runs
every code path at tiny sizes, for ``tests/bench``; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Scale:
    """How big a run is: ``full`` for ``make bench``, ``smoke`` for the test suite."""

    name: Literal["full", "smoke"] = "full"

    @property
    def smoke(self) -> bool:
        return self.name == "smoke"

    def pick(self, full: int, smoke: int) -> int:
        return smoke if self.smoke else full


@dataclass(frozen=True)
class Target:
    """An acceptance bound from the issue: ``low <= value <= high`` (either may be open)."""

    text: str
    low: float | None = None
    high: float | None = None

    def met(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass
class Figure:
    """One measured number, with how it was measured and what it is compared with."""

    key: str
    label: str
    value: float
    unit: str
    better: Better
    vs: list[str] = field(default_factory=list)
    """Keys of the baseline figures (same section, same run) this one is compared with."""
    target: Target | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    """Spread and sample counts: ``p95``, ``max``, ``runs``, ``samples`` ..."""
    headline: bool = False
    """Shown in the summary even without a target."""

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value)


@dataclass
class Section:
    """One benchmark's figures, or why it could not run (``pending``)."""

    key: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pending: str | None = None
    """Set when the benchmark could not run yet, saying what it waits for."""
    seconds: float = 0.0

    def add(self, figure: Figure) -> Figure:
        if any(f.key == figure.key for f in self.figures):
            raise ValueError(f"duplicate figure key {figure.key!r} in section {self.key!r}")
        self.figures.append(figure)
        return figure

    def figure(self, key: str) -> Figure:
        for fig in self.figures:
            if fig.key == key:
                return fig
        raise KeyError(f"no figure {key!r} in section {self.key!r}")

    def is_baseline(self, fig: Figure) -> bool:
        """Only a baseline: compared with nothing itself, and named by another figure."""
        return not fig.vs and any(fig.key in other.vs for other in self.figures)

    def ratios(self, fig: Figure) -> list[tuple[Figure, float]]:
        """``(baseline, value / baseline.value)`` for each baseline of ``fig``."""
        out = []
        for key in fig.vs:
            base = self.figure(key)
            out.append((base, fig.value / base.value if base.value else math.inf))
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for raw, fig in zip(data["figures"], self.figures, strict=True):
            raw["met"] = fig.met
            raw["baseline"] = self.is_baseline(fig)
            raw["ratios"] = {base.key: round(r, 4) for base, r in self.ratios(fig)}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Section:
        figures = []
        for raw in data.get("figures", []):
            raw = {k: v for k, v in raw.items() if k not in ("met", "ratios", "baseline")}
            if raw.get("target") is not None:
                raw["target"] = Target(**raw["target"])
            figures.append(Figure(**raw))
        return cls(
            key=data["key"],
            title=data["title"],
            figures=figures,
            notes=list(data.get("notes", [])),
            pending=data.get("pending"),
            seconds=float(data.get("seconds", 0.0)),
        )


# -- statistics ---------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``: an observed value, not a blend."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return float(ordered[rank - 1])


def spread(values: Sequence[float], scale: float = 1.0) -> dict[str, Any]:
    """``p50 p95 p99 max min samples`` of ``values`` times ``scale`` (e.g. 1000 for s -> ms)."""
    return {
        "p50": round(median(values) * scale, 4),
        "p95": round(percentile(values, 95) * scale, 4),
        "p99": round(percentile(values, 99) * scale, 4),
        "min": round(min(values) * scale, 4),
        "max": round(max(values) * scale, 4),
        "samples": len(values),
    }


def interleaved(
    variants: dict[str, Callable[[], float]], runs: int, *, warmup: int = 1
) -> dict[str, list[float]]:
    """Run each variant ``warmup`` times, then ``runs`` rounds of all of them in turn.

    Round-robin rather than one variant after another, so that a noisy neighbour or a
    frequency change hits every variant alike and the ratios stay honest.
    """
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, fn in variants.items():
            results[name].append(fn())
    return results


# -- processes ----------------------------------------------------------------------------------


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries the JSON result)."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def wall_times(
    argv: Sequence[str], runs: int, *, env: dict[str, str] | None = None, warmup: int = 2
) -> list[float]:
    """Wall seconds of ``argv`` from spawn to exit, ``runs`` times (after ``warmup`` runs).

    Raises ``RuntimeError`` with the command's stderr if it fails.
    """
    times = []
    for i in range(warmup + runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}"
            )
        if i >= warmup:
            times.append(elapsed)
    return times


def rss_kib(pid: int | str = "self") -> int:
    """Resident set size of a process in KiB, from ``/proc/<pid>/status`` (``VmRSS``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without any ``GATEWAYD_*`` setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAYD_")}
    env.pop("NOTIFY_SOCKET", None)
    env.update(extra)
    return env


def child_json(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float) -> Any:
    """Run a helper process and return the JSON on the last line of its stdout."""
    proc = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"{' '.join(argv)} printed nothing; stderr:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def children_json(
    argvs: Sequence[Sequence[str]], *, env: dict[str, str] | None = None, timeout: float
) -> list[Any]:
    """Run helper processes at the same time; the JSON on each one's last stdout line."""
    procs = [
        subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        for argv in argvs
    ]
    outs = []
    try:
        for argv, proc in zip(argvs, procs, strict=True):
            stdout, stderr = proc.communicate(timeout=timeout)
            lines = stdout.strip().splitlines()
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{stderr[-3000:]}")
            outs.append(json.loads(lines[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outs


# -- the module entry point ---------------------------------------------------------------------


def main(run: Callable[[Scale], Section], argv: Iterable[str] | None = None) -> None:
    """``python -m bench.<module> [--scale full|smoke]``: run and print the section as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", choices=["full", "smoke"], default="full")
    args = parser.parse_args(list(argv) if argv is not None else None)
    start = time.perf_counter()
    section = run(Scale(args.scale))
    section.seconds = round(time.perf_counter() - start, 2)
    sys.stdout.write(json.dumps(section.to_json()) + "\n")
    sys.stdout.flush()
