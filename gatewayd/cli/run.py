"""``gatewayd run``: validate the config, set up logging, then serve in the foreground.

The server itself is :class:`gatewayd.server.Gateway`; this command owns the process around it:
the command line's arguments, the event loop (uvloop, else asyncio), hook output capture, and
the exit once the server returned its code (or, after a SIGUSR2, the process executed anew). An
invalid config lists every error and exits 78 before any hook code runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any, NoReturn

import anyio
import structlog

from gatewayd.cli.common import load_config_or_exit
from gatewayd.config import Config
from gatewayd.exits import EXIT_OK
from gatewayd.hooks.capture import capture_hook_output
from gatewayd.logging import LogFormat, configure_from, configure_logging
from gatewayd.server import Gateway

log = structlog.get_logger("gatewayd")

THREAD_JOIN_S = 1.0
"""How long exit waits for worker threads before leaving abandoned (timed-out) ones behind."""


def cli_run(args: argparse.Namespace) -> int:
    """``gatewayd run [--log-level L] [--log-format F]``: serve until SIGTERM/SIGINT."""
    level: str | None = getattr(args, "log_level", None)
    fmt: LogFormat | None = getattr(args, "log_format", None)
    configure_logging(level or "info", fmt or "auto")
    config = load_config_or_exit(args.config)
    configure_from(config, level, fmt)
    return run_daemon(config, args.config, (level, fmt))


def event_loop() -> tuple[str, dict[str, Any]]:
    """The loop to run on: ``("uvloop", its anyio options)``, or ``("asyncio", {})`` when
    uvloop is not installed."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio", {}
    return "uvloop", {"use_uvloop": True}


def run_daemon(
    config: Config, config_arg: str | None, log_overrides: tuple[str | None, LogFormat | None]
) -> int:
    """Serve ``config`` (read from ``config_arg``) until shutdown; returns the exit code."""
    loop_name, _ = event_loop()
    gateway = Gateway(
        config, config_arg=config_arg, log_overrides=log_overrides, loop_name=loop_name
    )
    with capture_hook_output():
        code = run_gateway(gateway)
    if gateway.restarting and code == EXIT_OK:
        restart_in_place()
    return code


def restart_in_place() -> NoReturn:
    """Execute ``gatewayd`` again with this process's arguments (SIGUSR2): the same PID, so a
    supervisor (systemd's ``MAINPID``) keeps it, and a fresh interpreter, so every module and
    hook is imported anew. Every descriptor the daemon opened is close-on-exec (Python's
    default): the socket's lock and the journal are released before the new run claims them."""
    argv = [sys.executable, "-m", "gatewayd", *sys.argv[1:]]
    log.info("gateway.restarting", argv=argv)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


def run_gateway(gateway: Gateway) -> int:
    """Run ``gateway`` on uvloop (asyncio when uvloop is missing); returns the exit code.

    Sync hooks abandoned after a timeout keep their threads (Python cannot stop a thread):
    exit waits :data:`THREAD_JOIN_S` for them, then leaves without them.
    """
    _, options = event_loop()
    code: int = anyio.run(gateway.serve, backend="asyncio", backend_options=options)
    deadline = time.monotonic() + THREAD_JOIN_S
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))  # idle workers exit at once
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if stuck:
        log.warning("gateway.threads_abandoned", threads=len(stuck))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
