"""Reading ``HOOK.md``: its frontmatter, read as OpenClaw reads it, into a :class:`HookManifest`.

The frontmatter is read by :mod:`gatewayd.hooks.frontmatter`, exactly as OpenClaw 2026.9.6 reads
it (the differential test, ``tests/openclaw``, runs OpenClaw's own code on the same files): YAML,
else line by line; top-level values as strings; ``metadata`` as JSON or JSON5. The hook's fields
live under ``metadata.eliza`` (gatewayd's own), ``metadata.openclaw``, ``metadata.milady`` or
OpenClaw's legacy ``metadata.clawdbot``: the first of them that holds an object. A Hermes
``HOOK.yaml`` is the same fields as plain YAML at its top level.

The fields OpenClaw reads are read as it reads them, so a hook runs here when it runs there:

* ``always`` bypasses ``requires`` only as a real boolean ``true`` (``"true"`` and ``yes`` do
  not); ``emoji``, ``homepage``, ``hookKey`` and ``export`` count only as strings;
* ``events``, ``os`` and each ``requires`` list: a list's entries as strings, trimmed, empty
  ones dropped, or one comma-separated string; ``requires`` counts only as an object;
* ``name`` and ``description``: the top-level value as a string, trimmed (an empty name is the
  directory's).

A value OpenClaw ignores is ignored here too, never a reason to refuse the hook, and each one is
a *warning* naming the field and the fix (``hooks check`` shows it; ``--strict`` fails on it), so
the mistake is not silent. So are a YAML error that made the line-by-line reading take over (and
what that reading lost), unknown keys in the namespace, an unknown namespace, and a platform name
Node does not know. Event names never make a hook invalid: each is resolved by
:mod:`gatewayd.hooks.vocabulary`, and a name no emitter produces is a warning with the nearest
known one. The fields only gatewayd reads (``timeoutMs``, ``priority``, ``background``,
``agents``) are type-checked, and a wrong one makes the hook ``invalid`` with the file, the
field and what was expected.

:func:`read_manifest` raises :class:`ManifestError` carrying every problem found.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gatewayd.atomic import read_regular
from gatewayd.hooks.frontmatter import (
    NoFrontmatter,
    js_json,
    manifest_block,
    parse_bool,
    parse_metadata_text,
    read_frontmatter,
    string_list,
)
from gatewayd.hooks.names import name_problem, normalize_name
from gatewayd.hooks.spec import MAX_TIMEOUT_MS
from gatewayd.hooks.vocabulary import resolve_all
from gatewayd.yamlio import YamlError, load_yaml

NAMESPACES: Final = ("eliza", "openclaw", "milady", "clawdbot")
"""Where hook metadata may live under ``metadata``, in order of preference."""

OPENCLAW_NAMESPACES: Final = ("openclaw", "clawdbot")
"""The namespaces OpenClaw itself reads (its manifest key and its legacy one)."""

PLATFORMS: Final = frozenset(
    {
        "aix",
        "android",
        "cygwin",
        "darwin",
        "freebsd",
        "haiku",
        "linux",
        "netbsd",
        "openbsd",
        "sunos",
        "win32",
    }
)
"""Platform names as Node's ``process.platform`` says them (what OpenClaw compares ``os`` to)."""

_PLATFORM_HINTS: Final = {"macos": "darwin", "mac": "darwin", "osx": "darwin", "windows": "win32"}


