"""Byte-compile ``gatewayd`` once before a test run (a pytest plugin, listed in
``tests/conftest.py``).

The machines here set ``PYTHONDONTWRITEBYTECODE``, so without this every ``gatewayd run`` and
every CLI run the suite starts (well over a thousand subprocesses) compiles each module it
imports from source, and so does every xdist worker. ``compileall`` writes the ``.pyc`` files an
installed wheel has (into ``__pycache__``, which git, the wheel and the Docker context leave
out); Python reads them whatever that variable says, and recompiles a module whose source
changed since. Only the process that starts the run compiles (the xdist controller, or the one
process without xdist), before any worker or test starts.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

import gatewayd

PACKAGE = Path(gatewayd.__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller compiled already
        return
    compileall.compile_dir(PACKAGE, quiet=1)
