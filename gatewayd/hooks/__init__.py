"""The hook author's API: what a handler receives, and how a program registers one in code.

Hook authors import from here and nowhere else::

    from gatewayd.hooks import CommandContext, HookContext, HookEvent

    async def handler(event: HookEvent[CommandContext], ctx: HookContext) -> None:
        event.messages.append(f"Hello, {event.context.get('args') or 'there'}!")

A single-file hook (one ``.py`` file in a hook root, no ``HOOK.md``) defines its events map with
:func:`define_hook`; its handlers' ``ctx`` is an :class:`EventContext` (Eve's ``agent.name``,
``channel.kind``, ``session.id``, plus the hook's own context)::

    from gatewayd.hooks import EventContext, HookEvent, define_hook

    async def on_start(event: HookEvent, ctx: EventContext) -> None:
        event.messages.append(f"hello from {ctx.agent.name}")

    hook = define_hook(events={"session.started": on_start})

Each event's context type (``CommandContext``, ``SessionContext``, ...) is declared once in
:mod:`gatewayd.hooks.schema`, with which fields handlers may change; docs/hooks.md section 4
documents the same fields (a test keeps the two in step). Everything else under
``gatewayd.hooks`` (discovery, loading, the registry, the runners, the watcher) is the
gateway's own machinery and may change without notice.
"""

from gatewayd.hooks.define import EventContext, HookDefinition, define_hook
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.handlers import HookContext
from gatewayd.hooks.registry import register_hook, unregister_hook
from gatewayd.hooks.runtime_contexts import (
    AgentFinalizeContext,
    AgentReplyContext,
    HeartbeatContext,
    LlmInputContext,
    LlmOutputContext,
    MessageWriteContext,
    ModelCallContext,
    ModelResolveContext,
    PromptBuildContext,
    ResetContext,
    SubagentContext,
    TurnPrepareContext,
)
from gatewayd.hooks.schema import (
    AgentEndContext,
    AgentStartContext,
    AgentStepContext,
    BaseContext,
    BootstrapContext,
    BootstrapFile,
    CommandContext,
    CompactAfterContext,
    CompactBeforeContext,
    CompactionContext,
    EnvironmentContext,
    GatewayHandle,
    GatewayShutdownContext,
    GatewayStartupContext,
    MessageDeletedContext,
    MessageEnrichedContext,
    MessageReceivedContext,
    MessageSendingContext,
    MessageSentContext,
    SessionAutoResetContext,
    SessionContext,
    SessionEntryJson,
    SessionPatchContext,
    ToolCallContext,
    ToolResultContext,
    ToolResultPersistContext,
)

__all__ = [
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
]
