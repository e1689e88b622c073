"""Can a hook run here? The ``os`` / ``requires`` checks of docs/design.md section 2.

``os`` is always checked (``sys.platform`` mapped to ``darwin|linux|win32``); unless the hook says
``always: true``, so are ``requires.bins`` (each on PATH and executable), ``requires.anyBins`` (at
least one), ``requires.env`` (non-empty in the process env or in ``hooks.entries.<hookKey>.env``)
and ``requires.config`` (the dot path is truthy: ``0``, ``""``, ``false``, an empty list or
map, and a missing key all fail). Config paths are looked up in the right tree: gatewayd's own
keys in its effective config, with ``hooks.internal.<x>`` read as ``hooks.<x>`` (as the config
itself folds it); any other key in the agent's own config file (``agent.configFile``), with a
reason that says which file was read, or that none is configured. ``os`` names are Node's
(``freebsd``, ``openbsd``, ...). Each failure is one reason string,
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
load's collections (bench/NOTES.md, issue 18, session 7)."""


@dataclass(frozen=True, slots=True)
class Eligibility:
    """The outcome for one hook: eligible or not, why not, and what is missing by kind."""

    eligible: bool
    reasons: list[str]
    missing: Mapping[str, Sequence[str]]
    """Keys ``bins``, ``anyBins``, ``env``, ``config``, ``os``; each a sequence (often empty;
    all empty: :data:`NOTHING_MISSING`)."""


MAX_KEY_PARTS = 16
"""The most dot-separated parts one key of a dot path is tried with (entry ``a.b`` of
``hooks.entries.a.b.x`` is two). Trying every length, a path of 100,000 parts (a HOOK.md's
``requires.config``) took minutes of the load, its time quadratic in the path's length."""


def lookup_dotted(data: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dot path, or None. A key may itself contain dots (``hooks.entries.a.b.x``
    finds entry ``a.b`` when there is one): the longest matching key wins at each level (of at
    most :data:`MAX_KEY_PARTS` parts)."""
    node: Any = data
    parts = dotted.split(".")
    i = 0
    while i < len(parts):
        if not isinstance(node, Mapping):
            return None
        for j in range(min(len(parts), i + MAX_KEY_PARTS), i, -1):
            key = ".".join(parts[i:j])
            if key in node:
                node = node[key]
                i = j
                break
        else:
            return None
    return node


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
        self._agent = agent or AgentConfigSpec()
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
                if not (self._environ.get(name) or entry.env.get(name)):
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
        path = dotted.removeprefix("hooks.internal.")
        if path != dotted:
            path = f"hooks.{path}"
        root = path.split(".", 1)[0]
        if root in self._effective or root in OWN_ROOTS:
            return None if lookup_dotted(self._effective, path) else f"Config missing: {dotted}"
        agent = self._agent
        if agent.source is None:
            return (
                f"Config missing: {dotted} (not a gatewayd key; set agent.configFile to the "
                "agent's config file, e.g. ~/.openclaw/openclaw.json, to read it from there)"
            )
        if agent.error is not None:
            return f"Config missing: {dotted} ({agent.error})"
        if not lookup_dotted(agent.data, dotted):
            return f"Config missing: {dotted} (not set, or false, in {agent.source})"
        return None
