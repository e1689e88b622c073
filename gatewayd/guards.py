"""What a hook can do to the daemon's process, made survivable: fork, ``os._exit``, and closing
the standard descriptors.

* A process a hook forks (``os.fork()``, ``multiprocessing`` with fork) inherits every open
  descriptor, the control socket's lock and listener included: it would keep the lock after
  the daemon is gone and the next start would be refused. The child closes them at once.
* ``os._exit(0)`` from a hook would be a *clean* exit, which systemd does not restart
  (``Restart=on-failure``). In the daemon's own process it is logged with the hook that called
  it and turned into exit code 70 (``EX_SOFTWARE``); a forked child's ``os._exit`` is untouched.
* A hook that closes (or replaces) fd 0, 1 or 2 would silence the daemon: the next file it opens
  takes the number and log lines land there. Copies taken at start restore them within a
  second, with a log line, and logging resumes. A copy whose far end is gone (a log shipper on
  a pipe that exited: ``poll`` says ``POLLERR``/``POLLHUP``) is not restored: there the logger
  has rightly pointed the descriptor at ``/dev/null`` (:mod:`gatewayd.logging`).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import anyio
import structlog

from gatewayd.hooks.stats import running, thread_hook
from gatewayd.logging import resume_logging

log = structlog.get_logger("gatewayd.guards")

EXIT_HOOK_EXIT = 70
"""``os._exit`` called by a hook in the daemon: EX_SOFTWARE, so a supervisor restarts it."""
STD_FDS = (0, 1, 2)
CHECK_EVERY_S = 1.0

real_exit: Callable[[int], NoReturn] = os._exit
"""``os._exit`` itself, for the daemon's own forced exit (second signal) while guarded."""

_child_fds: Callable[[], list[int]] | None = None
_registered = False


def _close_in_child() -> None:
    if _child_fds is None:
        return
    for fd in _child_fds():
        with contextlib.suppress(OSError):
            os.close(fd)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _healthy(fd: int) -> bool:
    """Whether the far end of ``fd`` is still there (a pipe's reader, a socket's peer)."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR, POLLHUP and POLLNVAL are always reported
    return not any(
        mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, mask in poller.poll(0)
    )


def _hook_name() -> str | None:
    return running.hook or thread_hook.get()


class ProcessGuards:
    """Installed by the gateway for the life of ``gatewayd run``; see the module docstring."""

    def __init__(self, fds: Callable[[], list[int]]) -> None:
        self._fds = fds
        self._pid = os.getpid()
        self._real_exit = real_exit
        self._saved: dict[int, tuple[int, tuple[int, int]]] = {}

    def install(self) -> None:
        global _child_fds, _registered
        _child_fds = self._fds
        if not _registered:  # register_at_fork cannot be undone: one callback per process
            os.register_at_fork(after_in_child=_close_in_child)
            _registered = True
        os._exit = self._exit  # type: ignore[assignment]
        for fd in STD_FDS:
            ident = _identity(fd)
            if ident is not None:
                self._saved[fd] = (os.dup(fd), ident)  # dup() is non-inheritable

    def uninstall(self) -> None:
        global _child_fds
        _child_fds = None
        os._exit = self._real_exit  # type: ignore[assignment]
        for copy, _ in self._saved.values():
            with contextlib.suppress(OSError):
                os.close(copy)
        self._saved = {}

    def _exit(self, code: int) -> NoReturn:
        if os.getpid() != self._pid:  # a forked child exiting: its business
            self._real_exit(code)
        hook = _hook_name()
        log.critical(
            "hook.os_exit",
            hook=hook,
            code=code,
            exit_code=EXIT_HOOK_EXIT,
            fix="a hook must not end the daemon: return, or raise an exception",
        )
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self._real_exit(EXIT_HOOK_EXIT)

    def check_std_fds(self) -> list[int]:
        """Restore any of fd 0-2 that was closed or replaced; returns the ones restored."""
        restored = []
        for fd, (copy, ident) in self._saved.items():
            if _identity(fd) == ident or not _healthy(copy):
                continue
            try:
                os.dup2(copy, fd, inheritable=True)
            except OSError:
                continue
            restored.append(fd)
        if restored:
            resume_logging(restored)
            log.error(
                "hook.closed_std_fds",
                fds=restored,
                hook=_hook_name(),
                note="restored; a hook must not close or replace stdin/stdout/stderr",
            )
        return restored

    async def watch(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Check fd 0-2 every second until cancelled."""
        task_status.started()
        while True:
            await anyio.sleep(CHECK_EVERY_S)
            self.check_std_fds()
