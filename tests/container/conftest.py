"""Fixtures for the end-to-end tests that run gatewayd in real containers.

* ``docker_ready`` (session): skips, with the reason, only when ``container-env.sh --check``
  says Docker cannot run here; otherwise clears what killed sessions left behind and makes the
  base image usable by a non-root user (see :func:`e2e_docker.ensure_traversable_root`).
* ``app_image`` (session): the repository's ``Dockerfile`` built once per session.
* ``systemd_image`` (session): the systemd base image plus the app image's ``/opt/gatewayd`` venv.

Tests that use them carry the ``container`` marker (``-m "not container"`` leaves them out).
"""

from __future__ import annotations

import pytest
from e2e_docker import (
    APP_IMAGE,
    BASE_IMAGE,
    REPO,
    SYSTEMD_BASE_IMAGE,
    SYSTEMD_IMAGE,
    build,
    ensure_traversable_root,
    remove_stale_containers,
    unavailable_reason,
)


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """Docker answers and the base images exist; skip with the reason otherwise."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    remove_stale_containers()
    ensure_traversable_root(BASE_IMAGE, ['CMD ["python3"]', "ENV LANG=C.UTF-8"])


@pytest.fixture(scope="session")
def app_image(docker_ready: None) -> str:
    """The project's own image, built from the repository's Dockerfile."""
    build(APP_IMAGE, str(REPO))
    return APP_IMAGE


@pytest.fixture(scope="session")
def systemd_image(app_image: str) -> str:
    """systemd as PID 1 with gatewayd installed in ``/opt/gatewayd`` exactly as in the app image."""
    # procps: /bin/kill for the unit's ExecReload=, as on any standard Debian install (the base
    # image is debootstrap's minbase, which leaves it out).
    dockerfile = (
        f"FROM {SYSTEMD_BASE_IMAGE}\n"
        "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
        "--no-install-recommends procps >/dev/null && rm -rf /var/lib/apt/lists/*\n"
        f"COPY --from={app_image} /opt/gatewayd /opt/gatewayd\n"
    )
    build(SYSTEMD_IMAGE, str(REPO), dockerfile=dockerfile)
    return SYSTEMD_IMAGE
