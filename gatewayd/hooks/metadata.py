"""Reading ``HOOK.md``: the YAML frontmatter, validated into a typed :class:`HookManifest`.

A ``HOOK.md`` starts with a ``---`` line, then YAML (nested maps and inline JSON both work: JSON
is YAML), then a closing ``---`` line, then Markdown (docs/design.md section 2). CRLF files read the
same. The hook's own fields live under ``metadata.eliza``; ``metadata.openclaw`` and
``metadata.milady`` are read the same way (the first present of the three wins), so existing
hook packs work unchanged.

What is strict and what is lenient, and why:

* Every *known* field is type-checked without coercion (``events: command:new`` is an error, not
  a one-element list; ``always: yes`` is an error, not ``True``), and each error names the file,
  the field path and what was expected:
  ``hooks/foo/HOOK.md: metadata.eliza.events must be a list of strings, got 'command:new'``.
* Event keys must have a known type (``parse_event_key``), so ``comand:new`` is reported instead
  of silently never firing; ``os`` values must be ``darwin``, ``linux`` or ``win32``.
* Unknown *top-level* frontmatter keys (``version``, ``author``, ...) are ignored: they belong to
  the document, not to gatewayd. Unknown keys inside the hook's namespace (``metadata.eliza``,
  ``metadata.eliza.requires``) do not break a hook pack written for a newer host either, but each
  is reported as a *warning* on the hook (``hooks check`` and the log show it), because a typo
  such as ``requires.bin`` would otherwise silently switch a safety check off.

:func:`read_manifest` raises :class:`ManifestError` carrying every problem found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from gatewayd.atomic import read_regular
from gatewayd.hooks.events import EventKeyError, parse_event_key
from gatewayd.yamlio import YamlError, load_yaml

NAMESPACES: Final = ("eliza", "openclaw", "milady")
"""Where hook metadata may live under ``metadata``, in order of preference."""

PLATFORMS: Final = frozenset({"darwin", "linux", "win32"})


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


class Requires(_Strict):
    """``metadata.eliza.requires``: what must be present for the hook to be eligible."""

    bins: list[str] = []
    any_bins: list[str] = []
    env: list[str] = []
    config: list[str] = []


class ElizaMeta(_Strict):
    """``metadata.eliza`` (or ``openclaw`` / ``milady``) as written in the file."""

    always: bool = False
    hook_key: str | None = None
    emoji: str | None = None
    homepage: str | None = None
    events: list[str] = []
    export: str | None = None
    os: list[str] = []
    requires: Requires = Requires()
    install: list[dict[str, Any]] = []
    timeout_ms: int | None = Field(None, ge=1)
    priority: int | None = None
    background: bool = False


class _Frontmatter(BaseModel):
    # Unknown top-level keys belong to the document (version, author, ...): ignored.
    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, populate_by_name=True, frozen=True, strict=True
    )

    name: str | None = None
    description: str | None = None
    homepage: str | None = None
    timeout_ms: int | None = Field(None, ge=1)


class HookManifest(BaseModel):
    """One hook's validated ``HOOK.md``, with defaults applied."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path
    name: str
    hook_key: str
    description: str = ""
    homepage: str | None = None
    emoji: str | None = None
    events: tuple[str, ...] = ()
    export: str | None = None
    always: bool = False
    os: tuple[str, ...] = ()
    requires: Requires = Requires()
    install: tuple[dict[str, Any], ...] = ()
    timeout_ms: int | None = None
    priority: int | None = None
    """Lower runs earlier; ``None`` is the default (100)."""
    background: bool = False
    """Run after the reply is sent (fire-and-forget), in the session's order."""
    namespace: str | None = None
    """Which of ``metadata.eliza|openclaw|milady`` the metadata came from (None: absent)."""
    warnings: tuple[str, ...] = ()


