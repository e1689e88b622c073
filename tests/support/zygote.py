"""Start ``python -m gatewayd ARGS`` processes without paying for the interpreter's imports each
time: a fork server (a *zygote*) for the suite's daemons and CLI runs.

Why: an exec'd ``gatewayd run`` or config-loading CLI run spends 0.2-0.3 s of CPU importing its
dependencies (pydantic, structlog, anyio, PyYAML) before it does anything, and the suite starts
about 500 of them on two cores. Forked from here, a run costs ~0.08 s of CPU on average; the
whole suite 327 -> 143 s of CPU.

The zygote imports them once; each run is a child forked from it that then runs
``gatewayd/__main__.py`` as ``python -m gatewayd`` does (:mod:`runpy`, the same ``sys.argv``,
working directory, environment and standard streams), and leaves as the interpreter does
(non-daemon threads joined, ``atexit`` handlers run, streams flushed, the exit status of
``SystemExit``, or 1 after a traceback). What the child is *not* is a fresh interpreter. What
an interpreter settles at its start from the environment (``PYTHON*`` variables such as
``PYTHONUNBUFFERED``, the locale's ``LANG``/``LC_*``) is its zygote's, so each set of those
values has a zygote of its own, started with them. A terminal on a standard stream would show
the difference (the interpreter sets its streams up for the terminals it starts with), so
:func:`can_fork` sends such a run to a real ``exec``; the harness does the same for a command
prefix such as ``unshare``, and ``GATEWAYD_TESTS_EXEC=1`` sends every run there.

The server (this file run as a script, one per pytest process and set of interpreter settings,
started on first use) listens on a ``SOCK_SEQPACKET`` Unix socket and says ``ready`` on its
stdout. A request is one packet: JSON ``{"args", "env", "cwd"}`` with the child's stdin, stdout
and stderr passed as file descriptors (``SCM_RIGHTS``). The reply is one packet ``{"pid": N}``
when the child exists and one ``{"exit": code}`` once it has been reaped (``-signal`` when a
signal ended it, as :class:`subprocess.Popen` says it). The server waits on its children through
pidfds, logs its own trouble to ``zygote.log`` beside its socket, and exits, killing what still
runs, when its stdin (a pipe from the pytest process) closes.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import locale
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

_MAX_PACKET = 1 << 20
_PRELOAD = ("gatewayd.cli.app", "gatewayd.server")
"""What ``gatewayd run`` and the CLI commands import, imported once by the zygote."""
_EXEC_ONLY = os.environ.get("GATEWAYD_TESTS_EXEC") == "1"
"""Read once, at import: a test's ``state_dir`` fixture removes every ``GATEWAYD_*`` variable."""
_INTERPRETER_VARS = ("PYTHON", "LANG", "LC_")
"""Environment variables the interpreter reads at its own start (``PYTHONUTF8``, the locale,
...): a child whose values differ from the zygote's would not get the interpreter it asks for."""


# -- the server (a separate process: ``python tests/support/zygote.py ADDRESS``) -------------


def _serve(address: str) -> None:
    for name in _PRELOAD:
        importlib.import_module(name)

    gc.collect()
    gc.freeze()  # the imported objects stay shared with each child instead of copied by its gc
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    os.write(1, b"ready\n")  # the socket file exists from bind(); connect() works from here
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(0, selectors.EVENT_READ, "parent")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the requester)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not os.read(0, 4096):  # the pytest process has gone: so do its runs
                    for pid, _conn in children.values():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    return
                continue
            try:
                if key.data == "accept":
                    conn, _ = listener.accept()
                    started = _fork(conn)
                    if started is not None:
                        children[started[0]] = (started[1], conn)
                        selector.register(started[0], selectors.EVENT_READ, "child")
                else:
                    pid, conn = children.pop(key.fd)
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    _, status = os.waitpid(pid, 0)
                    _reply(conn, {"exit": os.waitstatus_to_exitcode(status)})
                    conn.close()
            except Exception:  # one request's trouble, in the server's log; the server goes on
                traceback.print_exc()


