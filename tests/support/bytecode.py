"""Byte-compile ``gatewayd`` and the tests once before a test run (a pytest plugin, listed in
``tests/conftest.py``).

The machines here set ``PYTHONDONTWRITEBYTECODE``, so without this every ``gatewayd run`` and
every CLI run the suite starts (well over a thousand subprocesses) compiles each module it
imports from source, and so does every xdist worker. ``compileall`` writes the ``.pyc`` files an
installed wheel has (into ``__pycache__``, which git, the wheel and the Docker context leave
out); Python reads them whatever that variable says, and recompiles a module whose source
changed since. Only the process that starts the run compiles (the xdist controller, or the one
process without xdist), before any worker or test starts.

The test modules themselves are imported with their asserts rewritten by pytest, which caches
the rewritten code in ``__pycache__`` too, but writes that cache only when bytecode may be
written; it reads it whatever the variable says. So the controller rewrites each test module
and conftest once and writes pytest's cache file, as pytest would: every xdist worker then
reads them instead of rewriting the ~100 modules itself (collection 2.9 -> 1.2 s of CPU a
worker, measured with 6 workers on 2 cores: they all collect before the first test runs).
This uses pytest's own rewrite functions (private; pytest is pinned below 9.2 in
pyproject.toml): if they are not there, the workers rewrite as before.
"""

from __future__ import annotations

import compileall
import fnmatch
from pathlib import Path

import pytest

import gatewayd

PACKAGE = Path(gatewayd.__file__).parent
TESTS = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller compiled already
        return
    compileall.compile_dir(PACKAGE, quiet=1)
    compileall.compile_dir(TESTS, quiet=1)  # the helpers the tests import, not rewritten
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        _rewrite_tests(config)


def _rewrite_tests(config: pytest.Config) -> None:
    """Write pytest's rewritten-code cache for every test module and conftest under tests/."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )

        state = config.stash[assertstate_key]
    except (ImportError, KeyError):  # another pytest, or asserts not rewritten (--assert=plain)
        return
    patterns = [*config.getini("python_files"), "conftest.py"]
    for path in sorted(TESTS.rglob("*.py")):
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns):
            continue
        cache_dir = get_cache_dir(path)
        pyc = cache_dir / (path.name[:-3] + PYC_TAIL)
        if _read_pyc(path, pyc) is not None:  # up to date from an earlier run
            continue
        cache_dir.mkdir(exist_ok=True)
        source_stat, code = _rewrite_test(path, config)
        _write_pyc(state, code, source_stat, pyc)
