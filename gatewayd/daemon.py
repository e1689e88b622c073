"""The gateway daemon (``gatewayd run``): lifecycle, start order, signals, reload, shutdown.

:class:`Gateway` owns every subsystem and one root task group that owns every task. Its life,
top to bottom (:meth:`Gateway.serve`):

1. claim every channel's address (a second daemon stops here, before running any hook code);
2. load the hooks in a worker thread and swap them into the registry (``hooks.loaded``);
3. start every channel, each counted only once it listens (``channels.up``);
4. ``READY=1`` with a ``STATUS=`` line, then the dispatcher (what was queued meanwhile, the
   journal's recovered events first, is dispatched from here); ``gateway.startupHookDelayMs``
   later ``gateway:startup``
   goes through the trigger queue in the background (once per process, never on reload);
5. serve until SIGTERM/SIGINT; SIGHUP (and the ``reload`` op) call :meth:`Gateway.reload`;
6. shutdown: ``STOPPING=1``, channels stop accepting, ``gateway:shutdown`` (bounded by
   ``gateway.shutdownTimeoutMs``), the queue drained (bounded by ``gateway.drainTimeoutMs``),
   one canonical ``gateway.shutdown`` line, exit 0. A second signal exits at once with code 1.

Exit codes of ``gatewayd run``: 0 clean shutdown, 1 cannot start (socket in use, ...) or forced
by a second signal, 78 invalid config.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from gatewayd import __version__, guards
from gatewayd.channels import Channel, ChannelError
from gatewayd.channels.control import ControlChannel
from gatewayd.commands import CommandRouter, Inbound, Reply, parse_command
from gatewayd.config import IGNORED_NOTE, Config, ConfigError, load_config
from gatewayd.exits import EXIT_FAILED, EXIT_OK
from gatewayd.guards import ProcessGuards
from gatewayd.hooks.agents import parse_session_key
from gatewayd.hooks.capture import capture_hook_output
from gatewayd.hooks.cfgview import public_cfg
from gatewayd.hooks.changes import Fingerprint, fingerprints, load_changes
from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.loader import (
    HookLoader,
    HookRecord,
    LoadResult,
    agents_summary,
    hooks_listing,
)
from gatewayd.hooks.node import NodeRuntime
from gatewayd.hooks.node.loading import load_node_hooks
from gatewayd.hooks.node.runtime import Generation
from gatewayd.hooks.registry import HookRegistry, cause_chain, code_hooks
from gatewayd.hooks.results import reply_lines
from gatewayd.hooks.schema import spec_for
from gatewayd.hooks.stats import bind_loop_thread
from gatewayd.hooks.tester import test_hook
from gatewayd.hooks.trace import trace_entry
from gatewayd.hooks.watcher import (
    HookWatcher,
    Snapshot,
    WatchSpec,
    diff_snapshots,
    snapshot,
    watch_spec,
)
from gatewayd.journal.base import JournalError, make_journal
from gatewayd.logging import LogFile, LogFormat, configure_logging
from gatewayd.looplag import LoopLagMonitor
from gatewayd.outbox import Outbox
from gatewayd.paths import ensure_private_dir
from gatewayd.redact import redact
from gatewayd.retries import retry_policy
from gatewayd.sessions import SessionManager, SessionsUnusable, TranscriptLimits
from gatewayd.systemd import Notifier, watchdog_interval, watchdog_loop
from gatewayd.timestamps import iso_utc
from gatewayd.triggers import Dispatcher, QueueClosed, Ticket, TriggerQueue

log = structlog.get_logger("gatewayd")

THREAD_JOIN_S = 1.0
"""How long exit waits for worker threads before leaving abandoned (timed-out) ones behind."""
EARLY_TIMER_SLACK_S = 0.002
_MAX_AGENT_BASES = 1024
"""Per-agent event bases kept before the cache starts afresh (agent ids come from clients)."""


def _restart_only(config: Config) -> dict[str, Any]:
    """Settings a reload cannot change in a running process (logged when they differ)."""
    return {
        "gateway.control.socket": config.paths.control_socket,
        "gateway.queue.concurrency": config.settings.gateway.queue.concurrency,
        **{
            f"gateway.queue.{key}": getattr(config.settings.gateway.queue, name)
            for key, name in JOURNAL_KEYS
        },
    }


def _transcript_limits(config: Config) -> TranscriptLimits:
    sessions = config.settings.sessions
    return TranscriptLimits(sessions.transcript_max_bytes, sessions.transcript_backups)


def _statuses(records: Iterable[HookRecord]) -> dict[str, int]:
    """How many hooks have each status (``ready``, ``invalid``, ``ineligible``, ...)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.status] = counts.get(record.status, 0) + 1
    return counts


JOURNAL_KEYS = (
    ("journal", "journal"),
    ("sync", "sync"),
    ("retainDone", "retain_done"),
    ("fullWaitMs", "full_wait_ms"),
)


