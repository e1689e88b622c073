"""The hook system as a library: events, the registry and dispatch, and loading hooks from disk.

Hook authors import what they need from here::

    from gatewayd.hooks import HookEvent, HookContext, register_hook
"""

from gatewayd.hooks.events import EVENT_TYPES, EventKeyError, HookEvent, create_hook_event
from gatewayd.hooks.handlers import Handler, HandlerKind, HandlerSignatureError, HookContext
from gatewayd.hooks.registry import (
    DispatchReport,
    HookRegistry,
    default_registry,
    register_hook,
    unregister_hook,
)

__all__ = [
    "EVENT_TYPES",
    "DispatchReport",
    "EventKeyError",
    "Handler",
    "HandlerKind",
    "HandlerSignatureError",
    "HookContext",
    "HookEvent",
    "HookRegistry",
    "create_hook_event",
    "default_registry",
    "register_hook",
    "unregister_hook",
]
