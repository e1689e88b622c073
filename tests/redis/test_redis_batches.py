"""What batching the Redis queue's writes could break: nothing accepted lost, each session's order.

An instance sends its posts, replies and acknowledgements as batches, one write each, one
batch in flight at a time, with a timeout per batch rather than per command. Here:

* the connection carrying a batch of events is cut halfway through its bytes (a proxy in front
  of a real ``redis-server``): Redis has the batch's first events, not the rest; the batch is
  sent again whole, so the first ones are in the stream twice, and every event is dispatched,
  each session's first dispatches in post order;
* Redis stops answering (``SIGSTOP``) while batches are in flight: each batch times out, its
  connection is dropped and it is sent again with backoff; the posters wait and are accepted
  once Redis answers (``SIGCONT``), and every event is dispatched in order;
* an instance is killed (``SIGKILL``) with a batch of posts in flight (Redis stopped under it)
  and acknowledgements not yet sent: the other instance takes its partitions over and
  dispatches every accepted event, each session's first dispatches in post order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from gatewayd.journal import redis_link
from tests.journal.backends import RedisStore, Running, running
from tests.redis.conftest import Instances, read_shared
from tests.redis.redis_support import RedisServer
from tests.redis.test_redis_many import check, owned
from tests.support.state import wait_until

pytestmark = [pytest.mark.xdist_group("redis")]

SESSIONS = 6
ROUNDS = 12


class CuttingProxy:
    """A unix-socket proxy in front of ``redis-server``. While :attr:`armed`, the first write
    from a client that carries at least :attr:`events` ``XADD`` commands is forwarded only
    halfway, and both sides of that connection are closed."""

    def __init__(self, target: Path, path: Path) -> None:
        self.target = target
        self.path = path
        self.url = f"unix://{path}"
        self.armed = 0
        self.events = 4
        self.cuts = 0
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.target))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            try:
                while data := await src.read(1 << 16):
                    if up and self.armed and data.count(b"XADD") >= self.events:
                        self.armed -= 1
                        self.cuts += 1
                        dst.write(data[: len(data) // 2])
                        await dst.drain()
                        return
                    dst.write(data)
                    await dst.drain()
            except OSError:
                return
            finally:
                writer.close()
                up_writer.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))


def first_seen(run: Running) -> dict[str, list[Any]]:
    """Each session's ``n`` in order of first dispatch (repeats left out)."""
    order: dict[str, list[Any]] = defaultdict(list)
    for session, ns in ((f"s{k}", run.ns(f"s{k}")) for k in range(SESSIONS)):
        for n in ns:
            if n not in order[session]:
                order[session].append(n)
    return order


async def post_rounds(run: Running, rounds: range) -> None:
    """Each round: one event per session, posted in one loop turn (one batch)."""
    for n in rounds:
        await asyncio.gather(*(run.post(f"s{k}", n) for k in range(SESSIONS)))


def all_in_order(run: Running, rounds: int) -> bool:
    return all(ns == list(range(rounds)) for ns in first_seen(run).values()) and (
        len(first_seen(run)) == SESSIONS
    )


@pytest.fixture
def store(redis_server: RedisServer) -> RedisStore:
    store = RedisStore(redis_server)
    store.settings = store.settings.model_copy(update={"wait_ms": 60_000})
    return store


def entries_added(store: RedisStore, server: RedisServer) -> int:
    """Entries the namespace's partition streams ever took (``XINFO STREAM``), trimmed or not."""
    with server.client() as client:
        return sum(
            int(client.xinfo_stream(f"{store.settings.namespace}:p:{p}")["entries-added"])
            for p in range(store.settings.partitions)
        )


@contextlib.asynccontextmanager
async def proxied(store: RedisStore, server: RedisServer) -> AsyncIterator[CuttingProxy]:
    async with CuttingProxy(server.socket, server.dir / "proxy.sock") as proxy:
        store.settings = store.settings.model_copy(update={"url": proxy.url})
        yield proxy


@pytest.fixture
def untrimmed(redis_server: RedisServer) -> Iterator[None]:
    """Each partition stream in one node while the test runs. A lease round trims what was
    acknowledged with ``XTRIM MINID ~``, which drops whole nodes (4 KiB by default, ~15 of
    these entries): a round that comes while a slow run is still checking would take the
    duplicates the test looks for. One node of up to 100 entries is never dropped."""
    with redis_server.client() as client:
        before = client.config_get("stream-node-max-bytes")["stream-node-max-bytes"]
        client.config_set("stream-node-max-bytes", 0)  # 0: no bound; entries bound it (100)
        try:
            yield
        finally:
            client.config_set("stream-node-max-bytes", before)


