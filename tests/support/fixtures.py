"""The suite-wide pytest fixtures (a plugin: ``tests/conftest.py`` lists it in ``pytest_plugins``).

* ``state_dir``: a fresh, short state dir (``/tmp/gdXXXXXX``) set as ``$ELIZA_STATE_DIR`` for
  this test, in-process and for children, with the host's ``GATEWAYD_*``/systemd variables
  removed from the environment. Removed at teardown.
* ``write_hook(root, name, events=[...], handler=..., ...)``: a hook directory on disk.
* ``run_cli(*args, env=None, timeout=60)``: ``python -m gatewayd ARGS`` against ``state_dir``.
  ``run_cli_inline``, the same run by the test's own thread
  (:func:`tests.support.inline.gatewayd_inline`), for the commands that read and write files only.
* ``new_daemon(config=None, *, env=None, watch=False, prefix=(), notify_address=None)``: a
  :class:`~tests.support.daemon.Daemon` on ``state_dir`` (``config`` written as its
  ``gatewayd.yaml`` when given), not started. ``start_daemon(...)`` takes the same arguments
  plus ``wait_ready=True`` and starts it. Every daemon still running at teardown is killed.
  When the test fails, its report carries each daemon's exit code and the tail of its log.
* ``start_gateway(config=None, *, env=None, watch=False)`` (async tests): a real gateway serving
  in the test's own event loop (:class:`~tests.support.inprocess.InProcess`), ``config`` written
  as ``gatewayd.yaml`` first; returns once it serves, and is stopped at teardown. The default
  for what a daemon does between its start and its stop; ``start_daemon`` is for what only a
  process shows.
* ``log_records``: what in-process code logged through structlog during the test
  (:func:`structlog.testing.capture_logs`), one dict per record.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import pytest
import structlog

from tests.support.cli import RunCli, gatewayd
from tests.support.daemon import Daemon
from tests.support.hooks import WriteHook, write_hook_dir
from tests.support.inline import gatewayd_inline
from tests.support.inprocess import InProcess, run_gateway
from tests.support.state import is_host_setting, new_state_dir, write_config


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, short state dir set as ``$ELIZA_STATE_DIR`` for this test."""
    path = new_state_dir()
    monkeypatch.setenv("ELIZA_STATE_DIR", str(path))
    for name in [n for n in os.environ if is_host_setting(n)]:
        monkeypatch.delenv(name)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def write_hook() -> WriteHook:
    """The :func:`tests.support.hooks.write_hook_dir` helper as a fixture."""
    return write_hook_dir


@pytest.fixture
def run_cli(state_dir: Path) -> RunCli:
    """:func:`tests.support.cli.gatewayd` bound to ``state_dir``."""
    return partial(gatewayd, state_dir)


@pytest.fixture
def run_cli_inline(state_dir: Path) -> RunCli:
    """:func:`tests.support.inline.gatewayd_inline` bound to ``state_dir``."""
    return partial(gatewayd_inline, state_dir)


class NewDaemon(Protocol):
    """The ``new_daemon`` fixture."""

    def __call__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        prefix: Sequence[str] = (),
        notify_address: str | None = None,
    ) -> Daemon: ...


class StartDaemon(Protocol):
    """The ``start_daemon`` fixture."""

    def __call__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        prefix: Sequence[str] = (),
        notify_address: str | None = None,
        wait_ready: bool = True,
    ) -> Daemon: ...


class StartGateway(Protocol):
    """The ``start_gateway`` fixture."""

    async def __call__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
    ) -> InProcess: ...


