"""The hook system as a library: events, the registry and dispatch, and loading hooks from disk.

Hook authors import what they need from here::

    from gatewayd.hooks import HookEvent, HookContext, register_hook
"""

from gatewayd.hooks.events import EVENT_TYPES, EventKeyError, HookEvent, create_hook_event
from gatewayd.hooks.handlers import Handler, HandlerKind, HandlerSignatureError, HookContext
from gatewayd.hooks.loader import HookRecord, LoadResult, build_hooks, hooks_listing, load_hooks
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
    "HookRecord",
    "HookRegistry",
    "LoadResult",
    "build_hooks",
    "create_hook_event",
    "default_registry",
    "hooks_listing",
    "load_hooks",
    "register_hook",
    "unregister_hook",
]
