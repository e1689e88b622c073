"""The authoring commands (``hooks new``, ``install``, ``uninstall``, ``list``, ``check``) read
and write files only: ``run_cli`` runs them in the test's own thread
(:func:`tests.support.inline.gatewayd_inline`), where coverage measures them. The exit status and
output are those of the command's entry; the process around it is
``tests/cli/test_cli_habits.py``'s subject."""

from __future__ import annotations

import pytest

from tests.support.cli import RunCli


@pytest.fixture
def run_cli(run_cli_inline: RunCli) -> RunCli:
    """The authoring commands, run by the test's own thread."""
    return run_cli_inline