class ManifestError(ValueError):
    """A ``HOOK.md`` that cannot be used; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass(frozen=True, slots=True)
class Requires:
    """``requires``: what must be present for the hook to be eligible."""

    bins: list[str] = field(default_factory=list)
    any_bins: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    config: list[str] = field(default_factory=list)


NO_REQUIREMENTS: Final = Requires()
"""What a hook that declares no ``requires`` has: one instance shared by all of them."""


@dataclass(frozen=True, slots=True)
class HookManifest:
    """One hook's validated ``HOOK.md``, with defaults applied."""

    path: Path
    name: str
    hook_key: str
    description: str = ""
    homepage: str | None = None
    emoji: str | None = None
    events: tuple[str, ...] = ()
    """The event names as written, trimmed (``message_sending``, ``command:new``)."""
    keys: tuple[str, ...] = ()
    """The dispatch keys they stand for (``message:sending``, ``command:new``)."""
    export: str | None = None
    always: bool = False
    os: tuple[str, ...] = ()
    requires: Requires = NO_REQUIREMENTS
    install: tuple[dict[str, Any], ...] = ()
    timeout_ms: int | None = None
    priority: int | None = None
    """Lower runs earlier; ``None`` is the default (100)."""
    background: bool = False
    """Run after the reply is sent (fire-and-forget), in the session's order."""
    agents: tuple[str, ...] | None = None
    """``agents: [id, ...]``: the agents whose events it serves (``None``: every agent;
    ``gatewayd/hooks/agents.py``)."""
    namespace: str | None = None
    """Which of ``metadata.eliza|openclaw|milady|clawdbot`` the metadata came from (None: absent
    or read from the top level)."""
    enabled: bool = True
    """False for an opt-in hook (``enabled: false`` at the top level): off until the config sets
    ``hooks.entries.<hookKey>.enabled: true``."""
    hermes: bool = False
    """A Hermes ``HOOK.yaml`` hook: its handler is ``handle(event_type, context)``."""
    warnings: tuple[str, ...] = ()


_KNOWN_FIELDS: Final = frozenset(
    {
        "always",
        "hookKey",
        "emoji",
        "homepage",
        "events",
        "export",
        "os",
        "requires",
        "install",
        "timeoutMs",
        "priority",
        "background",
        "agents",
    }
)
_REQUIRES_FIELDS: Final = ("bins", "anyBins", "env", "config")


def _ignored(prefix: str, key: str, value: Any, expected: str) -> str:
    return (
        f"{prefix}{key}: {js_json(value)} is not {expected}: ignored, as OpenClaw ignores it "
        f"(write {expected})"
    )


def _strings(block: Mapping[str, Any], key: str, prefix: str, notes: list[str]) -> list[str]:
    """A list field read as OpenClaw reads it; a value it cannot read is a warning."""
    if key not in block:
        return []
    value = block[key]
    if not isinstance(value, list | str) and value is not None:
        notes.append(_ignored(prefix, key, value, "a list of strings"))
    elif isinstance(value, list) and any(not isinstance(v, str) for v in value):
        notes.append(
            f"{prefix}{key}: entries that are not strings are read as their text, as OpenClaw "
            f"reads them: {js_json(value)}"
        )
    return string_list(value)


def _string(block: Mapping[str, Any], key: str, prefix: str, notes: list[str]) -> str | None:
    value = block.get(key)
    if value is None or isinstance(value, str):
        return value
    notes.append(_ignored(prefix, key, value, "a string"))
    return None


def _gatewayd_fields(
    block: Mapping[str, Any], prefix: str, where: str, errors: list[str]
) -> dict[str, Any]:
    """The fields only gatewayd reads, type-checked: a wrong one is an error."""
    out: dict[str, Any] = {}

    def fail(key: str, expected: str) -> None:
        errors.append(f"{where}: {prefix}{key} must be {expected}, got {block[key]!r}")

    if "timeoutMs" in block:
        value = block["timeoutMs"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= MAX_TIMEOUT_MS
        ):
            fail("timeoutMs", f"a positive integer (milliseconds, at most {MAX_TIMEOUT_MS})")
        else:
            out["timeout_ms"] = value
    if "priority" in block:
        value = block["priority"]
        if isinstance(value, bool) or not isinstance(value, int):
            fail("priority", "an integer (lower runs earlier; default 100)")
        else:
            out["priority"] = value
    if "background" in block:
        if not isinstance(block["background"], bool):
            fail("background", "true or false")
        else:
            out["background"] = block["background"]
    if "agents" in block:
        value = block["agents"]
        if isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            out["agents"] = tuple(string_list(value))
        else:
            fail("agents", "a list of agent ids (or one comma-separated string)")
    return out


