"""Live reload against a real gateway (in-process, over its control socket; a ``gatewayd run``
process for a signal and a lowered inotify limit): what users do to their hooks and config, and
what the next message answers. Waits are generous bounds ("it happened"), never thresholds."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from gatewayd import reloader
from tests.support.cli import RunCli, off_loop
from tests.support.control import Control
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon, StartGateway
from tests.support.hooks import WriteHook
from tests.support.inprocess import InProcess
from tests.support.state import eventually, eventually_async, wait_until, write_config

HELLO = "/hello"
anyio_test = pytest.mark.anyio


def greet_source(version: str, *, delay: float = 0) -> str:
    sleep = f"    await asyncio.sleep({delay})\n" if delay else ""
    reply = f"    event.messages.append({version!r})\n"
    return f"import asyncio\n\nasync def handler(event):\n{sleep}{reply}"


@pytest.fixture
def add_greet(write_hook: WriteHook) -> Any:
    """``add_greet(root, version="v1", name="greet")``: a ``command:hello`` hook replying
    ``version``."""

    def add(root: Path, version: str = "v1", *, name: str = "greet") -> Path:
        return write_hook(root, name, events=["command:hello"], handler=greet_source(version))

    return add


async def answer(daemon: InProcess, text: str = HELLO, session: str = "s1") -> list[str]:
    async with daemon.control() as ctl:
        return list((await ctl.ok("message", sessionKey=session, text=text))["messages"])


async def answers_to(daemon: InProcess, text: str, expected: list[str], what: str) -> None:
    """Wait until ``text`` is answered with ``expected``."""

    async def answers() -> bool:
        return await answer(daemon, text) == expected

    await eventually_async(answers, timeout=60, what=what)


async def eventually_answers(daemon: InProcess, expected: list[str], what: str = "") -> None:
    await answers_to(daemon, HELLO, expected, what or f"reply {expected}")


async def status(daemon: InProcess) -> dict[str, Any]:
    async with daemon.control() as ctl:
        return dict((await ctl.ok("status"))["status"])


def answer_now(daemon: Daemon, text: str = HELLO, session: str = "s1") -> list[str]:
    """:func:`answer` for a ``gatewayd run`` process."""
    with daemon.control() as ctl:
        return list(ctl.ok("message", sessionKey=session, text=text)["messages"])


def status_now(daemon: Daemon) -> dict[str, Any]:
    """:func:`status` for a ``gatewayd run`` process."""
    with daemon.control() as ctl:
        return dict(ctl.ok("status")["status"])


def rename_save(path: Path, text: str) -> None:
    """What editors do: write a temp file beside it, then rename it over the original."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@anyio_test
