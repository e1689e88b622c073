"""No file the user or the filesystem produces stops the daemon.

A real ``gatewayd run``: names that are not UTF-8 under a watched root, FIFOs and devices where
a regular file is expected (config, ``HOOK.md``, bootstrap files, ``BOOT.md``), YAML whose
aliases expand to billions of nodes, and a hook whose import never returns.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import session_table, wait_until


@contextlib.contextmanager
def fifo(path: Path) -> Iterator[Path]:
    """A FIFO at ``path``; on the way out a writer opens and closes it, which ends any read
    still blocked on it (what the code before each fix below would be stuck in)."""
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_names_that_are_not_utf8_under_a_watched_root(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain")
    daemon = start_daemon(watch=True)
    daemon.wait_log("watch.started")
    raw_root = os.fsencode(hooks)
    odd_dir = raw_root + b"/caf\xe9"
    os.mkdir(odd_dir)
    with open(odd_dir + b"/HOOK.md", "wb") as f:
        f.write(b'---\nname: odd\nmetadata: {"eliza": {"events": ["command:odd"]}}\n---\n')
    with open(odd_dir + b"/handler.py", "wb") as f:
        f.write(b"async def handler(event):\n    event.messages.append('odd ran')\n")
    open(raw_root + b"/stray-\xfe\xff.txt", "wb").close()
    daemon.wait_log("watch.event_unreadable")

    def odd_replies() -> list[str]:
        with daemon.control() as control:
            reply = control.ok("message", sessionKey="s", text="/odd")
        return [m for m in reply["messages"] if m == "odd ran"]

    assert wait_until(odd_replies, what="the hook in a non-UTF-8 directory to load")
    with daemon.control() as control:
        assert control.ok("ping")["pong"] is True
        status = control.ok("status")["status"]
    assert status["watch"] is not None and status["last_reload"]["result"] == "ok"
    # Reading those files raises in watchfiles too: that must not become a reload loop.
    reloads = status["reloads"]
    time.sleep(3)  # a loop would run several reloads a second
    with daemon.control() as control:
        later = control.ok("status")["status"]["reloads"]
    assert later - reloads <= 2, f"{later - reloads} reloads with nothing changed"
    assert daemon.stop() == 0


def test_a_directory_name_that_is_not_utf8_is_reported_once_then_polled(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """watchfiles fails every inotify setup under a root holding such a directory, at once: the
    watcher restarted it in a loop (238 warnings and restarts in 3 s, half a core). It now says
    so once and polls, and a hook saved meanwhile still loads."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain")
    daemon = start_daemon(watch=True)
    daemon.wait_log("watch.started")
    os.mkdir(os.fsencode(hooks) + b"/caf\xe9")
    daemon.wait_log("watch.polling")
    time.sleep(3)  # a loop would log and restart many times a second
    warned = daemon.events("watch.event_unreadable") + daemon.events("watch.polling")
    assert len(warned) <= 2, [w["event"] for w in warned]
    assert len(daemon.events("watch.started")) <= 4, len(daemon.events("watch.started"))
    with daemon.control() as control:
        assert control.ok("status")["status"]["watch"]["mode"] == "poll"
    write_hook(hooks, "later", events=["command:later"])

    def later_replies() -> bool:
        with daemon.control() as control:
            return "later" in control.ok("message", sessionKey="s", text="/later")["messages"]

    wait_until(later_replies, what="a hook saved while polling to load")
    assert daemon.stop() == 0


LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
"""A billion laughs: nine levels of nine aliases, 9**9 strings once expanded."""


