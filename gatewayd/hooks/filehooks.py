"""Single-file hooks, the gateway's side: from a loaded file to one handler per events-map entry.

``filescan.py`` finds the files and ``loader.py`` checks and imports them like any hook (same
statuses, eligibility, config entry, timeouts, live reload). Then, per file:

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

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gatewayd.hooks.define import HookDefinition, event_context
from gatewayd.hooks.handlers import Handler, HandlerKind, HookContext, make_handler
from gatewayd.hooks.node.runtime import NodeSubscription
from gatewayd.hooks.vocabulary import resolve, resolve_all

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
