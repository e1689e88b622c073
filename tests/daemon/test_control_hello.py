"""The ``hello`` handshake on a real daemon: what it tells a client, and the version check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import gatewayd
from gatewayd.hooks.schema import DECISION_EVENTS, EVENTS
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon


@pytest.fixture
def daemon(start_daemon: StartDaemon) -> Iterator[Daemon]:
    daemon = start_daemon({"gateway": {"queue": {"journal": "memory"}}})
    yield daemon
    assert daemon.stop() == 0


def test_hello_tells_the_protocol_ops_events_and_limits(daemon: Daemon) -> None:
    with daemon.control() as control:
        known = control.request("no-such-op")["error"]["message"].partition("known: ")[2]
        reply = control.ok("hello", protocol=1, client="tests/1.0")
    assert reply["protocol"] == 1
    assert reply["minProtocol"] == 1
    assert reply["daemon"] == {"name": "gatewayd", "version": gatewayd.__version__}
    assert reply["ops"] == sorted(op.strip() for op in known.split(","))
    assert "hello" in reply["ops"]
    # Every event of the schema a client may post; the gateway's lifecycle is the daemon's own.
    assert set(reply["events"]) == {k for k in EVENTS if not k.startswith("gateway:")}
    assert set(reply["decisions"]) == DECISION_EVENTS
    assert reply["limits"]["maxLineBytes"] == 1 << 20
    assert reply["limits"]["maxInFlight"] >= 1


def test_hello_without_fields_and_clients_that_never_say_it(daemon: Daemon) -> None:
    with daemon.control() as control:
        assert control.ok("ping")["pong"] is True  # no hello first: served as before
        assert control.ok("hello")["protocol"] == 1
        assert control.ok("ping")["pong"] is True


@pytest.mark.parametrize(
    ("protocol", "upgrade"),
    [(2, "upgrade gatewayd to a release that serves protocol 2"), (0, "upgrade the client")],
)
def test_a_protocol_outside_the_range_says_which_side_to_upgrade(
    daemon: Daemon, protocol: int, upgrade: str
) -> None:
    with daemon.control() as control:
        reply = control.request("hello", protocol=protocol, client="agent-x/3.1")
        assert reply["ok"] is False
        assert reply["error"]["code"] == "unsupported_protocol"
        message = reply["error"]["message"]
        assert upgrade in message, message
        assert "'agent-x/3.1'" in message and f"gatewayd {gatewayd.__version__}" in message
        # The connection carries on: a client may still say what it can.
        assert control.ok("hello", protocol=1)["protocol"] == 1


def test_hello_fields_of_the_wrong_type_are_bad_requests(daemon: Daemon) -> None:
    with daemon.control() as control:
        for fields in ({"protocol": "1"}, {"protocol": True}, {"client": 7}):
            reply = control.request("hello", **fields)
            assert reply["error"]["code"] == "bad_request", reply
