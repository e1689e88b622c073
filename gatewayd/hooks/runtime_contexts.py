"""The contexts of the events an agent runtime posts for OpenClaw's plugin hooks.

OpenClaw 2026.9.6 calls a plugin hook as ``handler(event, ctx)``; here the event is one of
gatewayd's, posted by the agent runtime through the ``trigger`` op, and its context holds the
fields of OpenClaw's ``event`` (its ``PluginHook<Name>Event`` type, the same names) plus those of
its agent ``ctx`` that a runtime has (``runId``, ``sessionId``, ``modelProviderId``, ``modelId``,
``trigger``, ``channelId``). :mod:`gatewayd.hooks.schema` declares the events themselves, with the
results their handlers may return, merged as OpenClaw merges them (:data:`RUNTIME_EVENTS`: its
``firstDefined`` is ``first``, its concatenated text ``join``).
"""

from __future__ import annotations

from typing import Any, Final, TypedDict


class AgentRunContext(TypedDict, total=False):
    """The base fields of every event the gateway fires, and OpenClaw's agent ``ctx``."""

    cfg: dict[str, Any]
    workspaceDir: str
    agentId: str
    subagentId: str
    sessionKey: str
    sessionId: str
    runId: str
    modelProviderId: str
    modelId: str
    trigger: str
    channelId: str


class ModelResolveContext(AgentRunContext, total=False):
    """``agent:before_model_resolve`` (``before_model_resolve``): before the run's model is
    chosen; handlers return ``{"modelOverride": ..., "providerOverride": ...}`` (the first
    handler that sets one wins, as in OpenClaw)."""

    prompt: str
    attachments: list[dict[str, Any]]
    """``{kind: image|video|audio|document|other, mimeType}`` of each attachment."""


class PromptBuildContext(AgentRunContext, total=False):
    """``agent:before_prompt_build`` (``before_prompt_build``): before the prompt is built;
    handlers return ``systemPrompt`` (the first wins), ``prependContext``, ``appendContext``,
    ``prependSystemContext``, ``appendSystemContext`` (each joined in order)."""

    prompt: str
    currentUserMessage: str
    currentUserMessageId: str
    messages: list[Any]


class TurnPrepareContext(AgentRunContext, total=False):
    """``agent:turn_prepare`` (``agent_turn_prepare``): a turn about to run; handlers return
    ``prependContext`` and ``appendContext`` (joined in order)."""

    prompt: str
    messages: list[Any]
    queuedInjections: list[Any]


class AgentReplyContext(AgentRunContext, total=False):
    """``agent:before_reply`` (``before_agent_reply``): the cleaned inbound body before the
    agent replies; a handler may answer instead (``{"handled": true, "reply": ..., "reason":
    ...}``, the first wins and ends the chain)."""

    cleanedBody: str


class ModelCallContext(AgentRunContext, total=False):
    """``agent:model_call_started`` and ``agent:model_call_ended`` (observe only)."""

    provider: str
    model: str
    durationMs: float
    error: str


class LlmInputContext(AgentRunContext, total=False):
    """``agent:llm_input`` (``llm_input``): what is sent to the model (observe only)."""

    provider: str
    model: str
    systemPrompt: str
    prompt: str
    historyMessages: list[Any]
    imagesCount: int
    tools: list[Any]


class LlmOutputContext(AgentRunContext, total=False):
    """``agent:llm_output`` (``llm_output``): what the model answered (observe only)."""

    provider: str
    model: str
    prompt: str
    assistantTexts: list[str]
    lastAssistant: Any
    usage: dict[str, Any]


class AgentFinalizeContext(AgentRunContext, total=False):
    """``agent:before_finalize`` (``before_agent_finalize``): the run is about to end; a
    handler may ask for another pass (``{"action": "revise", "reason": ..., "retry":
    {"instruction": ...}}``; the first wins)."""

    turnId: str
    provider: str
    model: str
    cwd: str
    transcriptPath: str
    stopHookActive: bool
    lastAssistantMessage: Any
    messages: list[Any]


class ResetContext(AgentRunContext, total=False):
    """``agent:before_reset`` (``before_reset``): a session is about to be reset (observe)."""

    sessionFile: str
    messages: list[Any]
    reason: str


class MessageWriteContext(AgentRunContext, total=False):
    """``agent:before_message_write`` (``before_message_write``): a message about to enter the
    transcript; handlers may ``block`` it (the first wins, ending the chain) or return another
    ``message``."""

    message: Any


class SubagentContext(AgentRunContext, total=False):
    """``agent:subagent_spawned``, ``agent:subagent_progress``, ``agent:subagent_ended`` and
    ``agent:subagent_delivery_target`` (a handler may return its ``origin``; the first wins)."""

    childSessionKey: str
    requesterSessionKey: str
    targetSessionKey: str
    targetKind: str
    phase: str
    outcome: str
    reason: str
    error: str
    endedAt: int
    spawnMode: str
    expectsCompletionMessage: bool


class HeartbeatContext(AgentRunContext, total=False):
    """``agent:heartbeat_prompt_contribution``: a heartbeat prompt being built; handlers return
    ``prependContext`` and ``appendContext`` (joined in order)."""

    heartbeatName: str


RUNTIME_EVENTS: Final[tuple[tuple[str, type, tuple[str, ...], dict[str, str], str | None], ...]] = (
    (
        "agent:before_model_resolve",
        ModelResolveContext,
        (),
        {"modelOverride": "first", "providerOverride": "first"},
        None,
    ),
    (
        "agent:before_prompt_build",
        PromptBuildContext,
        (),
        {
            "systemPrompt": "first",
            "prependContext": "join",
            "appendContext": "join",
            "prependSystemContext": "join",
            "appendSystemContext": "join",
        },
        None,
    ),
    (
        "agent:turn_prepare",
        TurnPrepareContext,
        (),
        {"prependContext": "join", "appendContext": "join"},
        None,
    ),
    (
        "agent:before_reply",
        AgentReplyContext,
        (),
        {"handled": "first", "reply": "first", "reason": "first"},
        "handled",
    ),
    ("agent:model_call_started", ModelCallContext, (), {}, None),
    ("agent:model_call_ended", ModelCallContext, (), {}, None),
    ("agent:llm_input", LlmInputContext, (), {}, None),
    ("agent:llm_output", LlmOutputContext, (), {}, None),
    (
        "agent:before_finalize",
        AgentFinalizeContext,
        (),
        {"action": "first", "reason": "first", "retry": "first"},
        None,
    ),
    ("agent:before_reset", ResetContext, (), {}, None),
    (
        "agent:before_message_write",
        MessageWriteContext,
        ("message",),
        {"block": "first", "message": "last"},
        "block",
    ),
    ("agent:subagent_spawned", SubagentContext, (), {}, None),
    ("agent:subagent_progress", SubagentContext, (), {}, None),
    ("agent:subagent_ended", SubagentContext, (), {}, None),
    ("agent:subagent_delivery_target", SubagentContext, (), {"origin": "first"}, None),
    (
        "agent:heartbeat_prompt_contribution",
        HeartbeatContext,
        (),
        {"prependContext": "join", "appendContext": "join"},
        None,
    ),
)
"""``(key, context, mutable context fields, results and how each merges, stop field)`` of each
event an agent runtime posts for one of OpenClaw's plugin hooks (``gatewayd.hooks.schema``
declares them from this table)."""
