"""The loop-lag monitor: notice when something blocks the event loop, and name the hook.

A handler that blocks the loop (``time.sleep`` in an ``async def``, a CPU-bound loop) stalls
every session, the control socket and the watchdog at once. :class:`LoopLagMonitor` finds out:

* a task on the loop wakes every ``interval`` and notes the time (the heartbeat);
* a small daemon thread checks the heartbeat; when the next one is overdue by half the warning
  threshold, it notes which hook's code is on the loop right then
  (:data:`gatewayd.hooks.stats.running`) — the culprit, caught while it blocks;
* when the heartbeat task finally runs, late by ``lag``, and ``lag`` reaches
  ``gateway.loopLagWarnMs``, it logs ``loop.stalled`` (``lag_ms``, ``hook`` or ``null``) and
  calls ``on_stall(hook, lag_s)``, which counts the stall on that hook.

It works with or without systemd (the watchdog only restarts a daemon that stays stuck).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio
import structlog
from anyio.abc import TaskStatus

from gatewayd.hooks.stats import running

log = structlog.get_logger("gatewayd.loop")

MAX_INTERVAL_S = 0.25


class LoopLagMonitor:
    """See the module docstring; run :meth:`run` in the root task group."""

    def __init__(self, warn_ms: int, on_stall: Callable[[str | None, float], None]) -> None:
        self.warn_s = warn_ms / 1000
        self.interval_s = min(self.warn_s / 2, MAX_INTERVAL_S)
        self.on_stall = on_stall
        self.stalls = 0
        self.max_lag_s = 0.0
        self._due = 0.0
        self._culprit: str | None = None
        self._caught = False
        self._stop = threading.Event()

    def _watch(self) -> None:
        """The thread: catch the hook on the loop while the heartbeat is overdue."""
        period = self.warn_s / 4
        while not self._stop.wait(period):
            if not self._caught and time.monotonic() - self._due > self.warn_s / 2:
                self._culprit = running.hook
                self._caught = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Beat until cancelled; the watching thread stops with it."""
        thread = threading.Thread(target=self._watch, name="gatewayd-looplag", daemon=True)
        self._due = time.monotonic() + self.interval_s
        thread.start()
        task_status.started()
        try:
            while True:
                await anyio.sleep(self.interval_s)
                now = time.monotonic()
                lag = now - self._due
                if lag >= self.warn_s:
                    self._report(lag)
                self._culprit, self._caught = None, False
                self._due = time.monotonic() + self.interval_s
        finally:
            self._stop.set()

    def _report(self, lag_s: float) -> None:
        hook = self._culprit if self._caught else None
        self.stalls += 1
        self.max_lag_s = max(self.max_lag_s, lag_s)
        log.warning(
            "loop.stalled",
            lag_ms=round(lag_s * 1000),
            hook=hook,
            warn_ms=round(self.warn_s * 1000),
            fix=(
                f"hook {hook} blocked the event loop: use `await` (asyncio.sleep, async I/O) "
                "or make the handler a plain `def` so it runs in a worker thread"
                if hook
                else "no hook was on the loop: the gateway itself or a task a hook started"
            ),
        )
        self.on_stall(hook, lag_s)
