"""What a registered handler is: a checked callable or command, and the ``ctx`` it may receive.

``make_handler()`` validates a Python callable when it is registered (pluggy style): it must take
``(event)`` or ``(event, ctx)``. A wrong signature is a :class:`HandlerSignatureError` naming the
hook and the callable, raised at load time rather than on the first event.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from inspect import CO_COROUTINE, CO_VARARGS
from pathlib import Path
from types import FunctionType
from typing import Any

import structlog

from gatewayd.hooks.agents import SHARED, HookScope
from gatewayd.hooks.schema import GatewayHandle
from gatewayd.hooks.stats import HookStats

DEFAULT_PRIORITY = 100


class HandlerKind(Enum):
    ASYNC = "async"  # awaited on the event loop
    SYNC = "sync"  # run in a worker thread under the hooks' own capacity limiter
    COMMAND = "command"  # an executable: event JSON on stdin, messages on stdout
    NODE = "node"  # a .ts/.js/.mjs handler run by the Node worker (gatewayd.hooks.node)


_LANGUAGE = {"async": "python", "sync": "python", "node": "js"}


class HandlerSignatureError(TypeError):
    """A handler that cannot be called as ``handler(event)`` or ``handler(event, ctx)``."""


class HookLog:
    """``structlog.get_logger("gatewayd.hook").bind(hook=<name>)``, bound when first used.

    Most hooks never log through ``ctx.log``; binding a logger for each one at load time was
    ~2.7 us and three objects of each hook's cold load.
    """

    __slots__ = ("_bound", "_hook")

    def __init__(self, hook: str) -> None:
        self._hook = hook
        self._bound: Any = None

    def __getattr__(self, name: str) -> Any:
        bound = self._bound
        if bound is None:
            bound = self._bound = structlog.get_logger("gatewayd.hook").bind(hook=self._hook)
        return getattr(bound, name)


@dataclass(frozen=True, slots=True)
class HookContext:
    """The optional second handler argument: who the hook is and what it may use."""

    hook_name: str
    hook_key: str
    config: Mapping[str, Any]
    """The hook's ``hooks.entries.<hookKey>`` entry (``enabled``, ``env``, its own settings)."""
    env: Mapping[str, str]
    """The process environment merged with the entry's ``env``."""
    log: Any
    """A structlog logger bound to ``hook=<name>`` (:class:`HookLog`)."""
    state_dir: Path
    workspace_dir: Path
    gateway: GatewayHandle | None = None
    """The running gateway, for what a hook may ask of it (:class:`GatewayHandle`); ``None``
    when the hook runs outside a daemon (``gatewayd hooks`` commands, unit tests)."""

    def int_setting(
        self, key: str, default: int, *, minimum: int = 0, maximum: int | None = None
    ) -> int:
        """The hook's own integer setting ``key`` (``hooks.entries.<hookKey>.<key>``).

        ``default`` when it is absent, and also when it is not an integer of at least
        ``minimum`` (and at most ``maximum``, when given); that is logged as
        ``<hook_name>.bad_setting`` (dashes as underscores) with the key path and the fix, so a
        typo in the config never stops the hook.
        """
        value = self.config.get(key)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < minimum
            or (maximum is not None and value > maximum)
        ):
            within = (
                f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
            )
            self.log.warning(
                f"{self.hook_name.replace('-', '_')}.bad_setting",
                key=f"hooks.entries.{self.hook_key}.{key}",
                value=value,
                using=default,
                fix=f"set it to an integer {within}",
            )
            return default
        return value


@dataclass(slots=True, eq=False)
class Handler:
    """One runnable handler: a Python callable or an executable, with its timeout."""

    hook: str
    kind: HandlerKind
    hook_key: str = ""
    """The hook's key in ``hooks.entries`` (its name unless HOOK.md sets ``hookKey``)."""
    call: Callable[..., Any] | None = None
    takes_ctx: bool = False
    ctx: HookContext | None = None
    command: Path | None = None
    node: Any = None
    """For a ``NODE`` handler: its ``gatewayd.hooks.node.NodeHook`` (what runs it)."""
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    """This handler's own timeout; ``None`` means the registry default (``hooks.timeoutMs``)."""
    priority: int = DEFAULT_PRIORITY
    """Lower runs earlier; ties keep the registration order (see the registry)."""
    background: bool = False
    """Runs after the event's reply was sent, in the session's order, not on the reply path."""
    source: str = "code"
    """``code`` for handlers registered in code, else the file hook's source root name."""
    cfg: Mapping[str, Any] | None = None
    """The ``cfg`` this handler sees in ``event.context`` (``hooks/cfgview.py``); ``None``:
    the event's own (the public config)."""
    stats: HookStats = field(default_factory=HookStats)
    """Its counters; a registry hands every handler of one hook name the same object."""
    scope: HookScope = SHARED
    """Which agents' events it serves (``gatewayd/hooks/agents.py``); code handlers: all."""

    @property
    def language(self) -> str:
        """What runs it, as traces and listings say: ``python``, ``command`` (or ``js``)."""
        return _LANGUAGE.get(self.kind.value, self.kind.value)

    def __post_init__(self) -> None:
        if not self.hook_key:
            self.hook_key = self.hook

    def invoke(self, event: Any) -> Any:
        """Call the Python handler with the arguments it declared."""
        assert self.call is not None
        return self.call(event, self.ctx) if self.takes_ctx else self.call(event)