# What each field must be, for error messages; keyed by the field path as written in the file.
_EXPECTED: Final = {
    "name": "a string",
    "description": "a string",
    "homepage": "a string",
    "timeoutMs": "a positive integer (milliseconds)",
    "always": "true or false",
    "hookKey": "a string",
    "emoji": "a string",
    "export": "a string",
    "events": "a list of strings",
    "os": "a list of strings",
    "requires": "a mapping with bins, anyBins, env and config",
    "requires.bins": "a list of strings",
    "requires.anyBins": "a list of strings",
    "requires.env": "a list of strings",
    "requires.config": "a list of strings",
    "install": "a list of mappings",
    "priority": "an integer (lower runs earlier; default 100)",
    "background": "true or false",
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
        expected = _EXPECTED[field]
        if err["type"] in ("greater_than_equal", "greater_than"):
            expected = "a positive integer (milliseconds)"
        errors[field] = f"{source}: {prefix}{field} must be {expected}, got {got!r}"
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
    if not isinstance(value, dict):
        raise ManifestError(
            [f"{source}: metadata must be a mapping (nested YAML or inline JSON), got {value!r}"]
        )
    return value


def parse_manifest(text: str, path: Path, *, source: str | None = None) -> HookManifest:
    """Validate ``HOOK.md`` text. ``source`` is the file name used in messages (default ``path``).

    A missing ``name`` defaults to the hook directory's name, ``hookKey`` to the name.
    Raises :class:`ManifestError` with every problem found.
    """
    where = source or str(path)
    yaml_text, _ = split_frontmatter(text, where)
    try:
        raw = load_yaml(yaml_text, where)
    except YamlError as exc:
        raise ManifestError([str(exc)]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ManifestError(
            [f"{where}: the frontmatter must be a mapping of keys, got a {type(raw).__name__}"]
        )

    errors: list[str] = []
    try:
        front = _Frontmatter.model_validate(raw)
    except ValidationError as exc:
        errors += _type_errors(exc, raw, where, "")
        front = _Frontmatter()

    metadata = _metadata_mapping(raw.get("metadata"), where)
    namespace = next((ns for ns in NAMESPACES if ns in metadata), None)
    ns_raw = metadata.get(namespace) if namespace else {}
    prefix = f"metadata.{namespace}." if namespace else ""
    meta = ElizaMeta()
    if ns_raw is None:
        ns_raw = {}
    if not isinstance(ns_raw, dict):
        errors.append(f"{where}: metadata.{namespace} must be a mapping, got {ns_raw!r}")
    else:
        try:
            meta = ElizaMeta.model_validate(ns_raw)
        except ValidationError as exc:
            errors += _type_errors(exc, ns_raw, where, prefix)

    for key in meta.events:
        try:
            parse_event_key(key)
        except EventKeyError as exc:
            errors.append(f"{where}: {prefix}events: {exc}")
    for system in meta.os:
        if system not in PLATFORMS:
            errors.append(
                f"{where}: {prefix}os: unknown platform {system!r}: expected darwin, linux or win32"
            )
    if meta.export is not None and not meta.export.isidentifier():
        errors.append(f"{where}: {prefix}export must be a Python identifier, got {meta.export!r}")
    name = front.name if front.name is not None else path.parent.name
    if not name.strip():
        errors.append(f"{where}: name must be a non-empty string, got {front.name!r}")
    if meta.hook_key is not None and not meta.hook_key.strip():
        errors.append(f"{where}: {prefix}hookKey must be a non-empty string, got ''")
    if errors:
        raise ManifestError(errors)

    return HookManifest(
        path=path,
        name=name,
        hook_key=meta.hook_key or name,
        description=front.description or "",
        homepage=meta.homepage or front.homepage,
        emoji=meta.emoji,
        events=tuple(meta.events),
        export=meta.export,
        always=meta.always,
        os=tuple(meta.os),
        requires=meta.requires,
        install=tuple(meta.install),
        timeout_ms=meta.timeout_ms if meta.timeout_ms is not None else front.timeout_ms,
        priority=meta.priority,
        background=meta.background,
        namespace=namespace,
        warnings=tuple(f"{where}: {w}" for w in _unknown_keys(meta, prefix)),
    )


MAX_HOOK_MD_BYTES = 1024 * 1024
"""A HOOK.md over 1 MiB is refused (never read whole); so is one that is not a regular file."""


class ManifestCache:
    """Validated manifests keyed by path and the file's exact bytes.

    Reading a ``HOOK.md`` is cheap; parsing and validating it is most of a hook's load time.
    The cache compares the whole content, never timestamps, so an edit is always seen (even
    within the same second, or with a preserved mtime). :meth:`retain` drops hooks that are gone.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[Path, str], tuple[bytes, HookManifest | ManifestError]] = {}

    def read(self, path: Path, *, source: str | None = None) -> HookManifest:
        """Like :func:`read_manifest`, answered from the cache when the bytes are unchanged."""
        where = source or str(path)
        try:
            data = read_regular(path, MAX_HOOK_MD_BYTES)
        except OSError as exc:
            raise ManifestError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
        key = (path, where)
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

    def retain(self, paths: set[Path]) -> None:
        """Forget every manifest whose path is not in ``paths``."""
        for key in [k for k in self._entries if k[0] not in paths]:
            del self._entries[key]


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
