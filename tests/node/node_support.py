"""Helpers for the JS/TS hook tests: hook directories written from source, Nodes to run them.

* :func:`write_js_hook`: a hook directory with a HOOK.md and any files (handler, helpers, a
  ``node_modules`` tree), written by the test so nothing installed is ever committed.
* :data:`WHEEL_NODE` / :data:`SYSTEM_NODE`: the Node of the ``gatewayd[node]`` extra (24.x, runs
  TypeScript) and ``node`` on ``PATH`` (may be older), or None.
* :func:`env_without_node`: an environment whose ``PATH`` holds no ``node`` and whose config
  never uses the wheel's Node: the "no Node on this machine" case.
* :func:`rss_kib`: a process's resident set from ``/proc``.
* :func:`wheel_binary` / :func:`with_runtime`: the wheel's Node, and a running ``NodeRuntime``
  for a test body (every worker killed afterwards).
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from gatewayd.hooks.node import NodeBinary, NodeRuntime
from gatewayd.hooks.node.resolve import choose, probe, wheel_node

WHEEL_NODE = wheel_node()
SYSTEM_NODE = shutil.which("node")


def node_version(path: str | None) -> tuple[int, int, int] | None:
    return probe(path) if path else None


def write_js_hook(
    root: Path,
    name: str,
    files: Mapping[str, str],
    *,
    events: Sequence[str] = ("command:hello",),
    meta: Mapping[str, Any] | None = None,
    namespace: str = "openclaw",
) -> Path:
    """Write ``root/name/HOOK.md`` (metadata under ``namespace``) and ``files`` (relative path ->
    source, dedented); return the hook directory."""
    hook_dir = root / name
    hook_dir.mkdir(parents=True, exist_ok=True)
    metadata = {namespace: {"events": list(events), **(meta or {})}}
    (hook_dir / "HOOK.md").write_text(
        f"---\nname: {name}\ndescription: test hook {name}\n"
        f"metadata: {json.dumps(metadata)}\n---\n\n# {name}\n",
        encoding="utf-8",
    )
    for relative, source in files.items():
        path = hook_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return hook_dir


def env_without_node() -> dict[str, str]:
    """Environment overrides for a daemon on a machine without Node: ``PATH`` without any entry
    holding a ``node``, and ``hooks.node.wheel`` off."""
    entries = os.environ.get("PATH", "").split(os.pathsep)
    path = os.pathsep.join(e for e in entries if e and not os.path.exists(Path(e) / "node"))
    return {"PATH": path, "GATEWAYD_HOOKS__NODE__WHEEL": "false"}


def rss_kib(pid: int) -> int:
    """``VmRSS`` of ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def process_identity(pid: int) -> tuple[int, int]:
    """``pid`` with its start time in clock ticks since boot (``/proc/PID/stat`` field 22): two
    processes never share both, where a busy machine (pid_max 32768 here) reuses bare pids."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Field 2 (the command) may hold spaces and parentheses: count fields after its last ')'.
    return pid, int(stat.rsplit(")", 1)[1].split()[19])


def node_children(pid: int) -> list[int]:
    """Pids of the ``worker.mjs`` processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"worker.mjs" in cmdline:
            found.append(int(entry.name))
    return found


def wheel_binary() -> NodeBinary:
    """The Node the runtime picks for a TypeScript hook (the wheel's, on this machine)."""
    binary = choose([Path("handler.ts")], None, True).binary
    assert binary is not None and binary.runs_typescript, binary
    return binary


def with_runtime(body: Callable[[NodeRuntime], Awaitable[Any]]) -> Any:
    """Run ``body(runtime)`` with a running runtime; every worker is killed afterwards."""
    result: list[Any] = []

    async def main() -> None:
        runtime = NodeRuntime()
        async with anyio.create_task_group() as tg:
            await tg.start(runtime.run)
            result.append(await body(runtime))
            tg.cancel_scope.cancel()

    anyio.run(main)
    return result[0]