def _fork(conn: socket.socket) -> tuple[int, int] | None:
    """Fork the child ``conn`` asks for; (its pidfd, its pid), or None when it could not be."""
    message, fds, _flags, _addr = socket.recv_fds(conn, _MAX_PACKET, 3)
    try:
        pid = os.fork()
        if pid == 0:
            _child(message, fds)
    except OSError as exc:
        _reply(conn, {"error": f"fork: {exc}"})
        conn.close()
        return None
    finally:
        for fd in fds:
            os.close(fd)
    _reply(conn, {"pid": pid})
    return os.pidfd_open(pid), pid


def _reply(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the requester may have gone
        conn.sendall(json.dumps(message).encode())


def _child(message: bytes, fds: list[int]) -> NoReturn:
    """In the forked child: become ``python -m gatewayd ARGS`` and never return."""
    code = 1
    try:
        request: dict[str, Any] = json.loads(message)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the server's sockets, pidfds, the fds
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # what `python -m` puts first
        sys.argv = ["-m", *request["args"]]
        code = _run_main()
    except BaseException:  # before gatewayd ran: say why on the child's stderr
        sys.excepthook(*sys.exc_info())
    finally:
        os._exit(code)


def _run_main() -> int:
    """``gatewayd/__main__.py`` as ``__main__``, then the interpreter's own way out."""
    import runpy

    code = 0
    try:
        runpy.run_module("gatewayd", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


# -- the client (in the pytest process) ------------------------------------------------------


class _Server:
    """A zygote of this pytest process for one set of interpreter settings, started on first
    use."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.settings = dict(settings)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._address = ""
        self.log = Path(os.devnull)

    def address(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            return self._address

    def _start(self) -> None:
        from tests.support.state import clean_env, new_state_dir

        home = new_state_dir()
        self._address = str(home / "zygote.sock")
        self.log = home / "zygote.log"
        env = {k: v for k, v in clean_env(home).items() if not k.startswith(_INTERPRETER_VARS)}
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__)), self._address],
                env={**env, **self.settings},
                stdin=subprocess.PIPE,  # closed when this process ends: the server's signal to go
                stdout=subprocess.PIPE,
                stderr=log,
            )
        atexit.register(self._stop, self._proc, home)
        assert self._proc.stdout is not None
        with self._proc.stdout:  # "ready" once it listens, after its imports; EOF if it failed
            if self._proc.stdout.readline() != b"ready\n":
                raise RuntimeError(f"the test zygote did not start{self.state()}")

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], home: Path) -> None:
        """At this process's exit: end the server (it kills what still runs), remove its dir."""
        assert proc.stdin is not None
        proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)

    def state(self) -> str:
        """For an error: whether the server still runs, and the end of its log."""
        code = None if self._proc is None else self._proc.poll()
        tail = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
        return f" (server {'running' if code is None else f'exited {code}'}; log: {tail!r})"


_servers: dict[frozenset[tuple[str, str]], _Server] = {}
_servers_lock = threading.Lock()


def _server(env: Mapping[str, str]) -> _Server:
    """The zygote whose interpreter has the settings ``env`` asks for."""
    settings = {k: v for k, v in env.items() if k.startswith(_INTERPRETER_VARS)}
    key = frozenset(settings.items())
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            server = _servers[key] = _Server(settings)
    return server


def can_fork(fds: Sequence[int]) -> bool:
    """Whether a child of a zygote is the same as an exec'd ``python -m gatewayd`` for a run
    with these standard streams (a terminal would not be: the interpreter sets up its streams
    for the terminals it starts with)."""
    if _EXEC_ONLY:
        return False
    return not any(os.isatty(fd) for fd in fds)


class ZygoteChild:
    """A run forked by the zygote, with the part of :class:`subprocess.Popen`'s interface the
    suite uses: ``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``,
    ``kill``, and ``stdin``/``stdout``/``stderr`` (binary, unbuffered) for a stream asked for as
    :data:`subprocess.PIPE`. Each stream is ``PIPE``, ``DEVNULL`` or a file descriptor."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdin: int = subprocess.DEVNULL,
        stdout: int = subprocess.DEVNULL,
        stderr: int = subprocess.DEVNULL,
    ) -> None:
        self.args = list(args)
        self.returncode: int | None = None
        self.stdin: BinaryIO | None = None
        self.stdout: BinaryIO | None = None
        self.stderr: BinaryIO | None = None
        theirs: list[int] = []  # the child's ends made here, closed once the zygote has them
        ends: list[int] = []
        ok = False
        try:
            for index, spec in enumerate((stdin, stdout, stderr)):
                if spec == subprocess.PIPE:
                    read, write = os.pipe()
                    mine, child = (write, read) if index == 0 else (read, write)
                    stream = open(mine, "wb" if index == 0 else "rb", buffering=0)  # noqa: SIM115
                    setattr(self, _STREAMS[index], stream)
                    theirs.append(child)
                elif spec == subprocess.DEVNULL:
                    child = os.open(os.devnull, os.O_RDWR)
                    theirs.append(child)
                else:
                    child = spec
                ends.append(child)
            self._server = _server(env)
            self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._conn.connect(self._server.address())
                request = {"args": self.args, "env": dict(env), "cwd": str(cwd)}
                socket.send_fds(self._conn, [json.dumps(request).encode()], ends)
                reply = json.loads(self._conn.recv(_MAX_PACKET) or b'{"error": "no reply"}')
            except OSError as exc:
                self._conn.close()
                raise RuntimeError(f"the test zygote failed: {exc}{self._server.state()}") from exc
            if "error" in reply:
                self._conn.close()
                raise RuntimeError(f"the test zygote could not start {self.args}: {reply}")
            ok = True
        finally:
            for fd in theirs:
                os.close(fd)
            for ours in (self.stdin, self.stdout, self.stderr):
                if ours is not None and not ok:
                    ours.close()
        self.pid: int = reply["pid"]
        self._lock = threading.Lock()

    def _collect(self, timeout: float | None) -> int | None:
        """The exit status once the server has sent it, waiting at most ``timeout`` (None:
        for ever) for it. The wait holds no lock: a ``poll()`` from another thread meanwhile
        answers at once, as :class:`subprocess.Popen`'s does."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            with self._lock:
                if self.returncode is not None:
                    break
                ready = select.select([self._conn], [], [], 0)[0]
                if ready:
                    message = self._conn.recv(_MAX_PACKET)
                    self._conn.close()
                    if not message:
                        raise RuntimeError(
                            f"the test zygote lost run {self.pid}{self._server.state()}"
                        )
                    self.returncode = int(json.loads(message)["exit"])
                    break
                waiting = self._conn.fileno()
            if left == 0:
                return None
            with contextlib.suppress(OSError):  # closed meanwhile by a poll() that got it
                select.select([waiting], [], [], min(left, 0.2) if left is not None else 0.2)
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # never signal a pid that may have been reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_STREAMS = ("stdin", "stdout", "stderr")


def run(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    input: str | None,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """:func:`subprocess.run` of ``python -m gatewayd ARGS`` with ``capture_output=True,
    text=True``, forked by the zygote: ``input`` on a pipe to its stdin (else
    ``/dev/null``); on ``timeout`` the child is killed and :class:`subprocess.TimeoutExpired`
    raised, as ``run`` does."""
    child = ZygoteChild(
        args,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    output: dict[int, list[bytes]] = {child.stdout.fileno(): [], child.stderr.fileno(): []}
    pending = b"" if input is None else input.encode()
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector, contextlib.ExitStack() as streams:
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                streams.enter_context(stream)
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)
        if child.stdin is not None:
            os.set_blocking(child.stdin.fileno(), False)
            selector.register(child.stdin.fileno(), selectors.EVENT_WRITE)
        while selector.get_map():
            left = deadline - time.monotonic()
            ready = selector.select(left) if left > 0 else []
            if not ready:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(list(args), timeout)
            for key, _ in ready:
                if key.fd in output:
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        output[key.fd].append(chunk)
                    else:
                        selector.unregister(key.fd)
                    continue
                try:
                    pending = pending[os.write(key.fd, pending) :]
                except BrokenPipeError:
                    pending = b""  # the child does not read all of it: neither does run()
                if not pending:
                    selector.unregister(key.fd)
                    assert child.stdin is not None
                    child.stdin.close()
        code = child.wait(max(deadline - time.monotonic(), 0.1))
        out, err = (b"".join(output[fd]) for fd in output)
    return subprocess.CompletedProcess(list(args), code, _text(out), _text(err))


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` gives them: the locale's encoding, universal
    newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    _serve(sys.argv[1])
