"""What channels and hooks may ask of the running gateway, and nothing more.

:class:`GatewayFacade` is the :class:`~gatewayd.channels.ChannelHost` every channel talks to (and
the metrics endpoint's :class:`~gatewayd.metrics.MetricsSource`): a message, a trigger, a
session's outbound messages, one hook run alone, the journal's ``events`` request, a reload, and
the ``status`` and ``hooks`` documents. A message and a waited trigger both answer with one
:class:`~gatewayd.replies.Reply`; ``trace=True`` adds the trace of every event they caused,
through the same path as an untraced request (the dispatch records each handler's outcome).

:class:`HookGateway` is what hooks get (``ctx.gateway``, ``context["gateway"]`` in
``gateway:startup``): :class:`~gatewayd.hooks.schema.GatewayHandle`'s ``deliver`` and ``send``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, NamedTuple

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from gatewayd import __version__
from gatewayd.commands import Inbound, parse_command
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.records import agents_summary, hooks_listing
from gatewayd.hooks.registry import cause_chain, requested
from gatewayd.hooks.results import reply_lines
from gatewayd.hooks.schema import DIRECTIONS, spec_for
from gatewayd.hooks.tester import test_hook
from gatewayd.hooks.trace import trace_entry
from gatewayd.journal.base import Commit
from gatewayd.parts import GatewayParts
from gatewayd.redact import redact
from gatewayd.reloader import Reloader
from gatewayd.replies import (
    HooksReply,
    HooksSummary,
    LoopLag,
    ReloadOutcome,
    Reply,
    StatusReply,
    statuses,
    summary_of,
)
from gatewayd.tickets import QueueClosed, Ticket

log = structlog.get_logger("gatewayd")

NOTHING_LOADED: HooksSummary = {
    "discovered": 0,
    "eligible": 0,
    "registered": 0,
    "skipped": [],
    "failed": [],
    "statuses": {},
    "warnings": 0,
    "notReady": [],
}
"""``status.hooks`` before the first load finished."""


class TriggerDispatch(NamedTuple):
    """A waited trigger in the queue (:meth:`GatewayFacade.submit_trigger`)."""

    ticket: Ticket
    reply: Callable[[], Awaitable[Reply]]
    """Waits for the dispatch: its lines, ``result``, ``timed_out``, ``trace``."""

    def release(self) -> None:
        """The reply is out, or never will be: the event's background handlers may run."""
        self.ticket.release()