def configure_logs(config: Config, level: str | None, fmt: LogFormat | None) -> None:
    """Logging from the config, with ``--log-level`` / ``--log-format`` winning."""
    spec = config.settings.gateway.log
    log_file = None
    if spec.file is not None:
        path = config.paths.state / spec.file.expanduser()  # an absolute path stays as it is
        log_file = LogFile(path, spec.max_bytes, spec.backups)
    configure_logging(
        level or config.settings.logging.level,
        fmt or config.settings.logging.format,
        log_file=log_file,
    )


def _watch_spec(config: Config) -> WatchSpec:
    # The config file in use, or its default location, so that creating one is noticed.
    return watch_spec(config.load_spec(), config.paths.config_file)


class HookGateway:
    """What hooks get of the running gateway (``ctx.gateway``, and ``context["gateway"]`` in
    ``gateway:startup``): the :class:`~gatewayd.hooks.schema.GatewayHandle` methods, nothing
    more. A command hook sees its ``repr``."""

    __slots__ = ("_gateway",)

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def __repr__(self) -> str:
        return f"<Gateway pid={os.getpid()} state={self._gateway.state}>"

    async def deliver(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str = "gateway",
        channel: str = "internal",
        wait: bool = True,
    ) -> tuple[list[str], str | None]:
        """See :meth:`Gateway.deliver`."""
        return await self._gateway.deliver(
            session_key, text, sender_id=sender_id, channel=channel, wait=wait
        )

    async def send(self, session_key: str, text: str, *, channel: str = "hook") -> bool:
        """See :meth:`Gateway.send`."""
        return await self._gateway.send(session_key, text, channel=channel)


def log_ignored(config: Config) -> None:
    """Say which keys of the config file gatewayd accepted but does not use (OpenClaw's)."""
    if config.ignored:
        log.warning("config.ignored", keys=list(config.ignored), note=IGNORED_NOTE)


