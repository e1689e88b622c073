"""The control protocol: JSON lines in, one JSON reply line out (docs/design.md section 3).

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

import contextlib
import json
import math
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio

from gatewayd.channels.transport import TransportStream
from gatewayd.hooks.events import EVENT_TYPES, MAX_SESSION_KEY, EventKeyError, parse_event_key
from gatewayd.hooks.schema import DECISION_EVENTS, EVENTS
from gatewayd.hooks.vocabulary import posted_key
from gatewayd.jsonenc import dumps

MAX_LINE = 1 << 20
"""Longest request line in bytes, newline excluded."""

PROTOCOL = 1
"""The wire protocol's version, told by ``hello``. Raise it for a change an existing client
would misread (a field renamed or removed, a reply that changes shape); a new op or a new field
is not one. Raise :data:`MIN_PROTOCOL` only when this daemon stops serving an old one."""
MIN_PROTOCOL = 1
"""The oldest protocol version this daemon still serves."""


class RequestError(Exception):
    """A request that gets ``{"id", "ok": false, "error": {code, message}}``."""

    def __init__(self, code: str, message: str, req_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.req_id = req_id


def error(req_id: Any, code: str, message: str) -> dict[str, Any]:
    """An error reply."""
    return {"id": req_id, "ok": False, "error": {"code": code, "message": message}}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: send finite numbers (or null)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999; NaN cannot be written as a JSON number
        raise ValueError(f"number {text[:40]} is out of range: send finite numbers (or null)")
    return value


# Built once: json.loads with options builds a new decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)


def encode(reply: dict[str, Any]) -> bytes:
    """One reply line, always valid UTF-8 JSON; never raises.

    Values that are not JSON are sent as text: objects (a Path, a handle) as ``str()``, NaN and
    infinities as ``"nan"``/``"inf"``, mapping keys that are not strings as ``str()``; strings
    UTF-8 cannot carry (lone surrogates, from a request's id or a hook's value) are sent
    ``\\u``-escaped, which decodes to the same string. A reply that still cannot be encoded (a
    circular or too deeply nested structure, a ``__str__`` that raises) becomes an ``internal``
    error with the same id, or with id null when the id is the problem.
    """
    try:
        return dumps(reply, allow_nan=False, newline=True)
    except Exception:  # the rare reply: the slow path below says what was wrong
        pass
    try:
        return dumps(_plain(reply), allow_nan=False, newline=True)
    except Exception as exc:  # whatever a hook's value does, the client gets a reply
        return _unserialisable(reply, exc)


def _plain(value: Any) -> Any:
    """``value`` with non-finite floats and non-string keys made text (the others pass)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int):
        return json.dumps(key)  # what json itself does with these keys
    return str(key)


def _unserialisable(reply: dict[str, Any], exc: Exception) -> bytes:
    message = f"reply not serialisable: {type(exc).__name__}: {_text(exc)}"
    for req_id in (reply.get("id"), None):
        with contextlib.suppress(Exception):
            return dumps(error(req_id, "internal", message), allow_nan=False, newline=True)
    return dumps(error(None, "internal", "reply not serialisable"), newline=True)


def _text(exc: BaseException) -> str:
    """``str(exc)``, bounded, even when the exception's own ``__str__`` fails."""
    try:
        return str(exc)[:300]
    except Exception:  # a broken __str__
        return "(no message)"


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
    """One op: its declared fields, in the order they are checked."""

    fields: tuple[Field, ...] = ()


def _non_empty(value: str) -> str:
    if not value.strip():
        raise RequestError("bad_request", "field 'sessionKey' must not be empty")
    if len(value) > MAX_SESSION_KEY:
        raise RequestError(
            "bad_request",
            f"field 'sessionKey' is {len(value)} characters long: at most {MAX_SESSION_KEY}",
        )
    return value


def _event_key(key: str) -> str:
    """``key`` checked, an OpenClaw plugin-hook name as its key here (``before_tool_call`` is
    ``agent:before_tool_call``)."""
    key = posted_key(key)
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


def _depth(value: int) -> int:
    if value < 0:
        raise RequestError("bad_request", f"field 'depth' must be 0 or more, got {value}")
    return value


DEPTH = Field("depth", (int,), 0, check=_depth)
"""How many events caused the request in a hook's process (a command hook's ``gatewayd
trigger`` sends its ``$GATEWAYD_HOOK_DEPTH``): the request's events count toward
``hooks.maxDepth`` from there."""
TRACE = Field("trace", (bool,), False)
"""``trace: true``: the reply carries each handler's outcome (message and trigger)."""
CHANNEL = "control"
"""The channel name a ``message`` carries unless the request names one."""


def _maybe_event_key(key: str) -> str:
    return _event_key(key) if key else key


def _trigger_key(key: str) -> str:
    """What ``trigger`` may post: any event but the gateway's own lifecycle (``gateway:startup``
    fires once per process, after the channels are up; ``gateway:shutdown`` as it stops)."""
    key = _event_key(key)
    if key.partition(":")[0] == "gateway":
        raise RequestError(
            "unknown_event",
            f"{key!r} is the gateway's own lifecycle event, fired by the daemon alone: a trigger "
            f"cannot post it. To run one hook on it: gatewayd hooks test HOOK --event {key}",
        )
    return key


