"""One connection of the Redis client kept by one task of the queue: a batch is one write.

The queue's hot paths (posting, acknowledging, replying, reading) each send their commands as
batches on a connection of their own, taken once from the client's pool: a batch is packed into
one write (hiredis's packer, which the client's asyncio connection does not use), its replies are
read in order (the client's parser) and a command that Redis refuses comes back in its place as
the client's ``ResponseError``, the others still answered. Measured on this machine (2 cores,
load 9 to 16), CPU per ``XADD`` in a batch of 10: 39 us through the client's ``Pipeline`` (its
connection taken and given back, its retry and observability wrappers, a response callback per
command), 42 us with a ``socket_timeout`` (with which the client wraps every write in
``asyncio.wait_for``: a new task per write on Python 3.11), 20 us on a kept connection with the
client's packer, 6 us with hiredis's (12 us against 19 in a batch of 3).

So the client runs without ``socket_timeout`` (its default is 5 s) and a batch has one timeout
of its own. A batch that times out, or whose connection breaks, raises :data:`UNREACHABLE`; the
client has then closed the connection (a reply may be half read), and the next batch opens a new
one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hiredis import pack_command
from redis import exceptions as rex

UNREACHABLE = (rex.ConnectionError, rex.TimeoutError)
"""What a batch raises when Redis cannot be reached or did not answer in time
(``BusyLoadingError`` included)."""
TIMEOUT_S = 5.0
"""How long one batch may wait for Redis's answer (a blocking read: on top of its block)."""

Command = tuple[Any, ...]


class Link:
    """A connection of ``client``'s pool for one task's batches; see the module docstring."""

    def __init__(self, client: Any) -> None:
        self._pool = client.connection_pool
        self._conn: Any = None

    async def execute(self, commands: Sequence[Command], limit_s: float | None = None) -> list[Any]:
        """Send ``commands`` in one write; their replies, in order (a refused command's
        ``ResponseError`` in its place). ``limit_s``: the timeout (:data:`TIMEOUT_S`)."""
        if limit_s is None:
            limit_s = TIMEOUT_S
        try:
            async with asyncio.timeout(limit_s):
                conn = self._conn
                if conn is None:
                    conn = self._conn = await self._pool.get_connection()
                packed = b"".join([pack_command(command) for command in commands])
                await conn.send_packed_command(packed, check_health=False)
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(await conn.read_response())
                    except rex.ResponseError as exc:
                        replies.append(exc)
                return replies
        except TimeoutError:  # the client closed the connection as the timeout cancelled it
            raise rex.TimeoutError(f"Redis did not answer within {limit_s:g} s") from None
        except OSError as exc:  # a connect that failed
            raise rex.ConnectionError(f"{type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        """Give the connection back to the pool (the client's close disconnects it)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._pool.release(conn)
