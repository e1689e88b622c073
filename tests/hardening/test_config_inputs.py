"""A config edited into something the daemon cannot use never takes it down.

At start such a config exits 78 naming the key and what is wrong, never with a traceback; on a
reload (the ``reload`` op, or SIGHUP) it is refused with the same words and the running config
stays. Each case here once did worse: crashed the start with a traceback (a top-level key YAML
reads as a number, a NUL byte or nothing as a path, a timeout past the thread timer's range),
failed the reload as a bug (``TypeError``, ``ValueError``, ``OverflowError``,
``RecursionError``: YAML nested 700 deep, a hex int too long to print, ``!!float x``), froze
the daemon (a trillion dispatch workers) or killed it on a failing hook's 1025th retry
(``2 ** 1024`` is past a float).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.support.cli import RunCli
from tests.support.fixtures import NewDaemon, StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import write_config

HUGE = 10**20
DEEP = "[" * 700 + "]" * 700
"""Within libyaml's 1000 levels, past what Python builds in one recursion."""

CASES = {
    "int-top-level-key": ("1: 2\n", "top-level key 1 is not a name"),
    "null-top-level-key": ("null: x\n", "top-level key None is not a name"),
    "nul-in-workspace-dir": (
        'workspace:\n  dir: "ws\\0x"\n',
        "workspace.dir: a path cannot hold a NUL byte",
    ),
    "nul-in-handler-module": (
        'hooks:\n  handlers:\n    - {event: "command:new", module: "h\\0.py"}\n',
        "hooks.handlers.0.module: a path cannot hold a NUL byte",
    ),
    "empty-socket-path": (
        'gateway:\n  control:\n    socket: ""\n',
        "gateway.control.socket: an empty path names no file",
    ),
    "huge-timeout": (f"hooks:\n  timeoutMs: {HUGE}\n", "hooks.timeoutMs: Input should be less"),
    "huge-loop-lag": (
        f"gateway:\n  loopLagWarnMs: {HUGE}\n",
        "gateway.loopLagWarnMs: Input should be less",
    ),
    "huge-concurrency": (
        f"gateway:\n  queue:\n    concurrency: {HUGE}\n",
        "gateway.queue.concurrency: Input should be less than or equal to 10000",
    ),
    "huge-backups": (
        f"sessions:\n  transcriptBackups: {HUGE}\n",
        "sessions.transcriptBackups: Input should be less than or equal to 1000",
    ),
    "huge-retries": (
        "hooks:\n  entries:\n    x:\n      retries: 2000\n      retryBackoffMs: 0\n",
        "hooks.entries.x.retries: Input should be less than or equal to 100",
    ),
    "nested-too-deeply": (f"hooks:\n  entries:\n    x:\n      y: {DEEP}\n", "nested too deeply"),
    "int-too-long-to-print": (f"hooks:\n  timeoutMs: 0x{'f' * 5000}\n", "more than 1000 digits"),
    "date-that-does-not-exist": ("hooks:\n  timeoutMs: 2026-02-30\n", "day is out of range"),
    "tag-that-cannot-build": ("hooks:\n  timeoutMs: !!float x\n", "its !!tag cannot build"),
    "section-written-twice": (
        "hooks:\n  timeoutMs: 100\nsessions: {}\nhooks:\n  enabled: false\n",
        "gatewayd.yaml:4:1: invalid YAML: duplicate key 'hooks' (first on line 1)",
    ),
    "key-written-twice-in-a-flow-map": (
        "gateway:\n  queue: {capacity: 10, capacity: 20}\n",
        "duplicate key 'capacity' (first on line 2)",
    ),
    "redis-url-not-a-url": (
        'gateway:\n  queue:\n    backend: redis\n    redis: {url: "redis://[bad"}\n',
        "gateway.queue.redis.url: not a Redis URL (Invalid IPv6 URL)",
    ),
    "redis-url-of-another-scheme": (
        'gateway:\n  queue:\n    backend: redis\n    redis: {url: "http://x"}\n',
        "gateway.queue.redis.url: not a Redis URL (its scheme is http",
    ),
    "redis-url-port-no-number": (
        'gateway:\n  queue:\n    redis: {url: "redis://h:abc/0"}\n',
        "gateway.queue.redis.url: not a Redis URL (Port could not be cast",
    ),
    "redis-url-without-host": (
        'gateway:\n  queue:\n    backend: redis\n    redis: {url: "redis://"}\n',
        "gateway.queue.redis.url: not a Redis URL (no host",
    ),
    "hook-setting-nested-300-deep": (
        f"hooks:\n  entries:\n    x:\n      y: {'[' * 300}{']' * 300}\n",
        "hooks.entries.x.y: nested more than 64 levels deep",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unusable_config_at_start_exits_78_naming_the_key(
    new_daemon: NewDaemon, state_dir: Path, case: str
) -> None:
    text, expected = CASES[case]
    (state_dir / "gatewayd.yaml").write_text(text)
    daemon = new_daemon().start(wait_ready=False)
    assert daemon.wait() == 78, daemon.stderr_text()[-3000:]
    stderr = daemon.stderr_text()
    assert expected in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[" * 3000 + "]" * 3000, "hooks.load.extraDirs is JSON nested too deeply to read"),
        ('{"x": {"y": ' + "[" * 900 + "]" * 900 + "}}", "nested more than 64 levels deep"),
    ],
    ids=["past-the-decoder", "past-the-setting-bound"],
)
def test_json_nested_too_deeply_in_a_variable_exits_78(
    new_daemon: NewDaemon, value: str, expected: str
) -> None:
    var = "GATEWAYD_HOOKS__LOAD__EXTRA_DIRS" if value.startswith("[") else "GATEWAYD_HOOKS__ENTRIES"
    daemon = new_daemon(env={var: value}).start(wait_ready=False)
    assert daemon.wait() == 78, daemon.stderr_text()[-3000:]
    stderr = daemon.stderr_text()
    assert expected in stderr and "Traceback" not in stderr, stderr[-3000:]


