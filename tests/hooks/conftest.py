"""Fixtures for the hook system's unit tests: isolated hook roots and a one-call load.

``roots`` points the bundled root at an empty temp dir (instead of the checkout's ``hooks/``) so
each test sees only the hooks it writes; ``build(config)`` writes ``config`` (a dict) as the
state dir's ``gatewayd.yaml`` and builds it with the test's own ``HookLoader`` (``loader``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gatewayd.paths
from gatewayd.config import Config, load_config
from gatewayd.hooks.loader import HookLoader, LoadResult
from tests.hooks.hooks_support import Build, Roots


@pytest.fixture
def roots(state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Roots:
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    monkeypatch.setattr(gatewayd.paths, "bundled_hooks_dir", lambda: bundled)
    return Roots(
        state=state_dir,
        extra=state_dir / "extra",
        bundled=bundled,
        managed=state_dir / "hooks",
        workspace=state_dir / "workspace" / "hooks",
    )


def write_config(state: Path, config: dict[str, Any]) -> None:
    # JSON is YAML.
    (state / "gatewayd.yaml").write_text(json.dumps(config), encoding="utf-8")


@pytest.fixture
def config_for(roots: Roots) -> Callable[..., Config]:
    """``config_for(config_dict=None)``: write it (if given) and load it."""

    def make(config: dict[str, Any] | None = None) -> Config:
        if config is not None:
            write_config(roots.state, config)
        return load_config()

    return make


@pytest.fixture
def loader() -> Iterator[HookLoader]:
    """A hook loader of the test's own (its importer and manifest cache), closed after it."""
    own = HookLoader()
    yield own
    own.close()


@pytest.fixture
def build(config_for: Callable[..., Config], loader: HookLoader) -> Build:
    """``build(config_dict=None)``: write the config (if given) and build it with ``loader``."""

    def run(config: dict[str, Any] | None = None) -> LoadResult:
        return loader.build(config_for(config).load_spec())

    return run
