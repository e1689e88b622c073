"""Every way a request to gatewayd can fail, as one exception class each.

Each is a :class:`GatewayError` carrying ``code`` and ``message``. For a request the daemon
refused (``{"ok": false, "error": {code, message}}``) they are the daemon's own, and the class
says which (:class:`QueueFull` for ``queue_full``, ...; :func:`daemon_error` picks it); the
client's own failures have codes of their own (``not_running``, ``connection_lost``,
``timeout``, ``protocol``, ``config``). ``str(error)`` is what a person reads; for the daemon's
errors it ends with the code: ``session 'x' already has 256 events queued ... [queue_full]``.

A :class:`GatewayError` is a :class:`~gatewayd.exits.UserError`: the command line prints it as
one ``error: ...`` line and exits with ``exit_code`` (1, or 78 for a config file it could not
read).

    try:
        await gw.trigger("agent:before_tool_call", key, context)
    except QueueFull:
        ...  # the session's hooks are behind: retry later
    except GatewayError as error:
        log.warning("gatewayd.refused", code=error.code, message=error.message)
"""

from __future__ import annotations

from gatewayd.exits import EXIT_CONFIG, EXIT_FAILED, UserError


class GatewayError(UserError):
    """A request that got no reply, or a refusal; ``code`` and ``message`` say which."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, exit_code: int = EXIT_FAILED):
        super().__init__(message, exit_code)
        self.message = message
        if code is not None:
            self.code = code


# -- the client's own ---------------------------------------------------------------------------


class CannotConnect(GatewayError):
    """The socket could not be connected to (permission denied, not a socket, ...)."""

    code = "cannot_connect"


class NotRunning(CannotConnect):
    """No daemon listens on the socket: there is no socket file, or a stale one."""

    code = "not_running"


class ConnectionLost(GatewayError):
    """The connection ended before the reply came (the daemon stopped or restarted). The request
    may or may not have been carried out: a ``trigger`` sent again may run twice."""

    code = "connection_lost"


class RequestTimeout(GatewayError, TimeoutError):
    """No reply within the call's timeout. The daemon may still carry the request out."""

    code = "timeout"


class ProtocolError(GatewayError):
    """The daemon sent something that is not a reply of this protocol."""

    code = "protocol"


class ConfigFileError(GatewayError):
    """The config file that says where the socket is cannot be read or parsed (exit 78)."""

    code = "config"

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_CONFIG)


# -- the daemon's (docs/design.md section 3, "Error codes") --------------------------------------


class DaemonError(GatewayError):
    """The daemon answered ``ok: false``; ``code`` is its error code."""

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


class BadRequest(DaemonError):
    """``bad_request``, ``bad_json`` or ``line_too_long``: the request itself is wrong."""

    code = "bad_request"


class UnknownOp(DaemonError):
    code = "unknown_op"


class UnknownEvent(DaemonError):
    code = "unknown_event"


class UnknownHook(DaemonError):
    code = "unknown_hook"


class UnsupportedProtocol(DaemonError):
    """Client and daemon share no protocol version; the message says which side to upgrade."""

    code = "unsupported_protocol"


class ReloadRefused(DaemonError):
    """The config on disk is invalid; the running one stays."""

    code = "reload_refused"


class ShuttingDown(DaemonError):
    """The daemon is stopping and takes no new work: not accepted."""

    code = "shutting_down"


class QueueFull(DaemonError):
    """The event's session stayed full (``gateway.queue.perSessionMax``): not accepted."""

    code = "queue_full"


class JournalFull(DaemonError):
    """The disk under the journal stayed full: not accepted."""

    code = "journal_full"


class JournalFailed(DaemonError):
    """The journal could not record the event: not accepted."""

    code = "journal_error"


class QueueUnavailable(DaemonError):
    """The shared queue (Redis) stayed unreachable: not accepted."""

    code = "queue_unavailable"


class Refused(DaemonError):
    """``forbidden``, ``busy`` or ``idle_timeout``: the daemon closed the connection."""

    code = "busy"


class InternalError(DaemonError):
    """A bug in the daemon (it logged ``control.op_failed``)."""

    code = "internal"


_BY_CODE: dict[str, type[DaemonError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        UnknownOp,
        UnknownEvent,
        UnknownHook,
        UnsupportedProtocol,
        ReloadRefused,
        ShuttingDown,
        QueueFull,
        JournalFull,
        JournalFailed,
        QueueUnavailable,
        Refused,
        InternalError,
    )
}
_BY_CODE.update(bad_json=BadRequest, line_too_long=BadRequest)
_BY_CODE.update(forbidden=Refused, idle_timeout=Refused)


def daemon_error(code: str, message: str) -> DaemonError:
    """The exception for the daemon's error ``code`` (a plain :class:`DaemonError` for a code
    this client does not know)."""
    return _BY_CODE.get(code, DaemonError)(message, code=code)
