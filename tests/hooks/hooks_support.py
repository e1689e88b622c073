"""Types shared by the hook system's tests and their conftest. The fixtures themselves are in
``conftest.py``; the suite-wide helpers are in :mod:`tests.support`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gatewayd.hooks.loader import LoadResult

Build = Callable[..., LoadResult]


@dataclass(frozen=True)
class Roots:
    """The four hook roots of a test's state dir (bundled redirected to a temp dir)."""

    state: Path
    extra: Path
    bundled: Path
    managed: Path
    workspace: Path