def _requires(block: Mapping[str, Any], prefix: str, notes: list[str]) -> Requires:
    if "requires" not in block or block["requires"] is None:
        if "requires" in block:
            notes.append(
                _ignored(prefix, "requires", None, "a mapping with bins, anyBins, env and config")
            )
        return NO_REQUIREMENTS
    raw = block["requires"]
    if not isinstance(raw, dict):
        notes.append(
            _ignored(prefix, "requires", raw, "a mapping with bins, anyBins, env and config")
        )
        return NO_REQUIREMENTS
    sub = f"{prefix}requires."
    for key in raw:
        if key not in _REQUIRES_FIELDS:
            notes.append(
                f"{sub}{key}: unknown key, ignored (expected bins, anyBins, env or config)"
            )
    lists = {key: _strings(raw, key, sub, notes) for key in _REQUIRES_FIELDS}
    if not any(lists.values()):
        return Requires()
    return Requires(lists["bins"], lists["anyBins"], lists["env"], lists["config"])


def _platform_warnings(systems: list[str], prefix: str) -> list[str]:
    warnings = []
    for system in systems:
        if system in PLATFORMS:
            continue
        hint = _PLATFORM_HINTS.get(system.lower()) or next(
            iter(difflib.get_close_matches(system.lower(), sorted(PLATFORMS), n=1)), None
        )
        did_you_mean = f"; did you mean {hint}?" if hint else ""
        warnings.append(
            f"{prefix}os: unknown platform {system!r}: no machine reports it, so the hook is "
            f"ineligible everywhere{did_you_mean} (known: {', '.join(sorted(PLATFORMS))})"
        )
    return warnings


_PLAIN_VALUE = re.compile(r"^(?P<lead>\s*[A-Za-z_][\w-]*:[ \t]+)(?P<value>[^'\"{\[|>&*!#\s].*)$")


def _quote_colon_values(yaml_text: str) -> str:
    """Quote every plain ``key: value`` whose value holds ``': '`` (``description: Runs at:
    startup``): YAML refuses it, OpenClaw reads it as the string it plainly is."""
    lines = yaml_text.split("\n")
    for i, line in enumerate(lines):
        match = _PLAIN_VALUE.match(line)
        if match and ": " in match["value"]:
            lines[i] = match["lead"] + js_json(match["value"].rstrip())
    return "\n".join(lines)


def _metadata(
    values: Mapping[str, str], yaml: Mapping[str, Any] | None, notes: list[str]
) -> tuple[str | None, Any]:
    """``(namespace, block)``: the namespace OpenClaw's reading of ``metadata`` finds first;
    else gatewayd's own (``eliza``, ``milady``) from the YAML structure; else ``metadata``
    itself when it holds hook fields (``metadata.events``)."""
    text = values.get("metadata")
    openclaw_meta = parse_metadata_text(text) if text is not None else None
    namespace, block = manifest_block(openclaw_meta, NAMESPACES)
    if namespace is not None:
        return namespace, block
    yaml_meta = yaml.get("metadata") if yaml is not None else None
    own, own_block = manifest_block(yaml_meta, NAMESPACES)
    if own is not None:
        if own not in OPENCLAW_NAMESPACES:
            return own, own_block
        notes.append(
            f"metadata.{own}: OpenClaw reads metadata written on the 'metadata:' line as JSON "
            f"or JSON5, and {text!r} is neither, so the hook has no metadata and subscribes to "
            "nothing: quote its strings (JSON) or write it as nested YAML below 'metadata:'"
        )
        return None, None
    if text is not None and not isinstance(openclaw_meta, dict) and not isinstance(yaml_meta, dict):
        notes.append(f"metadata: {text!r} is no mapping (nested YAML or JSON): ignored")
    meta = yaml_meta if isinstance(yaml_meta, dict) else openclaw_meta
    if not isinstance(meta, dict):
        return None, None
    for key, value in meta.items():
        if isinstance(value, dict) and key not in _KNOWN_FIELDS:
            notes.append(
                f"metadata.{key}: not a namespace gatewayd reads (it reads metadata."
                f"{', metadata.'.join(NAMESPACES)}); its fields are ignored: rename it to "
                "metadata.openclaw"
            )
    return (None, meta) if _KNOWN_FIELDS & set(meta) else (None, None)


