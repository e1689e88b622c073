"""Names a client chooses are bounded: an event's action, a command's name, a session key.

Each becomes a key the daemon remembers (plans and counters per event key, plans and lanes per
session key): 300 ``trigger command:<256 KiB name>`` once took the daemon from 50 to 203 MB,
kept after a reload. Longer than the bound, the request is refused with the limit named (an
over-long ``/name`` is no command, only text), and nothing is remembered for it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from gatewayd.commands import parse_command
from gatewayd.hooks.events import (
    MAX_ACTION,
    MAX_SESSION_KEY,
    EventKeyError,
    HookEvent,
    create_hook_event,
    parse_event_key,
)
from gatewayd.hooks.registry import MAX_EVENT_KEYS, HookRegistry
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook


def test_over_long_names_are_refused_and_the_daemon_stays_small(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    write_hook(state_dir / "hooks", "everything", events=["command"])
    daemon = start_daemon()
    huge = "x" * (256 << 10)
    with daemon.control() as ctl:
        for i in range(30):
            reply = ctl.request("trigger", event=f"command:{i}{huge}", sessionKey="s")
            assert reply["ok"] is False and reply["error"]["code"] == "unknown_event", reply
        assert f"the limit is {MAX_ACTION}" in reply["error"]["message"], reply
        long_session = ctl.request("message", sessionKey="k" * (MAX_SESSION_KEY + 1), text="hi")
        assert long_session["ok"] is False, long_session
        assert long_session["error"]["code"] == "bad_request", long_session
        assert f"at most {MAX_SESSION_KEY}" in long_session["error"]["message"]
        text = ctl.ok("message", sessionKey="s", text="/" + "a" * (MAX_ACTION + 1))
        assert text["command"] is None and text["messages"] == [], text
        # At the bounds, all is well.
        at = ctl.ok("trigger", event="command:" + "b" * MAX_ACTION, sessionKey="s")
        assert at["messages"] == ["everything"], at
        assert ctl.ok("message", sessionKey="k" * MAX_SESSION_KEY, text="/new")["command"] == "new"


@settings(max_examples=200)
@given(
    length=st.integers(min_value=1, max_value=2 * MAX_ACTION),
    alphabet=st.text(alphabet="abc-_0", min_size=1, max_size=6),
)
def test_an_action_is_a_key_exactly_up_to_the_bound(length: int, alphabet: str) -> None:
    action = (alphabet * length)[:length]
    key = f"command:{action}"
    try:
        parse_event_key(key)
    except EventKeyError:
        parsed = False
    else:
        parsed = True
    assert parsed is (len(action) <= MAX_ACTION)
    command = parse_command(f"/{action} args")
    assert (command is not None) is (len(action) <= MAX_ACTION), command


def test_the_registry_remembers_a_bounded_number_of_event_keys() -> None:
    """Plans and counters per event key: a client naming a new action per event (each a key)
    grows them no further than the bound, and every event is still counted under its type."""
    registry = HookRegistry()
    ran: list[str] = []

    async def handler(event: HookEvent) -> None:
        ran.append(event.action)

    registry.register("command", handler, name="all")
    n = MAX_EVENT_KEYS + 500

    async def many() -> None:
        for i in range(n):
            await registry.dispatch(create_hook_event("command", f"a{i}", "s"))

    anyio.run(many)
    assert len(ran) == n
    assert len(registry.event_counts) <= MAX_EVENT_KEYS + 1, len(registry.event_counts)
    assert sum(registry.event_counts.values()) == n
    assert registry.cached_plans() <= MAX_EVENT_KEYS, registry.cached_plans()
