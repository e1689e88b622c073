"""Fixtures of the Redis queue tests: a private ``redis-server`` and gatewayd instances on it.

* ``redis_server``: a :class:`~tests.redis.redis_support.RedisServer` of its own per test;
* ``instances``: ``instances(n, **config)`` starts ``n`` gatewayd instances (each its own state
  dir with the recording hook) on that server; ``instances.add()`` starts one more; all are
  killed and their state dirs removed at teardown. Every instance's hook appends its
  dispatches to one shared file, :attr:`Instances.record` (``{id, session, n, pid}`` lines, in
  dispatch order across instances: appends of one short line are atomic), and answers
  ``n=<n> pid=<pid>``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redis.redis_support import RedisServer, instance_config
from tests.support.daemon import Daemon
from tests.support.fixtures import reported
from tests.support.hooks import write_hook_dir
from tests.support.inprocess import InProcess
from tests.support.state import new_state_dir, write_config


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()


HOOK = """
import json, os

PATH = RECORD


async def handler(event):
    n = event.context.get("n")
    line = json.dumps({"id": event.id, "session": event.session_key, "n": n, "pid": os.getpid()})
    with open(PATH, "a") as f:
        f.write(line + "\\n")
    event.messages.append(f"n={n} pid={os.getpid()}")
"""


def read_shared(path: Path) -> list[dict[str, Any]]:
    """The shared record's lines (a line cut short by a kill -9 is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


class Instances:
    """gatewayd instances sharing one Redis; see the module docstring."""

    def __init__(self, server: RedisServer, report: list[Daemon | InProcess]) -> None:
        self.server = server
        self.daemons: list[Daemon] = []
        """Every instance made."""
        self._report = report
        """The failed test's report shows the instances' last log lines."""
        self.config: dict[str, Any] = {}
        self.record = server.dir / "record.jsonl"

    def __call__(self, n: int, **config: Any) -> list[Daemon]:
        self.config = config
        return [self.add() for _ in range(n)]

    def add(self, *, start: bool = True, hooks: dict[str, str] | None = None) -> Daemon:
        """One more instance; ``hooks``: more hooks on ``command:work`` (name -> handler)."""
        state = new_state_dir()
        write_config(state, instance_config(self.server.url, **self.config))
        hook = HOOK.replace("RECORD", repr(str(self.record)))
        write_hook_dir(state / "hooks", "recorder", events=["command:work"], handler=hook)
        for name, handler in (hooks or {}).items():
            write_hook_dir(state / "hooks", name, events=["command:work"], handler=handler)
        daemon = Daemon(state)
        self.daemons.append(daemon)
        self._report.append(daemon)
        if start:
            daemon.start()
        return daemon

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.close()
            shutil.rmtree(daemon.state, ignore_errors=True)


@pytest.fixture
def instances(redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Instances]:
    group = Instances(redis_server, reported(request.node))
    try:
        yield group
    finally:
        group.close()
