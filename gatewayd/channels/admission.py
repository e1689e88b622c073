"""Who gets a control connection, and for how long (``gateway.control.*`` limits).

* **Accept errors back off** (:mod:`gatewayd.accepting`): out of file descriptors or any other
  accept failure is logged once, retried with a growing pause, and serving resumes by itself
  once clients leave.
* **A cap on connections** (``maxConnections``): one more is accepted only to be answered
  ``busy`` and closed; at most :data:`MAX_REFUSING` of those linger at once, beyond that the
  listener waits until a connection ends (new clients queue in the socket's backlog).
* **An idle timeout** (``idleTimeoutMs``): a connection is *stalled* while the daemon waits on
  its client, to send a whole request line or to take a reply; time spent on hooks does not
  count. A connection stalled longer than the timeout is cancelled (the caller answers
  ``idle_timeout``), which also bounds a client that trickles a line a byte at a time.
* **An in-flight window** (:data:`MAX_IN_FLIGHT`): how many requests one connection may have
  sent and not yet been answered; past it the connection is read no further until the client
  takes a reply (:mod:`gatewayd.channels.pipeline`).

The configured limits are read through a callable on every use, so a reloaded config applies at
once.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.abc import SocketStream

from gatewayd.accepting import RetryingAccept
from gatewayd.config import ControlConfig

log = structlog.get_logger("gatewayd.control")

MAX_IN_FLIGHT = 1024
"""Requests one connection may have read and not yet answered (``hello`` tells clients): past
it the daemon reads no more from that connection until a reply is taken."""
MAX_REFUSING = 32
"""Connections being answered ``busy`` at once; the listener waits beyond that."""
MAX_REAP_INTERVAL_S = 1.0


class Conn:
    """One admitted connection: its socket, its cancel scope, and since when it is stalled."""

    __slots__ = ("raw", "scope", "stalled_since", "timed_out")

    def __init__(self, raw: socket.socket) -> None:
        self.raw = raw
        self.scope = anyio.CancelScope()
        self.stalled_since: float | None = None
        """``time.monotonic()`` when the daemon began waiting on this client, else None."""
        self.timed_out = False

    def stall(self) -> None:
        """The daemon starts waiting on the client (for a request line, or to take a reply)."""
        self.stalled_since = time.monotonic()

    def unstall(self) -> None:
        self.stalled_since = None


class Admission:
    """The open connections and the limits on them; see the module docstring."""

    def __init__(self, limits: Callable[[], ControlConfig]) -> None:
        self.limits = limits
        self.conns: dict[socket.socket, Conn] = {}
        self._refusing = 0
        self._freed: anyio.Event | None = None
        self._busy = False
        self._accepting = RetryingAccept(log, "control", self._connections, self._advice)

    async def accept(self, listener: anyio.abc.SocketListener) -> tuple[SocketStream, bool]:
        """The next connection, and whether it is admitted (``False``: answer it ``busy``)."""
        while self._refusing >= MAX_REFUSING and self._over_cap():
            self._freed = anyio.Event()
            await self._freed.wait()
        stream = await self._accepting.accept(listener)
        if not self._over_cap():
            self._busy = False
            return stream, True
        if not self._busy:  # once per episode: a flood of clients is not a flood of logs
            self._busy = True
            log.warning(
                "control.busy",
                connections=len(self.conns),
                max_connections=self.limits().max_connections,
                note="clients over gateway.control.maxConnections are answered 'busy'",
            )
        return stream, False

    def _over_cap(self) -> bool:
        return len(self.conns) >= self.limits().max_connections

    def _connections(self) -> dict[str, Any]:
        return {"connections": len(self.conns)}

    @staticmethod
    def _advice(out_of_fds: bool) -> dict[str, Any]:
        if not out_of_fds:
            return {"note": "retrying with a growing pause"}
        return {
            "note": "out of file descriptors: retrying until some close; raise the limit "
            "(LimitNOFILE=, ulimit -n) or lower gateway.control.maxConnections"
        }

    def admit(self, raw: socket.socket) -> Conn:
        conn = Conn(raw)
        self.conns[raw] = conn
        return conn

    def release(self, conn: Conn) -> None:
        self.conns.pop(conn.raw, None)
        self._wake()

    def refusing(self, delta: int) -> None:
        """Count a ``busy`` answer starting (+1) or done (-1)."""
        self._refusing += delta
        if delta < 0:
            self._wake()

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()

    async def reap_idle(self) -> None:
        """Cancel connections stalled longer than ``idleTimeoutMs``; runs until cancelled."""
        while True:
            timeout_ms = self.limits().idle_timeout_ms
            await anyio.sleep(
                MAX_REAP_INTERVAL_S
                if timeout_ms == 0
                else min(MAX_REAP_INTERVAL_S, timeout_ms / 4000)
            )
            if timeout_ms == 0:
                continue
            cutoff = time.monotonic() - timeout_ms / 1000
            for conn in self.conns.values():
                since = conn.stalled_since
                if since is not None and since <= cutoff and not conn.timed_out:
                    conn.timed_out = True
                    conn.scope.cancel()
