"""Watching the hook roots and the config file, and saying when to reload.

A :class:`HookWatcher` turns filesystem activity into calls of ``on_change(paths)``, coalesced so
that one save is one call and a ``git checkout`` rewriting fifty files is one call (two at most).
Change sets are hints: the loader always rescans everything, so the watcher only has to be right
about *whether* something changed, never about *what*.

What it copes with, and how:

* A root that does not exist yet, or is deleted: watchfiles raises on a missing path and goes
  silent once a watched root is deleted, so each missing target is watched through its nearest
  existing ancestor (non-recursively), and the identity ``(st_dev, st_ino)`` of every target is
  re-checked on each change and every :data:`RECHECK_S`. When the picture differs (a root
  appeared, vanished or was replaced) the watches are rebuilt and a reload is requested. A root
  deleted and recreated at once can get its inode number back, so an event naming a root itself
  rebuilds the watches too.
* A rebuild of the watches has a gap, between stopping the old ones and the new ones existing,
  in which a write has no event (a hook written just after its new directory, under load): the
  targets are snapshotted before the old watches stop and compared once the new ones exist, and
  what differs is reported like any change.
* Editors that save by rename (seen as "added"), temp and swap files, ``__pycache__``, ``.git``:
  a filter drops the noise; renames pass as ordinary changes.
* The inotify watch limit: watchfiles raises ``OSError`` when setting up, but a directory created
  later that no longer fits is silently unwatched. So a new directory rebuilds the watches, and a
  setup error makes the watcher log a warning with the fix and fall back to polling. inotify is
  tried again after :data:`INOTIFY_RETRY_S` (doubling up to :data:`INOTIFY_RETRY_MAX_S` while it
  keeps failing), so a limit raised meanwhile (or descriptors freed) ends the polling without a
  restart (``watch.inotify_restored``).
* Polling (``hooks.load.poll``, ``WATCHFILES_FORCE_POLLING``, or the fallback): watchfiles' poller
  compares whole-second mtimes and misses a second save within the same second, so polling here
  is a snapshot of ``(mtime_ns, size)`` per file, plus a content hash for files modified in the
  last few seconds, diffed every ``poll_interval_ms``.

Latency: watchfiles reports a change after ``step`` ms of quiet (its default of 50 costs ~75 ms a
save; ``step=5`` here), then the watcher waits ``debounce_ms`` (default 5) of quiet more. From a
save to the new code answering a message that is ~23 ms at the median on this machine, and
``step=5`` costs no measurable idle CPU over ``step=10``. Changes that arrive while a reload
runs are coalesced into one follow-up reload.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import ObjectReceiveStream, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from gatewayd import eager
from gatewayd.atomic import read_regular
from gatewayd.hooks.discovery import hook_roots, subagents_dirs
from gatewayd.hooks.spec import LoadSpec
from gatewayd.paths import bundled_hooks_is_checkout

log = structlog.get_logger("gatewayd.watch")

RECHECK_S = 0.5
"""How often the identity of the watched roots is re-checked when nothing else happens."""
CRASH_MAX_S = 30.0
"""Longest wait before watching again after the watcher itself failed (doubles from 1 s)."""
CRASH_RESET_S = 60.0
"""Watches that ran this long before failing start the wait at 1 s again."""
MAX_COALESCE_S = 1.0
"""A continuous stream of changes still reloads at least this often."""
INOTIFY_RETRY_S = 60.0
"""After falling back to polling (not when polling is configured), inotify is tried again this
long after; the wait doubles each time it fails again, up to :data:`INOTIFY_RETRY_MAX_S`."""
INOTIFY_RETRY_MAX_S = 900.0
RECENT_S = 3.0
"""In polling mode, files modified this recently are content-hashed, not only stat-ed."""
MAX_HASHED_BYTES = 16 << 20
"""A recent file larger than this is compared by mtime and size only."""
WATCH_STEP_MS = 5
ADDED = 1
"""``watchfiles.Change.added`` (an IntEnum), without importing watchfiles to compare with it."""

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        ".idea",
        ".venv",
    }
)
_IGNORED_NAME = re.compile(
    r"""(
        \.sw[a-p]$ | \.swx$      # vim swap files
      | ~$ | ^\.\# | ^\#.*\#$    # backups, emacs lock and autosave files
      | ^4913$                   # vim's probe file
      | \.py[cod]$ | \.tmp$ | \.part$ | \.crdownload$
      | ___jb_...___$            # JetBrains safe-write temp files
      | ^\.DS_Store$
    )""",
    re.VERBOSE,
)

OnChange = Callable[[frozenset[Path]], Awaitable[None]]


def is_noise(path: str | Path) -> bool:
    """True for editor temp/swap files and anything under an ignored directory."""
    parts = Path(path).parts
    return bool(IGNORED_DIRS.intersection(parts)) or bool(_IGNORED_NAME.search(parts[-1]))


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """What to watch: hook roots (recursively) and single files (the config)."""

    roots: tuple[Path, ...]
    files: tuple[Path, ...] = ()
    debounce_ms: int = 5
    poll: bool = False
    poll_interval_ms: int = 300

    @property
    def targets(self) -> tuple[Path, ...]:
        return self.roots + self.files


def watch_spec(spec: LoadSpec, config_file: Path) -> WatchSpec:
    """What a daemon loading ``spec`` watches: every hook root it loads from (the bundled one
    only in a source checkout, where it can be edited), each agent workspace's ``subagents``
    dir, and ``config_file`` (the one in use, or
    the default location, so that creating one is noticed)."""
    roots, _ = hook_roots(spec)
    watched = tuple(r.path for r in roots if r.source != "bundled" or bundled_hooks_is_checkout())
    # Each agent's `subagents` dir too: a subagent's hooks dir created later is a new root.
    watched += tuple(subagents_dirs(spec))
    load = spec.watch
    return WatchSpec(
        roots=watched,
        files=(config_file,),
        debounce_ms=load.debounce_ms,
        poll=load.poll,
        poll_interval_ms=load.poll_interval_ms,
    )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return Path(path.anchor or "/")


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where the watches go for a spec, given what exists right now."""

    recursive: tuple[Path, ...]  # existing roots
    shallow: tuple[Path, ...]  # parents of files, ancestors of missing roots
    identities: tuple[tuple[int, int] | None, ...]  # of every target, in spec order

    @classmethod
    def of(cls, spec: WatchSpec) -> _Layout:
        recursive: list[Path] = []
        shallow: list[Path] = []
        for root in spec.roots:
            if root.is_dir():
                recursive.append(root)
            else:
                shallow.append(_nearest_existing(root.parent))
        shallow.extend(_nearest_existing(f.parent) for f in spec.files)
        recursive = _outermost(recursive)
        shallow = [d for d in dict.fromkeys(shallow) if not _under_any(d, recursive)]
        return cls(
            tuple(recursive),
            tuple(shallow),
            tuple(_identity(t) for t in spec.targets),
        )


