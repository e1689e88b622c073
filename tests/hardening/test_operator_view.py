"""What an operator sees is true: checked as an operator would check it.

* ``gatewayd hooks test`` with a mistyped hook name says which hook was meant, as the other
  commands do;
* a hook subscribed to an event nothing fires (``message:recieved``) is not reported ``ok`` by
  ``hooks test``: the event is named as never fired, with the did-you-mean of the load log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import RunCli
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

TYPO = "message:recieved"


@pytest.mark.parametrize("where", ["local", "daemon"])
def test_hooks_test_says_which_hook_a_mistyped_name_meant(
    write_hook: WriteHook, run_cli: RunCli, start_daemon: StartDaemon, state_dir: Path, where: str
) -> None:
    write_hook(state_dir / "hooks", "audit-trail", events=["command:new"])
    if where == "daemon":
        start_daemon()
    run = run_cli("hooks", "test", "audit-trial", f"--{where}")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "did you mean 'audit-trail'?" in run.stderr, run.stderr


@pytest.mark.parametrize("where", ["local", "daemon"])
def test_hooks_test_names_an_event_nothing_fires_with_the_did_you_mean(
    write_hook: WriteHook, run_cli: RunCli, start_daemon: StartDaemon, state_dir: Path, where: str
) -> None:
    write_hook(state_dir / "hooks", "typo", events=[TYPO])
    if where == "daemon":
        start_daemon()
    run = run_cli("hooks", "test", "typo", f"--{where}")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "did you mean message:received?" in run.stdout + run.stderr, run.stdout + run.stderr
    assert "FAILED" in run.stdout, run.stdout
    as_json = run_cli("hooks", "test", "typo", f"--{where}", "--json")
    reply = json.loads(as_json.stdout)
    assert reply["passed"] is False, reply
    assert any("did you mean message:received?" in w for w in reply["warnings"]), reply
