"""A HOOK.md's frontmatter read as OpenClaw 2026.9.6 reads it, and its metadata block.

OpenClaw never refuses a hook for its frontmatter: the block between the opening ``---`` line
and the next ``---`` line is parsed as YAML, and when that fails (a syntax error, a key written
twice) it is read line by line instead: each top-level ``key: value`` line is a string, and a
key with an empty value takes the indented lines below it. Every top-level value becomes a
string (a mapping or list as its JSON, a scalar as JavaScript's ``String()`` writes it,
trimmed), except that a mapping or list written on its key's own line with a colon in it keeps
that line's text. ``metadata`` is then that text read as JSON, else JSON5, and the hook's block
is the first of its namespaces holding an object. So ``metadata: {"openclaw": {...}}`` and a
nested YAML block read alike, while ``metadata: {openclaw: {events: [command:new]}}`` (YAML
flow style, not JSON5) is no metadata at all, and so is nested YAML once the line-by-line
reading had to take over.

:func:`read_frontmatter` returns both readings: OpenClaw's (what decides which hook runs) and
the YAML structure when YAML could read the block (gatewayd's own namespaces, ``eliza`` and
``milady``, are read from it, as docs/design.md section 2 says), with one note per place where
the line-by-line reading took over.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gatewayd.yamlio import YamlError, load_yaml

_OPENING: Final = re.compile(r"^---[^\S\n]*\n")
_CLOSING: Final = re.compile(r"(?:^|\n)---[^\S\n]*(?:\n|$)")
_LINE_KEY: Final = re.compile(r"^([A-Za-z0-9_-]+):\s*(.*)$")
_INDENTED: Final = re.compile(r"^[ \t]")


class NoFrontmatter(ValueError):
    """The text has no frontmatter block (OpenClaw reads it as an empty one)."""


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """One HOOK.md's frontmatter: OpenClaw's reading, the YAML structure, and notes."""

    values: Mapping[str, str]
    """Each top-level key's value as OpenClaw keeps it: a string."""
    yaml: Mapping[str, Any] | None
    """The YAML structure, ``None`` when YAML could not read the block (``yaml_error`` says
    why) or it is no mapping."""
    yaml_error: str | None = None
    body: str = ""
    line_of: Mapping[str, int] = field(default_factory=dict)
    """The file line of each top-level key (for messages)."""


def js_string(value: Any) -> str:
    """``String(value)`` as JavaScript writes a JSON-like value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``, compact; values JSON has no form for become strings."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def split(text: str) -> tuple[str, str, int]:
    """``(block, body, first line of the block)``; raises :class:`NoFrontmatter`, whose message
    says why (no opening line, or an opening line never closed)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    opening = _OPENING.match(text)
    if opening is None:
        raise NoFrontmatter("no YAML frontmatter: the file must start with a '---' line")
    tail = text[opening.end() :]
    closing = _CLOSING.search(tail)
    if closing is None:
        raise NoFrontmatter("the frontmatter opened on line 1 is never closed by a '---' line")
    return tail[: closing.start()], tail[closing.end() :], 2


def line_values(block: str) -> tuple[dict[str, str], dict[str, int]]:
    """OpenClaw's line-by-line reading: ``{key: text}`` of the top-level ``key: value`` lines,
    and each key's line within ``block`` (0-based)."""
    values: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    lines = block.split("\n")
    i = 0
    while i < len(lines):
        match = _LINE_KEY.match(lines[i])
        start = i
        if match is not None:
            key, value = match[1], match[2].strip()
            if not value and i + 1 < len(lines) and _INDENTED.match(lines[i + 1]):
                gathered = []
                while i + 1 < len(lines) and (not lines[i + 1] or _INDENTED.match(lines[i + 1])):
                    gathered.append(lines[i + 1])
                    i += 1
                value = "\n".join(gathered).strip()
            elif len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
                value = value[1:-1]
            if value:
                values[key] = value
                lines_of.setdefault(key, start)
        i += 1
    return values, lines_of