def test_a_running_daemon_refuses_each_broken_edit_and_keeps_its_config(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon({"hooks": {"entries": {"command-logger": {"enabled": False}}}})
    config = state_dir / "gatewayd.yaml"
    good = config.read_text()
    with daemon.control() as control:
        for case, (text, expected) in sorted(CASES.items()):
            config.write_text(text)
            reply = control.request("reload")
            assert reply["ok"] is False, (case, reply)
            assert reply["error"]["code"] == "reload_refused", (case, reply)
            assert expected in reply["error"]["message"], (case, reply)
            # An accepted event still runs to its end under the old config.
            assert control.ok("message", sessionKey="s", text="/new")["command"] == "new"
        config.write_text(CASES["huge-timeout"][0])
        daemon.send_signal(signal.SIGHUP)
        refused = daemon.wait_log("reload.done", trigger="SIGHUP")
        assert refused["result"] == "refused", refused
        assert "hooks.timeoutMs" in refused["errors"][0], refused
    assert daemon.proc.poll() is None, daemon.stderr_text()[-3000:]
    assert daemon.events("reload.failed") == [], "a broken config is refused, not a bug"
    hooks = daemon.request("hooks")["hooks"]
    logger = next(h for h in hooks if h["name"] == "command-logger")
    assert logger["status"] == "disabled", logger  # still the config from before the edits
    config.write_text(good)
    assert daemon.request("reload")["outcome"] == "ok"
    assert daemon.stop() == 0


def test_a_hook_md_value_its_tag_cannot_build_makes_that_hook_invalid(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    values = {"no-time": "!!timestamp x", "no-bool": "!!bool x", "no-float": "!!float x"}
    for name, value in values.items():
        meta = "metadata: {eliza: {events: [command:x]}}"
        write_hook(hooks, name, hook_md=f"---\nname: {name}\nx: {value}\n{meta}\n---\n")
    write_hook(hooks, "plain", events=["command:x"])
    daemon = start_daemon()
    with daemon.control() as control:
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
    for name in values:
        assert listing[name]["status"] == "invalid", listing[name]
        assert "invalid YAML" in " ".join(listing[name]["reasons"]), listing[name]
    assert daemon.stop() == 0


def test_a_log_file_that_is_a_fifo_no_one_reads_is_refused_not_waited_on(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    """Opening a FIFO for writing waits for a reader: a reload to one once froze the daemon
    (its event loop in ``open()``), and a start with one never got ready."""
    os.mkfifo(state_dir / "log.fifo")
    daemon = start_daemon()
    write_config(state_dir, {"gateway": {"log": {"file": "log.fifo"}}})
    assert daemon.request("reload")["outcome"] == "ok"
    failed = daemon.wait_log("log.file_failed")
    assert "FIFO that no process reads" in failed["error"], failed
    assert daemon.request("ping")["pong"] is True
    assert daemon.stop() == 0
    daemon.start()  # the same config at start: ready, the file left out
    assert "FIFO that no process reads" in daemon.wait_log("log.file_failed")["error"]
    assert daemon.stop() == 0


def test_a_hook_md_with_a_key_written_twice_is_invalid_and_says_where(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """PyYAML keeps the last of two equal keys without a word (js-yaml, which reads OpenClaw's
    HOOK.md files, refuses them): a second ``metadata:`` would silently drop the first one's
    events. With an alias in the file, PyYAML's own construction is used: refused there too,
    while a key a merge (``<<``) brings in may still be overridden."""
    hooks = state_dir / "hooks"
    meta = "metadata: {eliza: {events: [command:x]}}"
    write_hook(hooks, "twice", hook_md=f"---\nname: twice\n{meta}\n{meta}\n---\n")
    aliased = f"base: &b {{k: 1}}\nover:\n  <<: *b\n  k: 2\nagain: {{k: 1, k: 2}}\n{meta}"
    write_hook(hooks, "twice-aliased", hook_md=f"---\nname: twice-aliased\n{aliased}\n---\n")
    merged = f"base: &b {{k: 1}}\nover:\n  <<: *b\n  k: 2\n{meta}"
    write_hook(hooks, "merged", hook_md=f"---\nname: merged\n{merged}\n---\n")
    daemon = start_daemon()
    with daemon.control() as control:
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
    for name, line in (("twice", 4), ("twice-aliased", 7)):
        reasons = " ".join(listing[name]["reasons"])
        assert listing[name]["status"] == "invalid", listing[name]
        assert f":{line}:" in reasons and "duplicate key" in reasons, listing[name]
    assert listing["merged"]["status"] != "invalid", listing["merged"]
    assert daemon.stop() == 0


def test_config_check_refuses_a_bad_redis_url_and_never_shows_its_password(
    run_cli: RunCli, state_dir: Path
) -> None:
    secret = "hunter2-" + "c4f9e1"
    write_config(
        state_dir,
        {"gateway": {"queue": {"backend": "redis", "redis": {"url": f"redis://:{secret}@[bad/0"}}}},
    )
    checked = run_cli("config", "check")
    assert checked.returncode == 78, checked.stdout + checked.stderr
    out = checked.stdout + checked.stderr
    assert "gateway.queue.redis.url: not a Redis URL" in out, out
    assert secret not in out and "Traceback" not in out, out
    # A good URL with a password: config show hides the password, as status does.
    write_config(
        state_dir,
        {"gateway": {"queue": {"redis": {"url": f"redis://app:{secret}@localhost:6379/0"}}}},
    )
    shown = run_cli("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "redis://app:***@localhost:6379/0" in shown.stdout and secret not in shown.stdout


def test_a_live_switch_of_the_queue_backend_says_it_needs_a_restart(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon()
    write_config(
        state_dir,
        {"gateway": {"queue": {"backend": "redis", "redis": {"url": "redis://127.0.0.1:1/0"}}}},
    )
    with daemon.control() as control:
        reply = control.ok("reload")
        assert reply["restartNeeded"] == ["gateway.queue.backend", "gateway.queue.redis.url"], reply
        # Still the local journal: events are accepted and run.
        assert control.ok("message", sessionKey="s", text="/new")["command"] == "new"
        journal = control.ok("status")["status"]["queue"]["journal"]
    assert journal["backend"] != "redis", journal
    logged = daemon.wait_log("reload.restart_needed")
    assert logged["keys"] == ["gateway.queue.backend", "gateway.queue.redis.url"], logged
    assert daemon.wait_log("reload.done")["restartNeeded"] == logged["keys"]


def test_the_readmes_metrics_listen_as_an_integer_is_accepted(
    run_cli: RunCli, state_dir: Path
) -> None:
    (state_dir / "gatewayd.yaml").write_text("gateway:\n  metrics:\n    listen: 9464\n")
    checked = run_cli("config", "check", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = run_cli("config", "show", "--json")
    assert json.loads(shown.stdout)["config"]["gateway"]["metrics"]["listen"] == "9464"
    (state_dir / "gatewayd.yaml").write_text("gateway:\n  metrics:\n    listen: 99999\n")
    refused = run_cli("config", "check")
    assert refused.returncode == 78 and "is not PORT or HOST:PORT" in refused.stderr, refused
