"""Fixtures for the end-to-end tests that run gatewayd in real containers.

Building the images takes minutes on these machines (dockerd's vfs driver copies the whole
root filesystem for every layer), so when a session has container tests the builds start in a
background thread as soon as collection ends, and the Docker image tests are moved to the end of
the run: the rest of the suite runs while the images build. The systemd tests, which install
gatewayd into their container from a wheel and wait for no build, go first. Under pytest-xdist
one worker builds for the whole run (see :mod:`tests.container.images`), and each container test
module runs in one worker (``xdist_group("container-docker")``,
``xdist_group("container-systemd")``, with ``--dist loadgroup``).

* ``docker_ready`` (session): skips, with the reason, only when ``container-env.sh --check``
  says Docker cannot run here; otherwise clears what killed sessions left behind and makes the
  base image usable by a non-root user (see :func:`e2e_docker.ensure_traversable_root`).
* ``app_image`` (session): the repository's ``Dockerfile``, built once per session.
* ``systemd_image`` (session): the systemd base image plus ``procps``, and this checkout's wheel,
  both made beside the app image's build: the systemd tests install gatewayd into the booted
  container from that wheel, as a user installs it on a host (``pip install`` in a venv).

Tests that use them carry the ``container`` marker (``-m "not container"`` leaves them out).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.e2e_docker import (
    APP_BUILD_STAGE,
    APP_IMAGE,
    BASE_IMAGE,
    REPO,
    SYSTEMD_BASE_IMAGE,
    SYSTEMD_IMAGE,
    SystemdImage,
    build,
    ensure_traversable_root,
    remove_images,
    remove_stale_containers,
    unavailable_reason,
)
from tests.container.images import Images, run_dir
from tests.support.wheels import checkout_wheel

BUILD_TIMEOUT_S = 1800

# procps: /bin/kill for the unit's ExecReload=, as on any standard Debian install (the base image
# is debootstrap's minbase, which leaves it out). gatewayd is not in the image: the systemd tests
# install it into the booted container. An image with the venv copied in from the Dockerfile's
# first stage cost the run its longest path: with the vfs storage driver, `COPY --from` creates
# a container of the source image (a copy of its whole root filesystem, 555 MB) even when the
# layer then comes from the cache, and the image's own layers and the container run from it copy
# 743 MB more.
SYSTEMD_DOCKERFILE = (
    f"FROM {SYSTEMD_BASE_IMAGE}\n"
    "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
    "--no-install-recommends procps >/dev/null && rm -rf /var/lib/apt/lists/*\n"
)


def _prepare() -> str | None:
    """Check Docker and fix up the base image; the skip reason, or None when ready."""
    reason = unavailable_reason()
    if reason is None:
        remove_stale_containers()
        ensure_traversable_root(BASE_IMAGE, ['CMD ["python3"]', "ENV LANG=C.UTF-8"])
    return reason


REPLACED: list[str] = []
"""Images the builds replaced, removed once every build is done (``Images``' ``cleanup``)."""


def _built(old: str | None) -> None:
    if old is not None:
        REPLACED.append(old)


def _build_stage() -> str:
    _built(build(APP_BUILD_STAGE, str(REPO), target="build"))
    return APP_BUILD_STAGE


def _build_app() -> str:
    _built(build(APP_IMAGE, str(REPO)))  # its first stage is the one just built: from the cache
    return APP_IMAGE


def _build_systemd() -> dict[str, str]:
    _built(build(SYSTEMD_IMAGE, dockerfile=SYSTEMD_DOCKERFILE))
    wheel = checkout_wheel(run_dir() / "wheel")
    return {"image": SYSTEMD_IMAGE, "wheel": str(wheel)}


IMAGES = Images(
    {"ready": _prepare, "stage": _build_stage, "app": _build_app, "systemd": _build_systemd},
    cleanup=lambda: remove_images(REPLACED),
)


FIRST_MODULES = frozenset({"test_systemd_service.py"})
"""Container test modules that run first: the systemd tests need no image build of their own
(the systemd base with ``procps`` comes from the cache and the wheel takes seconds), so their
container's boot, install and story run beside the other tests from the start."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The systemd tests first (:data:`FIRST_MODULES`) and the other container tests last, so
    that their image builds while the rest of the suite runs. Under xdist the Makefile passes
    ``--no-loadscope-reorder``: otherwise ``--dist loadgroup`` hands out the largest groups (the
    container modules) first whatever this order, and the Docker module's worker sat idle
    waiting for its image through most of the run."""

    def place(item: pytest.Item) -> int:
        if item.get_closest_marker("container") is None:
            return 1
        return 0 if item.path.name in FIRST_MODULES else 2

    items.sort(key=place)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under xdist, the worker that builds the images waits for them before it exits."""
    if not (session.shouldstop or session.shouldfail):
        IMAGES.wait_for_builder()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the images when this session will run a container test."""
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("container") for item in session.items):
        IMAGES.start()


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """Docker answers and the base images exist; skip with the reason otherwise."""
    IMAGES.start()
    reason: str | None = IMAGES.result("ready", BUILD_TIMEOUT_S)
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def app_image(docker_ready: None) -> str:
    """The project's own image, built from the repository's Dockerfile."""
    image: str = IMAGES.result("app", BUILD_TIMEOUT_S)
    return image


@pytest.fixture(scope="session")
def systemd_image(docker_ready: None) -> SystemdImage:
    """The image that boots systemd as PID 1, and the wheel of this checkout to install in it."""
    built: dict[str, str] = IMAGES.result("systemd", BUILD_TIMEOUT_S)
    return SystemdImage(built["image"], Path(built["wheel"]))
