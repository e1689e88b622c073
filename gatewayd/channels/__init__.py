"""Channels: where messages and requests come into the gateway.

A channel is anything with the :class:`Channel` shape. The gateway starts each one with
``channel.claim()`` early (before loading hooks), then ``await task_group.start(channel.serve)``
and counts it up once ``serve`` has called
``task_status.started()``, which a channel does only when it is really listening. On shutdown the
gateway calls :meth:`Channel.stop_accepting` first (no new connections or requests; requests in
progress finish), and cancels ``serve`` after the trigger queue has drained.

Channels talk to the gateway only through :class:`ChannelHost`, never through its internals.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

if TYPE_CHECKING:
    from gatewayd.journal.base import Commit
    from gatewayd.replies import HooksReply, ReloadOutcome, Reply, StatusReply


class ChannelError(Exception):
    """A channel that cannot start (address in use, bad path); the message says what to do."""


class Dispatch(Protocol):
    """A waited ``trigger`` the queue took (:meth:`ChannelHost.submit_trigger`)."""

    def reply(self) -> Awaitable[Reply]:
        """Wait for the dispatch: its lines, ``result``, ``timed_out``, ``trace``."""
        ...

    def release(self) -> None:
        """The reply is out, or never will be: the event's background handlers may run."""
        ...


class ChannelHost(Protocol):
    """What a channel may ask of the gateway (implemented by ``facade.GatewayFacade``)."""

    async def message(
        self,
        session_key: str,
        text: str,
        *,
        sender_id: str,
        channel: str,
        wait: bool = True,
        trace: bool = False,
        depth: int = 0,
    ) -> Reply:
        """An inbound message: the reply (lines, command, why it was blocked; with ``trace``,
        the trace of every event it caused). ``depth``: the request's (how many events caused
        it in a hook's process)."""
        ...

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
        """Post ``type:action``: the reply (lines, ``result``, ``timed_out``; with ``trace``
        the event's trace) when ``wait``, else None once queued."""
        ...

    async def enter_trigger(
        self, key: str, session_key: str, context: dict[str, Any], *, depth: int = 0
    ) -> Commit | None:
        """``trigger`` without ``wait``, up to the commit: returns once the event is in the
        queue, in the order entered; ``await commit.wait()`` before telling the client it was
        accepted (None: it is already)."""
        ...

    async def submit_trigger(
        self,
        key: str,
        session_key: str,
        context: dict[str, Any],
        *,
        trace: bool = False,
        depth: int = 0,
    ) -> Dispatch:
        """``trigger`` with ``wait``, up to the dispatch: returns once the event is in the
        queue, in the order submitted."""
        ...

    def subscribe(
        self, session_key: str
    ) -> AbstractContextManager[MemoryObjectReceiveStream[dict[str, Any]]]:
        """The session's outbound messages (``ctx.gateway.send``) until the block ends."""
        ...

    def status(self) -> StatusReply: ...

    async def reload(self, trigger: str) -> ReloadOutcome: ...

    def hooks(self) -> HooksReply: ...

    async def bootstrap(self, session_key: str) -> list[Any]: ...

    async def events(self, request: dict[str, Any]) -> dict[str, Any]:
        """The trigger journal's ``events`` request (list, show, retry, purge)."""
        ...

    async def test_hook(
        self, hook: str, event: str | None, context: dict[str, Any], session_key: str
    ) -> dict[str, Any]:
        """Run one hook alone against a sample event, traced; ``LookupError``: no such hook."""
        ...


class Channel(Protocol):
    """A source of inbound traffic; see the module docstring for the lifecycle."""

    name: str

    def claim(self) -> None:
        """Reserve the channel's address (a lock, a port) or raise :class:`ChannelError`.

        Called before the hooks load, so a second daemon is refused before it runs any hook
        code. ``serve`` claims by itself if this was not called.
        """
        ...

    async def serve(self, *, task_status: TaskStatus[None]) -> None:
        """Listen, call ``task_status.started()``, then serve until cancelled."""
        ...

    def stop_accepting(self) -> None:
        """Take no new connections or requests; requests in progress may finish."""
        ...

    def describe(self) -> dict[str, Any]:
        """``{name, address, listening, connections}`` for ``status``."""
        ...

    def fds(self) -> list[int]:
        """Descriptors a process forked by a hook must close (locks, listeners, clients)."""
        ...


__all__ = ["Channel", "ChannelError", "ChannelHost", "Dispatch"]
