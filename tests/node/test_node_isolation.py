"""A JS/TS hook at fault harms only itself: its stuck import, its hang, its output, its children.

* an import that never settles or loops is that hook's failure alone, found once and remembered
  until a file of the hook changes (each later load fails it at once, without importing it);
* a call after a hook hung the worker waits for the verdict and runs in the new worker;
* ``process.stdout.write``, ``process.stderr.write`` and ``fs.writeSync(1|2)`` of a hook are
  logged as its ``hook.console`` lines: nothing reaches the daemon's log raw;
* kill -9 of the daemon takes the worker and every process its hooks started with it, detached
  ones too.
"""

from __future__ import annotations

import json
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks import create_hook_event
from gatewayd.hooks.node import NodeHook, NodeRuntime
from gatewayd.hooks.node import runtime as node_runtime
from gatewayd.hooks.runners import Outcome
from tests.node.node_support import (
    WHEEL_NODE,
    node_children,
    wheel_binary,
    with_runtime,
    write_js_hook,
)
from tests.support.fixtures import StartDaemon
from tests.support.state import wait_until

pytestmark = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")

REPLY = "export default (event) => { event.messages.push('NAME'); };\n"


def counting(name: str, top: str, marks: Path) -> str:
    """A handler whose top-level code appends its name to ``marks`` (one line per import), then
    runs ``top``."""
    record = f"appendFileSync({json.dumps(str(marks))}, 'NAME\\n');\n"
    return ("import { appendFileSync } from 'node:fs';\n" + record + top + REPLY).replace(
        "NAME", name
    )


def imports(marks: Path) -> list[str]:
    return sorted(marks.read_text().split()) if marks.exists() else []


async def said(hook: NodeHook) -> tuple[Outcome, list[str]]:
    event = create_hook_event("command", "hello", "s")
    return await hook.run(event, 10), event.messages


def test_stuck_imports_fail_alone_once_and_are_remembered_until_their_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node_runtime, "LOAD_TIMEOUT_S", 2.0)
    marks = tmp_path / "imports"
    tops = {
        "aloop": "while (true) {}\n",
        "bgood": "",
        "cnever": "await new Promise(() => {});\n",
        "dloop": "for (;;) {}\n",
        "egood": "",
    }
    roots = tmp_path / "hooks"
    files = {
        name: write_js_hook(roots, name, {"handler.js": counting(name, top, marks)}) / "handler.js"
        for name, top in tops.items()
    }

    def fresh() -> list[NodeHook]:
        return [NodeHook(name, file) for name, file in files.items()]

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        first, errors1 = await runtime.load(wheel_binary(), hooks1 := fresh())
        runtime.activate(first)
        after_first = imports(marks)
        second, errors2 = await runtime.load(wheel_binary(), hooks2 := fresh())
        runtime.activate(second)
        after_second = imports(marks)
        # An edit of a stuck hook's file has it imported again (and found stuck again).
        files["cnever"].write_text(files["cnever"].read_text() + "// edited\n")
        third, errors3 = await runtime.load(wheel_binary(), fresh())
        runtime.activate(third)
        return {
            "errors": [
                {h.name: reason for h, reason in e.items()} for e in (errors1, errors2, errors3)
            ],
            "imports": [after_first, after_second, imports(marks)],
            "said": [await said(h) for h in hooks2 if h.name.endswith("good")],
            "said1": [await said(h) for h in hooks1 if h.name.endswith("good")],
        }

    result = with_runtime(body)
    stuck = ["aloop", "cnever", "dloop"]
    first, second, third = result["errors"]
    assert sorted(first) == stuck, first
    for name in stuck:
        assert "import did not finish within 2 s" in first[name], first[name]
    # Each stuck hook was imported once, the good ones once more after the worker they were in
    # was replaced at most once each: never one attempt per stuck hook for all of them.
    assert result["imports"][0].count("aloop") == 1, result["imports"]
    assert result["imports"][0].count("dloop") == 1, result["imports"]
    assert result["imports"][0].count("cnever") == 1, result["imports"]
    # The next load fails them at once, saying so, without importing them again.
    assert sorted(second) == stuck, second
    for name in stuck:
        assert "in an earlier load" in second[name], second[name]
        assert "imported again once a file of the hook changes" in second[name]
    new = result["imports"][1][len(result["imports"][0]) :]
    assert [n for n in result["imports"][1] if n in stuck] == [
        n for n in result["imports"][0] if n in stuck
    ], new
    assert result["said"] == [(Outcome.OK, ["bgood"]), (Outcome.OK, ["egood"])]
    # Edited: imported again (once more), still stuck; the others still remembered.
    assert sorted(third) == stuck, third
    assert "import did not finish" in third["cnever"] and "earlier load" not in third["cnever"]
    assert result["imports"][2].count("cnever") == 2, result["imports"][2]
    assert result["imports"][2].count("aloop") == 1, result["imports"][2]


