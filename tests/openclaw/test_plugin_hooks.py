"""OpenClaw's plugin hooks: each of its 2026.9.6 names runs here or says why it never does, and
the results OpenClaw lets them return merge as OpenClaw merges them, for Python and JS alike.

The names are OpenClaw's own ``PluginHookName`` type, read from the installed package's type
declarations, so a name it adds is one this gateway has to answer for.
"""

from __future__ import annotations

import re
from pathlib import Path

from gatewayd.hooks.schema import EVENTS
from gatewayd.hooks.vocabulary import resolve
from tests.node.node_support import write_js_hook
from tests.openclaw import reference
from tests.support.fixtures import StartDaemon
from tests.support.hooks import write_hook_dir


def plugin_hook_names() -> list[str]:
    """``PluginHookName`` of the installed OpenClaw: every name its plugins may hook."""
    reference.required(with_node=False)
    for path in sorted((reference.package_dir() / "dist").glob("*.d.ts")):
        text = path.read_text(encoding="utf-8")
        found = re.search(r"^type PluginHookName = (.*);$", text, re.MULTILINE)
        if found:
            return re.findall(r'"([a-z_]+)"', found[1])
    raise AssertionError("no PluginHookName type in the installed OpenClaw's dist/*.d.ts")


def test_every_plugin_hook_name_runs_here_or_says_why_not() -> None:
    names = plugin_hook_names()
    assert len(names) == 42, names  # 2026.9.6 has 42
    for name in names:
        resolution = resolve(name)
        if resolution.keys:
            (key,) = resolution.keys
            assert EVENTS[key].fired, (name, key)
            assert resolution.warnings == (), (name, resolution.warnings)
            assert resolve(name.replace("_", "-")).keys == (key,)
        else:
            (warning,) = resolution.warnings
            assert "an OpenClaw plugin hook that never runs here because" in warning, warning


PY_OVERRIDE = """
async def handler(event):
    return {"modelOverride": "py-model"}
"""
JS_OVERRIDE = """
export default async (event) => ({
  modelOverride: "js-model",
  providerOverride: `js-provider for ${event.context.prompt}`,
});
"""


def test_model_and_provider_override_first_handler_wins_python_and_js(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    hooks = state_dir / "hooks"
    write_hook_dir(
        hooks,
        "a-py",
        events=["before_model_resolve", "before_agent_start"],
        handler=PY_OVERRIDE,
        namespace="openclaw",
        meta={"priority": 10},
    )
    write_js_hook(
        hooks,
        "b-js",
        {"handler.js": JS_OVERRIDE},
        events=["before_model_resolve", "before_agent_start"],
        meta={"priority": 20},
    )
    daemon = start_daemon()
    with daemon.control() as control:
        listed = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert listed["b-js"]["status"] == "ready", listed["b-js"]
        for event in ("before_model_resolve", "agent:before_model_resolve", "before_agent_start"):
            reply = control.ok(
                "trigger", event=event, sessionKey="agent:main:m", context={"prompt": "hi"}
            )
            # OpenClaw's firstDefined: the Python hook (priority 10) set the model, the JS
            # hook after it only the provider.
            assert reply["result"] == {
                "modelOverride": "py-model",
                "providerOverride": "js-provider for hi",
            }, (event, reply)
    assert daemon.stop() == 0
