"""The Node runtime on its own: real Node workers, real hook files, no daemon.

Hooks are written the way published OpenClaw hooks are (ESM and CommonJS, TypeScript with type
imports, relative imports, a hook's own ``node_modules``, default and named exports) and run in a
real worker; failures (a throw, a hang, a crash, a bad export) must each come back as that hook's
outcome with its reason, and a hung or crashed worker is replaced.
"""

from __future__ import annotations

import os
import signal
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.node import NodeHook, NodeRuntime
from gatewayd.hooks.runners import Outcome
from tests.node.node_support import (
    WHEEL_NODE,
    node_version,
    wheel_binary,
    with_runtime,
    write_js_hook,
)

pytestmark = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")


async def load_one(runtime: NodeRuntime, hook: NodeHook) -> dict[NodeHook, str]:
    generation, errors = await runtime.load(wheel_binary(), [hook])
    runtime.activate(generation)
    return errors


HOOK_SHAPES: dict[str, tuple[dict[str, str], str | None]] = {
    # TypeScript, ESM, a type-only import of OpenClaw's API, a relative .ts import.
    "ts-esm": (
        {
            "handler.ts": """
                import type { HookHandler } from "openclaw/hooks";
                import { greet } from "./lib/greet.ts";
                interface Seen { at: Date }
                const handler: HookHandler = async (event) => {
                  const seen: Seen = { at: event.timestamp };
                  event.messages.push(greet(event.sessionKey, seen.at));
                };
                export default handler;
            """,
            "lib/greet.ts": """
                export function greet(who: string, at: Date): string {
                  return `ts-esm ${who} ${at instanceof Date}`;
                }
            """,
        },
        None,
    ),
    # CommonJS: module.exports = a function, node: builtins, the hook's own node_modules.
    "cjs-default": (
        {
            "handler.js": """
                const path = require("node:path");
                const shout = require("shout");
                module.exports = async function (event) {
                  const base = path.basename("/a/" + event.sessionKey);
                  event.messages.push(shout(`cjs-default ${base}`));
                };
            """,
            "node_modules/shout/package.json": '{"name": "shout", "main": "main.js"}',
            "node_modules/shout/main.js": "module.exports = (s) => s.toUpperCase();",
        },
        None,
    ),
    # CommonJS with a named `handler` export only.
    "cjs-named": (
        {"handler.js": "exports.handler = (event) => { event.messages.push('cjs-named'); };"},
        None,
    ),
    # ESM .mjs with a named export chosen by HOOK.md `export`.
    "mjs-export": (
        {
            "handler.mjs": """
                export default () => { throw new Error("the default export must not run"); };
                export async function onEvent(event) { event.messages.push("mjs-export"); }
            """
        },
        "onEvent",
    ),
    # ESM .js ("type": "module") importing an ESM package with "exports" from node_modules.
    "esm-package": (
        {
            "package.json": '{"type": "module"}',
            "index.js": """
                import { tag } from "tagger";
                export const handler = async (event) => {
                  event.messages.push(tag("esm-package"));
                };
            """,
            "node_modules/tagger/package.json": (
                '{"name": "tagger", "type": "module", "exports": {".": "./src/tag.js"}}'
            ),
            "node_modules/tagger/src/tag.js": "export const tag = (s) => `<${s}>`;",
        },
        None,
    ),
}
EXPECTED = {
    "ts-esm": ["ts-esm s1 true"],
    "cjs-default": ["CJS-DEFAULT S1"],
    "cjs-named": ["cjs-named"],
    "mjs-export": ["mjs-export"],
    "esm-package": ["<esm-package>"],
}


@pytest.mark.parametrize("shape", sorted(HOOK_SHAPES))
def test_published_hook_shapes_load_and_reply(tmp_path: Path, shape: str) -> None:
    files, export = HOOK_SHAPES[shape]
    hook_dir = write_js_hook(tmp_path, shape, files)
    entry = next(p for p in hook_dir.iterdir() if p.stem in ("handler", "index"))
    hook = NodeHook(shape, entry, export)

    async def body(runtime: NodeRuntime) -> tuple[dict[NodeHook, str], Outcome, list[str]]:
        errors = await load_one(runtime, hook)
        event = create_hook_event("command", "hello", "s1")
        outcome = await hook.run(event, 10)
        return errors, outcome, event.messages

    errors, outcome, messages = with_runtime(body)
    assert errors == {}
    assert (outcome, messages) == (Outcome.OK, EXPECTED[shape])


