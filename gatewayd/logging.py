"""structlog setup: console rendering on a terminal, JSON lines otherwise.

Every log line is an event name plus key/values (``log.info("hook.loaded", hook=name)``).
``configure_logging()`` is called once by the CLI before anything logs (and again by a reload);
library code only ever calls ``structlog.get_logger(...)``.

Where lines go and how they look:

* stderr, console-rendered on a terminal (colours unless ``NO_COLOR`` is set), else JSON;
* under systemd, when ``$JOURNAL_STREAM`` names the stream stderr is, every line starts with
  the syslog priority ``<N>`` (``<3>`` error, ``<4>`` warning, ``<6>`` info, ``<7>`` debug; on
  each line of a multi-line one), so ``journalctl -p err`` finds the errors;
* optionally a file too (``gateway.log.file``), always JSON, rotated by size
  (``logging.handlers.RotatingFileHandler``); one that cannot be opened is logged
  (``log.file_failed``, with the fix) and left out, never raised: the path is the user's.

Two rules keep the log from being a way in or a way down:

* tracebacks carry frames (file, line, function), never local variables: a handler's locals may
  hold tokens, and structlog's ``dict_tracebacks`` (or rich, when installed) would print them;
* a log line that cannot be written (stderr closed, a log shipper on a pipe that exited) is
  dropped, never raised into the code that logged it. Once stderr is found broken, fd 2 is
  pointed at ``/dev/null`` so later writes (Python's own at exit, a hook's ``print``) cannot fail;
* a console-rendered line escapes, in its values, every character that would act on the
  terminal instead of showing (a newline, an ANSI escape, a right-to-left override:
  ``gatewayd.hooks.names.shown``): a hook's output or a directory's name can neither forge a
  line nor reach the terminal. JSON escapes them itself.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import logging.handlers
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import structlog

from gatewayd.hooks.names import shown

if TYPE_CHECKING:
    from gatewayd.config import Config

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
        _LOGGERS.add(self)

    def resume(self, fds: list[int]) -> None:
        """Write again if this logger's descriptor is one of ``fds`` (restored by the process
        guards after a hook closed it: see :mod:`gatewayd.guards`)."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if self._stream.fileno() in fds:
                self.broken = False

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


_LOGGERS: weakref.WeakSet[SafeLogger] = weakref.WeakSet()


def resume_logging(fds: list[int]) -> None:
    """Every :class:`SafeLogger` writing to one of ``fds`` writes again."""
    for logger in list(_LOGGERS):
        logger.resume(fds)


class SafeLoggerFactory:
    """structlog logger factory: one :class:`SafeLogger` per stream."""

    def __init__(self, stream: TextIO) -> None:
        self._logger = SafeLogger(stream)

    def __call__(self, *args: Any) -> SafeLogger:
        return self._logger


PRIORITIES = {"debug": 7, "info": 6, "warning": 4, "warn": 4, "error": 3, "critical": 2}
"""syslog priorities of the log levels (``sd-daemon(3)``: the ``<N>`` line prefix)."""


def journal_stream(stream: TextIO) -> bool:
    """Whether ``stream`` is the journal's stream: ``$JOURNAL_STREAM`` (``device:inode``, set
    by systemd) names the file ``stream`` writes to. A child whose stderr was redirected
    inherits the variable but not the stream, hence the comparison."""
    value = os.environ.get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class _Priority:
    """Wraps a renderer: prefix each rendered line with the level's ``<N>``."""

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer

    def __call__(self, logger: Any, name: str, event_dict: Any) -> str:
        prefix = f"<{PRIORITIES.get(event_dict.get('level') or name, 6)}>"
        text = str(self._renderer(logger, name, event_dict))
        return prefix + text.replace("\n", "\n" + prefix)


@dataclass(frozen=True)
class LogFile:
    """``gateway.log``: the file every line is also written to, and its rotation."""

    path: Path
    max_bytes: int = 10 * 1024 * 1024
    backups: int = 5