CLIENT_EVENTS = tuple(sorted(key for key in EVENTS if key.partition(":")[0] != "gateway"))
"""The events of the schema a client may post with ``trigger`` (``hello`` lists them): all but
the gateway's own lifecycle. ``command`` stands for every ``command:<name>``."""
CLIENT_DECISIONS = tuple(key for key in CLIENT_EVENTS if key in DECISION_EVENTS)
"""Those whose ``trigger`` reply always carries the handlers' merged ``result``."""

OPS: dict[str, Op] = {
    # The handshake: the protocol version, what this daemon serves, its limits (control.py).
    "hello": Op((Field("protocol", (int,), None), Field("client", (str,), None))),
    "ping": Op(),
    "status": Op(),
    "hooks": Op(),
    "reload": Op(),
    "bootstrap": Op((SESSION_KEY,)),
    # The connection then streams the session's outbound messages (control.py).
    "subscribe": Op((SESSION_KEY,)),
    "message": Op(
        (
            SESSION_KEY,
            Field("text", (str,)),
            Field("senderId", (str,), "control"),
            Field("channel", (str,), CHANNEL),
            TRACE,
            DEPTH,
        )
    ),
    "trigger": Op(
        (
            Field("event", (str,), check=_trigger_key),
            SESSION_KEY,
            Field("context", (dict,), {}),
            Field("wait", (bool,), True),
            TRACE,
            DEPTH,
        )
    ),
    # The trigger journal (gatewayd events); gatewayd.journal.requests checks the combination.
    "events": Op(
        (
            Field("action", (str,)),
            Field("state", (str,), "all"),
            Field("sessionKey", (str,), None),
            Field("limit", (int,), 50),
            Field("eventId", (str,), None),
            Field("ids", (list,), None),
            Field("all", (bool,), False),
        ),
    ),
    # One hook alone against a sample event (gatewayd hooks test): always traced.
    "test": Op(
        (
            Field("hook", (str,)),
            Field("event", (str,), "", check=_maybe_event_key),
            Field("context", (dict,), {}),
            Field("sessionKey", (str,), "agent:main:hooks-test", check=_non_empty),
        )
    ),
}
"""Every op and its declared fields, in the order they are checked."""

_OP = Field("op", (str,))


Request = tuple[Any, str, dict[str, Any]]
"""A valid request as :func:`parse_request` returns it: ``(id, op, args)``.

``id`` is echoed back and ``args`` holds the op's declared fields with defaults filled in. A
plain tuple: building a NamedTuple or an object per request cost more than the checks (measured).
"""


def _mistyped(field: Field, value: Any) -> RequestError:
    try:
        shown = f" ({dumps(value).decode()[:60]})"
    except (RecursionError, ValueError):  # too deep to show
        shown = ""
    return RequestError(
        "bad_request",
        f"field {field.name!r} must be {field.describe()}, got {type(value).__name__}{shown}",
    )


def _missing(field: Field) -> RequestError:
    return RequestError("bad_request", f"missing field {field.name!r} ({field.describe()})")


_ABSENT: Any = object()


def parse_request(line: bytes) -> Request:
    """Decode and validate one request line; raise :class:`RequestError` (id set when known)."""
    try:
        req = _DECODER.decode(line.decode())
    except UnicodeDecodeError as exc:
        raise RequestError("bad_json", f"not UTF-8: {exc}") from None
    except ValueError as exc:
        if not line.strip():
            raise RequestError("bad_request", "empty line: send one JSON object per line") from None
        if "int_max_str_digits" in str(exc):  # its advice is the server's, not the client's
            raise RequestError(
                "bad_json",
                f"a number of more than {sys.get_int_max_str_digits()} digits: send it as a string",
            ) from None
        raise RequestError("bad_json", f"not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestError(
            "bad_json", "nested too deeply to decode: send flatter JSON (a few levels deep)"
        ) from None
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
        return req_id, op, args
    except RequestError as exc:
        exc.req_id = req_id
        raise


# -- framing --------------------------------------------------------------------------------------


class LineReader:
    """Splits a byte stream into request lines, enforcing :data:`MAX_LINE`.

    :meth:`read` returns the next line, ``None`` for a line that was too long (its bytes are
    discarded up to the next newline), and raises ``anyio.EndOfStream`` when the peer is done.
    A last request the peer ends with EOF instead of a newline is still a line.
    """

    def __init__(self, stream: TransportStream) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._start = 0  # consumed prefix of _buf, dropped only when more data is needed
        self._discarding = False
        self._eof = False

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
            if self._eof:
                raise anyio.EndOfStream
            try:
                chunk = await self._stream.receive()
            except anyio.EndOfStream:
                # The peer is done sending (closed, or shut its write side down): a last request
                # without a newline is still answered. Whitespace alone is not a request.
                self._eof = True
                if self._discarding or not buf.strip():
                    raise
                line = bytes(buf)
                del buf[:]
                return line
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise anyio.EndOfStream from None
            buf += chunk
