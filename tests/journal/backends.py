"""The three journal backends behind one harness: what the conformance suite runs against.

A :class:`Store` is where one backend keeps its events between runs: nothing (memory), an
SQLite file, or a namespace on a real ``redis-server`` (a private unix socket,
:class:`tests.redis.redis_support.RedisServer`). :meth:`Store.journal` makes a new journal
object on it, as a daemon's start does, so two journals made one after the other are a restart.
:meth:`Store.recorded` reads from outside the daemon which events the store holds, and
:meth:`Store.full` takes the store's room away (a 2 MiB tmpfs filled up; Redis at a
``maxmemory`` of 1 byte).

:func:`running` runs a journal the way the gateway does: a :class:`~gatewayd.triggers.
TriggerQueue` bound to it, the events :meth:`~gatewayd.journal.base.Journal.open` returns
restored first, a :class:`~gatewayd.dispatcher.Dispatcher` with real handlers from a
:class:`~gatewayd.hooks.registry.HookRegistry`; on the way out the dispatcher drains (for at
most ``drain_s``: what is still running is cancelled and stays unfinished) and the journal
closes.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import subprocess
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatewayd.config import RedisQueueConfig
from gatewayd.dispatcher import Dispatcher
from gatewayd.hooks.events import HookEvent, create_hook_event
from gatewayd.hooks.registry import HookRegistry
from gatewayd.journal.base import Journal
from gatewayd.journal.memory import MemoryJournal
from gatewayd.journal.redis_queue import RedisJournal
from gatewayd.journal.sqlite import SqliteJournal
from gatewayd.triggers import TriggerQueue
from tests.redis.redis_support import RedisServer

KEY = "command:work"
"""The event every test posts."""
Handler = Callable[[HookEvent], Awaitable[None]]


class Store(ABC):
    """Where one backend keeps its events; see the module docstring."""

    name: str
    durable: bool

    @abstractmethod
    def journal(self, *, retain_done: int = 0) -> Journal:
        """A new journal on this store, not opened (a daemon's start)."""

    def recorded(self) -> list[str]:
        """The ids of the events the store holds, read from outside the journal."""
        raise NotImplementedError(f"the {self.name} journal stores nothing")

    def limit(self) -> None:
        """Give the store a room :meth:`full` can take away (before its first journal opens)."""
        pytest.skip(f"the {self.name} journal has no store to fill")

    @contextlib.contextmanager
    def full(self) -> Iterator[None]:
        """No room in the store while in the block (after :meth:`limit`)."""
        pytest.skip(f"the {self.name} journal has no store to fill")
        yield


class MemoryStore(Store):
    name = "memory"
    durable = False

    def journal(self, *, retain_done: int = 0) -> Journal:
        return MemoryJournal()


class SqliteStore(Store):
    """``<dir>/journal/events.db``; :meth:`limit` needs root (a tmpfs is mounted there)."""

    name = "sqlite"
    durable = True

    def __init__(self, directory: Path) -> None:
        self.dir = directory / "journal"
        self.path = self.dir / "events.db"
        self.mounted = False

    def journal(self, *, retain_done: int = 0) -> Journal:
        return SqliteJournal(self.path, base=dict, retain_done=retain_done, full_wait_s=0.3)

    def recorded(self) -> list[str]:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            epoch = conn.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()[0]
            seqs = conn.execute("SELECT seq FROM events ORDER BY seq").fetchall()
        return [f"{epoch}-{seq}" for (seq,) in seqs]

    def limit(self) -> None:
        """The journal's directory as a 2 MiB tmpfs, unmounted by :meth:`close`."""
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        self.dir.mkdir(mode=0o700, parents=True)
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(self.dir)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            pytest.skip(f"mount -t tmpfs was refused here: {proc.stderr.strip()}")
        self.mounted = True

    @contextlib.contextmanager
    def full(self) -> Iterator[None]:
        assert self.mounted, "limit() the store before its journal opens"
        filler = fill(self.dir)
        try:
            yield
        finally:
            filler.unlink()

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.dir)], check=False, capture_output=True)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem is full; return it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 512, 1):  # blocks, then what is left of the last one
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
        with pytest.raises(OSError) as exc:
            os.write(fd, b"\0")
        assert exc.value.errno == errno.ENOSPC, exc.value
    finally:
        os.close(fd)
    return filler


