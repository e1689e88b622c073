"""The import bound is on the CPU a worker spends, not on how long the machine keeps it waiting.

Node evaluates an import's whole module graph without turning its event loop, so a big graph
(OpenClaw's bundled hooks: 4,300 modules, 4 to 5 s of CPU) keeps a worker from answering for as
long as the machine takes to give it that CPU. A worker kept off the CPU is stopped here
(``SIGSTOP``, as a scheduler leaves a starved process waiting) past the bound: its import still
loads; top-level code that loops is still killed at the bound (``test_node_reload``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.hooks.node import NodeHook, NodeRuntime
from gatewayd.hooks.node import imports as node_imports
from gatewayd.hooks.node import runtime as node_runtime
from gatewayd.hooks.node.imports import main_thread_cpu
from gatewayd.hooks.runners import Outcome
from tests.node.node_support import WHEEL_NODE, wheel_binary, with_runtime, write_js_hook
from tests.node.test_node_reload import say

needs_wheel = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")

BOUND_S = 2.0
STOPPED_S = 2 * BOUND_S + node_imports.IMPORT_GRACE_S
"""Longer than the bound and its grace together: the clock alone would fail the import."""


@needs_wheel
def test_an_import_kept_off_the_cpu_past_the_bound_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node_runtime, "LOAD_TIMEOUT_S", BOUND_S)
    marker = tmp_path / "importing"
    slow = write_js_hook(
        tmp_path,
        "slow",
        {
            "handler.js": f"""
                import fs from "node:fs";
                fs.writeFileSync({str(marker)!r}, String(process.pid));
                // Blocks the main thread (as compiling a big graph does) while the test stops it.
                Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
                export default (event) => {{ event.messages.push("slow"); }};
            """
        },
    )
    after = write_js_hook(
        tmp_path, "after", {"handler.js": "export default (e) => { e.messages.push('after'); };"}
    )
    hooks = [NodeHook("slow", slow / "handler.js"), NodeHook("after", after / "handler.js")]

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        stopped: dict[str, Any] = {}

        async def starve() -> None:
            for _ in range(60_000):  # the worker writes it once its import began
                if marker.exists() and marker.read_text():
                    break
                await anyio.sleep(0.01)
            pid = int(marker.read_text())
            os.kill(pid, signal.SIGSTOP)
            stopped["cpu"] = main_thread_cpu(pid)
            try:
                await anyio.sleep(STOPPED_S)
            finally:
                with contextlib.suppress(ProcessLookupError):  # killed for the import
                    os.kill(pid, signal.SIGCONT)

        async with anyio.create_task_group() as tg:
            tg.start_soon(starve)
            generation, errors = await runtime.load(wheel_binary(), hooks)
        runtime.activate(generation)
        return {
            "errors": {hook.name: reason for hook, reason in errors.items()},
            "said": [await say(hook) for hook in hooks],
            "cpu": stopped["cpu"],
        }

    result = with_runtime(body)
    assert result["errors"] == {}
    assert result["said"] == [(Outcome.OK, ["slow"]), (Outcome.OK, ["after"])]
    assert result["cpu"] is not None  # /proc told the main thread's CPU time


def test_main_thread_cpu_is_none_for_a_process_that_is_not_there() -> None:
    assert main_thread_cpu(None) is None
    assert main_thread_cpu(2**22 + 12345) is None  # above pid_max's ceiling: never a process
    own = main_thread_cpu(os.getpid())
    assert own is not None and own > 0
