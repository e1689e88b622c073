"""A running ``gatewayd run`` picks up what ``hooks new``, ``hooks install`` (copy and link) and
``hooks uninstall`` do, by itself (its watcher), and answers with the new hooks.

Each step waits, with a generous bound, until the daemon lists the hook as ready (or gone), then
sends the message that fires it and checks the reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.archives import make_tar, write_tree
from tests.support.cli import RunCli, ok
from tests.support.control import Control
from tests.support.fixtures import StartDaemon
from tests.support.hooks import hook_files, hook_md
from tests.support.state import wait_until


def statuses(control: Control) -> dict[str, str]:
    return {h["name"]: h["status"] for h in control.ok("hooks")["hooks"]}


def until_status(control: Control, name: str, status: str | None) -> None:
    wait_until(
        lambda: statuses(control).get(name) == status,
        timeout=30,
        what=f"{name} to be {status or 'gone'}: {statuses(control)}",
    )


def reply(control: Control, text: str) -> list[Any]:
    messages: list[Any] = control.ok("message", sessionKey="live", text=text)["messages"]
    return messages


def test_scaffolded_installed_and_linked_hooks_answer_live(
    start_daemon: StartDaemon, state_dir: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    (state_dir / "workspace").mkdir()
    gw = start_daemon({"gateway": {"startupHookDelayMs": 0}}, watch=True)
    with gw.control() as control:
        reply(control, "hello")  # start the session, so later replies hold only the command's

        ok(run_cli("hooks", "new", "live-py"))
        until_status(control, "live-py", "ready")
        assert reply(control, "/live-py") == ["live-py saw command:live-py"]

        ok(run_cli("hooks", "new", "live-cmd", "--command", "--events", "command:c"))
        until_status(control, "live-cmd", "ready")
        assert reply(control, "/c") == ["live-cmd saw command:c"]

        # TypeScript and JavaScript, as scaffolded: run by the Node worker as written.
        ok(run_cli("hooks", "new", "live-ts", "--lang", "ts"))
        ok(run_cli("hooks", "new", "live-js", "--lang", "js"))
        until_status(control, "live-ts", "ready")
        until_status(control, "live-js", "ready")
        assert reply(control, "/live-ts") == ["live-ts saw command:live-ts"]
        assert reply(control, "/live-js") == ["live-js saw command:live-js"]

        archive = make_tar(
            tmp_path / "packed.tgz",
            {
                "HOOK.md": hook_md("packed", ["command:packed"]),
                "handler": "#!/bin/sh\necho boxed\n",
            },
            executable=["handler"],
        )
        ok(run_cli("hooks", "install", str(archive)))
        until_status(control, "packed", "ready")
        assert reply(control, "/packed") == ["boxed"]

        linked = write_tree(state_dir / "dev" / "linked", hook_files("linked", ["command:ln"]))
        ok(run_cli("hooks", "install", str(linked), "--link"))
        until_status(control, "linked", "ready")
        assert reply(control, "/ln") == ["linked says hi"]

        ok(run_cli("hooks", "uninstall", "packed", "linked"))
        until_status(control, "packed", None)
        until_status(control, "linked", None)
        assert reply(control, "/packed") == []
        assert reply(control, "/ln") == []
        assert reply(control, "/live-py") == ["live-py saw command:live-py"]
    said = [(e["hook"], e["text"]) for e in gw.events("hook.console")]
    assert ("live-ts", "live-ts: command:live-ts on live") in said, said
    assert gw.events("hook.error") == []
    assert gw.events("reload.refused") == []