def test_context_changes_come_back_and_lists_change_in_place(tmp_path: Path) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "boot",
        {
            "handler.ts": """
                export default async (event: any) => {
                  type File = { name: string; content: string };
                  const files = event.context.bootstrapFiles as File[];
                  files[0].content = files[0].content + " (edited)";
                  files.push({ name: "EXTRA.md", content: "extra" });
                  event.context.result = { seen: event.context.gatewayObject };
                  event.context.gatewayObject = "replaced";
                  delete event.context.dropMe;
                };
            """
        },
    )
    hook = NodeHook("boot", hook_dir / "handler.ts")
    files = [{"name": "AGENTS.md", "content": "agents"}]
    opaque = object()
    event = create_hook_event(
        "agent",
        "bootstrap",
        "s1",
        {"bootstrapFiles": files, "gatewayObject": opaque, "dropMe": 1, "kept": [1, 2]},
    )

    async def body(runtime: NodeRuntime) -> Outcome:
        assert await load_one(runtime, hook) == {}
        return await hook.run(event, 10)

    assert with_runtime(body) is Outcome.OK
    assert event.context["bootstrapFiles"] is files  # the emitter's list, changed in place
    assert files == [
        {"name": "AGENTS.md", "content": "agents (edited)"},
        {"name": "EXTRA.md", "content": "extra"},
    ]
    # A value that is not JSON reaches JS as a placeholder and is never replaced from JS.
    assert event.context["result"] == {"seen": "[object]"}
    assert event.context["gatewayObject"] is opaque
    assert "dropMe" not in event.context
    assert event.context["kept"] == [1, 2]


def test_what_a_handler_returns_merges_as_a_python_handlers_result(tmp_path: Path) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "rewrite",
        {
            "handler.ts": """
                export default async (event: { context: { content: string } }) =>
                  ({ content: event.context.content.toUpperCase(), cancel: false });
            """
        },
    )
    hook = NodeHook("rewrite", hook_dir / "handler.ts")
    event = create_hook_event("message", "sending", "s1", {"to": "u", "content": "hi"})

    async def body(runtime: NodeRuntime) -> Outcome:
        assert await load_one(runtime, hook) == {}
        return await hook.run(event, 10)

    assert with_runtime(body) is Outcome.OK
    assert event.result == {"content": "HI", "cancel": False}
    assert event.context["content"] == "HI"  # a result field that is a context field


@pytest.mark.parametrize(
    ("files", "export", "expected"),
    [
        ({"handler.ts": "export default (e: any) => {\n"}, None, "SyntaxError"),
        ({"handler.js": "export const other = 1;"}, None, "exports neither a default function"),
        ({"handler.js": "export default () => {};"}, "missing", "export 'missing' is not"),
        ({"handler.js": "throw new Error('top-level boom');"}, None, "top-level boom"),
        ({"handler.js": "import x from './nope.js';"}, None, "nope.js"),
        ({"handler.ts": "enum Color { Red }\nexport default () => {};"}, None, "enum"),
    ],
    ids=["syntax", "no-export", "wrong-export", "throws", "missing-import", "ts-enum"],
)
def test_import_failures_name_the_hook_file_and_cause(
    tmp_path: Path, files: dict[str, str], export: str | None, expected: str
) -> None:
    hook_dir = write_js_hook(tmp_path, "bad", files)
    good_dir = write_js_hook(tmp_path, "good", {"handler.js": "export default () => {};"})
    bad = NodeHook("bad", hook_dir / next(iter(files)), export)
    good = NodeHook("good", good_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> dict[NodeHook, str]:
        generation, errors = await runtime.load(wheel_binary(), [bad, good])
        runtime.activate(generation)
        assert await good.run(create_hook_event("command", "x", "s"), 10) is Outcome.OK
        return errors

    errors = with_runtime(body)
    assert list(errors) == [bad]
    assert str(bad.file) in errors[bad] and expected in errors[bad], errors[bad]


def test_a_throw_is_that_hooks_error_and_the_worker_lives_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "thrower",
        {"handler.js": "export default () => { throw new TypeError('bad input'); };"},
    )
    hook = NodeHook("thrower", hook_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> tuple[Outcome, Outcome, int | None, int | None]:
        await load_one(runtime, hook)
        pid = hook.generation.worker.pid if hook.generation and hook.generation.worker else None
        first = await hook.run(create_hook_event("command", "x", "s"), 10)
        second = await hook.run(create_hook_event("command", "x", "s"), 10)
        after = hook.generation.worker.pid if hook.generation and hook.generation.worker else None
        return first, second, pid, after

    first, second, pid, after = with_runtime(body)
    assert (first, second) == (Outcome.ERROR, Outcome.ERROR)
    assert pid is not None and pid == after


def test_a_hung_worker_is_killed_and_restarted_failing_only_the_calls_in_flight(
    tmp_path: Path,
) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "mixed",
        {
            "handler.js": """
                export default async (event) => {
                  if (event.action === "hang") { for (;;) {} }
                  if (event.action === "slow") { await new Promise((r) => setTimeout(r, 200)); }
                  event.messages.push(`done ${event.action}`);
                };
            """
        },
    )
    hook = NodeHook("mixed", hook_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> dict[str, Any]:
        await load_one(runtime, hook)
        assert hook.generation is not None and hook.generation.worker is not None
        first_pid = hook.generation.worker.pid
        outcomes: dict[str, Outcome] = {}

        async def run(action: str, limit_s: float) -> None:
            outcomes[action] = await hook.run(create_hook_event("command", action, "s"), limit_s)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "slow", 30)  # in flight on the worker when it hangs
            await anyio.sleep(0.05)
            tg.start_soon(run, "hang", 0.5)
        # The next call waits for the restarted worker and runs there.
        after = create_hook_event("command", "after", "s")
        outcomes["after"] = await hook.run(after, 30)
        worker = hook.generation.worker
        return {
            "outcomes": outcomes,
            "first_pid": first_pid,
            "pid": worker.pid if worker else None,
            "messages": after.messages,
        }

    result = with_runtime(body)
    assert result["outcomes"] == {
        "hang": Outcome.TIMEOUT,
        "slow": Outcome.ERROR,  # its worker was killed under it
        "after": Outcome.OK,
    }
    assert result["pid"] not in (None, result["first_pid"])
    assert result["messages"] == ["done after"]


