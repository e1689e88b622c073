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

import gc
import os
import threading
import traceback
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gatewayd.hooks.agents import SHARED, HookScope
from gatewayd.hooks.bounded import Abandoned, Overrun, Watch, run_watched
from gatewayd.hooks.cfgview import hook_cfg, public_cfg
from gatewayd.hooks.changes import Fingerprint, fingerprint
from gatewayd.hooks.discovery import Discovery, FoundHook, HookRoot, discover
from gatewayd.hooks.eligibility import NOTHING_MISSING, EligibilityChecker
from gatewayd.hooks.events import EventKeyError, parse_event_key
from gatewayd.hooks.filehooks import FileHookError, definition_of, describe, python_handlers
from gatewayd.hooks.handlers import (
    DEFAULT_PRIORITY,
    Handler,
    HandlerKind,
    HandlerSignatureError,
    HookContext,
    HookLog,
    make_handler,
)
from gatewayd.hooks.hermes import ENTRY_POINT, hermes_handler
from gatewayd.hooks.importer import (
    HookImporter,
    UnsafePathError,
    check_file,
    package_name,
    real_path,
)
from gatewayd.hooks.metadata import ManifestCache
from gatewayd.hooks.node import JS_SUFFIXES, NodeChoice, NodeHook, choose
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
from gatewayd.hooks.stats import exc_text
from gatewayd.paths import is_inside

log = structlog.get_logger("gatewayd.hooks")


class _Failure(Exception):
    """A hook that cannot be loaded; the message is its reason."""


