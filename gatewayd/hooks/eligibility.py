"""Can a hook run here? The ``os`` / ``requires`` checks of docs/design.md section 2.

``os`` is always checked (``sys.platform`` mapped to ``darwin|linux|win32``); unless the hook says
``always: true``, so are ``requires.bins`` (each on PATH and executable), ``requires.anyBins`` (at
least one), ``requires.env`` (non-empty in the process env or in ``hooks.entries.<hookKey>.env``)
and ``requires.config`` (the dot path is truthy: ``0``, ``""``, ``false``, an empty list or
map, and a missing key all fail). Config paths are looked up in the right tree: gatewayd's own
keys in its effective config, with ``hooks.internal.<x>`` read as ``hooks.<x>`` (as the config
itself folds it); a key of OpenClaw's own sections (:data:`OPENCLAW_SECTIONS`) where
gatewayd's config file wrote that section, else, as any other key, in the agent's own config
file (``agent.configFile``), with a reason that says which file was read, or that none is.
``os`` names are Node's (``freebsd``, ``openbsd``, ...). Each failure is one reason string,
worded exactly as ``hooks list --verbose`` shows it, and the missing names are also broken down
by kind for ``--json``.

One :class:`EligibilityChecker` serves a whole load: the effective config is dumped once and
PATH lookups are cached, so checking a thousand hooks costs a thousand dict lookups, not a
thousand config dumps.
"""

from __future__ import annotations

import os
import shutil
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gatewayd.hooks.metadata import NO_REQUIREMENTS, HookManifest
from gatewayd.hooks.spec import AgentConfigSpec, EntrySpec

MISSING_KINDS = ("bins", "anyBins", "env", "config", "os")

OPENCLAW_SECTIONS = frozenset(
    {
        "$schema",
        "meta",
        "env",
        "wizard",
        "diagnostics",
        "update",
        "telemetry",
        "browser",
        "ui",
        "secrets",
        "auth",
        "accessGroups",
        "acp",
        "models",
        "nodeHost",
        "worktreeRoot",
        "worktreeAcceleration",
        "tools",
        "security",
        "bindings",
        "broadcast",
        "attachments",
        "messages",
        "tts",
        "commands",
        "approvals",
        "session",
        "cron",
        "transcripts",
        "channels",
        "discovery",
        "talk",
        "cloudWorkers",
        "desktop",
        "memory",
        "mcp",
        "skills",
        "plugins",
        "surfaces",
        "proxy",
    }
)
"""The top-level keys of OpenClaw 2026.9.6's config (its ``OpenClawSchema``) that are none of
gatewayd's sections (``gateway``, ``hooks``, ``logging`` and ``agents`` are both, and read as
gatewayd's). Written in gatewayd.yaml they are taken as they are, unchecked, and read only for
hooks' ``requires.config`` (``browser.enabled``, ``channels.telegram``, ``plugins.entries.x``):
what an OpenClaw user's hooks require is met where they write gatewayd's config. Any other
unknown top-level key is still refused (a misspelt section must not pass unnoticed)."""

OWN_ROOTS = frozenset({"gateway", "workspace", "hooks", "logging", "agent"})
"""The top-level keys of gatewayd's own config: ``requires.config`` paths under them are
gatewayd's, every other path is the agent's (``agent.configFile``)."""


def current_platform(platform: str = sys.platform) -> str:
    """``sys.platform`` as HOOK.md (and Node's ``process.platform``) names it: ``linux``,
    ``darwin``, ``win32``, ``freebsd``, ``openbsd``, ``sunos``, ``aix``, ..."""
    if platform in ("win32", "cygwin", "msys"):
        return "win32"
    name = platform.rstrip("0123456789")  # freebsd14 -> freebsd, sunos5 -> sunos
    return {"linux": "linux", "darwin": "darwin", "aix": "aix"}.get(name, name)


def empty_missing() -> dict[str, list[str]]:
    return {kind: [] for kind in MISSING_KINDS}


NOTHING_MISSING: Final[Mapping[str, Sequence[str]]] = types.MappingProxyType(
    {kind: () for kind in MISSING_KINDS}
)
"""What an eligible hook misses: one read-only mapping shared by all of them. A dict of five
lists per hook was six of the ~45 objects each hook of a cold load keeps alive through the
load's collections."""


