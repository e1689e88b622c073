"""A control connection on the loop's transport (``gatewayd.channels.transport``).

What the control channel relies on, over a real socket pair, on uvloop and on plain asyncio:
bytes arrive in order and EOF ends the reading while replies can still be written; a peer that
sends without reading is held back once :data:`READ_HIGH` bytes wait unread; ``send`` returns
only once the kernel took every byte, so it waits on a peer that does not read; a lost
connection is ``BrokenResourceError`` to a writer.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from gatewayd.channels.transport import READ_HIGH, TransportStream

LOOPS = [pytest.param(True, id="uvloop"), pytest.param(False, id="asyncio")]


def run(main: Callable[[], Awaitable[Any]], uvloop: bool) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})


def pair() -> tuple[socket.socket, socket.socket]:
    ours, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)
    peer.setblocking(False)
    return ours, peer


async def read_all(stream: TransportStream) -> bytes:
    got = bytearray()
    with pytest.raises(anyio.EndOfStream):
        while True:
            got += await stream.receive()
    return bytes(got)


@pytest.mark.parametrize("uvloop", LOOPS)
def test_bytes_in_order_then_eof_and_the_reply_still_goes_out(uvloop: bool) -> None:
    ours, peer = pair()

    async def main() -> None:
        async with await TransportStream.attach(ours) as stream:
            assert stream.raw is ours
            peer.sendall(b'{"id": 1}\n{"id"')
            await anyio.sleep(0.01)
            peer.sendall(b": 2}\n")
            peer.shutdown(socket.SHUT_WR)
            assert await read_all(stream) == b'{"id": 1}\n{"id": 2}\n'
            with pytest.raises(anyio.EndOfStream):  # and again: EOF stays EOF
                await stream.receive()
            await stream.send(b"reply\n")  # the write side is still open
            await stream.send_eof()
        await anyio.sleep(0.05)  # the loop closes the transport on a later turn
        peer.setblocking(True)
        peer.settimeout(5)
        assert peer.recv(100) == b"reply\n"
        assert peer.recv(100) == b""

    try:
        run(main, uvloop)
    finally:
        peer.close()


@pytest.mark.parametrize("uvloop", LOOPS)
def test_a_peer_that_sends_and_never_reads_replies_is_held_back(uvloop: bool) -> None:
    ours, peer = pair()
    chunk = bytes(range(256)) * 256  # 64 KiB
    sent = 0

    async def main() -> None:
        nonlocal sent
        async with await TransportStream.attach(ours) as stream:
            # Nothing reads: the stream takes READ_HIGH, then the kernel's buffers fill up.
            blocked = 0
            while blocked < 20:
                try:
                    sent += peer.send(chunk)
                    blocked = 0
                except BlockingIOError:
                    blocked += 1
                await anyio.sleep(0.005)
            assert sent < READ_HIGH + 16 * len(chunk)  # bounded: reading was paused
            peer.shutdown(socket.SHUT_WR)
            got = await read_all(stream)  # reading resumes as the buffer drains
            assert len(got) == sent
            assert got == (chunk * (sent // len(chunk) + 1))[:sent]

            # A reply bigger than the kernel takes: send() waits for the peer to read it.
            reply = b"r" * (8 << 20)
            with anyio.move_on_after(0.2) as waited:
                await stream.send(reply)
            assert waited.cancelled_caught
            received = 0

            def drain() -> None:
                nonlocal received
                while True:
                    try:
                        received += len(peer.recv(1 << 20))
                    except BlockingIOError:
                        return

            while received < len(reply):
                drain()
                await anyio.sleep(0.005)
            assert received == len(reply)

    try:
        run(main, uvloop)
    finally:
        peer.close()


@pytest.mark.parametrize("uvloop", LOOPS)
def test_a_lost_connection_breaks_the_writer_and_ends_the_reader(uvloop: bool) -> None:
    ours, peer = pair()

    async def main() -> None:
        async with await TransportStream.attach(ours) as stream:
            peer.close()
            with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                while True:
                    await stream.receive()
            with pytest.raises(anyio.BrokenResourceError):
                for _ in range(100):  # the loss is seen by the first write, or the next
                    await stream.send(b"x" * 65536)
                    await anyio.sleep(0.001)

    run(main, uvloop)
