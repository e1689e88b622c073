"""Reading ``HOOK.md``: the YAML frontmatter, validated into a typed :class:`HookManifest`.

A ``HOOK.md`` starts with a ``---`` line, then YAML (nested maps and inline JSON both work: JSON
is YAML), then a closing ``---`` line, then Markdown (docs/design.md section 2). CRLF files read the
same. The hook's own fields live under ``metadata.eliza``; ``metadata.openclaw``,
``metadata.milady`` and OpenClaw's legacy ``metadata.clawdbot`` are read the same way (the first
present wins), so existing hook packs work unchanged. A Hermes ``HOOK.yaml`` is the same fields
as plain YAML (``name``, ``description``, ``events``), with no Markdown around it.

Lenient where OpenClaw is, so that hooks written for it load as they do there:

* a value with an unquoted colon (``description: Runs at: startup``) is read as the string it is;
* a list may be written as one comma-separated string (``events: command:new, command:reset``);
* booleans may be strings: ``"true"``/``"false"``, ``yes``/``no``, ``on``/``off``, ``1``/``0``;
* ``os`` takes every platform name Node knows (``freebsd``, ``openbsd``, ...); another is a warning;
* a top-level ``enabled: false`` makes the hook opt-in: off until the config enables it;
* with no namespace, ``metadata.events`` (or a top-level ``events``) is read as the metadata.

Strict where a mistake would be silent: every known field is type-checked, and each error names
the file, the field path and what was expected (``hooks/foo/HOOK.md: metadata.eliza.always must
be true or false, got 'maybe'``). Event names never make a hook invalid: each is resolved by
:mod:`gatewayd.hooks.vocabulary`, and a name no emitter produces is a *warning* with the nearest
known name. Unknown keys inside the hook's namespace, an unknown namespace, or a platform name
Node does not know are warnings too (``hooks check`` and the log show them; ``--strict`` fails on
them), because a typo such as ``requires.bin`` would otherwise silently switch a check off.
Unknown top-level frontmatter keys (``version``, ``author``, ...) are ignored.

:func:`read_manifest` raises :class:`ManifestError` carrying every problem found.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from gatewayd.atomic import read_regular
from gatewayd.hooks.names import name_problem, normalize_name
from gatewayd.hooks.spec import MAX_TIMEOUT_MS
from gatewayd.hooks.vocabulary import resolve_all
from gatewayd.yamlio import YamlError, load_yaml

NAMESPACES: Final = ("eliza", "openclaw", "milady", "clawdbot")
"""Where hook metadata may live under ``metadata``, in order of preference."""

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

_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})


def _lenient_bool(value: Any) -> Any:
    """``true``/``false`` and, as OpenClaw reads them, the strings ``"true"``, ``"yes"``,
    ``"on"``, ``"1"`` (and their opposites); anything else is left for the type check."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return value


def _comma_list(value: Any) -> Any:
    """A comma-separated string as the list it stands for (OpenClaw's ``normalizeStringList``)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


LenientBool = Annotated[bool, BeforeValidator(_lenient_bool)]
StrList = Annotated[list[str], BeforeValidator(_comma_list)]


class ManifestError(ValueError):
    """A ``HOOK.md`` that cannot be used; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


class _Strict(BaseModel):
    # strict: no coercion ("yes" is not a bool, 3 is not a str); extra keys are kept so that
    # they can be reported as warnings instead of failing a hook pack.
    model_config = ConfigDict(
        extra="allow", alias_generator=to_camel, populate_by_name=True, frozen=True, strict=True
    )


# Mutable defaults are given as factories: a plain ``[]`` or ``Requires()`` default is
# deep-copied by pydantic on every validation (2,000 ``copy.deepcopy`` calls per 1,000
# manifests, ~40% of their validation; bench/NOTES.md, issue 18).


class Requires(_Strict):
    """``metadata.eliza.requires``: what must be present for the hook to be eligible."""

    bins: StrList = Field(default_factory=list)
    any_bins: StrList = Field(default_factory=list)
    env: StrList = Field(default_factory=list)
    config: StrList = Field(default_factory=list)


NO_REQUIREMENTS: Final = Requires()
"""What a hook that declares no ``requires`` has: one instance shared by all of them (the model
is frozen and nothing changes its lists). Built per manifest it was 8 objects of each hook's
load (bench/NOTES.md, issue 18, session 6)."""


def _no_requirements() -> Requires:
    return NO_REQUIREMENTS


class ElizaMeta(_Strict):
    """``metadata.eliza`` (or ``openclaw`` / ``milady``) as written in the file."""

    always: LenientBool = False
    hook_key: str | None = None
    emoji: str | None = None
    homepage: str | None = None
    events: StrList = Field(default_factory=list)
    export: str | None = None
    os: StrList = Field(default_factory=list)
    requires: Requires = Field(default_factory=_no_requirements)
    install: list[dict[str, Any]] = Field(default_factory=list)
    timeout_ms: int | None = Field(None, ge=1, le=MAX_TIMEOUT_MS)
    priority: int | None = None
    background: bool = False
    agents: StrList | None = None


