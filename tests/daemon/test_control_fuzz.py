"""Fuzz of the control protocol against a real ``gatewayd run`` (Hypothesis).

Three kinds of input, each sent on one connection followed by a ``ping``: arbitrary bytes,
arbitrary JSON text (NaN, infinities, lone surrogates and deep nesting included), and requests
of every op with arbitrary values in their fields. The properties: every complete line gets
exactly one reply, each a JSON object (strict: no NaN) with a boolean ``ok``, in order, then
the ``pong``; the daemon is still running at the end and answers a new connection.

Bounded: a few hundred examples in all, no deadline (the machine is shared), well under a minute.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatewayd.channels.protocol import OPS
from tests.support.control import Control
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure reproduces
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PING = b'{"id": "fuzz-ping", "op": "ping"}\n'

# Text with everything JSON strings may carry, lone surrogates included.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
NUMBERS = st.integers(-(10**30), 10**30) | st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
DEEP = st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)
EVENTS = st.sampled_from(["command:fuzz", "command:new", "message:received", "nope:x"]) | TEXT


def strict(line: bytes) -> dict[str, Any]:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a reply: {line[:200]!r}")

    reply = json.loads(line.decode("utf-8"), parse_constant=refuse)
    assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
    return reply


def exchange(control: Control, payload: bytes) -> list[dict[str, Any]]:
    """Send ``payload`` (complete lines) and a ping; the replies before the pong."""
    control.send_raw(payload + PING)
    replies: list[dict[str, Any]] = []
    while True:
        line = control.file.readline()
        assert line.endswith(b"\n"), f"connection ended after {len(replies)} replies: {line!r}"
        reply = strict(line)
        if reply.get("id") == "fuzz-ping" and reply.get("pong") is True:
            return replies
        replies.append(reply)


def dumps(value: Any) -> bytes:
    # ensure_ascii: lone surrogates travel as \\u escapes; allow_nan: NaN goes on the wire.
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


@pytest.fixture
def daemon(start_daemon: StartDaemon, state_dir: Path) -> Iterator[Daemon]:
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    yield daemon
    assert daemon.proc.poll() is None, daemon.stderr_text()[-3000:]
    with daemon.control() as control:
        assert control.ok("ping")["pong"] is True
    assert daemon.stop() == 0


def test_arbitrary_bytes(daemon: Daemon) -> None:
    with daemon.control() as control:

        @FUZZ
        @given(st.binary(max_size=300))
        def check(data: bytes) -> None:
            lines = data.split(b"\n")
            replies = exchange(control, data + b"\n")
            assert len(replies) == len(lines), (data, replies)

        check()


def test_arbitrary_json(daemon: Daemon) -> None:
    with daemon.control() as control:

        @FUZZ
        @given(st.lists(JSON.map(dumps) | DEEP.map(str.encode), min_size=1, max_size=4))
        def check(values: list[bytes]) -> None:
            replies = exchange(control, b"".join(v + b"\n" for v in values))
            assert len(replies) == len(values), (values, replies)

        check()


def _request(op: str, fields: dict[str, Any], req_id: Any) -> dict[str, Any]:
    return {"id": req_id, "op": op, **fields}


def _typed(types: tuple[type, ...]) -> st.SearchStrategy[Any]:
    """Values of a field's declared JSON types (so the op gets past validation), or any JSON."""
    by_type: dict[type, st.SearchStrategy[Any]] = {
        str: TEXT,
        bool: st.booleans(),
        int: st.integers(-(2**64), 2**64),
        float: NUMBERS,
        dict: st.dictionaries(TEXT, JSON, max_size=4),
        list: st.lists(JSON, max_size=4),
    }
    return st.one_of(*(by_type[t] for t in types if t in by_type), JSON)


# Every field any op declares, so a new op or field is fuzzed without touching this file.
FIELDS = {field.name: field.types for op in OPS.values() for field in op.fields}
REQUESTS = st.builds(
    _request,
    # reload: tested on its own elsewhere; subscribe: turns the connection into a stream of a
    # session's messages (no more replies on it by design), tested in test_deciding_hooks.py
    st.sampled_from(sorted(set(OPS) - {"reload", "subscribe"})),
    st.fixed_dictionaries(
        {},
        optional={
            name: EVENTS | _typed(types) if name == "event" else _typed(types)
            for name, types in FIELDS.items()
        },
    ),
    JSON,
)


def test_every_op_with_arbitrary_field_values(daemon: Daemon) -> None:
    with daemon.control() as control:

        @FUZZ
        @given(st.lists(REQUESTS, min_size=1, max_size=3))
        def check(requests: list[dict[str, Any]]) -> None:
            replies = exchange(control, b"".join(dumps(r) + b"\n" for r in requests))
            assert len(replies) == len(requests), (requests, replies)
            for request, reply in zip(requests, replies, strict=True):
                if _finite(request):  # else the line is not JSON: bad_json, id null
                    assert reply["id"] == request["id"], (request, reply)

        check()


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True
