"""The Node half of a hook load: import a load's JS/TS handlers into a new generation.

The loader (``loader.py``) builds JS/TS handlers without importing them (it runs in a thread and
knows nothing of workers); :func:`load_node_hooks` imports them on the event loop, between the
build and :meth:`LoadResult.apply`, and turns each import failure into that hook's ``failed``
status. The daemon then activates the returned generation right after the registry swap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from gatewayd.hooks.filehooks import expand_node_hook
from gatewayd.hooks.handlers import HandlerKind
from gatewayd.hooks.node.generation import EarlyLoad, Generation
from gatewayd.hooks.node.runtime import NodeRuntime

if TYPE_CHECKING:
    from gatewayd.hooks.records import LoadResult


async def load_node_hooks(
    result: LoadResult, runtime: NodeRuntime, early: EarlyLoad | None = None
) -> Generation | None:
    """Import the JS/TS handlers of ``result`` into a new generation (None when it has none);
    ``early``: the reload's :meth:`NodeRuntime.reimport`, taken when it imported the same hooks.

    Handlers whose module fails to import (a syntax error, a missing export, a throw at the top
    level, an import that never settles) are removed from ``result`` with their reason.
    A single-file hook's stand-in is replaced by its events-map entries
    (``filehooks.expand_node_hook``).
    """
    pending = [handler for handler, _ in result.handlers if handler.kind is HandlerKind.NODE]
    if not pending:
        return None
    binary = result.node_binary
    if binary is None:  # the loader refuses JS/TS hooks when no Node was found
        for handler in pending:
            result.fail(handler, "node not found")
        return None
    generation, errors = await runtime.load(binary, [handler.node for handler in pending], early)
    for handler in pending:
        if (reason := errors.get(handler.node)) is not None:
            result.fail(handler, reason)
        elif handler.node.events:  # a single-file hook: one handler per events-map entry
            expand_node_hook(result, handler)
    return generation if generation.worker is not None else None


def check_node_hooks(result: LoadResult) -> None:
    """:func:`load_node_hooks` in a one-off runtime, for commands that only report (``gatewayd
    hooks list|check|info``): each JS/TS hook's import is tried, then the worker is stopped."""
    if not any(handler.kind is HandlerKind.NODE for handler, _ in result.handlers):
        return

    async def once() -> None:
        runtime = NodeRuntime()
        async with anyio.create_task_group() as tg:
            await tg.start(runtime.run)
            generation = await load_node_hooks(result, runtime)
            if generation is not None and generation.worker is not None:
                generation.retired = True
                await generation.worker.stop()
            tg.cancel_scope.cancel()

    anyio.run(once)
