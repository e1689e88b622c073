"""Fixtures of the Redis queue tests: a private ``redis-server`` and gatewayd instances on it.

* ``redis_server``: a :class:`~tests.redis.redis_support.RedisServer` of its own per test;
* ``instances``: ``instances(n, **config)`` starts ``n`` gatewayd instances (each its own state
  dir with the recording hook) on that server; ``instances.add()`` starts one more; all are
  killed and their state dirs removed at teardown.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.journal.journal_support import recording_hook
from tests.redis.redis_support import RedisServer, instance_config
from tests.support.daemon import Daemon
from tests.support.hooks import write_hook_dir
from tests.support.state import new_state_dir, write_config


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()


class Instances:
    """gatewayd instances sharing one Redis; see the module docstring."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.daemons: list[Daemon] = []
        self.config: dict[str, Any] = {}
        self.delay_s = 0.0

    def __call__(self, n: int, *, delay_s: float = 0.0, **config: Any) -> list[Daemon]:
        self.config = config
        self.delay_s = delay_s
        return [self.add() for _ in range(n)]

    def add(self, *, start: bool = True) -> Daemon:
        state = new_state_dir()
        write_config(state, instance_config(self.server.url, **self.config))
        hook = recording_hook(delay_s=self.delay_s)
        write_hook_dir(state / "hooks", "recorder", events=["command:work"], handler=hook)
        daemon = Daemon(state)
        self.daemons.append(daemon)
        if start:
            daemon.start()
        return daemon

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.close()
            shutil.rmtree(daemon.state, ignore_errors=True)


@pytest.fixture
def instances(redis_server: RedisServer) -> Iterator[Instances]:
    group = Instances(redis_server)
    try:
        yield group
    finally:
        group.close()
