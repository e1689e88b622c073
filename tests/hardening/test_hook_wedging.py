"""A hook cannot wedge the daemon. Each test runs a real ``gatewayd run``
with a hook that misbehaves in one way, and checks the daemon goes on answering."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook
from tests.support.state import wait_until

HANGS = """
import time
def handler(event):
    time.sleep(60)
"""


def test_timed_out_sync_hooks_hold_a_bounded_number_of_threads(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "hangs",
        events=["command:hang"],
        handler=HANGS,
        meta={"timeoutMs": 200},
    )
    daemon = start_daemon({"hooks": {"maxAbandonedThreads": 2}})
    with daemon.control() as ctl:
        for _ in range(4):
            ctl.ok("message", sessionKey="s", text="/hang")
        threads = ctl.ok("status")["status"]["threads"]
        assert threads["abandoned"] == 2  # the two that timed out still run; no more started
        assert threads["refused"] == 2
        assert ctl.ok("ping")["pong"] is True
    assert len(daemon.events("hook.timeout")) == 2
    refused = [e for e in daemon.events("hook.thread_refused") if e["hook"] == "hangs"]
    assert len(refused) == 2 and "maxAbandonedThreads" in refused[0]["fix"]


SWALLOWS = """
import asyncio
async def handler(event):
    while True:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # ignores its timeout, and the shutdown
"""


def test_an_async_hook_that_swallows_cancellation_is_abandoned(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "stubborn",
        events=["command:stuck"],
        handler=SWALLOWS,
        meta={"timeoutMs": 300},
    )
    daemon = start_daemon()
    began = time.monotonic()
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="s", text="/stuck")["messages"] == []
        answered = time.monotonic() - began
        assert ctl.ok("ping")["pong"] is True
    assert answered < 20  # never waits for the 10 s sleeps it keeps starting
    assert daemon.wait_log("hook.ignored_cancel")["hook"] == "stubborn"
    assert daemon.wait_log("hook.timeout")["hook"] == "stubborn"
    # A second one in flight at shutdown does not hold the exit either.
    with daemon.control() as ctl:
        ctl.request("trigger", event="command:stuck", sessionKey="t", wait=False)
    time.sleep(0.2)
    began = time.monotonic()
    assert daemon.stop() == 0
    assert time.monotonic() - began < 20


BACKGROUNDS = """#!/bin/sh
sleep 60 &
echo done
"""


def test_a_command_hook_that_leaves_a_child_behind_does_not_hold_the_event(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(
        state_dir / "hooks",
        "bg",
        events=["command:bg"],
        handler=BACKGROUNDS,
        handler_file="handler",
        meta={"timeoutMs": 20000},
    )
    daemon = start_daemon()
    began = time.monotonic()
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="s", text="/bg")["messages"] == ["done"]
    assert time.monotonic() - began < 15  # not the 20 s timeout, nor the child's 60 s
    assert daemon.wait_log("hook.command_orphans")["hook"] == "bg"
    assert not daemon.events("hook.timeout")
    began = time.monotonic()
    assert daemon.stop() == 0
    assert time.monotonic() - began < 15


FORKS = """
import os, time
def handler(event):
    child = os.fork()
    if child == 0:  # the child outlives the daemon
        time.sleep(60)
        os._exit(0)
    with open("forked.pid", "w") as f:
        f.write(str(child))
    event.messages.append("forked")
"""


def test_a_process_a_hook_forks_does_not_keep_the_socket_lock(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "forker", events=["command:fork"], handler=FORKS)
    # The in-memory queue: with the journal, the second daemon redelivers the /fork the first
    # was killed before marking done (at-least-once), and its own forked child then holds the
    # second daemon's log pipe for a minute (two 30 s waits in this test, measured).
    memory = {"gateway": {"queue": {"journal": "memory"}}}
    daemon = start_daemon(memory)
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="s", text="/fork")["messages"] == ["forked"]
    child = int((state_dir / "forked.pid").read_text())
    daemon.send_signal(signal.SIGKILL)
    daemon.proc.wait(30)
    try:
        os.kill(child, 0)  # the forked child still runs (it holds the daemon's inherited fds)
        # Without the guard it would hold the lock and the socket.
        again = start_daemon(memory)
        with again.control() as ctl:
            assert ctl.ok("ping")["pong"] is True
        assert again.stop() == 0
        os.kill(child, 0)  # still there: the new daemon ran beside it
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # its end closes the first daemon's log pipe
    daemon.wait()


EXITS = """
import os
def handler(event):
    os._exit(0)
