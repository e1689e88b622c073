"""Single-file hooks (Eve's shape) in a real gateway (in-process): Python, TypeScript and JavaScript
files in a hook root, with Eve's event names, ``*``, nested names, live edits, a broken file
failing alone, and ``gatewayd hooks check`` saying why the other files are not hooks."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks import define_hook
from gatewayd.hooks.filescan import scan_files
from gatewayd.hooks.vocabulary import resolve
from tests.node.node_support import SYSTEM_NODE, WHEEL_NODE, env_without_node, node_version
from tests.support.cli import RunCli, off_loop, ok
from tests.support.fixtures import StartGateway
from tests.support.inprocess import InProcess
from tests.support.state import eventually_async

anyio_test = pytest.mark.anyio

needs_wheel = pytest.mark.skipif(WHEEL_NODE is None, reason="needs the gatewayd[node] extra")


def write(root: Path, relative: str, source: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


async def hooks_by_name(daemon: InProcess) -> dict[str, dict[str, Any]]:
    async with daemon.control() as ctl:
        return {h["name"]: h for h in (await ctl.ok("hooks"))["hooks"]}


async def reply(daemon: InProcess, text: str, session: str, channel: str = "tg") -> list[str]:
    return list((await daemon.send(text, session=session, channel=channel))["messages"])


async def starts_with(daemon: InProcess, expected: str, prefix: str) -> bool:
    """Whether a new session's ``session.started`` reply (its last line) is ``expected``, with
    ``{session}`` replaced by the session key (each try is a new session: only a new one
    starts)."""
    session = f"{prefix}{next(_SESSIONS)}"
    return (await reply(daemon, "hi", session))[-1:] == [expected.format(session=session)]


async def until(probe: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (at most 60 s, a bound against a hang) until ``probe()`` is true."""
    await eventually_async(probe, 60, what)


_SESSIONS = itertools.count()


def read_jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def split_startup(records: list[Any]) -> tuple[list[Any], list[Any]]:
    """``records`` without and with the key ``gateway:startup``, each in its order."""
    startup = [r for r in records if r["key"] == "gateway:startup"]
    return [r for r in records if r["key"] != "gateway:startup"], startup


AUDIT_PY = """
    import json
    import os

    from gatewayd.hooks import EventContext, HookEvent, define_hook

    from .lib.fmt import line


    async def started(event: HookEvent, ctx: EventContext) -> None:
        event.messages.append(line("VERSION", ctx))


    def every(event: HookEvent, ctx: EventContext) -> None:
        record = {"key": event.key, "agent": ctx.agent.name, "session": ctx.session.id,
                  "hook": ctx.hook_name}
        with open(ctx.state_dir / "every.jsonl", "a") as out:
            out.write(json.dumps(record) + "\\n")


    def sent(event: HookEvent) -> None:
        with open(os.environ["ELIZA_STATE_DIR"] + "/sent.jsonl", "a") as out:
            out.write(json.dumps(event.context.get("content")) + "\\n")


    hook = define_hook(
        events={"session.started": started, "*": every, "message.completed": sent,
                "turn.failed": every},
        description="audits every event",
    )
"""
FMT_PY = """
    def line(who, ctx):
        return f"{who} {ctx.agent.name} {ctx.channel.kind} {ctx.session.id}"
"""
PROFILE_PY = """
    from gatewayd.hooks import define_hook


    def on_message(event, ctx):
        content = event.context["content"]
        event.messages.append(f"profile {ctx.hook_name} {ctx.channel.kind} {content}")


    def whoami(event):
        event.messages.append("whoami from a plugin-free key")


    hook = define_hook(events={"message_received": on_message, "command:whoami": whoami})
"""