class _Frontmatter(BaseModel):
    # Unknown top-level keys belong to the document (version, author, ...): ignored.
    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, populate_by_name=True, frozen=True, strict=True
    )

    name: str | None = None
    description: str | None = None
    homepage: str | None = None
    timeout_ms: int | None = Field(None, ge=1, le=MAX_TIMEOUT_MS)
    enabled: LenientBool = True


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
    """The event names as written (``message_sending``, ``command:new``)."""
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


_TIMEOUT: Final = f"a positive integer (milliseconds, at most {MAX_TIMEOUT_MS})"

# What each field must be, for error messages; keyed by the field path as written in the file.
_EXPECTED: Final = {
    "name": "a string",
    "description": "a string",
    "homepage": "a string",
    "timeoutMs": _TIMEOUT,
    "enabled": "true or false",
    "always": "true or false",
    "hookKey": "a string",
    "emoji": "a string",
    "export": "a string",
    "events": "a list of strings (or one comma-separated string)",
    "os": "a list of strings (or one comma-separated string)",
    "requires": "a mapping with bins, anyBins, env and config",
    "requires.bins": "a list of strings",
    "requires.anyBins": "a list of strings",
    "requires.env": "a list of strings",
    "requires.config": "a list of strings",
    "install": "a list of mappings",
    "priority": "an integer (lower runs earlier; default 100)",
    "background": "true or false",
    "agents": "a list of agent ids (or one comma-separated string)",
}


def split_frontmatter(text: str, source: str) -> tuple[str, str]:
    """Split ``HOOK.md`` text into (YAML, Markdown body). The YAML keeps the file's line numbers
    (the opening ``---`` becomes an empty line) so parser errors point at the right line."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    first, _, rest = text.partition("\n")
    if first.rstrip() != "---":
        raise ManifestError(
            [f"{source}: no YAML frontmatter: the file must start with a '---' line"]
        )
    lines = rest.split("\n")
    for i, line in enumerate(lines):
        if line.rstrip() in ("---", "..."):
            return "\n" + "\n".join(lines[:i]) + "\n", "\n".join(lines[i + 1 :])
    raise ManifestError([f"{source}: the frontmatter opened on line 1 is never closed by '---'"])


def _value_at(data: Any, parts: list[str]) -> Any:
    for part in parts:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def _type_errors(
    exc: ValidationError, raw: Mapping[str, Any], source: str, prefix: str
) -> list[str]:
    """One ``file: field must be X, got Y`` line per offending field (not per list item)."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if isinstance(p, str)]
        # Walk up to the deepest field we have a description for (`requires.bins.0` -> bins).
        while parts and ".".join(parts) not in _EXPECTED:
            parts.pop()
        field = ".".join(parts)
        if not field or field in errors:
            if not field:
                errors.setdefault(f"?{len(errors)}", f"{source}: {prefix}{err['msg']}")
            continue
        got = _value_at(raw, parts)
        errors[field] = f"{source}: {prefix}{field} must be {_EXPECTED[field]}, got {got!r}"
    return list(errors.values())


def _unknown_keys(meta: ElizaMeta, prefix: str) -> list[str]:
    warnings = [
        f"{prefix}{key}: unknown key, ignored (check the spelling)"
        for key in (meta.model_extra or {})
    ]
    warnings += [
        f"{prefix}requires.{key}: unknown key, ignored (expected bins, anyBins, env or config)"
        for key in (meta.requires.model_extra or {})
    ]
    return warnings


