"""structlog setup: console rendering on a terminal, JSON lines otherwise.

Every log line is an event name plus key/values (``log.info("hook.loaded", hook=name)``).
``configure_logging()`` is called once by the CLI before anything logs; library code only ever
calls ``structlog.get_logger(...)``.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

LogFormat = Literal["auto", "json", "console"]


def configure_logging(
    level: str = "info", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    """Route structlog to ``stream`` (default stderr) at ``level`` in the chosen format."""
    stream = stream or sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: structlog.typing.Processor
    if use_console:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())
    else:
        renderer = structlog.processors.JSONRenderer()
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if not use_console:
        processors.append(structlog.processors.dict_tracebacks)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