def _under_any(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _outermost(paths: list[Path]) -> list[Path]:
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(o != p and o in p.parents for o in unique)]


class HookWatcher:
    """Calls ``on_change(paths)`` after the watched files change; run with :meth:`run`.

    Every (re)start of the watches is *established* only once they exist (inotify watches set
    up, or the first polling snapshot taken), and ``on_change`` is never called before that:
    so a reload always builds from files that any later change will be noticed in.
    """

    def __init__(self, spec: WatchSpec, on_change: OnChange) -> None:
        self._spec = spec
        self._on_change = on_change
        self._restart = anyio.Event()
        self._established = anyio.Event()
        self._poke = anyio.Event()
        self._force_poll = spec.poll or _env_forces_polling()
        self.mode = "poll" if self._force_poll else "inotify"
        self._retry_at: float | None = None
        """While polling for want of inotify (a fallback): when to try inotify again."""
        self._retry_delay = INOTIFY_RETRY_S
        self._retrying = False
        self.changes_seen = 0
        self._unreadable_seen: Snapshot | None = None
        """The roots when watchfiles last failed on an event (``watch.event_unreadable``)."""

    @property
    def spec(self) -> WatchSpec:
        return self._spec

    async def update(self, spec: WatchSpec, timeout_s: float = 5.0) -> None:
        """Watch ``spec`` from now on; returns once the new watches are established (or after
        ``timeout_s``). Call it *before* building from the new roots, so nothing falls between
        the build and the watches."""
        if spec == self._spec:
            return
        self._spec = spec
        self._force_poll = self._force_poll or spec.poll
        if spec.poll:
            self._retry_at = None  # polling is asked for now: nothing to go back to
        self._request_restart()
        with anyio.move_on_after(timeout_s):
            await self._established.wait()

    def _request_restart(self) -> None:
        # Unset first: whatever is sent after this waits for the new watches.
        if self._established.is_set():
            self._established = anyio.Event()
        self._restart.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; ``task_status.started()`` once the first watches exist.
        Never raises for filesystem trouble: logs it and carries on."""
        send, receive = anyio.create_memory_object_stream[frozenset[Path]](math.inf)
        # What the targets held when the last watches were stopped: a change between then and
        # the new watches existing has no event of its own, so it is found by comparing.
        before: Snapshot | None = None
        backoff = 0.5
        async with send, receive, anyio.create_task_group() as tg:
            tg.start_soon(self._coalesce, receive)
            while True:
                self._restart = anyio.Event()
                if self._established.is_set():
                    self._established = anyio.Event()
                self.mode = "poll" if self._force_poll else "inotify"
                began = time.monotonic()
                try:
                    layout = _Layout.of(self._spec)
                    async with anyio.create_task_group() as watches:
                        if self._force_poll:
                            await watches.start(self._poll, send)
                        else:
                            if layout.recursive:
                                await watches.start(self._watch, layout.recursive, True, send)
                            if layout.shallow:
                                await watches.start(self._watch, layout.shallow, False, send)
                        watches.start_soon(self._recheck, self._spec, layout, send)
                        if not self._restart.is_set():  # a setup failure asks for polling at once
                            log.info(
                                "watch.started",
                                mode=self.mode,
                                roots=[str(p) for p in layout.recursive],
                                parents=[str(p) for p in layout.shallow],
                            )
                            if self._retrying and self.mode == "inotify":
                                log.info("watch.inotify_restored", after_s=self._retry_delay)
                                self._retry_delay = INOTIFY_RETRY_S
                            self._retrying = False
                            self._established.set()
                            task_status.started()
                            task_status = anyio.TASK_STATUS_IGNORED
                            if before is not None:
                                now = await anyio.to_thread.run_sync(snapshot, self._spec.targets)
                                if missed := diff_snapshots(before, now):
                                    log.info("watch.changed_while_restarting", paths=len(missed))
                                    send.send_nowait(missed)
                                before = None
                        try:
                            await self._wait_restart_or_retry()
                        finally:
                            # Also the stop event of watchfiles' thread: without it a cancelled
                            # awatch keeps the process waiting out its 5 s rust_timeout.
                            self._restart.set()
                        # Taken while the old watches still run: what changes after it is either
                        # their event or, once the new watches exist, a difference from it. Kept
                        # when these watches failed at their setup (a retry of inotify past the
                        # limit): nothing watched since it was taken.
                        if before is None:
                            before = await anyio.to_thread.run_sync(snapshot, self._spec.targets)
                        watches.cancel_scope.cancel()
                except Exception as exc:
                    # A bug of this module's, not filesystem trouble (that is handled where it
                    # happens): the daemon runs on without live reload for a moment, then
                    # watches again from scratch and reloads in case a change was missed.
                    ran_s = time.monotonic() - began
                    backoff = 1.0 if ran_s >= CRASH_RESET_S else min(backoff * 2, CRASH_MAX_S)
                    leaf = _first_error(exc)
                    log.exception(
                        "watch.crashed",
                        error=f"{type(leaf).__name__}: {leaf}",
                        retry_in_s=backoff,
                        note="a bug in gatewayd: please report it with this log line",
                    )
                    before = None
                    await anyio.sleep(backoff)
                    send.send_nowait(frozenset(self._spec.targets))

    async def _wait_restart_or_retry(self) -> None:
        """Until a restart is asked for; while polling as a fallback, also until it is time to
        try inotify again (which asks for the restart itself)."""
        retry_at = self._retry_at
        if retry_at is None or self.mode != "poll":
            await self._restart.wait()
            return
        if (left := retry_at - time.monotonic()) > 0:  # once due, restarts do not put it off
            with anyio.move_on_after(left):
                await self._restart.wait()
                return
        self._retry_at = None
        self._force_poll = self._spec.poll or _env_forces_polling()
        if not self._force_poll:
            self._retrying = True
            log.info("watch.inotify_retry", after_s=self._retry_delay)
        self._restart.set()

    # -- producers -------------------------------------------------------------------------

    def _relevant(self, path: Path, recursive: bool) -> bool:
        if is_noise(path):
            return False
        if recursive:
            return True
        # A shallow watch sees its whole directory; keep only a target or a step towards one.
        return any(path == t or path in t.parents for t in self._spec.targets)

    async def _watch(
        self,
        paths: tuple[Path, ...],
        recursive: bool,
        send: MemoryObjectSendStream[frozenset[Path]],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        import watchfiles  # ~30 ms to import: kept off the daemon's path to READY

        changes_iter = watchfiles.awatch(
            *paths,
            watch_filter=None,
            step=WATCH_STEP_MS,
            debounce=200,
            recursive=recursive,
            stop_event=self._restart,
        )
        began = False
        try:
            pending = changes_iter.__anext__()
            try:
                # watchfiles sets up its inotify watches on this first step, before it waits.
                suspended_on = eager.step(pending)
            except eager.Finished as done:
                task_status.started()
                began = True
                changes = done.value
            else:
                task_status.started()
                began = True
                changes = await eager.resume(pending, suspended_on)
            while True:
                relevant = frozenset(
                    p for _, raw in changes if self._relevant(p := Path(raw), recursive)
                )
                if recursive and (_adds_directory(changes) or _touches(paths, changes)):
                    # A root deleted and recreated at once may get its old inode number back, so
                    # only the event tells; and inotify adds watches for new directories
                    # silently, losing their events once the limit is reached, while a fresh
                    # setup reports the limit. Both are handled by rebuilding the watches.
                    self._request_restart()
                if relevant:
                    self._poke.set()  # a root itself may have gone: re-check now
                    send.send_nowait(relevant)  # unbounded: never blocks, cannot be cancelled
                changes = await changes_iter.__anext__()
        except StopAsyncIteration:
            return
        except OSError as exc:
            if "watch limit" in str(exc) or getattr(exc, "errno", None) == 28:
                self._fall_back_to_polling(
                    "watch.limit_reached",
                    error=str(exc),
                    fix="raise fs.inotify.max_user_watches (sysctl; inotify is tried again "
                    "meanwhile) or set hooks.load.poll: true",
                )
            else:
                self._fall_back_to_polling("watch.failed", error=str(exc))
            task_status.started()
        except Exception as exc:  # watchfiles' own error: e.g. a file name that is not UTF-8
            # The batch is lost with it, so reload as if the roots changed, and watch again.
            leaf = _first_error(exc)
            if not began:
                task_status.started()
            self._request_restart()
            # Reading such a file raises too (an access event): reload only on a real change,
            # or each reload's own reads would start the next one.
            now = await anyio.to_thread.run_sync(snapshot, self._spec.targets)
            before, self._unreadable_seen = self._unreadable_seen, now
            if before is None or diff_snapshots(before, now):
                log.warning(
                    "watch.event_unreadable",
                    error=f"{type(leaf).__name__}: {leaf}",
                    note="reloading in case a hook changed; watching again",
                )
                send.send_nowait(frozenset(paths))
            else:
                # Again, nothing changed since: a directory whose name is not UTF-8 fails
                # every inotify setup under its root at once (watchfiles decodes each path),
                # for as long as it exists. Poll instead (the snapshot reads any name) and
                # try inotify again later; said once, not at every attempt.
                self._fall_back_to_polling(
                    "watch.polling",
                    reason=f"{type(leaf).__name__}: {leaf}",
                    fix="rename or remove what is named in the reason (a name that is not "
                    "UTF-8); inotify is tried again meanwhile",
                )
        finally:
            await changes_iter.aclose()

    def _fall_back_to_polling(self, event: str, **fields: str) -> None:
        """Poll until inotify is tried again (:data:`INOTIFY_RETRY_S`, doubling while it fails
        again); ``event`` is logged as a warning the first time, at debug after a retry."""
        again = self._retrying
        if again:  # a retry that failed again: wait longer before the next one
            self._retry_delay = min(self._retry_delay * 2, INOTIFY_RETRY_MAX_S)
            self._retrying = False
        (log.debug if again else log.warning)(
            event, fallback="polling", retry_in_s=self._retry_delay, **fields
        )
        self._force_poll = True
        self._retry_at = time.monotonic() + self._retry_delay
        self._request_restart()

    async def _recheck(
        self, spec: WatchSpec, layout: _Layout, send: MemoryObjectSendStream[frozenset[Path]]
    ) -> None:
        """Rebuild the watches when a root of ``spec`` (the one ``layout`` was made from)
        appears, vanishes or is replaced.

        Always ``spec``, never ``self._spec``: :meth:`update` swaps the spec before these
        watches are cancelled, and a layout of the new spec has another number of targets."""
        while True:
            with anyio.move_on_after(RECHECK_S):
                await self._poke.wait()
            self._poke = anyio.Event()
            if spec is not self._spec:
                return  # update() asked for new watches already
            now = _Layout.of(spec)
            if now != layout:
                changed = frozenset(
                    t
                    for t, a, b in zip(spec.targets, layout.identities, now.identities, strict=True)
                    if a != b
                )
                log.info("watch.roots_changed", paths=[str(p) for p in changed])
                self._request_restart()
                send.send_nowait(changed or frozenset(spec.roots))
                return

    async def _poll(
        self,
        send: MemoryObjectSendStream[frozenset[Path]],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        interval = self._spec.poll_interval_ms / 1000
        before = await anyio.to_thread.run_sync(snapshot, self._spec.targets)
        task_status.started()
        while True:
            await anyio.sleep(interval)
            after = await anyio.to_thread.run_sync(snapshot, self._spec.targets)
            changed = diff_snapshots(before, after)
            before = after
            if changed:
                send.send_nowait(changed)

    # -- the consumer ----------------------------------------------------------------------

    async def _coalesce(self, receive: ObjectReceiveStream[frozenset[Path]]) -> None:
        async for first in receive:
            quiet = self._spec.debounce_ms / 1000
            paths = set(first)
            deadline = anyio.current_time() + MAX_COALESCE_S
            while True:
                with anyio.move_on_after(min(quiet, max(0.0, deadline - anyio.current_time()))):
                    paths |= await receive.receive()
                    continue
                break
            await self._established.wait()  # a restart under way: reload once it is watched
            self.changes_seen += 1
            log.debug("watch.changed", paths=sorted(str(p) for p in paths)[:20], count=len(paths))
            try:
                await self._on_change(frozenset(paths))
            except Exception as exc:  # a failed reload must not stop the watching
                log.exception("watch.reload_failed", error=f"{type(exc).__name__}: {exc}")


Changes = set[tuple[Any, str]]
"""A watchfiles change set: ``{(watchfiles.Change, path), ...}``."""


def _touches(roots: tuple[Path, ...], changes: Changes) -> bool:
    return any(Path(raw) in roots for _, raw in changes)


def _first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (watchfiles raises from inside a task group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _adds_directory(changes: Changes) -> bool:
    return any(kind == ADDED and not is_noise(raw) and os.path.isdir(raw) for kind, raw in changes)


def _env_forces_polling() -> bool:
    return os.environ.get("WATCHFILES_FORCE_POLLING", "").lower() not in ("", "0", "false", "no")


FileState = tuple[int, int, str]
Snapshot = dict[Path, FileState]


def diff_snapshots(before: Snapshot, after: Snapshot) -> frozenset[Path]:
    """Paths added, removed, or changed in mtime, size, or (where both have one) content hash."""
    changed = set(before.keys() ^ after.keys())
    for path in before.keys() & after.keys():
        (m1, s1, h1), (m2, s2, h2) = before[path], after[path]
        if m1 != m2 or s1 != s2 or (h1 and h2 and h1 != h2):
            changed.add(path)
    return frozenset(changed)


def snapshot(targets: Iterable[Path]) -> Snapshot:
    """``path -> (mtime_ns, size, hash)`` for every file under the targets (noise skipped).

    The content hash is taken only for files modified in the last :data:`RECENT_S` seconds:
    enough to catch a second save within the same second on a filesystem with coarse mtimes,
    without reading every file on every poll.
    """
    recent = time.time() - RECENT_S
    result: Snapshot = {}

    def visit(path: Path, st: os.stat_result) -> None:
        digest = ""
        if st.st_mtime >= recent:
            # A symlink's own times are the ones stat-ed, but reading follows it: to a FIFO
            # that would wait for a writer forever, to /dev/zero read until memory ran out.
            try:
                data = read_regular(path, MAX_HASHED_BYTES)
            except OSError:  # NotRegularFile included
                digest = "?"
            else:
                digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        result[path] = (st.st_mtime_ns, st.st_size, digest)

    def walk(top: Path) -> None:
        # A stack, not recursion: a tree deeper than the recursion limit (1000) is a user's
        # to make, and a RecursionError here ended the daemon.
        pending = [top]
        while pending:
            try:
                entries = list(os.scandir(pending.pop()))
            except OSError:
                continue
            for entry in entries:
                if is_noise(entry.name):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in IGNORED_DIRS:
                            result[Path(entry.path)] = (0, 0, "dir")
                            pending.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        visit(Path(entry.path), entry.stat(follow_symlinks=False))
                except OSError:
                    continue

    for target in targets:
        try:
            st = target.stat()
        except OSError:
            continue
        if target.is_dir():
            result[target] = (st.st_ino, 0, "root")
            walk(target)
        else:
            visit(target, st)
    return result
