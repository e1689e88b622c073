"""HookWatcher against real files and real watchfiles/inotify (and the polling fallback).

Each scenario runs the watcher in its own event loop, does what a user does, and counts the
``on_change`` calls. No timing is asserted: waits are generous upper bounds for "it happened"
and quiet periods for "it did not happen".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.hooks.watcher import HookWatcher, WatchSpec, diff_snapshots, is_noise, snapshot

SETTLE_S = 0.6  # quiet time to conclude that no (further) reload is coming
WAIT_S = 5.0  # upper bound for a reload that must come


class Recorder:
    def __init__(self) -> None:
        self.calls: list[frozenset[Path]] = []
        self._changed = anyio.Event()

    async def on_change(self, paths: frozenset[Path]) -> None:
        self.calls.append(paths)
        self._changed.set()

    async def until_calls(self, count: int) -> None:
        """Wait (at most WAIT_S) until there were ``count`` reloads in all."""
        with anyio.fail_after(WAIT_S):
            while len(self.calls) < count:
                self._changed = anyio.Event()
                await self._changed.wait()

    async def expect_reload(self, action: Callable[[], object]) -> frozenset[Path]:
        """Do ``action``; wait for at least one reload, then for quiet; return what changed."""
        before = len(self.calls)
        action()
        await self.until_calls(before + 1)
        await anyio.sleep(SETTLE_S)
        return frozenset().union(*self.calls[before:])

    async def expect_quiet(self, action: Callable[[], object]) -> None:
        before = len(self.calls)
        action()
        await anyio.sleep(SETTLE_S)
        assert self.calls[before:] == []

    def since(self, mark: int) -> int:
        return len(self.calls) - mark


def run_watcher(
    spec: WatchSpec, scenario: Callable[[Recorder, HookWatcher], Awaitable[None]]
) -> HookWatcher:
    recorder = Recorder()
    watcher = HookWatcher(spec, recorder.on_change)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            await anyio.sleep(0.3)  # watches set up
            await scenario(recorder, watcher)
            tg.cancel_scope.cancel()

    anyio.run(main)
    return watcher


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    managed = tmp_path / "hooks"
    managed.mkdir()
    return managed, tmp_path / "workspace" / "hooks", tmp_path / "gatewayd.yaml"


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_saves_renames_and_noise(roots: tuple[Path, Path, Path], poll: bool) -> None:
    managed, workspace, config = roots
    hook = managed / "greet"
    hook.mkdir()

    def rename_save() -> None:
        tmp = hook / ".handler.py.tmp"
        tmp.write_text("x = 2\n")
        os.replace(tmp, hook / "handler.py")

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        changed = await rec.expect_reload(lambda: (hook / "handler.py").write_text("x = 1\n"))
        assert hook / "handler.py" in changed
        changed = await rec.expect_reload(rename_save)
        assert hook / "handler.py" in changed
        await rec.expect_quiet(lambda: (hook / ".handler.py.swp").write_text("swap"))
        await rec.expect_quiet(lambda: (hook / "handler.py~").write_text("backup"))
        await rec.expect_quiet(lambda: (hook / "4913").write_text(""))
        pycache = hook / "__pycache__"

        def write_pycache() -> None:
            pycache.mkdir()
            (pycache / "handler.cpython-311.pyc").write_bytes(b"\0")

        await rec.expect_quiet(write_pycache)
        assert watcher.mode == ("poll" if poll else "inotify")

    run_watcher(WatchSpec(roots=(managed, workspace), files=(config,), poll=poll), scenario)


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_burst_of_fifty_files_is_one_reload(roots: tuple[Path, Path, Path], poll: bool) -> None:
    managed, workspace, config = roots

    def checkout() -> None:
        for i in range(50):
            d = managed / f"hook-{i:02d}"
            d.mkdir()
            (d / "HOOK.md").write_text(f"---\nname: hook-{i}\n---\n")
            (d / "handler.py").write_text("async def handler(event): pass\n")

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        mark = len(rec.calls)
        await rec.expect_reload(checkout)
        assert 1 <= rec.since(mark) <= 2

    run_watcher(WatchSpec(roots=(managed, workspace), files=(config,), poll=poll), scenario)


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_roots_created_later_deleted_and_recreated(
    roots: tuple[Path, Path, Path], poll: bool
) -> None:
    managed, workspace, config = roots

    def recreate_fast() -> None:
        shutil.rmtree(managed)
        managed.mkdir()
        (managed / "again").mkdir()

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        # workspace/hooks does not exist yet: creating it is noticed, and so is a write in it
        await rec.expect_reload(lambda: workspace.mkdir(parents=True))
        changed = await rec.expect_reload(lambda: (workspace / "new.txt").write_text("1"))
        assert workspace / "new.txt" in changed
        # the managed root deleted, then recreated: still watched afterwards
        await rec.expect_reload(lambda: shutil.rmtree(managed))
        await rec.expect_reload(managed.mkdir)
        await rec.expect_reload(lambda: (managed / "after.txt").write_text("1"))
        # deleted and recreated between two looks: the new directory is watched too
        await rec.expect_reload(recreate_fast)
        changed = await rec.expect_reload(lambda: (managed / "again" / "x.py").write_text("1"))
        assert managed / "again" / "x.py" in changed

    run_watcher(WatchSpec(roots=(managed, workspace), files=(config,), poll=poll), scenario)


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_config_file_created_and_edited_within_one_second(
    roots: tuple[Path, Path, Path], poll: bool
) -> None:
    managed, workspace, config = roots

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        await rec.expect_reload(lambda: config.write_text("hooks: {enabled: true}\n"))
        # same size, same second: whole-second mtimes alone cannot see this one
        changed = await rec.expect_reload(lambda: config.write_text("hooks: {enabled: fals}\n"))
        assert config in changed
        # a sibling of the config file in the state dir is not a reason to reload
        await rec.expect_quiet(lambda: (config.parent / "other.txt").write_text("x"))

    run_watcher(WatchSpec(roots=(managed, workspace), files=(config,), poll=poll), scenario)


def test_update_switches_to_new_roots(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        await rec.expect_reload(lambda: (first / "a").write_text("1"))
        await watcher.update(WatchSpec(roots=(second,)))  # returns once `second` is watched
        await rec.expect_quiet(lambda: (first / "b").write_text("1"))
        await rec.expect_reload(lambda: (second / "c").write_text("1"))

    run_watcher(WatchSpec(roots=(first,)), scenario)


def test_noise_and_snapshot_rules(tmp_path: Path) -> None:
    assert is_noise("/x/.git/index")
    assert is_noise("/x/hook/__pycache__/handler.cpython-311.pyc")
    assert is_noise("/x/hook/.handler.py.swp")
    assert is_noise("/x/hook/#handler.py#")
    assert not is_noise("/x/hook/handler.py")
    assert not is_noise("/x/hook/HOOK.md")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "handler.py").write_text("a")
    first = snapshot([tmp_path])
    (tmp_path / "h" / "handler.py").write_text("b")  # same size, likely the same mtime second
    assert diff_snapshots(first, snapshot([tmp_path])) == {tmp_path / "h" / "handler.py"}
    # a file that ages out of the "recently modified" window keeps its hash-less state equal
    path = tmp_path / "h" / "handler.py"
    mtime_ns, size, digest = first[path]
    assert digest
    assert diff_snapshots({path: (mtime_ns, size, digest)}, {path: (mtime_ns, size, "")}) == set()


def _userns_available() -> str | None:
    if not shutil.which("unshare"):
        return "unshare(1) is not installed"
    probe = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            "echo 8 > /proc/sys/user/max_inotify_watches",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"cannot lower the inotify limit in a user namespace: {probe.stderr.strip()}"
    return None


@pytest.fixture
def limited_root(tmp_path: Path) -> Path:
    """An empty hook root, for a script run by :func:`with_three_watches` (skipped where a
    user namespace cannot lower the limit)."""
    reason = _userns_available()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "hooks"
    root.mkdir()
    return root


GROWN_PAST_THE_LIMIT = """
import anyio, json, shutil, sys
from contextlib import asynccontextmanager
from pathlib import Path
import gatewayd.hooks.watcher as watcher
from gatewayd.hooks.watcher import HookWatcher, WatchSpec
seen = []
async def on_change(paths):
    seen.append(paths)