def parse_manifest(text: str, path: Path, *, source: str | None = None) -> HookManifest:
    """Validate ``HOOK.md`` (or Hermes ``HOOK.yaml``) text. ``source`` is the file name used in
    messages (default ``path``).

    A missing (or empty) ``name`` defaults to the hook directory's name, ``hookKey`` to the
    name. Raises :class:`ManifestError` with every problem found.
    """
    where = source or str(path)
    errors: list[str] = []
    notes: list[str] = []
    yaml_error: str | None = None
    hermes = path.name == "HOOK.yaml"
    if hermes:
        try:
            raw = load_yaml(text.removeprefix("\ufeff").replace("\r\n", "\n"), where)
        except YamlError as exc:
            raise ManifestError([str(exc)]) from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ManifestError(
                [f"{where}: the file must be a mapping of keys, got a {type(raw).__name__}"]
            )
        values: Mapping[str, str] = {
            str(k).strip(): v for k, v in raw.items() if isinstance(v, str)
        }
        yaml: Mapping[str, Any] | None = raw
        namespace, block, prefix = None, {k: v for k, v in raw.items() if k in _KNOWN_FIELDS}, ""
    else:
        try:
            front = read_frontmatter(text, where, repair=_quote_colon_values)
        except NoFrontmatter as exc:
            raise ManifestError([f"{where}: {exc}"]) from None
        values, yaml, yaml_error = front.values, front.yaml, front.yaml_error
        if yaml_error is not None:
            notes.append(
                f"{front.yaml_error}: the frontmatter is read line by line, as OpenClaw reads "
                "it then (each top-level 'key: value' line; nested YAML below a key is lost)"
            )
        namespace, block = _metadata(values, yaml, notes)
        prefix = f"metadata.{namespace}." if namespace else "metadata."
        if block is None and yaml is not None:
            top = {k: v for k, v in yaml.items() if k in ("events",)}
            if top:
                block, prefix = top, ""
    if not isinstance(block, dict):
        block = {}
    if namespace is not None:
        notes += [
            f"{prefix}{key}: unknown key, ignored (check the spelling)"
            for key in block
            if key not in _KNOWN_FIELDS
        ]
    if "always" in block and not isinstance(block["always"], bool):
        notes.append(_ignored(prefix, "always", block["always"], "true or false"))
    always = block.get("always") is True
    events = _strings(block, "events", prefix, notes)
    if len(events) > MAX_EVENTS:
        errors.append(
            f"{where}: {prefix}events lists {len(events)} keys, more than {MAX_EVENTS}: list "
            "the events the hook handles (a type alone, such as command, covers all of its actions)"
        )
        events = []
    systems = _strings(block, "os", prefix, notes)
    requires = _requires(block, prefix, notes)
    install = block.get("install", [])
    if not isinstance(install, list):
        notes.append(_ignored(prefix, "install", install, "a list of mappings"))
        install = []
    install = [item for item in install if isinstance(item, dict)]
    hook_key = _string(block, "hookKey", prefix, notes)
    export = _string(block, "export", prefix, notes)
    if export is not None:
        export = export.strip() or None
    if export is not None and not export.isidentifier():
        errors.append(f"{where}: {prefix}export must be a Python identifier, got {export!r}")
    emoji = _string(block, "emoji", prefix, notes)
    homepage = _string(block, "homepage", prefix, notes) or values.get("homepage")
    own = _gatewayd_fields(block, prefix, where, errors)
    if not hermes and yaml is not None and "timeoutMs" in yaml:
        top = _gatewayd_fields({"timeoutMs": yaml["timeoutMs"]}, "", where, errors)
        own.setdefault("timeout_ms", top.get("timeout_ms"))
    written_name = values.get("name")
    name = normalize_name(written_name or path.parent.name)
    if problem := name_problem(name, "name" if written_name else "directory name"):
        errors.append(f"{where}: {problem}")
    if hook_key is not None:
        hook_key = normalize_name(hook_key)
        if problem := name_problem(hook_key, f"{prefix}hookKey"):
            errors.append(f"{where}: {problem}")
    enabled_text = values.get("enabled")
    enabled = parse_bool(enabled_text)
    if enabled_text is not None and enabled is None:
        notes.append(f"enabled: {enabled_text!r} is not true or false: the hook stays enabled")
    if yaml_error is not None and not events:
        # Read line by line it subscribes to nothing, so it could never run (under OpenClaw
        # neither): the YAML error is what to fix, and the hook is invalid until it is.
        errors.append(
            f"{yaml_error} (read line by line, as OpenClaw then reads it, it subscribes to no "
            "event)"
        )
    keys, event_warnings = resolve_all(events)
    notes += [f"{prefix}{warning}" for warning in event_warnings]
    notes += _platform_warnings(systems, prefix)
    if errors:
        raise ManifestError(errors)
    return HookManifest(
        path=path,
        name=name,
        hook_key=hook_key or name,
        description=values.get("description") or "",
        homepage=homepage,
        emoji=emoji,
        events=tuple(events),
        keys=keys,
        export=export,
        always=always,
        os=tuple(systems),
        requires=requires,
        install=tuple(install),
        timeout_ms=own.get("timeout_ms"),
        priority=own.get("priority"),
        background=own.get("background", False),
        agents=own.get("agents"),
        namespace=namespace,
        enabled=enabled is not False,
        hermes=hermes,
        warnings=tuple(f"{where}: {w}" for w in notes),
    )