class GatewayFacade:
    """The gateway as its channels see it; see the module docstring."""

    def __init__(self, gateway: GatewayParts, reloader: Reloader) -> None:
        self._gateway = gateway
        self._reloader = reloader

    # -- requests ---------------------------------------------------------------------------

    async def message(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str = "gateway",
        channel: str = "internal",
        wait: bool = True,
        trace: bool = False,
        depth: int = 0,
    ) -> Reply:
        """Handle an inbound message; the :class:`Reply` (lines, command, why it was blocked;
        with ``trace``, the trace of every event it caused). ``depth``: how many events caused
        it in a hook's process (a request's ``depth``); its events count from there toward
        ``hooks.maxDepth``.

        With ``wait=False`` the message is handled in the background and the reply has no
        lines: the form to use from inside a hook handler (waiting there on the same session
        would wait on itself). Raises ``QueueClosed`` once the gateway is stopping, and
        :class:`~gatewayd.hooks.registry.HookLoopError` when a handler's delivery would exceed
        ``hooks.maxDepth`` or (``wait=True``) wait on the session its handler runs for.
        """
        gateway = self._gateway
        if gateway.queue.closed or gateway.state == "stopping":
            raise QueueClosed("the gateway is shutting down and takes no new messages")
        max_depth = gateway.config.settings.hooks.max_depth
        chain = cause_chain(max_depth, session_key if wait else None, depth)
        token = requested.set(chain) if depth else None  # the message's events carry it
        try:
            msg = Inbound(session_key, text, sender_id, channel, trace)
            if not wait:
                gateway.start_soon(self._message_in_background, msg)
                command = parse_command(text)
                return Reply([], command.name if command else None)
            reply = await gateway.router.handle(msg)
        finally:
            if token is not None:
                requested.reset(token)
        if trace:
            reply.trace = self._trace(reply.traced)
        return reply

    async def _message_in_background(self, msg: Inbound) -> None:
        try:
            await self._gateway.router.handle(msg)
        except QueueClosed as exc:
            log.warning("message.undelivered", session_key=msg.session_key, reason=str(exc))
        except Exception as exc:
            log.exception("message.failed", session_key=msg.session_key, error=str(exc))

    async def trigger(
        self,
        key: str,
        session_key: str,
        context: dict[str, Any],
        *,
        wait: bool = True,
        trace: bool = False,
        depth: int = 0,
    ) -> Reply | None:
        """Post ``type:action`` for ``session_key``; ``None`` once queued when not ``wait``.
        ``depth``: as :meth:`message`'s.

        Waited: the handlers' lines, and their merged ``result`` when there is one. A decision
        event (one with results, e.g. ``agent:before_tool_call``) always has a ``result`` and
        waits at most ``hooks.decisionTimeoutMs``, after which the reply is the result so far,
        ``timed_out``. ``trace`` (needs ``wait``) adds the event's trace.
        """
        if not wait:
            commit = await self.enter_trigger(key, session_key, context, depth=depth)
            if commit is not None:
                await commit.wait()
            return None
        dispatch = await self.submit_trigger(key, session_key, context, trace=trace, depth=depth)
        try:
            return await dispatch.reply()
        finally:
            dispatch.release()

    async def enter_trigger(
        self, key: str, session_key: str, context: dict[str, Any], *, depth: int = 0
    ) -> Commit | None:
        """:meth:`trigger` without ``wait``, up to the commit: returns once the event is in the
        queue (in the order entered), with the commit to await before it counts as accepted
        (None: it is already)."""
        event = self._posted(key, session_key, context, wait=False, depth=depth)
        return await self._gateway.queue.enter(event)

    async def submit_trigger(
        self,
        key: str,
        session_key: str,
        context: dict[str, Any],
        *,
        trace: bool = False,
        depth: int = 0,
    ) -> TriggerDispatch:
        """:meth:`trigger` with ``wait``, up to the dispatch: returns once the event is in the
        queue (in the order submitted); ``reply()`` waits for the dispatch, ``release()`` once
        the reply is out."""
        event = self._posted(key, session_key, context, wait=True, depth=depth)
        event.trace = trace
        ticket = await self._gateway.queue.submit(event)
        return TriggerDispatch(ticket, partial(self._dispatched, key, session_key, ticket))

    def _posted(
        self, key: str, session_key: str, context: dict[str, Any], *, wait: bool, depth: int
    ) -> HookEvent:
        gateway = self._gateway
        max_depth = gateway.config.settings.hooks.max_depth
        chain = cause_chain(max_depth, session_key if wait else None, depth)
        etype, _, action = key.partition(":")
        # The gateway's own keys (cfg, workspaceDir, a message's direction) win over the
        # client's: a trigger cannot point a hook at another workspace.
        merged = {**context, **gateway.bases(session_key)}
        if (direction := DIRECTIONS.get(key)) is not None:
            merged["direction"] = direction
        event = create_hook_event(etype, action, session_key, merged)
        event.chain = chain
        return event

    async def _dispatched(self, key: str, session_key: str, ticket: Ticket) -> Reply:
        reply = await self._trigger_reply(key, session_key, ticket)
        event = ticket.event
        if event.trace and ticket.report is None and reply.timed_out:  # its handlers still run
            ms = self._gateway.config.settings.hooks.decision_timeout_ms
            reason = f"still running after hooks.decisionTimeoutMs ({ms} ms)"
            reply.trace = [{"event": event.key, "handlers": [], "reason": reason}]
        elif event.trace:
            reply.trace = self._trace([(event, ticket.report)])
        return reply

    async def _trigger_reply(self, key: str, session_key: str, ticket: Ticket) -> Reply:
        event = ticket.event
        spec = spec_for(key)
        if spec is None or not spec.results:
            await ticket.wait()
            return Reply(reply_lines(event), result=dict(event.result) if event.result else None)
        timeout_ms = self._gateway.config.settings.hooks.decision_timeout_ms
        with anyio.move_on_after(timeout_ms / 1000) as scope:
            await ticket.wait()
        reply = Reply(reply_lines(event), result=dict(event.result or {}))
        if scope.cancelled_caught:
            reply.timed_out = True
            log.warning(
                "decision.timed_out",
                event_key=key,
                session_key=session_key,
                timeout_ms=timeout_ms,
                fix="make the slow hook faster or raise hooks.decisionTimeoutMs",
            )
        return reply

    def _trace(self, traced: list[tuple[HookEvent, DispatchReport | None]]) -> list[dict[str, Any]]:
        records, agents = self._gateway.records(), self._gateway.config.agents
        return [
            trace_entry(event, report.outcomes if report is not None else None, records, agents)
            for event, report in traced
        ]

    async def send(self, session_key: str, text: str, *, channel: str = "hook") -> bool:
        """Send ``text`` to ``session_key`` now, outside any request (what ``ctx.gateway.send``
        does): through ``message:sending``, to the clients subscribed to the session (the
        ``subscribe`` op), into its transcript, then ``message:sent``. True when delivered."""
        gateway = self._gateway
        if gateway.queue.closed:
            raise QueueClosed("the gateway is shutting down and sends nothing more")
        cause_chain(gateway.config.settings.hooks.max_depth, None)

        def publish(content: str) -> str | None:
            return gateway.outbox.publish(
                session_key,
                {"event": "message", "sessionKey": session_key, "content": content},
            )

        delivered = await gateway.router.send_out(
            session_key,
            [text],
            to=session_key,
            channel=channel,
            entry=gateway.sessions.get(session_key),
            deliver=publish,
        )
        return bool(delivered)

    def subscribe(
        self, session_key: str
    ) -> AbstractContextManager[MemoryObjectReceiveStream[dict[str, Any]]]:
        """The ``subscribe`` op: ``session_key``'s outbound messages until the block ends."""
        return self._gateway.outbox.subscribe(session_key)

    async def test_hook(
        self, hook: str, event: str | None, context: dict[str, Any], session_key: str
    ) -> dict[str, Any]:
        """The ``test`` op: :func:`gatewayd.hooks.tester.test_hook` in this daemon (its
        environment, config and counters); ``LookupError`` for a hook it does not have."""
        gateway = self._gateway
        return await test_hook(
            gateway.registry,
            gateway.records(),
            hook,
            event,
            context,
            gateway.bases(session_key),
            session_key,
        )

    async def bootstrap(self, session_key: str) -> list[Any]:
        """Fire ``agent:bootstrap`` and return the ``bootstrapFiles`` its handlers left."""
        return await self._gateway.router.bootstrap(session_key)

    async def events(self, request: dict[str, Any]) -> dict[str, Any]:
        """The ``events`` op: the journal's list, show, retry and purge (``gatewayd events``)."""
        return await self._gateway.journal.query(request)

    async def reload(self, trigger: str) -> ReloadOutcome:
        """Re-read the config and reload the hooks (:meth:`gatewayd.reloader.Reloader.reload`)."""
        return await self._reloader.reload(trigger)

    # -- documents ----------------------------------------------------------------------------

    def hooks(self) -> HooksReply:
        """The ``hooks`` op: the last load's hook records, each with its counters under
        ``stats`` (``null`` for a hook not registered since the start), and ``codeHooks``:
        handlers registered in code."""
        gateway = self._gateway
        if gateway.load is None:
            paths = gateway.config.paths
            listing: dict[str, Any] = {
                "stateDir": str(paths.state),
                "workspaceDir": str(paths.workspace),
                "agents": gateway.config.agents.to_json(),
                "hooks": [],
            }
        else:
            listing = hooks_listing(gateway.config.load_spec(), gateway.load)
        stats = gateway.registry.stats()
        for record in listing["hooks"]:
            counters = stats.pop(record["name"], None) if record["status"] == "ready" else None
            record["stats"] = counters.to_json() if counters is not None else None
        code = {h.hook for handlers in gateway.registry.code.by_key.values() for h in handlers}
        return {
            "view": "daemon",
            "stateDir": listing["stateDir"],
            "workspaceDir": listing["workspaceDir"],
            "agents": listing["agents"],
            "hooks": listing["hooks"],
            "codeHooks": [
                {"name": name, "stats": s.to_json()} for name, s in stats.items() if name in code
            ],
        }

    def status(self) -> StatusReply:
        """The ``status`` op's document (docs/design.md section 3); secret-looking values
        redacted (:mod:`gatewayd.redact`)."""
        gateway = self._gateway
        load, lag = gateway.load, gateway.lag
        loop_lag: LoopLag | None = None
        if lag is not None:
            loop_lag = {
                "warn_ms": round(lag.warn_s * 1000),
                "stalls": lag.stalls,
                "max_lag_ms": round(lag.max_lag_s * 1000),
            }
        status: StatusReply = {
            "pid": os.getpid(),
            "version": __version__,
            "state": gateway.state,
            "uptime_s": round(time.monotonic() - gateway.started_at, 3),
            "startup_fired": gateway.startup_fired,
            "loop": gateway.loop_name,
            "loop_lag": loop_lag,
            "config": gateway.config.source_label,
            "channels": [channel.describe() for channel in gateway.channels],
            "hooks": summary_of(load) if load is not None else NOTHING_LOADED,
            "agents": agents_summary(gateway.config.load_spec(), gateway.records()),
            "queue": gateway.dispatcher.stats(),
            "threads": gateway.registry.hook_threads().stats(),
            "sessions": len(gateway.sessions),
            "reloads": self._reloader.count,
            "last_reload": self._reloader.last,
            "watch": self._reloader.watch_status(),
        }
        return redact(status)

    def metrics_snapshot(self) -> dict[str, Any]:
        """What the metrics endpoint reads (:class:`gatewayd.metrics.MetricsSource`)."""
        gateway = self._gateway
        return {
            "events": dict(gateway.registry.event_counts),
            "queue": gateway.dispatcher.stats(),
            "threads": gateway.registry.hook_threads().stats(),
            "hooks": gateway.registry.stats(),
            "reloads": dict(self._reloader.results),
            "loop_stalls": gateway.lag.stalls if gateway.lag is not None else 0,
            "statuses": statuses(gateway.records()),
            "journal": gateway.journal.stats(),
        }


class HookGateway:
    """What hooks get of the running gateway (``ctx.gateway``, and ``context["gateway"]`` in
    ``gateway:startup``): the :class:`~gatewayd.hooks.schema.GatewayHandle` methods, nothing
    more. A command hook sees its ``repr``."""

    __slots__ = ("_facade", "_gateway")

    def __init__(self, gateway: GatewayParts, facade: GatewayFacade) -> None:
        self._gateway = gateway
        self._facade = facade

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
        """Handle an inbound message as if a channel had received it; ``(reply lines, command
        name or None)`` (:meth:`GatewayFacade.message`). From a handler pass ``wait=False``."""
        reply = await self._facade.message(
            session_key, text, sender_id=sender_id, channel=channel, wait=wait
        )
        return reply.messages, reply.command

    async def send(self, session_key: str, text: str, *, channel: str = "hook") -> bool:
        """See :meth:`GatewayFacade.send`."""
        return await self._facade.send(session_key, text, channel=channel)


__all__ = ["NOTHING_LOADED", "GatewayFacade", "HookGateway"]
