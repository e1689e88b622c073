"""The fsync of the SQLite journal's write-ahead log, done by a helper process.

:class:`~gatewayd.journal.sqlite.SqliteJournal` commits a batch on the event loop with
``synchronous=NORMAL``: SQLite writes the batch's WAL frames (``write()``) and returns without
syncing them. With ``gateway.queue.sync: full`` the batch's posters are told "accepted" only
once an ``fdatasync`` of the ``-wal`` file that began after that commit returned. That is what
SQLite's ``synchronous=FULL`` adds in WAL mode, "an additional sync operation of the WAL file
after each transaction commit" (https://sqlite.org/pragma.html#pragma_synchronous); checkpoints
and the WAL header sync themselves under ``NORMAL`` as under ``FULL``.

Why a process, and not the journal's thread: a thread must take the GIL back after its
``fdatasync`` (and to wake up for one), and while the event loop dispatches the previous batch
it waits for it until the loop goes idle or the 5 ms switch interval ends; the commit then no
longer overlaps the dispatch. The helper has a GIL of its own. Its protocol: one byte on the
request pipe asks for one ``fdatasync``; it answers one line, ``0`` or the ``errno``, on the
answer pipe, which the event loop watches. Measured with the end-to-end ``message`` op
(bench/NOTES.md, issue 18, session 8): durable throughput 0.48-0.55x -> 0.81x of the in-memory
queue's, same run, against commits in the journal's thread with ``synchronous=FULL``.

The helper ignores SIGINT and SIGTERM (a service stop signals the whole cgroup: the daemon's
drain still needs it) and exits when its request pipe closes: the daemon closed it, or died.
If it cannot be started or goes away, the journal's thread syncs instead (``fallback``), after
one ``journal.syncer_lost`` warning: slower, never less safe. A sync requested before the helper
went away is done again there (a second ``fdatasync`` is harmless).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable

import structlog

log = structlog.get_logger("gatewayd.journal")

Done = Callable[[OSError | None], None]
"""Called on the event loop once per :meth:`Syncer.request`, in order: ``None`` when the file
is synced, else the error ``fdatasync`` raised."""
Fallback = Callable[[Callable[[], None]], None]
"""Runs a function on the journal's thread (its job queue's ``put``)."""

HELPER = """\
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
requests, answers, fd = (int(arg) for arg in sys.argv[1:4])
while True:
    asked = os.read(requests, 64)
    if not asked:
        break
    for _ in asked:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            os.write(answers, b"%d\\n" % (exc.errno or 5))
        else:
            os.write(answers, b"0\\n")
"""
"""The helper's program: ``python -I -S -c HELPER <request fd> <answer fd> <wal fd>``."""


class Syncer:
    """Syncs the file open as ``fd`` on request; see the module docstring. Event loop only."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, done: Done, fallback: Fallback
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._done = done
        self._fallback = fallback
        self._proc: subprocess.Popen[bytes] | None = None
        self._requests = -1
        self._answers = -1
        self._asked = 0
        """Syncs requested from the helper and not answered yet."""
        self._partial = b""

    @property
    def helper_pid(self) -> int | None:
        """The helper process's pid, or None when the journal's thread syncs."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the helper (about 10 ms); if it cannot start, the journal's thread syncs."""
        requests_r, requests_w = os.pipe()
        answers_r, answers_w = os.pipe()
        argv = [sys.executable, "-I", "-S", "-c", HELPER]
        try:
            self._proc = subprocess.Popen(
                [*argv, str(requests_r), str(answers_w), str(self._fd)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(requests_r, answers_w, self._fd),
            )
        except OSError as exc:
            for fd in (requests_r, requests_w, answers_r, answers_w):
                os.close(fd)
            self._lost(f"cannot start: {exc}")
            return
        finally:
            if self._proc is not None:
                os.close(requests_r)
                os.close(answers_w)
        self._requests = requests_w
        self._answers = answers_r
        os.set_blocking(answers_r, False)
        self._loop.add_reader(answers_r, self._read)

    def request(self) -> None:
        """Sync the file: everything written to it before this call. ``done`` follows."""
        if self._proc is None:
            self._in_thread()
            return
        try:
            os.write(self._requests, b"s")
        except OSError as exc:  # BrokenPipeError: the helper is gone
            self._asked += 1
            self._lost(str(exc))
            return
        self._asked += 1

    def _read(self) -> None:
        try:
            data = os.read(self._answers, 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(str(exc))
            return
        if not data:
            self._lost("exited")
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._asked -= 1
            code = int(line)
            self._done(None if code == 0 else OSError(code, os.strerror(code)))

    def _in_thread(self) -> None:
        fd, loop, done = self._fd, self._loop, self._done

        def sync() -> None:
            try:
                os.fdatasync(fd)
            except OSError as exc:
                loop.call_soon_threadsafe(done, exc)
            else:
                loop.call_soon_threadsafe(done, None)

        self._fallback(sync)

    def _lost(self, why: str) -> None:
        """The helper cannot be used: its unanswered syncs, and every later one, go to the
        journal's thread."""
        proc = self._proc
        log.warning(
            "journal.syncer_lost",
            reason=why,
            exit=proc.poll() if proc is not None else None,
            note="the journal's thread syncs the journal instead (slower, as safe)",
        )
        self._stop()
        asked, self._asked = self._asked, 0
        for _ in range(asked):
            self._in_thread()

    def _stop(self) -> None:
        if self._answers >= 0:
            self._loop.remove_reader(self._answers)
            os.close(self._answers)
            self._answers = -1
        if self._requests >= 0:
            os.close(self._requests)  # the helper reads EOF and exits
            self._requests = -1
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        """Stop the helper (after the last answer: the journal waits for it)."""
        self._stop()
