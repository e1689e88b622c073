"""One control connection's requests: admitted in the order read, answered in the order read.

A client may send many requests without waiting for their replies (pipelining). Two tasks serve
the connection:

* the **reader** takes each request line and has the channel *admit* it (:data:`Admit`) before
  it reads the next one, so a session's requests reach the trigger queue in the order sent;
* the **writer** sends the replies in request order as each becomes ready, every ready one in
  one write. A reply ready at once with nothing ahead of it and no line behind it (a client
  that waits for each reply) the reader sends itself: waking the writer for it cost a serial
  ``ping`` 13 of its 32 us of the daemon's CPU.

Admitting a request gives the writer an :data:`Item`: the reply itself; a :class:`Durable`
reply (``queued``) that waits for the journal's commit of its event; a :class:`Waited` reply
that waits for its event's dispatch; or :class:`Subscribed`, after which no more requests are
read. The reader does not wait for a commit or a dispatch: the lines already read are entered
together and committed in one group (with other connections' events), which is how one
connection pipelining events runs at the journal's group-commit speed instead of one sync per
request. A :class:`Waited` reply with replies ahead of it waits in a task of the connection, so
that its wait (and a decision event's deadline) runs beside theirs; one with nothing ahead is
waited for by the writer itself, in its turn, which is the same wait without a task (an anyio
task costs ~30 us a request, the whole of a serial client's request otherwise).

An op, once begun, runs whole (:class:`Whole`): a ``message`` cut off by the client leaving,
the idle timeout or the daemon's stop would be half-posted (its ``message:received`` run, its
command not). The reader runs in one shielded scope for the connection's life; the connection's
end cancels that scope unless an op that must run whole is under way, and then the reader stops
once it is done. (A shielded scope per request costs 13-27 us of CPU on a serial ``ping`` or
``message``; one per connection costs the same once.) A ``trigger`` waiting for room in the
queue is not such an op: its wait is cut short, and nothing was entered.

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


class Whole:
    """``with whole:`` around an op that, once begun, must run to its end (see the module
    docstring): the connection's end waits for it instead of cancelling it."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running = False

    def __enter__(self) -> None:
        self.running = True

    def __exit__(self, *exc_info: object) -> None:
        self.running = False


Item = bytes | Durable | Waited | Subscribed
Admit = Callable[[bytes | None, Whole], Awaitable[Item]]
"""The channel's side: a request line (None: one too long) to what answers it; an op that must
run whole runs inside ``with whole:``."""
Settle = Callable[[Any, BaseException | None], bytes]
"""The reply to a :class:`Durable` request: ``(id, the commit's error or None)``."""
Finish = Callable[[Any, Dispatch], Awaitable[bytes]]
"""The reply to a :class:`Waited` request, once dispatched; never raises an ``Exception``."""

_Pending = bytes | Durable | Waited | Subscribed | asyncio.Future[bytes]


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
        """Dispatches waited for in tasks (:meth:`_start`)."""
        self._whole = Whole()
        self._guard: anyio.CancelScope | None = None
        """The reader's shielded scope: cancelled at the connection's end unless ``_whole``."""
        self._halted = False
        """The writer is done (or gone): the reader admits nothing more."""
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
                try:
                    session_key = await self._write()
                finally:
                    self._halt()
            return session_key
        except BaseExceptionGroup as group:
            # The reader's or the writer's one error (a client gone: BrokenResourceError), as
            # the channel handles it, not wrapped by the task group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            # Never answered: their background handlers still run (release is idempotent).
            for dispatch in self._waiting:
                dispatch.release()
            for item in self._pending:
                if type(item) is Waited:
                    item.dispatch.release()

    def _halt(self) -> None:
        """The writer is done: stop the reader now, or once the op it runs whole is done."""
        self._halted = True
        if self._guard is not None and not self._whole.running:
            self._guard.cancel()

    # -- the reader ------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            with anyio.CancelScope(shield=True) as self._guard:
                if not self._halted:
                    await self._read_requests()
        finally:
            self._read_done = True
            self._wake(self._wake_writer)

    async def _read_requests(self) -> None:
        lines, pending, whole = self._lines, self._pending, self._whole
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
                    return
                finally:
                    self._reading = False
                    self._stalls()
            if self._closing():
                return  # read after the stop: not accepted
            item = await self._admit(line, whole)
            if self._halted:  # the writer is gone: no one to answer
                if type(item) is Waited:
                    item.dispatch.release()
                return
            if type(item) is bytes and not (pending or self._sending or lines.buffered()):
                # Nothing ahead of it, nothing behind it yet (a client waiting for each reply):
                # sent now, without waking the writer for it.
                await self._send([item])
                continue
            if type(item) is Waited and (pending or self._sending):
                pending.append(self._start(item))
            else:
                pending.append(item)
            self._wake(self._wake_writer)
            if type(item) is Subscribed:
                return  # what follows is the session's messages, not requests

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
            elif type(item) is Waited:  # nothing was ahead of it: its wait is the writer's
                if batch:
                    await self._send(batch)
                try:
                    data = await self._finish(item.req_id, item.dispatch)
                finally:
                    item.dispatch.release()
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
