"""structlog setup: console rendering on a terminal, JSON lines otherwise.

Every log line is an event name plus key/values (``log.info("hook.loaded", hook=name)``).
``configure_logging()`` is called once by the CLI before anything logs; library code only ever
calls ``structlog.get_logger(...)``.

Two rules keep the log from being a way in or a way down:

* tracebacks carry frames (file, line, function), never local variables: a handler's locals may
  hold tokens, and structlog's ``dict_tracebacks`` (or rich, when installed) would print them;
* a log line that cannot be written (stderr closed, a log shipper on a pipe that exited) is
  dropped, never raised into the code that logged it. Once stderr is found broken, fd 2 is
  pointed at ``/dev/null`` so later writes (Python's own at exit, a hook's ``print``) cannot fail.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import Any, Literal, TextIO

import structlog

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

LogFormat = Literal["auto", "json", "console"]

_NO_LOCALS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)
"""``dict_tracebacks`` without the locals of each frame."""


class SafeLogger:
    """A line writer that never raises: what cannot be written is dropped (see the module doc).

    structlog calls ``msg`` (and its level aliases) with the rendered line.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False
        self.dropped = 0

    def msg(self, message: str) -> None:
        with self._lock:
            if self.broken:
                self.dropped += 1
                return
            try:
                self._stream.write(message + "\n")
                self._stream.flush()
            except BlockingIOError:
                self.dropped += 1  # a full non-blocking pipe: this line is lost, not the stream
            except (OSError, ValueError):  # EPIPE, EBADF, EIO, "I/O on closed file"
                self.dropped += 1
                self._give_up()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg

    def _give_up(self) -> None:
        """Stop writing, and point the stream's descriptor at /dev/null (see the module doc)."""
        self.broken = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fd = self._stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
            # Drop whatever the text layer still buffers: it would fail again at exit.
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()


class SafeLoggerFactory:
    """structlog logger factory: one :class:`SafeLogger` per stream."""

    def __init__(self, stream: TextIO) -> None:
        self._logger = SafeLogger(stream)

    def __call__(self, *args: Any) -> SafeLogger:
        return self._logger


def configure_logging(
    level: str = "info", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    """Route structlog to ``stream`` (default stderr) at ``level`` in the chosen format."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (OSError, ValueError):
        tty = False
    use_console = fmt == "console" or (fmt == "auto" and tty)
    renderer: structlog.typing.Processor
    if use_console:
        renderer = structlog.dev.ConsoleRenderer(
            colors=tty, exception_formatter=structlog.dev.plain_traceback
        )
    else:
        renderer = structlog.processors.JSONRenderer()
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if not use_console:
        processors.append(_NO_LOCALS)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=SafeLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
