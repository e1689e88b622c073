"""The asynchronous client of gatewayd's control socket, on anyio (asyncio, with uvloop or without).

    from gatewayd.client import Client

    async with Client() as gw:  # the socket by the command line's rules
        reply = await gw.message("agent:main:main", "hello", sender_id="u1", channel="chat")
        decision = await gw.decide(
            "agent:before_tool_call", "agent:main:main", {"toolName": "exec", "params": {}}
        )
        if decision["result"].get("block"):
            ...  # a hook said no: decision["result"].get("reason") says why
        await gw.trigger("agent:end", "agent:main:main", {"success": True}, wait=False)

What it does for a program: the handshake (``hello``, checked: a daemon that serves no protocol
this client speaks is :class:`~gatewayd.client.errors.UnsupportedProtocol`, saying what to
upgrade); many requests in flight on one connection, each reply matched to its request by id;
at most ``max_in_flight`` of them (the daemon's ``maxInFlight`` if lower), a call past it waits
for a slot (backpressure); a bound on every call (``quick_timeout`` for the ops that never wait
on hooks, ``wait_timeout`` for those that do) after which it raises
:class:`~gatewayd.client.errors.RequestTimeout`; and, when the daemon goes away, a new
connection on the next call with a growing pause between attempts (the calls in flight then
raise :class:`~gatewayd.client.errors.ConnectionLost`: they may or may not have run, so they
are not sent again). A refusal raises the daemon's error as its own class
(:mod:`gatewayd.client.errors`). For a tighter bound on one call, use a cancel scope::

    with anyio.fail_after(2):
        status = await gw.status()
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import anyio
import anyio.abc

from gatewayd.client.connection import Connection
from gatewayd.client.discovery import socket_path
from gatewayd.client.errors import CannotConnect, DaemonError, GatewayError, RequestTimeout
from gatewayd.client.subscription import BACKOFF_FIRST_S, BACKOFF_MAX_S, Subscription
from gatewayd.client.types import (
    BootstrapFile,
    Decision,
    EventsReply,
    Hello,
    HooksReply,
    InboundDecision,
    MessageReply,
    OutboundDecision,
    PersistDecision,
    Queued,
    ReloadReply,
    StartDecision,
    TestReply,
    ToolCallDecision,
    TriggerReply,
)
from gatewayd.client.wire import CONNECT_TIMEOUT_S, check_hello, hello_fields, hello_refused

if TYPE_CHECKING:
    from gatewayd.hooks.schema import (
        AgentStartContext,
        MessageReceivedContext,
        MessageSendingContext,
        ToolCallContext,
        ToolResultPersistContext,
    )

MAX_IN_FLIGHT = 256
"""Requests one client keeps in flight at most, unless the daemon allows fewer."""
QUICK_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 600.0


class Client:
    """A client of one gatewayd daemon; use it as ``async with Client(...) as gw:``.

    ``socket`` and ``config``: as ``--socket`` and ``--config`` (the socket is found by the
    command line's rules, :func:`gatewayd.client.socket_path`). ``reconnect=False``: a lost
    connection stays lost (its calls raise :class:`~gatewayd.client.errors.ConnectionLost`).
    ``hello=False`` skips the handshake (:attr:`info` stays None).
    """

    def __init__(
        self,
        socket: str | None = None,
        *,
        config: str | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        quick_timeout: float = QUICK_TIMEOUT_S,
        wait_timeout: float = WAIT_TIMEOUT_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        reconnect: bool = True,
        hello: bool = True,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._socket, self._config, self._max_in_flight = socket, config, max_in_flight
        self._quick_s, self._wait_s, self._connect_s = quick_timeout, wait_timeout, connect_timeout
        self._reconnect, self._hello = reconnect, hello
        self.path = ""
        """The control socket's path (set on entering)."""
        self.info: Hello | None = None
        """What the daemon said in the handshake (its version, ops, events, limits)."""
        self._conn: Connection | None = None
        self._down: CannotConnect | None = None
        """Why the last attempt to connect again failed, while no connection is open."""
        self._limiter = anyio.CapacityLimiter(max_in_flight)
        self._connecting = anyio.Lock()
        self._exit = AsyncExitStack()
        self._tasks: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Client:
        self.path = socket_path(self._socket, self._config)
        self._tasks = await self._exit.enter_async_context(anyio.create_task_group())
        try:
            await self._connect()
        except BaseException:
            await self._exit.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            await self._conn.aclose()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()  # the readers: what the body raised goes on as it is
        await self._exit.aclose()

    # -- connecting ---------------------------------------------------------------------------

    async def _connection(self) -> Connection:
        """The open connection, or a new one (with a growing pause between attempts) when the
        daemon went away and came back; bounded by the calling op's timeout."""
        conn = self._conn
        if conn is not None and conn.ended is None:
            return conn
        async with self._connecting:
            conn = self._conn
            if conn is not None and conn.ended is None:
                return conn
            if conn is not None and not self._reconnect:
                assert conn.ended is not None
                raise conn.ended
            delay = BACKOFF_FIRST_S
            while True:
                try:
                    conn = await self._connect()
                except CannotConnect as exc:
                    self._down = exc
                    await anyio.sleep(delay)
                    delay = min(2 * delay, BACKOFF_MAX_S)
                else:
                    self._down = None
                    return conn

    async def _connect(self) -> Connection:
        conn = await Connection.open(self.path, self._connect_s)
        assert self._tasks is not None
        self._tasks.start_soon(conn.read_replies)
        try:
            if self._hello:
                try:
                    fields = await conn.request("hello", hello_fields())
                except DaemonError as exc:
                    raise hello_refused(exc, self.path) from None
                self.info = cast(Hello, check_hello(fields, self.path))
                allowed = self.info["limits"]["maxInFlight"]
                self._limiter.total_tokens = max(1, min(self._max_in_flight, allowed))
        except BaseException:
            await conn.aclose()
            raise
        self._conn = conn
        return conn

    # -- requests ---------------------------------------------------------------------------

    async def call(
        self, op: str, fields: Mapping[str, Any] | None = None, *, waits: bool = False
    ) -> dict[str, Any]:
        """Send ``op`` with ``fields`` and return its reply's fields (without ``id`` and
        ``ok``): what every method below does. ``waits``: the op may wait on hooks (bounded by
        ``wait_timeout``, else ``quick_timeout``)."""
        bound = self._wait_s if waits else self._quick_s
        token = object()
        with anyio.move_on_after(bound):
            await self._limiter.acquire_on_behalf_of(token)
            try:
                conn = await self._connection()
                return await conn.request(op, dict(fields or {}))
            finally:
                self._limiter.release_on_behalf_of(token)
        if self._down is not None:  # still no daemon to connect to: say that
            raise type(self._down)(f"{self._down.message} (tried for {bound:g} s)")
        raise RequestTimeout(f"no reply to {op} within {bound:g} s ({self.path})")

    async def hello(self) -> Hello:
        """The handshake again: what the daemon serves now (also kept in :attr:`info`)."""
        try:
            fields = await self.call("hello", hello_fields())
        except DaemonError as exc:
            raise hello_refused(exc, self.path) from None
        self.info = cast(Hello, check_hello(fields, self.path))
        return self.info

    async def ping(self) -> None:
        """Returns once the daemon answered."""
        await self.call("ping")

    async def message(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str | None = None,
        channel: str | None = None,
        trace: bool = False,
    ) -> MessageReply:
        """An inbound message, as a channel received it: the reply (``messages``, ``command``;
        ``blocked`` and ``reason`` when a ``message:received`` hook blocked it; with ``trace``
        each handler's outcome)."""
        fields: dict[str, Any] = {"sessionKey": session_key, "text": text}
        if sender_id is not None:
            fields["senderId"] = sender_id
        if channel is not None:
            fields["channel"] = channel
        if trace:
            fields["trace"] = True
        return cast(MessageReply, await self.call("message", fields, waits=True))

    @overload
    async def trigger(
        self,
        event: str,
        session_key: str,
        context: Mapping[str, Any] | None = None,
        *,
        wait: Literal[True] = True,
        trace: bool = False,
    ) -> TriggerReply: ...

    @overload
    async def trigger(
        self,
        event: str,
        session_key: str,
        context: Mapping[str, Any] | None = None,
        *,
        wait: Literal[False],
    ) -> Queued: ...

    async def trigger(
        self,
        event: str,
        session_key: str,
        context: Mapping[str, Any] | None = None,
        *,
        wait: bool = True,
        trace: bool = False,
    ) -> TriggerReply | Queued:
        """Post ``event`` (``type:action``, one of :attr:`info` ``["events"]`` or any
        ``command:<name>``). Waited: the handlers' lines and merged ``result``. With
        ``wait=False``: returns once the event is durable and queued (many such calls from
        one connection share the journal's commits)."""
        fields: dict[str, Any] = {"event": event, "sessionKey": session_key}
        if context:
            fields["context"] = dict(context)
        if not wait:
            fields["wait"] = False
        if trace:
            fields["trace"] = True
        reply = await self.call("trigger", fields, waits=wait)
        return cast(TriggerReply, reply) if wait else cast(Queued, reply)

    @overload
    async def decide(
        self,
        event: Literal["message:received"],
        session_key: str,
        context: MessageReceivedContext,
        *,
        trace: bool = False,
    ) -> Decision[InboundDecision]: ...

    @overload
    async def decide(
        self,
        event: Literal["message:sending"],
        session_key: str,
        context: MessageSendingContext,
        *,
        trace: bool = False,
    ) -> Decision[OutboundDecision]: ...

    @overload
    async def decide(
        self,
        event: Literal["agent:before_start"],
        session_key: str,
        context: AgentStartContext,
        *,
        trace: bool = False,
    ) -> Decision[StartDecision]: ...

    @overload
    async def decide(
        self,
        event: Literal["agent:before_tool_call"],
        session_key: str,
        context: ToolCallContext,
        *,
        trace: bool = False,
    ) -> Decision[ToolCallDecision]: ...

    @overload
    async def decide(
        self,
        event: Literal["agent:tool_result_persist"],
        session_key: str,
        context: ToolResultPersistContext,
        *,
        trace: bool = False,
    ) -> Decision[PersistDecision]: ...

    @overload
    async def decide(
        self, event: str, session_key: str, context: Mapping[str, Any], *, trace: bool = False
    ) -> Decision[dict[str, Any]]: ...

    async def decide(
        self, event: str, session_key: str, context: Mapping[str, Any], *, trace: bool = False
    ) -> Decision[Any]:
        """Ask the hooks of a decision event (block, cancel, rewrite) and get their merged
        ``result``, typed for the events of :data:`~gatewayd.client.types.DecisionEvent` (a
        ``dict`` for the others ``hello`` lists); ``timedOut`` when ``hooks.decisionTimeoutMs``
        passed first. The runtime obeys it: a ``block`` or ``cancel`` stops the step, a returned
        ``content``/``params``/``message`` replaces the one it was about to use."""
        fields: dict[str, Any] = {"event": event, "sessionKey": session_key}
        fields["context"] = dict(context)
        if trace:
            fields["trace"] = True
        reply = await self.call("trigger", fields, waits=True)
        reply.setdefault("result", {})
        return cast(Decision[Any], reply)

    def subscribe(self, session_key: str) -> Subscription:
        """What hooks send ``session_key`` later (``ctx.gateway.send``), on a connection of
        its own: ``async with gw.subscribe(key) as messages: async for m in messages:``."""
        return Subscription(
            self.path,
            session_key,
            connect_s=self._connect_s,
            reconnect=self._reconnect,
            hello=self._hello,
        )

    async def status(self) -> dict[str, Any]:
        """The daemon's ``status`` document (docs/design.md section 3)."""
        status: dict[str, Any] = (await self.call("status"))["status"]
        return status

    async def hooks(self) -> HooksReply:
        """Every hook the daemon found, with its status and counters."""
        return cast(HooksReply, await self.call("hooks"))

    async def reload(self) -> ReloadReply:
        """Reload config and hooks; a refused config raises
        :class:`~gatewayd.client.errors.ReloadRefused` (the running one stays)."""
        return cast(ReloadReply, await self.call("reload", waits=True))

    async def events(
        self,
        action: Literal["list", "show", "retry", "purge"],
        *,
        state: Literal["pending", "done", "dead", "all"] | None = None,
        session_key: str | None = None,
        limit: int | None = None,
        event_id: str | None = None,
        ids: list[str] | None = None,
        all: bool = False,
    ) -> EventsReply:
        """The journal: ``list`` (``state``, ``session_key``, ``limit``), ``show``
        (``event_id``), ``retry`` or ``purge`` (``ids``, or ``all=True``)."""
        fields: dict[str, Any] = {"action": action}
        for name, value in (
            ("state", state),
            ("sessionKey", session_key),
            ("limit", limit),
            ("eventId", event_id),
            ("ids", ids),
        ):
            if value is not None:
                fields[name] = value
        if all:
            fields["all"] = True
        return cast(EventsReply, await self.call("events", fields))

    async def test(
        self,
        hook: str,
        *,
        event: str | None = None,
        context: Mapping[str, Any] | None = None,
        session_key: str | None = None,
    ) -> TestReply:
        """Run one hook alone against a sample event (``gatewayd hooks test``); ``passed``."""
        fields: dict[str, Any] = {"hook": hook}
        if event is not None:
            fields["event"] = event
        if context:
            fields["context"] = dict(context)
        if session_key is not None:
            fields["sessionKey"] = session_key
        return cast(TestReply, await self.call("test", fields, waits=True))

    async def bootstrap(self, session_key: str) -> list[BootstrapFile]:
        """The bootstrap files ``session_key`` gets after every ``agent:bootstrap`` hook."""
        reply = await self.call("bootstrap", {"sessionKey": session_key}, waits=True)
        return cast(list[BootstrapFile], reply["bootstrapFiles"])


__all__ = ["Client", "GatewayError"]
