"""What an operator sees is true: checked as an operator would check it.

* ``gatewayd hooks test`` with a mistyped hook name says which hook was meant, as the other
  commands do;
* a hook subscribed to an event nothing fires (``message:recieved``) is not reported ``ok`` by
  ``hooks test``: the event is named as never fired, with the did-you-mean of the load log.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

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


def test_status_json_gives_each_hook_that_is_not_ready_its_status(
    write_hook: WriteHook, run_cli: RunCli, start_daemon: StartDaemon, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "broken", hook_md="---\nname: broken\nmetadata: [unclosed\n---\n")
    write_hook(hooks, "needs-bin", meta={"requires": {"bins": ["no-such-binary-x9"]}})
    write_hook(hooks, "off", events=["command:off"])
    start_daemon({"hooks": {"entries": {"off": {"enabled": False}}}})
    status = run_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    hooks_status = json.loads(status.stdout)["hooks"]
    by_name = {h["name"]: h for h in hooks_status["notReady"]}
    assert by_name["broken"]["status"] == "invalid", by_name
    assert by_name["needs-bin"]["status"] == "ineligible", by_name
    assert "no-such-binary-x9" in by_name["needs-bin"]["reasons"][0], by_name
    assert by_name["off"]["status"] == "disabled", by_name
    assert all(h["status"] != "ready" for h in hooks_status["notReady"])


def scrape(address: str) -> dict[str, Metric]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(family: Metric, **labels: str) -> float:
    found = [
        s.value
        for s in family.samples
        if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")
    ]
    assert len(found) == 1, (family.name, labels, family.samples)
    return found[0]


def test_metrics_have_the_process_figures_and_the_journals_counters_as_counters(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon({"gateway": {"metrics": {"listen": "127.0.0.1:0"}}})
    address = daemon.wait_log("metrics.listening")["address"]
    with daemon.control() as ctl:
        ctl.ok("trigger", event="command:go", sessionKey="s")
    families = scrape(address)
    assert value(families["process_resident_memory_bytes"]) > 0
    assert families["process_cpu_seconds"].type == "counter"
    assert value(families["process_open_fds"]) > 0
    assert families["gatewayd_journal_commits"].type == "counter", families.keys()
    assert value(families["gatewayd_journal_commits"]) >= 1
    assert families["gatewayd_journal_refused"].type == "counter"
    assert families["gatewayd_journal_size_bytes"].type == "gauge"
    assert families["gatewayd_journal_pending"].type == "gauge"
    assert value(families["gatewayd_journal_full"]) == 0  # a yes/no figure: 0 or 1


COUNTED = """
async def handler(event):
    event.messages.append("ran")
"""


def test_hooks_test_runs_are_not_counted_as_the_hooks_calls(
    write_hook: WriteHook, run_cli: RunCli, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "probe", events=["command:probe"], handler=COUNTED)
    daemon = start_daemon({"gateway": {"metrics": {"listen": "127.0.0.1:0"}}})
    address = daemon.wait_log("metrics.listening")["address"]
    for _ in range(3):
        assert run_cli("hooks", "test", "probe", "--daemon").returncode == 0
    with daemon.control() as ctl:
        stats = {h["name"]: h["stats"] for h in ctl.ok("hooks")["hooks"]}["probe"]
        assert stats["calls"] == 0, stats
        ctl.ok("message", sessionKey="agent:main:p", text="/probe")
        stats = {h["name"]: h["stats"] for h in ctl.ok("hooks")["hooks"]}["probe"]
    assert stats["calls"] == 1, stats
    families = scrape(address)
    assert value(families["gatewayd_hook_calls"], hook="probe") == 1
    counts = [
        s.value
        for s in families["gatewayd_hook_duration_seconds"].samples
        if s.name.endswith("_count") and s.labels.get("hook") == "probe"
    ]
    assert counts == [1], counts


def test_the_trace_of_an_event_names_the_hook_that_misspelt_it(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "typo", events=[TYPO])
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok(
            "trigger", event="message:received", sessionKey="agent:main:t", context={}, trace=True
        )
    entry = reply["trace"][0]
    named = [h for h in entry["handlers"] if h["hook"] == "typo"]
    assert named and named[0]["outcome"] == "skipped", entry
    assert "did you mean message:received?" in named[0]["reason"], named
    assert "typo" in entry["reason"] and TYPO in entry["reason"], entry["reason"]
