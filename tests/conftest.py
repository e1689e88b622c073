"""Fixtures shared by the whole suite: an isolated state dir, hook directories, the CLI.

* ``state_dir``: a fresh ``$ELIZA_STATE_DIR`` under ``tmp_path`` (with ``GATEWAYD_*`` overrides
  and ``$GATEWAYD_CONFIG`` removed from the environment, so the host's settings never leak in).
* ``write_hook(root, name, events=[...], handler=..., ...)``: a hook directory on disk.
* ``run_cli(*args)``: ``python -m gatewayd ARGS`` as a real subprocess against ``state_dir``.

Subsystem-specific fixtures live in each test directory's own ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh state dir set as ``$ELIZA_STATE_DIR`` for this test (in-process and children)."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("ELIZA_STATE_DIR", str(state))
    monkeypatch.delenv("GATEWAYD_CONFIG", raising=False)
    for name in list(os.environ):
        if name.upper().startswith("GATEWAYD_"):
            monkeypatch.delenv(name)
    return state


WriteHook = Callable[..., Path]


def write_hook_dir(
    root: Path,
    name: str,
    *,
    events: Sequence[str] | None = ("command:new",),
    handler: str | None = "async def handler(event):\n    event.messages.append({name!r})\n",
    handler_file: str = "handler.py",
    meta: Mapping[str, Any] | None = None,
    frontmatter: Mapping[str, Any] | None = None,
    hook_md: str | None = None,
    dirname: str | None = None,
    namespace: str = "eliza",
) -> Path:
    """Write ``root/<dirname or name>/HOOK.md`` and a handler; return the hook directory.

    ``meta`` is merged into ``metadata.<namespace>`` (after ``events``), ``frontmatter`` into
    the top level. ``hook_md`` replaces the whole HOOK.md. ``handler`` is dedented and
    ``{name!r}`` in it is replaced by the hook name; None writes no handler. A handler file
    without a ``.py`` suffix is made executable (a command hook).
    """
    hook_dir = root / (dirname or name)
    hook_dir.mkdir(parents=True, exist_ok=True)
    if hook_md is None:
        ns: dict[str, Any] = {}
        if events is not None:
            ns["events"] = list(events)
        ns.update(meta or {})
        front: dict[str, Any] = {"name": name, "description": f"test hook {name}"}
        front.update(frontmatter or {})
        front["metadata"] = {namespace: ns}
        # JSON is YAML: the frontmatter below is exactly what the dict says.
        lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()]
        hook_md = "---\n" + "\n".join(lines) + "\n---\n\n# " + name + "\n"
    (hook_dir / "HOOK.md").write_text(hook_md, encoding="utf-8")
    if handler is not None:
        path = hook_dir / handler_file
        path.write_text(textwrap.dedent(handler).replace("{name!r}", repr(name)))
        if not handler_file.endswith(".py"):
            path.chmod(0o755)
    return hook_dir


@pytest.fixture
def write_hook() -> WriteHook:
    """The :func:`write_hook_dir` helper as a fixture."""
    return write_hook_dir


RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_cli(state_dir: Path) -> RunCli:
    """``run_cli(*args, env=None, timeout=60)``: run ``python -m gatewayd`` and capture output."""

    def run(
        *args: str, env: Mapping[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "ELIZA_STATE_DIR": str(state_dir), **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "gatewayd", *args],
            env=full_env,
            cwd=state_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run
