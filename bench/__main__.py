"""``python -m bench`` (``make bench``): run every benchmark and write ``bench/results/``.

Each benchmark module runs in its own fresh interpreter (``python -m bench.<module>``) so that
one's imports, garbage and threads never colour another's figures. The results are written to
``bench/results/latest.json`` (everything, machine included) and ``latest.md`` (the tables
docs/operations.md shows).

    python -m bench                   # all, full size
    python -m bench dispatch reload   # only these
    python -m bench --scale smoke     # every code path at tiny sizes (numbers meaningless)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import PYTHON, REPO, Section, clean_env
from bench.machine import describe
from bench.report import document

BENCHMARKS: dict[str, str] = {
    "dispatch": "1. Dispatch throughput",
    "endtoend": "2. End to end over the control socket",
    "commands": "Bundled hooks: command-logger under load",
    "livereload": "3. Live reload latency",
    "reload": "4. Reload scaling",
    "scale": "10,000 hooks: start, reload and the event loop",
    "startup": "5. Startup and footprint",
    "startuphook": "6. Startup hook timing",
    "watch": "Watcher latency",
    "decisions": "Hooks that decide",
    "nodehooks": "7. JS/TS hooks: the Node worker",
    "journal": "Durable trigger queue",
    "connect": "One connection at full speed: the journal and the clients",
    "redis": "Redis Streams queue: many instances",
}
"""Module name -> title, in report order."""

RESULTS = REPO / "bench" / "results"
TIMEOUT_S = 600


def run_module(name: str, scale: str) -> Section:
    """Run ``bench.<name>`` in a fresh interpreter; a crash becomes a pending section."""
    print(f"== {name}: {BENCHMARKS[name]}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [PYTHON, "-m", f"bench.{name}", "--scale", scale],
            cwd=REPO,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Section(name, BENCHMARKS[name], pending=f"timed out after {TIMEOUT_S} s")
    elapsed = time.perf_counter() - start
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        errors = proc.stderr.strip().splitlines() or ["no output"]
        return Section(
            name,
            BENCHMARKS[name],
            pending=f"the benchmark failed (exit {proc.returncode}): {errors[-1]}",
        )
    section = Section.from_json(json.loads(lines[-1]))
    print(f"   {elapsed:.1f} s", file=sys.stderr, flush=True)
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "only", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--scale", choices=["full", "smoke"], default="full")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for latest.*")
    args = parser.parse_args(argv)
    unknown = [name for name in args.only if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}: choose from {', '.join(BENCHMARKS)}")
    names = args.only or list(BENCHMARKS)

    machine = describe()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    start = time.perf_counter()
    sections = [run_module(name, args.scale) for name in names]
    run = {
        "date": started,
        "scale": args.scale,
        "seconds": round(time.perf_counter() - start, 1),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "machine": machine,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    data = {**run, "sections": [s.to_json() for s in sections]}
    (args.out / "latest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    markdown = document(run, sections)
    (args.out / "latest.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    failed = [s.key for s in sections if s.pending and "failed" in s.pending]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
