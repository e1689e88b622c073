"""No single request or connection can stop the daemon.

Each case is one request line (or one way of leaving) that once raised out of the connection
into the task group holding every connection, or put text on the wire that is not JSON. Every
case ends by asking the daemon a ``ping`` on the same connection where it stays open, and on a
new one: the daemon must still be serving.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.control import Control
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

WEIRD = """
class Unprintable:
    def __str__(self):
        raise RuntimeError("no text for you")


def deep(levels):
    value = []
    for _ in range(levels):
        value = [value]
    return value


def circular():
    value = []
    value.append(value)
    return value


VALUES = {
    "nan": lambda: float("nan"),
    "inf": lambda: float("-inf"),
    "surrogate": lambda: "caf\\udce9",
    "unprintable": Unprintable,
    "circular": circular,
    "deep": lambda: deep(100_000),
    "tuple_key": lambda: {(1, 2): "x"},
}


async def handler(event):
    kind = event.session_key.rpartition(":")[2]
    if kind in VALUES:
        event.context["bootstrapFiles"].append({"name": kind, "value": VALUES[kind]()})
"""


def strict(line: bytes) -> dict[str, Any]:
    """A reply line parsed as JSON proper: ``NaN``/``Infinity`` are not JSON."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"the reply carries {name}, which is not JSON: {line[:200]!r}")

    assert line.endswith(b"\n"), f"not one whole line: {line[:200]!r}"
    # A deeply nested id the daemon echoes back must parse here too, however deep the test
    # runner's own stack already is (pytest-xdist workers run deeper than a plain pytest).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        reply = json.loads(line.decode("utf-8"), parse_constant=refuse)
    finally:
        sys.setrecursionlimit(limit)
    assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
    return reply


def raw_reply(control: Control) -> dict[str, Any]:
    line = control.file.readline()
    assert line, "the daemon closed the connection instead of replying"
    return strict(line)


def still_serving(daemon: Daemon, control: Control | None = None) -> None:
    if control is not None:
        control.send_raw(b'{"id": "after", "op": "ping"}\n')
        assert raw_reply(control) == {"id": "after", "ok": True, "pong": True}
    assert daemon.proc.poll() is None, f"the daemon exited:\n{daemon.stderr_text()[-3000:]}"
    with daemon.control() as fresh:
        assert fresh.ok("ping")["pong"] is True


@pytest.fixture
def daemon(write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path) -> Iterator[Daemon]:
    write_hook(state_dir / "hooks", "weird", events=["agent:bootstrap"], handler=WEIRD)
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    yield daemon
    assert daemon.stop() == 0, daemon.stderr_text()[-3000:]


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"[" * 2048, "bad_json"),  # RecursionError in the decoder, not a ValueError
        (b'{"id": 1, "op": "ping", "x": ' + nested(5000) + b"}", "bad_json"),
        (b'{"id": NaN, "op": "ping"}', "bad_json"),
        (b'{"id": Infinity, "op": "ping"}', "bad_json"),
        (b'{"id": -Infinity, "op": "ping"}', "bad_json"),
        (b'{"id": 1e999, "op": "ping"}', "bad_json"),
        (b'{"id": 1, "op": "trigger", "event": "command:x", "sessionKey": "s", '
         b'"context": {"v": NaN}}', "bad_json"),
        (b'{"id": 1, "op": "message", "sessionKey": ' + nested(900) + b', "text": "x"}',
         "bad_request"),
        (b'{"id": 1, "op": "trigger", "event": "command:x", "sessionKey": "s", "context": '
         + nested(900) + b"}", "bad_request"),
    ],
    ids=[
        "2k-brackets",
        "deep-extra-field",
        "NaN",
        "Infinity",
        "-Infinity",
        "overflowing-float",
        "NaN-in-context",
        "deep-sessionKey",
        "deep-context",
    ],
)  # fmt: skip
def test_a_poisoned_line_gets_an_error_reply_and_nothing_else_changes(
    daemon: Daemon, line: bytes, code: str
) -> None:
    with daemon.control() as control:
        control.send_raw(line + b"\n")
        reply = raw_reply(control)
        assert reply["ok"] is False and reply["error"]["code"] == code, reply
        assert reply["id"] in (None, 1), reply  # never a NaN or an infinity echoed back
        still_serving(daemon, control)


@pytest.mark.parametrize(
    "raw_id",
    [b'"\\ud800"', b'"a\\udfffb"', b'{"k": ["\\udc80"]}', b'"' + b"i" * 100_000 + b'"', b"-0"],
    ids=["lone-high-surrogate", "lone-low-surrogate", "surrogate-in-object", "100k-id", "-0"],
)
def test_an_id_is_echoed_exactly_even_when_utf8_cannot_carry_it(
    daemon: Daemon, raw_id: bytes
) -> None:
    with daemon.control() as control:
        control.send_raw(b'{"id": ' + raw_id + b', "op": "ping"}\n')
        reply = raw_reply(control)
        assert reply == {"id": json.loads(raw_id), "ok": True, "pong": True}
        still_serving(daemon, control)


