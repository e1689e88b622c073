"""Single-file hooks, the gateway's side: from a loaded file to one handler per events-map entry.

``filescan.py`` finds the files and ``loader.py`` checks them like any hook (same statuses,
eligibility, config entry, timeouts, live reload); :func:`file_hook_handlers` makes each one's
handlers (its paths checked and its module imported by the load's
:class:`~gatewayd.hooks.factory.HandlerFactory`). Then, per file:

* Python: :func:`definition_of` takes the module's ``hook`` (a
  :class:`~gatewayd.hooks.define.HookDefinition`) and :func:`python_handlers` makes one handler
  per entry, registered for the keys its event name stands for (``vocabulary.resolve``); a
  handler that takes ``ctx`` gets an :class:`~gatewayd.hooks.define.EventContext` made per event.
* JS/TS: the Node worker imports the file and answers with its events map's names;
  :func:`expand_node_hook` then replaces the load's stand-in handler with one per entry, each
  calling that entry in the worker (``NodeSubscription``).

Every handler of one file carries the file's hook name, so they share its counters and status;
for one event they run in the registry's order: the exact key, then the type, then ``*``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gatewayd.hooks.agents import HookScope
from gatewayd.hooks.define import HookDefinition, event_context
from gatewayd.hooks.discovery import FoundHook
from gatewayd.hooks.factory import HandlerFactory, LoadFailure, inspection_failure
from gatewayd.hooks.handlers import (
    DEFAULT_PRIORITY,
    Handler,
    HandlerKind,
    HandlerSignatureError,
    HookContext,
    make_handler,
)
from gatewayd.hooks.importer import UnsafePathError, check_file, package_name, real_path
from gatewayd.hooks.node import JS_SUFFIXES, NodeHook
from gatewayd.hooks.node.hook import NodeSubscription
from gatewayd.hooks.spec import EntrySpec
from gatewayd.hooks.vocabulary import resolve, resolve_all
from gatewayd.paths import is_inside

if TYPE_CHECKING:
    from gatewayd.hooks.records import HookRecord, LoadResult


class FileHookError(Exception):
    """A single-file hook whose module does not define a usable events map."""


def definition_of(module: Any, file: Path) -> HookDefinition:
    """The module's ``hook = define_hook(events={...})``; raise :class:`FileHookError`."""
    found = getattr(module, "hook", None)
    if isinstance(found, HookDefinition):
        return found
    elsewhere = [n for n, v in vars(module).items() if isinstance(v, HookDefinition)]
    if elsewhere:
        raise FileHookError(
            f"{file}: define_hook(...) is assigned to {elsewhere[0]!r}; name it `hook` "
            "(hook = define_hook(events={...}))"
        )
    what = "no `hook`" if found is None else f"`hook` is a {type(found).__name__}"
    raise FileHookError(
        f"{file}: {what}; a single-file hook defines `hook = define_hook(events={{...}})` "
        "(from gatewayd.hooks import define_hook), or move the file out of the hook root if "
        "it is a helper"
    )


