"""The Node that runs JS hooks: one that runs what OpenClaw's hooks are written for, and quiet
about an ES module in a package.json without ``"type"`` (as many published hooks are)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gatewayd.hooks.node.resolve import PREFERRED, choose, probe, wheel_node

WHEEL = wheel_node()
ON_PATH = shutil.which("node")


@pytest.mark.skipif(
    WHEEL is None or ON_PATH is None or (probe(ON_PATH) or PREFERRED) >= PREFERRED,
    reason="needs the node extra's Node and an older node on PATH (Node 20 here)",
)
def test_the_extras_node_is_preferred_to_an_older_one_on_path_for_js_hooks() -> None:
    # Node 20 on PATH runs plain JS, but OpenClaw's hooks need >= 24.16 (their engines).
    chosen = choose([Path("handler.js")], None, True).binary
    assert chosen is not None and chosen.origin == "gatewayd[node]", chosen
    # A configured Node is still the user's choice.
    configured = choose([Path("handler.js")], ON_PATH, True).binary
    assert configured is not None and configured.origin == "hooks.node.path", configured
    # Without the extra, the older one still runs the JS hooks.
    fallback = choose([Path("handler.js")], None, False).binary
    assert fallback is not None and fallback.origin == "PATH", fallback


@pytest.mark.skipif(WHEEL is None, reason="needs the node extra's Node")
def test_a_typeless_package_json_warning_is_not_printed(tmp_path: Path) -> None:
    assert WHEEL is not None
    chosen = choose([Path("handler.js")], WHEEL, True).binary
    assert chosen is not None
    (tmp_path / "package.json").write_text('{"name": "hook"}')
    (tmp_path / "handler.js").write_text("export default () => 1;\n")
    script = f"import({str(tmp_path / 'handler.js')!r}).then(() => console.log('ok'))"
    plain = subprocess.run(
        [WHEEL, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert "MODULE_TYPELESS_PACKAGE_JSON" in plain.stderr  # what Node says without the flag
    quiet = subprocess.run(
        [WHEEL, *chosen.flags(False), "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (quiet.stdout.strip(), quiet.stderr) == ("ok", "")
