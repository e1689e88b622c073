"""The container tests' images, prepared once per test run on a background thread.

Check Docker (and tidy up after killed sessions), then build the first stage of the repository's
``Dockerfile`` (the venv with gatewayd installed) and the app image (its second stage, the first
from the cache); beside them, the systemd image (the systemd base plus ``procps``) and this
checkout's wheel, which the systemd tests install into their booted container: those tests do
not wait for the app image's build at all. Each step's outcome is a
:class:`~concurrent.futures.Future`; the fixtures wait on them.

Under pytest-xdist every worker collects the container tests, but only one should build (two
builds of one tag at once would fight over it), and the worker that builds need not be the one
that runs the container tests. So the first worker to take the run's build lock (``flock`` on a
file in a directory named after xdist's test-run id) builds, and writes each step's outcome to a
file beside the lock; a worker without the lock reads the outcomes from there, and builds itself
if the builder went away without writing them. Without xdist, the one process just builds.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

STEPS = ("ready", "stage", "app", "systemd")
""""ready" is None when Docker is usable, else why not (the fixtures then skip); then "stage" and
"app" in order, and "systemd" beside them."""

STALE_S = 24 * 3600.0


def shared_dir(run: str | None = None) -> Path | None:
    """The directory the xdist workers of the test run ``run`` share (xdist's test-run id; by
    default this worker's run), or None when not under xdist."""
    run = run or os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    return Path(tempfile.gettempdir()) / f"gatewayd-e2e-run-{run}"


def remove_stale_run_dirs(keep: Path) -> None:
    """Remove the shared directories of runs older than a day."""
    for path in keep.parent.glob("gatewayd-e2e-run-*"):
        with contextlib.suppress(OSError):
            if path != keep and time.time() - path.stat().st_mtime > STALE_S:
                shutil.rmtree(path)


def run_dir() -> Path:
    """A directory for what this run's steps make (the systemd tests' wheel): the one the xdist
    workers share, else this process's own, removed when it exits."""
    shared = shared_dir()
    if shared is not None:
        shared.mkdir(exist_ok=True)
        return shared
    path = Path(tempfile.gettempdir()) / f"gatewayd-e2e-pid-{os.getpid()}"
    if not path.is_dir():
        path.mkdir()
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class Images:
    """The preparation steps of one run; see the module docstring."""

    def __init__(
        self, steps: dict[str, Callable[[], Any]], cleanup: Callable[[], None] | None = None
    ) -> None:
        assert tuple(steps) == STEPS, steps
        self._steps = steps
        self._cleanup = cleanup
        """Run once every step's outcome is out: work nothing should wait for (removing the
        images the builds replaced)."""
        self._futures: dict[str, Future[Any]] = {step: Future() for step in STEPS}
        self._thread: threading.Thread | None = None
        self._shared = shared_dir()
        self._lock: IO[bytes] | None = None

    def start(self) -> None:
        """Start the preparation in this process (once), unless another worker has it."""
        if self._thread is not None:
            return
        if self._shared is not None and not self._take_lock():
            return
        # A daemon thread: an interrupted session exits without waiting for a build.
        self._thread = threading.Thread(target=self._run, name="e2e-images", daemon=True)
        self._thread.start()

    def result(self, step: str, timeout: float) -> Any:
        """The outcome of ``step``: its value, or its exception raised here."""
        deadline = time.monotonic() + timeout
        while self._thread is None:
            outcome = self._read(step)
            if outcome is not None:
                return outcome()
            self.start()  # builds here only if the lock is free: the builder is gone
            if time.monotonic() > deadline:
                raise TimeoutError(f"no outcome of the {step!r} image step within {timeout}s")
            time.sleep(1.0)
        return self._futures[step].result(timeout=max(0.0, deadline - time.monotonic()))

    def wait_for_builder(self) -> None:
        """Under xdist, the building worker waits for the build before its session ends: the
        worker running the container tests reads the outcomes only then."""
        if self._shared is not None and self._thread is not None:
            self._thread.join()

    def _take_lock(self) -> bool:
        assert self._shared is not None
        self._shared.mkdir(exist_ok=True)
        lock = (self._shared / "lock").open("wb")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return False
        if all(self._read(step) is not None for step in STEPS):  # finished while we looked
            lock.close()
            return False
        self._lock = lock
        remove_stale_run_dirs(self._shared)
        return True

    def _read(self, step: str) -> Callable[[], Any] | None:
        """The outcome another worker wrote for ``step`` (as a thunk), or None if none yet."""
        if self._shared is None:
            return None
        try:
            outcome = json.loads((self._shared / f"{step}.json").read_text())
        except FileNotFoundError:
            return None

        def value() -> Any:
            if "error" in outcome:
                raise RuntimeError(
                    f"the {step!r} image step failed in another worker: {outcome['error']}"
                )
            return outcome["value"]

        return value

    def _write(self, step: str, outcome: dict[str, Any]) -> None:
        if self._shared is None:
            return
        tmp = self._shared / f".{step}.json"
        tmp.write_text(json.dumps(outcome))
        os.replace(tmp, self._shared / f"{step}.json")

    def _run(self) -> None:
        try:
            self._step("ready")
            beside = threading.Thread(
                target=self._step, args=("systemd",), name="e2e-systemd-image"
            )
            beside.start()
            self._step("stage")
            self._step("app")
            beside.join()
            if self._cleanup is not None:
                self._cleanup()
        finally:
            if self._lock is not None:
                self._lock.close()

    def _step(self, step: str) -> None:
        """Run ``step`` (unless Docker is unavailable or the step it needs failed) and record
        its outcome for the fixtures here and in the other workers."""
        future = self._futures[step]
        if step != "ready" and self._futures["ready"].result() is not None:
            future.set_result(None)  # Docker is unavailable: the fixtures skip
            self._write(step, {"value": None})
            return
        try:
            if step == "app":
                self._futures["stage"].result()  # raises the stage's failure
            value = self._steps[step]()
        except BaseException as exc:  # handed to the fixture that waits on it
            future.set_exception(exc)
            self._write(step, {"error": f"{type(exc).__name__}: {exc}"})
        else:
            future.set_result(value)
            self._write(step, {"value": value})
