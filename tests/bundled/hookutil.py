"""Helpers for calling a bundled hook directly: its compiled handler and a recording logger.

``load_hook(name)`` compiles ``hooks/<name>/handler.py`` into a fresh module (the way the loader
does, so no stale ``__pycache__``); :class:`RecordingLog` stands in for the bound structlog
logger of the ``HookContext`` so a test can see what a hook reported.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "hooks"


class RecordingLog:
    """A stand-in for the bound structlog logger: keeps ``(level, event, fields)``."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str, dict[str, Any]]] = []

    def _record(self, level: str) -> Callable[..., None]:
        def log(event: str, **fields: Any) -> None:
            self.records.append((level, event, fields))

        return log

    def __getattr__(self, level: str) -> Callable[..., None]:
        if level in ("debug", "info", "warning", "error", "exception"):
            return self._record(level)
        raise AttributeError(level)

    def events(self, prefix: str = "") -> list[str]:
        return [event for _, event, _ in self.records if event.startswith(prefix)]

    def find(self, event: str) -> dict[str, Any]:
        matches = [fields for _, name, fields in self.records if name == event]
        assert matches, f"no {event!r} log record in {self.records}"
        return matches[-1]


def load_hook(name: str) -> types.ModuleType:
    """A fresh module compiled from ``hooks/<name>/handler.py``."""
    path = HOOKS / name / "handler.py"
    module = types.ModuleType(f"bundled_{name.replace('-', '_')}", f"hook {name}")
    module.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module
