"""The inbound-message path: which events one message causes, in which order, and its reply.

For every message :class:`CommandRouter` posts, in this order, into the trigger queue:

1. ``message:received`` (``from``, ``content``, ``channelId``, ``sessionKey``, ``timestamp``,
   and OpenClaw's ``agentId``, ``conversationId``, ``messageId``, ``metadata``);
2. for ``/new`` and ``/reset``: ``session:end`` (if a session existed) -> ``command:<name>`` ->
   a new session -> ``session:start`` -> ``agent:bootstrap``;
3. otherwise: ``session:start`` -> ``agent:bootstrap`` if the session key has no session yet,
   then ``command:<name>`` when the text is a ``/name`` command (``/stop`` included).

A hook on ``message:received`` may block the message (nothing else is posted; the reply is empty
and carries the reason) or rewrite its text before anything else sees it. The messages handlers
push for those events, in dispatch order, are the reply. Each reply line then goes through
``message:sending`` (rewrite or cancel), and each line fires ``message:sent`` (``success: false``
with the reason when cancelled, with ``error`` when delivery failed). Message timestamps are
Unix epoch milliseconds, as OpenClaw's message hooks read them; ``agentId`` is the ``<id>`` of an
``agent:<id>:...`` session key (else the default agent's), ``conversationId`` the session key,
``messageId`` a fresh id per message. The message and the lines delivered are appended to the
transcript of the session current after the message. A message's events are posted as one
uninterrupted run per session (a per-session lock covers posting, not dispatch), so two
messages racing on one session never interleave their events.

Command context: ``sessionEntry``, ``previousSessionEntry``, ``sessionId``, ``sessionFile``,
``commandSource``, ``senderId``, ``args``, ``workspaceDir``, ``cfg``. For ``/new`` and ``/reset``
the session fields describe the session being ended (``None`` when there was none), and
``previousSessionMemory`` holds its last messages (``session_memory.py``); for other
commands, the current session (and ``previousSessionEntry`` is ``None``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.engine import dispatching
from gatewayd.hooks.events import MAX_ACTION, HookEvent, create_hook_event
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.registry import requested
from gatewayd.hooks.results import log_text, reply_lines
from gatewayd.hooks.schema import DIRECTIONS
from gatewayd.journal.base import JournalError
from gatewayd.replies import Reply
from gatewayd.session_memory import previous_session_memory
from gatewayd.sessions import SessionEntry, SessionManager, read_bootstrap_files
from gatewayd.tickets import wake_first
from gatewayd.transcript import Turn
from gatewayd.triggers import QueueClosed, Ticket, TriggerQueue

log = structlog.get_logger("gatewayd.commands")

_COMMAND_RE = re.compile(rf"/(?P<name>[a-z0-9_-]{{1,{MAX_ACTION}}})(?:\s+(?P<args>.*))?", re.DOTALL)
"""``/name args``; a longer name is no command (an event key is bounded: ``MAX_ACTION``)."""
RESET_COMMANDS = frozenset({"new", "reset"})
RECEIVED, SENDING, SENT = (DIRECTIONS[f"message:{a}"] for a in ("received", "sending", "sent"))
"""The ``direction`` of each message event, as the schema declares it."""


@dataclass(frozen=True, slots=True)
class Command:
    """A ``/name args`` message."""

    name: str
    args: str


def parse_command(text: str) -> Command | None:
    """``/name rest`` (name ``[a-z0-9_-]+``) as a :class:`Command`; anything else is None."""
    match = _COMMAND_RE.fullmatch(text.strip())
    if match is None:
        return None
    return Command(match["name"], (match["args"] or "").strip())


_MESSAGE_ID_PREFIX = os.urandom(8).hex()
_message_numbers = itertools.count(1)


def _new_message_id_prefix() -> None:
    """A forked child is another process: it draws its own prefix (else parent and child, or
    two children of one parent, would hand out the same ids)."""
    global _MESSAGE_ID_PREFIX, _message_numbers
    _MESSAGE_ID_PREFIX = os.urandom(8).hex()
    _message_numbers = itertools.count(1)


os.register_at_fork(after_in_child=_new_message_id_prefix)


def message_id() -> str:
    """A fresh ``messageId``: 32 hex digits, a random 64-bit prefix drawn once per process and
    a 64-bit counter, so unique within the run and (by the prefix) across runs. Not
    ``uuid.uuid4().hex`` (same length and alphabet): building a ``UUID`` a message was 3% of
    the loop's GIL samples of a daemon answering ``message`` ops (py-spy)."""
    return f"{_MESSAGE_ID_PREFIX}{next(_message_numbers):016x}"


