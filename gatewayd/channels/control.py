"""The control channel: a Unix socket speaking newline-delimited JSON (DESIGN.md section 5).

One request per line (at most :data:`MAX_LINE` bytes), one reply line per request, in order::

    -> {"id": 1, "op": "message", "sessionKey": "agent:main:main", "text": "/new"}
    <- {"id": 1, "ok": true, "messages": ["fresh session"], "command": "new"}
    -> {"id": 2, "op": "trigger", "event": "nope:x", "sessionKey": "s"}
    <- {"id": 2, "ok": false, "error": {"code": "unknown_event", "message": "..."}}

Requests on one connection are answered one at a time (open more connections for parallelism);
a request that waits on a full queue stops reading from that connection, which is how
backpressure reaches a client. Bad input (invalid JSON or UTF-8, a non-object, an over-long line,
an unknown op, a missing or mistyped field, an unknown event type) gets an error reply and the
connection carries on.

Safety: the socket is ``0600`` inside a directory created ``0700``; peer credentials
(``SO_PEERCRED``) must be our own uid or root. A lock file beside the socket (``<socket>.lock``,
``flock``) is held for the daemon's lifetime: a second daemon is refused instead of stealing the
socket, and a socket left by a crashed daemon (lock free) is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

from gatewayd.channels import ChannelError, ChannelHost
from gatewayd.hooks.events import EVENT_TYPES, EventKeyError, parse_event_key
from gatewayd.triggers import QueueClosed

log = structlog.get_logger("gatewayd.control")

MAX_LINE = 1 << 20
"""Longest request line in bytes, newline excluded."""
READ_CHUNK = 1 << 16
MAX_SUN_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
MAX_PENDING = 64
"""Replies held back for one batched write while a client pipelines requests."""
QUICK_OPS = frozenset({"ping", "status", "hooks"})
"""Ops that never wait on hooks (``trigger`` with ``wait: false`` is one too)."""


class RequestError(Exception):
    """A request that gets ``{"ok": false, "error": {code, message}}``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": req_id, "ok": False, "error": {"code": code, "message": message}}


_MISSING = object()


