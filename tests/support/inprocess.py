"""A real :class:`~gatewayd.server.Gateway` in the test's own event loop: :class:`InProcess`.

uvicorn tests its server the same way (``run_server`` in its tests' utils): the server's own
``serve()`` runs as a task of the test's loop, the test talks to it through the real control
socket (:class:`~tests.support.control.AsyncControl`, or the ``gatewayd`` command line in a
child process), and the server stops the way it stops in production. Everything the daemon does
between its start and its ``gateway.shutdown`` line runs, and coverage sees it; what only a
process shows (signals, exit codes, ``sd_notify``, fork guards, ``kill -9``) stays with
:class:`~tests.support.daemon.Daemon`.

:func:`run_gateway` loads the config as ``gatewayd run`` does (:func:`gatewayd.config.load_config`
with the test's environment), logs as ``gatewayd run --log-format json`` does, with
:func:`~gatewayd.hooks.capture.capture_hook_output` around it, and returns once the gateway
serves (``READY``). Its log records are read back as JSON (:attr:`InProcess.logs`, the same
records a :class:`~tests.support.daemon.Daemon` collects from its stderr). :meth:`InProcess.stop`
requests the graceful stop SIGTERM requests and returns the exit code ``serve()`` returned.

The test process is left as it was: the logging configuration, the environment and the objects
the gateway's start froze for the garbage collector (``gc.freeze``) are restored at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import structlog

from gatewayd.config import load_config
from gatewayd.hooks.capture import capture_hook_output
from gatewayd.logging import _file_sink, configure_from
from gatewayd.server import Gateway
from tests.support.control import AsyncControl
from tests.support.state import is_host_setting

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

_SERVING: list[Mapping[str, str]] = []
"""The environment settings of each gateway serving in this process."""


def serving() -> list[Mapping[str, str]]:
    """The environment settings of each gateway serving in this process (none: empty)."""
    return list(_SERVING)


class LogStream(io.TextIOBase):
    """Where the in-process gateway's log goes: each JSON line becomes a record in
    :attr:`records`, every line is kept in :attr:`lines`. Not a file (no ``fileno``)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self._partial = ""
        self._lock = threading.Lock()  # sync hooks log from worker threads
        self.changed: Callable[[], None] = lambda: None

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._partial = (self._partial + text).split("\n")
            for line in lines:
                self.lines.append(line)
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if isinstance(record, dict):
                        self.records.append(record)
        if lines:
            self.changed()
        return len(text)