def _coerce(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool | int | float):
        return js_string(value)
    if isinstance(value, dict | list):
        return js_json(value)
    return str(value)  # a date YAML built: its text


def read_frontmatter(text: str, source: str, repair: Any = None) -> Frontmatter:
    """Read ``text``'s frontmatter (see the module doc). ``repair`` is an optional function
    from the block to a repaired block tried when YAML refuses the first (gatewayd quotes plain
    values with ``': '`` in them, as OpenClaw does for ``description``). Raises
    :class:`NoFrontmatter`."""
    block, body, first = split(text)
    fallback, lines_of = line_values(block)
    line_of = {key: first + line for key, line in lines_of.items()}
    if not block:
        return Frontmatter({}, {}, None, body, line_of)
    padded = "\n" * (first - 1) + block  # YAML's line numbers are the file's
    data: Any = None
    error: str | None = None
    try:
        data = load_yaml(padded, source)
    except YamlError as exc:
        error = str(exc)
        if repair is not None and (repaired := repair(padded)) != padded:
            with contextlib.suppress(YamlError):
                data, error = load_yaml(repaired, source), None
    if error is not None or not isinstance(data, dict):
        why = error or f"{source}: the frontmatter must be a mapping of keys"
        return Frontmatter(dict(fallback), None, why, body, line_of)
    values: dict[str, str] = {}
    raw_lines = padded.split("\n")
    for raw_key, raw_value in data.items():
        key = str(raw_key).strip()
        coerced = _coerce(raw_value) if key else None
        if coerced is None:
            continue
        structured = isinstance(raw_value, dict | list)
        line = line_of.get(key)
        if structured and key in fallback and line is not None:
            match = _LINE_KEY.match(raw_lines[line - 1]) if line - 1 < len(raw_lines) else None
            if match is not None and ":" in match[2]:
                coerced = fallback[key]  # a flow mapping on its own line: OpenClaw keeps the text
        values[key] = coerced
    for key, value in fallback.items():
        values.setdefault(key, value)
    return Frontmatter(values, data, None, body, line_of)


def parse_metadata_text(text: str) -> Any:
    """``metadata``'s text as OpenClaw reads it: JSON, else JSON5; ``None`` when neither reads
    it. Nesting past the stack reads as nothing too, and so does JSON5 nested more than 32
    levels (pyjson5's bound: its C parser reads a 1 MiB HOOK.md in ~35 ms, the pure-Python
    json5 package took 56 s)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    # Imported here, not at the top: pyjson5 adds ~4.8 MiB to the daemon's RSS, and metadata
    # that strict JSON cannot read is rare (none of the bundled hooks' is).
    import pyjson5

    try:
        return pyjson5.decode(text)
    except pyjson5.Json5Exception:
        return None


def manifest_block(metadata: Any, namespaces: tuple[str, ...]) -> tuple[str | None, Any]:
    """``(namespace, block)``: the first of ``namespaces`` whose value in ``metadata`` is an
    object (a mapping, or a list: JavaScript's ``typeof`` says object for both)."""
    if not isinstance(metadata, dict):
        return None, None
    for namespace in namespaces:
        candidate = metadata.get(namespace)
        if isinstance(candidate, dict | list):
            return namespace, candidate
    return None, None


def string_list(value: Any) -> list[str]:
    """OpenClaw's ``normalizeStringList``: a list's entries as strings, trimmed, empty ones
    dropped; a string split on commas; anything else nothing."""
    if isinstance(value, list):
        return [text for item in value if (text := js_string(item).strip())]
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return []


def parse_bool(value: str | None) -> bool | None:
    """OpenClaw's ``parseBooleanValue`` of a string: ``true|1|yes|on`` / ``false|0|no|off``
    (any case, trimmed), else ``None``."""
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    return None
