"""The state of a Redis queue instance that its parts share, and what they all call on it.

:class:`RedisState` is what the outbox (:mod:`.redis_outbox`), the consumer's tasks
(:mod:`.redis_consumer`) and the ``events`` op (:mod:`.redis_inspect`) work on: the settings and
keys, the events in hand (``_inflight``, ``_held``, ``_local``), the partitions being read, the
connection's state (:meth:`_up`, :meth:`_down`) and the tasks (:meth:`_spawn`). The journal
itself (:class:`~gatewayd.journal.redis_queue.RedisJournal`: opening, posting, closing) is built
on it, so the parts know this class and not the journal.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import structlog

from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.journal import redis_codec as codec
from gatewayd.journal.base import Item, Journal
from gatewayd.journal.redis_leases import Leases
from gatewayd.journal.redis_link import Link
from gatewayd.journal.redis_outbox import Outbox
from gatewayd.jsonenc import loads

if TYPE_CHECKING:
    from gatewayd.config import RedisQueueConfig

log = structlog.get_logger("gatewayd.queue")


def _redis_url(url: str) -> tuple[str, str | None]:
    """The URL with ``GATEWAYD_REDIS_PASSWORD`` applied (as the client's password), and the
    URL as shown in logs and status (password hidden)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    shown = url
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        shown = urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    return shown, os.environ.get("GATEWAYD_REDIS_PASSWORD") or None


class RedisState(Journal):
    """See the module docstring."""

    def __init__(
        self, settings: RedisQueueConfig, *, base: Callable[[], dict[str, Any]], capacity: int
    ) -> None:
        self.settings = settings
        self.url, self._password = _redis_url(settings.url)
        self.keys = codec.Keys(settings.namespace)
        self.partitions = settings.partitions
        self.capacity = capacity
        self.instance = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._base = base
        self._client: Any = None
        self.leases: Leases | None = None
        self._n = 0
        self._seq = 0
        self.outbox = Outbox(self)
        self._reads: Link | None = None
        """The reader's connection (the outbox has its own)."""
        self._local: dict[str, Item] = {}
        """Events posted here with a ticket, by id, until dispatched (here or elsewhere)."""
        self.streams = [self.keys.stream(p) for p in range(self.partitions)]
        """The partition streams' keys, by partition."""
        self._inflight: dict[int, tuple[int, bytes, bytes]] = {}
        """seq -> (partition, entry id, raw entry) of every item handed to the lanes, not done."""
        self._held: defaultdict[int, set[bytes]] = defaultdict(set)
        self._replies_read: list[bytes] = []
        """Reply entries read since the last lease round, which acknowledges them and trims
        them from the stream (one ``XACK`` a round, not one per batch of replies)."""
        self._reread_replies = False
        """Redis was lost: reply entries delivered meanwhile are read again from the pending
        list before new ones."""
        self._ready: set[int] = set()
        """Owned partitions resynced and being read."""
        self._draining: set[int] = set()
        self._reading: frozenset[int] = frozenset()
        """The partitions of the ``XREADGROUP`` under way (kept until it returned)."""
        self._stranded: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._delivering = True
        self.connected = False
        self.lost_since: float | None = None
        self.reconnects = 0
        self.refused = 0
        self.posted = 0
        self.read = 0
        self.claimed = 0
        self._snapshot: dict[int, dict[str, Any]] = {}
        self._dead_letters = 0

    async def _ensure_groups(self) -> None:
        """The consumer group of every partition stream and of this instance's reply stream."""
        pipe = self._client.pipeline(transaction=False)
        for partition in range(self.partitions):
            pipe.xgroup_create(self.keys.stream(partition), codec.GROUP, id="0", mkstream=True)
        pipe.xgroup_create(self.keys.reply(self.instance), codec.GROUP, id="0", mkstream=True)
        for result in await pipe.execute(raise_on_error=False):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        name = getattr(coro, "__qualname__", None)  # what queue.task_failed names
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A task of the queue ended. Its readers and lease rounds handle what Redis can do to
        them; one that died anyway of an error is a bug that leaves partitions unread (or
        acks unsent): said loudly here, not only as asyncio's "Task exception was never
        retrieved" at exit."""
        self._tasks.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        log.error(
            "queue.task_failed",
            task=task.get_name(),
            error=f"{type(exc).__name__}: {exc}",
            exc_info=exc,
            fix="restart gatewayd to read the queue again, and report this as a bug",
        )

    def _up(self) -> None:
        if self.connected:
            return
        if self.lost_since is not None:
            self.reconnects += 1
            log.info(
                "queue.redis_back",
                url=self.url,
                down_s=round(time.monotonic() - self.lost_since, 3),
            )
        self.connected = True
        self.lost_since = None
        self.outbox.wake()

    def _down(self, exc: BaseException) -> None:
        if self.connected or self.lost_since is None:
            log.error(
                "queue.redis_lost",
                url=self.url,
                error=f"{type(exc).__name__}: {exc}",
                note="producers wait, dispatch of owned partitions stops; reconnecting",
                fix="bring Redis back (nothing accepted is lost)",
            )
            self.lost_since = time.monotonic()
        self.connected = False
        self._ready.clear()  # back: every owned partition is resynced before it is read
        self._reread_replies = True

    def _reply(self, origin: str, event: HookEvent, report: DispatchReport) -> None:
        raw = codec.encode_reply(event, (report[0], report[1], report[2]), self._base())
        self.outbox.reply(origin, raw)

    def retry_raw(self, raw: str, only: tuple[str, ...]) -> tuple[int, str]:
        """A dead letter's entry for ``XADD`` again, limited to the hooks that failed."""
        record = loads(raw)
        record["only"] = list(only)
        record["posted"] = time.time()
        record.pop("reply", None)
        return codec.partition_of(record["session"], self.partitions), json.dumps(record)
