"""The machine a benchmark run happened on: CPU, cores, memory, kernel, Python and library versions.

Figures only mean something next to this; ``latest.md`` prints it above the tables.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any

from bench.harness import REPO

LIBRARIES = ("uvloop", "anyio", "watchfiles", "structlog", "pydantic", "PyYAML")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mib() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _virtualization() -> str | None:
    """``kvm VM, docker container`` as ``systemd-detect-virt`` sees it; None on bare metal."""
    tool = shutil.which("systemd-detect-virt")
    if tool is None:
        return None
    found = []
    for flag, what in (("--vm", "VM"), ("--container", "container")):
        out = subprocess.run([tool, flag], capture_output=True, text=True, check=False)
        name = out.stdout.strip()
        if name and name != "none":
            found.append(f"{name} {what}")
    return ", ".join(found) or None


def _node_version() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "gatewayd")),
    }


def describe() -> dict[str, Any]:
    """Everything worth knowing about where the numbers came from, as a JSON-able dict."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    uname = platform.uname()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_mib": _mem_total_mib(),
        "virtualized": _virtualization(),
        "kernel": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "node": _node_version(),
        "libraries": versions,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "gatewayd": _git(),
    }


def markdown(info: dict[str, Any]) -> str:
    """One short table of ``describe()`` for ``latest.md``."""
    libs = ", ".join(f"{k} {v}" for k, v in info["libraries"].items() if v)
    git = info["gatewayd"]
    rows = [
        ("CPU", f"{info['cpu']} ({info['machine']})"),
        (
            "cores",
            f"{info['cores']} ({info['usable_cores']} usable)"
            + (f", {info['virtualized']}" if info["virtualized"] else ""),
        ),
        ("memory", f"{info['memory_mib']} MiB"),
        ("kernel", info["kernel"]),
        ("Python", info["python"]),
        ("node", info["node"] or "not installed"),
        ("libraries", libs),
        ("load average at start", " / ".join(map(str, info["load_average"]))),
        ("gatewayd", f"{git['commit']}" + (" (gatewayd/ modified)" if git["dirty"] else "")),
    ]
    lines = ["| machine | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)
