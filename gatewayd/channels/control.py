"""The control channel: a Unix socket speaking the JSON-lines protocol (docs/design.md section 3).

One request per line, one reply line per request, in order::

    -> {"id": 1, "op": "message", "sessionKey": "agent:main:main", "text": "/new"}
    <- {"id": 1, "ok": true, "messages": ["fresh session"], "command": "new"}
    -> {"id": 2, "op": "trigger", "event": "nope:x", "sessionKey": "s"}
    <- {"id": 2, "ok": false, "error": {"code": "unknown_event", "message": "..."}}

This module owns the connections; what each op does is :mod:`gatewayd.channels.ops`. The wire
format (framing, declared request fields, reply encoding) is :mod:`gatewayd.channels.protocol`;
a connection's reading, in-flight window and in-order writing is
:mod:`gatewayd.channels.pipeline`; the socket file, its directory and lock are
:mod:`gatewayd.channels.socketfile`.

A client may pipeline: each request is admitted before the next one is read (a ``trigger`` once
its event is in the queue, any other op once answered), so the triggers of one connection share
group commits and their dispatches overlap, and the replies come in request order. A request
that waits on a full queue stops the reading of its connection, which is how backpressure
reaches a client. Bad input gets an error reply and the connection carries on. Peer credentials
(``SO_PEERCRED``) must be our own uid or root.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

from gatewayd.channels import ChannelHost, Dispatch
from gatewayd.channels.admission import MAX_IN_FLIGHT, Admission, Conn
from gatewayd.channels.ops import SUBSCRIBE, ControlOps, failure, queued, trigger_fields
from gatewayd.channels.pipeline import Durable, Item, Pipeline, Subscribed, Waited, Whole
from gatewayd.channels.protocol import (
    MAX_LINE,
    LineReader,
    encode,
    error,
    parse_request,
)
from gatewayd.channels.socketfile import SocketFile
from gatewayd.channels.transport import TransportStream
from gatewayd.config import ControlConfig
from gatewayd.journal.base import Commit

log = structlog.get_logger("gatewayd.control")

REFUSE_LINGER_S = 2.0
"""How long a refused connection's read side stays open after the error reply."""
LAST_WORD_S = 1.0
"""Bound on sending the error that ends a connection (``idle_timeout``, ``internal``)."""


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """``(pid, uid)`` of the process at the other end of a Unix stream socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


async def _on_transport(accepted: SocketStream) -> TransportStream:
    """The accepted connection on the loop's transport (:mod:`.transport` says why); anyio's
    stream served only to accept it, and is dropped unused."""
    raw = accepted.extra(SocketAttribute.raw_socket)
    try:
        return await TransportStream.attach(raw)
    except BaseException:
        raw.close()
        raise


class ControlChannel:
    """The Unix-socket JSON-lines channel; see the module docstring."""

    name = "control"

    def __init__(
        self,
        host: ChannelHost,
        socket_path: Path,
        *,
        private_dir: bool = False,
        limits: Callable[[], ControlConfig] = ControlConfig,
    ) -> None:
        """``private_dir``: see :class:`SocketFile`. ``limits``: the current
        ``gateway.control`` settings (read on every use, so a reload applies at once)."""
        self.host = host
        self.file = SocketFile(socket_path, private_dir=private_dir)
        self.admission = Admission(limits)
        self.listening = False
        self._accept_scope: anyio.CancelScope | None = None
        self._closing = False
        self.ops = ControlOps(host)

    @property
    def path(self) -> Path:
        return self.file.path

    # -- lifecycle --------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": str(self.path),
            "listening": self.listening,
            "connections": len(self.admission.conns),
        }

    def claim(self) -> None:
        """Take the socket's lock early (see :meth:`SocketFile.claim`)."""
        self.file.claim()

    def fds(self) -> list[int]:
        """Descriptors a forked child must not keep: the lock, the listener, the clients."""
        peers = []
        for sock in list(self.admission.conns):
            with contextlib.suppress(OSError, ValueError):
                peers.append(sock.fileno())
        return [*self.file.fds(), *(fd for fd in peers if fd >= 0)]

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind the socket, report started, accept connections until cancelled."""
        sock = self.file.bind()
        listener = await anyio.abc.SocketListener.from_socket(sock)
        try:
            async with anyio.create_task_group() as connections:
                self.listening = True
                log.info("control.listening", socket=str(self.path))
                task_status.started()
                with anyio.CancelScope() as self._accept_scope:
                    if self._closing:
                        self._accept_scope.cancel()
                    async with anyio.create_task_group() as accepting:
                        accepting.start_soon(self.admission.reap_idle)
                        await self._accept_loop(listener, connections)
        finally:
            self.listening = False
            with anyio.CancelScope(shield=True):
                await listener.aclose()
            self.file.remove()
            self.file.release()

    async def _accept_loop(
        self, listener: anyio.abc.SocketListener, connections: anyio.abc.TaskGroup
    ) -> None:
        while True:
            stream, admitted = await self.admission.accept(listener)
            if admitted:
                connections.start_soon(self._connection, stream)
            else:
                connections.start_soon(self._busy, stream)

    def stop_accepting(self) -> None:
        """Close the socket to new connections and stop reading from idle ones."""
        self._closing = True
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        self.file.remove()
        for peer in self.admission.conns:
            # No more requests: a pending read sees EOF; a request in progress still finishes
            # and gets its reply (the write side stays open).
            with contextlib.suppress(OSError):
                peer.shutdown(socket.SHUT_RD)

    # -- connections --------------------------------------------------------------------------
    # Whatever happens on one connection ends at most that connection: every exception is
    # caught here (and answered ``internal`` when the socket still takes a reply), never
    # passed up to the task group that holds every connection and the listener.

    async def _connection(self, accepted: SocketStream) -> None:
        conn: Conn | None = None
        try:
            async with await _on_transport(accepted) as stream:
                conn = self.admission.admit(stream.raw)
                with conn.scope:
                    await self._guarded(stream, conn)
                if conn.timed_out:
                    limit = self.admission.limits().idle_timeout_ms
                    log.info("control.idle_timeout", idle_timeout_ms=limit)
                    await self._last_word(
                        stream,
                        "idle_timeout",
                        f"no complete request line, or reply not read, within {limit} ms "
                        "(gateway.control.idleTimeoutMs); connection closed",
                    )
        except Exception as exc:  # closing the stream failed, or a bug above: log, carry on
            log.error("control.connection_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if conn is not None:
                self.admission.release(conn)

    async def _guarded(self, stream: TransportStream, conn: Conn) -> None:
        try:
            pid, uid = peer_uid(conn.raw)
            if uid not in (os.getuid(), 0):
                log.warning("control.forbidden", peer_pid=pid, peer_uid=uid)
                await self._refuse(
                    stream,
                    "forbidden",
                    f"uid {uid} may not use this socket: only uid {os.getuid()} or root",
                )
                return
            await self._serve_connection(stream, conn)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass  # the client went away mid-reply
        except Exception as exc:
            log.exception("control.connection_failed", error=f"{type(exc).__name__}: {exc}")
            await self._last_word(stream, "internal", f"{type(exc).__name__}: {exc}")

    async def _last_word(self, stream: TransportStream, code: str, message: str) -> None:
        """One error reply before closing, if the client takes it within a second."""
        with anyio.move_on_after(LAST_WORD_S), contextlib.suppress(Exception):
            await stream.send(encode(error(None, code, message)))

    async def _busy(self, accepted: SocketStream) -> None:
        """Answer a connection over ``maxConnections`` with ``busy`` and close it."""
        self.admission.refusing(+1)
        try:
            async with await _on_transport(accepted) as stream:
                limit = self.admission.limits().max_connections
                with anyio.move_on_after(REFUSE_LINGER_S):
                    await self._refuse(
                        stream,
                        "busy",
                        f"{limit} connections are open (gateway.control.maxConnections): "
                        "retry later, or close idle connections",
                    )
        except Exception:
            pass  # the client left; nothing to tell
        finally:
            self.admission.refusing(-1)

    async def _refuse(self, stream: TransportStream, code: str, message: str) -> None:
        """Answer a connection we will not serve with one error, then close it.

        The read side stays open a moment after the reply (bounded by :data:`REFUSE_LINGER_S`):
        closing at once would make a client that writes its request after connecting fail
        with ``EPIPE`` instead of reading why it was refused.
        """
        await stream.send(encode(error(None, code, message)))
        await stream.send_eof()
        with anyio.move_on_after(REFUSE_LINGER_S):
            with contextlib.suppress(anyio.EndOfStream):
                while True:
                    await stream.receive()

    async def _serve_connection(self, stream: TransportStream, conn: Conn) -> None:
        lines = LineReader(stream)
        pipeline = Pipeline(
            stream,
            lines,
            conn,
            window=MAX_IN_FLIGHT,
            closing=lambda: self._closing,
            admit=self._admit,
            settle=queued,
            finish=self._finish,
        )
        session_key = await pipeline.run()
        if session_key is not None:
            await self._stream_session(stream, lines, conn, session_key)

    async def _stream_session(
        self, stream: TransportStream, lines: LineReader, conn: Conn, session_key: str
    ) -> None:
        """After ``subscribe``: write the session's outbound messages as they are sent, one JSON
        line each, until the client closes its end (or the daemon stops). A subscriber may be
        quiet for as long as it likes; one that stops reading is cut off by the idle timeout."""
        with self.host.subscribe(session_key) as messages:
            async with anyio.create_task_group() as tg:

                async def until_eof() -> None:
                    # Input after subscribe is read and ignored; the client closing its end
                    # (or the daemon's stop, which shuts the read side) ends the stream.
                    with contextlib.suppress(anyio.EndOfStream):
                        while True:
                            await lines.read()
                    tg.cancel_scope.cancel()

                tg.start_soon(until_eof)
                async for item in messages:
                    conn.stall()
                    await stream.send(encode(item))
                    conn.unstall()

    async def _admit(self, line: bytes | None, whole: Whole) -> Item:
        """Run one request up to its admission (:mod:`.pipeline`): a ``trigger`` is admitted
        once its event is in the queue, every other op once it is answered."""
        if line is None:
            return encode(
                error(None, "line_too_long", f"request line over {MAX_LINE} bytes; discarded")
            )
        req_id: Any = None
        op = "?"
        try:
            req_id, op, args = parse_request(line)
            if op == "trigger":  # admitted once in the queue; its wait may be cut short
                result = await self.ops.run(op, args)
            else:
                # Begun, it runs whole: a client cut off meanwhile (the idle timeout, a reply it
                # could not take) does not leave a message half-posted or a reload half-done.
                with whole:
                    result = await self.ops.run(op, args)
        except Exception as exc:
            return encode(failure(req_id, op, exc))
        if isinstance(result, dict):
            session_key = result.pop(SUBSCRIBE, None)
            reply = encode({"id": req_id, "ok": True, **result})
            return reply if session_key is None else Subscribed(reply, session_key)
        if isinstance(result, Commit):
            return Durable(req_id, result)
        return Waited(req_id, result)

    async def _finish(self, req_id: Any, dispatch: Dispatch) -> bytes:
        """The reply to a waited ``trigger``, once its event was dispatched."""
        try:
            reply = await dispatch.reply()
        except Exception as exc:
            return encode(failure(req_id, "trigger", exc))
        return encode({"id": req_id, "ok": True, **trigger_fields(reply)})
