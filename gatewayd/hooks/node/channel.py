"""The channel to one Node worker: JSON lines both ways, batched, each request a future.

Each message, both ways, is one line of UTF-8 JSON (``JSON.stringify`` and orjson never write a
raw newline; ``worker.mjs`` lists the messages). Lines are batched both ways. Here, the first
line sent during a turn of the event loop is written at once (the worker starts on it while this
side finishes its turn) and the others sent during that turn go together in one write when the
loop next runs its callbacks; after a read that brought several replies, whose callers send
their next calls in the same turn, every line of the turn waits for that one write. The worker
answers what finished during one run of its microtasks in one write. So N calls in flight cost
about two writes and two wake-ups, not 2N.

The channel is an asyncio protocol: a reply parsed in ``data_received`` resolves its request's
future with no task switch in between. A line that cannot be decoded (nested past the parser's
stack) fails its own request, not the channel.

A call (:meth:`Channel.call`) has a deadline: it fails with :class:`CallTimeout` once its time
is up, and its reply, if one comes later, is dropped. The deadlines of every call in flight
share one timer, armed for the soonest. A call's ``cfg`` (the hook's view of the config, the
same object until a reload) is sent once per hook: the worker keeps it, and later calls with the
same object say ``cfgKept``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

import anyio
import orjson

MAX_FRAME: Final = 64 << 20
"""Bytes of one line, either way."""
DEADLINE_SLACK_S: Final = 0.001
"""A call whose deadline is this close when the timer fires is expired with it (the loop's timers
have millisecond resolution)."""
_REPLY_ID = re.compile(rb'^\{"id":(\d+)')
_CALL = b'{"op":"call","id":%d,"hook":"%s","event":%s}\n'
_CALL_CFG = b'{"op":"call","id":%d,"hook":"%s","cfg":%s,"event":%s}\n'
_CALL_CFG_KEPT = b'{"op":"call","id":%d,"hook":"%s","cfgKept":1,"event":%s}\n'

Reply = dict[str, Any]


class WorkerGone(Exception):
    """The worker exited or was killed before it answered; the message is the reason."""


class CallTimeout(Exception):
    """A call's deadline passed before its reply came."""


