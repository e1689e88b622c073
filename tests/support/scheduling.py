"""pytest-xdist's ``--dist loadgroup``, with the Docker image tests' group handed out when its
image is ready (``tests/conftest.py`` installs it through ``pytest_xdist_make_scheduler``).

A container module is one xdist group (its tests share one container), and its first test
waits for its image, which one worker builds in the background for the whole run
(:mod:`tests.container.images`). Handed out in collection order, the group's worker waits
there, idle, while the rest of the suite runs on the others (two of four workers for most of a
run, before ``--no-loadscope-reorder``); handed out last, its tests run on after the rest. This
scheduler keeps a group whose image step has no outcome yet behind the other work and hands it
out at the first assignment after the outcome is written (built, failed or Docker unavailable:
the tests then run, fail or skip at once). A group that is all that is left is handed out
anyway, and its fixtures wait as before.

The outcomes are the files the building worker writes into the run's shared directory
(:func:`tests.container.images.shared_dir`), named after xdist's test-run id, which the
controller reads from its workers' ``workerinput``.

What it saves, measured in CI runs with Docker (the images rebuilt, load 3.4-7.6): 202.4 s of
pytest wall time without it, 186.3 s with it. Without Docker the image step's outcome is there
at once and this is plain ``--dist loadgroup``.
"""

from __future__ import annotations

from pathlib import Path

from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

from tests.container.images import shared_dir

HELD = {"container-docker": "app"}
"""The xdist groups held back, each with the image step (``images.STEPS``) it waits for. Not
the systemd tests: their step (an image from the cache and a wheel) has its outcome a second or
two after collection, and a group held at the first assignment goes out at the first test's end
after that, which the slow tests at the front of the run put 30 s or more later; it goes out
first instead (``tests/container/conftest.py``) and waits those seconds in its fixture."""


class ImagesReadyScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped
    """``--dist loadgroup``; see the module docstring."""

    def _assign_work_unit(self, node: WorkerController) -> None:
        queue = self.workqueue
        waiting = [group for group in HELD if group in queue]
        if waiting:
            run_dir = shared_dir(node.workerinput["testrunuid"])
            ready = [group for group in waiting if self._ready(run_dir, group)]
            for group in reversed(ready):  # the first of HELD goes out first
                queue.move_to_end(group, last=False)
            if not ready and next(iter(queue)) in HELD and len(queue) > len(waiting):
                for group in waiting:
                    queue.move_to_end(group)
        super()._assign_work_unit(node)

    @staticmethod
    def _ready(run_dir: Path | None, group: str) -> bool:
        return run_dir is None or (run_dir / f"{HELD[group]}.json").exists()
