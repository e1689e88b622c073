"""Stepping a coroutine by hand up to its first suspension, then finishing it in the same task.

Two places need to know what a coroutine did *before* it first waits:

* the dispatcher, because most handlers finish without ever suspending and those need no
  timeout machinery at all (``gatewayd.hooks.registry``);
* the watcher, because watchfiles sets up its inotify watches synchronously on the first step of
  ``awatch``, and a reload must not start before they exist (``gatewayd.hooks.watcher``).

:func:`step` runs the coroutine to its first suspension; :func:`resume` continues it inside the
calling task, passing every value and exception (cancellation included) straight through.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class Finished(Exception):
    """Raised by :func:`step` when the coroutine completed without suspending."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def step(awaitable: Awaitable[Any]) -> Any:
    """Run ``awaitable`` (a coroutine or an ``async_generator_asend``) up to its first
    suspension and return what it suspended on; raise :class:`Finished` if it completed."""
    try:
        return awaitable.send(None)  # type: ignore[attr-defined]
    except StopIteration as stop:
        raise Finished(stop.value) from None


@types.coroutine
def resume(awaitable: Awaitable[T], yielded: Any) -> Generator[Any, Any, T]:
    """Continue a coroutine that :func:`step` suspended on ``yielded``, in the current task."""
    coro: Any = awaitable
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # cancellation included: hand it to the coroutine
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
