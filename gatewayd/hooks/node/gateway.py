"""A JS/TS hook's gateway handle: Python's ``ctx.gateway``, used from Node.

A JS/TS handler gets the handle as ``ctx.gateway`` (its second argument) and as ``gateway``
from ``"gatewayd/hooks"`` (``define.mjs``), with the methods of
:class:`~gatewayd.hooks.schema.GatewayHandle`: ``send(sessionKey, text, {channel})`` and
``deliver(sessionKey, text, {senderId, channel, wait})``. Each use is one line from the worker,
``{op: "gateway", id, call, method, args}``, answered ``{op: "gateway", id, ok, value | error}``
(``worker.mjs``). :class:`NodeGateway` runs it on the daemon's handle.

``call`` is the id of the call whose code made the request (the worker's AsyncLocalStorage, so
a send from a timer the handler started counts too). The daemon remembers, for the latest
:data:`CAUSES_KEPT` calls of each worker, the event whose handler made the call, and runs the
request as caused by that event: the event it posts carries the cause chain a Python
handler's would, so ``hooks.maxDepth`` ends a loop through JS hooks as through Python ones, and
``deliver(..., wait: true)`` on the handler's own session is the same error.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from typing import Any, Final

import structlog

from gatewayd.hooks.engine import dispatching
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.node.channel import Reply
from gatewayd.hooks.node.worker import NodeWorker
from gatewayd.hooks.schema import GatewayHandle

log = structlog.get_logger("gatewayd.hooks.node")

CAUSES_KEPT: Final = 4096
"""Calls per worker whose cause a later gateway request can still find (a request from code of
a call older than that is taken for caused by nothing, as a request from outside a hook)."""


def remember_cause(worker: NodeWorker, call_id: int) -> None:
    """Note the event being handled now as the cause of call ``call_id`` of ``worker``: in
    slot ``call_id % CAUSES_KEPT``, with the id, so a later call in that slot replaces it (no
    eviction to run: ~0.2 us a call)."""
    worker.causes[call_id % CAUSES_KEPT] = (call_id, dispatching.get())


def cause_of(worker: NodeWorker, call_id: object) -> HookEvent | None:
    """The event remembered for call ``call_id`` of ``worker``; None when it is not one of the
    latest :data:`CAUSES_KEPT` calls (or no call id)."""
    if not isinstance(call_id, int):
        return None
    found = worker.causes.get(call_id % CAUSES_KEPT)
    return found[1] if found is not None and found[0] == call_id else None


class NodeGateway:
    """Serves the gateway requests of every worker of a runtime on :attr:`handle`."""

    def __init__(self) -> None:
        self.handle: GatewayHandle | None = None
        """The daemon's handle (set by the daemon); None outside one (``gatewayd hooks``
        commands), where each use fails saying so."""
        self._tasks: set[asyncio.Task[None]] = set()

    def serve(self, worker: NodeWorker, message: Reply) -> None:
        """Run one request (a ``gateway`` line from ``worker``) as caused by the event of the
        call that made it; its answer goes back to the worker."""
        context = contextvars.copy_context()
        context.run(dispatching.set, cause_of(worker, message.get("call")))
        task = asyncio.get_running_loop().create_task(
            self._answer(worker, message), context=context
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, worker: NodeWorker, message: Reply) -> None:
        answer: dict[str, Any] = {"op": "gateway", "id": message.get("id")}
        try:
            answer["value"] = await self._run(message.get("method"), message.get("args"))
            answer["ok"] = True
        except Exception as exc:  # the hook's promise rejects with it: its own error to handle
            log.info("node.gateway_refused", hook=message.get("hook"), error=str(exc))
            answer.update(ok=False, error=f"gateway.{message.get('method')}: {exc}")
        worker.channel.tell(answer)

    async def _run(self, method: object, args: object) -> Any:
        handle = self.handle
        if handle is None:
            raise RuntimeError(
                "no gateway outside a running daemon (gatewayd hooks check, list and test "
                "import and run hooks without one)"
            )
        given: Mapping[str, Any] = args if isinstance(args, dict) else {}
        session_key, text = given.get("sessionKey"), given.get("text")
        if not isinstance(session_key, str) or not session_key:
            raise TypeError(f"the session key must be a non-empty string, got {session_key!r}")
        if not isinstance(text, str):
            raise TypeError(f"the text must be a string, got {text!r}")
        channel = given.get("channel")
        if channel is not None and not isinstance(channel, str):
            raise TypeError(f"channel must be a string, got {channel!r}")
        if method == "send":
            return await handle.send(session_key, text, channel=channel or "hook")
        if method == "deliver":
            sender = given.get("senderId")
            if sender is not None and not isinstance(sender, str):
                raise TypeError(f"senderId must be a string, got {sender!r}")
            wait = given.get("wait")
            if wait is not None and not isinstance(wait, bool):
                raise TypeError(f"wait must be true or false, got {wait!r}")
            messages, command = await handle.deliver(
                session_key,
                text,
                sender_id=sender or "gateway",
                channel=channel or "internal",
                wait=True if wait is None else wait,
            )
            return {"messages": messages, "command": command}
        raise ValueError(f"no such method (the gateway has send and deliver), got {method!r}")