@anyio_test
async def test_python_single_file_hooks_run_with_eve_names_and_reload_live(
    state_dir: Path, start_gateway: StartGateway, run_cli: RunCli
) -> None:
    hooks = state_dir / "hooks"
    write(hooks, "audit.py", AUDIT_PY.replace("VERSION", "audit v1"))
    write(hooks, "lib/fmt.py", FMT_PY)
    write(hooks, "auth/load-profile.py", PROFILE_PY)
    write(hooks, "test_audit.py", "from gatewayd.hooks import define_hook\n")
    write(hooks, "node_modules/dep/index.js", "export const defineHook = (d) => d;\n")
    write(hooks, "widget.tsx", "export default defineHook({ events: {} });\n")
    daemon = await start_gateway(watch=True)
    listed = await hooks_by_name(daemon)
    assert listed["audit"]["status"] == "ready"
    assert listed["audit"]["events"] == ["session.started", "*", "message.completed", "turn.failed"]
    assert listed["audit"]["description"] == "audits every event"
    assert listed["audit"]["path"] == str(hooks / "audit.py")
    warnings = listed["audit"]["warnings"]
    assert any("'turn.failed': an Eve event with no equivalent" in w for w in warnings)
    assert listed["auth/load-profile"]["status"] == "ready"
    assert not {"lib/fmt", "test_audit", "widget", "node_modules/dep/index"} & set(listed)

    # A new session: message:received (the plugin name), then session:start (Eve's name); the
    # ctx is Eve's: the agent of the session key, the channel, the session.
    assert await reply(daemon, "hi", "agent:ops:c1") == [
        "profile auth/load-profile tg hi",
        "audit v1 ops None agent:ops:c1",
    ]
    assert await reply(daemon, "/whoami", "agent:ops:c1") == [
        "profile auth/load-profile tg /whoami",
        "whoami from a plugin-free key",
    ]
    # The `*` hook also hears the daemon's own gateway:startup (250 ms after the channels are
    # up), before or after the first message depending on the machine's load: set it aside.
    every, startup = split_startup(read_jsonl(state_dir / "every.jsonl"))
    keys = [r["key"] for r in every]
    assert keys[:3] == ["message:received", "session:start", "agent:bootstrap"]
    assert "command:whoami" in keys and "message:sent" in keys
    assert {(r["agent"], r["session"], r["hook"]) for r in every} == {
        ("ops", "agent:ops:c1", "audit")
    }
    assert all(r["agent"] == "main" for r in startup), startup
    sent = read_jsonl(state_dir / "sent.jsonl")
    assert "audit v1 ops None agent:ops:c1" in sent

    # hooks check says why the other files are not hooks.
    check = ok(await off_loop(run_cli, "hooks", "check"))
    assert f"not a hook  {hooks / 'lib' / 'fmt.py'}: a helper" in check.stdout
    assert f"not a hook  {hooks / 'test_audit.py'}: a test" in check.stdout
    assert f"not a hook  {hooks / 'node_modules'}/: node_modules is never searched" in check.stdout
    assert f"not a hook  {hooks / 'widget.tsx'}: .tsx is not a hook suffix" in check.stdout

    # A save is live; a broken file fails alone, naming the file and line; fixing it recovers.
    write(hooks, "audit.py", AUDIT_PY.replace("VERSION", "audit v2"))
    await until(
        lambda: starts_with(daemon, "audit v2 ops None {session}", "agent:ops:e"),
        "the edited single-file hook",
    )
    write(hooks, "audit.py", "from gatewayd.hooks import define_hook\nhook = define_hook(\n")

    async def failed() -> bool:
        return bool((await hooks_by_name(daemon))["audit"]["status"] == "failed")

    await until(failed, "audit failed")
    reason = (await hooks_by_name(daemon))["audit"]["reasons"][0]
    assert "audit.py:2: SyntaxError" in reason
    assert await reply(daemon, "hey", "agent:ops:c3") == ["profile auth/load-profile tg hey"]
    write(hooks, "audit.py", "from gatewayd.hooks import define_hook\nh = define_hook(events={})\n")

    async def named() -> bool:
        return "name it `hook`" in (await hooks_by_name(daemon))["audit"]["reasons"][0]

    await until(named, "the wrong export named")
    reasons = (await hooks_by_name(daemon))["audit"]["reasons"]
    assert "define_hook(...) is assigned to 'h'" in reasons[0]
    # A file that no longer calls define_hook is a helper, no longer a hook.
    write(hooks, "audit.py", "hook = {'events': {}}\n")

    async def helper() -> bool:
        return "audit" not in await hooks_by_name(daemon)

    await until(helper, "audit is a helper now")
    write(hooks, "audit.py", AUDIT_PY.replace("VERSION", "audit v3"))
    await until(
        lambda: starts_with(daemon, "audit v3 ops None {session}", "agent:ops:f"),
        "the fixed single-file hook",
    )