def _plain(fn: Callable[..., Any]) -> FunctionType | None:
    """``fn`` when it is a plain function with nothing set on it (no ``__wrapped__``, no
    ``__signature__``): its code object then tells what ``inspect`` would, much faster
    (``inspect.signature()`` was 40 to 70 us of each hook's load)."""
    return fn if type(fn) is FunctionType and not fn.__dict__ else None


def _is_async(fn: Callable[..., Any]) -> bool:
    if (plain := _plain(fn)) is not None:
        return bool(plain.__code__.co_flags & CO_COROUTINE)
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an instance with `async def __call__`
    return call is not None and inspect.iscoroutinefunction(call)


def _takes_ctx(fn: Callable[..., Any], where: str) -> bool:
    if (function := _plain(fn)) is not None:
        # One or two positional parameters, no *args, no keyword-only ones: its code says it.
        code = function.__code__
        simple = not code.co_kwonlyargcount and not code.co_flags & CO_VARARGS
        if simple and 1 <= code.co_argcount <= 2:
            return code.co_argcount == 2
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise HandlerSignatureError(f"{where}: cannot read the signature: {exc}") from None
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required = [p for p in positional if p.default is p.empty]
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    kw_required = [
        p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    ]
    if kw_required:
        raise HandlerSignatureError(
            f"{where}: required keyword-only parameters {kw_required} are never passed; "
            "define it as handler(event) or handler(event, ctx)"
        )
    if len(required) > 2:
        raise HandlerSignatureError(
            f"{where}: takes {len(required)} required arguments; "
            "define it as handler(event) or handler(event, ctx)"
        )
    if not positional and not has_varargs:
        raise HandlerSignatureError(
            f"{where}: takes no arguments; define it as handler(event) or handler(event, ctx)"
        )
    return len(positional) >= 2 or has_varargs


def make_handler(
    fn: Callable[..., Any],
    *,
    hook: str,
    hook_key: str | None = None,
    where: str | None = None,
    ctx: HookContext | Callable[[], HookContext] | None = None,
    timeout_s: float | None = None,
    priority: int = DEFAULT_PRIORITY,
    background: bool = False,
    source: str = "code",
) -> Handler:
    """Check ``fn`` and wrap it as a :class:`Handler`; raise :class:`HandlerSignatureError`.

    ``ctx``: the :class:`HookContext` it gets, or what builds one, called only when ``fn``
    takes a ``ctx`` (the loader's: most hooks take only the event, and a context built for each
    was ~2.5 us and two objects of each hook's cold load).
    """
    where = where or f"hook {hook!r}: handler {getattr(fn, '__qualname__', fn)!r}"
    if not callable(fn):
        raise HandlerSignatureError(f"{where}: is a {type(fn).__name__}, not a callable")
    takes_ctx = _takes_ctx(fn, where)
    if ctx is not None and not isinstance(ctx, HookContext):
        ctx = ctx() if takes_ctx else None
    if takes_ctx and ctx is None:
        ctx = HookContext(
            hook_name=hook,
            hook_key=hook_key or hook,
            config={},
            env={},
            log=HookLog(hook),
            state_dir=Path(),
            workspace_dir=Path(),
        )
    return Handler(
        hook=hook,
        hook_key=hook_key or hook,
        kind=HandlerKind.ASYNC if _is_async(fn) else HandlerKind.SYNC,
        call=fn,
        takes_ctx=takes_ctx,
        ctx=ctx,
        timeout_s=timeout_s,
        priority=priority,
        background=background,
        source=source,
    )
