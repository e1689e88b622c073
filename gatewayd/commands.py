"""The inbound-message path: which events one message causes, in which order, and its reply.

For every message :class:`CommandRouter` posts, in this order, into the trigger queue:

1. ``message:received`` (``from``, ``content``, ``channelId``, ``sessionKey``, ``timestamp``);
2. for ``/new`` and ``/reset``: ``session:end`` (if a session existed) -> ``command:<name>`` ->
   a new session -> ``session:start`` -> ``agent:bootstrap``;
3. otherwise: ``session:start`` -> ``agent:bootstrap`` if the session key has no session yet,
   then ``command:<name>`` when the text is a ``/name`` command (``/stop`` included).

The messages handlers push for those events, in dispatch order, are the reply. The message and
its reply are appended to the transcript of the session current after the message, and each
reply line delivered fires ``message:sent``. A message's events are posted as one uninterrupted
run per session (a per-session lock covers posting, not dispatch), so two messages racing on
one session never interleave their events.

Command context: ``sessionEntry``, ``previousSessionEntry``, ``sessionId``, ``sessionFile``,
``commandSource``, ``senderId``, ``args``, ``workspaceDir``, ``cfg``. For ``/new`` and ``/reset``
the session fields describe the session being ended (``None`` when there was none); for other
commands, the current session (and ``previousSessionEntry`` is ``None``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import DispatchReport
from gatewayd.sessions import SessionEntry, SessionManager, message, read_bootstrap_files
from gatewayd.timestamps import iso_now
from gatewayd.triggers import QueueClosed, Ticket, TriggerQueue

log = structlog.get_logger("gatewayd.commands")

_COMMAND_RE = re.compile(r"/(?P<name>[a-z0-9_-]+)(?:\s+(?P<args>.*))?", re.DOTALL)
RESET_COMMANDS = frozenset({"new", "reset"})


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


@dataclass(frozen=True, slots=True)
class Inbound:
    """One inbound message from a channel."""

    session_key: str
    text: str
    sender_id: str
    channel: str
    trace: bool = False
    """Trace the events this message causes (``Reply.traced``)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a message produced: the reply lines and the command it was, if any."""

    messages: list[str]
    command: str | None
    traced: list[tuple[HookEvent, DispatchReport | None]] = field(default_factory=list)
    """For a traced message: each event it caused, in order, with its dispatch report
    (``None`` when it was not dispatched before the shutdown deadline)."""


EventBase = Callable[[], dict[str, Any]]
"""Returns the context every event carries: ``{"cfg": ..., "workspaceDir": ...}``."""


def _entry_json(entry: SessionEntry | None) -> dict[str, Any] | None:
    return entry.to_json() if entry is not None else None


class CommandRouter:
    """Turns inbound messages into events on the queue; see the module docstring."""

    def __init__(self, queue: TriggerQueue, sessions: SessionManager, base: EventBase) -> None:
        self.queue = queue
        self.sessions = sessions
        self.base = base
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    @asynccontextmanager
    async def _session_lock(self, session_key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session_key) or (anyio.Lock(), 0)
        self._locks[session_key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session_key]
            if users == 1:
                del self._locks[session_key]
            else:
                self._locks[session_key] = (lock, users - 1)

    def _event(self, type_: str, action: str, session_key: str, **context: Any) -> HookEvent:
        return create_hook_event(type_, action, session_key, {**context, **self.base()})

    async def handle(self, msg: Inbound) -> Reply:
        """Post every event ``msg`` causes, wait for them, deliver and record the reply."""
        command = parse_command(msg.text)
        async with self._session_lock(msg.session_key):
            tickets = await self._post_events(msg, command)
            entry = self.sessions.get(msg.session_key)
        messages: list[str] = []
        traced: list[tuple[HookEvent, DispatchReport | None]] = []
        for ticket in tickets:
            try:
                event = await ticket.wait()
            except QueueClosed as exc:
                log.warning("message.undelivered", session_key=msg.session_key, reason=str(exc))
                if msg.trace:
                    traced.append((ticket.event, None))
                continue
            if msg.trace:
                traced.append((event, ticket.report))
            messages.extend(str(m) for m in event.messages)
        if entry is not None:
            user = message("user", msg.text, senderId=msg.sender_id, channel=msg.channel)
            replies = [message("assistant", text) for text in messages]
            await self.sessions.append(entry, [user, *replies])
        for text in messages:
            sent = self._event(
                "message",
                "sent",
                msg.session_key,
                to=msg.sender_id,
                content=text,
                channelId=msg.channel,
                sessionKey=msg.session_key,
                success=True,
                timestamp=iso_now(),
            )
            try:
                await self.queue.post(sent)
            except QueueClosed:
                break
        return Reply(messages, command.name if command else None, traced)

    def _submitter(self, trace: bool) -> Callable[[HookEvent], Awaitable[Ticket]]:
        if not trace:
            return self.queue.submit

        async def submit_traced(event: HookEvent) -> Ticket:
            event.trace = True
            return await self.queue.submit(event)

        return submit_traced

    async def _post_events(self, msg: Inbound, command: Command | None) -> list[Ticket]:
        key = msg.session_key
        submit = self._submitter(msg.trace)
        tickets = [
            await submit(
                self._event(
                    "message",
                    "received",
                    key,
                    **{"from": msg.sender_id},
                    content=msg.text,
                    channelId=msg.channel,
                    sessionKey=key,
                    timestamp=iso_now(),
                )
            )
        ]
        if command is not None and command.name in RESET_COMMANDS:
            ending = await self.sessions.end(key)
            if ending is not None:
                tickets.append(await submit(self._session_event("end", ending, command.name)))
            tickets.append(await submit(self._command_event(msg, command, ending, ending)))
            tickets += await self._start_session(key, command.name, msg.trace)
            return tickets
        current = self.sessions.get(key)
        if current is None:
            tickets += await self._start_session(key, "message", msg.trace)
            current = self.sessions.get(key)
        if command is not None:
            tickets.append(await submit(self._command_event(msg, command, current, None)))
        return tickets

    def _session_event(self, action: str, entry: SessionEntry, reason: str) -> HookEvent:
        return self._event(
            "session",
            action,
            entry.session_key,
            sessionEntry=entry.to_json(),
            sessionId=entry.session_id,
            sessionFile=str(entry.session_file),
            sessionKey=entry.session_key,
            reason=reason,
        )

    def _command_event(
        self,
        msg: Inbound,
        command: Command,
        entry: SessionEntry | None,
        previous: SessionEntry | None,
    ) -> HookEvent:
        return self._event(
            "command",
            command.name,
            msg.session_key,
            sessionEntry=_entry_json(entry),
            previousSessionEntry=_entry_json(previous),
            sessionId=entry.session_id if entry else None,
            sessionFile=str(entry.session_file) if entry else None,
            commandSource=msg.channel,
            senderId=msg.sender_id,
            args=command.args,
        )

    async def _start_session(
        self, session_key: str, reason: str, trace: bool = False
    ) -> list[Ticket]:
        entry = await self.sessions.start(session_key)
        log.info("session.started", session_key=session_key, session_id=entry.session_id)
        submit = self._submitter(trace)
        start = await submit(self._session_event("start", entry, reason))
        bootstrap = await submit(await self.bootstrap_event(session_key, entry))
        return [start, bootstrap]

    async def bootstrap_event(
        self, session_key: str, entry: SessionEntry | None = None
    ) -> HookEvent:
        """An ``agent:bootstrap`` event with the workspace's standard files pre-filled."""
        base = self.base()
        files = await anyio.to_thread.run_sync(read_bootstrap_files, Path(base["workspaceDir"]))
        entry = entry or self.sessions.get(session_key)
        return self._event(
            "agent",
            "bootstrap",
            session_key,
            bootstrapFiles=files,
            sessionKey=session_key,
            sessionId=entry.session_id if entry else None,
        )

    async def bootstrap(self, session_key: str) -> list[Any]:
        """Fire ``agent:bootstrap`` for ``session_key`` and return the files handlers left."""
        ticket = await self.queue.submit(await self.bootstrap_event(session_key))
        event = await ticket.wait()
        files = event.context.get("bootstrapFiles")
        return list(files) if isinstance(files, list) else []
