"""The suite's fixtures come from :mod:`tests.support.fixtures` (``state_dir``, ``write_hook``,
``run_cli``, ``new_daemon``, ``start_daemon``, ``log_records``); subsystem-specific fixtures live
in each test directory's own ``conftest.py``. :mod:`tests.support.bytecode` byte-compiles the
package once before the run, so the daemons and CLI runs the tests start do not each compile it.

Order: the tests marked ``slow`` run first, those with the longest ``timeout`` mark (their
authors' bound on how long they may take) ahead. Under pytest-xdist (``--dist loadgroup`` hands
out work in collection order to whichever worker is free), a test of minutes that came up late
would run on alone after the others had finished; started first, it runs beside them. The
container tests are placed after this hook by ``tests/container/conftest.py`` (the systemd
tests first, the Docker image tests last); the Makefile's ``--no-loadscope-reorder`` makes xdist
hand work out in this order, except that the Docker image tests wait for their image
(:mod:`tests.support.scheduling`).
"""

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

pytest_plugins = ["tests.support.bytecode", "tests.support.fixtures"]

WORKER_NICE = 5
"""How much the xdist workers (and every daemon, CLI run and server they start) yield the CPU
to the container image builds, which run in dockerd's processes: the builds and then the
systemd tests are the run's longest path, and at equal priority the builds took 2-3x their
time alone."""


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """Logging configured by a test (``gatewayd.logging.configure_logging``, a gateway's own
    start) is that test's: structlog's configuration and the root logger's level are put back
    after it. One left at ``warning`` hid every info and debug record from the tests the same
    worker ran next (their ``capture_logs`` came back empty)."""
    config, level = structlog.get_config(), logging.getLogger().level
    yield
    structlog.configure(**config)
    logging.getLogger().setLevel(level)


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """The async tests (``pytest.mark.anyio``) run on asyncio with uvloop, as the daemon does."""
    return "asyncio", {"use_uvloop": True}


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker
        os.nice(WORKER_NICE)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` hands the Docker image tests out once their image is built
    (:mod:`tests.support.scheduling`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.scheduling import ImagesReadyScheduling

    return ImagesReadyScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``slow`` tests first, longest timeout first; otherwise collection order (the sort
    is stable). The container tests keep their file order: a module's tests share one container
    or systemd unit and run as a story (healthy first, then exec into it; kill, then restart)."""

    def key(item: pytest.Item) -> tuple[bool, float]:
        if item.get_closest_marker("container") is not None:
            return True, 0.0
        timeout = item.get_closest_marker("timeout")
        bound = float(timeout.args[0]) if timeout is not None and timeout.args else 0.0
        return item.get_closest_marker("slow") is None, -bound

    items.sort(key=key)