HANGS = """
export default (event) => { for (;;) {} };
"""
REPLIES = """
export default (event) => { event.messages.push("after the hang"); };
"""


def test_a_hung_js_hook_does_not_fail_the_next_js_hook_of_the_same_event(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-hangs", {"handler.js": HANGS}, meta={"timeoutMs": 500})
    write_js_hook(hooks, "b-replies", {"handler.js": REPLIES})
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok("trigger", event="command:hello", sessionKey="agent:main:h", trace=True)
    outcomes = {h["hook"]: h["outcome"] for h in reply["trace"][0]["handlers"] if h["kind"] == "js"}
    assert outcomes == {"a-hangs": "timeout", "b-replies": "ok"}, reply["trace"]
    assert reply["messages"] == ["after the hang"], reply


WRITES = """
import { writeSync } from "node:fs";
import fs from "node:fs";
import { spawnSync } from "node:child_process";
process.stdout.write("top stdout\\n");
export default (event) => {
  process.stdout.write('{"event": "gateway.ready", "level": "info"} forged\\n');
  process.stderr.write("\\u001b[31mred\\u001b[0m stderr\\n");
  writeSync(1, "fd one\\n");
  fs.writeSync(2, "fd two\\n");
  console.log("console too");
  spawnSync("sh", ["-c", "echo from a child"], { stdio: "inherit" });
  event.messages.push("wrote");
};
"""


def test_a_js_hooks_stdout_and_stderr_are_its_log_lines_never_raw(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    write_js_hook(state_dir / "hooks", "writer", {"handler.js": WRITES})
    daemon = start_daemon()
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="agent:main:w", text="/hello")["messages"] == ["wrote"]
    wanted = {
        "top stdout",
        '{"event": "gateway.ready", "level": "info"} forged',
        "\x1b[31mred\x1b[0m stderr",
        "fd one",
        "fd two",
        "console too",
    }

    def console_lines() -> set[str]:
        return {r["text"] for r in daemon.events("hook.console") if r.get("hook") == "writer"}

    wait_until(lambda: wanted <= console_lines(), what=f"{wanted - console_lines()} logged")
    # A child's output through the inherited fd 1: logged too, with no hook to name.
    wait_until(
        lambda: any(r["text"] == "from a child" for r in daemon.events("hook.console")),
        what="the child's line logged",
    )
    daemon.stop()
    raw = [line for line in daemon.stderr_lines if not line.startswith("{")]
    assert raw == [], raw
    forged = [r for r in daemon.logs if r.get("event") == "gateway.ready"]
    assert len(forged) == 1, forged  # the daemon's own, not the hook's


SPAWNER = """
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
export default (event) => {
  if (event.action === "spawn") {
    const out = new URL("./spawned.json", import.meta.url);
    const kept = spawn("sleep", ["300"], { stdio: "ignore" });
    const detached = spawn("sleep", ["301"], { detached: true, stdio: "ignore" });
    detached.unref();
    writeFileSync(out, JSON.stringify([kept.pid, detached.pid]));
    event.messages.push("spawned");
  }
  if (event.action === "spin") {
    writeFileSync(new URL("./spinning", import.meta.url), "");
    for (;;) {}
  }
};
"""


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_kill_9_of_the_daemon_takes_the_worker_and_its_hooks_children(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    pids_file = state_dir / "hooks" / "spawner" / "spawned.json"
    write_js_hook(
        state_dir / "hooks",
        "spawner",
        {"handler.js": SPAWNER},
        events=["command:spawn", "command:spin"],
        meta={"timeoutMs": 120000},
    )
    daemon = start_daemon()
    assert daemon.proc.pid is not None
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="agent:main:k", text="/spawn")["messages"] == [
            "spawned"
        ]
        ctl.ok("trigger", event="command:spin", sessionKey="agent:main:k2", wait=False)
    workers = node_children(daemon.proc.pid)
    assert workers, "no node worker"
    children = json.loads(pids_file.read_text())
    wait_until((pids_file.parent / "spinning").exists, what="the worker spinning")
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.wait()
    for pid in [*workers, *children]:
        wait_until(partial(gone, pid), timeout=30, what=f"pid {pid} gone")


def test_a_daemon_reload_fails_a_remembered_stuck_import_without_importing_it(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    marks = state_dir / "imports"
    hooks = state_dir / "hooks"
    write_js_hook(
        hooks, "never", {"handler.js": counting("never", "await new Promise(() => {});\n", marks)}
    )
    write_js_hook(hooks, "good", {"handler.js": counting("good", "", marks)})
    daemon = start_daemon()
    assert imports(marks) == ["good", "never"]
    with daemon.control() as ctl:
        reply = ctl.ok("reload")
        assert ctl.ok("message", sessionKey="agent:main:s", text="/hello")["messages"] == ["good"]
    failed = reply["result"]["failed"]
    assert len(failed) == 1 and failed[0].startswith("never: "), failed
    assert "in an earlier load" in failed[0], failed
    assert imports(marks) == ["good", "good", "never"]  # the stuck one not imported again


ODD_RETURNS = """
const nested = (levels) => {
  const top = {};
  let o = top;
  for (let i = 0; i < levels; i++) o = o.x = {};
  return top;
};
export default (event) => {
  const mode = event.context.mode;
  event.messages.push(mode);
  if (mode === "circular") { const o = { content: "x" }; o.self = o; return o; }
  if (mode === "deep") return nested(5000);
  if (mode === "big") return { content: 10n };
  if (mode === "deepcontext") event.context.deep = nested(2000);
};
"""


def test_a_js_return_that_is_no_json_is_refused_and_its_messages_kept(tmp_path: Path) -> None:
    hook = NodeHook(
        "odd", write_js_hook(tmp_path, "odd", {"handler.js": ODD_RETURNS}) / "handler.js"
    )

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        generation, errors = await runtime.load(wheel_binary(), [hook])
        assert errors == {}
        runtime.activate(generation)
        assert generation.worker is not None
        pid = generation.worker.pid
        seen: dict[str, Any] = {}
        for action in ("circular", "deep", "big", "deepcontext", "after"):
            event = create_hook_event("message", "sending", "s", {"content": "c", "mode": action})
            outcome = await hook.run(event, 10)
            seen[action] = (outcome, event.messages, event.result)
        return {"seen": seen, "same_worker": generation.worker.pid == pid}

    result = with_runtime(body)
    seen = result["seen"]
    for action in ("circular", "deep", "big"):
        assert seen[action] == (Outcome.OK, [action], None), seen[action]
    # A context change nested past what the daemon's JSON reader takes (2,000 levels: Node
    # writes them, Python reads 1,000) fails that call alone, not the worker's channel.
    assert seen["deepcontext"][0] is Outcome.ERROR, seen["deepcontext"]
    assert seen["after"] == (Outcome.OK, ["after"], None), seen["after"]
    assert result["same_worker"]
