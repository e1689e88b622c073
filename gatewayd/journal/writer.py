"""The SQLite journal's writer process, seen from the event loop.

:class:`~gatewayd.journal.sqlite.SqliteJournal` hands each write (a batch's rows and the marks
queued with it, :mod:`.writes`) to a helper process, which commits it on a connection of its
own (with ``gateway.queue.sync: full``, ``synchronous=FULL``: the fsync inside the commit) and
answers. The event loop only lays the batch's values out flat, ``marshal``s them and reads one
answer a write: the SQLite work (binding, the WAL frames' ``pwrite``s, the locks, the fsync),
45-90 us a commit on the loop before, is the helper's (bench/NOTES.md, issue 18, session 9).

Why a process and not the journal's thread: a thread must take the GIL back to wake, to bind
and after its fsync, and while the event loop dispatches it gets it only when the loop goes idle
or the 5 ms switch interval ends (issue 18, session 8). The helper has a GIL of its own.

The protocol: length-prefixed ``marshal`` frames (:func:`.writes.frame`), one request a write on
the request pipe, one :data:`~.writes.Answer` for each, in order, on the answer pipe, which the
loop watches. Requests are written without blocking: what a full pipe does not take is written
when it drains (``add_writer``), so a large batch never stalls the loop.

The helper ignores SIGINT and SIGTERM (the daemon's drain still writes), exits when its request
pipe closes, and is killed by the kernel if the daemon dies (:func:`.writes.die_with_parent`).
If it cannot be started or goes away, the journal writes on the loop instead (``here``: the
loop commits at ``NORMAL``, the journal's thread syncs, and catches up after its checkpoints as
the helper would), after one ``journal.writer_lost`` warning: slower, never less safe. The
writes it had not answered are written there again, in order, unless their rows are in the file
already (:func:`.writes.committed`).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

import gatewayd
from gatewayd.journal.writes import Answer, Request, frame, unframe

log = structlog.get_logger("gatewayd.journal")

Answered = Callable[[Answer], None]
"""Called on the event loop with a request's answer."""
Here = Callable[[Request, Answered, bool], None]
"""Writes a request without the helper (on the loop), then answers; the flag: the helper may
have written it already (it went away before answering)."""

PROGRAM = """\
import sys
sys.path.insert(0, sys.argv[1])
from gatewayd.journal.writes import serve
serve(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6]))
"""
"""The helper's program: ``python -I -S -c PROGRAM <gatewayd's parent dir> <request fd>
<answer fd> <journal path> <sync> <daemon pid>`` (no site packages: :mod:`.writes` needs
none)."""
SOURCE = str(Path(gatewayd.__file__).resolve().parent.parent)


class Writer:
    """Writes the journal's requests in the helper process; see the module docstring. Event
    loop only."""

    def __init__(self, loop: asyncio.AbstractEventLoop, path: Path, sync: str, here: Here) -> None:
        self._loop = loop
        self._path = path
        self._sync = sync
        self._here = here
        self._proc: subprocess.Popen[bytes] | None = None
        self._requests = -1
        self._answers = -1
        self._waiting: deque[tuple[Request, Answered]] = deque()
        """Requests sent to the helper and not answered yet, oldest first."""
        self._out = bytearray()
        """Request bytes the pipe did not take yet (written by :meth:`_drain`)."""
        self._in = bytearray()

    @property
    def helper_pid(self) -> int | None:
        """The helper's pid, or None when the loop writes (:data:`Here`)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the helper (its interpreter starts beside the daemon's own start); if it
        cannot start, the loop writes."""
        requests_r, requests_w = os.pipe()
        answers_r, answers_w = os.pipe()
        argv = [sys.executable, "-I", "-S", "-c", PROGRAM, SOURCE]
        args = [str(requests_r), str(answers_w), str(self._path), self._sync, str(os.getpid())]
        try:
            self._proc = subprocess.Popen(
                [*argv, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(requests_r, answers_w),
            )
        except OSError as exc:
            for fd in (requests_w, answers_r):
                os.close(fd)
            self._lost(f"cannot start: {exc}")
            return
        finally:
            os.close(requests_r)
            os.close(answers_w)
        self._requests = requests_w
        self._answers = answers_r
        os.set_blocking(requests_w, False)
        os.set_blocking(answers_r, False)
        self._loop.add_reader(answers_r, self._read)

    def send(self, request: Request, answered: Answered) -> None:
        """Write ``request``; ``answered`` follows on the loop (requests are answered in the
        order they were sent)."""
        if self._proc is None:
            self._here(request, answered, False)
            return
        self._waiting.append((request, answered))
        data = frame(request)
        if self._out:  # the pipe was full: behind what waits (_drain)
            self._out += data
            return
        try:
            written = os.write(self._requests, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:  # BrokenPipeError: the helper is gone
            self._lost(str(exc))
            return
        if written < len(data):
            self._out += data[written:]
            self._loop.add_writer(self._requests, self._drain)

    def _drain(self) -> None:
        try:
            written = os.write(self._requests, self._out)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(str(exc))
            return
        del self._out[:written]
        if not self._out:
            self._loop.remove_writer(self._requests)

    def _read(self) -> None:
        try:
            data = os.read(self._answers, 4096)  # answers are ~20 bytes each
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(str(exc))
            return
        if not data:
            self._lost("exited")
            return
        self._in += data
        for answer in unframe(self._in):
            _, answered = self._waiting.popleft()
            answered(answer)

    def _lost(self, why: str) -> None:
        """The helper cannot be used: its unanswered requests, and every later one, are
        written on the loop."""
        proc = self._proc
        self._stop()
        log.warning(
            "journal.writer_lost",
            reason=why,
            exit=proc.poll() if proc is not None else None,
            note="the event loop writes the journal instead (slower, as safe)",
        )
        waiting, self._waiting = self._waiting, deque()
        for request, answered in waiting:
            self._here(request, answered, True)

    def _stop(self) -> None:
        if self._answers >= 0:
            self._loop.remove_reader(self._answers)
            os.close(self._answers)
            self._answers = -1
        if self._requests >= 0:
            if self._out:
                self._loop.remove_writer(self._requests)
                self._out.clear()
            os.close(self._requests)  # the helper reads EOF and exits
            self._requests = -1
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    async def close(self) -> None:
        """Stop the helper once it has written what it was sent (the journal waited for its
        last answer: what is left are start counts)."""
        proc = self._proc
        if proc is None:
            return
        self._loop.remove_reader(self._answers)
        os.close(self._answers)
        self._answers = -1
        if self._out:
            self._loop.remove_writer(self._requests)
            os.set_blocking(self._requests, True)
            try:
                while self._out:
                    del self._out[: os.write(self._requests, self._out)]
            except OSError:  # gone: what it had not read is lost, as at a crash (start counts)
                self._out.clear()
        os.close(self._requests)
        self._requests = -1
        self._proc = None
        self._waiting.clear()
        try:
            await anyio.to_thread.run_sync(proc.wait, 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            await anyio.to_thread.run_sync(proc.wait)
