"""What a gateway is made of: its subsystems, built from one config, and the state they share.

:class:`GatewayParts` builds the registry, the hook loader, the Node runtime, the journal, the
trigger queue and its dispatcher, the sessions, the message router, the outbox and the
loop-lag monitor from one :class:`~gatewayd.config.Config`, and holds what the reloader, the
facade and the server share while the process runs: the config in force, the load in place,
the lifecycle ``state``. The server (:mod:`gatewayd.server`) adds the lifecycle on top; the
reloader and the facade are given the parts, never the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from gatewayd.channels import Channel
from gatewayd.commands import CommandRouter
from gatewayd.config import Config
from gatewayd.dispatcher import Dispatcher
from gatewayd.eventbase import EventBases
from gatewayd.exits import EXIT_OK
from gatewayd.hooks.loader import HookLoader
from gatewayd.hooks.node import NodeRuntime
from gatewayd.hooks.records import HookRecord, LoadResult
from gatewayd.hooks.registry import HookRegistry, code_hooks
from gatewayd.journal.backends import make_journal
from gatewayd.logging import LogFormat
from gatewayd.looplag import LoopLagMonitor
from gatewayd.outbox import Outbox
from gatewayd.sessions import SessionManager
from gatewayd.systemd import Notifier
from gatewayd.transcript_files import TranscriptLimits
from gatewayd.triggers import TriggerQueue


def transcript_limits(config: Config) -> TranscriptLimits:
    """``sessions.transcriptMaxBytes`` and ``sessions.transcriptBackups``."""
    sessions = config.settings.sessions
    return TranscriptLimits(sessions.transcript_max_bytes, sessions.transcript_backups)


class GatewayParts:
    """A gateway's subsystems and shared state; see the module docstring."""

    def __init__(
        self,
        config: Config,
        *,
        config_arg: str | None = None,
        registry: HookRegistry | None = None,
        log_overrides: tuple[str | None, LogFormat | None] = (None, None),
        loop_name: str = "asyncio",
    ) -> None:
        """``config_arg``: ``--config`` as given (reloads re-resolve the file the same way);
        ``registry``: one with handlers of its own (default: the process's code hooks);
        ``log_overrides``: ``--log-level`` and ``--log-format``, which win over the config on
        every reload; ``loop_name``: the event loop the gateway runs on, for ``status``."""
        self.config = config
        """The config in force (a reload replaces it)."""
        self.config_arg = config_arg
        self.log_overrides = log_overrides
        self.loop_name = loop_name
        gw, hooks = config.settings.gateway, config.settings.hooks
        self.registry = registry if registry is not None else HookRegistry(code=code_hooks)
        self.registry.max_abandoned_threads = hooks.max_abandoned_threads
        self.bases = EventBases(config)
        """The context every event starts from (``cfg``, ``agentId``, ``workspaceDir``)."""
        self.loader = HookLoader()
        self.node = NodeRuntime()
        """The Node workers that run JS/TS hooks (none until a load has such a hook)."""
        self.journal = make_journal(config, self.bases)
        self.queue = TriggerQueue(
            gw.queue.capacity,
            self.journal,
            gw.queue.per_session_max,
            gw.queue.per_session_wait_ms / 1000,
        )
        self.dispatcher = Dispatcher(self.queue, self.registry, gw.queue.concurrency)
        self.sessions = SessionManager(
            config.paths.sessions,
            transcript_limits(config),
            cwd=lambda session_key: str(self.bases(session_key)["workspaceDir"]),
        )
        self.router = CommandRouter(
            self.queue,
            self.dispatcher,
            self.sessions,
            self.bases,
            record_blocked=lambda: self.config.settings.hooks.record_blocked,
        )
        self.outbox = Outbox()
        """Messages hooks send later, to the clients subscribed to their session."""
        self.channels: list[Channel] = []
        """Where requests come in (the server adds the control channel)."""
        self.notifier = Notifier()
        warn_ms = gw.loop_lag_warn_ms
        self.lag = LoopLagMonitor(warn_ms, self._on_stall) if warn_ms else None
        """The loop-lag monitor (``gateway.loopLagWarnMs``; ``None`` when 0)."""
        self.state = "starting"
        """``starting``, ``running``, then ``stopping``."""
        self.load: LoadResult | None = None
        """The hooks in place: the latest load that was applied."""
        self.startup_fired = False
        self.exit_code = EXIT_OK
        self.started_at = time.monotonic()
        self.running = anyio.Event()
        """Set once the gateway serves (READY sent, the dispatcher started)."""
        self._tg: anyio.abc.TaskGroup | None = None
        """The root task group, while the server runs."""

    def records(self) -> list[HookRecord]:
        """The hook records of the load in place (none before the first)."""
        return self.load.records if self.load is not None else []

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in the gateway's root task group, which owns every task."""
        if self._tg is None:
            raise RuntimeError("the gateway is not serving: start it with serve() first")
        self._tg.start_soon(fn, *args)

    def status_line(self) -> str:
        """The systemd ``STATUS=`` line."""
        registered = self.load.registered if self.load is not None else 0
        socket = self.config.paths.control_socket
        return f"{self.state}: {registered} hooks registered, control socket {socket}"

    def _on_stall(self, hook: str | None, lag_s: float) -> None:
        """The loop-lag monitor caught ``hook`` blocking the loop: count it on the hook."""
        if hook is not None and (stats := self.registry.stats().get(hook)) is not None:
            stats.stalls += 1


__all__ = ["GatewayParts", "transcript_limits"]
