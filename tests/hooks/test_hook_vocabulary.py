"""The event vocabulary (gatewayd.hooks.vocabulary) and HOOK.md leniency as OpenClaw reads it:
other systems' names, warnings with suggestions for names no emitter produces, namespaces,
unquoted colons, comma lists, string booleans, platform names, opt-in hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatewayd.hooks.eligibility import current_platform
from gatewayd.hooks.metadata import HookManifest, parse_manifest
from gatewayd.hooks.schema import EVENTS
from gatewayd.hooks.vocabulary import PLUGIN_HOOKS, resolve, resolve_all, suggest

PATH = Path("/srv/hooks/foo/HOOK.md")


def parse(text: str, path: Path = PATH) -> HookManifest:
    return parse_manifest(text, path, source="foo/HOOK.md")


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ("message_sending", "message:sending"),
        ("message-sending", "message:sending"),
        ("message_received", "message:received"),
        ("message-sent", "message:sent"),
        ("before_tool_call", "agent:before_tool_call"),
        ("after-tool-call", "agent:after_tool_call"),
        ("tool_result_persist", "agent:tool_result_persist"),
        ("before_compaction", "agent:before_compaction"),
        ("after_compaction", "agent:after_compaction"),
        ("gateway_start", "gateway:startup"),
        ("gateway-stop", "gateway:shutdown"),
        ("session_start", "session:start"),
        ("session_end", "session:end"),
        ("before_agent_start", "agent:before_start"),
        ("agent_end", "agent:end"),
    ],
)
def test_openclaw_plugin_hook_names_map_to_events(written: str, key: str) -> None:
    outcome = resolve(written)
    assert outcome.keys == (key,)
    assert key in EVENTS
    # Fired events run; the few declared for OpenClaw and Hermes only say they never run.
    if EVENTS[key].fired:
        assert outcome.warnings == ()
    else:
        (warning,) = outcome.warnings
        assert f"{key} ({written} is {key} here) is a known event" in warning
        assert "never fires it" in warning


def test_every_plugin_hook_maps_to_a_declared_event() -> None:
    assert set(PLUGIN_HOOKS.values()) <= set(EVENTS)


@pytest.mark.parametrize(
    ("written", "keys"),
    [
        ("command", ("command",)),
        ("message", ("message",)),
        ("*", ("*",)),
        ("command:deploy-now", ("command:deploy-now",)),
        ("command:*", ("command",)),
        ("session:reset", ("command:new", "command:reset")),
        ("session:compact:before", ("session:compact:before",)),
        ("session:compact:after", ("session:compact:after",)),
    ],
)
def test_types_commands_and_hermes_names(written: str, keys: tuple[str, ...]) -> None:
    assert resolve(written).keys == keys


@pytest.mark.parametrize(
    ("written", "suggestion"),
    [
        ("message:recieved", "message:received"),
        ("message:send", "message:sent"),
        ("session:new", "command:new"),
        ("comand:new", "command:new"),
        ("gateway:start", "gateway:startup"),
        ("message_recieved", "message_received"),
    ],
)
def test_unknown_names_warn_and_suggest(written: str, suggestion: str) -> None:
    outcome = resolve(written)
    (warning,) = outcome.warnings
    assert f"'{written}'" in warning
    assert "no emitter produces it" in warning
    assert warning.endswith(f"did you mean {suggestion}?")
    assert suggest(written) == suggestion


def test_an_unknown_action_of_a_known_type_is_still_registered_for_trigger() -> None:
    # `gatewayd trigger message:custom` can fire it, so the subscription is kept.
    assert resolve("message:custom").keys == ("message:custom",)
    # An unknown type can never be fired: nothing is registered.
    assert resolve("tool:call").keys == ()
    assert resolve("Not An Event").keys == ()


def test_resolve_all_dedups_keys_and_keeps_every_warning() -> None:
    keys, warnings = resolve_all(["command:new", "session:reset", "message:recieved"])
    assert keys == ("command:new", "command:reset", "message:recieved")
    assert len(warnings) == 1


def test_unquoted_colon_in_a_value_is_read_as_openclaw_reads_it() -> None:
    m = parse(
        "---\nname: foo\ndescription: Runs at: startup, and logs: everything\n"
        "metadata: {openclaw: {events: ['command:new']}}\n---\n"
    )
    assert m.description == "Runs at: startup, and logs: everything"
    assert m.events == ("command:new",)


def test_flow_metadata_openclaw_cannot_read_is_no_metadata_with_a_warning() -> None:
    # On the metadata line, with a colon in it, OpenClaw reads the text as JSON or JSON5:
    # `command:new` unquoted is neither, so the hook subscribes to nothing there (and here).
    m = parse("---\nname: foo\nmetadata: {openclaw: {events: [command:new]}}\n---\n")
    assert m.events == ()
    (warning,) = m.warnings
    assert "metadata.openclaw: OpenClaw reads metadata written on the 'metadata:' line" in warning
    assert "quote its strings" in warning


def test_comma_lists() -> None:
    m = parse(
        "---\nmetadata:\n  openclaw:\n    always: true\n    events: 'command:new, command:stop'\n"
        "    os: linux, freebsd\n    requires: {bins: 'git, jq'}\n---\n"
    )
    assert m.always is True
    assert m.keys == ("command:new", "command:stop")
    assert m.os == ("linux", "freebsd")
    assert m.requires.bins == ["git", "jq"]
    assert m.warnings == ()


def test_every_node_platform_name_is_accepted() -> None:
    m = parse(
        "---\nmetadata: {eliza: {events: [command], os: [freebsd, openbsd, sunos, aix]}}\n---\n"
    )
    assert m.warnings == ()
    assert current_platform("freebsd14") == "freebsd"
    assert current_platform("sunos5") == "sunos"
    assert current_platform("linux") == "linux"
    assert current_platform("cygwin") == "win32"


@pytest.mark.parametrize("namespace", ["eliza", "openclaw", "milady", "clawdbot"])
def test_every_namespace_is_read(namespace: str) -> None:
    m = parse(f"---\nmetadata:\n  {namespace}: {{events: [command:new], emoji: '🦀'}}\n---\n")
    assert (m.namespace, m.keys, m.emoji) == (namespace, ("command:new",), "🦀")


def test_an_unknown_namespace_is_named_in_a_warning() -> None:
    m = parse("---\nmetadata: {moltbot: {events: [command:new]}}\n---\n")
    assert m.events == ()
    (warning,) = m.warnings
    assert "metadata.moltbot: not a namespace gatewayd reads" in warning
    assert "rename it to metadata.openclaw" in warning


def test_events_at_the_top_level_or_directly_under_metadata_are_read() -> None:
    top = parse("---\nname: foo\nevents: [command:new]\n---\n")
    assert (top.namespace, top.keys, top.warnings) == (None, ("command:new",), ())
    flat = parse("---\nmetadata: {events: [session:start], emoji: '🙂'}\n---\n")
    assert (flat.keys, flat.emoji) == (("session:start",), "🙂")


def test_top_level_events_beside_a_namespace_are_not_read_as_in_openclaw() -> None:
    m = parse("---\nevents: [command:new]\nmetadata: {openclaw: {emoji: '🦞'}}\n---\n")
    assert (m.namespace, m.keys, m.emoji) == ("openclaw", (), "🦞")


def test_top_level_enabled_false_makes_the_hook_opt_in() -> None:
    assert parse("---\nenabled: false\nevents: [command:new]\n---\n").enabled is False
    assert parse("---\nenabled: 'no'\nevents: [command:new]\n---\n").enabled is False
    assert parse("---\nevents: [command:new]\n---\n").enabled is True


def test_a_hermes_hook_yaml_is_plain_yaml_with_top_level_fields() -> None:
    m = parse(
        "name: logger\ndescription: Log all activity\nevents:\n  - command:*\n  - session:reset\n",
        Path("/srv/hooks/logger/HOOK.yaml"),
    )
    assert m.hermes is True
    assert m.name == "logger"
    assert m.keys == ("command", "command:new", "command:reset")
    assert m.warnings == ()
