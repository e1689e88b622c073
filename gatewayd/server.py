"""The gateway server: one process's life, from start to exit code.

:class:`Gateway` builds every subsystem from one :class:`~gatewayd.config.Config` and runs them
under one root task group that owns every task. :meth:`Gateway.serve` reads top to bottom:

1. :meth:`~Gateway._startup`: claim every channel's address (a second daemon stops here, before
   running any hook code); load the hooks in a worker thread and swap them into the registry
   (``hooks.loaded``); read the sessions, open the journal (what it holds unfinished is queued
   first); start every channel, each counted once it listens (``channels.up``); ``READY=1`` with
   a ``STATUS=`` line, then the dispatcher; the watcher; ``gateway.startupHookDelayMs`` later
   ``gateway:startup`` goes through the queue (once per process, never on reload);
2. :meth:`~Gateway._main_loop`: serve until SIGTERM/SIGINT (or :meth:`Gateway.request_stop`);
   SIGHUP reloads (:class:`~gatewayd.reloader.Reloader`); SIGUSR2 (OpenClaw's restart signal)
   stops to restart in place (:attr:`Gateway.restarting`: ``gatewayd run`` then executes
   itself again, same PID);
3. :meth:`~Gateway._shutdown`: ``STOPPING=1`` (``RELOADING=1`` for a restart), channels stop
   accepting, ``gateway:shutdown`` (then, for a restart, ``gateway:pre-restart``; each bounded by
   ``gateway.shutdownTimeoutMs``), the queue drained (bounded by ``gateway.drainTimeoutMs``),
   one canonical ``gateway.shutdown`` line. A second signal exits at once with code 1.

Channels and hooks reach the gateway only through its facade (:mod:`gatewayd.facade`); the
process around it (the loop, the exit) is the command's (:mod:`gatewayd.cli.run`).
"""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import time
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.abc import TaskStatus

import gatewayd
from gatewayd import __version__, guards
from gatewayd.channels import ChannelError
from gatewayd.channels.control import ControlChannel
from gatewayd.config import Config
from gatewayd.exits import EXIT_FAILED
from gatewayd.facade import GatewayFacade, HookGateway
from gatewayd.guards import ProcessGuards
from gatewayd.hooks.changes import fingerprints
from gatewayd.hooks.collector import collect_replaced, full_collections_deferred
from gatewayd.hooks.events import create_hook_event
from gatewayd.hooks.node.loading import load_node_hooks
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.stats import bind_loop_thread
from gatewayd.journal.base import JournalError
from gatewayd.logging import LogFormat
from gatewayd.parts import GatewayParts
from gatewayd.paths import ensure_private_dir
from gatewayd.reloader import Reloader, log_ignored
from gatewayd.sessions import SessionsUnusable
from gatewayd.systemd import watchdog_interval, watchdog_loop
from gatewayd.triggers import QueueClosed

log = structlog.get_logger("gatewayd")

EARLY_TIMER_SLACK_S = 0.002
"""Added to a loop timer that fired early against the real clock (libuv caches its time)."""


RESTART_SIGNAL = signal.SIGUSR2
"""Stop to restart in place, as OpenClaw's gateway restarts on it."""


