"""sd_notify and the systemd watchdog, written directly against ``$NOTIFY_SOCKET``.

No libsystemd: the protocol is one datagram of ``KEY=value`` lines to an ``AF_UNIX`` socket named
by ``NOTIFY_SOCKET`` (a filesystem path, or ``@name`` for the abstract namespace). Datagrams are
sent with ``MSG_DONTWAIT`` so a stuck or full notify socket can never block the event loop; a
message that cannot be sent is logged once and dropped (systemd then notices through its own
timeouts, which is the right outcome).

With ``WATCHDOG_USEC`` set (and ``WATCHDOG_PID`` unset or ours), :func:`watchdog_loop` sends
``WATCHDOG=1`` every half period from a task on the event loop, so a blocked loop stops the pings
and systemd restarts the service.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import anyio
import structlog

log = structlog.get_logger("gatewayd.systemd")


def monotonic_usec() -> int:
    """``CLOCK_MONOTONIC`` in microseconds, as ``RELOADING=1`` wants in ``MONOTONIC_USEC``."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Notifier:
    """Sends sd_notify messages; a no-op when the process was not started with a notify socket."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        if raw.startswith("@"):
            self.address = "\0" + raw[1:]
        elif raw.startswith("/"):
            self.address = raw
        elif raw:
            log.warning(
                "sd_notify.bad_socket",
                notify_socket=raw,
                fix="NOTIFY_SOCKET must be an absolute path or an @abstract name",
            )
        self._sock: socket.socket | None = None
        self._failed = False

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *lines: str) -> bool:
        """Send ``lines`` as one datagram; True when it was handed to the kernel."""
        if self.address is None:
            return False
        payload = "\n".join(lines).encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(payload, socket.MSG_DONTWAIT, self.address)
        except OSError as exc:
            if not self._failed:  # once: a dead notify socket would otherwise log every ping
                self._failed = True
                log.warning(
                    "sd_notify.failed",
                    notify_socket=os.environ.get("NOTIFY_SOCKET"),
                    message=lines[0] if lines else "",
                    error=str(exc),
                )
            return False
        self._failed = False
        return True

    def ready(self, status: str) -> bool:
        return self.notify("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def reloading(self) -> bool:
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={monotonic_usec()}")

    def stopping(self, status: str) -> bool:
        return self.notify("STOPPING=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.notify(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half the period), or None when not asked for."""
    env = os.environ if env is None else env
    raw_usec = env.get("WATCHDOG_USEC")
    if not raw_usec:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None  # meant for another process (e.g. our parent's wrapper)
    try:
        usec = int(raw_usec)
    except ValueError:
        log.warning("sd_notify.bad_watchdog_usec", watchdog_usec=raw_usec)
        return None
    if usec <= 0:
        return None
    return usec / 2_000_000


async def watchdog_loop(notifier: Notifier, interval_s: float) -> None:
    """Ping ``WATCHDOG=1`` every ``interval_s`` from the event loop, until cancelled."""
    log.info("sd_notify.watchdog", interval_ms=round(interval_s * 1000))
    while True:
        notifier.watchdog()
        await anyio.sleep(interval_s)
