"""``config/gatewayd.yaml`` says it lists every key with its default: held to the config models.

Every leaf key of :class:`gatewayd.config.Settings` appears in the file, as a key with its
default value, or, under a map of names (``agents.<id>``, ``hooks.entries.<hookKey>``), in the
commented example of one entry; the file names no key the models lack; and loaded as a config it
is exactly the built-in defaults.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gatewayd.config import Settings, load_config
from tests.test_design_doc import config_keys

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "gatewayd.yaml"
MAPS = {"agents.<id>.": "agents", "hooks.entries.<hookKey>.": "entries"}
LIST = "hooks.handlers[]."
"""A list of mappings: its example is a commented ``- {key: value, ...}`` line."""


def leaves(data: Any, prefix: str = "") -> set[str]:
    if isinstance(data, dict) and data:
        found: set[str] = set()
        for key, value in data.items():
            found |= leaves(value, f"{prefix}{key}.")
        return found
    return {prefix.rstrip(".")}


def commented_example(text: str, map_key: str) -> set[str]:
    """The keys of the commented example entry of ``map_key:`` (``#   name:`` then ``#     key:
    value`` lines): the comment block right after the key's line, else the one right before."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(rf"\s*{map_key}:", line))

    def block(rows: list[str]) -> set[str]:
        keys: set[str] = set()
        for line in rows:
            if not line.lstrip().startswith("#"):
                break
            if match := re.match(r"\s*#\s{4,}(\w+):", line):
                keys.add(match[1])
        return keys

    return block(lines[at + 1 :]) or block(lines[:at][::-1])


def test_the_example_config_lists_every_key_and_no_other() -> None:
    text = EXAMPLE.read_text()
    written = leaves(yaml.safe_load(text))
    model = config_keys(Settings)
    missing = []
    for key in sorted(model):
        prefix = next((p for p in MAPS if key.startswith(p)), None)
        if key.startswith(LIST):
            if not re.search(rf"#\s+- {{.*\b{key[len(LIST) :]}:", text):
                missing.append(key)
        elif prefix is not None:
            if key[len(prefix) :] not in commented_example(text, MAPS[prefix]):
                missing.append(key)
        elif key not in written:
            missing.append(key)
    assert not missing, f"config/gatewayd.yaml: add each of {missing} with its default"
    maps = ("agents", "hooks.entries", "hooks.handlers")  # empty by default: named above
    unknown = sorted(k for k in written if k not in model and k not in maps)
    assert not unknown, f"config/gatewayd.yaml names keys the config does not have: {unknown}"


def test_the_example_config_is_the_built_in_defaults(tmp_path: Path) -> None:
    config = load_config(str(EXAMPLE))
    assert config.settings == Settings(), "config/gatewayd.yaml holds a value that is no default"