AUDIT_TS = """
    import { defineHook, type HookDefinition } from "gatewayd/hooks";
    import { tag } from "./lib/tag.ts";

    type Ctx = {
      agent: { name: string };
      channel: { kind: string | null };
      session: { id: string };
    };

    const hook: HookDefinition = defineHook({
      description: "ts audit",
      events: {
        async "session.started"(event: { messages: string[] }, ctx: Ctx) {
          event.messages.push(`${tag} ${ctx.agent.name} ${ctx.channel.kind} ${ctx.session.id}`);
        },
      },
    });
    export default hook;
"""
EVE_JS = """
    import { appendFileSync } from "node:fs";
    import { defineHook } from "eve/hooks";

    export default defineHook({
      events: {
        "message.received"(event, ctx) {
          event.messages.push(`eve ${ctx.agent.name} ${ctx.channel.kind} ${event.context.content}`);
        },
        "*"(event, ctx) {
          const record = { key: `${event.type}:${event.action}`, session: ctx.session.id };
          appendFileSync(process.env.ELIZA_STATE_DIR + "/js-every.jsonl",
            JSON.stringify(record) + "\\n");
        },
        "turn.completed"() {},
      },
    });
"""
NESTED_MJS = """
    import { defineHook } from "gatewayd/hooks";
    export default defineHook({
      events: { "command:whoami"(event) { event.messages.push("mjs whoami"); } },
    });
"""