def epoch_ms() -> int:
    """Now as Unix epoch milliseconds (OpenClaw's message ``timestamp``)."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class Inbound:
    """One inbound message from a channel. Not changed once made; not ``frozen`` (nor
    :class:`Reply`): a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, 1.14 us against 0.29 us here (timeit), and every ``message`` makes
    one of each."""

    session_key: str
    text: str
    sender_id: str
    channel: str
    trace: bool = False
    """Trace the events this message causes (``Reply.traced``)."""


class EventBase(Protocol):
    """The gateway's context for a session's events (:class:`gatewayd.eventbase.EventBases`):
    ``cfg``, ``agentId`` and that agent's ``workspaceDir``."""

    def __call__(self, session_key: str | None = None, /) -> dict[str, Any]: ...


def _entry_json(entry: SessionEntry | None) -> dict[str, Any] | None:
    return entry.to_json() if entry is not None else None


def received_context(msg: Inbound) -> dict[str, Any]:
    """``message:received``'s context for ``msg``."""
    return {
        "from": msg.sender_id,
        "content": msg.text,
        "channelId": msg.channel,
        "sessionKey": msg.session_key,
        "timestamp": epoch_ms(),
        "conversationId": msg.session_key,
        "messageId": message_id(),
        "metadata": {
            "provider": msg.channel,
            "surface": msg.channel,
            "senderId": msg.sender_id,
        },
        "direction": RECEIVED,
    }


def session_context(entry: SessionEntry, reason: str) -> dict[str, Any]:
    """``session:start``'s and ``session:end``'s context for ``entry``."""
    return {
        "sessionEntry": entry.to_json(),
        "sessionId": entry.session_id,
        "sessionFile": str(entry.session_file),
        "sessionKey": entry.session_key,
        "reason": reason,
    }


def command_context(
    msg: Inbound, command: Command, entry: SessionEntry | None, previous: SessionEntry | None
) -> dict[str, Any]:
    """A ``command:<name>`` event's context: the session it leaves (``entry``) and, for a reset,
    the one it ended (``previous``)."""
    return {
        "sessionEntry": _entry_json(entry),
        "previousSessionEntry": _entry_json(previous),
        "sessionId": entry.session_id if entry else None,
        "sessionFile": str(entry.session_file) if entry else None,
        "commandSource": msg.channel,
        "senderId": msg.sender_id,
        "args": command.args,
    }


class _SessionLock:
    """A session's posting lock and how many messages hold or wait for it; ``async with`` it
    through :meth:`SessionLocks.lock`; it forgets itself when its last user leaves.

    First come, first served: a free lock is taken without a trip through the event loop (every
    message takes its session's lock, almost always free); a waiter awaits a bare future of the
    loop and is handed the lock by the holder leaving. Not ``anyio.Lock``: building one asks
    sniffio which library runs, and its ``acquire`` and ``release`` look up the current task
    (7% and 5% of the loop's GIL samples, py-spy); with this lock, daemon CPU per message,
    memory journal, 106 -> 92 us (``message`` ops under load, median of 6 interleaved rounds).
    A plain async context manager, not ``@asynccontextmanager`` (~5% of the loop's CPU)."""

    __slots__ = ("held", "key", "table", "users", "waiters")

    def __init__(self, table: dict[str, _SessionLock], key: str) -> None:
        self.held = False
        self.waiters: deque[asyncio.Future[None]] | None = None
        self.users = 0
        self.table = table
        self.key = key

    async def __aenter__(self) -> None:
        self.users += 1
        if not self.held:
            self.held = True
            return
        if self.waiters is None:
            self.waiters = deque()
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._hand_off()  # handed the lock just as it was cancelled: pass it on
            else:
                self.waiters.remove(waiter)
            self._leave()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._hand_off()
        self._leave()

    def _hand_off(self) -> None:
        """The holder leaves: the lock goes to the first waiter still waiting, else is free."""
        if not (self.waiters and wake_first(self.waiters)):
            self.held = False

    def _leave(self) -> None:
        self.users -= 1
        if not self.users:
            del self.table[self.key]


