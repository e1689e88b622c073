"""A raw-socket Python client of the control socket: the baseline the clients are measured against.

``python -m bench.rawsocket --socket PATH --mode pipeline|roundtrip --count N`` prints one JSON
line ``{"mode", "count", "seconds", "rate", "p50_us", "p99_us"}``, the same command line and
output as the TypeScript client's driver (``clients/typescript/bench/driver.mjs``), so the two
run alike as processes of their own against the same daemon.

It is what a program with no client library does: a blocking Unix socket, JSON encoded and
decoded with the standard library, every reply checked for ``ok``.

``pipeline``  ``count`` ``trigger`` requests (``wait: false``, one session) encoded, then
              written by a thread as fast as the socket takes them while this thread reads the
              replies; ``seconds`` from the first request encoded to the last reply read (the
              TypeScript client's time holds its encoding too). Encoding them all first, then one
              ``sendall``, is the fastest way measured here: encoding and writing 256 or 4,096
              at a time in the writing thread ran at 0.72x and 0.64x of it (the two threads
              taking the GIL from each other).
``roundtrip`` ``count`` ``message`` requests one after the other, each timed from its send to
              its reply (after 50 untimed ones).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from time import perf_counter
from typing import Any

from bench.harness import median, percentile

SESSION = "agent:main:bench-connect"
EVENT = "command:work"
WARMUP = 50


def trigger(n: int, session: str, event: str) -> dict[str, Any]:
    """The ``n``-th pipelined request."""
    return {"id": n, "op": "trigger", "event": event, "sessionKey": session, "wait": False}


def message(n: int, session: str) -> dict[str, Any]:
    """The ``n``-th round-trip request."""
    return {"id": n, "op": "message", "sessionKey": session, "text": "hello"}


class Lines:
    """Reply lines off a blocking socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def read(self) -> bytes:
        while (nl := self.buf.find(b"\n")) < 0:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf[:nl], self.buf[nl + 1 :]
        return line


def _check(line: bytes, want: int) -> None:
    reply = json.loads(line)
    if reply.get("ok") is not True or reply.get("id") != want:
        raise RuntimeError(f"reply {want}: {reply}")


def pipeline(path: str, count: int, session: str, event: str) -> dict[str, Any]:
    dumps = json.dumps
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        lines = Lines(sock)
        start = perf_counter()
        data = "".join([dumps(trigger(n, session, event)) + "\n" for n in range(count)]).encode()
        sender = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
        sender.start()
        for n in range(count):
            _check(lines.read(), n)
        seconds = perf_counter() - start
        sender.join()
    rate = count / seconds
    return {
        "mode": "pipeline",
        "count": count,
        "seconds": seconds,
        "rate": rate,
        "p50_us": None,
        "p99_us": None,
    }


def roundtrip(path: str, count: int, session: str) -> dict[str, Any]:
    times: list[float] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        lines = Lines(sock)
        start = perf_counter()
        for n in range(WARMUP + count):
            sent = perf_counter()
            sock.sendall(json.dumps(message(n, session)).encode() + b"\n")
            _check(lines.read(), n)
            if n >= WARMUP:
                times.append(perf_counter() - sent)
        seconds = perf_counter() - start
    return {
        "mode": "roundtrip",
        "count": count,
        "seconds": seconds,
        "rate": (WARMUP + count) / seconds,
        "p50_us": median(times) * 1e6,
        "p99_us": percentile(times, 99) * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rawsocket", description=__doc__)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--mode", choices=["pipeline", "roundtrip"], required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--session", default=SESSION)
    parser.add_argument("--event", default=EVENT)
    args = parser.parse_args(argv)
    if args.mode == "pipeline":
        result = pipeline(args.socket, args.count, args.session, args.event)
    else:
        result = roundtrip(args.socket, args.count, args.session)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