def _where(exc: BaseException, directory: str) -> str:
    """``file:line`` of the innermost frame of ``exc`` inside the hook directory."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    inside = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if is_inside(os.path.realpath(frame.filename), directory, strict=True)
    ]
    if inside:
        return f"{inside[-1].filename}:{inside[-1].lineno}"
    return directory


def _import_error(exc: BaseException, directory: str) -> str:
    if isinstance(exc, SyntaxError):
        return f"{_where(exc, directory)}: SyntaxError: {exc.msg}"
    where, kind, detail = _where(exc, directory), type(exc).__name__, exc_text(exc)
    return f"{where}: {kind}: {detail}" if detail else f"{where}: {kind}"


def _inspection_failure(exc: BaseException, directory: str) -> _Failure:
    """What hook code raised while the loader looked up and checked what its module defines (a
    module ``__getattr__``, a ``__signature__`` property): that hook's failure. Left to
    propagate, it ended the load, and ``gatewayd run`` at its start."""
    return _Failure(
        f"{_import_error(exc, directory)}, raised while looking up and checking its handler; "
        "make the module's __getattr__ and the handler's attributes not raise"
    )


def _export(module: types.ModuleType, export: str | None, handler_file: Path) -> tuple[Any, str]:
    """The handler callable named by ``export`` and the attribute name it came from."""
    if export in (None, "default"):
        for attr in ("handler", "default"):
            if hasattr(module, attr):
                return getattr(module, attr), attr
        raise _Failure(
            f"{handler_file}: defines neither 'handler' nor 'default'; add "
            "`async def handler(event):` or name the function in metadata.eliza.export"
        )
    assert export is not None
    if not hasattr(module, export):
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
        )
        raise _Failure(
            f"{handler_file}: export {export!r} not found (callables defined: "
            f"{', '.join(defined) or 'none'}); fix metadata.eliza.export"
        )
    return getattr(module, export), export


class _Builder:
    """State for one :func:`build_hooks` call: the config, once-computed inputs, the records."""

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
        self.gateway = gateway
        self.checker = EligibilityChecker(spec.effective_config, agent=spec.agent)
        self.public_cfg = public_cfg(spec.effective_config)
        self.environ = types.MappingProxyType(dict(os.environ))
        self.packages: set[str] = set()
        self.sources: dict[str, str] = {}
        """Package -> what, changed, is imported again after its import got stuck: the hook
        directory, or a single-file hook's own file."""
        self.records: list[HookRecord] = []
        self.node: NodeChoice | None = None
        self.js_files: list[Path] = []
        self.node_records: dict[Handler, HookRecord] = {}
        self.handlers: list[tuple[Handler, Sequence[str]]] = []
        self.eligible = 0
        self.watch = watch
        """Bounds each import (``hooks/bounded.py``)."""
        self.overruns = overruns
        """Why each package whose import overran in an earlier try of this load did, by name:
        those fail at once."""

    # -- one hook ---------------------------------------------------------------------------

    def context(self, name: str, hook_key: str, entry: EntrySpec) -> HookContext:
        env: Mapping[str, str] = self.environ
        if entry.env:
            env = types.MappingProxyType({**self.environ, **entry.env})
        return HookContext(
            hook_name=name,
            hook_key=hook_key,
            config=entry.settings,
            env=env,
            log=HookLog(name),
            state_dir=self.spec.state_dir,
            workspace_dir=self.spec.workspace_dir,
            gateway=self.gateway,
        )

    def timeout_s(self, entry: EntrySpec, own_ms: int | None) -> float | None:
        ms = entry.timeout_ms if entry.timeout_ms is not None else own_ms
        return ms / 1000 if ms is not None else None

    def make(
        self,
        *,
        name: str,
        hook_key: str,
        entry: EntrySpec,
        handler_file: Path,
        directory: str,
        command: bool,
        export: str | None,
        own_timeout_ms: int | None,
        source: str,
        allow_links: bool,
        kind: str,
        own_priority: int | None = None,
        background: bool = False,
        hermes_events: tuple[str, ...] | None = None,
    ) -> Handler:
        """Check paths, import, and validate the export; raise :class:`_Failure`.
        ``hermes_events``: a Hermes hook's event names (its ``handle`` is adapted)."""
        timeout_s = self.timeout_s(entry, own_timeout_ms)
        priority = entry.priority if entry.priority is not None else own_priority
        if priority is None:
            priority = DEFAULT_PRIORITY
        if command:
            try:
                real = check_file(handler_file, directory, allow_links=allow_links)
            except UnsafePathError as exc:
                raise _Failure(str(exc)) from None
            return Handler(
                hook=name,
                hook_key=hook_key,
                kind=HandlerKind.COMMAND,
                ctx=self.context(name, hook_key, entry),
                command=Path(real),
                env=dict(entry.env),
                timeout_s=timeout_s,
                priority=priority,
                background=background,
                source=source,
                cfg=hook_cfg(self.public_cfg, self.spec.effective_config, hook_key),
            )
        if handler_file.suffix in JS_SUFFIXES:
            try:
                real = check_file(handler_file, directory, allow_links=allow_links)
            except UnsafePathError as exc:
                raise _Failure(str(exc)) from None
            node = NodeHook(name, Path(real), export, hook_key)
            node.handler = Handler(
                hook=name,
                hook_key=hook_key,
                kind=HandlerKind.NODE,
                ctx=self.context(name, hook_key, entry),
                node=node,
                env=dict(entry.env),
                timeout_s=timeout_s,
                priority=priority,
                background=background,
                source=source,
                cfg=hook_cfg(self.public_cfg, self.spec.effective_config, hook_key),
            )
            return node.handler
        package = package_name(self.importer.root, name, directory, kind)
        module = self.import_module(package, handler_file, directory, timeout_s, allow_links)
        if hermes_events is not None:
            export = export or ENTRY_POINT
        try:
            fn, attr = _export(module, export, handler_file)
            if hermes_events is not None:
                fn = hermes_handler(fn, hermes_events, str(handler_file))
            handler = make_handler(
                fn,
                hook=name,
                hook_key=hook_key,
                where=f"{handler_file}: export {attr!r}",
                ctx=lambda: self.context(name, hook_key, entry),
                timeout_s=timeout_s,
                priority=priority,
                background=background,
                source=source,
            )
        except HandlerSignatureError as exc:
            raise _Failure(str(exc)) from None
        except _Failure:
            raise
        except BaseException as exc:  # the hook's code again: a module __getattr__, a property
            raise _inspection_failure(exc, directory) from None
        handler.cfg = hook_cfg(self.public_cfg, self.spec.effective_config, hook_key)
        return handler

    def import_module(
        self,
        package: str,
        handler_file: Path,
        directory: str,
        timeout_s: float | None,
        allow_links: bool,
        *,
        single_file: bool = False,
    ) -> types.ModuleType:
        """Run ``handler_file`` fresh as a module of ``package``; raise :class:`_Failure`."""
        self.packages.add(package)
        self.sources[package] = str(handler_file) if single_file else directory
        bound_s = timeout_s or self.spec.timeout_ms / 1000  # the hook's own timeout bounds it
        overran = self.overruns.get(package)
        if overran is not None:
            raise _Failure(
                f"{overran}; remove what blocks at import time (move it into the handler)"
            )
        try:
            with self.watch.step(package, f"importing {handler_file}", bound_s):
                return self.importer.load(
                    package, directory, handler_file.name, allow_links=allow_links
                )
        except Abandoned:  # this try of the load was given up: unwind it, change nothing
            raise
        except UnsafePathError as exc:  # the importer checks every file it loads
            raise _Failure(str(exc)) from None
        except BaseException as exc:  # a hook's module code may raise anything, even SystemExit
            raise _Failure(f"import failed: {_import_error(exc, directory)}") from None

    def add_file(
        self,
        hook: FoundHook,
        record: HookRecord,
        entry: EntrySpec,
        allowed_roots: list[str],
        scope: HookScope,
    ) -> None:
        """A single-file hook (``filehooks.py``): a Python one is imported here and gets one
        handler per events-map entry; a JS/TS one gets a stand-in that the Node worker's import
        replaces with its entries (``node/loading.py``)."""
        name, file = record.name, hook.path
        allow_links = hook.root.source == "bundled"
        try:
            if hook.handler is None:
                raise _Failure(hook.handler_problem or f"{file}: not a hook file")
            try:
                real = real_path(file, hook.root.path, hook.root.real)[0]
            except OSError as exc:
                raise _Failure(f"{file}: cannot stat: {exc.strerror or exc}") from None
            if not any(is_inside(real, root, strict=True) for root in allowed_roots):
                raise _Failure(
                    f"{file}: resolves to {real}, outside every hook root; "
                    "move the file into a hook root instead of linking to it"
                )
            directory = os.path.dirname(real)
            try:
                check_file(real, directory, allow_links=allow_links)
            except UnsafePathError as exc:
                raise _Failure(str(exc)) from None
            ctx = self.context(name, record.hook_key, entry)
            timeout_s = self.timeout_s(entry, None)
            priority = entry.priority if entry.priority is not None else DEFAULT_PRIORITY
            cfg = hook_cfg(self.public_cfg, self.spec.effective_config, record.hook_key)
            if file.suffix in JS_SUFFIXES:
                node = NodeHook(name, Path(real), None, record.hook_key, events=True)
                node.handler = Handler(
                    hook=name,
                    hook_key=record.hook_key,
                    kind=HandlerKind.NODE,
                    ctx=ctx,
                    node=node,
                    env=dict(entry.env),
                    timeout_s=timeout_s,
                    priority=priority,
                    source=hook.root.source,
                    cfg=cfg,
                    scope=scope,
                )
                self.handlers.append((node.handler, []))
                self.node_records[node.handler] = record
                return
            package = package_name(self.importer.root, name, real, "file")
            module = self.import_module(
                package, file, directory, timeout_s, allow_links, single_file=True
            )
            try:
                definition = definition_of(module, file)
                built = python_handlers(
                    definition, name, ctx, timeout_s, priority, hook.root.source, str(file)
                )
            except (FileHookError, HandlerSignatureError) as exc:
                raise _Failure(str(exc)) from None
            except BaseException as exc:  # the hook's code: a module __getattr__, a property
                raise _inspection_failure(exc, directory) from None
        except _Failure as exc:
            record.status, record.reasons = "failed", [str(exc)]
            return
        describe(record, list(definition.events), definition.description)
        if not definition.events:
            record.status, record.reasons = "skipped", [f"{file}: its events map is empty"]
            return
        for handler, keys in built:
            handler.cfg, handler.scope = cfg, scope
            self.handlers.append((handler, keys))

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
                raise _Failure(hook.handler_problem or "no handler")
            try:
                directory, dir_st = real_path(hook.path, hook.root.path, hook.root.real)
            except OSError as exc:
                raise _Failure(f"{hook.path}: cannot stat: {exc.strerror or exc}") from None
            own_root = os.fspath(directory) == os.fspath(hook.root.real)  # an extra dir hook
            if not own_root and not any(
                is_inside(directory, root, strict=True) for root in allowed_roots
            ):
                raise _Failure(
                    f"{hook.path}: resolves to {directory}, outside every hook root; "
                    "move the hook directory into a hook root instead of linking to it"
                )
            self.importer.note_dir(directory, dir_st)
            handler = self.make(
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
        except _Failure as exc:
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
                raise _Failure(
                    f"{where}.module: {spec.module} resolves to {real}, outside the managed, "
                    "bundled and workspace hook roots ("
                    + ", ".join(str(r.real) for r in allowed)
                    + "); move the module into one of them"
                )
            if not real.is_file():
                raise _Failure(f"{where}.module: {path} does not exist or is not a file")
            command = real.suffix != ".py" and real.suffix not in JS_SUFFIXES
            if command and not os.access(real, os.X_OK):
                raise _Failure(
                    f"{where}.module: {path} is neither a .py, .ts, .js or .mjs file "
                    "nor an executable"
                )
            if refusal := self.node_refusal(real):
                raise _Failure(refusal)
            handler = self.make(
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
        except _Failure as exc:
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
        with self._lock:
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
                return builder.build(), builder.packages

            # Each try runs in a thread of its own with its imports bounded; when one overruns,
            # that try is abandoned and the load tried again, failing that hook at once.
            try:
                while isinstance(outcome := run_watched(attempt), Overrun):
                    overruns[outcome.key] = outcome.message
                    if (sources := builders[-1].sources.get(outcome.key)) is not None:
                        self._stuck[outcome.key] = _StuckImport(
                            outcome, sources, fingerprint(sources, deep=True)
                        )
            except BaseException:
                self.importer.safe_dirs = None  # as retain() does: the load is over
                raise
            result, packages = outcome
            # The previous generation's modules are cycles (functions <-> module dicts);
            # collect them now rather than whenever the allocator decides to. A first load
            # has none: a full collection there was 20-35 ms of a cold load of 1,000 hooks.
            if self.importer.retain(packages):
                gc.collect()
            return result

    def load(self, spec: LoadSpec, registry: HookRegistry) -> LoadResult:
        """:meth:`build` then :meth:`LoadResult.apply`; logs one ``hooks.loaded`` summary."""
        result = self.build(spec)
        result.apply(registry, spec)
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