def _with_event_context(fn: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """``fn(event, ctx)`` called with the per-event :class:`EventContext`."""
    if is_async:

        async def call_async(event: Any, ctx: HookContext) -> Any:
            return await fn(event, event_context(event, ctx))

        return call_async

    def call(event: Any, ctx: HookContext) -> Any:
        return fn(event, event_context(event, ctx))

    return call


def python_handlers(
    definition: HookDefinition,
    name: str,
    ctx: HookContext,
    timeout_s: float | None,
    priority: int,
    source: str,
    file: str,
) -> list[tuple[Handler, list[str]]]:
    """One handler per events-map entry with the keys it runs on (entries whose name maps to
    nothing here get none: their warning says why). Raises ``HandlerSignatureError``."""
    built: list[tuple[Handler, list[str]]] = []
    for written, fn in definition.events.items():
        options: dict[str, Any] = {
            "hook": name,
            "hook_key": ctx.hook_key,
            "ctx": ctx,
            "timeout_s": timeout_s,
            "priority": priority,
            "source": source,
        }
        checked = make_handler(fn, where=f"{file}: events[{written!r}]", **options)
        if checked.takes_ctx:
            wrapped = _with_event_context(fn, checked.kind is HandlerKind.ASYNC)
            checked = make_handler(wrapped, where=f"{file}: events[{written!r}]", **options)
        keys = list(resolve(written).keys)
        if keys:
            built.append((checked, keys))
    return built


def file_hook_handlers(
    factory: HandlerFactory,
    hook: FoundHook,
    record: HookRecord,
    entry: EntrySpec,
    allowed_roots: list[str],
    scope: HookScope,
) -> list[tuple[Handler, list[str]]]:
    """A single-file hook's handlers with their event keys: a Python one is imported here and
    gets one per events-map entry; a JS/TS one a stand-in (no keys) that the Node worker's
    import replaces with its entries (:func:`expand_node_hook`). Describes ``record`` from the
    events map (``skipped`` when it is empty); raises :class:`LoadFailure` with the reason."""
    name, file = record.name, hook.path
    allow_links = hook.root.source == "bundled"
    if hook.handler is None:
        raise LoadFailure(hook.handler_problem or f"{file}: not a hook file")
    try:
        real = real_path(file, hook.root.path, hook.root.real)[0]
    except OSError as exc:
        raise LoadFailure(f"{file}: cannot stat: {exc.strerror or exc}") from None
    if not any(is_inside(real, root, strict=True) for root in allowed_roots):
        raise LoadFailure(
            f"{file}: resolves to {real}, outside every hook root; "
            "move the file into a hook root instead of linking to it"
        )
    directory = os.path.dirname(real)
    try:
        check_file(real, directory, allow_links=allow_links)
    except UnsafePathError as exc:
        raise LoadFailure(str(exc)) from None
    ctx = factory.context(name, record.hook_key, entry)
    timeout_s = factory.timeout_s(entry, None)
    priority = entry.priority if entry.priority is not None else DEFAULT_PRIORITY
    cfg = factory.cfg(record.hook_key)
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
        return [(node.handler, [])]
    package = package_name(factory.importer.root, name, real, "file")
    module = factory.import_module(
        package, file, directory, timeout_s, allow_links, single_file=True, hook=name
    )
    try:
        definition = definition_of(module, file)
        built = python_handlers(
            definition, name, ctx, timeout_s, priority, hook.root.source, str(file)
        )
    except (FileHookError, HandlerSignatureError) as exc:
        raise LoadFailure(str(exc)) from None
    except BaseException as exc:  # the hook's code: a module __getattr__, a property
        raise inspection_failure(exc, directory) from None
    describe(record, list(definition.events), definition.description)
    if not definition.events:
        record.status, record.reasons = "skipped", [f"{file}: its events map is empty"]
        return []
    for handler, _ in built:
        handler.cfg, handler.scope = cfg, scope
    return built


def describe(record: HookRecord, events: Sequence[str], description: str) -> None:
    """Put what the file defines on its record: the events as written, their warnings."""
    record.events = list(events)
    record.description = description
    record.warnings.extend(resolve_all(list(events))[1])


def expand_node_hook(result: LoadResult, stand_in: Handler) -> None:
    """Replace a JS/TS single-file hook's stand-in handler with one per events-map entry the
    worker found (``stand_in.node.events_found``), each bound to its entry."""
    node = stand_in.node
    record = result.node_records.pop(stand_in)
    describe(record, node.events_found, node.description)
    index = next(i for i, (h, _) in enumerate(result.handlers) if h is stand_in)
    expanded: list[tuple[Handler, list[str]]] = []
    for entry, written in enumerate(node.events_found):
        keys = list(resolve(written).keys)
        if not keys:
            continue
        subscription = NodeSubscription(node, entry)
        handler = Handler(
            hook=stand_in.hook,
            hook_key=stand_in.hook_key,
            kind=HandlerKind.NODE,
            ctx=stand_in.ctx,
            node=subscription,
            env=stand_in.env,
            timeout_s=stand_in.timeout_s,
            priority=stand_in.priority,
            source=stand_in.source,
            cfg=stand_in.cfg,
            scope=stand_in.scope,
        )
        subscription.handler = handler
        expanded.append((handler, keys))
        result.node_records[handler] = record
    result.handlers[index : index + 1] = expanded
    if expanded:
        node.handler = expanded[0][0]  # what the worker's load errors and timeouts count on
    if not node.events_found:
        record.status, record.reasons = "skipped", [f"{node.file}: its events map is empty"]
        result.skipped.append(record.summary_line())
        result.registered = sum(r.status == "ready" for r in result.records)
