"""A command hook that re-triggers its own event through the CLI is stopped at
``hooks.maxDepth``, as a Python hook that does so through ``ctx.gateway`` is: the daemon sets
``GATEWAYD_HOOK_DEPTH`` in the hook's environment, the client sends it as the request's
``depth``, and the daemon counts the request's events from there."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from gatewayd.client.errors import BadRequest
from tests.support.fixtures import StartGateway
from tests.support.hooks import write_hook_dir
from tests.support.state import eventually_async

pytestmark = pytest.mark.anyio

AGAIN = f"""#!/bin/sh
# Each run: the depth it was given, then what posting its own event again did.
log="$ELIZA_STATE_DIR/again.log"
"{sys.executable}" -m gatewayd trigger command:again --session r --no-wait \\
    >/dev/null 2>"$ELIZA_STATE_DIR/again.err.$GATEWAYD_HOOK_DEPTH"
echo "$GATEWAYD_HOOK_DEPTH $?" >> "$log"
"""


async def test_a_command_hook_triggering_its_own_event_stops_at_max_depth(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    write_hook_dir(
        state_dir / "hooks",
        "again",
        events=["command:again"],
        handler=AGAIN,
        handler_file="handler",
    )
    gateway = await start_gateway({"hooks": {"maxDepth": 4}})
    await gateway.request("trigger", event="command:again", sessionKey="r")
    log = anyio.Path(state_dir / "again.log")

    async def refused_once() -> bool:
        return await log.exists() and " 1" in await log.read_text()

    # Before: the loop never ended, and no run was ever refused.
    await eventually_async(refused_once, what="a run whose trigger was refused")
    await anyio.sleep(1)  # nothing runs after the refusal
    runs = [line.split() for line in (await log.read_text()).splitlines()]
    # As a Python hook's chain: the events at depth 0 to 3 ran, the one at 4 was refused.
    assert runs == [["1", "0"], ["2", "0"], ["3", "0"], ["4", "1"]]
    refused = await anyio.Path(state_dir / "again.err.4").read_text()
    assert "hooks.maxDepth (4) reached" in refused
    assert "GATEWAYD_HOOK_DEPTH=4" in refused
    assert await gateway.stop() == 0


async def test_a_message_sent_from_a_hook_process_counts_its_depth_too(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway({"hooks": {"maxDepth": 3}})
    async with gateway.control() as control:
        refused = await control.request("message", sessionKey="m", text="hi", depth=3)
        assert refused["ok"] is False and refused["error"]["code"] == "hook_loop"
        taken = await control.request("message", sessionKey="m", text="hi", depth=2)
        assert taken["ok"] is True
        bad = await control.request("trigger", event="command:x", sessionKey="m", depth=-1)
        assert bad["error"]["code"] == "bad_request"
    assert await gateway.stop() == 0


def test_the_client_sends_the_depth_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from gatewayd.client.wire import encode

    monkeypatch.setenv("GATEWAYD_HOOK_DEPTH", "5")
    assert b'"depth": 5' in encode(1, "trigger", {"event": "command:x", "sessionKey": "s"})
    assert b'"depth": 5' in encode(1, "message", {"sessionKey": "s", "text": "t"})
    assert b"depth" not in encode(1, "status", {})  # only ops whose events it causes
    monkeypatch.setenv("GATEWAYD_HOOK_DEPTH", "deep")
    with pytest.raises(BadRequest, match="GATEWAYD_HOOK_DEPTH='deep' is not a depth"):
        encode(1, "trigger", {"event": "command:x", "sessionKey": "s"})
    monkeypatch.delenv("GATEWAYD_HOOK_DEPTH")
    assert b"depth" not in encode(1, "trigger", {"event": "command:x", "sessionKey": "s"})