class InProcess:
    """A gateway serving in the test's event loop; see the module docstring."""

    def __init__(self, state: Path, gateway: Gateway, stream: LogStream) -> None:
        self.state = state
        self.gateway = gateway
        self.workspace = state / "workspace"
        """The default workspace dir (``workspace.dir`` unset), as :class:`Daemon` says it."""
        self.socket = gateway.config.paths.control_socket
        self._stream = stream
        self.exit_code: int | None = None
        self.stopped: Callable[[], None] = lambda: None
        """Called once ``serve()`` returned (the environment it ran with is put back)."""
        self._done = anyio.Event()
        self._logged = anyio.Event()
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def changed() -> None:  # log lines come from the loop and from hook threads
            if threading.get_ident() == loop_thread:
                self._logged.set()
            else:  # never wait here: the writer may hold the logger's lock the loop needs
                with contextlib.suppress(RuntimeError):  # the loop has ended
                    loop.call_soon_threadsafe(lambda: self._logged.set())

        stream.changed = changed

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The log records of this run, in order."""
        return self._stream.records

    @property
    def stderr_lines(self) -> list[str]:
        return self._stream.lines

    def stderr_text(self) -> str:
        return "\n".join(self._stream.lines)

    def events(self, event: str) -> list[dict[str, Any]]:
        """Every log record named ``event`` so far."""
        return [r for r in self.logs if r.get("event") == event]

    def log_index(self, event: str) -> int:
        for i, record in enumerate(self.logs):
            if record.get("event") == event:
                return i
        raise AssertionError(f"no log event {event}")

    async def wait_log(
        self,
        event: str,
        timeout: float = START_TIMEOUT_S,  # noqa: ASYNC109 - Daemon.wait_log's arguments
        **match: Any,
    ) -> dict[str, Any]:
        """The first record named ``event`` whose fields include ``match``, once logged (a
        bound against a hang, never a threshold)."""
        with anyio.move_on_after(timeout):
            while True:
                for record in self.logs:
                    if record.get("event") == event and all(
                        record.get(k) == v for k, v in match.items()
                    ):
                        return record
                if self._done.is_set():
                    break
                self._logged = anyio.Event()
                await self._logged.wait()
        raise AssertionError(f"no log event {event} {match or ''}; log:\n{self.stderr_text()}")

    def failure_summary(self, tail: int) -> str | None:
        """For a failed test's report: the gateway's state and its last ``tail`` log lines."""
        state = "still running" if self.exit_code is None else f"returned {self.exit_code}"
        lines = self._stream.lines[-tail:]
        head = f"in-process gateway {state}; its last {len(lines)} log lines"
        return "\n".join([f"{head}:", *lines])

    def shutdown_line(self) -> dict[str, Any]:
        lines = self.events("gateway.shutdown")
        assert len(lines) == 1, f"expected one gateway.shutdown line, got {lines}"
        return lines[0]

    # -- the control socket ----------------------------------------------------------------

    def control(self, timeout: float = 60.0) -> AsyncControl:
        """A new connection to the control socket (``async with``)."""
        return AsyncControl(self.socket, timeout)

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """One request on its own connection; the reply, which must say ``ok: true``."""
        async with self.control() as control:
            reply = await control.request(op, **fields)
        assert reply.get("ok") is True, f"{op} failed: {reply}\n{self.stderr_text()}"
        return reply

    async def send(
        self, text: str, session: str = "agent:main:main", sender: str = "u1", channel: str = "t"
    ) -> dict[str, Any]:
        """An inbound message (the ``message`` op); the reply."""
        return await self.request(
            "message", sessionKey=session, text=text, senderId=sender, channel=channel
        )

    # -- stopping --------------------------------------------------------------------------

    async def stop(self, reason: str = "SIGTERM") -> int:
        """The graceful stop SIGTERM requests (``reason`` names it in the shutdown line);
        returns the exit code once ``serve()`` returned."""
        self.gateway.request_stop(reason)
        with anyio.fail_after(STOP_TIMEOUT_S):
            await self._done.wait()
        assert self.exit_code is not None
        return self.exit_code

    async def _serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        started = False

        class Started:
            def started(self, value: Any = None) -> None:
                nonlocal started
                started = True
                task_status.started()

        try:
            self.exit_code = await self.gateway.serve(task_status=cast(Any, Started()))
        finally:
            self.stopped()
            self._done.set()
            self._logged.set()
        if not started:  # the start failed: the exit code says why
            task_status.started()


@contextlib.asynccontextmanager
async def run_gateway(
    state: Path, env: Mapping[str, str] | None = None, *, watch: bool = False
) -> AsyncIterator[InProcess]:
    """A :class:`InProcess` gateway on ``state`` (its ``gatewayd.yaml`` if written), with the
    environment variables ``env`` set while it serves (one gateway at a time, then: the
    environment is the process's); stopped at the end if it still runs. A start that fails
    returns it stopped, with its :attr:`~InProcess.exit_code`."""
    settings = {"GATEWAYD_HOOKS__LOAD__WATCH": "true" if watch else "false", **(env or {})}
    saved_env = {name: os.environ.get(name) for name in settings}
    saved_logging = structlog.get_config(), logging.getLogger().level
    saved_stderr = sys.stderr
    stream = LogStream()
    assert os.environ.get("ELIZA_STATE_DIR") == str(state), "use the state_dir fixture"
    assert not [n for n in settings if is_host_setting(n) and not n.startswith("GATEWAYD_")]

    def restore_env() -> None:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with contextlib.suppress(ValueError):  # once: at the stop, or at the end of a failed start
            _SERVING.remove(settings)

    _SERVING.append(settings)
    try:
        os.environ.update(settings)  # the gateway's environment while it serves (reloads too)
        config = load_config()
        sys.stderr = stream  # where gatewayd run writes its log (and a hook's stray writes)
        configure_from(config, None, "json")
        with capture_hook_output():
            gateway = Gateway(config, log_overrides=(None, "json"), loop_name=_loop_name())
            async with anyio.create_task_group() as tg:
                running = InProcess(state, gateway, stream)
                running.stopped = restore_env
                with anyio.fail_after(START_TIMEOUT_S):
                    await tg.start(running._serve)
                try:
                    yield running
                finally:
                    if not running._done.is_set():
                        await running.stop()
    finally:
        sys.stderr = saved_stderr
        structlog.configure(**saved_logging[0])
        logging.getLogger().setLevel(saved_logging[1])
        _file_sink(None)  # a gateway.log.file the config named is closed
        restore_env()
        gc.unfreeze()  # what the start froze is collectable again once the test lets go


def _loop_name() -> str:
    """What ``status`` says the loop is: the test's (uvloop, as ``gatewayd run``'s)."""
    return (
        "uvloop"
        if type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        else ("asyncio")
    )
