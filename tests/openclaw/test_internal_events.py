"""OpenClaw's internal events under their own names: every one OpenClaw 2026.9.6 fires is an
event here, and a hook subscribed with OpenClaw's name gets it as OpenClaw builds it.

The list of events is OpenClaw's own documentation of 2026.9.6 (``docs/automation/hooks/
event-types.md`` in the installed package): the test reads its table, so an event OpenClaw adds
is an event this gateway has to answer for.
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


def openclaw_internal_events() -> list[str]:
    """The event keys OpenClaw's event-types doc lists (its table's first column)."""
    reference.required(with_node=False)
    doc = reference.package_dir() / "docs" / "automation" / "hooks" / "event-types.md"
    table = doc.read_text(encoding="utf-8").split("## Event types", 1)[1].split("###", 1)[0]
    return re.findall(r"^\| `([a-z]+:[a-z:-]+)` +\|", table, re.MULTILINE)


def test_every_internal_event_openclaw_fires_is_an_event_here() -> None:
    keys = openclaw_internal_events()
    assert len(keys) >= 15, keys  # the table of 2026.9.6 lists 15
    for key in keys:
        spec = EVENTS.get(key) or (EVENTS.get("command") if key.startswith("command:") else None)
        assert spec is not None, f"{key}: OpenClaw fires it, gatewayd's schema lacks it"
        resolution = resolve(key)
        assert resolution.keys == (key,), (key, resolution)  # its own key: type and action kept
        if not spec.fired:  # said on the hook, with why
            (warning,) = resolution.warnings
            assert "never fires it because" in warning, warning


JS_CHECKS_TYPE = """
export default async (event) => {
  if (event.type !== "session" || event.action !== "compact:before") return;
  event.messages.push(`js ${event.type} ${event.action} ${event.context.messageCount}`);
};
"""

PY_CHECKS_TYPE = """
async def handler(event):
    if (event.type, event.action) == ("session", "compact:before"):
        event.messages.append(f"py {event.type} {event.action} {event.context['sessionId']}")
"""


def test_a_hook_on_session_compact_before_gets_openclaws_event(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    hooks = state_dir / "hooks"
    write_js_hook(hooks, "a-js", {"handler.js": JS_CHECKS_TYPE}, events=["session:compact:before"])
    write_hook_dir(
        hooks,
        "b-py",
        events=["session:compact:before"],
        handler=PY_CHECKS_TYPE,
        namespace="openclaw",
    )
    write_hook_dir(
        hooks,
        "c-plugin",
        events=["before_compaction"],
        handler="async def handler(event):\n    event.messages.append(f'plugin {event.key}')\n",
        namespace="openclaw",
    )
    daemon = start_daemon()
    context = {"sessionId": "s-1", "missingSessionKey": False, "messageCount": 40}
    with daemon.control() as control:
        listed = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert listed["a-js"]["status"] == "ready", listed["a-js"]
        assert listed["a-js"]["warnings"] == [], listed["a-js"]
        reply = control.ok(
            "trigger", event="session:compact:before", sessionKey="agent:main:x", context=context
        )
        assert reply["messages"] == [
            "js session compact:before 40",
            "py session compact:before s-1",
        ]
        # The plugin hook is the other event OpenClaw fires for the same compaction.
        plugin = control.ok(
            "trigger", event="agent:before_compaction", sessionKey="agent:main:x", context={}
        )
        assert plugin["messages"] == ["plugin agent:before_compaction"]
        # An OpenClaw plugin-hook name is accepted over the socket as the event it is here.
        by_name = control.ok(
            "trigger", event="before_compaction", sessionKey="agent:main:x", context={}
        )
        assert by_name["messages"] == ["plugin agent:before_compaction"]
    assert daemon.stop() == 0
