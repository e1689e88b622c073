"""Single-file hooks, the author's side: ``define_hook``, its result, and the ``ctx`` handlers get.

A single-file hook (Eve's shape) is one ``.py`` file in a hook root that says what it runs on
in an events map, with no ``HOOK.md``::

    from gatewayd.hooks import EventContext, HookEvent, define_hook

    async def on_start(event: HookEvent, ctx: EventContext) -> None:
        ctx.log.info("audit.session", agent=ctx.agent.name, session=ctx.session.id)

    hook = define_hook(events={"session.started": on_start, "*": lambda event: None})

Keys are any event name a ``HOOK.md`` takes (``command:new``, ``message_received``) or one of
Eve's stream names (``session.started``, ``message.completed``, ``*``), see
:mod:`gatewayd.hooks.vocabulary`. A handler takes ``(event)`` or ``(event, ctx)``; its ``ctx``
is an :class:`EventContext`, made per event: Eve's ``agent.name``, ``channel.kind`` and
``session.id``, plus what a directory hook's :class:`~gatewayd.hooks.handlers.HookContext`
holds. Discovery, loading and the JS/TS twin (``defineHook``) are in
:mod:`gatewayd.hooks.filehooks` and ``gatewayd/hooks/node/define.mjs``.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatewayd.hooks.agents import parse_session_key
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import HookContext
from gatewayd.hooks.schema import GatewayHandle


@dataclass(frozen=True, slots=True)
class HookDefinition:
    """What :func:`define_hook` returns: the events map (name as written -> handler)."""

    events: Mapping[str, Callable[..., Any]]
    description: str = ""


def define_hook(
    *, events: Mapping[str, Callable[..., Any]], description: str = ""
) -> HookDefinition:
    """A single-file hook: ``hook = define_hook(events={"session.started": on_start})``.

    ``events`` maps an event name (``"*"`` for every event) to a function taking ``(event)``
    or ``(event, ctx)``, async or not. Raises ``TypeError`` naming the entry that is wrong.
    """
    if not isinstance(events, Mapping):
        raise TypeError(
            f"define_hook(events=...) takes a dict of event name -> function, not a "
            f"{type(events).__name__}: define_hook(events={{'session.started': on_start}})"
        )
    for key, fn in events.items():
        if not isinstance(key, str) or not key.strip():
            raise TypeError(f"define_hook: event name {key!r} is not a non-empty string")
        if not callable(fn):
            raise TypeError(
                f"define_hook: events[{key!r}] is a {type(fn).__name__}, not a function"
            )
    if not isinstance(description, str):
        raise TypeError("define_hook: description must be a string")
    return HookDefinition(types.MappingProxyType(dict(events)), description)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """``ctx.agent``: ``name`` is the agent the session belongs to (``main`` by default)."""

    name: str


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """``ctx.channel``: ``kind`` is the channel the event came through, ``None`` when none."""

    kind: str | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """``ctx.session``: ``id`` is the session key (``agent:main:main``), stable across the
    conversation; ``event.context["sessionId"]`` is the current transcript's id, where the
    event has one."""

    id: str


@dataclass(frozen=True, slots=True)
class EventContext:
    """The ``ctx`` of a single-file hook's handler: Eve's shape plus the hook's own context."""

    agent: AgentInfo
    channel: ChannelInfo
    session: SessionInfo
    hook: HookContext
    """The hook's own context, as a directory hook's handler gets it."""

    @property
    def hook_name(self) -> str:
        return self.hook.hook_name

    @property
    def hook_key(self) -> str:
        return self.hook.hook_key

    @property
    def config(self) -> Mapping[str, Any]:
        """Its ``hooks.entries.<name>`` entry (``enabled``, ``env``, its own settings)."""
        return self.hook.config

    @property
    def env(self) -> Mapping[str, str]:
        return self.hook.env

    @property
    def log(self) -> Any:
        """A structlog logger bound to ``hook=<name>``."""
        return self.hook.log

    @property
    def state_dir(self) -> Path:
        return self.hook.state_dir

    @property
    def workspace_dir(self) -> Path:
        return self.hook.workspace_dir

    @property
    def gateway(self) -> GatewayHandle | None:
        return self.hook.gateway

    def int_setting(
        self, key: str, default: int, *, minimum: int = 0, maximum: int | None = None
    ) -> int:
        """:meth:`HookContext.int_setting <gatewayd.hooks.handlers.HookContext.int_setting>`."""
        return self.hook.int_setting(key, default, minimum=minimum, maximum=maximum)


def agent_name(session_key: str, context: Mapping[str, Any]) -> str:
    """The event's ``agentId`` when it carries one, else ``<id>`` of ``agent:<id>:...``, else
    ``main`` (the rule the emitters use for ``agentId``)."""
    given = context.get("agentId")
    if isinstance(given, str) and given:
        return given
    return parse_session_key(session_key)[0]


def channel_kind(context: Mapping[str, Any]) -> str | None:
    """The channel an event came through: ``channelId``, else a command's ``commandSource``,
    else ``metadata.provider``; ``None`` for events no channel caused."""
    for key in ("channelId", "commandSource"):
        value = context.get(key)
        if isinstance(value, str) and value:
            return value
    metadata = context.get("metadata")
    if isinstance(metadata, Mapping):
        provider = metadata.get("provider")
        if isinstance(provider, str) and provider:
            return provider
    return None


def event_context(event: HookEvent, hook: HookContext) -> EventContext:
    """The ``ctx`` for one event (see :class:`EventContext`)."""
    context = event.context if isinstance(event.context, Mapping) else {}
    return EventContext(
        agent=AgentInfo(agent_name(event.session_key, context)),
        channel=ChannelInfo(channel_kind(context)),
        session=SessionInfo(event.session_key),
        hook=hook,
    )