def test_an_id_too_deep_to_encode_still_gets_a_reply(daemon: Daemon) -> None:
    with daemon.control() as control:
        for levels in (200, 800, 950):
            control.send_raw(b'{"op": "ping", "id": ' + nested(levels) + b"}\n")
            reply = raw_reply(control)
            # Echoed when the encoder can nest that deep; otherwise an error naming no id.
            assert reply.get("pong") is True or reply["error"]["code"] in ("bad_json", "internal")
        still_serving(daemon, control)


@pytest.mark.parametrize(
    ("kind", "sent_as"),
    [
        ("nan", "nan"),
        ("inf", "-inf"),
        ("surrogate", "caf\udce9"),
        ("tuple_key", {"(1, 2)": "x"}),
        ("unprintable", None),
        ("circular", None),
        ("deep", None),
    ],
)
def test_a_hook_value_that_is_not_json_never_reaches_the_wire(
    daemon: Daemon, kind: str, sent_as: object
) -> None:
    """A hook's value in a reply (``bootstrap`` returns what hooks left): sent as text when it
    has one, else the reply is the error ``internal``; never NaN, never a dead daemon."""
    with daemon.control() as control:
        control.send_raw(
            json.dumps({"id": kind, "op": "bootstrap", "sessionKey": f"w:{kind}"}).encode() + b"\n"
        )
        reply = raw_reply(control)
        assert reply["id"] == kind, reply
        if sent_as is None:
            assert reply["ok"] is False and reply["error"]["code"] == "internal", reply
            assert "not serialisable" in reply["error"]["message"]
        else:
            assert reply["ok"] is True, reply
            assert {"name": kind, "value": sent_as} in reply["bootstrapFiles"], reply
        still_serving(daemon, control)


def test_a_last_request_without_a_newline_is_answered_at_eof(daemon: Daemon) -> None:
    with daemon.control() as control:
        control.send_raw(b'{"id": 1, "op": "ping"}\n{"id": 2, "op": "ping"}')
        control.sock.shutdown(socket.SHUT_WR)  # half-close: "that was everything"
        assert raw_reply(control) == {"id": 1, "ok": True, "pong": True}
        assert raw_reply(control) == {"id": 2, "ok": True, "pong": True}
        assert control.file.readline() == b""  # then the daemon closes its side
    with daemon.control() as control:
        control.send_raw(b"  \n  ")  # trailing whitespace is not a request
        control.sock.shutdown(socket.SHUT_WR)
        assert raw_reply(control)["error"]["code"] == "bad_request"  # the empty line
        assert control.file.readline() == b""
    still_serving(daemon)


def test_a_client_that_leaves_mid_reply_or_mid_line_ends_only_its_connection(
    daemon: Daemon,
) -> None:
    for _ in range(5):
        control = daemon.control()
        # Many large replies pipelined, then gone before reading any.
        control.send_raw(b'{"id": 1, "op": "hooks"}\n' * 200 + b'{"id": 2, "op": "sta')
        control.sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
        )
        control.close()  # with SO_LINGER 0: a reset, not an orderly close
    with daemon.control() as control:
        # A line of 1 MiB + 1 with no newline, then EOF: refused as too long, once.
        control.send_raw(b"x" * ((1 << 20) + 1))
        control.sock.shutdown(socket.SHUT_WR)
        assert raw_reply(control)["error"]["code"] == "line_too_long"
        assert control.file.readline() == b""
    still_serving(daemon)


def test_a_deep_context_reaches_the_hooks_or_is_refused_never_more(daemon: Daemon) -> None:
    with daemon.control() as control:
        for levels in (100, 900, 990, 5000):
            for event in (b"command:new", b"command:nobody-listens"):
                control.send_raw(
                    b'{"id": 1, "op": "trigger", "event": "' + event + b'", "sessionKey": "d", '
                    b'"context": {"x": ' + nested(levels) + b"}}\n"
                )
                reply = raw_reply(control)
                assert reply["id"] in (1, None), reply
                assert reply["ok"] is True or reply["error"]["code"] in ("bad_json", "internal")
        still_serving(daemon, control)


def test_a_number_too_long_for_python_is_refused_with_advice_for_the_client(
    daemon: Daemon,
) -> None:
    with daemon.control() as control:
        control.send_raw(b'{"id": ' + b"7" * 5000 + b', "op": "ping"}\n')
        reply = raw_reply(control)
        assert reply["ok"] is False and reply["error"]["code"] == "bad_json", reply
        message = reply["error"]["message"]
        assert "more than 4300 digits" in message and "as a string" in message, message
        assert "set_int_max_str_digits" not in message  # the server's setting, not the client's
        still_serving(daemon, control)


@pytest.mark.parametrize("event", ["gateway:startup", "gateway:shutdown"])
def test_a_trigger_cannot_fire_the_gateways_own_lifecycle(daemon: Daemon, event: str) -> None:
    with daemon.control() as control:
        reply = control.request("trigger", event=event, sessionKey="s")
        assert reply["ok"] is False and reply["error"]["code"] == "unknown_event", reply
        assert f"gatewayd hooks test HOOK --event {event}" in reply["error"]["message"]
        still_serving(daemon, control)
