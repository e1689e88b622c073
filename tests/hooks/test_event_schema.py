"""The event schema (gatewayd.hooks.schema) against the author's guide and the daemon.

docs/hooks.md section 4 documents every event's context in a table; gatewayd/hooks/schema.py
declares the same contexts as types. These tests fail when one changes without the other.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import gatewayd.hooks
from gatewayd.hooks.schema import BASE_FIELDS, EVENTS, EventSpec, spec_for

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
_TICKED = re.compile(r"`([^`]+)`")
_PARENS = re.compile(r"\([^()]*\)")


def guide_rows() -> dict[str, list[str]]:
    """The guide's events table: event cell -> its cells (after the event cell)."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## 4. Events", 1)[1].split("\n## 5.", 1)[0]
    header = (
        "| event | fired | session key | context (besides `cfg`, `workspaceDir`, `agentId`, "
        "`subagentId`) |"
    )
    table = section.split(header, 1)[1]
    rows: dict[str, list[str]] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def documented_fields(cell: str) -> list[str]:
    """The fields a context cell names: ticked names outside parentheses (values inside)."""
    without_values = _PARENS.sub("", cell).split(":", 1)[0]
    return _TICKED.findall(without_values)


def row_for(spec: EventSpec, rows: dict[str, list[str]]) -> list[str]:
    cell = "`command:<name>`" if spec.key == "command" else f"`{spec.key}`"
    assert cell in rows, f"docs/hooks.md section 4: no row for {cell}; add one for {spec.key}"
    return rows[cell]


def test_every_event_in_the_schema_is_documented_with_the_same_fields() -> None:
    rows = guide_rows()
    for spec in EVENTS.values():
        _fired, _session, context, reply = row_for(spec, rows)
        assert documented_fields(context) == list(spec.fields), (
            f"{spec.key}: docs/hooks.md lists {documented_fields(context)}, "
            f"{spec.context.__name__} declares {list(spec.fields)}"
        )
        assert (reply == "nowhere" or reply.startswith("nowhere")) == (spec.reply == "nowhere"), (
            f"{spec.key}: the guide says the reply goes to {reply!r}, the schema {spec.reply!r}"
        )
        for name in spec.mutable:
            assert "change it" in context, (
                f"{spec.key}: {name} may be changed by handlers; say so in the guide's row"
            )


def test_every_documented_event_is_in_the_schema() -> None:
    for cell in guide_rows():
        keys = _TICKED.findall(cell)
        if keys == ["type:action"]:  # the row for events fired with `gatewayd trigger`
            continue
        (key,) = keys
        assert spec_for(key.replace("<name>", "x")) is not None, (
            f"docs/hooks.md documents {key}; declare it in gatewayd/hooks/schema.py EVENTS"
        )


def test_every_context_type_carries_the_base_fields_and_is_exported() -> None:
    for spec in EVENTS.values():
        hints = typing.get_type_hints(spec.context)
        assert set(BASE_FIELDS) <= set(hints), spec.context.__name__
        assert not spec.context.__required_keys__, (  # type: ignore[attr-defined]
            f"{spec.context.__name__}: every field is optional (a trigger may omit any)"
        )
        assert spec.context.__name__ in gatewayd.hooks.__all__, spec.context.__name__
        assert spec.mutable <= set(spec.fields), spec.key


def test_spec_for_finds_the_family_of_a_command() -> None:
    assert spec_for("command:deploy") is EVENTS["command"]
    assert spec_for("session:start") is EVENTS["session:start"]
    assert spec_for("message:edited") is None
    assert spec_for("message:transcribed") is EVENTS["message:transcribed"]


def test_the_author_api_is_narrow() -> None:
    # What a hook author imports; the machinery (loader, registry, runners) is not in it.
    assert set(gatewayd.hooks.__all__) == {
        "AgentEndContext",
        "AgentFinalizeContext",
        "AgentReplyContext",
        "AgentStartContext",
        "AgentStepContext",
        "BaseContext",
        "BootstrapContext",
        "BootstrapFile",
        "CommandContext",
        "CompactAfterContext",
        "CompactBeforeContext",
        "CompactionContext",
        "EnvironmentContext",
        "EventContext",
        "GatewayHandle",
        "GatewayShutdownContext",
        "GatewayStartupContext",
        "HeartbeatContext",
        "HookContext",
        "HookDefinition",
        "HookEvent",
        "LlmInputContext",
        "LlmOutputContext",
        "MessageDeletedContext",
        "MessageEnrichedContext",
        "MessageReceivedContext",
        "MessageSendingContext",
        "MessageSentContext",
        "MessageWriteContext",
        "ModelCallContext",
        "ModelResolveContext",
        "PromptBuildContext",
        "ResetContext",
        "SessionAutoResetContext",
        "SessionContext",
        "SessionEntryJson",
        "SessionPatchContext",
        "SubagentContext",
        "ToolCallContext",
        "ToolResultContext",
        "ToolResultPersistContext",
        "TurnPrepareContext",
        "create_hook_event",
        "define_hook",
        "register_hook",
        "unregister_hook",
    }
    for name in gatewayd.hooks.__all__:
        assert getattr(gatewayd.hooks, name) is not None
