"""When a reload runs CPython's full collection: once, after the new hooks are in place.

A full collection holds the GIL for a pass over every tracked object, so each one a reload runs
while both sets of hooks exist holds the event loop twice as long as it must. These tests make
the allocator start full collections often (:func:`frequent_full_collections`) and watch
each one start (``gc.callbacks``): none may run while the replaced hooks are in place, and the
one after the swap must free them.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks.collector import NEVER, full_collections_deferred
from gatewayd.server import Gateway
from tests.support.fixtures import StartGateway
from tests.support.hooks import WriteHook

anyio_test = pytest.mark.anyio

HOOKS = 60
SOURCE = "REPLY = 'v1'\n\n\nasync def handler(event):\n    event.messages.append(REPLY)\n"


@contextmanager
def frequent_full_collections() -> Iterator[None]:
    """The allocator's rule starts a full collection every ~100 objects made (when a quarter
    of those in the oldest generation are new): a load of a few hooks would run several."""
    threshold = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


@contextmanager
def full_collections_watched(gateway: Gateway) -> Iterator[list[bool]]:
    """Each full collection that starts in the block, as ``True`` when the load in place is
    the one in place at the block's start; full collections as frequent as the allocator's
    rule allows meanwhile."""
    before = id(gateway.load)  # an id: a reference would keep the replaced hooks alive
    started: list[bool] = []

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(id(gateway.load) == before)

    with frequent_full_collections():
        gc.callbacks.append(on_collection)
        try:
            yield started
        finally:
            gc.callbacks.remove(on_collection)


def a_handler(gateway: Gateway) -> weakref.ref[Any]:
    """A weak reference to one of the loaded hooks' handler functions."""
    assert gateway.load is not None
    handler, _keys = gateway.load.handlers[0]
    assert handler.call is not None
    return weakref.ref(handler.call)


@anyio_test
async def test_a_reload_collects_once_the_new_hooks_are_in_place(
    state_dir: Path, start_gateway: StartGateway, write_hook: WriteHook
) -> None:
    for i in range(HOOKS):
        write_hook(state_dir / "hooks", f"h{i:03d}", events=["command:hello"], handler=SOURCE)
    daemon = await start_gateway()
    old = a_handler(daemon.gateway)
    with full_collections_watched(daemon.gateway) as started:
        reply = await daemon.request("reload")
        freed = old() is None  # before anything else collects
    assert reply["outcome"] == "ok"
    assert started, "the reload ran no full collection: the replaced hooks stay until one runs"
    assert True not in started, (
        f"{started.count(True)} full collection(s) ran while the replaced hooks were in place, "
        "each a pass over both sets of hooks with the event loop held"
    )
    assert freed, "the collection after the swap did not free the replaced hooks"


@anyio_test
async def test_the_first_load_runs_no_full_collection_while_it_builds(
    state_dir: Path, start_gateway: StartGateway, write_hook: WriteHook
) -> None:
    """The start's build defers the allocator's full collections too (one runs after the
    load is in place, before READY, so that the next is not one the allocator starts while
    the daemon serves)."""
    for i in range(HOOKS):
        write_hook(state_dir / "hooks", f"h{i:03d}", events=["command:hello"], handler=SOURCE)
    threads: list[str] = []

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            threads.append(threading.current_thread().name)

    # What the test process holds, out of the rule's count (the fixture's stop unfreezes it):
    # a quarter of the few objects left in the oldest generation is soon new.
    gc.freeze()
    gc.collect()
    with frequent_full_collections():
        gc.callbacks.append(on_collection)
        try:
            daemon = await start_gateway()
        finally:
            gc.callbacks.remove(on_collection)
    assert daemon.gateway.load is not None and daemon.gateway.load.registered >= HOOKS
    building = [name for name in threads if name.startswith("gatewayd-load")]
    assert not building, f"{len(building)} full collection(s) ran in the build's thread"
    assert threads, "no full collection during the start"


def test_overlapping_builds_restore_the_threshold_when_the_last_one_ends() -> None:
    threshold = gc.get_threshold()
    entered, release = threading.Event(), threading.Event()

    def build() -> None:
        with full_collections_deferred():
            entered.set()
            release.wait(30)

    worker = threading.Thread(target=build)
    with full_collections_deferred():
        worker.start()
        assert entered.wait(30)
        assert gc.get_threshold()[2] == NEVER
    assert gc.get_threshold()[2] == NEVER, "restored while a build still runs"
    release.set()
    worker.join(30)
    assert gc.get_threshold() == threshold