_UNGROUPED = pytest.StashKey[str]()
_DAEMONS = pytest.StashKey[list[Daemon | InProcess]]()
_LOG_TAIL_LINES = 60


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report shows what its daemons said last (and whether they still ran):
    a test that fails on a closed socket otherwise says nothing of why the daemon closed it."""
    report: pytest.TestReport = yield
    if report.failed:
        daemons: list[Daemon | InProcess] = item.stash.get(_DAEMONS, [])
        for n, daemon in enumerate(daemons):
            if (summary := daemon.failure_summary(_LOG_TAIL_LINES)) is not None:
                report.sections.append((f"daemon {n} ({report.when})", summary))
    return report


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, the tests marked ``xdist_group`` fail (saying why) when
    pytest-xdist could not group them: it marks a grouped test by appending ``@<group>`` to its
    id, which pytest 9.2 ignores (pytest-dev/pytest-xdist#1386). Ungrouped, the container
    modules boot a container per worker and the Redis tests share servers across workers."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            item.stash[_UNGROUPED] = (
                "--dist loadgroup did not group this xdist_group test: this pytest and "
                "pytest-xdist do not work together (pytest-dev/pytest-xdist#1386); install the "
                "versions pyproject.toml pins"
            )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if (why := item.stash.get(_UNGROUPED, None)) is not None:
        pytest.fail(why, pytrace=False)


def reported(item: pytest.Item) -> list[Daemon | InProcess]:
    """The daemons a failed report of ``item`` shows the state and last log lines of: the
    fixtures here add theirs, and a fixture that starts daemons its own way adds them too."""
    return item.stash.setdefault(_DAEMONS, [])


@pytest.fixture
def new_daemon(state_dir: Path, request: pytest.FixtureRequest) -> Iterator[NewDaemon]:
    """Daemons on ``state_dir``, not started; all are killed at teardown."""
    report = reported(request.node)
    made: list[Daemon] = []

    def make(
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        prefix: Sequence[str] = (),
        notify_address: str | None = None,
    ) -> Daemon:
        if config is not None:
            write_config(state_dir, config)
        daemon = Daemon(
            state_dir, env=env, watch=watch, prefix=prefix, notify_address=notify_address
        )
        made.append(daemon)
        report.append(daemon)
        return daemon

    yield make
    for daemon in made:
        daemon.close()


@pytest.fixture
def start_daemon(new_daemon: NewDaemon) -> StartDaemon:
    """``new_daemon(...)`` started; returns once it is ready (unless ``wait_ready=False``)."""

    def start(
        config: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        prefix: Sequence[str] = (),
        notify_address: str | None = None,
        wait_ready: bool = True,
    ) -> Daemon:
        daemon = new_daemon(
            config, env=env, watch=watch, prefix=prefix, notify_address=notify_address
        )
        return daemon.start(wait_ready=wait_ready)

    return start


@pytest.fixture
async def start_gateway(
    state_dir: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StartGateway]:
    """In-process gateways on ``state_dir``; every one still serving is stopped at teardown."""
    made = reported(request.node)
    async with AsyncExitStack() as stack:

        async def start(
            config: Mapping[str, Any] | None = None,
            *,
            env: Mapping[str, str] | None = None,
            watch: bool = False,
        ) -> InProcess:
            if config is not None:
                write_config(state_dir, config)
            running = await stack.enter_async_context(run_gateway(state_dir, env, watch=watch))
            made.append(running)
            return running

        yield start


LogRecords = list[MutableMapping[str, Any]]


@pytest.fixture
def log_records() -> Iterator[LogRecords]:
    """Every structlog record logged in-process during the test (``event``, ``log_level``,
    bound and call fields)."""
    with structlog.testing.capture_logs() as records:
        yield records


def find_log(records: Sequence[Mapping[str, Any]], event: str) -> Mapping[str, Any]:
    """The last record named ``event``; fails listing what was logged when there is none."""
    matches = [r for r in records if r.get("event") == event]
    assert matches, f"no {event!r} log record in {list(records)}"
    return matches[-1]


def log_events(records: Sequence[Mapping[str, Any]], prefix: str = "") -> list[str]:
    """The names of the records whose name starts with ``prefix``, in order."""
    return [str(r["event"]) for r in records if str(r.get("event", "")).startswith(prefix)]
