"""``accept()`` that an error does not end: the control socket's and the metrics listener's.

Out of file descriptors (``EMFILE``/``ENFILE``, which anyio reports as ``BrokenResourceError``)
or any other accept failure is logged once per episode (``<name>.accept_failed``), retried with
a pause doubling from :data:`MIN_BACKOFF_S` to :data:`MAX_BACKOFF_S`, and the first connection
accepted again is logged (``<name>.accept_recovered``). anyio's own ``serve()`` lets such an
error end the listener, and with it the daemon.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketStream
from structlog.typing import FilteringBoundLogger

MIN_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0


class RetryingAccept:
    """Accepts on listeners for one service, logging its failures as ``<name>.accept_*``.

    ``fields()``: what both log lines carry (how many connections are open, the address);
    ``advice(out_of_fds)``: what the failure line adds (its fix)."""

    def __init__(
        self,
        logger: FilteringBoundLogger,
        name: str,
        fields: Callable[[], dict[str, Any]],
        advice: Callable[[bool], dict[str, Any]],
    ) -> None:
        self._log = logger
        self._name = name
        self._fields = fields
        self._advice = advice
        self.failing = False
        """Whether the last accept() failed (an episode is logged once)."""

    async def accept(self, listener: anyio.abc.SocketListener) -> SocketStream:
        """The next connection, however many accept() calls fail before it."""
        backoff = MIN_BACKOFF_S
        while True:
            try:
                stream = await listener.accept()
            except (OSError, anyio.BrokenResourceError) as exc:
                if not self.failing:
                    self.failing = True
                    self._failed(exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            if self.failing:
                self.failing = False
                self._log.info(f"{self._name}.accept_recovered", **self._fields())
            return stream

    def _failed(self, exc: BaseException, backoff: float) -> None:
        cause = exc.__cause__ if isinstance(exc, anyio.BrokenResourceError) else exc
        code = getattr(cause, "errno", None)
        self._log.error(
            f"{self._name}.accept_failed",
            error=str(cause or exc) or type(exc).__name__,
            errno=errno.errorcode.get(code, code) if isinstance(code, int) else None,
            retry_in_s=backoff,
            **self._fields(),
            **self._advice(code in (errno.EMFILE, errno.ENFILE)),
        )