"""


def test_os_exit_in_a_hook_is_not_a_clean_exit(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "quitter", events=["command:quit"], handler=EXITS)
    daemon = start_daemon()
    with daemon.control() as ctl:
        ctl.request("trigger", event="command:quit", sessionKey="s", wait=False)
    assert daemon.wait() == 70  # EX_SOFTWARE: a supervisor restarts it, 0 would not
    line = daemon.wait_log("hook.os_exit")
    assert line["hook"] == "quitter" and line["code"] == 0


CLOSES = """
import os
def handler(event):
    os.close(2)
    os.close(1)
    os.close(0)
"""


def test_a_hook_closing_fds_0_to_2_does_not_silence_the_daemon(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    write_hook(state_dir / "hooks", "closer", events=["command:close"], handler=CLOSES)
    daemon = start_daemon()
    with daemon.control() as ctl:
        ctl.ok("message", sessionKey="s", text="/close")
    # Restored within a second, with a line that says so, on the real stderr.
    assert daemon.wait_log("hook.closed_std_fds", timeout=30)["fds"] == [0, 1, 2]
    with daemon.control() as ctl:
        ctl.ok("message", sessionKey="later", text="hello")
    wait_until(lambda: daemon.events("session.started"), what="later log lines")
    assert any(e.get("session_key") == "later" for e in daemon.events("session.started"))
    assert daemon.stop() == 0


RAISES_AGAIN = {
    # An exception whose own __str__ raises, from an async and from a sync handler.
    "unprintable": """
class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no str")

async def handler(event):
    raise Unprintable()
""",
    "unprintable-sync": """
class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no str")

def handler(event):
    raise Unprintable()
""",
    # A result mapping whose methods raise.
    "bad-mapping": """
from collections.abc import Mapping

class Broken(Mapping):
    def __getitem__(self, key):
        raise KeyError(key)
    def __iter__(self):
        raise RuntimeError("no iter")
    def __len__(self):
        return 1

async def handler(event):
    return Broken()
