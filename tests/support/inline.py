"""``gatewayd ARGS`` run by the test's own thread: :func:`gatewayd_inline`.

The command line's entry, :func:`gatewayd.cli.main`, is called with what ``python -m gatewayd
ARGS`` would have (the clean environment of :func:`tests.support.state.clean_env`, the state
dir as working directory, ``input`` on stdin, stdout and stderr captured, none of them a
terminal) and its outcome comes back as :func:`tests.support.cli.gatewayd` gives it: the exit
status (``main()``'s return value, or what a ``SystemExit`` says), stdout and stderr as text.
The environment, working directory and streams are put back after, and
``tests/conftest.py`` puts back the logging a command configured.

It is for the commands that read and write files only (``hooks install``/``uninstall``/
``new``/``list``/``check``, ``config``): coverage measures them in this process, and a run
skips the interpreter's start (0.2 s each). It refuses to run while a gateway serves in this
process (:func:`tests.support.inprocess.serving`): the environment, working directory and
streams it swaps are that gateway's too. What only a process shows (exit by a signal, a
terminal, the cost of the imports, ``gatewayd run``) stays with :func:`tests.support.cli.gatewayd`.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from unittest import mock

from tests.support import inprocess
from tests.support.state import clean_env


def gatewayd_inline(
    state: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``gatewayd ARGS`` against ``state`` in this thread (``timeout`` is not enforced: the
    commands run here never wait on anything); never raises on a non-zero exit."""
    from gatewayd.cli import main

    assert not inprocess.serving(), "a gateway serves in this process: run the CLI as a process"
    assert args[:1] != ("run",), "gatewayd run is the daemon's process: use start_daemon"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, clean_env(state, env), clear=True))
        stack.enter_context(contextlib.chdir(state))
        stack.enter_context(mock.patch.object(sys, "stdin", io.StringIO(input or "")))
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's --help, --version and usage errors
            code = _exit_status(exit_, stderr)
    return subprocess.CompletedProcess(
        ["gatewayd", *args], code, stdout.getvalue(), stderr.getvalue()
    )


def _exit_status(exit_: SystemExit, stderr: io.StringIO) -> int:
    """The status an interpreter ends with on ``exit_`` (a message is printed, and 1)."""
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=stderr)
    return 1