class RedisStore(Store):
    """A fresh namespace on ``server`` (4 partitions; leases of the default length: a shorter
    one lapses on a loaded machine and redelivers what was in hand, as it may)."""

    name = "redis"
    durable = True

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.settings = RedisQueueConfig.model_validate(
            {
                "url": server.url,
                "namespace": f"t{uuid.uuid4().hex[:8]}",
                "partitions": 4,
                "leaseMs": 5000,
                "waitMs": 2000,
            }
        )

    def journal(self, *, retain_done: int = 0) -> Journal:
        return RedisJournal(self.settings, base=dict, capacity=256)

    def limit(self) -> None:
        """Nothing to do: :meth:`full` sets Redis's ``maxmemory``."""

    def recorded(self) -> list[str]:
        ns = self.settings.namespace
        ids: list[str] = []
        with self.server.client() as client:
            for partition in range(self.settings.partitions):
                for _, fields in client.xrange(f"{ns}:p:{partition}"):
                    ids.append(json.loads(fields[b"e"])["id"])
        return ids

    @contextlib.contextmanager
    def full(self) -> Iterator[None]:
        with self.server.client() as client:
            client.config_set("maxmemory", "1")
            try:
                yield
            finally:
                client.config_set("maxmemory", "0")


@dataclass
class Dispatched:
    """One handler's run of one event."""

    hook: str
    id: str
    session: str
    n: Any


@dataclass
class Running:
    """A journal running under a queue and a dispatcher (:func:`running`)."""

    store: Store
    journal: Journal
    queue: TriggerQueue
    dispatcher: Dispatcher
    seen: list[Dispatched] = field(default_factory=list)

    async def post(self, session: str, n: Any, **context: Any) -> HookEvent:
        """Post one ``command:work`` event; returns it (with its id) once accepted."""
        event = create_hook_event("command", "work", session, {"n": n, **context})
        await self.queue.post(event)
        return event

    def ns(self, session: str, hook: str = "rec") -> list[Any]:
        """The ``n`` of every event ``hook`` ran for ``session``, in dispatch order."""
        return [d.n for d in self.seen if d.session == session and d.hook == hook]

    async def until(self, predicate: Callable[[], object], what: str) -> None:
        """Wait (at most 30 s, a bound against a hang) until ``predicate()`` is true."""
        with anyio.fail_after(30):
            # What the tests wait for (dispatches, counters, a store) has no event to wait on.
            while not predicate():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert predicate(), what

    async def query(self, action: str, **request: Any) -> dict[str, Any]:
        return await self.journal.query({"action": action, **request})


def recorder(hook: str, seen: list[Dispatched], gate: anyio.Event | None = None) -> Handler:
    """A handler that notes each run in ``seen`` (after ``gate`` is set, when given)."""

    async def handler(event: HookEvent) -> None:
        if gate is not None:
            await gate.wait()
        seen.append(Dispatched(hook, event.id, event.session_key, event.context.get("n")))

    return handler


def failing_until(flag: list[bool], hook: str, seen: list[Dispatched]) -> Handler:
    """A handler that notes each run and raises until ``flag`` holds ``True``."""

    async def handler(event: HookEvent) -> None:
        seen.append(Dispatched(hook, event.id, event.session_key, event.context.get("n")))
        if not flag:
            raise RuntimeError(f"not yet: {event.id}")

    return handler


@asynccontextmanager
async def running(
    store: Store,
    hooks: Mapping[str, Callable[[list[Dispatched]], Handler]] | None = None,
    *,
    retries: Mapping[str, int] | None = None,
    retain_done: int = 0,
    drain_s: float = 30.0,
    capacity: int = 256,
) -> AsyncIterator[Running]:
    """A new journal on ``store`` running with ``hooks`` (name -> a handler made with the
    run's ``seen`` list; by default one recorder, ``rec``); ``retries`` per hook name."""
    journal = store.journal(retain_done=retain_done)
    queue = TriggerQueue(capacity=capacity, journal=journal)
    registry = HookRegistry()
    seen: list[Dispatched] = []
    for name, make in (hooks or {"rec": lambda seen: recorder("rec", seen)}).items():
        registry.register(KEY, make(seen), name=name)
    table = dict(retries or {})

    def policy(hook: str) -> tuple[int, float]:
        return table.get(hook, 0), 0.01

    dispatcher = Dispatcher(queue, registry, concurrency=4, retry_policy=policy)
    run = Running(store, journal, queue, dispatcher, seen)
    queue.restore(await journal.open())
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            yield run
            await dispatcher.drain(drain_s)
    finally:
        await journal.close()
