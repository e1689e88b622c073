"""Running a hook's import with a time bound, so one hook cannot hold a load forever.

A hook module's top-level code runs when it is imported, inside the loader's thread; a module
that blocks there (``input()``, a network call with no timeout, an endless loop) would hold the
whole load, and with it the start, every later reload and the shutdown.

So a load runs in a thread of its own (:func:`run_watched`), and the caller watches it: before
each import the load says what it starts and within how long it must finish
(:meth:`Watch.step`). When a step overruns its bound, the caller stops waiting: that load's
thread is abandoned (Python cannot stop it; it is a daemon thread and raises
:class:`Abandoned` at its next step if the import ever returns, so it changes nothing more) and
``run_watched`` says which step overran. The loader then starts the load again, failing that
hook at once with the reason instead of importing it (``hooks/loader.py``); so do its later
loads while the abandoned thread still runs (:attr:`Watch.finished`) and no file of the hook
changed, or each would leave one more thread stuck.

Why one watched thread per load rather than a thread per import: starting and joining a thread
per import cost 0.4 to 0.7 ms each on a loaded 2-core VM (400 to 700 ms of a cold load of 1,000
hooks), and handing each import to a thread kept waiting still 50 to 100 us (GIL and futex
hand-offs both ways); a step costs two uncontended lock round trips here. A load whose import
overruns is started again, so the hooks before it are imported
twice; that happens only on this failure path, which has already waited out a timeout.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Any, TypeVar

T = TypeVar("T")


class Abandoned(BaseException):
    """Raised in an abandoned load's thread at its next step: its work is thrown away."""


@dataclass(frozen=True, slots=True)
class Overrun:
    """A step that did not finish within its bound."""

    key: str
    """What :meth:`Watch.step` was given as ``key`` (the loader: the hook's package)."""
    message: str
    """``<what> did not finish within <bound> s (abandoned)``."""
    watch: Watch
    """The abandoned load's watch: :attr:`Watch.finished` once its thread ended."""


class Watch:
    """What a watched load runs now; shared by the load's thread and the caller watching it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._step: tuple[str, str, float, float] | None = None
        """``(key, what, bound_s, deadline)`` of the step running now."""
        self._wake_at = math.inf
        """When the watcher wakes next, unless notified (``inf``: only when notified)."""
        self._finished = False
        self.abandoned = False

    @property
    def finished(self) -> bool:
        """Whether the load's thread ended (an abandoned one: once the overrun step returned)."""
        return self._finished

    def step(self, key: str, what: str, bound_s: float) -> Watch:
        """``with watch.step(...)``: run the body as one step that must finish within
        ``bound_s`` seconds. Raises :class:`Abandoned` (in place of whatever the body raised)
        once the watcher gave up on it."""
        deadline = monotonic() + bound_s
        with self._cond:
            if self.abandoned:
                raise Abandoned
            self._step = (key, what, bound_s, deadline)
            if deadline < self._wake_at:  # the watcher sleeps past this deadline: wake it
                self._cond.notify()
        threading.current_thread().name = f"gatewayd-load: {what}"  # for a thread dump
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        threading.current_thread().name = "gatewayd-load"
        with self._cond:
            if self.abandoned:
                raise Abandoned  # whatever the body raised is moot now
            self._step = None

    def _finish(self) -> None:
        with self._cond:
            self._finished = True
            self._cond.notify()

    def _wait(self) -> Overrun | None:
        """Wait until the load finishes (``None``) or a step overruns (abandoning the load)."""
        with self._cond:
            while not self._finished:
                now = monotonic()
                if self._step is not None:
                    key, what, bound_s, deadline = self._step
                    if now >= deadline:
                        self.abandoned = True
                        return Overrun(
                            key, f"{what} did not finish within {bound_s:g} s (abandoned)", self
                        )
                    self._wake_at = deadline
                else:
                    self._wake_at = math.inf
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)
            return None


def run_watched(fn: Callable[[Watch], T]) -> T | Overrun:
    """``fn(watch)`` run in a thread of its own, watched: its result (whatever it raises is
    raised here), or the :class:`Overrun` of the step that overran (the thread is abandoned)."""
    watch = Watch()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, fn(watch)))
        except Abandoned:
            return
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append((False, exc))
        finally:
            watch._finish()

    threading.Thread(target=run, name="gatewayd-load", daemon=True).start()
    try:
        overrun = watch._wait()
    except BaseException:  # the caller is interrupted: the load stops at its next step
        with watch._cond:
            watch.abandoned = True
        raise
    if overrun is not None:
        return overrun
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value