def test_special_files_and_alias_bombs_as_the_config_are_refused(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    config = state_dir / "gatewayd.yaml"
    cases: dict[str, Callable[[], object]] = {
        "fifo": lambda: os.mkfifo(config),
        "device": lambda: config.symlink_to("/dev/zero"),
        "laughs": lambda: config.write_text(LAUGHS),
        "recursive": lambda: config.write_text("hooks: &h {entries: {x: *h}}\n"),
    }
    for name, make in cases.items():
        config.unlink(missing_ok=True)
        make()
        daemon = start_daemon(wait_ready=False)
        assert daemon.wait() == 78, name
        text = daemon.stderr_text()
        assert str(config) in text, (name, text)
        expected = {
            "fifo": "not a regular file",
            "device": "not a regular file",
            "laughs": "expand to more than 100000 nodes",
            "recursive": "refers to the node that contains it",
        }[name]
        assert expected in text, (name, text)


def test_special_files_and_alias_bombs_in_hooks_and_workspace(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(
        hooks,
        "bomb",
        hook_md=f"---\nname: bomb\n{LAUGHS}metadata: {{eliza: {{events: [command:x]}}}}\n---\n",
    )
    write_hook(hooks, "plain", events=["command:x"])
    # A HOOK.md that is no file: the hook is listed with why, not left out as if no hook.
    (hooks / "dir-md" / "HOOK.md").mkdir(parents=True)
    (hooks / "fifo-md").mkdir()
    os.mkfifo(hooks / "fifo-md" / "HOOK.md")
    workspace = state_dir / "workspace"
    workspace.mkdir()
    os.mkfifo(workspace / "AGENTS.md")
    (workspace / "SOUL.md").symlink_to("/dev/zero")
    (workspace / "TOOLS.md").write_text("tools\n")
    os.mkfifo(workspace / "BOOT.md")
    daemon = start_daemon({"gateway": {"startupHookDelayMs": 0}})
    failed = daemon.wait_log("boot_md.failed")
    assert "not a regular file" in failed["error"]
    with daemon.control() as control:
        files = control.ok("bootstrap", sessionKey="s")["bootstrapFiles"]
        assert [f["name"] for f in files] == ["TOOLS.md"]
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
    assert listing["bomb"]["status"] == "invalid"
    assert "expand to more than 100000 nodes" in " ".join(listing["bomb"]["reasons"])
    for name, kind in (("dir-md", "a directory"), ("fifo-md", "a FIFO, device or socket")):
        assert listing[name]["status"] == "invalid", listing[name]
        assert f"HOOK.md is {kind}, not a regular file" in " ".join(listing[name]["reasons"])
    assert daemon.stop() == 0


UNBUILDABLE = {
    # Each is valid YAML that Python cannot turn into values: the exception left the load
    # (RecursionError, ValueError, OverflowError) and `gatewayd run` exited at its start.
    "deep": ("x: " + "[" * 900 + "]" * 900, "nested too deeply to read"),
    "deep-json": ("metadata: '" + "[" * 5000 + "]" * 5000 + "'", "JSON string nested too deeply"),
    "long-int": ("version: " + "9" * 5000, "an integer of more than 1000 digits"),
    "no-such-day": ("updated: 2024-02-30", "'2024-02-30' is not a valid date or time"),
    "huge-timeout": ("timeoutMs: " + "9" * 400, "timeoutMs must be a positive integer"),
}


def test_hook_md_values_python_cannot_build_fail_that_hook_alone(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain", events=["command:x"])
    for name, (line, _) in UNBUILDABLE.items():
        meta = "metadata: {eliza: {events: [command:x]}}\n" if name != "deep-json" else ""
        write_hook(hooks, name, hook_md=f"---\nname: {name}\n{line}\n{meta}---\n")
    daemon = start_daemon(watch=True)

    def listing() -> dict[str, dict[str, Any]]:
        with daemon.control() as control:
            return {h["name"]: h for h in control.ok("hooks")["hooks"]}

    for name, (_, reason) in UNBUILDABLE.items():
        hook = listing()[name]
        if name == "deep-json":
            # No object OpenClaw could read as metadata: a hook subscribed to nothing, saying so.
            assert hook["status"] == "skipped", hook
            assert "is no mapping" in " ".join(hook["warnings"]), hook
            continue
        assert hook["status"] == "invalid", hook
        assert reason in " ".join(hook["reasons"]), hook
    # Written while the daemon runs: the live reload lists it the same way.
    write_hook(hooks, "later", hook_md="---\nname: later\nupdated: 2024-13-01\n---\n")
    wait_until(lambda: "later" in listing(), timeout=30, what="the new hook listed")
    assert "not a valid date or time" in " ".join(listing()["later"]["reasons"])
    with daemon.control() as control:
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
    assert daemon.stop() == 0


def test_a_requires_config_path_of_many_parts_does_not_stall_the_load(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """Each part of a ``requires.config`` path was tried as the start of a key of every
    length: a path of 450,000 parts (900 KB, under the HOOK.md limit) took the load half an
    hour, and `gatewayd run` was not ready before that."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain", events=["command:x"])
    path = "hooks" + ".x" * 450_000
    write_hook(hooks, "long", events=["command:x"], meta={"requires": {"config": [path]}})
    daemon = start_daemon()
    with daemon.control() as control:
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
    assert listing["long"]["status"] == "ineligible"
    assert listing["long"]["reasons"] == [f"Config missing: {path}"]
    assert daemon.stop() == 0


def test_a_hook_listing_too_many_events_is_invalid_and_the_load_goes_on(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """Each unknown event key is matched against the vocabulary for a suggestion: a HOOK.md
    of 70,000 misspelt keys (under the size limit) took 12 s of every load."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain", events=["command:x"])
    keys = ",".join(f"x:{i}" for i in range(70_000))  # one comma-separated string, 0.5 MB
    write_hook(
        hooks, "many", hook_md=f'---\nname: many\nmetadata: {{eliza: {{events: "{keys}"}}}}\n---\n'
    )
    daemon = start_daemon()
    with daemon.control() as control:
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
    assert listing["many"]["status"] == "invalid", listing["many"]
    assert "events lists 70000 keys, more than 1000" in " ".join(listing["many"]["reasons"])
    assert daemon.stop() == 0


BLOCKING = """
import threading
threading.Event().wait()  # an import that never returns

async def handler(event):
    event.messages.append("unreachable")
"""


def test_a_hook_whose_import_blocks_is_bounded(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    hooks = state_dir / "hooks"
    write_hook(hooks, "stuck", events=["command:x"], handler=BLOCKING)
    write_hook(hooks, "plain", events=["command:x"])
    daemon = start_daemon({"hooks": {"entries": {"stuck": {"timeoutMs": 1000}}}})
    with daemon.control() as control:
        listing = {h["name"]: h for h in control.ok("hooks")["hooks"]}
        assert listing["stuck"]["status"] == "failed"
        assert "did not finish within 1 s" in " ".join(listing["stuck"]["reasons"])
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
        # A reload meets the same import (still blocked in the abandoned thread) and finishes.
        assert control.ok("reload")["result"]["failed"]
        assert control.ok("ping")["pong"] is True
    assert daemon.stop() == 0


def test_a_hook_whose_import_never_returns_is_not_imported_again_until_it_changes(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """Every load imported it again: one more thread blocked in it for good per reload (one
    more spinning, for an endless loop). Now a load fails it at once while the earlier import
    still runs, and a saved edit imports it again."""
    hooks = state_dir / "hooks"
    stuck = write_hook(hooks, "stuck", events=["command:x"], handler=BLOCKING)
    plain = write_hook(hooks, "plain", events=["command:x"])
    # A single-file hook lives in the root itself: an edit of another hook there is not its.
    (hooks / "stuck-file.py").write_text(f"# define_hook(\n{BLOCKING}")
    entries = {name: {"timeoutMs": 300} for name in ("stuck", "stuck-file")}
    daemon = start_daemon({"hooks": {"entries": entries}})
    tasks = Path(f"/proc/{daemon.proc.pid}/task")
    with daemon.control() as control:
        control.ok("reload")
        threads = len(list(tasks.iterdir()))
        for n in range(10):
            # an edit of another hook: new content each time, a handler that replies nothing
            (plain / "handler.py").write_text(
                f"async def handler(event):\n    return None  # {n}\n"
            )
            reasons = control.ok("reload")["result"]["failed"]
        assert len(list(tasks.iterdir())) <= threads + 2  # not one more per reload
        assert len(reasons) == 2, reasons
        assert all("in an earlier load, and still runs" in reason for reason in reasons), reasons
        (stuck / "handler.py").write_text(
            "async def handler(event):\n    event.messages.append('unstuck')\n"
        )
        still = [reason for reason in reasons if reason.startswith("stuck-file")]
        assert control.ok("reload")["result"]["failed"] == still
        assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["unstuck"]
    assert daemon.stop() == 0


def test_a_link_to_a_fifo_under_a_watched_root_does_not_stall_live_reload(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """The watcher hashes recently modified files; a fresh symlink to a FIFO was read through
    (waiting for a writer forever): every later reload was lost and the stop hung on the
    blocked thread. A link to ``/dev/zero`` was read until memory ran out."""
    hooks = state_dir / "hooks"
    handler = "async def handler(event):\n    event.messages.append({!r})\n"
    write_hook(hooks, "greet", events=["command:hello"], handler=handler.format("v1"))
    with fifo(state_dir / "pipe") as pipe:
        daemon = start_daemon(watch=True)

        def answer() -> list[str]:
            with daemon.control() as control:
                return list(control.ok("message", sessionKey="s", text="/hello")["messages"])

        assert answer() == ["v1"]
        # A new directory rebuilds the watches, which snapshots the roots.
        (hooks / "notes").mkdir()
        (hooks / "notes" / "pipe").symlink_to(pipe)
        assert wait_until(
            lambda: len(daemon.events("watch.started")) >= 2, timeout=30, what="new watches"
        )
        (hooks / "greet" / "handler.py").write_text(handler.format("v2"))
        assert wait_until(lambda: answer() == ["v2"], timeout=30, what="the edit reloaded")
        assert daemon.stop() == 0


def test_a_hook_root_that_cannot_be_listed_is_rejected_not_fatal(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """The managed hooks dir and a ``subagents`` dir that are symlink loops (ELOOP, as EACCES
    or EIO would be): the OSError left every load, so ``gatewayd run`` exited at start. Now
    each is a rejected root, logged with the fix; the other roots load, and once the root is a
    directory again its hooks load live."""
    hooks = state_dir / "hooks"
    hooks.symlink_to(hooks)
    workspace = state_dir / "workspace"
    write_hook(workspace / "hooks", "ws", events=["command:ws"])
    (workspace / "subagents").symlink_to(workspace / "subagents")
    daemon = start_daemon(watch=True)
    reasons = [r["reason"] for r in daemon.events("hooks.root_rejected")]
    assert any(r.startswith(f"{hooks}: cannot be listed") for r in reasons), reasons
    assert any(r.startswith(f"{workspace / 'subagents'}: cannot be") for r in reasons), reasons

    def answer(text: str) -> list[str]:
        with daemon.control() as control:
            return list(control.ok("message", sessionKey="s", text=text)["messages"])

    assert answer("/ws") == ["ws"]
    hooks.unlink()
    write_hook(hooks, "back", events=["command:back"])
    assert wait_until(lambda: answer("/back") == ["back"], timeout=30, what="the root loaded")
    assert daemon.stop() == 0


def test_a_tree_deeper_than_the_recursion_limit_under_a_watched_root(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """The watcher's snapshot of the roots recursed per directory: 1200 nested directories
    under the hooks dir raised RecursionError at start (the daemon exited) and from every
    later snapshot. Now the tree is watched like any other, and an edit deep in it reloads."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "greet", events=["command:hello"])
    deep = os.open(hooks, os.O_RDONLY)
    try:  # relative to a descriptor: the full path is longer than the shell would like
        for _ in range(1200):
            os.mkdir("d", dir_fd=deep)
            inner = os.open("d", os.O_RDONLY, dir_fd=deep)
            os.close(deep)
            deep = inner
        daemon = start_daemon(watch=True)
        daemon.wait_log("watch.started")
        reloads = len(daemon.events("reload.done"))
        os.close(os.open("note.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=deep))
        assert wait_until(lambda: len(daemon.events("reload.done")) > reloads, what="a reload")
        with daemon.control() as control:
            assert control.ok("message", sessionKey="s", text="/hello")["messages"] == ["greet"]
        assert daemon.stop() == 0
    finally:
        os.close(deep)
        _lift_away(hooks / "d")


def _lift_away(top: Path) -> None:
    """Remove a chain of nested ``top/d/d/...`` a level at a time (shutil.rmtree, the state
    dir's teardown, recurses too)."""
    lifted = top.with_name("lifted")
    while top.exists():
        if (top / "d").exists():
            (top / "d").rename(lifted)
        (top / "note.txt").unlink(missing_ok=True)
        top.rmdir()
        if lifted.exists():
            lifted.rename(top)


def test_an_agent_config_file_that_is_a_fifo_does_not_freeze_the_daemon(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """``agent.configFile`` is read on the event loop when the load spec is made: pointed at a
    FIFO by a config edit, the read waited for a writer and froze everything (requests,
    dispatch, SIGTERM). Now it is refused unread, as not a regular file."""
    write_hook(state_dir / "hooks", "plain", events=["command:x"])
    with fifo(state_dir / "agent.json") as pipe:
        daemon = start_daemon(watch=True)
        reloads = len(daemon.events("reload.done"))
        (state_dir / "gatewayd.yaml").write_text(f'agent: {{configFile: "{pipe}"}}\n')
        assert wait_until(lambda: len(daemon.events("reload.done")) > reloads, what="reload")
        with daemon.control(timeout=10) as control:
            assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
            status = control.ok("status")["status"]
        assert status["last_reload"]["result"] == "ok", status["last_reload"]
        assert daemon.stop() == 0


def test_a_fifo_named_like_a_single_file_hook_does_not_stall_the_load(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """The scan for single-file hooks opened each ``*.py`` in a root to look for define_hook:
    a FIFO named ``x.py`` waited for a writer, so the daemon never became ready (and a reload
    never finished). Now it is noted as not a regular file, and the rest loads."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain", events=["command:x"])
    with fifo(hooks / "x.py"):
        daemon = start_daemon(watch=True)
        with daemon.control(timeout=10) as control:
            assert control.ok("message", sessionKey="s", text="/x")["messages"] == ["plain"]
        assert daemon.stop() == 0


def test_session_state_files_that_are_fifos_are_set_aside_and_the_daemon_starts(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    """The session table and its journal are read at start: a FIFO in place of either waited
    for a writer, so the daemon never became ready. Now each is set aside, named in the log,
    and the daemon starts with the sessions it could read."""
    sessions = state_dir / "sessions"
    sessions.mkdir(mode=0o700)
    with fifo(sessions / "sessions.json"), fifo(sessions / "sessions.journal"):
        daemon = start_daemon()
        with daemon.control(timeout=10) as control:
            control.ok("message", sessionKey="s", text="hello")
        for event in ("sessions.index_damaged", "sessions.journal_damaged"):
            record = daemon.wait_log(event)
            assert "not a regular file" in record["error"], record
            assert record["moved_to"].endswith(f".damaged-{daemon.proc.pid}"), record
        assert "s" in session_table(state_dir)
        assert daemon.stop() == 0


def test_a_file_where_the_sessions_directory_goes_stops_the_start_naming_it(
    start_daemon: StartDaemon, state_dir: Path
) -> None:
    """``<state>/sessions`` a regular file: the start ended in a FileExistsError traceback.
    Now it fails with exit 1 and an error that names the path and the fix."""
    (state_dir / "sessions").write_text("not a directory\n")
    daemon = start_daemon(wait_ready=False)
    assert daemon.wait(timeout=30) == 1
    error = daemon.wait_log("gateway.start_failed")["error"]
    assert f"cannot use the sessions directory {state_dir / 'sessions'}" in error
    assert "move what is at that path aside" in error
    assert "Traceback" not in daemon.stderr_text()
    assert daemon.shutdown_line()["exit_code"] == 1
