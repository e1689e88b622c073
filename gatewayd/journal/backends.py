"""Which journal a gateway runs: the backend ``gateway.queue`` names, built but not opened.

The interface (:mod:`gatewayd.journal.base`) knows no backend; this module alone picks one, and
imports only that one (the Redis client and SQLite cost nothing to a daemon that does not use
them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gatewayd.config import Config
from gatewayd.journal.base import Journal


def make_journal(config: Config, base: Callable[[], dict[str, Any]]) -> Journal:
    """The backend ``gateway.queue.backend`` / ``gateway.queue.journal`` names, not yet opened.

    ``base`` returns the context every event carries (``cfg``, ``workspaceDir``): it is left out
    of the journal and put back on replay, so a record holds only the event's own context.
    """
    queue = config.settings.gateway.queue
    if queue.backend == "redis":
        from gatewayd.journal.redis_queue import RedisJournal

        return RedisJournal(queue.redis, base=base, capacity=queue.capacity)
    if queue.journal == "memory":
        from gatewayd.journal.memory import MemoryJournal

        return MemoryJournal()
    from gatewayd.journal.sqlite import SqliteJournal, journal_path

    return SqliteJournal(
        journal_path(config.paths.state),
        base=base,
        sync=queue.sync,
        retain_done=queue.retain_done,
        full_wait_s=queue.full_wait_ms / 1000,
    )


__all__ = ["make_journal"]
