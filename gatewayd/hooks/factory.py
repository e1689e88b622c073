"""Making one hook's handler from its file: a command, a Node stand-in, or a Python export.

:class:`HandlerFactory` serves one load (:class:`~gatewayd.hooks.loader.HookLoader` makes one
per build): it checks each file's path (inside its hook directory, links only where allowed),
imports a Python handler fresh as a module of the hook's own package, bounded by the hook's
timeout (an import that overran in an earlier try of this load fails at once), and validates the
export's signature. Every handler gets the hook's ``ctx``, timeout, priority and ``cfg`` view.
A hook that cannot be made raises :class:`LoadFailure`, whose message is the hook's reason.
"""

from __future__ import annotations

import os
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatewayd.hooks.bounded import Abandoned, Watch
from gatewayd.hooks.cfgview import hook_cfg, public_cfg
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
from gatewayd.hooks.importer import HookImporter, UnsafePathError, check_file, package_name
from gatewayd.hooks.node import JS_SUFFIXES, NodeHook
from gatewayd.hooks.schema import GatewayHandle
from gatewayd.hooks.spec import EntrySpec, LoadSpec
from gatewayd.hooks.stats import exc_text, thread_hook
from gatewayd.paths import is_inside


class LoadFailure(Exception):
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


def inspection_failure(exc: BaseException, directory: str) -> LoadFailure:
    """What hook code raised while the loader looked up and checked what its module defines (a
    module ``__getattr__``, a ``__signature__`` property): that hook's failure. Left to
    propagate, it ended the load, and ``gatewayd run`` at its start."""
    return LoadFailure(
        f"{_import_error(exc, directory)}, raised while looking up and checking its handler; "
        "make the module's __getattr__ and the handler's attributes not raise"
    )


def _export(module: types.ModuleType, export: str | None, handler_file: Path) -> tuple[Any, str]:
    """The handler callable named by ``export`` and the attribute name it came from."""
    if export in (None, "default"):
        for attr in ("handler", "default"):
            if hasattr(module, attr):
                return getattr(module, attr), attr
        raise LoadFailure(
            f"{handler_file}: defines neither 'handler' nor 'default'; add "
            "`async def handler(event):` or name the function in metadata.eliza.export"
        )
    assert export is not None
    if not hasattr(module, export):
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
        )
        raise LoadFailure(
            f"{handler_file}: export {export!r} not found (callables defined: "
            f"{', '.join(defined) or 'none'}); fix metadata.eliza.export"
        )
    return getattr(module, export), export


class HandlerFactory:
    """Makes the handlers of one load; see the module docstring."""

    def __init__(
        self,
        spec: LoadSpec,
        importer: HookImporter,
        gateway: GatewayHandle | None,
        watch: Watch,
        overruns: Mapping[str, str],
    ) -> None:
        self.spec = spec
        self.importer = importer
        self.gateway = gateway
        self.public_cfg = public_cfg(spec.effective_config)
        self.environ = types.MappingProxyType(dict(os.environ))
        self.packages: set[str] = set()
        """The packages this load imported (what the importer keeps)."""
        self.sources: dict[str, str] = {}
        """Package -> what, changed, is imported again after its import got stuck: the hook
        directory, or a single-file hook's own file."""
        self.watch = watch
        """Bounds each import (``hooks/bounded.py``)."""
        self.overruns = overruns
        """Why each package whose import overran in an earlier try of this load did, by name:
        those fail at once."""

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

    def cfg(self, hook_key: str) -> dict[str, Any]:
        """What hook ``hook_key``'s handlers see as ``cfg`` (:func:`hook_cfg`)."""
        return hook_cfg(self.public_cfg, self.spec.effective_config, hook_key)

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
        """Check paths, import, and validate the export; raise :class:`LoadFailure`.
        ``hermes_events``: a Hermes hook's event names (its ``handle`` is adapted)."""
        timeout_s = self.timeout_s(entry, own_timeout_ms)
        priority = entry.priority if entry.priority is not None else own_priority
        if priority is None:
            priority = DEFAULT_PRIORITY
        if command:
            try:
                real = check_file(handler_file, directory, allow_links=allow_links)
            except UnsafePathError as exc:
                raise LoadFailure(str(exc)) from None
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
                cfg=self.cfg(hook_key),
            )
        if handler_file.suffix in JS_SUFFIXES:
            try:
                real = check_file(handler_file, directory, allow_links=allow_links)
            except UnsafePathError as exc:
                raise LoadFailure(str(exc)) from None
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
                cfg=self.cfg(hook_key),
            )
            return node.handler
        package = package_name(self.importer.root, name, directory, kind)
        module = self.import_module(
            package, handler_file, directory, timeout_s, allow_links, hook=name
        )
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
            raise LoadFailure(str(exc)) from None
        except LoadFailure:
            raise
        except BaseException as exc:  # the hook's code again: a module __getattr__, a property
            raise inspection_failure(exc, directory) from None
        handler.cfg = self.cfg(hook_key)
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
        hook: str | None = None,
    ) -> types.ModuleType:
        """Run ``handler_file`` fresh as a module of ``package``; raise :class:`LoadFailure`.
        ``hook``: whose code runs (what its import-time log lines and prints are tagged with)."""
        self.packages.add(package)
        self.sources[package] = str(handler_file) if single_file else directory
        bound_s = timeout_s or self.spec.timeout_ms / 1000  # the hook's own timeout bounds it
        overran = self.overruns.get(package)
        if overran is not None:
            raise LoadFailure(
                f"{overran}; remove what blocks at import time (move it into the handler)"
            )
        running = thread_hook.set(hook)
        try:
            with self.watch.step(package, f"importing {handler_file}", bound_s):
                return self.importer.load(
                    package, directory, handler_file.name, allow_links=allow_links
                )
        except Abandoned:  # this try of the load was given up: unwind it, change nothing
            raise
        except UnsafePathError as exc:  # the importer checks every file it loads
            raise LoadFailure(str(exc)) from None
        except BaseException as exc:  # a hook's module code may raise anything, even SystemExit
            raise LoadFailure(f"import failed: {_import_error(exc, directory)}") from None
        finally:
            thread_hook.reset(running)


__all__ = ["HandlerFactory", "LoadFailure", "inspection_failure"]
