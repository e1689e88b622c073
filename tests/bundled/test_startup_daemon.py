"""boot-md and bootstrap-extra-files in a real gateway (in-process); bundled hooks turned off."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.inprocess import InProcess
from tests.support.state import eventually

from .conftest import MakeDaemon, install_recorder, received

pytestmark = pytest.mark.anyio


def boot_messages(daemon: InProcess) -> list[dict[str, Any]]:
    return [r for r in received(daemon.state) if r["sessionKey"] == "agent:main:boot"]


async def test_boot_md_is_delivered_once_per_start_as_an_inbound_message(
    make_daemon: MakeDaemon,
) -> None:
    setup = make_daemon()
    install_recorder(setup.workspace)
    (setup.workspace / "BOOT.md").write_text("Check the inbox.\nThen say hi.\n")
    daemon = await setup.start()

    ran = await daemon.wait_log("boot_md.ran")
    assert ran["bytes"] == 30 and ran["hook"] == "boot-md"
    await eventually(lambda: bool(boot_messages(daemon)), what="BOOT.md to arrive as a message")
    assert boot_messages(daemon) == [
        {
            "from": "boot-md",
            "content": "Check the inbox.\nThen say hi.\n",
            "channelId": "boot",
            "sessionKey": "agent:main:boot",
        }
    ]
    # a reload is not a start: nothing is delivered again
    await daemon.request("reload")
    await daemon.send("after the reload")
    assert len(boot_messages(daemon)) == 1

    await daemon.stop()
    daemon = await setup.start()  # a new process: delivered again
    await daemon.wait_log("boot_md.ran")
    await eventually(lambda: len(boot_messages(daemon)) == 2, what="the second start's delivery")


@pytest.mark.parametrize(("content", "reason"), [(None, "missing"), (" \n\t\n", "empty")])
async def test_boot_md_missing_or_blank_is_skipped(
    make_daemon: MakeDaemon, content: str | None, reason: str
) -> None:
    setup = make_daemon()
    install_recorder(setup.workspace)
    if content is not None:
        (setup.workspace / "BOOT.md").write_text(content)
    daemon = await setup.start()
    skipped = await daemon.wait_log("boot_md.skipped")
    assert skipped["reason"] == reason
    assert skipped["path"] == str(daemon.workspace / "BOOT.md")
    await daemon.send("a later message")  # dispatched after gateway:startup's handlers
    assert boot_messages(daemon) == []
    assert daemon.events("boot_md.ran") == daemon.events("boot_md.failed") == []


def workspace_for_bootstrap(ws: Path, outside: Path) -> None:
    (ws / "AGENTS.md").write_text("root agents")
    (ws / "MEMORY.md").write_text("memory")
    for rel, text in {
        "packages/api/AGENTS.md": "api",
        "packages/web/AGENTS.md": "web",
        "packages/web/TOOLS.md": "web tools",
        "packages/web/README.md": "not a bootstrap name",
        "packages/big/TOOLS.md": "t" * (2 * 1024 * 1024 + 1),
        "docs/deep/HEARTBEAT.md": "beat",
    }.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    outside.mkdir()
    (outside / "SOUL.md").write_text("a secret outside the workspace")
    (ws / "packages/evil").mkdir()
    (ws / "packages/evil/SOUL.md").symlink_to(outside / "SOUL.md")


def rel_paths(daemon: InProcess, files: list[dict[str, Any]]) -> list[str]:
    return [os.path.relpath(f["path"], daemon.workspace) for f in files]


async def test_bootstrap_op_returns_the_extended_list(make_daemon: MakeDaemon) -> None:
    setup = make_daemon(
        {"bootstrap-extra-files": {"paths": ["packages/*/*.md"], "files": ["docs/**/*.md"]}}
    )
    workspace_for_bootstrap(setup.workspace, setup.state / "outside")
    daemon = await setup.start()

    files = (await daemon.request("bootstrap", sessionKey="agent:main:main"))["bootstrapFiles"]
    assert rel_paths(daemon, files) == [
        "AGENTS.md",
        "MEMORY.md",
        "packages/api/AGENTS.md",
        "packages/web/AGENTS.md",
        "packages/web/TOOLS.md",
        "docs/deep/HEARTBEAT.md",
    ]
    assert files[2] == {
        "name": "AGENTS.md",
        "path": str(daemon.workspace / "packages/api/AGENTS.md"),
        "content": "api",
        "missing": False,
    }

    def refused_lines() -> list[dict[str, Any]] | None:
        lines = daemon.events("bootstrap_extra_files.refused")
        return lines if len(lines) >= 3 else None

    # Logged before the reply, but read from the daemon's stderr on a thread of its own: wait.
    lines = await eventually(refused_lines, what="three bootstrap_extra_files.refused lines")
    refused = {rel_paths(daemon, [r])[0]: r["reason"] for r in lines}
    assert refused.keys() == {
        "packages/big/TOOLS.md",
        "packages/evil/SOUL.md",
        "packages/web/README.md",
    }
    assert "2 MiB" in refused["packages/big/TOOLS.md"]
    assert "outside the workspace" in refused["packages/evil/SOUL.md"]
    assert "not a bootstrap file name" in refused["packages/web/README.md"]

    sub = (await daemon.request("bootstrap", sessionKey="agent:main:subagent:42"))["bootstrapFiles"]
    assert rel_paths(daemon, sub) == [
        "AGENTS.md",
        "packages/api/AGENTS.md",
        "packages/web/AGENTS.md",
        "packages/web/TOOLS.md",
    ]
    cron = (await daemon.request("bootstrap", sessionKey="cron-ish:cron:nightly"))["bootstrapFiles"]
    assert rel_paths(daemon, cron) == rel_paths(daemon, sub)


async def test_a_recursive_glob_does_not_follow_links_back_up(make_daemon: MakeDaemon) -> None:
    """glob's ``**`` follows symlinked directories: with two links back up (``a -> .``,
    ``b -> .``) ``**/TOOLS.md`` walked 2**40 paths, past the hook's timeout, on a thread that
    ran on (and grew) for ever; each ``bootstrap`` started one more. ``**`` no longer descends
    into a symlinked directory."""
    setup = make_daemon({"bootstrap-extra-files": {"paths": ["**/TOOLS.md"], "timeoutMs": 10_000}})
    (setup.workspace / "docs").mkdir()
    (setup.workspace / "docs/TOOLS.md").write_text("tools")
    for link in ("a", "b", "docs/up"):
        (setup.workspace / link).symlink_to(setup.workspace, target_is_directory=True)
    daemon = await setup.start()
    for _ in range(2):
        files = (await daemon.request("bootstrap", sessionKey="agent:main:main"))["bootstrapFiles"]
        assert rel_paths(daemon, files) == ["docs/TOOLS.md"]
    hooks = {h["name"]: h for h in (await daemon.request("hooks"))["hooks"]}
    assert hooks["bootstrap-extra-files"]["stats"]["timeouts"] == 0
    assert await daemon.stop() == 0


async def test_every_bundled_hook_can_be_turned_off(make_daemon: MakeDaemon) -> None:
    off = {"enabled": False}
    setup = make_daemon(
        {
            "command-logger": off,
            "session-memory": off,
            "boot-md": off,
            "bootstrap-extra-files": {**off, "paths": ["packages/*/*.md"]},
        }
    )
    workspace_for_bootstrap(setup.workspace, setup.state / "outside")
    (setup.workspace / "BOOT.md").write_text("boot")
    install_recorder(setup.workspace)
    daemon = await setup.start()

    await daemon.send("some conversation")
    await daemon.send("/new")
    files = (await daemon.request("bootstrap", sessionKey="agent:main:main"))["bootstrapFiles"]
    assert rel_paths(daemon, files) == ["AGENTS.md", "MEMORY.md"]  # the gateway's own list
    assert not (daemon.state / "logs" / "commands.log").exists()
    assert not (daemon.workspace / "memory").exists()
    assert boot_messages(daemon) == []
    hooks = {h["name"]: h for h in (await daemon.request("hooks"))["hooks"]}
    for name in ("command-logger", "session-memory", "boot-md", "bootstrap-extra-files"):
        assert (hooks[name]["source"], hooks[name]["status"]) == ("bundled", "disabled")


async def test_gatewayd_bootstrap_command(make_daemon: MakeDaemon) -> None:
    setup = make_daemon({"bootstrap-extra-files": {"paths": "packages/api/AGENTS.md"}})
    workspace_for_bootstrap(setup.workspace, setup.state / "outside")
    daemon = await setup.start()

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return await off_loop(gatewayd, daemon.state, "bootstrap", *args)

    done = await cli("--session", "agent:main:main", "--json")
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["bootstrapFiles"]
    assert rel_paths(daemon, files) == ["AGENTS.md", "MEMORY.md", "packages/api/AGENTS.md"]

    done = await cli("--session", "agent:main:main")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "bootstrap files for agent:main:main: 3"
    assert lines[3].split() == [
        "AGENTS.md",
        "3",
        "B",
        str(daemon.workspace / "packages/api/AGENTS.md"),
    ]

    await daemon.stop()
    done = await cli("--session", "agent:main:main")
    assert done.returncode == 1
    assert done.stderr.startswith("error: gatewayd is not running")