@pytest.mark.anyio
@pytest.mark.usefixtures("untrimmed")
async def test_a_connection_cut_in_the_middle_of_a_batch_loses_nothing_and_keeps_order(
    store: RedisStore, redis_server: RedisServer
) -> None:
    async with proxied(store, redis_server) as proxy, running(store) as run:
        await post_rounds(run, range(2))
        proxy.armed = 2  # the next two batches of events lose their connection halfway
        await post_rounds(run, range(2, ROUNDS))
        await run.until(lambda: all_in_order(run, ROUNDS), "every event dispatched")
    assert proxy.cuts == 2
    assert first_seen(run) == {f"s{k}": list(range(ROUNDS)) for k in range(SESSIONS)}
    # Cut halfway: Redis kept the batch's first events, and got them again from the resend.
    # Counted by each stream's ``entries-added``, which a lease round's trim of what was
    # acknowledged (every leaseMs / 3) leaves alone, unlike the entries themselves.
    assert entries_added(store, redis_server) > SESSIONS * ROUNDS
    assert set(store.recorded()) <= {d.id for d in run.seen}


@pytest.mark.anyio
async def test_batches_redis_does_not_answer_in_time_are_sent_again(
    store: RedisStore, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_link, "TIMEOUT_S", 0.3)
    assert redis_server.proc is not None
    pid = redis_server.proc.pid
    with structlog.testing.capture_logs() as logs:
        async with running(store) as run:
            await post_rounds(run, range(2))
            os.kill(pid, signal.SIGSTOP)
            try:
                posting = asyncio.ensure_future(post_rounds(run, range(2, ROUNDS)))
                # Several batch timeouts pass while the posters wait.
                await asyncio.sleep(1.5)
                assert not posting.done()
            finally:
                os.kill(pid, signal.SIGCONT)
            await posting
            await run.until(lambda: all_in_order(run, ROUNDS), "every event dispatched")
    assert first_seen(run) == {f"s{k}": list(range(ROUNDS)) for k in range(SESSIONS)}
    lost = [e for e in logs if e["event"] == "queue.redis_lost"]
    assert lost and "did not answer" in lost[0]["error"], lost
    assert [e for e in logs if e["event"] == "queue.redis_back"]


def _sessions_of(partitions: set[int], count: int, total: int) -> list[str]:
    found = (f"k{i}" for i in range(100_000) if zlib.crc32(f"k{i}".encode()) % total in partitions)
    return [next(found) for _ in range(count)]


@contextlib.contextmanager
def stopped(server: RedisServer) -> Iterator[None]:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.slow
def test_an_instance_killed_with_a_batch_in_flight_loses_nothing_accepted(
    instances: Instances, redis_server: RedisServer
) -> None:
    partitions = 4
    first, second = instances(2, partitions=partitions)
    wait_until(lambda: owned(first) and owned(second), timeout=120, what="both own partitions")
    sessions = _sessions_of(set(owned(first)), 3, partitions)
    accepted: list[tuple[str, int]] = []

    def post(daemon: Any, n: int) -> None:
        with daemon.control() as control:
            for session in sessions:
                reply = control.request(
                    "trigger", event="command:work", sessionKey=session, context={"n": n},
                    wait=False,
                )  # fmt: skip
                if reply.get("ok"):
                    accepted.append((session, n))

    for n in range(10):
        post(first, n)
    in_flight = threading.Thread(target=lambda: _quietly(post, first, 10), daemon=True)
    with stopped(redis_server):  # its next batch is written and never answered
        in_flight.start()
        time.sleep(0.5)
        first.proc.send_signal(signal.SIGKILL)
        first.wait()
    in_flight.join(30)
    wait_until(lambda: len(owned(second)) == partitions, timeout=120, what="the takeover")
    for n in range(11, 20):
        post(second, n)

    def dispatched() -> list[dict[str, Any]] | None:
        records = read_shared(instances.record)
        return records if {(r["session"], r["n"]) for r in records} >= set(accepted) else None

    records = wait_until(dispatched, timeout=120, what="every accepted event dispatched")
    repeats, order = check(records, accepted)
    assert {(s, n) for s, n in accepted if n < 10} == {(s, n) for s in sessions for n in range(10)}
    assert all(order[s][:10] == list(range(10)) for s in sessions), order
    print(f"killed with a batch in flight: {len(accepted)} accepted, {repeats} repeats")
    assert second.stop() == 0


def _quietly(post: Any, daemon: Any, n: int) -> None:
    """A post to a daemon about to be killed: its connection ends without an answer."""
    with contextlib.suppress(OSError, ValueError, AssertionError):
        post(daemon, n)
