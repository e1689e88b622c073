"""What each op of the control protocol does (docs/design.md section 3): :class:`ControlOps`.

Each op gets its request's declared fields (:data:`gatewayd.channels.protocol.OPS`, defaults
filled in) and answers the reply's fields, or the commit (``trigger`` without ``wait``) or the
dispatch (with it) that the reply waits for. :func:`failure` turns what an op raised into the
error reply the client reads. The connections that carry the ops are
:mod:`gatewayd.channels.control`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gatewayd import __version__
from gatewayd.channels import ChannelHost, Dispatch
from gatewayd.channels.admission import MAX_IN_FLIGHT
from gatewayd.channels.protocol import (
    CLIENT_DECISIONS,
    CLIENT_EVENTS,
    MAX_LINE,
    MIN_PROTOCOL,
    OPS,
    PROTOCOL,
    RequestError,
    encode,
    error,
)
from gatewayd.hooks.registry import HookLoopError
from gatewayd.journal.base import Commit, JournalError
from gatewayd.replies import ReloadReply, Reply
from gatewayd.triggers import QueueClosed, QueueFull

log = structlog.get_logger("gatewayd.control")

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | Commit | Dispatch]]
"""An op: the reply's fields, or the commit (``trigger`` without ``wait``) or the dispatch
(with it) the reply waits for."""


SUBSCRIBE = "_subscribe"
"""Internal reply key: the connection turns into a stream of this session's messages."""


_QUEUED: dict[str, Any] = {"queued": True}


def queued(req_id: Any, error: BaseException | None) -> bytes:
    """The reply to ``trigger`` without ``wait`` once its commit ended (``error``: it failed)."""
    if error is None:
        return encode({"id": req_id, "ok": True, "queued": True})
    return encode(failure(req_id, "trigger", error))


def trigger_fields(reply: Reply) -> dict[str, Any]:
    """A waited trigger's reply on the wire: ``messages``, ``result?``, ``timedOut?``,
    ``trace?``."""
    out: dict[str, Any] = {"messages": reply.messages}
    if reply.result is not None:
        out["result"] = reply.result
    if reply.timed_out:
        out["timedOut"] = True
    if reply.trace is not None:
        out["trace"] = reply.trace
    return out


def failure(req_id: Any, op: str, exc: BaseException) -> dict[str, Any]:
    """The error reply to a request that raised ``exc``."""
    if isinstance(exc, RequestError):
        return error(exc.req_id if req_id is None else req_id, exc.code, str(exc))
    if isinstance(exc, QueueClosed):
        return error(req_id, "shutting_down", str(exc))
    if isinstance(exc, QueueFull | JournalError):  # the event was not accepted
        return error(req_id, exc.code, str(exc))
    if isinstance(exc, HookLoopError):  # the request's depth reached hooks.maxDepth
        return error(req_id, "hook_loop", str(exc))
    log.error("control.op_failed", op=op, error=str(exc), exc_info=exc)
    return error(req_id, "internal", f"{type(exc).__name__}: {exc}")


def unsupported(client: str | None, wanted: int) -> str:
    """Why ``hello`` refused protocol ``wanted``, and which side to upgrade to what."""
    who = f"the client {client!r}" if client else "the client"
    serves = f"gatewayd {__version__} serves protocol {MIN_PROTOCOL} to {PROTOCOL}"
    if wanted > PROTOCOL:
        return (
            f"{who} speaks protocol {wanted}; {serves}: upgrade gatewayd to a release that "
            f"serves protocol {wanted}, or use a client that speaks protocol {PROTOCOL}"
        )
    return (
        f"{who} speaks protocol {wanted}; {serves}: upgrade the client to one that speaks "
        f"protocol {MIN_PROTOCOL} or newer"
    )