""",
}


def test_a_failure_that_raises_again_fails_its_hook_not_the_event(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """Reporting each failure raised once more (its str(), the result's iteration): the
    dispatch of the event ended there (``queue.dispatch_crashed``), the hooks after it never
    ran and the reply was empty."""
    hooks = state_dir / "hooks"
    for name, source in RAISES_AGAIN.items():
        write_hook(hooks, name, events=["command:go", "agent:before_tool_call"], handler=source)
    write_hook(
        hooks, "last", events=["command:go", "agent:before_tool_call"], meta={"priority": 200}
    )
    daemon = start_daemon()
    with daemon.control() as ctl:
        for session in ("s", "t"):
            assert ctl.ok("message", sessionKey=session, text="/go")["messages"] == ["last"]
        assert ctl.ok("trigger", event="command:go", sessionKey="u")["messages"] == ["last"]
        # A result is read only on an event that takes one (agent:before_tool_call).
        decision = ctl.ok("trigger", event="agent:before_tool_call", sessionKey="v")
        stats = {h["name"]: h["stats"] for h in ctl.ok("hooks")["hooks"]}
    assert not daemon.events("queue.dispatch_crashed")
    unprintable = "Unprintable: <str() of the exception raised RuntimeError>"
    for name in ("unprintable", "unprintable-sync"):
        assert stats[name]["errors"] == 4
        assert stats[name]["lastError"]["message"] == unprintable
    assert decision["messages"] == ["last"] and decision["result"] == {}, decision
    bad = [e for e in daemon.events("hook.bad_result") if e["hook"] == "bad-mapping"]
    assert len(bad) == 1 and bad[0]["error"] == "RuntimeError: no iter", bad
    assert daemon.stop() == 0


INSPECTION_RAISES = {
    "module-getattr": (
        "def __getattr__(name):\n    raise RuntimeError('no ' + name)\n",
        "handler.py:2: RuntimeError: no handler, raised while looking up and checking its handler",
    ),
    "signature-property": (
        "class Handler:\n"
        "    def __call__(self, event):\n"
        "        pass\n"
        "    @property\n"
        "    def __signature__(self):\n"
        "        raise RuntimeError('no signature')\n"
        "handler = Handler()\n",
        "handler.py:6: RuntimeError: no signature, raised while looking up and checking",
    ),
    "unprintable-import": (
        "class Unprintable(Exception):\n"
        "    def __str__(self):\n"
        "        raise RuntimeError('no str')\n"
        "raise Unprintable()\n",
        "handler.py:4: Unprintable: <str() of the exception raised RuntimeError>",
    ),
}


SINGLE_FILES_RAISING = {
    # Single-file hooks (files in the root calling define_hook): their module's `hook`, and
    # each events-map entry's signature, are read the same way.
    "file-getattr": (
        "# define_hook(\ndef __getattr__(name):\n    raise RuntimeError('no ' + name)\n",
        "file-getattr.py:3: RuntimeError: no hook, raised while looking up and checking",
    ),
    "file-signature": (
        "from gatewayd.hooks import define_hook\n"
        "class Handler:\n"
        "    def __call__(self, event):\n"
        "        pass\n"
        "    @property\n"
        "    def __signature__(self):\n"
        "        raise RuntimeError('no signature')\n"
        "hook = define_hook(events={'command:go': Handler()})\n",
        "file-signature.py:7: RuntimeError: no signature, raised while looking up and checking",
    ),
}


def test_a_handler_module_that_raises_when_inspected_fails_alone(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """The loader asks the imported module for its export and reads the handler's signature:
    hook code that raised there, or an import error whose str() raised, left the load and
    ended `gatewayd run` at its start."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "plain", events=["command:go"])
    for name, (source, _) in SINGLE_FILES_RAISING.items():
        (hooks / f"{name}.py").write_text(source)
    names = list(INSPECTION_RAISES)
    write_hook(hooks, names[0], events=["command:go"], handler=INSPECTION_RAISES[names[0]][0])
    daemon = start_daemon(watch=True)

    def listing() -> dict[str, dict[str, Any]]:
        with daemon.control() as ctl:
            return {h["name"]: h for h in ctl.ok("hooks")["hooks"]}

    for name in names[1:]:  # the others arrive while it runs: each live reload survives too
        write_hook(hooks, name, events=["command:go"], handler=INSPECTION_RAISES[name][0])

    def failed_as_expected() -> bool:
        hooks = listing()
        return all(
            name in hooks and reason in " ".join(hooks[name]["reasons"])
            for name, (_, reason) in (INSPECTION_RAISES | SINGLE_FILES_RAISING).items()
        )

    wait_until(failed_as_expected, timeout=30, what=f"each hook failed with its reason: {names}")
    failing = [*names, *SINGLE_FILES_RAISING]
    assert {listing()[name]["status"] for name in failing} == {"failed"}
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="s", text="/go")["messages"] == ["plain"]
    assert daemon.stop() == 0


UNPRINTABLE_LINE = """
class Unprintable:
    def __str__(self):
        raise RuntimeError("no str")

async def handler(event):
    event.messages.append(Unprintable())
"""


