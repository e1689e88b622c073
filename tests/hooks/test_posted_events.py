"""Events clients post, declared in the schema: elizaOS's world, room and entity events and
``message:deleted`` (its gatewayd plugin posts them), and ``direction`` on every message event.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gatewayd.hooks.schema import DIRECTIONS, EVENTS
from gatewayd.hooks.vocabulary import resolve
from tests.support.fixtures import StartGateway
from tests.support.hooks import recorder, write_hook_dir
from tests.support.state import read_records

ELIZAOS_POSTS = (
    "agent:world_joined",
    "agent:world_connected",
    "agent:world_left",
    "agent:room_joined",
    "agent:room_left",
    "agent:entity_joined",
    "agent:entity_left",
    "agent:entity_updated",
    "message:deleted",
)
"""What integrations/elizaos/src/mapping.ts posts beyond the events OpenClaw names."""

MAPPING = Path(__file__).resolve().parents[2] / "integrations" / "elizaos" / "src" / "mapping.ts"


def test_the_plugins_events_are_the_ones_declared_here() -> None:
    """The plugin's map and this list agree, so a new event there fails here until declared."""
    text = MAPPING.read_text(encoding="utf-8")
    posted = {key for key in ELIZAOS_POSTS if f'gatewayd: "{key}"' in text}
    assert posted == set(ELIZAOS_POSTS)


@pytest.mark.parametrize("key", ELIZAOS_POSTS)
def test_a_hook_on_an_event_the_elizaos_plugin_posts_loads_without_a_warning(key: str) -> None:
    spec = EVENTS[key]
    assert spec.fired
    assert resolve(key).keys == (key,)
    assert resolve(key).warnings == ()  # was: "no emitter produces it"


def test_message_events_have_one_direction_each() -> None:
    assert DIRECTIONS == {
        "message:received": "inbound",
        "message:sending": "outbound",
        "message:sent": "outbound",
    }
    for key, direction in DIRECTIONS.items():
        hints = EVENTS[key].context.__annotations__
        assert "direction" in hints, key
        assert direction in str(hints["direction"]), key


pytestmark = pytest.mark.anyio


async def test_the_gateway_sets_direction_on_every_message_event(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    hooks = state_dir / "hooks"
    keys = ["message:received", "message:sending", "message:sent", "agent:room_joined"]
    write_hook_dir(
        hooks,
        "seen",
        events=keys,
        handler=recorder(
            keep=("direction", "roomId", "source"), reply='event.messages.append("ok")'
        ),
    )
    gateway = await start_gateway()
    await gateway.send("hello", session="agent:main:main")
    # A client's trigger: the gateway's direction wins over the one it sends, as cfg does.
    await gateway.request(
        "trigger", event="message:received", sessionKey="s2", context={"direction": "outbound"}
    )
    await gateway.request(
        "trigger",
        event="agent:room_joined",
        sessionKey="agent:main:room-1",
        context={"roomId": "room-1", "source": "discord"},
    )
    assert await gateway.stop() == 0
    seen = [(r["key"], r["ctx"].get("direction")) for r in read_records(state_dir)]
    assert seen[:2] == [("message:received", "inbound"), ("message:sending", "outbound")]
    assert ("message:sent", "outbound") in seen
    assert ("message:received", "inbound") in seen[2:]  # the trigger's, rewritten
    room = next(r for r in read_records(state_dir) if r["key"] == "agent:room_joined")
    assert room["ctx"] == {"roomId": "room-1", "source": "discord"}  # no direction there