class Channel(asyncio.Protocol):
    """Lines in, futures resolved; lines out, batched. Messages that are not replies (``op``:
    ``log``, ``importing``, ``ready``) go to ``on_message``; ``on_lost`` is told when the
    socket closes, ``on_overflow`` (with the reason) when the worker writes a line past
    :data:`MAX_FRAME`."""

    def __init__(
        self,
        on_message: Callable[[Reply], None],
        on_lost: Callable[[], None],
        on_overflow: Callable[[str], None],
    ) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.on_overflow = on_overflow
        self.transport: Any = None
        """An ``asyncio.Transport`` (uvloop's does not subclass it, hence ``Any``)."""
        self.closed = anyio.Event()
        self.gone: str | None = None
        """Why the worker is gone, once it is (:meth:`fail`)."""
        self.writes = 0
        """Writes to the socket so far (each one line or a batch of them)."""
        self.last_request_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._partial: list[bytes] = []
        """The start of a line whose end has not come yet."""
        self._partial_size = 0
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._deadlines: dict[int, float] = {}
        """Call id -> its deadline (loop time), for the calls in flight."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._cfgs: dict[bytes, bytes] = {}
        """Hook id -> the ``cfg`` JSON its last call sent (the worker keeps it)."""
        self._out: list[bytes] = []
        """Lines sent during this turn of the loop, for its one write (:meth:`_flush`)."""
        self._turn = False
        """Whether this turn of the loop writes its lines in one write (:meth:`_flush`)."""

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # -- in -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        received = self._received
        end = data.find(b"\n")
        if end < 0:
            self._hold(data)
            return
        start = 0
        if self._partial:
            self._partial.append(data[:end])
            received(_decode(b"".join(self._partial)))
            self._partial.clear()
            self._partial_size = 0
            start = end + 1
            end = data.find(b"\n", start)
        lines = 0
        while end >= 0:
            received(_decode(data[start:end]))
            lines += 1
            start = end + 1
            end = data.find(b"\n", start)
        if start < len(data):
            self._hold(data[start:])
        if lines > 1 and not self._turn:  # their callers send next in this turn: one write
            self._turn = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _hold(self, part: bytes) -> None:
        self._partial.append(part)
        self._partial_size += len(part)
        if self._partial_size > MAX_FRAME:
            self._partial.clear()
            self._partial_size = 0
            self.on_overflow(f"the node worker wrote a line of over {MAX_FRAME} bytes")

    def _received(self, message: Reply) -> None:
        if "op" in message:
            self.on_message(message)
            return
        request_id = message.get("id", -1)
        future = self._pending.pop(request_id, None)
        if future is not None:
            self._deadlines.pop(request_id, None)
            if not future.done():
                future.set_result(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()
        self.on_lost()

    # -- out ------------------------------------------------------------------------------

    def _send(self, line: bytes) -> None:
        if self._turn:
            self._out.append(line)
            return
        if self.transport is None or self.gone is not None:
            return
        self.transport.write(line)
        self.writes += 1
        self._turn = True
        assert self._loop is not None
        self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write every line queued during this turn, in one write; the turn is over."""
        self._turn = False
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        if self.transport is not None and self.gone is None:
            self.transport.write(data)
            self.writes += 1

    def _check(self) -> None:
        if self.gone is not None or self.transport is None:
            raise WorkerGone(self.gone or "the node worker is not running")

    def request(self, message: dict[str, Any]) -> asyncio.Future[Reply]:
        """Send ``message`` (its ``op`` first) with a fresh ``id``; the future is the reply, or
        fails with :class:`WorkerGone`."""
        self._check()
        self.last_request_id = request_id = self.last_request_id + 1
        line = orjson.dumps({"op": message["op"], "id": request_id, **message}) + b"\n"
        if len(line) > MAX_FRAME:
            raise ValueError(f"request too large for the node worker ({len(line)} bytes)")
        assert self._loop is not None
        future: asyncio.Future[Reply] = self._loop.create_future()
        self._pending[request_id] = future
        self._send(line)
        return future

    def call(
        self, hook_id: bytes, event_json: bytes, cfg_json: bytes | None, timeout_s: float
    ) -> asyncio.Future[Reply]:
        """Run hook ``hook_id`` (the runtime's, digits and dots) on an event already in its
        wire form (JSON), with its context's ``cfg`` as JSON apart when given; the future is the
        reply, or fails with :class:`WorkerGone`, or with :class:`CallTimeout` after
        ``timeout_s``. Raises ``ValueError`` for an event too large to send."""
        self._check()
        self.last_request_id = request_id = self.last_request_id + 1
        if cfg_json is None:
            line = _CALL % (request_id, hook_id, event_json)
        elif self._cfgs.get(hook_id) is cfg_json:
            line = _CALL_CFG_KEPT % (request_id, hook_id, event_json)
        else:
            line = _CALL_CFG % (request_id, hook_id, cfg_json, event_json)
        if len(line) > MAX_FRAME:
            raise ValueError(f"event too large for the node worker ({len(line)} bytes)")
        if cfg_json is not None:
            self._cfgs[hook_id] = cfg_json
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[Reply] = loop.create_future()
        self._pending[request_id] = future
        deadline = self._deadlines[request_id] = loop.time() + timeout_s
        if deadline < self._timer_at:
            self._arm(deadline)
        self._send(line)
        return future

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        assert self._loop is not None
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Fail the calls whose deadline has passed; arm the timer for the soonest other."""
        self._timer, self._timer_at = None, math.inf
        assert self._loop is not None
        now = self._loop.time() + DEADLINE_SLACK_S
        soonest = math.inf
        for request_id, deadline in list(self._deadlines.items()):
            if deadline <= now:
                del self._deadlines[request_id]
                future = self._pending.pop(request_id, None)
                if future is not None and not future.done():
                    future.set_exception(CallTimeout())
            elif deadline < soonest:
                soonest = deadline
        if soonest < math.inf:
            self._arm(soonest)

    def tell(self, message: dict[str, Any]) -> None:
        """Send ``message`` (its ``op`` first), which the worker does not answer: the answer to
        one of its own requests (``gateway``); nothing when the worker is gone."""
        if self.gone is None and self.transport is not None:
            self._send(orjson.dumps(message) + b"\n")

    def drop(self, hook_ids: list[str]) -> None:
        """Have the worker forget the handlers of ``hook_ids`` (a replaced generation's), and
        the ``cfg`` kept for them."""
        self.request({"op": "drop", "hooks": hook_ids})
        ids = {hook_id.encode() for hook_id in hook_ids}
        for target in list(self._cfgs):
            if target in ids or target.rpartition(b".")[0] in ids:
                del self._cfgs[target]

    def forget(self, future: asyncio.Future[Reply]) -> None:
        """Drop a request nobody waits for any more (its reply, if any, is ignored)."""
        for request_id, pending in list(self._pending.items()):
            if pending is future:
                del self._pending[request_id]
                self._deadlines.pop(request_id, None)
                break

    def fail(self, reason: str) -> None:
        """The worker is gone: close the socket, fail every request waiting with ``reason``."""
        self.gone = reason
        if self.transport is not None:
            self.transport.abort()
        self._out.clear()
        self._deadlines.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerGone(reason))
                future.exception()  # retrieved: nobody may be waiting for it any more


def _decode(line: bytes) -> Reply:
    """One line from the worker: orjson, else json (a lone surrogate's escape, which orjson
    refuses and JavaScript writes), else an error reply to its request (replies begin with
    their id) or, without one, a log line of the worker's."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            return _undecodable(line, exc)
    if type(message) is not dict:
        return _undecodable(line, ValueError("not a JSON object"))
    return message


def _undecodable(line: bytes, exc: Exception) -> Reply:
    error = f"the node worker's reply could not be read: {exc or type(exc).__name__}"
    if (match := _REPLY_ID.match(line)) is not None:
        return {"id": int(match[1]), "ok": False, "error": error}
    return {"op": "log", "hook": None, "level": "error", "text": error}
