"""What the benchmarks load and run: a throwaway state dir, generated hooks, a config file.

Generated hooks are small and realistic: a HOOK.md with name, description, emoji and events under
``metadata.eliza``, and a ``handler.py`` with a docstring, an import and an ``async def``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from gatewayd.paths import bundled_hooks_dir

HANDLER = '''"""Generated benchmark hook {name}."""

from gatewayd.hooks import HookEvent

REPLY = {reply!r}


async def handler(event: HookEvent) -> None:
    if event.type == "message" or event.action in ("new", "reset"):
        event.messages.append(REPLY)
'''


def hook_md(name: str, events: Sequence[str]) -> str:
    front = {
        "name": name,
        "description": f"Generated benchmark hook {name}",
        "metadata": {"eliza": {"emoji": "🔧", "events": list(events)}},
    }
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n\n# {name}\n\nReplies with a fixed line.\n"


def write_hook(
    root: Path,
    name: str,
    *,
    events: Sequence[str] = ("command:new", "message:received"),
    source: str | None = None,
    reply: str | None = None,
) -> Path:
    """``root/<name>/HOOK.md`` + ``handler.py`` (``source``, or the generated handler)."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "HOOK.md").write_text(hook_md(name, events), encoding="utf-8")
    text = source if source is not None else HANDLER.format(name=name, reply=reply or name)
    (directory / "handler.py").write_text(text, encoding="utf-8")
    return directory


def generate_hooks(root: Path, count: int, **kwargs: Any) -> list[str]:
    """``count`` generated hooks ``bench-0000 ...`` under ``root``; returns their names."""
    names = [f"bench-{i:04d}" for i in range(count)]
    for name in names:
        write_hook(root, name, **kwargs)
    return names


def bundled_hook_names() -> list[str]:
    root = bundled_hooks_dir()
    return sorted(p.name for p in root.iterdir() if (p / "HOOK.md").is_file())


def write_config(
    state: Path,
    *,
    bundled: bool = False,
    settings: dict[str, Any] | None = None,
    entries: dict[str, Any] | None = None,
) -> Path:
    """``<state>/gatewayd.yaml``: the bundled hooks disabled unless ``bundled``, plus ``settings``
    (nested dicts merged at the top) and ``entries`` (``hooks.entries``). Returns its path."""
    all_entries: dict[str, Any] = {}
    if not bundled:
        all_entries.update({name: {"enabled": False} for name in bundled_hook_names()})
    all_entries.update(entries or {})
    data: dict[str, Any] = {"hooks": {"entries": all_entries}}
    for section, values in (settings or {}).items():
        data.setdefault(section, {}).update(values)
    path = state / "gatewayd.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def make_state(base: Path) -> Path:
    """A fresh state dir ``base/state`` with the managed hooks root and a short socket path."""
    state = base / "state"
    (state / "hooks").mkdir(parents=True, exist_ok=True)
    (state / "workspace").mkdir(parents=True, exist_ok=True)
    return state


def env_for(state: Path, extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment a benchmarked gatewayd process runs with: this state dir, no overrides."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAYD_")}
    env.pop("NOTIFY_SOCKET", None)
    env["ELIZA_STATE_DIR"] = str(state)
    env.update(extra)
    return env