class SessionLocks:
    """Each session's posting lock, kept only while a message holds or waits for it."""

    __slots__ = ("locks",)

    def __init__(self) -> None:
        self.locks: dict[str, _SessionLock] = {}

    def lock(self, session_key: str) -> _SessionLock:
        """The session's lock (``async with`` it), made on first use."""
        held = self.locks.get(session_key)
        if held is None:
            held = self.locks[session_key] = _SessionLock(self.locks, session_key)
        return held


class CommandRouter:
    """Turns inbound messages into events on the queue; see the module docstring."""

    def __init__(
        self,
        queue: TriggerQueue,
        dispatcher: Dispatcher,
        sessions: SessionManager,
        base: EventBase,
        *,
        record_blocked: Callable[[], bool] = lambda: False,
    ) -> None:
        self.queue = queue
        self.dispatcher = dispatcher
        self.sessions = sessions
        self.base = base
        self.record_blocked = record_blocked
        """``hooks.recordBlocked``: whether a blocked message still goes to the transcript."""
        self._locks = SessionLocks()

    def _event(
        self, type_: str, action: str, session_key: str, context: dict[str, Any]
    ) -> HookEvent:
        """An event of ``session_key`` with ``context`` (a dict of the caller's own, taken as
        it is) plus the gateway's base for the session."""
        context.update(self.base(session_key))
        event = create_hook_event(type_, action, session_key, context)
        parent = dispatching.get()  # set when a handler caused this (deliver / send)
        if parent is not None:
            event.chain = (*parent.chain, parent.key)
        else:  # () unless a hook's process sent the request (its depth)
            event.chain = requested.get()
        return event

    async def handle(self, msg: Inbound) -> Reply:
        """Post every event ``msg`` causes, wait for them, deliver and record the reply.

        When a hook subscribes to ``message:received`` that event is waited for before the
        others are posted: its handlers may block the message (nothing else happens; the reply
        is empty and says why) or rewrite its text (what the command parser, the later events
        and the transcript see).
        """
        async with self._locks.lock(msg.session_key):
            # Held by its session's bound, as _submitter() says; posted without its closure.
            received = await self.queue.submit(self._received_event(msg))
            tickets: list[Ticket] = [received]
            text = msg.text
            if self.dispatcher.has_handlers("message:received", msg.session_key):
                try:
                    event = await received.wait()
                except QueueClosed as exc:
                    log.warning("message.undelivered", session_key=msg.session_key, reason=str(exc))
                    return Reply([])
                result = event.result or {}
                if result.get("block"):
                    received.release()
                    reason = str(result.get("reason") or "blocked by a hook")
                    await self._blocked(msg, reason)
                    blocked = [(event, received.report)] if msg.trace else []
                    return Reply([], blocked=reason, traced=blocked)
                text = str(event.context.get("content", text))
            command = parse_command(text)
            before = self.sessions.get(msg.session_key)
            posted = await self._post_events(msg, command)
            tickets += posted
            entry = self.sessions.get(msg.session_key)
        messages: list[str] = []
        traced: list[tuple[HookEvent, DispatchReport | None]] = []
        for ticket in tickets:
            try:
                event = await ticket.wait()
            except JournalError:
                await self._refused(msg.session_key, before, posted)
                raise
            except QueueClosed as exc:
                log.warning("message.undelivered", session_key=msg.session_key, reason=str(exc))
                if msg.trace:
                    traced.append((ticket.event, None))
                continue
            if msg.trace:
                traced.append((event, ticket.report))
            messages.extend(reply_lines(event))
        try:
            user: list[Turn] = []
            if entry is not None:
                user.append(("user", text, {"senderId": msg.sender_id, "channel": msg.channel}))
            delivered = await self.send_out(
                msg.session_key,
                messages,
                to=msg.sender_id,
                channel=msg.channel,
                entry=entry,
                first=user,
            )
        finally:
            for ticket in tickets:
                ticket.release()  # background hooks run once the reply is on its way
        return Reply(delivered, command.name if command else None, traced=traced)

    async def _blocked(self, msg: Inbound, reason: str) -> None:
        log.info("message.blocked", session_key=msg.session_key, reason=log_text(reason))
        if self.record_blocked():
            entry = self.sessions.get(msg.session_key)
            if entry is not None:
                extra = {"senderId": msg.sender_id, "channel": msg.channel, "blocked": reason}
                await self.sessions.append(entry, [("user", msg.text, extra)])

    async def send_out(
        self,
        session_key: str,
        lines: list[str],
        *,
        to: str,
        channel: str,
        entry: SessionEntry | None,
        deliver: Callable[[str], str | None] | None = None,
        first: list[Turn] | None = None,
    ) -> list[str]:
        """The outbound path of reply lines: ``message:sending`` (which may rewrite or cancel
        each), delivery, the transcript, ``message:sent``. Returns the lines delivered.

        ``first``: transcript lines that go before the delivered lines (the user's message),
        written with them in one append; before ``message:sending`` when a hook subscribes to
        it, so that its handlers find the message in the transcript.

        ``deliver(text)`` hands a line to its channel and returns an error or ``None``; without
        it the lines are the caller's to return (the reply to a request). ``message:sending``
        is dispatched at once (``queued=False``), not through the session's lane: a hook that
        sends from inside a handler of the same session must not wait behind itself.
        """
        delivered: list[str] = []
        dispatcher = self.dispatcher
        deciding = dispatcher.has_handlers("message:sending", session_key)
        # Each line's message:sent (content, why cancelled, delivery error, when in epoch ms),
        # kept only when a hook hears those events: else they are counted, never built.
        heard = dispatcher.hears("message:sent", session_key)
        outcomes: list[tuple[str, str | None, str | None, int]] = []
        records = first or []
        if entry is not None and records and deciding:
            await self.sessions.append(entry, records)
            records = []
        for text in lines:
            content, reason, error = text, None, None
            if deciding:
                sending = self._event(
                    "message",
                    "sending",
                    session_key,
                    {
                        "to": to,
                        "content": text,
                        "channelId": channel,
                        "sessionKey": session_key,
                        "direction": SENDING,
                    },
                )
                await self.dispatcher.dispatch(sending, queued=False)
                result = sending.result or {}
                if result.get("cancel"):
                    reason = str(result.get("reason") or "cancelled by a message:sending hook")
                else:
                    content = str(sending.context.get("content", text))
            if reason is None and deliver is not None:
                error = deliver(content)
            if reason is None and error is None:
                delivered.append(content)
            if heard:
                outcomes.append((content, reason, error, epoch_ms()))
        if delivered:
            records = [*records, *(("assistant", t, None) for t in delivered)]
        if entry is not None and records:  # one write a message (its lines and the reply's)
            await self.sessions.append(entry, records)
        try:
            if outcomes:
                await self._post_sent(session_key, to, channel, outcomes)
            elif lines:  # done as accepted (design.md section 8); no coroutine, no events
                dispatcher.accept_unheard("message:sent", len(lines))
        except QueueClosed:
            pass  # shutting down: the rest are not posted
        return delivered

    async def _post_sent(
        self,
        session_key: str,
        to: str,
        channel: str,
        outcomes: list[tuple[str, str | None, str | None, int]],
    ) -> None:
        """Post a reply's ``message:sent`` events (``Dispatcher.post_all``), when a hook hears
        them. When nothing does, :meth:`send_out` does not call this: they are done as accepted
        (design.md section 8) and not even built: three events a message; daemon CPU per
        message (``message`` ops under load, median of 6 interleaved rounds): memory journal
        100 -> 90 us, SQLite 168 -> 137 us."""
        events: list[HookEvent] = []
        for content, reason, error, timestamp in outcomes:
            sent = self._event(
                "message",
                "sent",
                session_key,
                {
                    "to": to,
                    "content": content,
                    "channelId": channel,
                    "sessionKey": session_key,
                    "success": reason is None and error is None,
                    "timestamp": timestamp,
                    "conversationId": session_key,
                    "direction": SENT,
                },
            )
            if reason is not None:
                sent.context["reason"] = reason
            if error is not None:
                sent.context["error"] = error
            events.append(sent)
        await self.dispatcher.post_all(events)

    def _received_event(self, msg: Inbound) -> HookEvent:
        event = self._event("message", "received", msg.session_key, received_context(msg))
        event.trace = msg.trace
        return event

    def _submitter(
        self, trace: bool, follows: bool = True
    ) -> Callable[[HookEvent], Awaitable[Ticket]]:
        """How this message posts: ``message:received`` is held by its session's bound
        (``gateway.queue.perSessionMax``); the events after it follow an accepted one, and
        are not (a message is not left half-posted)."""

        async def submit(event: HookEvent) -> Ticket:
            event.trace = trace
            return await self.queue.submit(event, follows=follows)

        return submit

    async def _refused(
        self, session_key: str, before: SessionEntry | None, posted: list[Ticket]
    ) -> None:
        """An event of this message was refused (a full disk): once the others are settled
        (refused too, or accepted), a message none of whose session events was accepted
        leaves its session as it found it: not started (nor a ``/new`` one ended). Each of
        them waits ``fullWaitMs`` from its own post at most."""
        for ticket in posted:
            with contextlib.suppress(Exception):
                await ticket.wait()
        if posted and all(ticket.error is not None for ticket in posted):
            await self.sessions.put_back(session_key, before)

    async def _post_events(self, msg: Inbound, command: Command | None) -> list[Ticket]:
        """Everything after ``message:received``, in order."""
        tickets: list[Ticket] = []
        key = msg.session_key
        submit = self._submitter(msg.trace)
        if command is not None and command.name in RESET_COMMANDS:
            ending = await self.sessions.end(key)
            if ending is not None:
                tickets.append(await submit(self._session_event("end", ending, command.name)))
            reset = self._command_event(msg, command, ending, ending)
            if ending is not None:  # as OpenClaw's gateway hands it to its session-memory hook
                reset.context["previousSessionMemory"] = await anyio.to_thread.run_sync(
                    previous_session_memory, ending.session_file
                )
            tickets.append(await submit(reset))
            await self._start_session(key, command.name, msg.trace, tickets)
            return tickets
        current = self.sessions.get(key)
        if current is None:
            await self._start_session(key, "message", msg.trace, tickets)
            current = self.sessions.get(key)
        if command is not None:
            tickets.append(await submit(self._command_event(msg, command, current, None)))
        return tickets

    def _session_event(self, action: str, entry: SessionEntry, reason: str) -> HookEvent:
        return self._event("session", action, entry.session_key, session_context(entry, reason))

    def _command_event(
        self,
        msg: Inbound,
        command: Command,
        entry: SessionEntry | None,
        previous: SessionEntry | None,
    ) -> HookEvent:
        context = command_context(msg, command, entry, previous)
        return self._event("command", command.name, msg.session_key, context)

    async def _start_session(
        self, session_key: str, reason: str, trace: bool, tickets: list[Ticket]
    ) -> None:
        """Start a session and post its events, each ticket into ``tickets`` once accepted."""
        entry = await self.sessions.start(session_key)
        log.info("session.started", session_key=session_key, session_id=entry.session_id)
        submit = self._submitter(trace)
        tickets.append(await submit(self._session_event("start", entry, reason)))
        tickets.append(await submit(await self.bootstrap_event(session_key, entry)))

    async def bootstrap_event(
        self, session_key: str, entry: SessionEntry | None = None
    ) -> HookEvent:
        """An ``agent:bootstrap`` event with the workspace's standard files pre-filled."""
        base = self.base(session_key)
        files = await anyio.to_thread.run_sync(read_bootstrap_files, Path(base["workspaceDir"]))
        entry = entry or self.sessions.get(session_key)
        return self._event(
            "agent",
            "bootstrap",
            session_key,
            {
                "bootstrapFiles": files,
                "sessionKey": session_key,
                "sessionId": entry.session_id if entry else None,
            },
        )

    async def bootstrap(self, session_key: str) -> list[Any]:
        """Fire ``agent:bootstrap`` for ``session_key`` and return the files handlers left."""
        event = await self.bootstrap_event(session_key)
        await self.dispatcher.dispatch(event)
        files = event.context.get("bootstrapFiles")
        return list(files) if isinstance(files, list) else []
