"""The command router's per-session posting lock (gatewayd/commands.py ``SessionLocks``).

A message's events are posted as one uninterrupted run per session: the lock is first come,
first served, handed from one holder to the next, and gone from the router's table once nobody
holds or waits for it. A waiter cancelled before its turn, or just as the lock was handed to
it, must neither take the lock nor leave it held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

from gatewayd.commands import SessionLocks


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def test_holders_take_turns_in_arrival_order_and_the_table_empties() -> None:
    table = SessionLocks()
    order: list[tuple[str, int]] = []

    async def user(i: int) -> None:
        async with table.lock("s"):
            order.append(("in", i))
            await anyio.sleep(0.005)
            order.append(("out", i))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(user, i)
                await anyio.lowlevel.checkpoint()  # arrive in order

    run(main)
    assert order == [(step, i) for i in range(4) for step in ("in", "out")]
    assert table.locks == {}


def test_a_waiter_cancelled_before_its_turn_never_holds_it() -> None:
    table = SessionLocks()
    order: list[int] = []

    async def user(i: int, hold: float) -> None:
        async with table.lock("s"):
            order.append(i)
            await anyio.sleep(hold)

    async def impatient() -> None:
        with anyio.move_on_after(0.01):
            await user(1, 0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(user, 0, 0.05)
            await anyio.sleep(0.001)
            tg.start_soon(impatient)
            await anyio.sleep(0.001)
            tg.start_soon(user, 2, 0)

    run(main)
    assert order == [0, 2]
    assert table.locks == {}


def test_a_waiter_cancelled_as_the_lock_is_handed_to_it_hands_it_on() -> None:
    table = SessionLocks()
    order: list[str] = []
    tasks: list[asyncio.Task[Any]] = []

    async def first_waiter() -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        async with table.lock("s"):
            order.append("first")

    async def second_waiter() -> None:
        async with table.lock("s"):
            order.append("second")

    async def main() -> None:
        holder = table.lock("s")
        await holder.__aenter__()
        async with anyio.create_task_group() as tg:
            tg.start_soon(first_waiter)
            await anyio.lowlevel.checkpoint()
            tg.start_soon(second_waiter)
            await anyio.lowlevel.checkpoint()
            await holder.__aexit__(None, None, None)  # handed to the first waiter...
            tasks[0].cancel()  # ...which is cancelled before it runs

    run(main)
    assert order == ["second"]
    assert table.locks == {}
