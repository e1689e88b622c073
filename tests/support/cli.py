"""The suite's one way to run the ``gatewayd`` command line: :func:`gatewayd`.

``gatewayd(state, *args)`` runs ``python -m gatewayd ARGS`` as a real process in ``state`` (its
working directory and ``$ELIZA_STATE_DIR``) with the host's settings removed from the
environment, and captures its output as text. :func:`ok` and :func:`refused` check the outcome
and show the whole output when it is not the expected one.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio

from tests.support.state import clean_env

Result = subprocess.CompletedProcess[str]
R = TypeVar("R")


def gatewayd(
    state: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> Result:
    """``python -m gatewayd ARGS`` against ``state``, ``input`` on its stdin (else none);
    never raises on a non-zero exit. ``env`` adds to (or overrides) the clean environment."""
    full_env = clean_env(state, env)
    return execd(args, env=full_env, cwd=state, input=input, timeout=timeout)


def execd(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path, input: str | None, timeout: float
) -> Result:
    """``python -m gatewayd ARGS`` exec'd, as :func:`subprocess.run` with its output captured
    as text."""
    return subprocess.run(
        [sys.executable, "-m", "gatewayd", *args],
        env=env,
        cwd=cwd,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def off_loop(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)`` (a CLI run, a blocking client) in a worker thread: an async test
    awaits it while the gateway in its event loop goes on serving."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class RunCli(Protocol):
    """The ``run_cli`` fixture: :func:`gatewayd` bound to the test's ``state_dir``."""

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
        input: str | None = None,
    ) -> Result: ...


def ok(result: Result) -> Result:
    """Assert exit 0; returns ``result``."""
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def refused(result: Result, *needles: str) -> str:
    """Assert exit 1 with ``error:`` and every needle on stderr; returns stderr."""
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stderr.startswith("error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in:\n{result.stderr}"
    return result.stderr