class Gateway(GatewayParts):
    """The running daemon; see the module docstring. Build it with a loaded :class:`Config`
    (the arguments are :class:`~gatewayd.parts.GatewayParts`'), then ``await serve()`` (or
    ``await task_group.start(gateway.serve)``)."""

    def __init__(
        self,
        config: Config,
        *,
        config_arg: str | None = None,
        registry: HookRegistry | None = None,
        log_overrides: tuple[str | None, LogFormat | None] = (None, None),
        loop_name: str = "asyncio",
    ) -> None:
        super().__init__(
            config,
            config_arg=config_arg,
            registry=registry,
            log_overrides=log_overrides,
            loop_name=loop_name,
        )
        self.reloader = Reloader(self)
        self.facade = GatewayFacade(self, self.reloader)
        """What channels (and the metrics endpoint) may ask of this gateway."""
        self.handle = HookGateway(self, self.facade)
        """What hooks may ask of it (``ctx.gateway``)."""
        self.loader.gateway = self.handle
        self.node.gateway.handle = self.handle  # JS/TS hooks' ctx.gateway
        self.channels.append(
            ControlChannel(
                self.facade,
                config.paths.control_socket,
                private_dir=config.settings.gateway.control.socket is None,
                limits=lambda: self.config.settings.gateway.control,
            )
        )
        self.metrics: Any = None
        """The Prometheus endpoint (``gateway.metrics.listen``), once started."""
        self._stop = anyio.Event()
        self._stop_reason = ""
        self.restarting = False
        """The stop is a restart in place (SIGUSR2): ``gatewayd run`` executes itself again."""
        self.ready_ms: float | None = None
        """How long this process took from importing gatewayd to READY."""
        self._startup_scope: anyio.CancelScope | None = None

    def request_stop(self, reason: str, *, restart: bool = False) -> None:
        """Begin a graceful shutdown (what SIGTERM does; with ``restart``, what SIGUSR2 does:
        the process then starts again in place); a no-op if one is under way."""
        if self._stop.is_set():
            return
        self._stop_reason = reason
        self.restarting = restart
        self._stop.set()
        if self._startup_scope is not None:
            self._startup_scope.cancel()

    # -- the life of the process --------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> int:
        """Run until stopped; returns the exit code. ``task_status.started()`` is called once
        the gateway serves (never when the start fails: then the exit code says why)."""
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
                    started = await self._startup(tg)
                self._startup_scope = None
                if started:
                    task_status.started()
                    await self._main_loop()
                await self._shutdown()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            process_guards.uninstall()
        self.notifier.close()
        return self.exit_code

    async def _startup(self, tg: anyio.abc.TaskGroup) -> bool:
        """Start everything (the module docstring's step 1); False when the start failed."""
        config = self.config
        for directory in (config.paths.state, config.paths.workspace):
            try:
                ensure_private_dir(directory)  # 0700 whatever the umask, when created here
            except OSError as exc:
                log.warning("gateway.dir_failed", path=str(directory), error=str(exc))
        try:
            for channel in self.channels:
                channel.claim()
        except ChannelError as exc:
            return self._fail_start(exc)
        # What the first load reads, so that watching can start after READY and still not
        # miss an edit made in between (Reloader.start_watching).
        before = await self.reloader.prepare_watching()
        # Everything imported so far lives as long as the process. Freezing it keeps it out of
        # every later collection, and each reload's gc.collect() (which frees the replaced hook
        # modules) then scans only what came after: ~2 ms instead of ~60 ms per reload.
        gc.freeze()
        log_ignored(config)
        spec = config.load_spec()
        with full_collections_deferred():  # until the one after the load, as a reload's
            # Left behind if a signal stops the start: an import stuck up to its bound (a
            # handler's timeout) must not hold the shutdown, whose bounds are its own.
            load = await anyio.to_thread.run_sync(self.loader.build, spec, abandon_on_cancel=True)
            await tg.start(self.node.run)
            generation = await load_node_hooks(load, self.node)
            prints = await anyio.to_thread.run_sync(fingerprints, load.records)
            self.reloader.install(config, load, generation, prints)
            # Before READY: the full collection the build deferred, not one the allocator
            # starts while the daemon serves.
            await anyio.to_thread.run_sync(collect_replaced)
        try:
            await anyio.to_thread.run_sync(self.sessions.load)
        except SessionsUnusable as exc:
            return self._fail_start(exc)
        try:  # what an earlier run accepted and never finished goes first, in its order
            self.queue.restore(await self.journal.open())
        except JournalError as exc:
            return self._fail_start(exc)
        if (listen := config.settings.gateway.metrics.listen) is not None:
            from gatewayd.metrics import MetricsServer  # prometheus_client: only when asked

            self.metrics = MetricsServer(self.facade, listen)
            await tg.start(self.metrics.serve)
        try:
            for channel in self.channels:
                await tg.start(channel.serve)
        except ChannelError as exc:
            return self._fail_start(exc)
        startup_ms = round((time.monotonic() - self.started_at) * 1000, 1)
        self.ready_ms = (time.monotonic() - gatewayd.STARTED) * 1000
        log.info(
            "channels.up",
            channels=[channel.describe() for channel in self.channels],
            startup_ms=startup_ms,
        )
        self.state = "running"
        self.running.set()
        self.notifier.ready(self.status_line())
        # Dispatch begins once READY is out: an event that blocks the loop (a recovered one
        # included) can then only trip the watchdog, never keep the service from starting.
        # Nothing is lost meanwhile: requests queue behind the recovered events.
        await tg.start(self.dispatcher.run)
        if before is not None:
            tg.start_soon(self.reloader.start_watching, tg, before)
        log.info("gateway.ready", hooks=load.registered, startup_ms=startup_ms)
        tg.start_soon(self._fire_startup, config.settings.gateway.startup_hook_delay_ms / 1000)
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
            "gateway", "startup", "gateway:startup", {**self.bases(), "gateway": self.handle}
        )
        try:
            # follows: the per-session bound is not for the gateway's own once-a-run event (a
            # client may fill the session "gateway:startup"; a QueueFull here would end the
            # daemon from its root task group).
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

    async def _main_loop(self) -> None:
        """Serve until a stop is requested (a signal, :meth:`request_stop`)."""
        await self._stop.wait()

    async def _watch_signals(self) -> None:
        watched = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, RESTART_SIGNAL)
        with anyio.open_signal_receiver(*watched) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if signum == RESTART_SIGNAL:
                    if self._stop.is_set():
                        log.info("restart.ignored", signal=name, state=self.state)
                    else:
                        log.info("gateway.signal", signal=name, restart=True)
                        self.request_stop(name, restart=True)
                    continue
                if signum == signal.SIGHUP:
                    if self.state == "running":
                        self.start_soon(self.reloader.reload, name)
                    else:
                        log.info("reload.ignored", signal=name, state=self.state)
                    continue
                if self._stop.is_set():
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

    def restart_expected_ms(self) -> int | None:
        """``restartExpectedMs`` of ``gateway:shutdown``: ``None`` unless this stop restarts in
        place; then the time this process took from importing gatewayd to READY (the restarted
        one does all of it again: interpreter, imports, hooks, journal), at least 1 ms; what is
        left of the drain comes on top. OpenClaw sets it only on a restart too (1500 there, a
        constant)."""
        if not self.restarting:
            return None
        return max(1, math.ceil(self.ready_ms or 0))

    async def _shutdown(self) -> None:
        reason = self._stop_reason or "request"
        self.state = "stopping"
        gw = self.config.settings.gateway
        restart_ms = self.restart_expected_ms()
        if restart_ms is None:
            draining = f"draining {self.queue.depth} queued events"
            self.notifier.stopping(f"stopping on {reason}: {draining}")
        else:  # the same process serves again: a reload, to systemd (then READY=1)
            self.notifier.reloading()
        log.info("shutdown.begin", reason=reason, queued=self.queue.depth, restart=self.restarting)
        for channel in self.channels:
            channel.stop_accepting()
        if self.load is not None:  # hooks were loaded: tell them
            context = {**self.bases(), "reason": reason, "restartExpectedMs": restart_ms}
            actions = ("shutdown",) if restart_ms is None else ("shutdown", "pre-restart")
            for action in actions:  # OpenClaw's order: pre-restart after shutdown
                key = f"gateway:{action}"
                event = create_hook_event("gateway", action, key, dict(context))
                with anyio.move_on_after(gw.shutdown_timeout_ms / 1000) as scope:
                    await self.dispatcher.dispatch(event, queued=False)
                if scope.cancelled_caught:
                    log.warning(
                        "shutdown.hooks_timeout",
                        event_key=key,
                        timeout_ms=gw.shutdown_timeout_ms,
                        fix=f"make {key} handlers faster or raise gateway.shutdownTimeoutMs",
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
        if self.restarting:
            summary += " - restarting"
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
            uptime_s=round(time.monotonic() - self.started_at, 3),
        )


__all__ = ["Gateway"]
