"""The suite's xdist scheduler (tests/support/scheduling.py) holds a container group back until
its image step has an outcome, and hands it out the moment it has one, or when nothing else is
left. Driven here with stand-in workers, as xdist's controller drives it."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from xdist.remote import Producer

from tests.container.images import shared_dir
from tests.support.scheduling import ImagesReadyScheduling

REGULAR = [f"tests/test_x.py::test_{i}" for i in range(8)]
SYSTEMD = [f"tests/container/test_s.py::test_{i}@container-systemd" for i in range(3)]
DOCKER = [f"tests/container/test_d.py::test_{i}@container-docker" for i in range(2)]
COLLECTION = [*SYSTEMD, *REGULAR, *DOCKER]


SENT: list[str] = []
"""Every test handed out, in order, to whichever worker."""


class Worker:
    """What the scheduler uses of xdist's ``WorkerController``."""

    def __init__(self, name: str, run: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.workerinput = {"workerid": name, "testrunuid": run}
        self.sent: list[str] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(COLLECTION[i] for i in indices)
        SENT.extend(COLLECTION[i] for i in indices)

    def shutdown(self) -> None:
        self.shutting_down = True


@pytest.fixture
def run() -> Iterator[tuple[str, Path]]:
    """An xdist test-run id and its shared directory, removed after."""
    run_id = f"test-{uuid.uuid4().hex}"
    directory = shared_dir(run_id)
    assert directory is not None
    directory.mkdir()
    yield run_id, directory
    shutil.rmtree(directory)


def scheduled(run_id: str, workers: int = 2) -> tuple[ImagesReadyScheduling, list[Worker]]:
    config: Any = SimpleNamespace(
        option=SimpleNamespace(loadscopereorder=False),  # the Makefile's --no-loadscope-reorder
        getvalue={"tx": [f"{workers}*popen"]}.__getitem__,
    )
    SENT.clear()
    sched = ImagesReadyScheduling(config, Producer("test", enabled=False))
    nodes = [Worker(f"gw{i}", run_id) for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    return sched, nodes


def finish(sched: ImagesReadyScheduling, node: Worker, nodeid: str) -> None:
    sched.mark_test_complete(node, COLLECTION.index(nodeid))


def everything_sent(nodes: list[Worker]) -> list[str]:
    return [nodeid for node in nodes for nodeid in node.sent]


def test_a_group_waits_for_its_image_and_goes_out_at_the_next_turn_after_it(
    run: tuple[str, Path],
) -> None:
    run_id, directory = run
    sched, nodes = scheduled(run_id)
    assert nodes[0].sent[:3] == SYSTEMD  # not held: first in collection order, out first
    assert not set(DOCKER) & set(everything_sent(nodes))
    node = nodes[1]
    finish(sched, node, node.sent[0])  # a turn without an outcome: a regular test goes out
    assert not set(DOCKER) & set(everything_sent(nodes))
    (directory / "app.json").write_text('{"value": "gatewayd-e2e/app:latest"}')
    finish(sched, node, node.sent[1])
    assert node.sent[-2:] == DOCKER  # handed out at the turn after the outcome
    assert set(REGULAR) - set(everything_sent(nodes))  # regular tests were still waiting


def test_a_failed_step_is_an_outcome_too(run: tuple[str, Path]) -> None:
    run_id, directory = run
    sched, nodes = scheduled(run_id)
    (directory / "app.json").write_text('{"error": "the build failed"}')
    node = nodes[1]
    finish(sched, node, node.sent[0])
    assert node.sent[-2:] == DOCKER  # its tests then fail at once, with the build's error


def test_a_group_still_waiting_goes_out_when_nothing_else_is_left(run: tuple[str, Path]) -> None:
    run_id, _ = run
    sched, nodes = scheduled(run_id)
    # No outcome is ever written (the building worker died): once the regular tests are all
    # handed out, the held group goes out too, and its fixtures wait or build themselves.
    while not set(DOCKER) <= set(everything_sent(nodes)):
        busy = [
            (node, nodeid)
            for node in nodes
            for nodeid in node.sent
            if not sched.assigned_work[node].get(sched._split_scope(nodeid), {}).get(nodeid)
        ]
        assert busy, "work left unassigned with every worker idle"
        finish(sched, *busy[0])
    assert sorted(SENT) == sorted(COLLECTION)
    assert {*SENT[: len(SYSTEMD + REGULAR)]} == {*SYSTEMD, *REGULAR}