def _field(
    req: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = _MISSING
) -> Any:
    """``req[name]`` checked against ``kind``; absent or null takes ``default`` if given."""
    value = req.get(name, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise RequestError("bad_request", f"missing field {name!r} ({_kind_name(kind)})")
        return default
    # bool is an int in Python; a field that wants an int or str must not take true/false
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise RequestError(
            "bad_request",
            f"field {name!r} must be {_kind_name(kind)}, got {type(value).__name__} "
            f"({json.dumps(value)[:60]})",
        )
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", dict: "an object", list: "an array"}
    return " or ".join(names.get(k, k.__name__) for k in _kinds(kind))


def _session_key(req: dict[str, Any]) -> str:
    key: str = _field(req, "sessionKey", str)
    if not key.strip():
        raise RequestError("bad_request", "field 'sessionKey' must not be empty")
    return key


def _event_key(req: dict[str, Any]) -> str:
    key: str = _field(req, "event", str)
    try:
        etype, action = parse_event_key(key)
    except EventKeyError as exc:
        raise RequestError("unknown_event", str(exc)) from None
    if etype == "*" or not action:
        raise RequestError(
            "unknown_event",
            f"event {key!r} needs an action: 'type:action' with type one of "
            f"{', '.join(sorted(EVENT_TYPES))}",
        )
    return key


def encode(reply: dict[str, Any]) -> bytes:
    """One reply line; values that are not JSON (a Path, a handle) are stringified."""
    return (json.dumps(reply, ensure_ascii=False, default=str) + "\n").encode()


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """``(pid, uid)`` of the process at the other end of a Unix stream socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


class _Lines:
    """Splits a byte stream into request lines, enforcing :data:`MAX_LINE`.

    :meth:`read` returns the next line, ``None`` for a line that was too long (its bytes are
    discarded up to the next newline), and raises ``anyio.EndOfStream`` when the peer is done.
    """

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._start = 0  # consumed prefix of _buf, dropped only when more data is needed
        self._discarding = False

    def buffered(self) -> bool:
        """Whether a whole line is already buffered (read() will not wait)."""
        return self._buf.find(b"\n", self._start) >= 0

    async def read(self) -> bytes | None:
        buf = self._buf
        while True:
            nl = buf.find(b"\n", self._start)
            if nl >= 0:
                line = bytes(buf[self._start : nl])
                self._start = nl + 1
                if self._discarding:  # the tail of an over-long line
                    self._discarding = False
                    continue
                return line if len(line) <= MAX_LINE else None
            if self._discarding:
                self._start = len(buf)
            elif len(buf) - self._start > MAX_LINE:
                self._discarding = True
                del buf[:]
                self._start = 0
                return None
            del buf[: self._start]
            self._start = 0
            try:
                chunk = await self._stream.receive(READ_CHUNK)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise anyio.EndOfStream from None
            buf += chunk


class ControlChannel:
    """The Unix-socket JSON-lines channel; see the module docstring."""

    name = "control"

    def __init__(self, host: ChannelHost, socket_path: Path, *, private_dir: bool = False) -> None:
        """``private_dir``: the socket's directory is ours alone (the default ``<state>/run``)
        and is kept at 0700; a configured directory is created 0700 when missing, else left
        as it is (with a warning when other users can enter it)."""
        self.host = host
        self.path = socket_path
        self.private_dir = private_dir
        self.listening = False
        self._lock_fd: int | None = None
        self._listener: anyio.abc.SocketListener | None = None
        self._accept_scope: anyio.CancelScope | None = None
        self._closing = False
        self._peers: set[socket.socket] = set()
        """Sockets of the open connections; stop_accepting() shuts their read side."""
        self._ops: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "ping": self._op_ping,
            "status": self._op_status,
            "message": self._op_message,
            "trigger": self._op_trigger,
            "reload": self._op_reload,
            "hooks": self._op_hooks,
            "bootstrap": self._op_bootstrap,
        }

    # -- lifecycle --------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": str(self.path),
            "listening": self.listening,
            "connections": len(self._peers),
        }

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind the socket, report started, accept connections until cancelled."""
        sock = self._bind()
        listener = await anyio.abc.SocketListener.from_socket(sock)
        self._listener = listener
        try:
            async with anyio.create_task_group() as connections:
                self.listening = True
                log.info("control.listening", socket=str(self.path))
                task_status.started()
                with anyio.CancelScope() as self._accept_scope:
                    if self._closing:
                        self._accept_scope.cancel()
                    await self._accept_loop(listener, connections)
        finally:
            self.listening = False
            with anyio.CancelScope(shield=True):
                await listener.aclose()
            self._remove_socket()
            self._release_lock()

    async def _accept_loop(
        self, listener: anyio.abc.SocketListener, connections: anyio.abc.TaskGroup
    ) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # EMFILE and friends: back off, keep serving
                log.error("control.accept_failed", error=str(exc))
                await anyio.sleep(0.1)
                continue
            connections.start_soon(self._connection, stream)

    def stop_accepting(self) -> None:
        """Close the socket to new connections and stop reading from idle ones."""
        self._closing = True
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        self._remove_socket()
        for peer in self._peers:
            # No more requests: a pending read sees EOF; a request in progress still finishes
            # and gets its reply (the write side stays open).
            with contextlib.suppress(OSError):
                peer.shutdown(socket.SHUT_RD)

    # -- the socket file, the lock ------------------------------------------------------------

    def claim(self) -> None:
        """Check the path, create its directory and take the lock; raise :class:`ChannelError`."""
        if self._lock_fd is not None:
            return
        path = self.path
        if len(os.fsencode(path)) > MAX_SUN_PATH:
            raise ChannelError(
                f"control socket path {path} is {len(os.fsencode(path))} bytes; Unix sockets allow "
                f"{MAX_SUN_PATH}: set gateway.control.socket (or ELIZA_STATE_DIR) to a shorter path"
            )
        self._prepare_dir(path.parent)
        self._take_lock()

    def _bind(self) -> socket.socket:
        path = self.path
        self.claim()
        try:
            self._clear_stale(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(str(path))
                # The directory is 0700, so nobody else can reach the socket before this chmod.
                os.chmod(path, 0o600)
                sock.listen(128)
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            self._release_lock()
            raise ChannelError(f"cannot listen on {path}: {exc.strerror or exc}") from None
        except BaseException:
            self._release_lock()
            raise
        return sock

    def _prepare_dir(self, directory: Path) -> None:
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = directory.stat()
        except OSError as exc:
            raise ChannelError(
                f"cannot create the control socket directory {directory}: {exc.strerror or exc}"
            ) from None
        if st.st_mode & 0o077 and self.private_dir and st.st_uid == os.getuid():
            os.chmod(directory, 0o700)
        elif st.st_mode & 0o077:
            log.warning(
                "control.dir_shared",
                directory=str(directory),
                mode=oct(stat.S_IMODE(st.st_mode)),
                note="other users can see the socket; it is 0600 and peers are checked by uid",
            )

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _take_lock(self) -> None:
        lock = self.lock_path
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ChannelError(f"cannot open the lock file {lock}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ChannelError(
                    f"another gatewayd (pid {owner}) is already running on {self.path}; stop it "
                    "first, or give this one its own ELIZA_STATE_DIR or gateway.control.socket"
                ) from None
            raise ChannelError(f"cannot lock {lock}: {exc.strerror or exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock; the file stays for the next daemon
            self._lock_fd = None

    def _clear_stale(self, path: Path) -> None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ChannelError(
                f"{path} exists and is not a socket; remove it or set gateway.control.socket"
            )
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink(missing_ok=True)  # nobody listening: a crashed daemon's leftover
            log.info("control.stale_socket_removed", socket=str(path))
            return
        finally:
            probe.close()
        raise ChannelError(
            f"a process that holds no gatewayd lock is listening on {path}; stop it or set "
            "gateway.control.socket to another path"
        )

    def _remove_socket(self) -> None:
        if self._lock_fd is not None:  # only the lock holder may remove the path
            with contextlib.suppress(OSError):
                self.path.unlink()

    # -- connections --------------------------------------------------------------------------

    async def _connection(self, stream: SocketStream) -> None:
        raw = stream.extra(SocketAttribute.raw_socket)
        self._peers.add(raw)
        try:
            async with stream:
                pid, uid = peer_uid(raw)
                if uid not in (os.getuid(), 0):
                    log.warning("control.forbidden", peer_pid=pid, peer_uid=uid)
                    await self._send(
                        stream,
                        _error(
                            None,
                            "forbidden",
                            f"uid {uid} may not use this socket: only uid {os.getuid()} or root",
                        ),
                    )
                    return
                await self._serve_connection(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass  # the client went away mid-reply
        finally:
            self._peers.discard(raw)

    async def _serve_connection(self, stream: SocketStream) -> None:
        # Replies to a pipelining client are written in batches: a reply is held back while the
        # next request is already buffered (up to MAX_PENDING replies), and everything held is
        # written before waiting for more input or on hooks, so no reply waits on a slow one.
        lines = _Lines(stream)
        pending: list[bytes] = []

        async def flush() -> None:
            if pending:
                data = b"".join(pending)
                pending.clear()
                await stream.send(data)

        while not self._closing:
            if pending and (len(pending) >= MAX_PENDING or not lines.buffered()):
                await flush()
            try:
                line = await lines.read()  # stop_accepting() ends this with EOF (SHUT_RD)
            except anyio.EndOfStream:
                break
            if self._closing:
                break  # read after the stop: not accepted
            pending.append(self._encode(await self._reply(line, flush)))
        await flush()

    async def _send(self, stream: SocketStream, reply: dict[str, Any]) -> None:
        await stream.send(self._encode(reply))

    @staticmethod
    def _encode(reply: dict[str, Any]) -> bytes:
        try:
            return encode(reply)
        except (TypeError, ValueError) as exc:  # e.g. a circular structure from a hook
            return encode(_error(reply.get("id"), "internal", f"reply not serialisable: {exc}"))

    async def _reply(
        self, line: bytes | None, before_waiting: Callable[[], Awaitable[None]]
    ) -> dict[str, Any]:
        if line is None:
            return _error(None, "line_too_long", f"request line over {MAX_LINE} bytes; discarded")
        if not line.strip():
            return _error(None, "bad_request", "empty line: send one JSON object per line")
        try:
            req = json.loads(line)
        except ValueError as exc:  # UnicodeDecodeError included
            return _error(None, "bad_json", f"not valid JSON: {exc}")
        if not isinstance(req, dict):
            return _error(
                None, "bad_request", f"a request must be a JSON object, got {type(req).__name__}"
            )
        req_id = req.get("id")
        try:
            op = _field(req, "op", str)
            handler = self._ops.get(op)
            if handler is None:
                raise RequestError(
                    "unknown_op", f"unknown op {op!r}; known: {', '.join(sorted(self._ops))}"
                )
            if op not in QUICK_OPS and not (op == "trigger" and req.get("wait") is False):
                await before_waiting()  # this one waits on hooks: send what is ready first
            result = await handler(req)
        except RequestError as exc:
            return _error(req_id, exc.code, str(exc))
        except QueueClosed as exc:
            return _error(req_id, "shutting_down", str(exc))
        except Exception as exc:
            log.exception("control.op_failed", op=req.get("op"), error=str(exc))
            return _error(req_id, "internal", f"{type(exc).__name__}: {exc}")
        return {"id": req_id, "ok": True, **result}

    # -- ops ----------------------------------------------------------------------------------

    async def _op_ping(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"pong": True}

    async def _op_status(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"status": self.host.status()}

    async def _op_message(self, req: dict[str, Any]) -> dict[str, Any]:
        key = _session_key(req)
        text: str = _field(req, "text", str)
        sender: str = _field(req, "senderId", str, "control")
        channel: str = _field(req, "channel", str, self.name)
        if _field(req, "trace", bool, False):
            messages, command, trace = await self.host.deliver_traced(
                key, text, sender_id=sender, channel=channel
            )
            return {"messages": messages, "command": command, "trace": trace}
        messages, command = await self.host.deliver(
            key, text, sender_id=sender, channel=channel, wait=True
        )
        return {"messages": messages, "command": command}

    async def _op_trigger(self, req: dict[str, Any]) -> dict[str, Any]:
        event = _event_key(req)
        key = _session_key(req)
        context: dict[str, Any] = _field(req, "context", dict, {})
        wait: bool = _field(req, "wait", bool, True)
        if _field(req, "trace", bool, False):
            if not wait:
                raise RequestError(
                    "bad_request", "'trace: true' needs the dispatch: drop 'wait: false'"
                )
            traced, trace = await self.host.trigger_traced(event, key, context)
            return {"messages": traced, "trace": trace}
        messages = await self.host.trigger(event, key, context, wait=wait)
        return {"messages": messages} if wait else {"queued": True}

    async def _op_reload(self, req: dict[str, Any]) -> dict[str, Any]:
        outcome = await self.host.reload("op")
        if outcome["result"] != "ok":
            raise RequestError(
                "reload_refused", "; ".join(outcome.get("errors") or [outcome["result"]])
            )
        return {"result": outcome["summary"]}

    async def _op_hooks(self, req: dict[str, Any]) -> dict[str, Any]:
        return self.host.hooks()

    async def _op_bootstrap(self, req: dict[str, Any]) -> dict[str, Any]:
        key = _session_key(req)
        return {"bootstrapFiles": await self.host.bootstrap(key)}