def test_a_reply_line_that_cannot_be_text_does_not_lose_the_reply(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """A handler may append any object to ``event.messages`` (it is ``str()``-ed). One whose
    ``str()`` raised failed the ``message`` and ``trigger`` ops as ``internal``: the other
    hooks' lines were lost with it."""
    hooks = state_dir / "hooks"
    write_hook(hooks, "odd", events=["command:go"], handler=UNPRINTABLE_LINE)
    write_hook(hooks, "last", events=["command:go"], meta={"priority": 200})
    daemon = start_daemon()
    line = "<a Unprintable whose str() raised RuntimeError>"
    with daemon.control() as ctl:
        assert ctl.ok("message", sessionKey="s", text="/go")["messages"] == [line, "last"]
        assert ctl.ok("trigger", event="command:go", sessionKey="t")["messages"] == [line, "last"]
    bad = daemon.events("hook.bad_messages")
    assert len(bad) == 2 and bad[0]["got"] == line and "append str lines" in bad[0]["fix"]
    assert not daemon.events("control.op_failed")
    assert daemon.stop() == 0


UNSENDABLE_CONTEXT = """
async def handler(event):
    circular = []
    circular.append(circular)
    deep = []
    for _ in range(5000):
        deep = [deep]
    event.context["circular"] = circular
    event.context["deep"] = deep
"""


def test_a_context_value_that_is_no_json_does_not_end_the_dispatch(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """A JS or command handler gets the event as JSON: a value an earlier handler put in the
    context that contains itself, or is nested deeper than json encodes, ended the event's
    dispatch there (``queue.dispatch_crashed``): neither ran, nor did any handler after them.
    Such a value reaches them as a ``[list]`` placeholder, as one that is not JSON does; so
    does a command hook's reply nested too deeply to decode come back as lines."""
    hooks = state_dir / "hooks"
    write_hook(
        hooks, "odd", events=["command:go"], handler=UNSENDABLE_CONTEXT, meta={"priority": 50}
    )
    js = "export default async (event) => { event.messages.push(`js ${event.context.deep}`); };\n"
    write_hook(hooks, "js", events=["command:go"], handler=js, handler_file="handler.js")
    deep_reply = '{"result": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    command = f"#!/bin/sh\ncat >/dev/null\necho '{deep_reply}'\necho after\n"
    write_hook(hooks, "cmd", events=["command:go"], handler=command, handler_file="handler")
    write_hook(hooks, "last", events=["command:go"], meta={"priority": 200})
    daemon = start_daemon()
    with daemon.control() as ctl:
        for session in ("s", "t"):
            reply = ctl.ok("message", sessionKey=session, text="/go")["messages"]
            assert reply == [deep_reply, "after", "js [list]", "last"], reply[2:]
        with_trace = ctl.ok("trigger", event="command:go", sessionKey="u", trace=True)
    assert with_trace["messages"] == [deep_reply, "after", "js [list]", "last"]
    assert not daemon.events("queue.dispatch_crashed")
    assert daemon.stop() == 0


STUCK_IMPORT = "import time\ntime.sleep(100000)\n\nasync def handler(event):\n    pass\n"
AN_HOUR = {"hooks": {"timeoutMs": 3_600_000}}
"""The import bound (a handler's timeout) an hour: only the shutdown's own bounds end it."""


def test_sigterm_during_a_stuck_import_at_start_stops_within_the_shutdown_bounds(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    """The start's load waited for its thread, which waits for the import's bound: SIGTERM
    took 28 s with the default bound (an hour here). It is left behind now: the shutdown
    runs at once, within its own bounds (gateway.shutdownTimeoutMs + drainTimeoutMs)."""
    write_hook(state_dir / "hooks", "stuck", handler=STUCK_IMPORT)
    daemon = start_daemon(AN_HOUR, wait_ready=False)
    daemon.wait_log("gateway.starting")
    time.sleep(1)  # the load is in the import (it never leaves it)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    assert daemon.shutdown_line()["signal"] == "SIGTERM"


def test_sigterm_during_a_reload_stuck_in_an_import_stops_within_the_shutdown_bounds(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    daemon = start_daemon(AN_HOUR)
    write_hook(state_dir / "hooks", "stuck", handler=STUCK_IMPORT)
    daemon.send_signal(signal.SIGHUP)
    daemon.wait_log("reload.begin")
    time.sleep(1)  # the reload is in the import
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
