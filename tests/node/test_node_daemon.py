"""JS/TS hooks in a real gateway (in-process; its Node workers real child processes) with a real
Node: replies, context, failures, no Node, live edits, and the ``gatewayd hooks`` commands. A
worker restart with no descriptor left runs under ``ulimit -n``: a ``gatewayd run`` process.

The hooks are written the way published OpenClaw hooks are (``handler.ts`` with ``import type``
and a relative import, CommonJS ``handler.js`` with a package from its own ``node_modules``,
``index.mjs`` with a named export, ``agent:bootstrap`` handlers editing ``bootstrapFiles``).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.node.node_support import (
    SYSTEM_NODE,
    WHEEL_NODE,
    env_without_node,
    node_version,
    write_js_hook,
)
from tests.support.cli import gatewayd
from tests.support.fixtures import StartDaemon, StartGateway
from tests.support.hooks import FD_LEAKER
from tests.support.inprocess import InProcess
from tests.support.state import eventually_async

needs_wheel = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")
anyio_test = pytest.mark.anyio

TS_HELLO = {
    "handler.ts": """
        import type { HookHandler } from "openclaw/hooks";
        import { greet } from "./lib/greet.ts";
        const handler: HookHandler = async (event) => {
          event.messages.push(greet(event.sessionKey, event.timestamp));
        };
        export default handler;
    """,
    "lib/greet.ts": """
        export const greet = (who: string, at: Date): string =>
          `ts ${who} ${at instanceof Date && !Number.isNaN(at.getTime())}`;
    """,
}
CJS_HELLO = {
    "handler.js": """
        const { sep } = require("node:path");
        const shout = require("shout");
        exports.handler = async (event) => { event.messages.push(shout("cjs") + sep); };
    """,
    "node_modules/shout/package.json": '{"name": "shout", "main": "index.js"}',
    "node_modules/shout/index.js": "module.exports = (s) => s.toUpperCase();",
}
MJS_HELLO = {
    "index.mjs": "export async function onHello(event) { event.messages.push('mjs'); }",
}
BOOTSTRAP_TS = {
    "handler.ts": """
        type File = { name: string; path: string; content: string; missing: boolean };
        export default async (event: { context: { bootstrapFiles: File[] } }) => {
          event.context.bootstrapFiles.push(
            { name: "EXTRA.md", path: "/ws/EXTRA.md", content: "from ts", missing: false });
        };
    """,
}
PY_HELLO = textwrap.dedent(
    """
    async def handler(event):
        event.messages.append("py")
    """
)


def write_py_hook(root: Path, name: str, events: list[str]) -> None:
    hook = root / name
    hook.mkdir(parents=True)
    meta = json.dumps({"eliza": {"events": events}})
    (hook / "HOOK.md").write_text(f"---\nname: {name}\nmetadata: {meta}\n---\n")
    (hook / "handler.py").write_text(PY_HELLO)


async def hooks_by_name(daemon: InProcess) -> dict[str, dict[str, Any]]:
    async with daemon.control() as ctl:
        return {h["name"]: h for h in (await ctl.ok("hooks"))["hooks"]}


async def send(daemon: InProcess, text: str, session: str = "agent:main:js") -> list[str]:
    async with daemon.control() as ctl:
        return list((await ctl.ok("message", sessionKey=session, text=text))["messages"])


async def answers(daemon: InProcess, text: str, expected: list[str], what: str) -> None:
    """Wait (at most 30 s) until ``text`` is answered with ``expected``."""

    async def answered() -> bool:
        return await send(daemon, text) == expected

    await eventually_async(answered, 30, what)


@needs_wheel
@anyio_test
async def test_js_and_ts_hooks_reply_and_edit_bootstrap_files(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-ts", TS_HELLO)
    write_js_hook(hooks, "b-cjs", CJS_HELLO)
    write_js_hook(hooks, "c-mjs", MJS_HELLO, meta={"export": "onHello"})
    write_py_hook(hooks, "d-py", ["command:hello"])
    write_js_hook(hooks, "e-boot", BOOTSTRAP_TS, events=["agent:bootstrap"])
    write_js_hook(
        hooks,
        "f-sending",
        {"handler.js": "export default (e) => ({ content: `${e.context.content}!` });"},
        events=["message:sending"],
    )
    daemon = await start_gateway()
    listed = await hooks_by_name(daemon)
    assert {name: h["status"] for name, h in listed.items() if name[1] == "-"} == {
        "a-ts": "ready",
        "b-cjs": "ready",
        "c-mjs": "ready",
        "d-py": "ready",
        "e-boot": "ready",
        "f-sending": "ready",
    }
    assert listed["a-ts"]["handler"].endswith("handler.ts")
    # Load order, Python and JS alike; the timestamp is a real Date in JS; each reply line is
    # rewritten by the JS message:sending hook's returned result.
    hello = ["ts agent:main:js true!", "CJS/!", "mjs!", "py!"]
    assert await send(daemon, "/hello") == hello
    async with daemon.control() as ctl:
        files = (await ctl.ok("bootstrap", sessionKey="agent:main:boot"))["bootstrapFiles"]
    assert {"name": "EXTRA.md", "path": "/ws/EXTRA.md", "content": "from ts", "missing": False} in (
        files
    )
    # A reload loads the same hooks again (a module graph of its own, in the running worker).
    async with daemon.control() as ctl:
        assert (await ctl.ok("reload"))["result"]["registered"] >= 6
    assert await send(daemon, "/hello") == hello


@needs_wheel
@anyio_test
async def test_a_throw_and_a_hang_are_counted_like_python_failures(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(
        hooks,
        "thrower",
        {"handler.js": "export default () => { throw new RangeError('out of range'); };"},
        events=["command:boom"],
    )
    write_js_hook(
        hooks,
        "hanger",
        {"handler.js": "export default (e) => { if (e.action === 'hang') for (;;) {} };"},
        events=["command:hang", "command:hello"],
        meta={"timeoutMs": 500},
    )
    write_js_hook(hooks, "a-ts", TS_HELLO)
    daemon = await start_gateway()
    async with daemon.control() as ctl:
        before = (await ctl.ok("status"))["status"]["queue"]
    assert await send(daemon, "/boom") == []
    error = await daemon.wait_log("hook.error", timeout=30)
    assert error["hook"] == "thrower" and "RangeError: out of range" in error["error"]
    assert "handler.js" in error["error"]
    assert await send(daemon, "/hang") == []
    timeout = await daemon.wait_log("hook.timeout", timeout=30)
    assert (timeout["hook"], timeout["timeout_ms"]) == ("hanger", 500)
    exited = await daemon.wait_log("node.worker_exited", timeout=30)
    assert "stopped answering" in exited["reason"] and "hanger" in exited["reason"]
    # The replacement worker runs every hook again.
    assert await send(daemon, "/hello") == ["ts agent:main:js true"]
    await daemon.wait_log("node.worker_restarted", timeout=30)
    async with daemon.control() as ctl:
        after = (await ctl.ok("status"))["status"]["queue"]
    assert after["errors"] - before["errors"] >= 1
    assert after["timeouts"] - before["timeouts"] == 1


@anyio_test
async def test_without_node_js_hooks_are_ineligible_and_the_rest_run(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-ts", TS_HELLO)
    write_js_hook(hooks, "b-cjs", CJS_HELLO)
    write_py_hook(hooks, "d-py", ["command:hello"])
    daemon = await start_gateway(env=env_without_node())
    listed = await hooks_by_name(daemon)
    assert listed["a-ts"]["status"] == "ineligible"
    assert listed["a-ts"]["reasons"][0].startswith("node not found (needed for handler.ts)")
    assert "install gatewayd[node] or set hooks.node.path" in listed["a-ts"]["reasons"][0]
    assert listed["b-cjs"]["status"] == "ineligible"
    assert listed["b-cjs"]["reasons"][0].startswith("node not found (needed for handler.js)")
    assert listed["d-py"]["status"] == "ready"
    assert await send(daemon, "/hello") == ["py"]


@pytest.mark.skipif(
    (node_version(SYSTEM_NODE) or (99, 0, 0)) >= (22, 6, 0),
    reason="needs a node on PATH too old to strip types",
)
@anyio_test
async def test_an_old_node_runs_js_while_ts_hooks_say_what_to_install(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-ts", TS_HELLO)
    write_js_hook(hooks, "b-cjs", CJS_HELLO)
    daemon = await start_gateway(env={"GATEWAYD_HOOKS__NODE__WHEEL": "false"})
    listed = await hooks_by_name(daemon)
    version = ".".join(map(str, node_version(SYSTEM_NODE) or ()))
    assert listed["a-ts"]["status"] == "ineligible"
    assert listed["a-ts"]["reasons"][0].startswith(
        f"node {version} ({SYSTEM_NODE}) cannot run TypeScript (needs >= 22.18"
    )
    assert listed["b-cjs"]["status"] == "ready"
    assert await send(daemon, "/hello") == ["CJS/"]


@needs_wheel
@anyio_test
async def test_a_saved_ts_handler_is_live_with_its_new_helper(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hook = write_js_hook(state_dir / "hooks", "a-ts", TS_HELLO)
    daemon = await start_gateway(watch=True)
    assert await send(daemon, "/hello") == ["ts agent:main:js true"]
    # Only the relative import changes: the fresh worker must not keep the old module.
    (hook / "lib" / "greet.ts").write_text(
        "export const greet = (who: string): string => `v2 ${who}`;\n"
    )
    await answers(daemon, "/hello", ["v2 agent:main:js"], "the edited helper")
    (hook / "handler.ts").write_text(
        'import { greet } from "./lib/greet.ts";\n'
        "export default async (event: any) => { event.messages.push(greet('v3')); };\n"
    )
    await answers(daemon, "/hello", ["v2 v3"], "the edited handler")
    # A syntax error is that hook's failure; fixing it brings the hook back.
    (hook / "handler.ts").write_text("export default async (event: any) => {\n")

    async def failed() -> bool:
        return bool((await hooks_by_name(daemon))["a-ts"]["status"] == "failed")

    await eventually_async(failed, 30, "failed")
    assert "SyntaxError" in (await hooks_by_name(daemon))["a-ts"]["reasons"][0]
    assert await send(daemon, "/hello") == []
    (hook / "handler.ts").write_text("export default (e: any) => { e.messages.push('v4'); };\n")
    await answers(daemon, "/hello", ["v4"], "the fixed handler")


@needs_wheel
@anyio_test
async def test_a_watched_save_imports_the_ts_hook_once_and_follows_a_new_export(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    """A save of hook files re-imports the JS/TS hooks while the Python side rebuilds
    (``NodeRuntime.reimport``): one import per reload when the hooks are the same; an edit of
    HOOK.md that names another export is followed."""
    log = state_dir / "imports.log"

    def source(version: str) -> dict[str, str]:
        return {
            "handler.ts": f"""
                import {{ appendFileSync }} from "node:fs";
                appendFileSync({str(log)!r}, "import\\n");
                export default async (event: any) => {{ event.messages.push("{version}"); }};
                export const other = async (event: any) => {{ event.messages.push("other"); }};
            """
        }

    hook = write_js_hook(state_dir / "hooks", "a-ts", source("v0"))
    daemon = await start_gateway(watch=True)
    assert await send(daemon, "/hello") == ["v0"]
    write_js_hook(state_dir / "hooks", "a-ts", source("v1"))
    await answers(daemon, "/hello", ["v1"], "the edited handler")
    async with daemon.control() as ctl:
        reloads = (await ctl.ok("status"))["status"]["reloads"]
    assert len(log.read_text().splitlines()) == 1 + reloads
    write_js_hook(state_dir / "hooks", "a-ts", {}, meta={"export": "other"})
    await answers(daemon, "/hello", ["other"], "the new export")
    assert hook.is_dir()


@anyio_test
async def test_a_directory_with_only_unrunnable_files_says_what_to_rename(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    write_js_hook(
        state_dir / "hooks",
        "tsx",
        {"handler.tsx": "export default () => <b/>;", "util.cjs": "module.exports = 1;"},
    )
    daemon = await start_gateway(env=env_without_node())
    hook = (await hooks_by_name(daemon))["tsx"]
    assert hook["status"] == "failed"
    reason = hook["reasons"][0]
    assert "found handler.tsx, util.cjs, none of which is a handler" in reason
    assert "rename handler.tsx to handler.ts, handler.js or handler.py" in reason


@needs_wheel
def test_hooks_check_tries_each_js_import(state_dir: Path) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-ts", TS_HELLO)
    write_js_hook(hooks, "broken", {"handler.ts": "export default (e: any) => {\n"})
    proc = gatewayd(state_dir, "hooks", "check", "--json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    by_name = {h["name"]: h for h in report["hooks"]}  # the hooks with a problem
    assert "a-ts" not in by_name
    assert by_name["broken"]["status"] == "failed"
    assert "SyntaxError" in by_name["broken"]["reasons"][0]
    assert [line.split(":")[0] for line in report["summary"]["failed"]] == ["broken"]


@needs_wheel
@anyio_test
async def test_a_js_hook_reads_its_own_entry_from_cfg_as_openclaw_hooks_do(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    write_js_hook(
        state_dir / "hooks",
        "a-cfg",
        {
            "handler.ts": """
                export default async (event: any) => {
                  const own = event.context.cfg?.hooks?.internal?.entries?.["a-cfg"];
                  const other = event.context.cfg?.hooks?.entries?.["b-cfg"];
                  event.messages.push(`${own?.flavor} ${JSON.stringify(other)}`);
                  event.context.cfg = "a handler's cfg is never taken back";
                };
            """
        },
    )
    write_js_hook(
        state_dir / "hooks",
        "b-cfg",
        {"handler.js": "export default (e) => { e.messages.push(typeof e.context.cfg); };"},
    )
    entries = {"a-cfg": {"flavor": "mint"}, "b-cfg": {"secret": "s3", "timeoutMs": 9000}}
    daemon = await start_gateway({"hooks": {"entries": entries}})
    # Its own settings whole; another hook's cut to enabled/timeoutMs; each call its own view.
    assert await send(daemon, "/hello") == ['mint {"enabled":true,"timeoutMs":9000}', "object"]
    assert await send(daemon, "/hello") == ['mint {"enabled":true,"timeoutMs":9000}', "object"]


def test_a_worker_restart_without_descriptors_left_is_retried_not_fatal(
    start_daemon: StartDaemon, state_dir: Path, write_hook: Any
) -> None:
    """A Python hook that leaks every descriptor, then a JS hook's worker that exits: its
    restart could not even make a socketpair, and that OSError (not a WorkerGone) left the Node
    supervision task and ended the daemon. Now it is a failed restart, retried with backoff,
    which succeeds once descriptors are free again."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "leaker", events=["command:leak", "command:free"], handler=FD_LEAKER)
    write_js_hook(
        hooks,
        "crasher",
        {"handler.js": "export default (e) => { if (e.action === 'crash') process.exit(7); };"},
        events=["command:crash"],
    )
    daemon = start_daemon(prefix=["sh", "-c", 'ulimit -n 256; exec "$@"', "sh"])
    with daemon.control() as ctl:  # one connection throughout: accept() fails meanwhile
        assert ctl.ok("message", sessionKey="s", text="/leak")["messages"][0] != "held 0"
        ctl.ok("message", sessionKey="s", text="/crash")
        failed = daemon.wait_log("node.restart_failed", timeout=30)
        assert "Too many open files" in failed["reason"], failed
        assert ctl.ok("message", sessionKey="s", text="/free")["messages"] == ["held 0"]
    daemon.wait_log("node.worker_restarted", timeout=60)
    assert daemon.stop() == 0
