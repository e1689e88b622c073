"""The SQLite journal's writer process, seen from the event loop: the one way events are committed.

:class:`~gatewayd.journal.sqlite.SqliteJournal` hands each write (a batch's rows and the marks
queued with it, :mod:`.writes`) to a helper process, which commits it on a connection of its own
(with ``gateway.queue.sync: full``, ``synchronous=FULL``: the fsync inside the commit) and
answers. The event loop only lays the batch's values out flat, ``marshal``s them and reads one
answer a write: the SQLite work (binding, the WAL frames' ``pwrite``s, the locks, the fsync) is
the helper's, 45-90 us a commit that the loop would otherwise spend (measured by ``perf`` and
cProfile under the endtoend load).

Why a process and not a thread: a thread must take the GIL back to wake, to bind and after its
fsync, and while the event loop dispatches it gets it only when the loop goes idle or the 5 ms
switch interval ends. The helper has a GIL of its own.

The protocol: length-prefixed ``marshal`` frames (:func:`.writes.frame`), one request a write on
the request pipe, one :data:`~.writes.Answer` for each, in order, on the answer pipe, which the
loop watches. Requests are written without blocking: what a full pipe does not take is written
when it drains (``add_writer``), so a large batch never stalls the loop.

The helper ignores SIGINT and SIGTERM (the daemon's drain still writes), exits when its request
pipe closes, and is killed by the kernel if the daemon dies (:func:`.writes.die_with_parent`).
It must run: if it cannot be started when the journal opens, the journal does not open (the
daemon's start fails with the reason). If it goes away while running (killed, out of memory),
``journal.writer_lost`` says so, the writes it had not answered are answered as failed (their
events are refused with ``journal_error``; their rows, in the file if it committed them before
going away, are deleted with the next marks), and the next write starts a new one.
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
from gatewayd.journal.base import JournalError
from gatewayd.journal.writes import FAILED, Answer, Request, frame, unframe

log = structlog.get_logger("gatewayd.journal")

Answered = Callable[[Answer], None]
"""Called on the event loop with a request's answer."""

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

    def __init__(self, loop: asyncio.AbstractEventLoop, path: Path, sync: str) -> None:
        self._loop = loop
        self._path = path
        self._sync = sync
        self._proc: subprocess.Popen[bytes] | None = None
        self._requests = -1
        self._answers = -1
        self._waiting: deque[Answered] = deque()
        """The answer callbacks of requests sent and not answered yet, oldest first."""
        self._out = bytearray()
        """Request bytes the pipe did not take yet (written by :meth:`_drain`)."""
        self._in = bytearray()
        self._failing = False
        """The last start failed (logged once until one succeeds)."""
        self._closed = False

    @property
    def helper_pid(self) -> int | None:
        """The helper's pid, or None while none runs (the next write starts one)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the helper (its interpreter starts beside the daemon's own start);
        :class:`JournalError` when it cannot be."""
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
            raise JournalError(
                f"cannot start the journal's writer process ({sys.executable}): {exc}"
            ) from exc
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
        if self._proc is None and not self._restart(answered):
            return
        self._waiting.append(answered)
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

    def _restart(self, answered: Answered) -> bool:
        """Start a new helper for a write after the last one went away; when it cannot be
        started, that write is answered as failed (and the next write tries again)."""
        if self._closed:
            raise RuntimeError("the journal's writer is closed")
        try:
            self.start()
        except JournalError as exc:
            if not self._failing:
                log.error(
                    "journal.writer_failed",
                    error=str(exc),
                    note="events are refused until a writer process can start",
                    fix="see the error; restart gatewayd once it is fixed",
                )
            self._failing = True
            self._loop.call_soon(answered, (FAILED, str(exc), None))
            return False
        self._failing = False
        return True

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
            self._waiting.popleft()(answer)

    def _lost(self, why: str) -> None:
        """The helper went away: its unanswered requests are answered as failed, in order."""
        proc = self._proc
        self._stop()
        status = proc.poll() if proc is not None else None
        log.error(
            "journal.writer_lost",
            reason=why,
            exit=status,
            unanswered=len(self._waiting),
            note="the events of its unanswered writes are refused; the next write starts a "
            "new writer process",
        )
        error = f"the journal's writer process went away before answering ({why}, exit {status})"
        waiting, self._waiting = self._waiting, deque()
        self._in.clear()
        for answered in waiting:
            answered((FAILED, error, None))

    def stop(self) -> None:
        """Stop the helper (its unanswered writes are answered as failed); the next write
        starts a new one."""
        waiting, self._waiting = self._waiting, deque()
        self._stop()
        self._in.clear()
        for answered in waiting:
            answered((FAILED, "the journal's writer was stopped (its file was lost)", None))

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
        self._closed = True
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