class Gateway:
    """The running daemon; see the module docstring. Build with a loaded :class:`Config`."""

    def __init__(
        self,
        config: Config,
        *,
        config_arg: str | None = None,
        registry: HookRegistry | None = None,
        log_overrides: tuple[str | None, LogFormat | None] = (None, None),
        loop_name: str = "asyncio",
    ) -> None:
        self.config = config
        self.config_arg = config_arg
        """``--config`` as given: reloads re-resolve the file the same way the start did."""
        self.registry = registry if registry is not None else HookRegistry(code=code_hooks)
        self.registry.max_abandoned_threads = config.settings.hooks.max_abandoned_threads
        self.handle = HookGateway(self)
        """What hooks may use of this gateway."""
        self.loader = HookLoader(gateway=self.handle)
        self.node = NodeRuntime()
        """The Node workers that run JS/TS hooks (none until a load has such a hook)."""
        self.loop_name = loop_name
        self._log_overrides = log_overrides
        gw = config.settings.gateway
        self.journal = make_journal(config, self.event_base)
        self.queue = TriggerQueue(
            gw.queue.capacity,
            self.journal,
            gw.queue.per_session_max,
            gw.queue.per_session_wait_ms / 1000,
        )
        self.dispatcher = Dispatcher(self.queue, self.registry, gw.queue.concurrency)
        self.sessions = SessionManager(config.paths.sessions, _transcript_limits(config))
        self.router = CommandRouter(
            self.queue,
            self.dispatcher,
            self.sessions,
            self.event_base,
            record_blocked=lambda: self.config.settings.hooks.record_blocked,
        )
        self.outbox = Outbox()
        """Messages hooks send later, to the clients subscribed to their session."""
        control = ControlChannel(
            self,
            config.paths.control_socket,
            private_dir=config.settings.gateway.control.socket is None,
            limits=lambda: self.config.settings.gateway.control,
        )
        self.channels: list[Channel] = [control]
        self.notifier = Notifier()
        self.state = "starting"
        self.startup_fired = False
        self.reloads = 0
        self.reload_results: dict[str, int] = {}
        """Reloads by result (``ok``, ``refused``, ``failed``), for metrics."""
        self.last_reload: dict[str, Any] | None = None
        self.exit_code = EXIT_OK
        self._started = time.monotonic()
        self._load: LoadResult | None = None
        self._prints: dict[str, Fingerprint] = {}
        """The last load's hook fingerprints (what a reload compares to say what changed)."""
        self._base: dict[str, Any] = {}
        self._set_base(config)
        self._tg: anyio.abc.TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._stop_reason = ""
        self._startup_scope: anyio.CancelScope | None = None
        self._reload_lock: anyio.Lock | None = None
        self._running: anyio.Event | None = None
        self.watcher: HookWatcher | None = None
        """Live reload: the hook roots and config file watcher (``hooks.load.watch``)."""
        self.metrics: Any = None
        """The Prometheus endpoint (``gateway.metrics.listen``), once started."""
        warn_ms = gw.loop_lag_warn_ms
        self.lag = LoopLagMonitor(warn_ms, self._on_stall) if warn_ms else None
        """The loop-lag monitor (``gateway.loopLagWarnMs``; ``None`` when 0)."""

    # -- what subsystems and channels use -------------------------------------------------------

    def _set_base(self, config: Config) -> None:
        cfg = public_cfg(config.effective())  # each hook sees its own entry: hooks/cfgview.py
        self._cfg_view = cfg
        self._agents = config.agents
        self._default_workspace = config.paths.workspace
        self._bases: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._key_bases: dict[str, dict[str, Any]] = {}
        """``_bases`` by session key: one lookup instead of parsing the key (every event's
        context takes its base; see ``HookRegistry._session_plans`` for the gain)."""
        self._base = self._agent_base(config.agents.default, None)

    def _agent_base(self, agent: str, subagent: str | None) -> dict[str, Any]:
        found = self._bases.get((agent, subagent))
        if found is None:
            if len(self._bases) >= _MAX_AGENT_BASES:  # agent ids come from clients' keys
                self._bases.clear()
            agents = self._agents
            workspace = agents.workspaces.get(agent) or self._default_workspace
            found = {"cfg": self._cfg_view, "workspaceDir": str(workspace), "agentId": agent}
            if subagent is not None:
                found["subagentId"] = subagent
            self._bases[(agent, subagent)] = found
        return found

    def event_base(self, session_key: str | None = None) -> dict[str, Any]:
        """The context every event carries: ``cfg`` (the effective config, read-only by
        convention), ``agentId`` (and ``subagentId``) of the session key, and that agent's
        ``workspaceDir`` (the default agent's for an agent not in ``agents``)."""
        if session_key is None:
            return self._base
        found = self._key_bases.get(session_key)
        if found is None:
            if len(self._key_bases) >= _MAX_AGENT_BASES * 4:  # session keys come from clients
                self._key_bases.clear()
            found = self._agent_base(*parse_session_key(session_key, self._agents.default))
            self._key_bases[session_key] = found
        return found

    async def deliver(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str = "gateway",
        channel: str = "internal",
        wait: bool = True,
    ) -> tuple[list[str], str | None]:
        """Handle an inbound message; returns ``(reply messages, command name or None)``.

        With ``wait=False`` the message is handled in the background and the reply is
        ``[]``; this is the form to use from inside a hook handler (waiting there on the same
        session would wait on itself). Raises ``QueueClosed`` once the gateway is stopping.
        """
        reply = await self.message(
            session_key, text, sender_id=sender_id, channel=channel, wait=wait
        )
        return reply.messages, reply.command

    async def message(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str = "gateway",
        channel: str = "internal",
        wait: bool = True,
    ) -> Reply:
        """:meth:`deliver` for channels: the whole :class:`Reply` (``blocked`` included).

        Raises :class:`HookLoopError` when a handler's delivery would exceed
        ``hooks.maxDepth`` or (``wait=True``) wait on the session its handler runs for.
        """
        if self.queue.closed or self.state == "stopping":
            raise QueueClosed("the gateway is shutting down and takes no new messages")
        cause_chain(self.config.settings.hooks.max_depth, session_key if wait else None)
        msg = Inbound(session_key, text, sender_id, channel)
        if not wait:
            assert self._tg is not None, "deliver(wait=False) needs a running gateway"
            self._tg.start_soon(self._deliver_in_background, msg)
            command = parse_command(text)
            return Reply([], command.name if command else None)
        return await self.router.handle(msg)

    async def deliver_traced(
        self, session_key: str, text: str, *, sender_id: str, channel: str
    ) -> tuple[list[str], str | None, list[dict[str, Any]]]:
        """:meth:`deliver` that waits and also returns the trace of every event the message
        caused (see :mod:`gatewayd.hooks.trace`)."""
        if self.queue.closed or self.state == "stopping":
            raise QueueClosed("the gateway is shutting down and takes no new messages")
        reply = await self.router.handle(Inbound(session_key, text, sender_id, channel, True))
        trace = [
            trace_entry(
                event, report.outcomes if report else None, self._records(), self.config.agents
            )
            for event, report in reply.traced
        ]
        return reply.messages, reply.command, trace

    def _records(self) -> list[HookRecord]:
        return self._load.records if self._load is not None else []

    async def _deliver_in_background(self, msg: Inbound) -> None:
        try:
            await self.router.handle(msg)
        except QueueClosed as exc:
            log.warning("message.undelivered", session_key=msg.session_key, reason=str(exc))
        except Exception as exc:
            log.exception("message.failed", session_key=msg.session_key, error=str(exc))

    async def send(self, session_key: str, text: str, *, channel: str = "hook") -> bool:
        """Send ``text`` to ``session_key`` now, outside any request (what ``ctx.gateway.send``
        does): through ``message:sending``, to the clients subscribed to the session (the
        ``subscribe`` op), into its transcript, then ``message:sent``. True when delivered."""
        if self.queue.closed:
            raise QueueClosed("the gateway is shutting down and sends nothing more")
        cause_chain(self.config.settings.hooks.max_depth, None)

        def publish(content: str) -> str | None:
            return self.outbox.publish(
                session_key,
                {"event": "message", "sessionKey": session_key, "content": content},
            )

        delivered = await self.router.send_out(
            session_key,
            [text],
            to=session_key,
            channel=channel,
            entry=self.sessions.get(session_key),
            deliver=publish,
        )
        return bool(delivered)

    def subscribe(
        self, session_key: str
    ) -> AbstractContextManager[MemoryObjectReceiveStream[dict[str, Any]]]:
        """The ``subscribe`` op: ``session_key``'s outbound messages until the block ends."""
        return self.outbox.subscribe(session_key)

    async def trigger(
        self, key: str, session_key: str, context: dict[str, Any], *, wait: bool
    ) -> dict[str, Any] | None:
        """Post ``type:action`` for ``session_key``. With ``wait``: ``{messages}``, plus the
        handlers' merged ``result`` when there is one; a decision event (one with results,
        e.g. ``agent:before_tool_call``) waits at most ``hooks.decisionTimeoutMs``, after
        which the reply is the result so far with ``timedOut: true``. Else None once queued."""
        chain = cause_chain(self.config.settings.hooks.max_depth, session_key if wait else None)
        etype, _, action = key.partition(":")
        # The gateway's own keys (cfg, workspaceDir) win over the client's: a trigger cannot
        # point a hook at another workspace.
        event = create_hook_event(
            etype, action, session_key, {**context, **self.event_base(session_key)}
        )
        event.chain = chain
        if not wait:
            await self.queue.post(event)
            return None
        ticket = await self.queue.submit(event)
        try:
            return await self._trigger_reply(key, session_key, ticket)
        finally:
            ticket.release()

    async def _trigger_reply(self, key: str, session_key: str, ticket: Ticket) -> dict[str, Any]:
        event = ticket.event
        spec = spec_for(key)
        if spec is None or not spec.results:
            await ticket.wait()
            reply: dict[str, Any] = {"messages": reply_lines(event)}
            if event.result:
                reply["result"] = dict(event.result)
            return reply
        with anyio.move_on_after(self.config.settings.hooks.decision_timeout_ms / 1000) as scope:
            await ticket.wait()
        reply = {"messages": reply_lines(event), "result": dict(event.result or {})}
        if scope.cancelled_caught:
            reply["timedOut"] = True
            log.warning(
                "decision.timed_out",
                event_key=key,
                session_key=session_key,
                timeout_ms=self.config.settings.hooks.decision_timeout_ms,
                fix="make the slow hook faster or raise hooks.decisionTimeoutMs",
            )
        return reply

    async def trigger_traced(
        self, key: str, session_key: str, context: dict[str, Any]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """:meth:`trigger` that waits and also returns the event's trace."""
        etype, _, action = key.partition(":")
        event = create_hook_event(
            etype, action, session_key, {**context, **self.event_base(session_key)}
        )
        event.trace = True
        ticket = await self.queue.submit(event)
        await ticket.wait()
        outcomes = ticket.report.outcomes if ticket.report is not None else None
        entry = trace_entry(event, outcomes, self._records(), self.config.agents)
        return reply_lines(event), [entry]

    async def test_hook(
        self, hook: str, event: str | None, context: dict[str, Any], session_key: str
    ) -> dict[str, Any]:
        """The ``test`` op: :func:`gatewayd.hooks.tester.test_hook` in this daemon."""
        return await test_hook(
            self.registry,
            self._records(),
            hook,
            event,
            context,
            self.event_base(session_key),
            session_key,
        )

    async def bootstrap(self, session_key: str) -> list[Any]:
        """Fire ``agent:bootstrap`` and return the ``bootstrapFiles`` its handlers left."""
        return await self.router.bootstrap(session_key)

    async def events(self, request: dict[str, Any]) -> dict[str, Any]:
        """The ``events`` op: the journal's list, show, retry and purge (``gatewayd events``)."""
        return await self.journal.query(request)

    def hooks(self) -> dict[str, Any]:
        """The ``hooks`` op: ``{view: "daemon", stateDir, workspaceDir, hooks: [...]}`` of the
        last load, each hook with its counters under ``stats`` (``null`` for a hook that has
        not been registered since the start), and ``codeHooks``: handlers registered in code."""
        if self._load is None:
            paths = self.config.paths
            listing: dict[str, Any] = {
                "stateDir": str(paths.state),
                "workspaceDir": str(paths.workspace),
                "agents": self.config.agents.to_json(),
                "hooks": [],
            }
        else:
            listing = hooks_listing(self.config.load_spec(), self._load)
        stats = self.registry.stats()
        for record in listing["hooks"]:
            counters = stats.pop(record["name"], None) if record["status"] == "ready" else None
            record["stats"] = counters.to_json() if counters is not None else None
        code = {h.hook for handlers in self.registry.code.by_key.values() for h in handlers}
        listing["codeHooks"] = [
            {"name": name, "stats": s.to_json()} for name, s in stats.items() if name in code
        ]
        return {"view": "daemon", **listing}

    def metrics_snapshot(self) -> dict[str, Any]:
        """What the metrics endpoint reads (:class:`gatewayd.metrics.MetricsSource`)."""
        statuses = _statuses(self._records())
        journal = getattr(self, "journal", None)
        return {
            "events": dict(self.registry.event_counts),
            "queue": self.dispatcher.stats(),
            "threads": self.registry.hook_threads().stats(),
            "hooks": self.registry.stats(),
            "reloads": dict(self.reload_results),
            "loop_stalls": self.lag.stalls if self.lag is not None else 0,
            "statuses": statuses,
            "journal": journal.stats() if journal is not None else None,
        }

    def _on_stall(self, hook: str | None, lag_s: float) -> None:
        """The loop-lag monitor caught ``hook`` blocking the loop: count it on the hook."""
        if hook is not None and (stats := self.registry.stats().get(hook)) is not None:
            stats.stalls += 1

    def status(self) -> dict[str, Any]:
        """The ``status`` op (DESIGN.md section 5) plus ``state``, ``loop``, ``sessions``;
        secret-looking values redacted."""
        summary = (
            {**self._load.summary(), "statuses": _statuses(self._load.records)}
            if self._load is not None
            else {
                "discovered": 0,
                "eligible": 0,
                "registered": 0,
                "skipped": [],
                "failed": [],
                "statuses": {},
                "warnings": 0,
            }
        )
        status: dict[str, Any] = {
            "pid": os.getpid(),
            "version": __version__,
            "state": self.state,
            "uptime_s": round(time.monotonic() - self._started, 3),
            "startup_fired": self.startup_fired,
            "loop": self.loop_name,
            "loop_lag": None
            if self.lag is None
            else {
                "warn_ms": round(self.lag.warn_s * 1000),
                "stalls": self.lag.stalls,
                "max_lag_ms": round(self.lag.max_lag_s * 1000),
            },
            "config": self.config.source_label,
            "channels": [channel.describe() for channel in self.channels],
            "hooks": summary,
            "agents": agents_summary(self.config.load_spec(), self._records()),
            "queue": self.dispatcher.stats(),
            "threads": self.registry.hook_threads().stats(),
            "sessions": len(self.sessions),
            "reloads": self.reloads,
            "last_reload": self.last_reload,
            "watch": self._watch_status(),
        }
        return redact(status)  # nothing secret-looking leaves through status (gatewayd/redact.py)

    def _watch_status(self) -> dict[str, Any] | None:
        if self.watcher is None:
            return None
        spec = self.watcher.spec
        return {
            "mode": self.watcher.mode,
            "roots": [str(p) for p in spec.roots],
            "files": [str(p) for p in spec.files],
        }

    def _status_line(self) -> str:
        registered = self._load.registered if self._load is not None else 0
        socket = self.config.paths.control_socket
        return f"{self.state}: {registered} hooks registered, control socket {socket}"

    # -- reload ------------------------------------------------------------------------------

    async def reload(self, trigger: str, files: Iterable[Path] = ()) -> dict[str, Any]:
        """Re-read the config and reload the hooks; one at a time.

        An invalid config is refused (logged, the running config and hooks stay). Returns
        ``{time, duration_ms, trigger, result, changes, summary, errors}``: ``result`` is
        ``ok``, ``partial`` (loaded, but hooks failed), ``refused`` or ``failed``; ``changes``
        the files (``files``: what the watcher saw) and hooks it added, changed, removed and
        failed (:mod:`gatewayd.hooks.changes`). The same record minus ``summary`` becomes
        ``status.last_reload``; ``reload.done`` logs it once.
        """
        if self._reload_lock is None:
            self._reload_lock = anyio.Lock()
        async with self._reload_lock:
            began, t0 = time.time(), time.perf_counter()
            self.notifier.reloading()
            log.info("reload.begin", trigger=trigger)
            files = frozenset(files)
            early = self.node.reimport() if self._hook_files_only(trigger, files) else None
            summary: dict[str, Any] | None = None
            changes: dict[str, Any] | None = None
            errors: list[str] = []
            try:
                config = await anyio.to_thread.run_sync(load_config, self.config_arg)
                self._refuse_vanished_config(config)
                if self.watcher is not None:
                    # New roots (extraDirs, workspace) are watched before the build reads them,
                    # so an edit made while this reload runs is never lost between the two.
                    await self.watcher.update(_watch_spec(config))
                result = await anyio.to_thread.run_sync(self.loader.build, config.load_spec())
                generation = await load_node_hooks(result, self.node, early)
                prints = await anyio.to_thread.run_sync(fingerprints, result.records)
            except ConfigError as exc:
                outcome, errors = "refused", [f"{exc.source}: {e}" for e in exc.errors]
                log.error(
                    "reload.refused",
                    trigger=trigger,
                    source=exc.source,
                    errors=exc.errors,
                    fix="fix the config; the running config and hooks stay in place",
                )
            except Exception as exc:  # the loader reports per-hook failures; this is a bug
                outcome, errors = "failed", [f"{type(exc).__name__}: {exc}"]
                log.exception("reload.failed", trigger=trigger, error=errors[0])
            else:
                try:
                    changes = self._apply_load(config, result, generation, prints, files)
                except Exception as exc:
                    # A bug: the new config and hooks may be in place only in part. Said so,
                    # with the traceback; the daemon runs on (what it was built to do).
                    outcome, errors = "failed", [f"{type(exc).__name__}: {exc}"]
                    log.exception(
                        "reload.apply_failed",
                        trigger=trigger,
                        error=errors[0],
                        fix="a bug in gatewayd (please report it with this line): the new "
                        "config may be applied only in part; restart gatewayd to be sure",
                    )
                else:
                    outcome = "partial" if result.failed else "ok"
                    summary = {**result.summary(), "statuses": _statuses(result.records)}
            if early is not None:
                await self.node.discard(early)
            record: dict[str, Any] = {
                "time": iso_utc(began),
                "duration_ms": round((time.perf_counter() - t0) * 1000, 1),
                "trigger": trigger,
                "result": outcome,
            }
            if changes is not None:
                record["changes"] = changes
            if errors:
                record["errors"] = errors
            self.reloads += 1
            self.reload_results[outcome] = self.reload_results.get(outcome, 0) + 1
            self.last_reload = record
            (log.info if outcome == "ok" else log.warning)("reload.done", **record)
            self.notifier.ready(self._status_line())
            return {**record, "summary": summary, "errors": errors}

    def _apply_load(
        self,
        config: Config,
        result: LoadResult,
        generation: Generation | None,
        prints: dict[str, Fingerprint],
        files: frozenset[Path],
    ) -> dict[str, Any]:
        """Put a reload's config and hooks in place; returns its ``changes``."""
        self._apply_config(config)
        result.apply(self.registry, config.load_spec())
        self.node.activate(generation)
        self._set_retry_policy(result, config)
        changes = load_changes(
            self._records(), result.records, self._prints, prints, (str(p) for p in files)
        )
        self._load, self._prints = result, prints
        return changes

    def _hook_files_only(self, trigger: str, files: frozenset[Path]) -> bool:
        """Whether this reload is the watcher's, for hook files only: then the JS/TS hooks are
        re-imported while the config is read and the Python hooks built (``NodeRuntime.reimport``).
        Not when the config changed: that most often changes which hooks run, and where."""
        if trigger != "watch" or self.watcher is None:
            return False
        return not files & frozenset(self.watcher.spec.files)

    def _refuse_vanished_config(self, config: Config) -> None:
        """A reload that finds the config file gone would fall back to the built-in defaults
        (re-enabling every hook it disabled): refuse it, with a warning, and keep running."""
        gone = self.config.source
        if gone is None or config.source is not None:
            return
        log.warning(
            "config.deleted",
            path=str(gone),
            fix="restore the file; to run on the built-in defaults, create it empty",
        )
        raise ConfigError(
            str(gone),
            [
                f"{gone} was deleted; the running config stays (restore it, or create it empty "
                "to use the built-in defaults)"
            ],
        )

    def _set_retry_policy(self, result: LoadResult, config: Config) -> None:
        """The dispatcher's retries for this load's hooks (``hooks.entries.<key>.retries``)."""
        keys = ((record.name, record.hook_key) for record in result.records)
        self.dispatcher.retry_policy = retry_policy(config, keys)

    def _apply_config(self, config: Config) -> None:
        """Take what a running process can change from a new config; log what it cannot."""
        old, new = _restart_only(self.config), _restart_only(config)
        changed = [key for key in new if new[key] != old[key]]
        if changed:
            log.warning(
                "reload.restart_needed",
                keys=changed,
                note="these settings keep their old values until gatewayd restarts",
            )
        queue = config.settings.gateway.queue
        self.queue.resize(queue.capacity)
        self.queue.bound_sessions(queue.per_session_max, queue.per_session_wait_ms / 1000)
        self.registry.max_abandoned_threads = config.settings.hooks.max_abandoned_threads
        self.registry.hook_threads().max_abandoned = config.settings.hooks.max_abandoned_threads
        self.sessions.limits = _transcript_limits(config)
        configure_logs(config, *self._log_overrides)
        log_ignored(config)
        self.config = config
        self._set_base(config)

    async def _start_watching(self, before: Snapshot) -> None:
        """Start the watcher (after READY: watchfiles is not on the start path), then reload
        once if the hook roots or config changed since the first load read them."""
        assert self.watcher is not None and self._tg is not None
        await self._tg.start(self.watcher.run)
        after = await anyio.to_thread.run_sync(snapshot, self.watcher.spec.targets)
        if changed := diff_snapshots(before, after):
            log.info("watch.changed_during_start", paths=sorted(str(p) for p in changed)[:20])
            await self.reload("watch", changed)

    async def _on_files_changed(self, paths: frozenset[Path]) -> None:
        """The watcher saw hook files or the config change: reload (once running)."""
        assert self._running is not None
        await self._running.wait()
        if self.state == "running":
            await self.reload("watch", paths)

    # -- lifecycle -----------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Begin a graceful shutdown (what SIGTERM does); a no-op if one is under way."""
        if self._stop is None or self._stop.is_set():
            return
        self._stop_reason = reason
        self._stop.set()
        if self._startup_scope is not None:
            self._startup_scope.cancel()

    async def serve(self) -> int:
        """Run until stopped; returns the exit code."""
        self._stop = anyio.Event()
        log.info(
            "gateway.starting",
            pid=os.getpid(),
            version=__version__,
            loop=self.loop_name,
            config=self.config.source_label,
            state_dir=str(self.config.paths.state),
        )
        if self.loop_name != "uvloop":
            log.warning("gateway.loop_fallback", loop=self.loop_name, note="uvloop not installed")
        bind_loop_thread()
        process_guards = ProcessGuards(lambda: [fd for ch in self.channels for fd in ch.fds()])
        process_guards.install()
        try:
            return await self._serve(process_guards)
        finally:
            process_guards.uninstall()

    async def _serve(self, process_guards: ProcessGuards) -> int:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._watch_signals)
            tg.start_soon(process_guards.watch)
            if self.lag is not None:
                await tg.start(self.lag.run)
            if (interval := watchdog_interval()) is not None:
                tg.start_soon(watchdog_loop, self.notifier, interval)
            started = False
            with anyio.CancelScope() as self._startup_scope:
                started = await self._start(tg)
            self._startup_scope = None
            if started:
                assert self._stop is not None
                await self._stop.wait()
            await self._shutdown()
            tg.cancel_scope.cancel()
        self.notifier.close()
        return self.exit_code

    async def _start(self, tg: anyio.abc.TaskGroup) -> bool:
        for directory in (self.config.paths.state, self.config.paths.workspace):
            try:
                ensure_private_dir(directory)  # 0700 whatever the umask, when created here
            except OSError as exc:
                log.warning("gateway.dir_failed", path=str(directory), error=str(exc))
        try:
            for channel in self.channels:
                channel.claim()
        except ChannelError as exc:
            return self._fail_start(exc)
        self._running = anyio.Event()
        before: Snapshot | None = None
        if self.config.settings.hooks.load.watch:
            self.watcher = HookWatcher(_watch_spec(self.config), self._on_files_changed)
            # What the first load is built from, so that watching can start after READY and
            # still not miss an edit made in between (see _start_watching).
            before = await anyio.to_thread.run_sync(snapshot, self.watcher.spec.targets)
        # Everything imported so far lives as long as the process. Freezing it keeps it out of
        # every later collection, and each reload's gc.collect() (which frees the replaced hook
        # modules) then scans only what came after: ~2 ms instead of ~60 ms per reload.
        gc.freeze()
        log_ignored(self.config)
        spec = self.config.load_spec()
        self._load = await anyio.to_thread.run_sync(self.loader.build, spec)
        await tg.start(self.node.run)
        generation = await load_node_hooks(self._load, self.node)
        self._prints = await anyio.to_thread.run_sync(fingerprints, self._load.records)
        self._load.apply(self.registry, spec)
        self.node.activate(generation)
        self._set_retry_policy(self._load, self.config)
        try:
            await anyio.to_thread.run_sync(self.sessions.load)
        except SessionsUnusable as exc:
            return self._fail_start(exc)
        try:  # what an earlier run accepted and never finished goes first, in its order
            self.queue.restore(await self.journal.open())
        except JournalError as exc:
            return self._fail_start(exc)
        if (listen := self.config.settings.gateway.metrics.listen) is not None:
            from gatewayd.metrics import MetricsServer  # prometheus_client: only when asked

            self.metrics = MetricsServer(self, listen)
            await tg.start(self.metrics.serve)
        try:
            for channel in self.channels:
                await tg.start(channel.serve)
        except ChannelError as exc:
            return self._fail_start(exc)
        startup_ms = round((time.monotonic() - self._started) * 1000, 1)
        log.info(
            "channels.up",
            channels=[channel.describe() for channel in self.channels],
            startup_ms=startup_ms,
        )
        self.state = "running"
        self._running.set()
        self.notifier.ready(self._status_line())
        # Dispatch begins once READY is out: an event that blocks the loop (a recovered one
        # included) can then only trip the watchdog, never keep the service from starting.
        # Nothing is lost meanwhile: requests queue behind the recovered events.
        await tg.start(self.dispatcher.run)
        if before is not None:
            tg.start_soon(self._start_watching, before)
        log.info("gateway.ready", hooks=self._load.registered, startup_ms=startup_ms)
        tg.start_soon(self._fire_startup, self.config.settings.gateway.startup_hook_delay_ms / 1000)
        return True

    def _fail_start(self, exc: ChannelError | JournalError | SessionsUnusable) -> bool:
        log.error("gateway.start_failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr, flush=True)
        self.exit_code = exc.exit_code if isinstance(exc, JournalError) else EXIT_FAILED
        self._stop_reason = "start failure"
        return False

    async def _fire_startup(self, delay_s: float) -> None:
        # A loop timer may fire a little early against the real clock (libuv caches its time
        # per iteration): measure, so the delay after channels.up is never shorter than asked.
        deadline = time.monotonic() + delay_s
        await anyio.sleep(delay_s)
        if (left := deadline - time.monotonic()) > 0:
            await anyio.sleep(left + EARLY_TIMER_SLACK_S)
        if self.startup_fired or self.state != "running":
            return
        self.startup_fired = True
        event = create_hook_event(
            "gateway", "startup", "gateway:startup", {**self._base, "gateway": self.handle}
        )
        try:
            # follows: the per-session bound is not for the gateway's own once-a-run event. A
            # client may post to the session "gateway:startup" too, and with that session full
            # the QueueFull ended the daemon from its root task group.
            await self.queue.post(event, follows=True)
        except QueueClosed:
            return
        except JournalError as exc:
            log.error(
                "gateway.startup_not_posted",
                error=str(exc),
                note="gateway:startup was not accepted: its hooks do not run in this run",
            )
            return
        log.info("gateway.startup_posted", delay_ms=round(delay_s * 1000))

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if signum == signal.SIGHUP:
                    if self.state == "running":
                        assert self._tg is not None
                        self._tg.start_soon(self.reload, name)
                    else:
                        log.info("reload.ignored", signal=name, state=self.state)
                    continue
                if self._stop is not None and self._stop.is_set():
                    self._force_exit(name)
                log.info("gateway.signal", signal=name)
                self.request_stop(name)

    def _force_exit(self, signame: str) -> None:
        stats = self.dispatcher.stats()
        left = stats["depth"] + stats["left"]
        log.error(
            "gateway.shutdown",
            summary=f"forced exit on second {signame} - {stats['dispatched']} dispatched - "
            f"{stats['errors']} failed - {stats['timeouts']} timed out - {left}+ left",
            signal=signame,
            forced=True,
            dispatched=stats["dispatched"],
            failed=stats["errors"],
            timed_out=stats["timeouts"],
            left=left,
            exit_code=EXIT_FAILED,
        )
        for channel in self.channels:
            channel.stop_accepting()
        sys.stdout.flush()
        sys.stderr.flush()
        guards.real_exit(EXIT_FAILED)  # not the guarded os._exit: this one is ours

    async def _shutdown(self) -> None:
        reason = self._stop_reason or "request"
        self.state = "stopping"
        gw = self.config.settings.gateway
        self.notifier.stopping(f"stopping on {reason}: draining {self.queue.depth} queued events")
        log.info("shutdown.begin", reason=reason, queued=self.queue.depth)
        for channel in self.channels:
            channel.stop_accepting()
        if self._load is not None:  # hooks were loaded: tell them
            event = create_hook_event(
                "gateway", "shutdown", "gateway:shutdown", {**self._base, "reason": reason}
            )
            with anyio.move_on_after(gw.shutdown_timeout_ms / 1000) as scope:
                await self.dispatcher.dispatch_now(event)
            if scope.cancelled_caught:
                log.warning(
                    "shutdown.hooks_timeout",
                    timeout_ms=gw.shutdown_timeout_ms,
                    fix="make gateway:shutdown handlers faster or raise gateway.shutdownTimeoutMs",
                )
        left = await self.dispatcher.drain(gw.drain_timeout_ms / 1000)
        await self.journal.close()
        self.sessions.close()
        left += self.queue.late
        kept = self.journal.stats()["pending"] if self.journal.durable else 0
        if left:
            log.warning(
                "shutdown.left",
                left=left,
                drain_timeout_ms=gw.drain_timeout_ms,
                fix="raise gateway.drainTimeoutMs or make the slow hooks faster",
            )
        d = self.dispatcher
        summary = (
            f"shutdown on {reason} - {d.dispatched} dispatched - {d.errors} failed - "
            f"{d.timeouts} timed out - {left} left"
        )
        if kept:
            summary += f" - {kept} kept in the journal"
        log.info(
            "gateway.shutdown",
            summary=summary,
            signal=reason,
            dispatched=d.dispatched,
            failed=d.errors,
            timed_out=d.timeouts,
            left=left,
            journaled=kept,
            exit_code=self.exit_code,
            uptime_s=round(time.monotonic() - self._started, 3),
        )


# -- the command ---------------------------------------------------------------------------


def _loop() -> tuple[str, dict[str, Any]]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio", {}
    return "uvloop", {"use_uvloop": True}


def run_gateway(gateway: Gateway) -> int:
    """Run ``gateway`` on uvloop (asyncio when uvloop is missing); returns the exit code."""
    _, options = _loop()
    code: int = anyio.run(gateway.serve, backend="asyncio", backend_options=options)
    deadline = time.monotonic() + THREAD_JOIN_S
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))  # idle workers exit at once
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if stuck:
        # Sync hooks abandoned after a timeout keep their threads; don't let them hold the exit.
        log.warning("gateway.threads_abandoned", threads=len(stuck))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def run_daemon(
    config: Config, config_arg: str | None, log_overrides: tuple[str | None, LogFormat | None]
) -> int:
    """Serve ``config`` (read from ``config_arg``) until shutdown; returns the exit code."""
    loop_name, _ = _loop()
    gateway = Gateway(
        config, config_arg=config_arg, log_overrides=log_overrides, loop_name=loop_name
    )
    with capture_hook_output():
        return run_gateway(gateway)
