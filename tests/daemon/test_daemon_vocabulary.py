"""One vocabulary: a hook's status word is the same in ``status``, ``reload``,
``hooks list`` and ``hooks check``, and a reload that leaves a hook failed or invalid exits 1
like ``hooks check`` does. Real ``gatewayd`` subprocesses against a real gateway (in-process).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import gatewayd, off_loop
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook

EXPECTED = {"broken": "failed", "bad": "invalid", "off": "disabled", "idle": "skipped"}

pytestmark = pytest.mark.anyio


def words(text: str) -> dict[str, str]:
    """``{hook: status}`` from lines ``  STATUS  name: reasons`` (status / reload output)."""
    found = {}
    for line in text.splitlines():
        if match := re.match(r"^  ([a-z]+) +([a-z-]+): ", line):
            found[match.group(2)] = match.group(1)
    return found


async def test_status_words_and_exit_codes_agree(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "fine")
    write_hook(hooks, "broken", handler="raise RuntimeError('boom at import')\n")
    write_hook(
        hooks,
        "bad",
        hook_md="---\nname: bad\nmetadata: {eliza: {events: [x], timeoutMs: soon}}\n---\n",
    )
    write_hook(hooks, "off")
    write_hook(hooks, "idle", events=None)
    daemon = await start_gateway({"hooks": {"entries": {"off": {"enabled": False}}}})

    status = await off_loop(gatewayd, state_dir, "status")
    assert status.returncode == 0, status.stderr
    assert {k: v for k, v in words(status.stdout).items() if k in EXPECTED} == EXPECTED
    assert "(1 invalid, 1 disabled, 1 skipped, 1 failed)" in status.stdout

    listed = json.loads((await off_loop(gatewayd, state_dir, "hooks", "list", "--json")).stdout)
    assert {h["name"]: h["status"] for h in listed["hooks"] if h["name"] in EXPECTED} == EXPECTED

    check = await off_loop(gatewayd, state_dir, "hooks", "check")
    assert check.returncode == 1
    for name, word in EXPECTED.items():
        assert re.search(rf"^{word} +{name} ", check.stdout, re.M), (name, check.stdout)

    reload = await off_loop(gatewayd, state_dir, "reload")
    assert reload.returncode == 1, reload.stderr
    assert {k: v for k, v in words(reload.stdout).items() if k in EXPECTED} == EXPECTED
    assert reload.stderr == (
        "error: the reload went through, but 2 hooks failed to load: bad (invalid), "
        "broken (failed) (fix them and reload again; gatewayd hooks check shows why)\n"
    )
    as_json = await off_loop(gatewayd, state_dir, "reload", "--json")
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert document["ok"] is False
    assert {h["name"]: h["status"] for h in document["notReady"]} == EXPECTED

    # Fixed: the reload says so and exits 0; the remaining hooks keep their words.
    write_hook(hooks, "broken")
    write_hook(hooks, "bad")
    fixed = await off_loop(gatewayd, state_dir, "reload")
    assert fixed.returncode == 0, fixed.stderr
    assert words(fixed.stdout) == {"off": "disabled", "idle": "skipped"}
    first = fixed.stdout.splitlines()[0]
    assert re.fullmatch(
        r"reloaded: \d+ hooks registered of \d+ discovered \(1 disabled, 1 skipped\)", first
    )
    assert await daemon.stop() == 0