@dataclass(frozen=True, slots=True)
class Eligibility:
    """The outcome for one hook: eligible or not, why not, and what is missing by kind."""

    eligible: bool
    reasons: list[str]
    missing: Mapping[str, Sequence[str]]
    """Keys ``bins``, ``anyBins``, ``env``, ``config``, ``os``; each a sequence (often empty;
    all empty: :data:`NOTHING_MISSING`)."""


DEFAULT_CONFIG_VALUES: Final = types.MappingProxyType(
    {"browser.enabled": True, "browser.evaluateEnabled": True, "workspace.dir": True}
)
"""OpenClaw's defaults for ``requires.config`` paths that its config leaves unset (its
``src/hooks/config.ts``): such a path is met when the config does not set it at all."""

BLOCKED_KEYS: Final = frozenset({"__proto__", "prototype", "constructor"})
"""Path segments OpenClaw never follows (an unset value, and no default)."""

_OBJECT_MEMBERS: Final = frozenset(
    {
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
    }
)
_ARRAY_MEMBERS: Final = frozenset(
    (
        "at",
        "concat",
        "copyWithin",
        "entries",
        "every",
        "fill",
        "filter",
        "find",
        "findIndex",
        "findLast",
        "findLastIndex",
        "flat",
        "flatMap",
        "forEach",
        "includes",
        "indexOf",
        "join",
        "keys",
        "lastIndexOf",
        "map",
        "pop",
        "push",
        "reduce",
        "reduceRight",
        "reverse",
        "shift",
        "slice",
        "some",
        "sort",
        "splice",
        "toReversed",
        "toSorted",
        "toSpliced",
        "unshift",
        "values",
        "with",
        "",
    )
)


class _Undefined:
    """JavaScript's ``undefined``: a path that leads nowhere (``None`` is a JSON ``null``)."""


UNDEFINED: Final = _Undefined()
_MEMBER: Final = object()
"""A function a JavaScript object inherits (``toString``): truthy, as JavaScript sees it."""


def config_path_parts(dotted: str) -> list[str]:
    """A dot path's segments as OpenClaw splits it: on every dot, empty segments dropped."""
    return [part for part in dotted.split(".") if part]


def resolve_config_path(data: Any, parts: Sequence[str]) -> Any:
    """The value at ``parts`` as OpenClaw's ``resolveConfigPath`` finds it in JSON-like data:
    a list's index (and ``length``), an object's own key or a member it inherits; a blocked
    segment or a scalar on the way is :data:`UNDEFINED`."""
    node: Any = data
    for part in parts:
        if part in BLOCKED_KEYS:
            return UNDEFINED
        if isinstance(node, Mapping):
            if part in node:
                node = node[part]
            elif part in _OBJECT_MEMBERS:
                node = _MEMBER
            else:
                return UNDEFINED
        elif isinstance(node, list | tuple):
            if part.isdigit() and (part == "0" or not part.startswith("0")):
                index = int(part)
                node = node[index] if index < len(node) else UNDEFINED
            elif part == "length":
                node = len(node)
            elif part in _ARRAY_MEMBERS or part in _OBJECT_MEMBERS:
                node = _MEMBER
            else:
                return UNDEFINED
        else:
            return UNDEFINED
        if node is UNDEFINED:
            return UNDEFINED
    return node


def js_truthy(value: Any) -> bool:
    """OpenClaw's truthiness of a config value: unset and ``null`` false, booleans as they are,
    numbers other than 0, strings with something besides whitespace, everything else (an
    object or a list, empty or not) true."""
    if value is UNDEFINED or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        return bool(value.strip())
    return True


def config_path_met(data: Any, dotted: str, parts: Sequence[str] | None = None) -> bool:
    """Whether ``requires.config`` path ``dotted`` is met in ``data``, as OpenClaw decides it:
    the value is truthy (:func:`js_truthy`), or unset with a default in
    :data:`DEFAULT_CONFIG_VALUES`. ``parts``: the segments to look up, when they are not
    ``dotted``'s own."""
    segments = config_path_parts(dotted) if parts is None else parts
    value = resolve_config_path(data, segments)
    if value is UNDEFINED and dotted in DEFAULT_CONFIG_VALUES:
        return DEFAULT_CONFIG_VALUES[dotted]
    return js_truthy(value)