@asynccontextmanager
async def grown_past_the_limit(root):
    # A watcher on root, then six directories in it: 7 watches where 3 are allowed.
    w = HookWatcher(WatchSpec(roots=(root,), poll_interval_ms=100), on_change)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await anyio.sleep(0.3)
        for i in range(6):
            (root / f"d{i}").mkdir()
        yield w
        tg.cancel_scope.cancel()
"""
"""The start both inotify-limit scripts share (``seen``: what the watcher reported)."""


def with_three_watches(body: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run :data:`GROWN_PAST_THE_LIMIT` then ``body`` (Python) in a user namespace where 3
    inotify watches are allowed."""
    return subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            f'echo 3 > /proc/sys/user/max_inotify_watches && exec "{sys.executable}" -c "$0"',
            GROWN_PAST_THE_LIMIT + textwrap.dedent(body),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_inotify_limit_falls_back_to_polling(limited_root: Path) -> None:
    """With 3 inotify watches allowed (per user namespace), growing a root past the limit
    switches the watcher to polling with a warning, and no change is lost."""
    body = f"""
        from gatewayd.logging import configure_logging
        configure_logging("info", "json", sys.stdout)
        root = Path({str(limited_root)!r})
        async def main():
            async with grown_past_the_limit(root) as w:
                await anyio.sleep(1.0)
                n = len(seen)
                (root / "d5" / "handler.py").write_text("late edit")
                with anyio.fail_after(5):
                    while not any(root / "d5" / "handler.py" in s for s in seen[n:]):
                        await anyio.sleep(0.05)
                print("RESULT", w.mode, flush=True)
        anyio.run(main)
        """
    proc = with_three_watches(body, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "watch.limit_reached" in proc.stdout
    assert "RESULT poll" in proc.stdout


@pytest.mark.timeout(300)
def test_inotify_is_tried_again_after_the_fallback_and_returns(limited_root: Path) -> None:
    """Fallen back to polling at the limit, the watcher tries inotify again after a while (the
    wait doubling while it still fails); once the tree fits again, it watches with inotify
    again without a restart, and a change made meanwhile is not lost."""
    body = f"""
        from structlog.testing import capture_logs
        watcher.INOTIFY_RETRY_S = 0.3
        root = Path({str(limited_root)!r})
        async def until(predicate, what):
            with anyio.move_on_after(60):
                while not predicate():
                    await anyio.sleep(0.02)
                return
            names = [e["event"] for e in logs if e["event"].startswith("watch.")]
            sys.exit(f"timed out waiting for {{what}}; the watcher logged {{names}}")
        def events(logs, name):
            return [e for e in logs if e["event"] == name]
        def fallbacks(logs):
            # watch.limit_reached here; watch.failed when inotify instances ran out meanwhile
            # (max_user_instances counts every process of the user, the suite's daemons too)
            return [e for e in logs if e["event"] in ("watch.limit_reached", "watch.failed")]
        async def main(logs):
            async with grown_past_the_limit(root) as w:
                # the fallback, then a retry that fails again and waits twice as long
                await until(lambda: len(fallbacks(logs)) >= 2, "a retry")
                for i in range(1, 6):
                    shutil.rmtree(root / f"d{{i}}")
                (root / "d0" / "handler.py").write_text("while switching back")
                await until(lambda: events(logs, "watch.inotify_restored"), "inotify again")
                await until(lambda: any(root / "d0" / "handler.py" in s for s in seen), "seen")
                n = len(seen)
                (root / "d0" / "handler.py").write_text("under inotify")
                await until(lambda: any(root / "d0" / "handler.py" in s for s in seen[n:]), "")
                print("RESULT", w.mode, flush=True)
                print("RETRIES", json.dumps([e["retry_in_s"] for e in fallbacks(logs)]),
                      flush=True)
        with capture_logs() as logs:
            anyio.run(main, logs)
        """
    proc = with_three_watches(body, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT inotify" in proc.stdout, proc.stdout
    retries = json.loads(proc.stdout.split("RETRIES ", 1)[1].splitlines()[0])
    assert retries[:2] == [0.3, 0.6], retries


def test_a_write_while_the_watches_are_rebuilt_is_not_lost(
    roots: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild of the watches (here asked for by a new directory) stops the old ones before
    the new ones exist; a write in that gap has no event. The write is made there, every time:
    as the first new watch is being set up (the old ones are gone by then). The watcher
    snapshots the targets before it stops the old watches and reports what differs once the new
    ones exist."""
    managed, workspace, config = roots
    real_watch = HookWatcher._watch
    written: list[Path] = []

    async def watch_after_writing(self: HookWatcher, *args: Any, **kwargs: Any) -> None:
        if not written and (managed / "late").is_dir():
            handler = managed / "late" / "handler.py"
            handler.write_text("async def handler(event):\n    pass\n")
            written.append(handler)
        await real_watch(self, *args, **kwargs)

    monkeypatch.setattr(HookWatcher, "_watch", watch_after_writing)

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        await rec.expect_reload(lambda: (managed / "late").mkdir())
        await anyio.sleep(SETTLE_S)
        assert written, "the watches were not rebuilt for the new directory"
        # Its event was lost with the old watches: only the comparison reports it.
        changed = frozenset().union(*rec.calls)
        assert managed / "late" / "handler.py" in changed, rec.calls

    run_watcher(WatchSpec(roots=(managed, workspace), files=(config,)), scenario)


async def _at_the_limit(*paths: Path, **kwargs: Any) -> Any:
    """What ``watchfiles.awatch`` is when its setup passes the inotify watch limit."""
    raise OSError(28, "OS file watch limit reached")
    yield  # an async generator, as awatch is


def test_a_write_while_an_inotify_retry_fails_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polling after the inotify limit, the watcher tries inotify again; when that fails too it
    polls again. A write between the old polling's end and the new polling's start has no event
    and is in neither poll: the comparison with the targets as they were when the old polling
    ended must still report it (it compared against a snapshot taken after the failed retry, so
    such a write was lost: found by the user-namespace test above, ~1 run in 6)."""
    import watchfiles

    import gatewayd.hooks.watcher as watcher

    monkeypatch.setattr(watcher, "INOTIFY_RETRY_S", 0.2)
    root = tmp_path / "hooks"
    (root / "h").mkdir(parents=True)
    handler = root / "h" / "handler.py"
    real_awatch = watchfiles.awatch
    setups: list[int] = []

    def awatch(*paths: Path, **kwargs: Any) -> Any:
        setups.append(1)
        if len(setups) == 1:  # the first setup: over the limit, so polling
            return _at_the_limit()
        if len(setups) == 2:  # the retry fails again, and meanwhile a hook is saved
            handler.write_text("async def handler(event):\n    pass\n")
            return _at_the_limit()
        return real_awatch(*paths, **kwargs)  # the tree fits again: inotify

    monkeypatch.setattr(watchfiles, "awatch", awatch)

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        await rec.until_calls(1)  # nothing else changes: only the comparison can report it
        await anyio.sleep(SETTLE_S)
        assert handler in frozenset().union(*rec.calls), rec.calls
        assert (len(setups), watcher.mode) == (3, "inotify")

    with structlog.testing.capture_logs() as logs:
        run_watcher(WatchSpec(roots=(root,), poll_interval_ms=50), scenario)
    names = [r["event"] for r in logs if r["event"].startswith("watch.")]
    assert names.count("watch.limit_reached") == 2, names
    assert "watch.inotify_restored" in names, names


def test_update_to_fewer_roots_while_rechecking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update() swaps the spec before the old watches are cancelled. With the re-check running
    every tick, it runs in that window on every update: it must compare against the spec its
    layout was made from (a mix of the two crashed the daemon: `zip() argument 2 is longer`)."""
    monkeypatch.setattr("gatewayd.hooks.watcher.RECHECK_S", 0)
    first, second, third = (tmp_path / n for n in ("one", "two", "three"))
    for root in (first, second, third):
        root.mkdir()
    specs = [WatchSpec(roots=(first, second, third)), WatchSpec(roots=(first,))]

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        for n in range(6):
            await watcher.update(specs[(n + 1) % 2])
        await rec.expect_reload(lambda: (first / "a").write_text("1"))

    run_watcher(specs[0], scenario)


def test_a_bug_in_the_watcher_is_logged_and_watching_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong inside the watcher ends its watches, not the daemon: it is logged
    (``watch.crashed``), the watches are set up again and a reload covers what was missed."""
    root = tmp_path / "hooks"
    root.mkdir()
    real_watch = HookWatcher._watch
    failures: list[int] = []

    async def watch_failing_once(self: HookWatcher, *args: Any, **kwargs: Any) -> None:
        if not failures:
            failures.append(1)
            raise RuntimeError("a bug")
        await real_watch(self, *args, **kwargs)

    monkeypatch.setattr(HookWatcher, "_watch", watch_failing_once)

    async def scenario(rec: Recorder, watcher: HookWatcher) -> None:
        # The reload that covers the gap is delivered once the new watches exist.
        await rec.until_calls(1)
        assert failures == [1]
        await rec.expect_reload(lambda: (root / "a").write_text("1"))

    with structlog.testing.capture_logs() as logs:
        run_watcher(WatchSpec(roots=(root,)), scenario)
    crashed = [r for r in logs if r["event"] == "watch.crashed"]
    assert [r["error"] for r in crashed] == ["RuntimeError: a bug"], logs
