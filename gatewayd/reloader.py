"""Reloading a running gateway: the watcher's wiring, one reload at a time, and what it changes.

A reload (SIGHUP, the ``reload`` op, or a change the watcher saw) re-reads the config, builds
the whole hook set aside in a worker thread, and swaps it in at once: an event sees the old set
or the new one. An invalid config is refused (logged; the running config and hooks stay), and
so is a config file that was deleted (running on the built-in defaults would re-enable every
hook it disabled). Settings a running process cannot change are logged and keep their values
until a restart (:func:`restart_only`).

The watcher (``hooks.load.watch``) watches the hook roots and the config file. It starts after
READY (watchfiles is not on the start path), and a snapshot taken before the first load makes a
change made in between reload once (:meth:`Reloader.start_watching`). A reload's new roots are
watched before the build reads them, so no edit falls between the two.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import structlog

from gatewayd.config import IGNORED_NOTE, Config, ConfigError, load_config
from gatewayd.hooks.changes import Fingerprint, fingerprints, load_changes
from gatewayd.hooks.collector import collect_replaced, full_collections_deferred
from gatewayd.hooks.node.generation import Generation
from gatewayd.hooks.node.loading import load_node_hooks
from gatewayd.hooks.records import LoadResult
from gatewayd.hooks.watcher import HookWatcher, Snapshot, WatchSpec, diff_snapshots, snapshot
from gatewayd.hooks.watcher import watch_spec as make_watch_spec
from gatewayd.logging import configure_from
from gatewayd.parts import GatewayParts, transcript_limits
from gatewayd.replies import HooksSummary, ReloadOutcome, ReloadRecord, WatchStatus, summary_of
from gatewayd.retries import retry_policy
from gatewayd.timestamps import iso_utc

log = structlog.get_logger("gatewayd")

JOURNAL_KEYS = (
    ("journal", "journal"),
    ("sync", "sync"),
    ("retainDone", "retain_done"),
    ("fullWaitMs", "full_wait_ms"),
)
"""``gateway.queue`` keys of the journal (config name, model field): fixed at the start."""


REDIS_KEYS: Final = (
    ("url", "url"),
    ("namespace", "namespace"),
    ("partitions", "partitions"),
    ("leaseMs", "lease_ms"),
    ("waitMs", "wait_ms"),
)
"""``gateway.queue.redis`` keys (config name, model field): fixed at the start."""


def restart_only(config: Config) -> dict[str, Any]:
    """Settings a reload cannot change in a running process (said when they differ)."""
    queue = config.settings.gateway.queue
    return {
        "gateway.control.socket": config.paths.control_socket,
        "gateway.queue.concurrency": queue.concurrency,
        "gateway.queue.backend": queue.backend,
        **{f"gateway.queue.{key}": getattr(queue, name) for key, name in JOURNAL_KEYS},
        **{f"gateway.queue.redis.{key}": getattr(queue.redis, name) for key, name in REDIS_KEYS},
    }


def log_ignored(config: Config) -> None:
    """Say which keys of the config file gatewayd accepted but does not use (OpenClaw's)."""
    if config.ignored:
        log.warning("config.ignored", keys=list(config.ignored), note=IGNORED_NOTE)


def watch_spec(config: Config) -> WatchSpec:
    """What the watcher watches for ``config``: its hook roots, and the config file in use or
    its default location (so that creating one is noticed)."""
    return make_watch_spec(config.load_spec(), config.paths.config_file)


class Reloader:
    """A gateway's reloads and its watcher; see the module docstring."""

    def __init__(self, gateway: GatewayParts) -> None:
        self._gateway = gateway
        self._lock = anyio.Lock()
        self.count = 0
        """Reloads since the start, whatever their result."""
        self.results: dict[str, int] = {}
        """Reloads by result (``ok``, ``partial``, ``refused``, ``failed``), for metrics."""
        self.last: ReloadRecord | None = None
        """The latest reload (``status.last_reload``)."""
        self.prints: dict[str, Fingerprint] = {}
        """The last load's hook fingerprints: what a reload compares to say what changed."""
        self.watcher: HookWatcher | None = None
        """Live reload: the hook roots' and config file's watcher (``hooks.load.watch``)."""

    # -- the watcher ------------------------------------------------------------------------

    async def prepare_watching(self) -> Snapshot | None:
        """Before the first load: the watcher (not yet started) and a snapshot of what the
        load will read, or ``None`` when ``hooks.load.watch`` is off."""
        config = self._gateway.config
        if not config.settings.hooks.load.watch:
            return None
        self.watcher = HookWatcher(watch_spec(config), self._on_files_changed)
        return await anyio.to_thread.run_sync(snapshot, self.watcher.spec.targets)

    async def start_watching(self, tg: anyio.abc.TaskGroup, before: Snapshot) -> None:
        """Start the watcher in ``tg`` (after READY), then reload once if the hook roots or the
        config changed since the first load read them (``before``)."""
        assert self.watcher is not None, "prepare_watching() made the watcher"
        await tg.start(self.watcher.run)
        after = await anyio.to_thread.run_sync(snapshot, self.watcher.spec.targets)
        if changed := diff_snapshots(before, after):
            log.info("watch.changed_during_start", paths=sorted(str(p) for p in changed)[:20])
            await self.reload("watch", changed)

    async def _on_files_changed(self, paths: frozenset[Path]) -> None:
        """The watcher saw hook files or the config change: reload (once running)."""
        await self._gateway.running.wait()
        if self._gateway.state == "running":
            await self.reload("watch", paths)

    def watch_status(self) -> WatchStatus | None:
        """``status.watch``: the watcher's mode and what it watches (``None``: not watching)."""
        if self.watcher is None:
            return None
        spec = self.watcher.spec
        return {
            "mode": self.watcher.mode,
            "roots": [str(p) for p in spec.roots],
            "files": [str(p) for p in spec.files],
        }

    # -- a reload -----------------------------------------------------------------------------

    async def reload(self, trigger: str, files: Iterable[Path] = ()) -> ReloadOutcome:
        """Re-read the config and reload the hooks; one at a time.

        ``trigger``: ``watch``, ``SIGHUP`` or ``op``; ``files``: what the watcher saw. Returns
        the reload's record (``result``: ``ok``, ``partial`` when hooks failed to load,
        ``refused`` or ``failed``; ``changes``: the files and the hooks it added, changed,
        removed and failed, :mod:`gatewayd.hooks.changes`; ``errors``) plus the new load's
        ``summary``. The record becomes ``status.last_reload``; ``reload.done`` logs it once.
        """
        async with self._lock:
            # From the config's read to the collection after the swap: each full collection
            # the allocator would start meanwhile traverses both loads (see collector.py).
            with full_collections_deferred():
                return await self._reload(trigger, frozenset(files))

    async def _reload(self, trigger: str, files: frozenset[Path]) -> ReloadOutcome:
        """:meth:`reload`'s work, under its lock."""
        gateway = self._gateway
        began, t0 = time.time(), time.perf_counter()
        gateway.notifier.reloading()
        log.info("reload.begin", trigger=trigger)
        node = gateway.node
        early = node.reimport() if self._hook_files_only(trigger, files) else None
        summary: HooksSummary | None = None
        changes: dict[str, Any] | None = None
        restart: list[str] = []
        errors: list[str] = []
        try:
            config = await anyio.to_thread.run_sync(load_config, gateway.config_arg)
            self._refuse_vanished_config(config)
            if self.watcher is not None:
                # New roots (extraDirs, workspace) are watched before the build reads them,
                # so an edit made while this reload runs is never lost between the two.
                await self.watcher.update(watch_spec(config))
            # Left behind if the daemon stops meanwhile (see server.py's start).
            result = await anyio.to_thread.run_sync(
                gateway.loader.build, config.load_spec(), abandon_on_cancel=True
            )
            generation = await load_node_hooks(result, node, early)
            # Off the loop: comparing two loads of 10,000 hooks was 0.5 s of it.
            prints, compared = await anyio.to_thread.run_sync(
                self._compare, result, frozenset(str(p) for p in files)
            )
        except ConfigError as exc:
            outcome, errors = "refused", [f"{exc.source}: {e}" for e in exc.errors]
            log.error(
                "reload.refused",
                trigger=trigger,
                source=exc.source,
                errors=exc.errors,
                fix="fix the config; the running config and hooks stay in place",
            )
        except Exception as exc:  # the loader reports per-hook failures; this is a bug
            outcome, errors = "failed", [f"{type(exc).__name__}: {exc}"]
            log.exception("reload.failed", trigger=trigger, error=errors[0])
        else:
            try:
                restart = self.apply_config(config)
                changes = self.install(config, result, generation, prints, compared)
            except Exception as exc:
                # A bug: the new config and hooks may be in place only in part. Said so,
                # with the traceback; the daemon runs on.
                outcome, errors = "failed", [f"{type(exc).__name__}: {exc}"]
                log.exception(
                    "reload.apply_failed",
                    trigger=trigger,
                    error=errors[0],
                    fix="a bug in gatewayd (please report it with this line): the new "
                    "config may be applied only in part; restart gatewayd to be sure",
                )
            else:
                outcome = "partial" if result.failed else "ok"
                summary = summary_of(result)
        record: ReloadRecord = {
            "time": iso_utc(began),
            "duration_ms": round((time.perf_counter() - t0) * 1000, 1),
            "trigger": trigger,
            "result": outcome,
        }
        if changes is not None:
            record["changes"] = changes
        if restart:
            record["restartNeeded"] = restart
        if errors:
            record["errors"] = errors
        self.count += 1
        self.results[outcome] = self.results.get(outcome, 0) + 1
        self.last = record
        (log.info if outcome == "ok" else log.warning)("reload.done", **record)
        gateway.notifier.ready(gateway.status_line())
        # Recorded once the new hooks answer (status shows the reload they came with); then
        # what the swap left behind goes, still under the reload lock.
        if early is not None:
            await node.discard(early)
        if summary is not None:
            # The one full collection of a reload (the build deferred the allocator's), now
            # that it traverses only the hooks in place: it frees the replaced ones.
            await anyio.to_thread.run_sync(collect_replaced)
        return {**record, "summary": summary}

    def _compare(
        self, result: LoadResult, files: frozenset[str]
    ) -> tuple[dict[str, Fingerprint], dict[str, Any]]:
        """``result``'s fingerprints, and what changed against the load in place
        (:func:`~gatewayd.hooks.changes.load_changes`; ``{}`` for the first load). In a worker
        thread: neither the load in place nor its fingerprints change until :meth:`install`,
        on the loop, under the reload lock."""
        prints = fingerprints(result.records)
        before = self._gateway.load
        if before is None:
            return prints, {}
        return prints, load_changes(before.records, result.records, self.prints, prints, files)

    def install(
        self,
        config: Config,
        result: LoadResult,
        generation: Generation | None,
        prints: dict[str, Fingerprint],
        changes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Put a load's hooks in place (the first load's too); returns ``changes``, what
        changed against the load before (:meth:`_compare`)."""
        gateway = self._gateway
        result.apply(gateway.registry, config.load_spec())
        gateway.node.activate(generation)
        keys = ((record.name, record.hook_key) for record in result.records)
        gateway.dispatcher.retry_policy = retry_policy(config, keys)
        gateway.load, self.prints = result, prints
        return changes or {}

    def apply_config(self, config: Config) -> list[str]:
        """Take what a running process can change from a new config; return (and log) the
        keys it cannot, whose new values wait for a restart."""
        gateway = self._gateway
        old, new = restart_only(gateway.config), restart_only(config)
        changed = [key for key in new if new[key] != old[key]]
        if changed:
            log.warning(
                "reload.restart_needed",
                keys=changed,
                note="these settings keep their old values until gatewayd restarts",
            )
        queue = config.settings.gateway.queue
        gateway.queue.resize(queue.capacity)
        gateway.queue.bound_sessions(queue.per_session_max, queue.per_session_wait_ms / 1000)
        max_abandoned = config.settings.hooks.max_abandoned_threads
        gateway.registry.max_abandoned_threads = max_abandoned
        gateway.registry.hook_threads().max_abandoned = max_abandoned
        gateway.sessions.transcripts.limits = transcript_limits(config)
        configure_from(config, *gateway.log_overrides)
        log_ignored(config)
        gateway.config = config
        gateway.bases.update(config)
        return changed

    def _hook_files_only(self, trigger: str, files: frozenset[Path]) -> bool:
        """Whether this reload is the watcher's, for hook files only: then the JS/TS hooks are
        re-imported while the config is read and the Python hooks built (``NodeRuntime.reimport``).
        Not when the config changed: that most often changes which hooks run, and where."""
        if trigger != "watch" or self.watcher is None:
            return False
        return not files & frozenset(self.watcher.spec.files)

    def _refuse_vanished_config(self, config: Config) -> None:
        """A reload that finds the config file gone would fall back to the built-in defaults
        (re-enabling every hook it disabled): refuse it, with a warning, and keep running."""
        gone = self._gateway.config.source
        if gone is None or config.source is not None:
            return
        log.warning(
            "config.deleted",
            path=str(gone),
            fix="restore the file; to run on the built-in defaults, create it empty",
        )
        raise ConfigError(
            str(gone),
            [
                f"{gone} was deleted; the running config stays (restore it, or create it empty "
                "to use the built-in defaults)"
            ],
        )


__all__ = [
    "JOURNAL_KEYS",
    "Reloader",
    "log_ignored",
    "restart_only",
    "watch_spec",
]
