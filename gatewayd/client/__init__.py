"""gatewayd's client: talk to a running daemon over its control socket.

Two APIs over one protocol core (:mod:`gatewayd.client.wire`):

* :class:`Client`, asynchronous (on anyio and asyncio), for programs: an agent runtime posting
  its events, asking the decision events, and receiving what hooks send later::

      from gatewayd.client import Client

      async with Client() as gw:
          reply = await gw.message("agent:main:main", "hello")

* :class:`SyncClient`, blocking, one request after another: the command line's (it imports
  neither anyio nor the daemon), and a script's.

Both find the socket by the command line's rules (:func:`socket_path`: ``socket``, the
environment, the config file, the state dir) and raise the errors of
:mod:`gatewayd.client.errors`, each carrying the daemon's ``code`` and ``message``. The reply
types are in :mod:`gatewayd.client.types`. The protocol itself is docs/design.md section 3, and
docs/clients.md shows both clients at work.

``Client`` and the types are imported on first use, so that ``from gatewayd.client import
SyncClient`` (``gatewayd status``) stays on the standard library.
"""

from __future__ import annotations

from gatewayd.client.discovery import socket_path
from gatewayd.client.errors import (
    BadRequest,
    CannotConnect,
    ConfigFileError,
    ConnectionLost,
    DaemonError,
    GatewayError,
    InternalError,
    JournalFailed,
    JournalFull,
    NotRunning,
    ProtocolError,
    QueueFull,
    QueueUnavailable,
    Refused,
    ReloadRefused,
    RequestTimeout,
    ShuttingDown,
    UnknownEvent,
    UnknownHook,
    UnknownOp,
    UnsupportedProtocol,
)
from gatewayd.client.sync import QUICK_TIMEOUT_S, WAIT_TIMEOUT_S, SyncClient, request
from gatewayd.client.wire import PROTOCOL

TYPE_CHECKING = False  # typing's, without importing typing (`gatewayd status`: see exits.py)
if TYPE_CHECKING:
    from gatewayd.client.aio import Client
    from gatewayd.client.subscription import Subscription


def __getattr__(name: str) -> object:
    """``Client`` and ``Subscription``, imported when first asked for (they import anyio)."""
    if name == "Client":
        from gatewayd.client.aio import Client

        return Client
    if name == "Subscription":
        from gatewayd.client.subscription import Subscription

        return Subscription
    raise AttributeError(f"module 'gatewayd.client' has no attribute {name!r}")


__all__ = [
    "PROTOCOL",
    "QUICK_TIMEOUT_S",
    "WAIT_TIMEOUT_S",
    "BadRequest",
    "CannotConnect",
    "Client",
    "ConfigFileError",
    "ConnectionLost",
    "DaemonError",
    "GatewayError",
    "InternalError",
    "JournalFailed",
    "JournalFull",
    "NotRunning",
    "ProtocolError",
    "QueueFull",
    "QueueUnavailable",
    "Refused",
    "ReloadRefused",
    "RequestTimeout",
    "ShuttingDown",
    "Subscription",
    "SyncClient",
    "UnknownEvent",
    "UnknownHook",
    "UnknownOp",
    "UnsupportedProtocol",
    "request",
    "socket_path",
]
