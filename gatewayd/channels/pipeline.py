"""One control connection's requests: admitted in the order read, answered in the order read.

A client may send many requests without waiting for their replies (pipelining). Two tasks serve
the connection:

* the **reader** takes each request line and has the channel *admit* it (:data:`Admit`) before
  it reads the next one, so a session's requests reach the trigger queue in the order sent;
* the **writer** sends the replies in request order as each becomes ready, every ready one in
  one write.

Admitting a request gives the writer an :data:`Item`: the reply itself; a :class:`Durable`
reply (``queued``) that waits for the journal's commit of its event; a :class:`Waited` reply
that waits for its event's dispatch (run in a task of the connection, so that the waits of many
requests overlap); or :class:`Subscribed`, after which no more requests are read. The reader
does not wait for a commit or a dispatch: the lines already read are entered together and
committed in one group (with other connections' events), which is how one connection pipelining
events runs at the journal's group-commit speed instead of one sync per request.

At most ``window`` requests are read and not yet answered (``hello`` tells clients as
``maxInFlight``): past it the reader stops reading, so the client sees a socket read more
slowly, as when the queue is full. The connection is *stalled* (the idle timeout runs,
:class:`~gatewayd.channels.admission.Conn`) only while the daemon waits on its client: for a
request line while no reply is owed, or to take a reply.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anyio
import anyio.abc

from gatewayd.channels import Dispatch
from gatewayd.channels.admission import Conn
from gatewayd.channels.protocol import LineReader
from gatewayd.channels.transport import TransportStream
from gatewayd.journal.base import Commit

MAX_BATCH = 256
"""Replies sent in one write at most."""


class Durable(NamedTuple):
    """``queued``, once ``commit`` (the event's group commit) is done."""

    req_id: Any
    commit: Commit


class Waited(NamedTuple):
    """The reply of a dispatch the queue took (a waited ``trigger``)."""

    req_id: Any
    dispatch: Dispatch


class Subscribed(NamedTuple):
    """The reply to ``subscribe``: after it the connection carries the session's messages."""

    reply: bytes
    session_key: str


Item = bytes | Durable | Waited | Subscribed
Admit = Callable[[bytes | None], Awaitable[Item]]
"""The channel's side: a request line (None: one too long) to what answers it."""
Settle = Callable[[Any, BaseException | None], bytes]
"""The reply to a :class:`Durable` request: ``(id, the commit's error or None)``."""
Finish = Callable[[Any, Dispatch], Awaitable[bytes]]
"""The reply to a :class:`Waited` request, once dispatched; never raises an ``Exception``."""

_Pending = bytes | Durable | Subscribed | asyncio.Future[bytes]


class Pipeline:
    """One connection's reader and writer; see the module docstring. Run it once."""

    def __init__(
        self,
        stream: TransportStream,
        lines: LineReader,
        conn: Conn,
        *,
        window: int,
        closing: Callable[[], bool],
        admit: Admit,
        settle: Settle,
        finish: Finish,
    ) -> None:
        self._stream = stream
        self._lines = lines
        self._conn = conn
        self._window = window
        self._closing = closing
        self._admit = admit
        self._settle = settle
        self._finish = finish
        self._loop = asyncio.get_running_loop()
        self._pending: deque[_Pending] = deque()
        """Admitted requests whose replies are not yet in a write, in request order."""
        self._writing = 0
        """Replies in the write under way (still owed to the client until it took them)."""
        self._waiting: set[Dispatch] = set()
        self._read_done = False
        self._reading = False
        self._sending = False
        self._wake_writer: asyncio.Future[None] | None = None
        self._wake_reader: asyncio.Future[None] | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

    async def run(self) -> str | None:
        """Serve until the client is done (or the daemon stops reading); every request read is
        answered first. Returns the session key when the client subscribed."""
        try:
            async with anyio.create_task_group() as self._tasks:
                self._tasks.start_soon(self._read)
                session_key = await self._write()
            return session_key
        except BaseExceptionGroup as group:
            # The reader's or the writer's one error (a client gone: BrokenResourceError), as
            # the channel handles it, not wrapped by the task group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            for dispatch in self._waiting:
                dispatch.release()  # never answered: its background handlers still run

    # -- the reader ------------------------------------------------------------------------

    async def _read(self) -> None:
        lines, pending = self._lines, self._pending
        try:
            while not self._closing():
                if len(pending) + self._writing >= self._window:
                    await self._room()
                if lines.buffered():
                    line = await lines.read()  # does not wait
                else:
                    self._reading = True
                    self._stalls()
                    try:
                        line = await lines.read()  # stop_accepting() ends this with EOF
                    except anyio.EndOfStream:
                        break
                    finally:
                        self._reading = False
                        self._stalls()
                if self._closing():
                    break  # read after the stop: not accepted
                item = await self._admit(line)
                if isinstance(item, Waited):
                    pending.append(self._start(item))
                else:
                    pending.append(item)
                self._wake(self._wake_writer)
                if type(item) is Subscribed:
                    return  # what follows is the session's messages, not replies
        finally:
            self._read_done = True
            self._wake(self._wake_writer)

    async def _room(self) -> None:
        while len(self._pending) + self._writing >= self._window:
            self._wake_reader = self._loop.create_future()
            try:
                await self._wake_reader
            finally:
                self._wake_reader = None

    def _start(self, item: Waited) -> asyncio.Future[bytes]:
        """Wait for ``item``'s dispatch in a task of the connection; its reply comes in the
        future returned."""
        done: asyncio.Future[bytes] = self._loop.create_future()
        self._waiting.add(item.dispatch)
        assert self._tasks is not None
        self._tasks.start_soon(self._finished, item, done)
        return done

    async def _finished(self, item: Waited, done: asyncio.Future[bytes]) -> None:
        try:
            reply = await self._finish(item.req_id, item.dispatch)
        finally:
            self._waiting.discard(item.dispatch)
            item.dispatch.release()
        done.set_result(reply)

    # -- the writer --------------------------------------------------------------------------

    async def _write(self) -> str | None:
        pending = self._pending
        batch: list[bytes] = []
        # The commit the last durable reply waited for: the requests read together share it,
        # so it is waited for once (a future per commit, not per request).
        commit: Commit | None = None
        outcome: BaseException | None = None
        while True:
            if not pending:
                if batch:
                    await self._send(batch)
                    continue
                if self._read_done:
                    return None
                self._wake_writer = self._loop.create_future()
                try:
                    await self._wake_writer
                finally:
                    self._wake_writer = None
                continue
            item = pending[0]
            if type(item) is bytes:
                data = item
            elif type(item) is Durable:
                if item.commit is not commit:
                    commit, outcome = item.commit, None
                    waiter = commit.wait()
                    if not waiter.done() and batch:
                        await self._send(batch)  # what is ready goes out before this waits
                    try:
                        await waiter
                    except Exception as exc:  # the journal's error: not accepted
                        outcome = exc
                data = self._settle(item.req_id, outcome)
            elif type(item) is Subscribed:
                pending.popleft()
                batch.append(item.reply)
                await self._send(batch)
                return item.session_key
            else:
                assert isinstance(item, asyncio.Future)
                if not item.done() and batch:
                    await self._send(batch)
                data = await item
            pending.popleft()
            batch.append(data)
            if len(batch) >= MAX_BATCH:
                await self._send(batch)

    async def _send(self, batch: list[bytes]) -> None:
        """Write ``batch`` (then empty it); the reader may read again as it leaves the window."""
        data = b"".join(batch) if len(batch) > 1 else batch[0]
        self._writing = len(batch)
        batch.clear()
        self._sending = True
        self._stalls()
        try:
            await self._stream.send(data)
        finally:
            self._sending = False
            self._writing = 0
        self._stalls()
        self._wake(self._wake_reader)

    # -- the idle timeout --------------------------------------------------------------------

    def _stalls(self) -> None:
        """Stalled: sending, or waiting for a line while no reply is owed."""
        stalled = self._sending or (self._reading and not self._pending and not self._writing)
        if not stalled:
            self._conn.unstall()
        elif self._conn.stalled_since is None:
            self._conn.stall()

    @staticmethod
    def _wake(waiter: asyncio.Future[None] | None) -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
