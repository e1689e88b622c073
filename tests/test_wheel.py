"""The wheel ships the bundled hooks and the default config, and an installed gatewayd finds them.

Builds a wheel from a copy of the source tree (with a fixture hook added to the copy's ``hooks/``,
so the test does not depend on which bundled hooks exist yet), installs it into a fresh venv,
and runs the installed ``gatewayd`` from outside the checkout. The venv gets the dependencies
by a ``.pth`` line pointing at this test run's site-packages instead of downloading them; the
``gatewayd`` package itself can only come from the wheel (the checkout is not on its path).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.wheels import build_wheel, copy_source, run

FIXTURE_HOOK = "wheel-fixture-hook"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel built from a copy of this checkout installed; its bin dir."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = copy_source(tmp / "src")
    hook = src / "hooks" / FIXTURE_HOOK
    hook.mkdir(parents=True)
    (hook / "HOOK.md").write_text(
        f"---\nname: {FIXTURE_HOOK}\ndescription: shipped in the wheel\n"
        "metadata: {eliza: {events: ['command:new'], emoji: '📦'}}\n---\n"
    )
    (hook / "handler.py").write_text(
        "from .reply import TEXT\nasync def handler(event):\n    event.messages.append(TEXT)\n"
    )
    (hook / "reply.py").write_text("TEXT = 'from the wheel'\n")

    wheel = build_wheel(src, tmp / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert f"gatewayd/_bundled/hooks/{FIXTURE_HOOK}/HOOK.md" in names
    assert f"gatewayd/_bundled/hooks/{FIXTURE_HOOK}/reply.py" in names
    assert "gatewayd/_bundled/gatewayd.yaml" in names
    # The Node side of JS/TS hooks ships inside the package.
    assert {"gatewayd/hooks/node/worker.mjs", "gatewayd/hooks/node/warm.ts"} <= names

    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "--quiet", wheel)  # fmt: skip
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    deps = sysconfig.get_paths()["purelib"]
    (Path(site.stdout.strip()) / "_test_deps.pth").write_text(deps + "\n")
    return venv / "bin"


@pytest.mark.slow
def test_installed_gatewayd_lists_the_bundled_hook(installed: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("GATEWAYD_") and k != "PYTHONPATH"
    }
    env["ELIZA_STATE_DIR"] = str(state)
    where = run(
        installed / "python", "-c",
        "import gatewayd, gatewayd.paths as p; "
        "print(gatewayd.__file__); print(p.bundled_hooks_dir()); print(p.default_config_file())",
        env=env, cwd=tmp_path,
    ).stdout.split()  # fmt: skip
    package_dir = Path(where[0]).parent
    assert package_dir.is_relative_to(installed.parent), "gatewayd was not imported from the wheel"
    assert Path(where[1]) == package_dir / "_bundled" / "hooks"
    assert Path(where[2]) == package_dir / "_bundled" / "gatewayd.yaml"

    listing = json.loads(
        run(installed / "gatewayd", "hooks", "list", "--json", env=env, cwd=tmp_path).stdout
    )
    (hook,) = [h for h in listing["hooks"] if h["name"] == FIXTURE_HOOK]
    assert hook["source"] == "bundled"
    assert hook["status"] == "ready"  # imported from site-packages, relative import included
    assert hook["path"] == str(package_dir / "_bundled" / "hooks" / FIXTURE_HOOK)
    assert {h["source"] for h in listing["hooks"]} == {"bundled"}
    table = run(installed / "gatewayd", "hooks", "list", env=env, cwd=tmp_path).stdout
    assert any(
        line.split() == ["ready", "📦", FIXTURE_HOOK, "command:new", "bundled"]
        for line in table.splitlines()
    )
