"""OpenClaw's own bundled hooks, run from an installed OpenClaw as a user moving over would.

The user's state dir holds ``node_modules/openclaw`` (``npm install openclaw``) and
``hooks.load.extraDirs`` names its ``dist/bundled``. Their handlers import sibling chunks of
the 7,300-file ``dist``: boot-md and session-memory 4,300 modules (36 MB), 4 to 5 s of one
CPU, so on a loaded machine their imports take 20 to 40 s by the clock; they still load
(``imports.busy_left``: the import bound is on CPU time).

The package is the differential test's cached install (``reference``); rather than a second
650 MB install, the state dir gets ``node_modules/openclaw`` with its ``package.json`` and
``dist/bundled`` copied and every other ``dist`` entry a symlink to the cache (Node follows
them; gatewayd checks only the handler file, which is a real file in the hook directory).
Without the package the test skips, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw import reference
from tests.support.fixtures import StartGateway
from tests.support.state import eventually

pytestmark = pytest.mark.timeout(600)

BUNDLED = (
    "boot-md",
    "bootstrap-extra-files",
    "command-logger",
    "compaction-notifier",
    "session-memory",
)
"""OpenClaw 2026.9.6's bundled hooks (``dist/bundled``)."""


def openclaw_state(state: Path) -> Path:
    """A state dir whose ``node_modules/openclaw`` is the cached package (see the module
    docstring) and whose config loads its bundled hooks; returns the bundled hooks' root."""
    if not reference.installed():
        pytest.skip(
            f"OpenClaw {reference.VERSION} is not installed at {reference.package_dir()} "
            "(python -m tests.openclaw.reference installs it)"
        )
    package = reference.package_dir()
    target = state / "node_modules" / "openclaw"
    (target / "dist").mkdir(parents=True)
    shutil.copy(package / "package.json", target / "package.json")
    for entry in os.scandir(package / "dist"):
        if entry.name == "bundled":
            shutil.copytree(entry.path, target / "dist" / "bundled")
        else:
            os.symlink(entry.path, target / "dist" / entry.name)
    (state / "gatewayd.yaml").write_text(
        'hooks:\n  load:\n    extraDirs: ["node_modules/openclaw/dist/bundled"]\n',
        encoding="utf-8",
    )
    return target / "dist" / "bundled"


def test_openclaws_bundled_hooks_load_from_an_installed_openclaw(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = openclaw_state(state)
    env = {**os.environ, "ELIZA_STATE_DIR": str(state), "OPENCLAW_STATE_DIR": str(tmp_path / "oc")}
    env.pop("GATEWAYD_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "gatewayd", "hooks", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
        stdin=subprocess.DEVNULL,
    )
    report = json.loads(done.stdout)
    extra = {h["name"]: h for h in report["hooks"] if h["source"] == "extra"}
    assert sorted(extra) == sorted(BUNDLED), report
    for name, hook in extra.items():
        assert hook["path"] == str(root / name)
        assert hook["status"] == "ready", hook
    assert done.returncode == 0, done.stderr[-3000:]


def memory_text(workspace: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(workspace.glob("memory/*.md")))


@pytest.mark.anyio
async def test_openclaws_bundled_hooks_produce_their_effects(
    state_dir: Path, start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each does in OpenClaw, it does here: command-logger appends the command to
    ``$OPENCLAW_STATE_DIR/logs/commands.log``, session-memory writes the ended session's
    conversation (``previousSessionMemory``) to ``<workspace>/memory/``, compaction-notifier
    replies to ``session:compact:before``, bootstrap-extra-files adds the files its entry's
    ``paths`` match. boot-md runs BOOT.md through OpenClaw's own agent runner, which no other
    gateway has (docs/hooks.md)."""
    openclaw_state(state_dir)
    oc_state = state_dir / "openclaw-state"
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(oc_state))
    workspace = state_dir / "workspace"
    (workspace / "packages" / "web").mkdir(parents=True)
    (workspace / "packages" / "web" / "AGENTS.md").write_text("# web agents\n", encoding="utf-8")
    daemon = await start_gateway(
        {
            "hooks": {
                "load": {"extraDirs": ["node_modules/openclaw/dist/bundled"]},
                "entries": {"bootstrap-extra-files": {"paths": ["packages/*/AGENTS.md"]}},
            }
        }
    )
    async with daemon.control() as ctl:
        await ctl.ok("message", sessionKey="agent:main:main", text="remember the blue teapot")
        await ctl.ok("message", sessionKey="agent:main:main", text="/new")
        compact = await ctl.ok(
            "trigger",
            event="session:compact:before",
            sessionKey="agent:main:main",
            context={"messageCount": 12},
        )
        files = (await ctl.ok("bootstrap", sessionKey="agent:main:main"))["bootstrapFiles"]
    assert compact["messages"] == [
        "🧹 Compacting context (12 messages) so I can continue without losing history…"
    ]
    assert [f["path"] for f in files if f["path"].endswith("web/AGENTS.md")], files
    logged = [
        json.loads(line) for line in (oc_state / "logs" / "commands.log").read_text().splitlines()
    ]
    assert [(e["action"], e["sessionKey"]) for e in logged] == [("new", "agent:main:main")]
    # session-memory writes in the background of its call (as in OpenClaw)
    await eventually(lambda: 'user: "remember the blue teapot"' in memory_text(workspace))