class _QuietRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating file that drops a line it cannot write (disk full) instead of raising or
    printing a traceback; the drops are counted."""

    dropped = 0

    def handleError(self, record: logging.LogRecord) -> None:
        self.dropped += 1


class _FileSink:
    """A processor placed before the renderer: writes the line as JSON to the log file."""

    def __init__(self, handler: logging.Handler) -> None:
        self.handler = handler
        self._json = structlog.processors.JSONRenderer()

    def __call__(self, logger: Any, name: str, event_dict: Any) -> Any:
        data = _NO_LOCALS(logger, name, dict(event_dict))
        line = self._json(logger, name, data)
        self.handler.emit(logging.makeLogRecord({"msg": line, "args": None}))
        return event_dict


_file_handler: tuple[LogFile, logging.Handler] | None = None
_file_lock = threading.Lock()


def _file_sink(log_file: LogFile | None) -> _FileSink | None:
    """The sink of ``log_file``: the open one when it is unchanged, else a new one (the old
    one closed). ``None`` closes any open one."""
    global _file_handler
    with _file_lock:
        if _file_handler is not None and _file_handler[0] == log_file:
            return _FileSink(_file_handler[1])
        if _file_handler is not None:
            _file_handler[1].close()
            _file_handler = None
        if log_file is None:
            return None
        # OSError (the parent is a file, no permission, the path is a directory) passes up.
        log_file.path.parent.mkdir(parents=True, exist_ok=True)
        _refuse_unread_fifo(log_file.path)
        handler = _QuietRotatingFileHandler(
            log_file.path,
            maxBytes=log_file.max_bytes,
            backupCount=log_file.backups,
            encoding="utf-8",
        )
        handler.setFormatter(logging.Formatter("%(message)s"))
        _file_handler = (log_file, handler)
        return _FileSink(handler)


def _refuse_unread_fifo(path: Path) -> None:
    """Raise ``OSError`` when ``path`` is a FIFO no process reads: the handler's ``open()``
    would wait for a reader, on the event loop (a reload to such a path once froze the daemon).
    A FIFO or device someone reads (``/dev/stdout`` on a pipe) stays a valid log file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # the handler creates it
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(
                errno.ENXIO, f"{path} is a FIFO that no process reads (opening it would wait)"
            ) from None
        raise
    os.close(fd)


def real_stream(stream: TextIO) -> TextIO:
    """``stream`` itself, or the stream under a hook-output capture wrapper."""
    inner: TextIO | None = getattr(stream, "original", None)
    return inner if inner is not None else stream


def _shown_strings(logger: Any, name: str, event_dict: Any) -> Any:
    """Every string value of a console line escaped (:func:`gatewayd.hooks.names.shown`), but
    a traceback's, whose line breaks are its own."""
    for key, value in event_dict.items():
        if type(value) is str and key != "exception":
            event_dict[key] = shown(value)
    return event_dict


def configure_logging(
    level: str = "info",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
    *,
    log_file: LogFile | None = None,
) -> None:
    """Route structlog to ``stream`` (default stderr) at ``level`` in the chosen format, and
    to ``log_file`` when given; see the module docstring."""
    stream = real_stream(stream or sys.stderr)
    try:
        tty = stream.isatty()
    except (OSError, ValueError):
        tty = False
    use_console = fmt == "console" or (fmt == "auto" and tty)
    renderer: structlog.typing.Processor
    if use_console:
        renderer = structlog.dev.ConsoleRenderer(
            colors=tty and not os.environ.get("NO_COLOR"),
            exception_formatter=structlog.dev.plain_traceback,
        )
    else:
        renderer = structlog.processors.JSONRenderer()
    if journal_stream(stream):
        renderer = _Priority(renderer)
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    file_error: OSError | None = None
    try:
        sink = _file_sink(log_file)
    except OSError as exc:  # a path a user can set: never a reason to stop (or not start)
        file_error, sink = exc, None
    if sink is not None:
        processors.append(sink)
    if not use_console:
        processors.append(_NO_LOCALS)
    else:
        processors.append(_shown_strings)
    processors.append(renderer)
    logging.getLogger().setLevel(LEVELS[level])
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=SafeLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    if file_error is not None and log_file is not None:
        structlog.get_logger("gatewayd.log").error(
            "log.file_failed",
            path=str(log_file.path),
            error=f"{type(file_error).__name__}: {file_error.strerror or file_error}",
            fix="point gateway.log.file at a file whose directory gatewayd can create and "
            "write, then reload; until then lines go to stderr only",
        )


def configure_from(config: Config, level: str | None, fmt: LogFormat | None) -> None:
    """Logging as ``config`` says (``logging``, ``gateway.log``), with ``--log-level`` and
    ``--log-format`` (``level``, ``fmt``: ``None`` when not given) winning."""
    spec = config.settings.gateway.log
    log_file = None
    if spec.file is not None:
        path = config.paths.state / spec.file.expanduser()  # an absolute path stays as it is
        log_file = LogFile(path, spec.max_bytes, spec.backups)
    configure_logging(
        level or config.settings.logging.level,
        fmt or config.settings.logging.format,
        log_file=log_file,
    )
