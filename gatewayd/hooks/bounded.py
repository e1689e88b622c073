"""Running a hook's import with a time bound, so one hook cannot hold a load forever.

A hook module's top-level code runs when it is imported, inside the loader's worker thread; a
module that blocks there (``input()``, a network call with no timeout, an endless loop) would
hold the whole load, and with it the start, every later reload and the shutdown. The loader
calls the import through :func:`call_within`: it runs in a thread of its own, and when the bound
passes the loader stops waiting and marks that hook ``failed`` with the reason. The thread is a
daemon thread and is abandoned (Python cannot stop it); it holds nothing the next load needs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class TimedOut(Exception):
    """The call did not return within its bound; the message says which and how long."""


def call_within(timeout_s: float, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` if it returns (or raises) within ``timeout_s`` seconds; else
    :class:`TimedOut` naming ``what``. Whatever ``fn`` raises (``SystemExit`` too) is raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"gatewayd-bounded: {what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        raise TimedOut(f"{what} did not finish within {timeout_s:g} s (abandoned)")
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value
