"""When CPython's cyclic garbage collector runs around a hook load: once, after the swap.

A full (generation 2) collection traverses every tracked object that is not frozen, with the
GIL held for the whole pass: whichever thread runs it, the event loop waits. A load of 10,000
hooks makes ~270,000 tracked objects (27 a hook), so while it runs the allocator's own rule (a
full collection once the objects moved to the oldest generation since the last one reach a
quarter of those that were there) fired a full collection every second or so: 3 during a
reload and 5 to 8 during the first load, each traversing the hooks in place *and* the ones
being built, 0.1 to 0.4 s apiece with the loop held (measured with ``gc.callbacks`` in a
``gatewayd run`` at load 10 on 2 cores). They freed nothing (``collected=0``): a build's
objects are all alive.

So while a load is built, :func:`full_collections_deferred` keeps the allocator from starting a
full collection (the young generations are collected as usual, a few ms each), and
:func:`collect_replaced` runs one, after the new hooks are in place: it frees the replaced
generation's cycles (each hook module's functions and its globals, ~5 objects a hook) and
traverses only the hooks now in place, not two sets of them. The first load collects too, before
READY, so that the next full collection is not one the allocator starts while the daemon serves.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

log = structlog.get_logger("gatewayd.hooks")

NEVER: int = 1 << 30
"""The oldest generation's threshold while a build runs: young collections it never reaches."""

_lock = threading.Lock()
_builds = 0
_saved: int | None = None


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """No full collection starts by itself while the block runs (builds may nest or overlap:
    the threshold is restored when the last one ends). ``gc.collect()`` still collects."""
    global _builds, _saved
    with _lock:
        if _builds == 0:
            young0, young1, _saved = gc.get_threshold()
            gc.set_threshold(young0, young1, NEVER)
        _builds += 1
    try:
        yield
    finally:
        with _lock:
            _builds -= 1
            if _builds == 0 and _saved is not None:
                young0, young1, _ = gc.get_threshold()
                gc.set_threshold(young0, young1, _saved)
                _saved = None


def collect_replaced() -> int:
    """One full collection, after a load's hooks are in place (call it in a worker thread:
    the loop waits for the GIL either way, but not for the call). Returns what it freed."""
    freed = gc.collect()
    log.debug("hooks.collected", freed=freed)
    return freed


__all__ = ["NEVER", "collect_replaced", "full_collections_deferred"]
