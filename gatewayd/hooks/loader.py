"""Loading hooks: discover -> check -> enable -> path safety -> import -> validate -> register.

:func:`build_hooks` does all of it for one config and returns a :class:`LoadResult` without
touching any registry, so the daemon can run it in a worker thread and then
:meth:`LoadResult.apply` it on the event loop in one atomic swap. :func:`load_hooks` is both
steps plus the log lines. :func:`hooks_listing` is the ``gatewayd hooks list --json`` document
(also the control channel's ``hooks`` op).

Every hook found gets a :class:`HookRecord` with one status, checked in this order:

``invalid``    HOOK.md unreadable or a field of the wrong type (reasons name file and field);
``shadowed``   a later root, or an earlier sibling in the same root, has the same name;
``ineligible`` an ``os`` / ``requires`` check failed (reasons as in ``eligibility.py``);
``disabled``   ``hooks.entries.<hookKey>.enabled: false``, or ``hooks.enabled: false``;
``skipped``    no events: its code is never imported;
``failed``     no handler, an unsafe path, its module raised, or the export is wrong;
``ready``      registered.

``skipped`` in the summary lists the invalid, shadowed, ineligible, disabled and event-less hooks;
``failed`` lists the failed ones: ``discovered == registered + len(skipped) + len(failed)``.

Legacy handlers listed in ``hooks.handlers`` (``{event, module, export}``) load the same way with
source ``config``; their module must resolve inside the managed, bundled or workspace hook root.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from gatewayd.hooks.agents import SHARED, HookScope
from gatewayd.hooks.bounded import Overrun, Watch, run_watched
from gatewayd.hooks.changes import Fingerprint, fingerprint
from gatewayd.hooks.collector import collect_replaced, full_collections_deferred
from gatewayd.hooks.discovery import Discovery, FoundHook, HookRoot, discover
from gatewayd.hooks.eligibility import NOTHING_MISSING, EligibilityChecker
from gatewayd.hooks.events import EventKeyError, parse_event_key
from gatewayd.hooks.factory import HandlerFactory, LoadFailure
from gatewayd.hooks.filehooks import file_hook_handlers
from gatewayd.hooks.handlers import (
    Handler,
    HandlerKind,
)
from gatewayd.hooks.importer import (
    HookImporter,
    real_path,
)
from gatewayd.hooks.metadata import ManifestCache
from gatewayd.hooks.node import JS_SUFFIXES, NodeChoice, choose
from gatewayd.hooks.notices import no_events_reason, opt_in_reason, shadowing_warnings
from gatewayd.hooks.records import (
    SKIPPED_STATUSES,
    HookRecord,
    LoadResult,
    agents_summary,
    hooks_listing,
    serving_records,
)
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.schema import GatewayHandle
from gatewayd.hooks.spec import EntrySpec, LegacyHandlerSpec, LoadSpec
from gatewayd.paths import is_inside

log = structlog.get_logger("gatewayd.hooks")


class _Builder:
    """One build: the records of every hook found, the handlers of the ready ones."""

    def __init__(
        self,
        spec: LoadSpec,
        importer: HookImporter,
        manifests: ManifestCache,
        gateway: GatewayHandle | None,
        watch: Watch,
        overruns: Mapping[str, str],
    ) -> None:
        self.spec = spec
        self.importer = importer
        self.manifests = manifests
        self.checker = EligibilityChecker(spec.effective_config, agent=spec.agent)
        self.factory = HandlerFactory(spec, importer, gateway, watch, overruns)
        self.records: list[HookRecord] = []
        self.node: NodeChoice | None = None
        self.js_files: list[Path] = []
        self.node_records: dict[Handler, HookRecord] = {}
        self.handlers: list[tuple[Handler, Sequence[str]]] = []
        self.eligible = 0

    def add_file(
        self,
        hook: FoundHook,
        record: HookRecord,
        entry: EntrySpec,
        allowed_roots: list[str],
        scope: HookScope,
    ) -> None:
        """A single-file hook (:func:`~gatewayd.hooks.filehooks.file_hook_handlers`)."""
        try:
            built = file_hook_handlers(self.factory, hook, record, entry, allowed_roots, scope)
        except LoadFailure as exc:
            record.status, record.reasons = "failed", [str(exc)]
            return
        for handler, keys in built:
            self.handlers.append((handler, keys))
            if handler.kind is HandlerKind.NODE:
                self.node_records[handler] = record

    def add_found(self, hook: FoundHook, allowed_roots: list[str]) -> None:
        manifest = hook.manifest
        hooks_enabled = self.spec.enabled
        root = hook.root
        if manifest is None:
            entry = self.spec.entry(hook.name)
            self.records.append(
                HookRecord(
                    name=hook.name,
                    hook_key=hook.name,
                    agent=root.agent,
                    subagent=root.subagent,
                    description="",
                    emoji=None,
                    source=hook.root.source,
                    path=str(hook.path),
                    handler=str(hook.handler) if hook.handler else None,
                    events=[],
                    status="invalid",
                    eligible=False,
                    enabled=entry.enabled and hooks_enabled,
                    reasons=list(hook.errors),
                    missing=NOTHING_MISSING,
                )
            )
            return
        name, hook_key = hook.name, hook.hook_key
        entry = self.spec.entry(hook_key)
        check = self.checker.check(manifest, entry)
        opted_out = not manifest.enabled and not entry.explicit
        enabled = entry.enabled and hooks_enabled and not opted_out
        restriction = entry.agents if entry.agents is not None else manifest.agents
        scope = SHARED
        if root.agent is not None or restriction is not None:
            # Only a hook that is not shared gets a scope of its own: the registry plans per
            # agent once any handler's scope `is not SHARED` (registry.set_file_hooks).
            scope = HookScope(
                agent=root.agent,
                subagent=root.subagent,
                agents=frozenset(restriction) if restriction is not None else None,
                replaces=manifest.name if root.qualifier else None,
            )
        record = HookRecord(
            name=name,
            hook_key=hook_key,
            agent=root.agent,
            subagent=root.subagent,
            agents=sorted(restriction) if restriction is not None else None,
            description=manifest.description,
            emoji=manifest.emoji,
            source=hook.root.source,
            path=str(hook.path),
            handler=str(hook.handler) if hook.handler else None,
            events=list(manifest.events),
            status="ready",
            eligible=check.eligible,
            enabled=enabled,
            reasons=[],
            missing=check.missing,
            warnings=list(manifest.warnings),
        )
        self.records.append(record)
        if hook.shadowed_by:
            record.status, record.reasons = "shadowed", [hook.shadowed_by]
            return
        node_refusal = self.node_refusal(hook.handler)
        if check.eligible and node_refusal is None:
            self.eligible += 1
        else:
            record.status, record.eligible = "ineligible", False
            record.reasons = [*check.reasons, *([node_refusal] if node_refusal else [])]
            if not entry.enabled:  # enabling it alone would not make it run: say both
                record.reasons.append("disabled in config")
            return
        if not hooks_enabled:
            record.status = "disabled"
            record.reasons = [f"{self.spec.enabled_key} is false: no file hooks are loaded"]
            return
        if not entry.enabled:
            record.status, record.reasons = "disabled", ["disabled in config"]
            return
        if opted_out:
            record.status, record.reasons = "disabled", [opt_in_reason(hook_key)]
            return
        if hook.single_file:
            self.add_file(hook, record, entry, allowed_roots, scope)
            return
        if not manifest.events:
            record.status, record.reasons = "skipped", [no_events_reason(manifest)]
            return
        try:
            if hook.handler is None:
                raise LoadFailure(hook.handler_problem or "no handler")
            try:
                directory, dir_st = real_path(hook.path, hook.root.path, hook.root.real)
            except OSError as exc:
                raise LoadFailure(f"{hook.path}: cannot stat: {exc.strerror or exc}") from None
            own_root = os.fspath(directory) == os.fspath(hook.root.real)  # an extra dir hook
            if not own_root and not any(
                is_inside(directory, root, strict=True) for root in allowed_roots
            ):
                raise LoadFailure(
                    f"{hook.path}: resolves to {directory}, outside every hook root; "
                    "move the hook directory into a hook root instead of linking to it"
                )
            self.importer.note_dir(directory, dir_st)
            handler = self.factory.make(
                name=name,
                hook_key=hook_key,
                entry=entry,
                handler_file=hook.handler,
                directory=directory,
                command=hook.command,
                export=manifest.export,
                own_timeout_ms=manifest.timeout_ms,
                own_priority=manifest.priority,
                background=manifest.background,
                source=hook.root.source,
                allow_links=hook.root.source == "bundled",
                kind="hook",
                hermes_events=manifest.events if manifest.hermes else None,
            )
        except LoadFailure as exc:
            record.status, record.reasons = "failed", [str(exc)]
            return
        handler.scope = scope
        self.handlers.append((handler, manifest.keys))
        if handler.kind is HandlerKind.NODE:
            self.node_records[handler] = record

    def add_legacy(self, index: int, spec: LegacyHandlerSpec, roots: list[HookRoot]) -> None:
        """A ``hooks.handlers[index]`` entry: must lie inside managed, bundled or workspace."""
        where = f"hooks.handlers[{index}]"
        path = Path(os.path.expanduser(spec.module))
        if not path.is_absolute():
            config_file = self.spec.config_file
            base = config_file.parent if config_file else self.spec.state_dir
            path = base / path
        name = f"{path.parent.name}/{path.stem}"
        hooks_enabled = self.spec.enabled
        entry = self.spec.entry(name)
        record = HookRecord(
            name=name,
            hook_key=name,
            description=f"{where}: {spec.module}",
            emoji=None,
            source="config",
            path=str(path.parent),
            handler=str(path),
            events=[spec.event],
            status="ready",
            eligible=True,
            enabled=entry.enabled and hooks_enabled,
            reasons=[],
            missing=NOTHING_MISSING,
        )
        self.records.append(record)
        self.eligible += 1
        try:
            parse_event_key(spec.event)
        except EventKeyError as exc:
            record.status, record.eligible = "invalid", False
            record.reasons = [f"{where}.event: {exc}"]
            self.eligible -= 1
            return
        if not record.enabled:
            record.status = "disabled"
            record.reasons = (
                ["disabled in config"]
                if hooks_enabled
                else [f"{self.spec.enabled_key} is false: no file hooks are loaded"]
            )
            return
        real = Path(os.path.realpath(path))
        allowed = [r for r in roots if r.source in ("managed", "bundled", "workspace")]
        root = next((r for r in allowed if real.is_relative_to(r.real) and real != r.real), None)
        try:
            if root is None:
                raise LoadFailure(
                    f"{where}.module: {spec.module} resolves to {real}, outside the managed, "
                    "bundled and workspace hook roots ("
                    + ", ".join(str(r.real) for r in allowed)
                    + "); move the module into one of them"
                )
            if not real.is_file():
                raise LoadFailure(f"{where}.module: {path} does not exist or is not a file")
            command = real.suffix != ".py" and real.suffix not in JS_SUFFIXES
            if command and not os.access(real, os.X_OK):
                raise LoadFailure(
                    f"{where}.module: {path} is neither a .py, .ts, .js or .mjs file "
                    "nor an executable"
                )
            if refusal := self.node_refusal(real):
                raise LoadFailure(refusal)
            handler = self.factory.make(
                name=name,
                hook_key=name,
                entry=entry,
                handler_file=real,
                directory=str(real.parent),
                command=command,
                export=spec.export,
                own_timeout_ms=None,
                source="config",
                allow_links=root.source == "bundled",
                kind="legacy",
            )
        except LoadFailure as exc:
            record.status, record.reasons = "failed", [str(exc)]
            return
        self.handlers.append((handler, [spec.event]))
        if handler.kind is HandlerKind.NODE:
            self.node_records[handler] = record

    # -- the whole load ---------------------------------------------------------------------

    def node_refusal(self, handler_file: Path | None) -> str | None:
        """Why no Node here can run ``handler_file`` (None: it can, or it is not JS/TS)."""
        if handler_file is None or handler_file.suffix not in JS_SUFFIXES:
            return None
        if self.node is None:
            node = self.spec.node
            self.node = choose(self.js_files, node.path, node.wheel)
        return self.node.refusal(handler_file)

    def build(self) -> LoadResult:
        found: Discovery = discover(self.spec, self.manifests)
        # Node is looked for (and asked its version) only when a hook needs it.
        self.js_files = [
            h.handler
            for h in found.hooks
            if h.handler is not None and h.handler.suffix in JS_SUFFIXES and not h.shadowed_by
        ] + [Path(h.module) for h in self.spec.handlers if Path(h.module).suffix in JS_SUFFIXES]
        allowed_roots = [str(root.real) for root in found.roots]
        for hook in found.hooks:
            self.add_found(hook, allowed_roots)
        for record, warning in shadowing_warnings(found.hooks, self.records):
            record.warnings.append(warning)
        for index, legacy in enumerate(self.spec.handlers):
            self.add_legacy(index, legacy, found.roots)
        skipped = [r.summary_line() for r in self.records if r.status in SKIPPED_STATUSES]
        failed = [r.summary_line() for r in self.records if r.status == "failed"]
        return LoadResult(
            discovered=len(self.records),
            eligible=self.eligible,
            registered=sum(r.status == "ready" for r in self.records),
            skipped=skipped,
            failed=failed,
            records=self.records,
            handlers=self.handlers,
            rejected_roots=found.rejected_roots,
            not_hooks=found.not_hooks,
            node_binary=self.node.binary if self.node is not None else None,
            node_records=self.node_records,
        )


@dataclass(frozen=True, slots=True)
class _StuckImport:
    """A hook import that overran: its thread may run in it for good (Python cannot stop it)."""

    overrun: Overrun
    sources: str
    """The hook's directory, or a single-file hook's file."""
    stamp: Fingerprint
    """``fingerprint(sources, deep=True)`` when it overran."""

    @property
    def message(self) -> str:
        return (
            f"{self.overrun.message} in an earlier load, and still runs (imported again once a "
            "file of the hook changes)"
        )

    def holds(self) -> bool:
        """Whether a load should still fail the hook rather than import it again: its thread
        still runs and no file of the hook changed since."""
        if self.overrun.watch.finished:
            return False
        return fingerprint(self.sources, deep=True) == self.stamp


class HookLoader:
    """Loads one gateway's hooks from disk.

    It owns what outlives a single load: the importer holding the hooks' modules (one package
    per hook, replaced on every load) and the cache of parsed HOOK.md files. A gateway has one;
    so does each ``gatewayd hooks`` command. :meth:`close` forgets every module it loaded.
    """

    def __init__(self, *, gateway: GatewayHandle | None = None) -> None:
        self.gateway = gateway
        """What handlers get as ``ctx.gateway`` (``None`` outside a running daemon)."""
        self.importer = HookImporter()
        self.manifests = ManifestCache()
        self._stuck: dict[str, _StuckImport] = {}
        """Imports that overran, by package, whose abandoned thread may still run in them."""
        self._lock = threading.Lock()  # one build at a time: they share the importer

    def build(self, spec: LoadSpec) -> LoadResult:
        """Discover, check and import the hooks ``spec`` names; touches no registry.

        Safe to call from a worker thread (builds are serialized). With ``hooks.enabled:
        false`` every hook is still listed (status ``disabled``) but nothing is imported or
        returned to register. A hook's failure is its record's status and reason; this never
        raises for one.
        """
        with self._lock, full_collections_deferred():
            self.importer.install()
            # An import that overran is not started again while its thread still runs in it
            # and the hook's files are as they were: each load added one more thread stuck
            # for good (spinning ones took the CPU with them). A saved edit tries it again.
            self._stuck = {k: v for k, v in self._stuck.items() if v.holds()}
            overruns = {key: stuck.message for key, stuck in self._stuck.items()}

            builders: list[_Builder] = []

            def attempt(watch: Watch) -> tuple[LoadResult, set[str]]:
                builder = _Builder(
                    spec, self.importer, self.manifests, self.gateway, watch, overruns
                )
                builders.append(builder)
                return builder.build(), builder.factory.packages

            # Each try runs in a thread of its own with its imports bounded; when one overruns,
            # that try is abandoned and the load tried again, failing that hook at once.
            try:
                while isinstance(outcome := run_watched(attempt), Overrun):
                    overruns[outcome.key] = outcome.message
                    if (sources := builders[-1].factory.sources.get(outcome.key)) is not None:
                        self._stuck[outcome.key] = _StuckImport(
                            outcome, sources, fingerprint(sources, deep=True)
                        )
            except BaseException:
                self.importer.safe_dirs = None  # as retain() does: the load is over
                raise
            result, packages = outcome
            # The replaced generation's modules are cycles (functions <-> module dicts), freed
            # by collect_replaced() once the caller has swapped this load in.
            self.importer.retain(packages)
            return result

    def load(self, spec: LoadSpec, registry: HookRegistry) -> LoadResult:
        """:meth:`build` then :meth:`LoadResult.apply`; logs one ``hooks.loaded`` summary."""
        result = self.build(spec)
        result.apply(registry, spec)
        collect_replaced()
        return result

    def close(self) -> None:
        """Forget every hook module this loader imported."""
        with self._lock:
            self.importer.close()


__all__ = [
    "SKIPPED_STATUSES",
    "HookLoader",
    "HookRecord",
    "LoadResult",
    "agents_summary",
    "hooks_listing",
    "serving_records",
]
"""The records and documents of a load live in :mod:`gatewayd.hooks.records`; they are
importable from here too, with the loader that makes them."""