@needs_wheel
@anyio_test
async def test_ts_and_js_single_file_hooks_get_eve_ctx_and_a_broken_one_fails_alone(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write(hooks, "audit.ts", AUDIT_TS)
    write(hooks, "lib/tag.ts", 'export const tag: string = "ts v1";\n')
    write(hooks, "eve.js", EVE_JS)
    write(hooks, "auth/load-profile.mjs", NESTED_MJS)
    write(
        hooks,
        "broken.ts",
        'import { defineHook } from "gatewayd/hooks";\n'
        'export default defineHook({ events: { "session.started": 5 } });\n',
    )
    write(
        hooks,
        "plain.js",
        'import { defineHook } from "gatewayd/hooks";\n'
        "export const named = defineHook({ events: {} });\n",
    )
    daemon = await start_gateway(watch=True)
    listed = await hooks_by_name(daemon)
    assert listed["audit"]["status"] == "ready" and listed["audit"]["description"] == "ts audit"
    assert listed["audit"]["events"] == ["session.started"]
    assert listed["eve"]["events"] == ["message.received", "*", "turn.completed"]
    assert listed["auth/load-profile"]["status"] == "ready"
    broken = listed["broken"]
    assert broken["status"] == "failed"
    assert 'events["session.started"] is number, not a function' in broken["reasons"][0]
    assert f"{hooks / 'broken.ts'}:2" in broken["reasons"][0]
    assert listed["plain"]["status"] == "failed"
    assert "not a defineHook({ events }) definition" in listed["plain"]["reasons"][0]

    assert await reply(daemon, "hi", "agent:ops:j1") == [
        "eve ops tg hi",
        "ts v1 ops undefined agent:ops:j1",
    ]
    assert await reply(daemon, "/whoami", "agent:ops:j1") == ["eve ops tg /whoami", "mjs whoami"]
    every, _ = split_startup(read_jsonl(state_dir / "js-every.jsonl"))
    assert [r["key"] for r in every][:3] == ["message:received", "session:start", "agent:bootstrap"]
    assert {r["session"] for r in every} == {"agent:ops:j1"}

    # A save of a helper the hook imports is live too.
    write(hooks, "lib/tag.ts", 'export const tag: string = "ts v2";\n')
    await until(
        lambda: starts_with(daemon, "ts v2 ops undefined {session}", "agent:ops:j"),
        "the edited helper",
    )


@pytest.mark.skipif(
    not ((20, 6, 0) <= (node_version(SYSTEM_NODE) or (0, 0, 0)) < (22, 15, 0)),
    reason="needs a node on PATH with module.register but not module.registerHooks",
)
@anyio_test
async def test_js_single_file_hook_imports_define_hook_on_an_older_node(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    write(state_dir / "hooks", "eve.js", EVE_JS)
    daemon = await start_gateway({"hooks": {"node": {"path": SYSTEM_NODE, "wheel": False}}})
    assert (await hooks_by_name(daemon))["eve"]["status"] == "ready"
    assert await reply(daemon, "yo", "agent:main:n1", channel="sms") == ["eve main sms yo"]


def test_eve_names_map_where_an_equivalent_exists() -> None:
    assert resolve("session.started").keys == ("session:start",)
    assert resolve("message.completed").keys == ("message:sent",)
    assert resolve("turn.completed").keys == ("agent:end",)
    assert resolve("action.result").keys == ("agent:after_tool_call",)
    assert resolve("*").keys == ("*",)
    failed = resolve("turn.failed")
    assert failed.keys == () and "turn.completed" in failed.warnings[0]
    typo = resolve("session.strated")
    assert typo.keys == () and typo.warnings[0].endswith("did you mean session.started?")


def test_define_hook_names_what_is_wrong() -> None:
    with pytest.raises(TypeError, match=r"events\['session.started'\] is a int"):
        define_hook(events={"session.started": 5})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="takes a dict"):
        define_hook(events=[print])  # type: ignore[arg-type]


def test_which_files_are_hooks(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "hook = define_hook(events={})\n")
    write(tmp_path, "Bad Name.ts", "export default defineHook({ events: {} });\n")
    write(tmp_path, "dirhook/HOOK.md", "---\nname: dirhook\n---\n")
    write(tmp_path, "dirhook/extra.py", "hook = define_hook(events={})\n")
    write(tmp_path, "x/y/z.mjs", "export default defineHook({ events: {} });\n")
    write(tmp_path, "x/types.d.ts", "defineHook(\n")
    write(tmp_path, ".hidden/h.py", "hook = define_hook(events={})\n")
    found, notes = scan_files(tmp_path)
    assert [(f.name, f.problem is None) for f in found] == [
        ("Bad Name", False),
        ("a", True),
        ("x/y/z", True),
    ]
    assert "rename the file (e.g. to bad-name.ts)" in (found[0].problem or "")
    declaration = tmp_path / "x" / "types.d.ts"
    assert notes == [f"{declaration}: a test, package or declaration file, never a hook"]


@anyio_test
async def test_single_file_hooks_follow_the_config_and_need_node_like_directory_hooks(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    write(hooks, "auth/load-profile.py", PROFILE_PY)
    write(hooks, "eve.js", EVE_JS)
    write(
        hooks,
        "greet.py",
        """
        from gatewayd.hooks import define_hook

        def greet(event, ctx):
            event.messages.append(f"greet {ctx.config.get('word')} {ctx.int_setting('n', 1)}")

        hook = define_hook(events={"command:greet": greet})
        """,
    )
    config = {
        "hooks": {
            "entries": {"auth/load-profile": {"enabled": False}, "greet": {"word": "hi", "n": 3}}
        }
    }
    daemon = await start_gateway(config, env=env_without_node())
    listed = await hooks_by_name(daemon)
    assert listed["auth/load-profile"]["status"] == "disabled"
    assert listed["eve"]["status"] == "ineligible"
    assert listed["eve"]["reasons"][0].startswith("node not found (needed for eve.js)")
    assert await reply(daemon, "/greet", "agent:main:g1") == ["greet hi 3"]
