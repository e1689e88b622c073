"""JS/TS hooks take ``priority`` and ``background`` as Python hooks do."""

from __future__ import annotations

from pathlib import Path

from tests.node.node_support import write_js_hook
from tests.support.fixtures import StartDaemon
from tests.support.hooks import write_hook_dir
from tests.support.state import wait_until


def test_js_hooks_honour_priority_and_background(
    state_dir: Path, start_daemon: StartDaemon
) -> None:
    hooks = state_dir / "hooks"
    # Load order alone would run a-py first; priorities say z-js, then a-py.
    write_hook_dir(
        hooks,
        "a-py",
        events=["command:order"],
        handler="async def handler(event):\n    event.messages.append('py')\n",
        meta={"priority": 50},
    )
    write_js_hook(
        hooks,
        "z-js",
        {"handler.js": "export default (e) => { e.messages.push('js'); };"},
        events=["command:order"],
        meta={"priority": 5},
    )
    marker = state_dir / "background.txt"
    write_js_hook(
        hooks,
        "later-js",
        {
            "handler.js": f"""
                import {{ writeFileSync }} from "node:fs";
                export default (e) => {{
                  e.messages.push("never in the reply");
                  writeFileSync({str(marker)!r}, "ran");
                }};
            """
        },
        events=["command:order"],
        meta={"background": True},
    )
    daemon = start_daemon()
    with daemon.control() as control:
        reply = control.ok("message", sessionKey="agent:main:o", text="/order")
    assert reply["messages"] == ["js", "py"], reply
    wait_until(marker.exists, timeout=30, what="the background JS hook ran")
    assert daemon.stop() == 0