async def test_a_reload_is_in_status_once_its_new_code_answers(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reload's record is made when its hooks are swapped in, not after what follows the
    swap (the replaced hooks' collection, made slow here)."""

    def slow_collection() -> None:
        time.sleep(1.0)

    monkeypatch.setattr(reloader, "collect_replaced", slow_collection)
    hook = add_greet(state_dir / "hooks")
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1"]
    before = (await status(daemon))["reloads"]
    (hook / "handler.py").write_text(greet_source("v2"))
    await eventually_answers(daemon, ["v2"])
    assert (await status(daemon))["reloads"] == before + 1


@anyio_test
async def test_write_and_rename_save_run_the_new_code(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    hook = add_greet(state_dir / "hooks")
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1"]
    (hook / "handler.py").write_text(greet_source("v2"))
    await eventually_answers(daemon, ["v2"])
    rename_save(hook / "handler.py", greet_source("v3"))
    await eventually_answers(daemon, ["v3"])
    st = await status(daemon)
    assert st["reloads"] >= 2
    assert st["last_reload"]["trigger"] == "watch"
    assert st["last_reload"]["result"] == "ok"
    assert {"time", "duration_ms"} <= st["last_reload"].keys()
    assert st["watch"]["mode"] == "inotify"


@anyio_test
async def test_root_created_after_start_deleted_and_recreated(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    managed = state_dir / "hooks"
    assert not managed.exists()
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == []
    add_greet(managed)  # creates ~/.eliza/hooks after the daemon started
    await eventually_answers(daemon, ["v1"], "a hook in a root created after start")
    shutil.rmtree(managed)
    await eventually_answers(daemon, [], "the hook gone with its root")
    add_greet(managed, "v2")
    await eventually_answers(daemon, ["v2"], "a hook in the recreated root")
    (managed / "greet" / "handler.py").write_text(greet_source("v3"))
    await eventually_answers(daemon, ["v3"], "edits in the recreated root")


@anyio_test
async def test_hook_dir_renamed_and_symlinked_hooks(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway, tmp_path: Path
) -> None:
    managed = state_dir / "hooks"
    add_greet(managed)
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1"]
    (managed / "greet").rename(managed / "greet-renamed")

    async def renamed() -> bool:
        return any(h["path"].endswith("greet-renamed") for h in await hooks_op(daemon))

    await eventually_async(renamed, timeout=60, what="the renamed directory loaded")
    assert await answer(daemon) == ["v1"]
    # A symlink to a hook outside every allowed root is refused, with its reason.
    outside = add_greet(tmp_path, "evil", name="evil")
    (outside / "HOOK.md").write_text(
        (outside / "HOOK.md").read_text().replace("command:hello", "command:evil")
    )
    (managed / "evil").symlink_to(outside, target_is_directory=True)

    async def evil() -> list[str]:
        hooks = (await status(daemon))["hooks"]
        return [r for r in hooks["failed"] + hooks["skipped"] if r.startswith("evil")]

    reason = await eventually_async(evil, timeout=60, what="the escaping symlink reported")
    assert "outside" in reason[0] or "symlink" in reason[0], reason
    assert await answer(daemon, "/evil") == []
    # A symlink that stays inside the root is an ordinary hook.
    spare = add_greet(managed / ".store", "v-linked", name="linked")
    (spare / "HOOK.md").write_text(
        (spare / "HOOK.md").read_text().replace("command:hello", "command:linked")
    )
    (managed / "linked").symlink_to(spare, target_is_directory=True)
    await answers_to(daemon, "/linked", ["v-linked"], "linked hook")


async def hooks_op(daemon: InProcess) -> list[dict[str, Any]]:
    async with daemon.control() as ctl:
        return list((await ctl.ok("hooks"))["hooks"])


@anyio_test
async def test_fifty_file_checkout_is_one_reload(
    write_hook: WriteHook, state_dir: Path, start_gateway: StartGateway
) -> None:
    managed = state_dir / "hooks"
    for i in range(50):
        write_hook(
            managed,
            f"h{i:02d}",
            events=["command:count"],
            handler="async def handler(event):\n    event.messages.append('old')\n",
        )
    # The default 5 ms of quiet is less than a loaded machine (parallel tests on 2 cores) may
    # pause this process between two writes; 250 ms keeps the burst one burst there too.
    daemon = await start_gateway({"hooks": {"load": {"debounceMs": 250}}}, watch=True)
    before = (await status(daemon))["reloads"]
    for i in range(50):  # like `git checkout`: rewrite 50 handler files as fast as possible
        (managed / f"h{i:02d}" / "handler.py").write_text(
            "async def handler(event):\n    event.messages.append('new')\n"
        )
    await answers_to(daemon, "/count", ["new"] * 50, "all 50 new")
    await eventually(lambda: not _reload_pending(daemon), timeout=60)
    reloads = (await status(daemon))["reloads"] - before
    assert 1 <= reloads <= 2, reloads


def _reload_pending(daemon: InProcess) -> bool:
    """True while a reload began that has not finished (so counting now would be early)."""
    return len(daemon.events("reload.begin")) != len(daemon.events("reload.done"))


@anyio_test
async def test_broken_edit_fails_that_hook_alone_until_fixed(
    add_greet: Any,
    state_dir: Path,
    start_gateway: StartGateway,
    write_hook: WriteHook,
    run_cli: RunCli,
) -> None:
    managed = state_dir / "hooks"
    hook = add_greet(managed)
    write_hook(
        managed,
        "other",
        events=["command:hello"],
        handler="async def handler(event):\n    event.messages.append('other')\n",
    )
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1", "other"]
    broken = {
        "syntax error": ("handler.py", "async def handler(event)\n    pass\n", "SyntaxError"),
        "import error": ("handler.py", "import no_such_module_xyz\n", "no_such_module_xyz"),
        "missing export": ("handler.py", "async def other_name(event):\n    pass\n", "handler"),
        "bad yaml": ("HOOK.md", "---\nname: greet\nmetadata: {eliza: [\n---\n", "YAML"),
    }
    good_md = (hook / "HOOK.md").read_text()
    for what, (file, text, needle) in broken.items():
        (hook / file).write_text(text)

        async def reported() -> list[str]:
            hooks = (await status(daemon))["hooks"]
            return [
                r
                for r in hooks["failed"] + hooks["skipped"]
                if "greet" in r and needle in r  # noqa: B023 - called before the loop moves on
            ]

        failed = await eventually_async(reported, timeout=60, what=f"{what} reported")
        assert await answer(daemon) == ["other"], what  # every other hook keeps working
        listed = json.loads(
            (await off_loop(run_cli, "hooks", "list", "--json", "--verbose")).stdout
        )
        assert any(needle in " ".join(h["reasons"]) for h in listed["hooks"]), (what, failed)
        (hook / "HOOK.md").write_text(good_md)
        (hook / "handler.py").write_text(greet_source("fixed"))
        await eventually_answers(daemon, ["fixed", "other"], f"fixed after {what}")


@anyio_test
async def test_enable_disable_and_config_edits_are_live(
    add_greet: Any,
    state_dir: Path,
    start_gateway: StartGateway,
    write_hook: WriteHook,
    run_cli: RunCli,
) -> None:
    managed = state_dir / "hooks"
    hook = add_greet(managed)
    config = write_config(state_dir, {"hooks": {"timeoutMs": 30000}})
    config.write_text("# my notes: keep me\n" + config.read_text())
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1"]

    assert (await off_loop(run_cli, "hooks", "disable", "greet")).returncode == 0
    await eventually_answers(daemon, [], "disabled live")
    assert "# my notes: keep me" in config.read_text()
    assert (await off_loop(run_cli, "hooks", "enable", "greet")).returncode == 0
    await eventually_answers(daemon, ["v1"], "enabled live")

    # A timeout edit applies to the next event: a 300 ms handler against a 50 ms limit.
    (hook / "handler.py").write_text(greet_source("slow", delay=0.3))
    await eventually_answers(daemon, ["slow"])
    timeouts = (await status(daemon))["queue"]["timeouts"]
    data = yaml.safe_load(config.read_text())
    data["hooks"]["entries"]["greet"]["timeoutMs"] = 50
    config.write_text(yaml.safe_dump(data))
    await answers_to(daemon, HELLO, [], "the new timeout enforced")
    assert (await status(daemon))["queue"]["timeouts"] > timeouts

    # extraDirs added in the config: its hooks load (and its edits are watched).
    extra = state_dir / "packs" / "team"
    write_hook(
        extra,
        "team-hook",
        events=["command:team"],
        handler="async def handler(event):\n    event.messages.append('team')\n",
    )
    data["hooks"]["load"] = {"extraDirs": [str(extra)]}
    config.write_text(yaml.safe_dump(data))
    await answers_to(daemon, "/team", ["team"], "extraDir loaded")
    (extra / "team-hook" / "handler.py").write_text(
        "async def handler(event):\n    event.messages.append('team v2')\n"
    )
    await answers_to(daemon, "/team", ["team v2"], "extraDir watched")


@anyio_test
async def test_invalid_config_edit_is_refused_and_the_running_one_kept(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    add_greet(state_dir / "hooks")
    config = write_config(state_dir, {"hooks": {"entries": {"greet": {"enabled": True}}}})
    daemon = await start_gateway(watch=True)
    assert await answer(daemon) == ["v1"]
    config.write_text("hooks:\n  entries:\n    greet: {enabled: false}\n  timeoutMS: 5\n")
    refused = await daemon.wait_log("reload.refused", timeout=60)
    assert any("timeoutMS" in e for e in refused["errors"]), refused
    assert await answer(daemon) == ["v1"]  # the disable in the same broken edit was not applied
    assert (await status(daemon))["last_reload"]["result"] == "refused"
    config.write_text("hooks:\n  entries:\n    greet: {enabled: false}\n")
    await eventually_answers(daemon, [], "the corrected edit applied")


@pytest.mark.slow
@anyio_test
async def test_no_event_lost_during_a_hundred_reloads(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    hook = add_greet(state_dir / "hooks", "v0")
    daemon = await start_gateway(watch=True)
    stop = threading.Event()
    results: list[tuple[int, int, list[str]]] = []  # (client, n, reply)
    errors: list[BaseException] = []

    def client(index: int) -> None:
        try:
            with Control(daemon.socket) as ctl:
                n = 0
                while not stop.is_set():
                    n += 1
                    reply = ctl.ok("message", sessionKey=f"c{index}", text=HELLO)
                    results.append((index, n, reply["messages"]))
        except BaseException as exc:  # reported below: a dead client is a failure
            errors.append(exc)

    # Blocking clients on threads of their own, as four programs would be: the loop serves on.
    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    start_reloads = (await status(daemon))["reloads"]
    for version in range(1, 101):
        # Saved whole (temp file, rename): write_text truncates first, and on a loaded machine
        # the watcher can load the empty file in between, which is a third version.
        rename_save(hook / "handler.py", greet_source(f"v{version}"))

        async def reloaded() -> bool:
            return (await status(daemon))["reloads"] >= start_reloads + version or (  # noqa: B023
                await _answer_is(daemon, f"v{version}")  # noqa: B023
            )

        await eventually_async(reloaded, timeout=60, what=f"reload {version}")
    await eventually_answers(daemon, ["v100"])
    stop.set()
    for t in threads:  # joined off the loop: a client may be waiting for its last reply
        await anyio.to_thread.run_sync(t.join, 30)
    assert not errors, errors
    assert (await status(daemon))["reloads"] - start_reloads >= 100
    version_re = re.compile(r"^v(\d+)$")
    last_seen = {i: -1 for i in range(4)}
    for index, _n, reply in results:
        # Old set or new set, never none and never both: exactly one version answers.
        assert len(reply) == 1 and version_re.match(reply[0]), reply
        version = int(reply[0][1:])
        assert version >= last_seen[index], "a client saw an older version after a newer one"
        last_seen[index] = version
    per_client = {i: [n for c, n, _ in results if c == i] for i in range(4)}
    for i, ns in per_client.items():  # every request got its own reply, none lost
        assert ns == list(range(1, len(ns) + 1)), i
    assert len(results) > 100


async def _answer_is(daemon: InProcess, version: str) -> bool:
    return await answer(daemon, session="probe") == [version]


@anyio_test
async def test_polling_mode_sees_same_second_saves(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    hook = add_greet(state_dir / "hooks")
    daemon = await start_gateway(
        {"hooks": {"load": {"poll": True, "pollIntervalMs": 50}}}, watch=True
    )
    assert (await status(daemon))["watch"]["mode"] == "poll"
    for version in ("v2", "v3", "v4"):  # same length: only the content differs within a second
        (hook / "handler.py").write_text(greet_source(version))
        await eventually_answers(daemon, [version])


@anyio_test
async def test_watchfiles_force_polling_env(
    add_greet: Any, state_dir: Path, start_gateway: StartGateway
) -> None:
    hook = add_greet(state_dir / "hooks")
    daemon = await start_gateway(watch=True, env={"WATCHFILES_FORCE_POLLING": "1"})
    assert (await status(daemon))["watch"]["mode"] == "poll"
    (hook / "handler.py").write_text(greet_source("v2"))
    await eventually_answers(daemon, ["v2"])


def test_sighup_and_reload_op_are_recorded(
    add_greet: Any, state_dir: Path, start_daemon: StartDaemon
) -> None:
    add_greet(state_dir / "hooks")
    daemon = start_daemon(env={"GATEWAYD_HOOKS__LOAD__WATCH": "false"})
    assert status_now(daemon)["watch"] is None
    daemon.send_signal(signal.SIGHUP)
    wait_until(
        lambda: (status_now(daemon)["last_reload"] or {}).get("trigger") == "SIGHUP", timeout=60
    )
    with daemon.control() as ctl:
        ctl.ok("reload")
    assert status_now(daemon)["last_reload"]["trigger"] == "op"


LIMITED_INOTIFY = [
    "unshare", "--user", "--map-root-user", "sh", "-c",
    'echo 4 > /proc/sys/user/max_inotify_watches && exec "$0" "$@"',
]  # fmt: skip
"""Runs a command in a user namespace that allows 4 inotify watches."""


def test_inotify_limit_exhausted_falls_back_to_polling(
    add_greet: Any, state_dir: Path, start_daemon: StartDaemon
) -> None:
    """A hook root with more directories than the namespace's 4 inotify watches makes the
    daemon warn and poll, and edits still reach the next event."""
    if not shutil.which("unshare"):
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run([*LIMITED_INOTIFY, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot lower the inotify limit in a user namespace: {probe.stderr}")
    managed = state_dir / "hooks"
    hook = add_greet(managed)
    for i in range(8):
        (managed / f"dir{i}").mkdir()
    daemon = start_daemon(
        watch=True,
        env={"GATEWAYD_HOOKS__LOAD__POLLINTERVALMS": "50"},
        prefix=LIMITED_INOTIFY,
    )
    daemon.wait_log("watch.limit_reached", timeout=60)
    wait_until(lambda: status_now(daemon)["watch"]["mode"] == "poll", timeout=60)
    (hook / "handler.py").write_text(greet_source("v2"))
    wait_until(lambda: answer_now(daemon) == ["v2"], timeout=60, what="an edit seen by polling")


@anyio_test
async def test_edit_made_during_the_first_load_is_picked_up(
    write_hook: WriteHook, state_dir: Path, start_gateway: StartGateway
) -> None:
    """Watching starts after READY; an edit made while the first load ran is still seen."""
    rewrite = (
        "import pathlib\n"
        "_me = pathlib.Path(__file__)\n"
        "if 'v1' in _me.read_text():  # the first load edits this very file\n"
        "    _me.write_text(_me.read_text().replace(\"'v1'\", \"'v2'\"))\n"
        "async def handler(event):\n"
        "    event.messages.append('v1')\n"
    )
    write_hook(state_dir / "hooks", "greet", events=["command:hello"], handler=rewrite)
    daemon = await start_gateway(watch=True)
    await eventually_answers(daemon, ["v2"], "the edit made during the first load")
    await daemon.wait_log("watch.changed_during_start")


def test_the_daemon_does_not_import_watchfiles_before_ready() -> None:
    """watchfiles (~30 ms) is imported when watching starts, after READY, not with the daemon."""
    code = "import sys, gatewayd.server; print('watchfiles' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"