class ControlOps:
    """The ops of the control protocol, each on the channels' host (the gateway's facade)."""

    def __init__(self, host: ChannelHost) -> None:
        self.host = host
        self.table: dict[str, Handler] = {
            "hello": self._op_hello,
            "ping": self._op_ping,
            "status": self._op_status,
            "message": self._op_message,
            "trigger": self._op_trigger,
            "subscribe": self._op_subscribe,
            "reload": self._op_reload,
            "hooks": self._op_hooks,
            "bootstrap": self._op_bootstrap,
            "events": self._op_events,
            "test": self._op_test,
        }
        assert self.table.keys() == OPS.keys(), "every declared op has a handler"

    async def run(self, op: str, args: dict[str, Any]) -> dict[str, Any] | Commit | Dispatch:
        """Run ``op`` (a declared one: :func:`parse_request` checked) on its fields."""
        return await self.table[op](args)

    async def _op_hello(self, args: dict[str, Any]) -> dict[str, Any]:
        client, wanted = args["client"], args["protocol"]
        log.debug("control.hello", client=client, protocol=wanted)
        if wanted is not None and not MIN_PROTOCOL <= wanted <= PROTOCOL:
            raise RequestError("unsupported_protocol", unsupported(client, wanted))
        return {
            "protocol": PROTOCOL,
            "minProtocol": MIN_PROTOCOL,
            "daemon": {"name": "gatewayd", "version": __version__},
            "ops": sorted(OPS),
            "events": list(CLIENT_EVENTS),
            "decisions": list(CLIENT_DECISIONS),
            "limits": {"maxLineBytes": MAX_LINE, "maxInFlight": MAX_IN_FLIGHT},
        }

    async def _op_ping(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"pong": True}

    async def _op_status(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"status": self.host.status()}

    async def _op_message(self, args: dict[str, Any]) -> dict[str, Any]:
        reply = await self.host.message(
            args["sessionKey"],
            args["text"],
            sender_id=args["senderId"],
            channel=args["channel"],
            trace=args["trace"],
            depth=args["depth"],
        )
        out: dict[str, Any] = {"messages": reply.messages, "command": reply.command}
        if reply.blocked is not None:
            out["blocked"] = True
            out["reason"] = reply.blocked
        if reply.trace is not None:
            out["trace"] = reply.trace
        return out

    async def _op_trigger(self, args: dict[str, Any]) -> dict[str, Any] | Commit | Dispatch:
        event, key, context = args["event"], args["sessionKey"], args["context"]
        depth = args["depth"]
        if args["wait"]:
            return await self.host.submit_trigger(
                event, key, context, trace=args["trace"], depth=depth
            )
        if args["trace"]:
            raise RequestError(
                "bad_request", "'trace: true' needs the dispatch: drop 'wait: false'"
            )
        commit = await self.host.enter_trigger(event, key, context, depth=depth)
        return _QUEUED if commit is None else commit

    async def _op_reload(self, args: dict[str, Any]) -> dict[str, Any]:
        outcome = await self.host.reload("op")
        if outcome["result"] not in ("ok", "partial"):
            raise RequestError(
                "reload_refused", "; ".join(outcome.get("errors") or [outcome["result"]])
            )
        # "partial": loaded, but hooks failed; the client decides what that means for it.
        reply: ReloadReply = {
            "result": outcome["summary"],
            "outcome": outcome["result"],
            "changes": outcome.get("changes"),
        }
        if restart := outcome.get("restartNeeded"):
            reply["restartNeeded"] = restart
        return dict(reply)

    async def _op_hooks(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(self.host.hooks())

    async def _op_subscribe(self, args: dict[str, Any]) -> dict[str, Any]:
        key = args["sessionKey"]
        return {"subscribed": key, SUBSCRIBE: key}

    async def _op_test(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.host.test_hook(
                args["hook"], args["event"] or None, args["context"], args["sessionKey"]
            )
        except LookupError:
            raise RequestError(
                "unknown_hook",
                f"no hook {args['hook']!r} in the running daemon (gatewayd hooks list shows them)",
            ) from None

    async def _op_bootstrap(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"bootstrapFiles": await self.host.bootstrap(args["sessionKey"])}

    async def _op_events(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.host.events(args)
        except ValueError as exc:
            raise RequestError("bad_request", str(exc)) from None