def _metadata_mapping(value: Any, source: str) -> dict[str, Any]:
    """``metadata`` as a mapping; a string holding JSON (as some hook packs write it) is parsed."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ManifestError(
                [f"{source}: metadata is a string that is not valid JSON: {exc}"]
            ) from None
        except RecursionError:
            raise ManifestError(
                [f"{source}: metadata is a JSON string nested too deeply to read; write it flatter"]
            ) from None
    if not isinstance(value, dict):
        raise ManifestError(
            [f"{source}: metadata must be a mapping (nested YAML or inline JSON), got {value!r}"]
        )
    return value


_PLAIN_VALUE = re.compile(r"^(?P<lead>\s*[A-Za-z_][\w-]*:[ \t]+)(?P<value>[^'\"{\[|>&*!#\s].*)$")


def _quote_colon_values(yaml_text: str) -> str:
    """Quote every plain ``key: value`` whose value holds ``': '`` (``description: Runs at:
    startup``): YAML refuses it, OpenClaw reads it as the string it plainly is."""
    lines = yaml_text.split("\n")
    for i, line in enumerate(lines):
        match = _PLAIN_VALUE.match(line)
        if match and ": " in match["value"]:
            lines[i] = match["lead"] + json.dumps(match["value"].rstrip(), ensure_ascii=False)
    return "\n".join(lines)


def _load_frontmatter(yaml_text: str, where: str) -> Any:
    try:
        return load_yaml(yaml_text, where)
    except YamlError as exc:
        repaired = _quote_colon_values(yaml_text)
        if repaired == yaml_text:
            raise ManifestError([str(exc)]) from None
        try:
            return load_yaml(repaired, where)
        except YamlError:
            raise ManifestError([str(exc)]) from None


_META_FIELDS: Final = frozenset(ElizaMeta.model_fields) | {
    field.alias for field in ElizaMeta.model_fields.values() if field.alias
}


def _select_metadata(
    raw: Mapping[str, Any], metadata: dict[str, Any], where: str
) -> tuple[str | None, str, Any, list[str]]:
    """``(namespace, prefix, mapping, warnings)``: where this hook's metadata is read from.

    A known namespace wins; else ``metadata`` itself when it holds metadata fields (``events``,
    ...); else the frontmatter's top level (a Hermes HOOK.yaml, or ``events:`` written there).
    A namespace gatewayd does not read is named in a warning, never skipped in silence.
    """
    namespace = next((ns for ns in NAMESPACES if ns in metadata), None)
    if namespace is not None:
        ns_raw = metadata.get(namespace)
        if isinstance(ns_raw, Mapping) and "events" not in ns_raw and "events" in raw:
            ns_raw = {**ns_raw, "events": raw["events"]}  # events written at the top level
        return namespace, f"metadata.{namespace}.", ns_raw, []
    warnings = [
        f"metadata.{key}: not a namespace gatewayd reads (it reads metadata."
        f"{', metadata.'.join(NAMESPACES)}); its fields are ignored: rename it to metadata.eliza"
        for key, value in metadata.items()
        if isinstance(value, Mapping) and key not in _META_FIELDS
    ]
    if _META_FIELDS & set(metadata):
        return None, "metadata.", metadata, warnings
    top = {k: v for k, v in raw.items() if k in _META_FIELDS and k not in ("timeoutMs", "homepage")}
    return None, "", top, warnings


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


def parse_manifest(text: str, path: Path, *, source: str | None = None) -> HookManifest:
    """Validate ``HOOK.md`` (or Hermes ``HOOK.yaml``) text. ``source`` is the file name used in
    messages (default ``path``).

    A missing ``name`` defaults to the hook directory's name, ``hookKey`` to the name.
    Raises :class:`ManifestError` with every problem found.
    """
    where = source or str(path)
    hermes = path.name == "HOOK.yaml"
    if hermes:
        yaml_text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    else:
        yaml_text, _ = split_frontmatter(text, where)
    raw = _load_frontmatter(yaml_text, where)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        what = "the file" if hermes else "the frontmatter"
        raise ManifestError(
            [f"{where}: {what} must be a mapping of keys, got a {type(raw).__name__}"]
        )

    errors: list[str] = []
    try:
        front = _Frontmatter.model_validate(raw)
    except ValidationError as exc:
        errors += _type_errors(exc, raw, where, "")
        front = _Frontmatter()

    metadata = _metadata_mapping(raw.get("metadata"), where)
    namespace, prefix, ns_raw, notes = _select_metadata(raw, metadata, where)
    meta: ElizaMeta | None = None
    if ns_raw is None:
        ns_raw = {}
    if not isinstance(ns_raw, dict):
        errors.append(f"{where}: metadata.{namespace} must be a mapping, got {ns_raw!r}")
    else:
        try:
            meta = ElizaMeta.model_validate(ns_raw)
        except ValidationError as exc:
            errors += _type_errors(exc, ns_raw, where, prefix)
    if meta is None:  # the defaults, so that the checks below still run
        meta = ElizaMeta()

    if len(meta.events) > MAX_EVENTS:
        errors.append(
            f"{where}: {prefix}events lists {len(meta.events)} keys, more than {MAX_EVENTS}: list "
            "the events the hook handles (a type alone, such as command, covers all of its actions)"
        )
        meta = meta.model_copy(update={"events": []})
    keys, event_warnings = resolve_all(meta.events)
    notes += [f"{prefix}{warning}" for warning in event_warnings]
    notes += _platform_warnings(meta.os, prefix)
    if meta.export is not None and not meta.export.isidentifier():
        errors.append(f"{where}: {prefix}export must be a Python identifier, got {meta.export!r}")
    name = normalize_name(front.name if front.name is not None else path.parent.name)
    if problem := name_problem(name, "name" if front.name is not None else "directory name"):
        errors.append(f"{where}: {problem}")
    hook_key = normalize_name(meta.hook_key) if meta.hook_key is not None else None
    if hook_key is not None and (problem := name_problem(hook_key, f"{prefix}hookKey")):
        errors.append(f"{where}: {problem}")
    if errors:
        raise ManifestError(errors)

    if namespace is not None:
        notes += _unknown_keys(meta, prefix)
    return HookManifest(
        path=path,
        name=name,
        hook_key=hook_key or name,
        description=front.description or "",
        homepage=meta.homepage or front.homepage,
        emoji=meta.emoji,
        events=tuple(meta.events),
        keys=keys,
        export=meta.export,
        always=meta.always,
        os=tuple(meta.os),
        requires=meta.requires,
        install=tuple(meta.install),
        timeout_ms=meta.timeout_ms if meta.timeout_ms is not None else front.timeout_ms,
        priority=meta.priority,
        background=meta.background,
        agents=tuple(meta.agents) if meta.agents is not None else None,
        namespace=namespace,
        enabled=front.enabled,
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