MAX_EVENTS = 1000
"""The most event keys one hook may list: the vocabulary has a few dozen, and each unknown key
is matched against all of them for a suggestion (70,000 misspelt keys took 12 s of a load)."""

MAX_HOOK_MD_BYTES = 1024 * 1024
"""A HOOK.md over 1 MiB is refused (never read whole); so is one that is not a regular file."""


class ManifestCache:
    """Validated manifests keyed by path and the file's exact bytes.

    Reading a ``HOOK.md`` is cheap; parsing and validating it is most of a hook's load time.
    The cache compares the whole content, never timestamps, so an edit is always seen (even
    within the same second, or with a preserved mtime). :meth:`retain` drops hooks that are gone.
    """

    def __init__(self) -> None:
        # Keyed by the path as a string: a str caches its hash, a Path's __hash__ is a Python
        # call, and a key is hashed four times per manifest read.
        self._entries: dict[tuple[str, str], tuple[bytes, HookManifest | ManifestError]] = {}
        self._read: set[tuple[str, str]] = set()

    def read(
        self, path: Path, *, source: str | None = None, data: bytes | None = None
    ) -> HookManifest:
        """Like :func:`read_manifest`, answered from the cache when the bytes are unchanged.
        ``data``: the file's bytes when the caller has read them already (as
        :func:`~gatewayd.atomic.read_regular` does, at most :data:`MAX_HOOK_MD_BYTES`)."""
        where = source or str(path)
        if data is None:
            try:
                data = read_regular(path, MAX_HOOK_MD_BYTES)
            except OSError as exc:
                raise ManifestError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
        key = (os.fspath(path), where)
        self._read.add(key)
        cached = self._entries.get(key)
        if cached is None or cached[0] != data:
            outcome: HookManifest | ManifestError
            try:
                outcome = parse_manifest(_decode(data, where), path, source=where)
            except ManifestError as exc:
                outcome = exc
            cached = self._entries[key] = (data, outcome)
        if isinstance(cached[1], ManifestError):
            raise ManifestError(list(cached[1].errors))
        return cached[1]

    def retain_read(self) -> None:
        """Forget every manifest not read since the previous call (hooks that are gone)."""
        self._entries = {k: v for k, v in self._entries.items() if k in self._read}
        self._read = set()


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError([f"{where}: not UTF-8 text: {exc}"]) from None


def read_manifest(path: Path, *, source: str | None = None) -> HookManifest:
    """Read and validate the ``HOOK.md`` at ``path``; raise :class:`ManifestError`."""
    where = source or str(path)
    try:
        data = read_regular(path, MAX_HOOK_MD_BYTES)
    except OSError as exc:
        raise ManifestError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
    return parse_manifest(_decode(data, where), path, source=where)