class EligibilityChecker:
    """Checks hooks against one effective config, environment, PATH and platform."""

    def __init__(
        self,
        effective: Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
        platform: str | None = None,
        agent: AgentConfigSpec | None = None,
    ) -> None:
        self._effective = effective
        self._agent = agent = agent or AgentConfigSpec()
        self._requirements: Mapping[str, Any] = (
            {**agent.data, **agent.written} if agent.written else agent.data
        )
        """What non-gatewayd ``requires.config`` paths are looked up in: the agent's config
        file, each section written in gatewayd's own config instead where it is."""
        self._environ = os.environ if environ is None else environ
        self._path = self._environ.get("PATH", os.defpath)
        self._platform = current_platform(platform or sys.platform)
        self._which: dict[str, bool] = {}

    def has_bin(self, name: str) -> bool:
        """True when ``name`` is an executable file on PATH (cached for this checker)."""
        found = self._which.get(name)
        if found is None:
            found = self._which[name] = shutil.which(name, path=self._path) is not None
        return found

    def check(self, manifest: HookManifest, entry: EntrySpec) -> Eligibility:
        """Check one hook; ``entry`` is its ``hooks.entries.<hookKey>`` (env counts there too)."""
        req = manifest.requires
        if not manifest.os and (manifest.always or req is NO_REQUIREMENTS):
            return Eligibility(True, [], NOTHING_MISSING)  # nothing to check
        reasons: list[str] = []
        missing = empty_missing()
        if manifest.os and self._platform not in manifest.os:
            reasons.append(f"OS: requires {', '.join(manifest.os)}, current: {self._platform}")
            missing["os"] = list(manifest.os)
        if not manifest.always:
            for name in req.bins:
                if not self.has_bin(name):
                    reasons.append(f"Binary missing: {name}")
                    missing["bins"].append(name)
            if req.any_bins and not any(self.has_bin(name) for name in req.any_bins):
                reasons.append(f"None of: {', '.join(req.any_bins)}")
                missing["anyBins"] = list(req.any_bins)
            for name in req.env:
                if not (
                    (self._environ.get(name) or "").strip() or (entry.env.get(name) or "").strip()
                ):
                    reasons.append(f"Env missing: {name}")
                    missing["env"].append(name)
            for dotted in req.config:
                problem = self.config_problem(dotted)
                if problem is not None:
                    reasons.append(problem)
                    missing["config"].append(dotted)
        if not reasons:
            return Eligibility(True, reasons, NOTHING_MISSING)
        return Eligibility(False, reasons, missing)

    def config_problem(self, dotted: str) -> str | None:
        """Why ``requires.config`` path ``dotted`` is not met, or ``None`` when it is."""
        parts = config_path_parts(dotted)
        if parts[:2] == ["hooks", "internal"]:
            parts = ["hooks", *parts[2:]]  # gatewayd's config folds hooks.internal into hooks
        root = parts[0] if parts else ""
        if root in self._effective or root in OWN_ROOTS:
            if config_path_met(self._effective, dotted, parts):
                return None
            return f"Config missing: {dotted}"
        agent = self._agent
        if config_path_met(self._requirements, dotted):
            return None
        if root in agent.written:
            return f"Config missing: {dotted} (not set, or false, in {agent.written_in})"
        if agent.source is None:
            here = (
                f"write OpenClaw's {root} section in gatewayd.yaml, or "
                if (root in OPENCLAW_SECTIONS)
                else ""
            )
            return (
                f"Config missing: {dotted} (not a gatewayd key; {here}set agent.configFile to "
                "the agent's config file, e.g. ~/.openclaw/openclaw.json, to read it from there)"
            )
        if agent.error is not None:
            return f"Config missing: {dotted} ({agent.error})"
        return f"Config missing: {dotted} (not set, or false, in {agent.source})"
