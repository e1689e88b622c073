"""Class 2 of issue 13: no file the user or the filesystem produces stops the daemon.

A real ``gatewayd run``: names that are not UTF-8 under a watched root, FIFOs and devices where
a regular file is expected (config, ``HOOK.md``, bootstrap files, ``BOOT.md``), YAML whose
aliases expand to billions of nodes, and a hook whose import never returns.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until


def test_names_that_are_not_utf8_under_a_watched_root(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain")
    daemon = start_daemon(watch=True)
    daemon.wait_log("watch.started")
    raw_root = os.fsencode(hooks)
    odd_dir = raw_root + b"/caf\xe9"
    os.mkdir(odd_dir)
    with open(odd_dir + b"/HOOK.md", "wb") as f:
        f.write(b'---\nname: odd\nmetadata: {"eliza": {"events": ["command:odd"]}}\n---\n')
    with open(odd_dir + b"/handler.py", "wb") as f:
        f.write(b"async def handler(event):\n    event.messages.append('odd ran')\n")
    open(raw_root + b"/stray-\xfe\xff.txt", "wb").close()
    daemon.wait_log("watch.event_unreadable")

    def odd_replies() -> list[str]:
        with daemon.control() as control:
            reply = control.ok("message", sessionKey="s", text="/odd")
        return [m for m in reply["messages"] if m == "odd ran"]

    assert wait_until(odd_replies, what="the hook in a non-UTF-8 directory to load")
    with daemon.control() as control:
        assert control.ok("ping")["pong"] is True
        status = control.ok("status")["status"]
    assert status["watch"] is not None and status["last_reload"]["result"] == "ok"
    # Reading those files raises in watchfiles too: that must not become a reload loop.
    reloads = status["reloads"]
    time.sleep(3)  # a loop would run several reloads a second
    with daemon.control() as control:
        later = control.ok("status")["status"]["reloads"]
    assert later - reloads <= 1, f"{later - reloads} reloads with nothing changed"
    assert daemon.stop() == 0
