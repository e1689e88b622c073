"""The control protocol: JSON lines in, one JSON reply line out (README "control socket protocol").

This module owns the wire format and nothing else: framing (:class:`LineReader`), decoding and
validating a request against its op's declared fields (:data:`OPS`, :func:`parse_request`), and
encoding replies (:func:`encode`, :func:`error`). What an op *does* lives in
:mod:`gatewayd.channels.control`.

Each op declares its fields once, as a table of :class:`Field` (wire name, accepted JSON types,
default, extra check); :func:`parse_request` walks that table, so a new field is one line and every
error message has the same shape: ``missing field 'text' (a string)``, ``field 'wait' must be true
or false, got str ("yes")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio
from anyio.abc import SocketStream

from gatewayd.hooks.events import EVENT_TYPES, EventKeyError, parse_event_key

MAX_LINE = 1 << 20
"""Longest request line in bytes, newline excluded."""
READ_CHUNK = 1 << 16


class RequestError(Exception):
    """A request that gets ``{"id", "ok": false, "error": {code, message}}``."""

    def __init__(self, code: str, message: str, req_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.req_id = req_id


def error(req_id: Any, code: str, message: str) -> dict[str, Any]:
    """An error reply."""
    return {"id": req_id, "ok": False, "error": {"code": code, "message": message}}


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""Built once: ``json.dumps`` with options builds a new encoder on every call (measured)."""


def encode(reply: dict[str, Any]) -> bytes:
    """One reply line; values that are not JSON (a Path, a handle) are stringified."""
    return (_ENCODER.encode(reply) + "\n").encode()


# -- declared requests ----------------------------------------------------------------------------

REQUIRED: Any = object()
"""``Field.default`` of a field the request must carry."""

_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "an object", list: "an array"}


class Field(NamedTuple):
    """One request field: its wire name, accepted JSON types, default, and an extra check.

    Types are matched exactly (``type(value) in types``): decoded JSON holds only plain ``str``,
    ``int``, ``float``, ``bool``, ``dict``, ``list``, so ``true`` never passes for an int. An
    absent field, or ``null`` for a field with a default, takes the default; ``check`` sees the
    value after the type test and returns the value to use or raises :class:`RequestError`.
    """

    name: str
    types: tuple[type, ...]
    default: Any = REQUIRED
    check: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in self.types)


class Op(NamedTuple):
    """One op: its fields, and whether it may wait on hooks (replies ready are sent first)."""

    fields: tuple[Field, ...] = ()
    waits: bool = True


def _non_empty(value: str) -> str:
    if not value.strip():
        raise RequestError("bad_request", "field 'sessionKey' must not be empty")
    return value


def _event_key(key: str) -> str:
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


SESSION_KEY = Field("sessionKey", (str,), check=_non_empty)
TRACE = Field("trace", (bool,), False)
"""``trace: true``: the reply carries each handler's outcome (message and trigger)."""
CHANNEL = "control"
"""The channel name a ``message`` carries unless the request names one."""

OPS: dict[str, Op] = {
    "ping": Op(waits=False),
    "status": Op(waits=False),
    "hooks": Op(waits=False),
    "reload": Op(),
    "bootstrap": Op((SESSION_KEY,)),
    # The connection then streams the session's outbound messages (control.py).
    "subscribe": Op((SESSION_KEY,), waits=False),
    "message": Op(
        (
            SESSION_KEY,
            Field("text", (str,)),
            Field("senderId", (str,), "control"),
            Field("channel", (str,), CHANNEL),
            TRACE,
        )
    ),
    # A trigger with "wait": false never waits on hooks either (see parse_request).
    "trigger": Op(
        (
            Field("event", (str,), check=_event_key),
            SESSION_KEY,
            Field("context", (dict,), {}),
            Field("wait", (bool,), True),
            TRACE,
        )
    ),
}
"""Every op and its declared fields, in the order they are checked."""

_OP = Field("op", (str,))


Request = tuple[Any, str, dict[str, Any], bool]
"""A valid request as :func:`parse_request` returns it: ``(id, op, args, waits)``.

``id`` is echoed back, ``args`` holds the op's declared fields with defaults filled in, and
``waits`` says whether answering may wait on hooks (so replies ready should be sent first). A
plain tuple: building a NamedTuple or an object per request cost more than the checks (measured).
"""


def _mistyped(field: Field, value: Any) -> RequestError:
    return RequestError(
        "bad_request",
        f"field {field.name!r} must be {field.describe()}, got {type(value).__name__} "
        f"({json.dumps(value)[:60]})",
    )


def _missing(field: Field) -> RequestError:
    return RequestError("bad_request", f"missing field {field.name!r} ({field.describe()})")


_ABSENT: Any = object()


def parse_request(line: bytes) -> Request:
    """Decode and validate one request line; raise :class:`RequestError` (id set when known)."""
    try:
        req = json.loads(line)
    except ValueError as exc:  # UnicodeDecodeError included
        if not line.strip():
            raise RequestError("bad_request", "empty line: send one JSON object per line") from None
        raise RequestError("bad_json", f"not valid JSON: {exc}") from None
    if type(req) is not dict:
        raise RequestError(
            "bad_request", f"a request must be a JSON object, got {type(req).__name__}"
        )
    req_id = req.get("id")
    try:
        op = req.get("op", _ABSENT)
        if type(op) is not str:
            raise _missing(_OP) if op is _ABSENT else _mistyped(_OP, op)
        spec = OPS.get(op)
        if spec is None:
            raise RequestError("unknown_op", f"unknown op {op!r}; known: {', '.join(sorted(OPS))}")
        args: dict[str, Any] = {}
        # The hot path of every request: one pass over the declared fields, no calls unless a
        # field has a check (measured: as fast as the hand-written checks it replaced).
        for field in spec.fields:
            name, types, default, check = field
            value = req.get(name, _ABSENT)
            if type(value) in types:
                args[name] = value if check is None else check(value)
            elif default is not REQUIRED and (value is _ABSENT or value is None):
                args[name] = default
            elif value is _ABSENT:
                raise _missing(field)
            else:
                raise _mistyped(field, value)
        # "wait": false turns a trigger into a quick op: it only queues.
        return req_id, op, args, spec.waits and args.get("wait") is not False
    except RequestError as exc:
        exc.req_id = req_id
        raise


# -- framing --------------------------------------------------------------------------------------


class LineReader:
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
