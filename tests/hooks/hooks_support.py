"""Types shared by the hook tests and their conftest (importable: pytest puts this dir on
sys.path). The fixtures themselves are in ``conftest.py`` files."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gatewayd.hooks.loader import LoadResult

WriteHook = Callable[..., Path]
RunCli = Callable[..., subprocess.CompletedProcess[str]]
Build = Callable[..., LoadResult]


@dataclass(frozen=True)
class Roots:
    """The four hook roots of a test's state dir (bundled redirected to a temp dir)."""

    state: Path
    extra: Path
    bundled: Path
    managed: Path
    workspace: Path
