"""A hook's own output, captured into structured log lines tagged with the hook.

Inside the daemon (and ``gatewayd hooks test``) :func:`capture_hook_output` routes:

* stdlib ``logging`` (a hook's ``logging.getLogger(__name__).warning(...)``) to structlog:
  ``hook.log`` with ``hook``, ``logger`` and ``message`` while a hook's code runs, else ``log``
  (a library's own line) with ``logger``; the level is kept;
* ``print()`` and other writes to ``sys.stdout`` / ``sys.stderr`` made while a hook's code runs
  to ``hook.output`` lines (``hook``, ``stream``, ``line``), one per line written. Writes by
  anything else pass through to the real stream untouched.

Which hook is running comes from :func:`gatewayd.hooks.stats.current_hook`: the dispatcher names
the hook on the loop around every step of an async handler, and a sync handler's worker thread
carries it in a context variable.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

import structlog

from gatewayd.hooks.stats import current_hook

log = structlog.get_logger("gatewayd.hook")

MAX_LINE = 8192
"""Characters kept of one captured output line."""

_LEVELS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


class StdlibBridge(logging.Handler):
    """A root ``logging`` handler that re-emits every record as a structlog line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception as exc:  # a bad format string in someone's log call
            message = f"{record.msg!r} (unformattable: {exc})"
        method = getattr(log, _LEVELS.get(record.levelno, "info"))
        fields: dict[str, Any] = {"logger": record.name, "message": message}
        if record.exc_info and record.exc_info[1] is not None:
            fields["exc_info"] = record.exc_info[1]
        hook = current_hook()
        if hook is not None:
            method("hook.log", hook=hook, **fields)
        else:
            method("log", **fields)


class HookStream:
    """Stands in for ``sys.stdout`` / ``sys.stderr``: a running hook's lines become
    ``hook.output`` log lines; everything else goes to :attr:`original`."""

    def __init__(self, original: TextIO, name: str) -> None:
        self.original = original
        self.name = name
        self._partial: dict[str, str] = {}
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        hook = current_hook()
        if hook is None:
            return self.original.write(text)
        with self._lock:
            pending = self._partial.pop(hook, "") + text
            *lines, rest = pending.split("\n")
            if rest:
                self._partial[hook] = rest[-MAX_LINE:]
        emit = log.info if self.name == "stdout" else log.warning
        for line in lines:
            emit("hook.output", hook=hook, stream=self.name, line=line[:MAX_LINE])
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.original.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ...
        return getattr(self.original, name)


@contextlib.contextmanager
def capture_hook_output() -> Iterator[None]:
    """Install the capture (see the module docstring) for the duration of the block."""
    bridge = StdlibBridge()
    root = logging.getLogger()
    root.addHandler(bridge)
    # watchfiles reports every change it sees at INFO; the watcher logs what matters itself.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    saved = sys.stdout, sys.stderr
    sys.stdout = HookStream(sys.stdout, "stdout")
    sys.stderr = HookStream(sys.stderr, "stderr")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        root.removeHandler(bridge)