def test_a_crashed_worker_fails_the_call_with_its_exit_and_is_restarted(tmp_path: Path) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "crasher",
        {
            "handler.js": """
                export default (event) => {
                  if (event.action === "crash") process.exit(7);
                  event.messages.push("alive");
                };
            """
        },
    )
    hook = NodeHook("crasher", hook_dir / "handler.js")
    logged: list[MutableMapping[str, Any]] = []

    async def body(runtime: NodeRuntime) -> tuple[Outcome, Outcome, list[str]]:
        await load_one(runtime, hook)
        with structlog.testing.capture_logs() as logs:
            crashed = await hook.run(create_hook_event("command", "crash", "s"), 10)
        logged.extend(logs)
        event = create_hook_event("command", "again", "s")
        again = await hook.run(event, 30)
        return crashed, again, event.messages

    crashed, again, messages = with_runtime(body)
    assert crashed is Outcome.ERROR
    errors = [e for e in logged if e["event"] == "hook.error"]
    assert errors and "exited with code 7" in errors[0]["error"], logged
    assert (again, messages) == (Outcome.OK, ["alive"])


def test_importing_into_a_worker_that_died_since_it_was_ready_reports_not_raises(
    tmp_path: Path,
) -> None:
    """A restarted worker that dies (killed, OOM) between saying ready and the load requests:
    ``request()`` raises WorkerGone at once, and out of ``_restart`` that ended the Node
    supervision task and the daemon. ``import_into`` reports it per hook, as when the worker
    dies during the import."""
    hook_dir = write_js_hook(tmp_path, "plain", {"handler.js": "export default () => {};"})
    hook = NodeHook("plain", hook_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> dict[NodeHook, str]:
        await load_one(runtime, hook)
        generation = runtime.current
        assert generation is not None and generation.worker is not None
        worker = generation.worker
        assert worker.pid is not None
        generation.retired = True  # no restart: this test calls the import itself
        os.kill(worker.pid, signal.SIGKILL)
        with anyio.fail_after(30):
            while worker.alive:  # noqa: ASYNC110 (a worker has no public exit event)
                await anyio.sleep(0.01)
        return await generation.import_into(worker)

    errors = with_runtime(body)
    assert list(errors) == [hook]
    assert "import failed" in errors[hook] and "signal 9" in errors[hook], errors


def test_console_output_is_logged_with_the_hook_name(tmp_path: Path) -> None:
    hook_dir = write_js_hook(
        tmp_path,
        "chatty",
        {"handler.js": "export default (e) => { console.log('seen %s', e.sessionKey); };"},
    )
    hook = NodeHook("chatty", hook_dir / "handler.js")

    async def body(runtime: NodeRuntime) -> list[MutableMapping[str, Any]]:
        await load_one(runtime, hook)
        with structlog.testing.capture_logs() as logs:
            await hook.run(create_hook_event("command", "x", "s9"), 10)
            await anyio.sleep(0.2)  # the log frame may follow the reply
        return logs

    logs = with_runtime(body)
    assert {
        "event": "hook.console",
        "hook": "chatty",
        "text": "seen s9",
        "log_level": "info",
    } in logs


def test_typescript_needs_a_node_that_strips_types() -> None:
    version = node_version(WHEEL_NODE)
    assert version is not None and version >= (22, 18, 0)
