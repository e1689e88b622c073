"""Docker plumbing for the end-to-end tests in this directory.

Every docker call goes through :func:`docker`: bounded by a timeout, output captured, and a
failure raises with the command and docker's own words. Images are built once per session (the
builds reuse docker's layer cache across sessions). Containers carry a label with the pytest
process id, so a session removes what a killed earlier session left behind, never what a
session still running beside it owns.

The machines here have no registry: ``../shared/tools/container-env.sh`` builds the base images
from Debian packages, and nothing here ever pulls.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

REPO = Path(__file__).resolve().parents[2]
CONTAINER_ENV = REPO.parent / "shared" / "tools" / "container-env.sh"
BASE_IMAGE = "python:3.11-slim-bookworm"
SYSTEMD_BASE_IMAGE = "gatewayd-test/systemd:bookworm"
APP_IMAGE = "gatewayd-e2e/app:latest"
APP_BUILD_STAGE = "gatewayd-e2e/app-build:latest"  # the Dockerfile's first stage
SYSTEMD_IMAGE = "gatewayd-e2e/systemd:latest"
SESSION_LABEL = "org.gatewayd.e2e.pid"
ROOT_LABEL = "org.gatewayd.e2e.root-mode"

# How a container boots systemd as PID 1 on these machines (--privileged is refused here).
SYSTEMD_RUN_OPTS = (
    "--cap-add=SYS_ADMIN",
    "--cap-add=NET_ADMIN",
    "--cap-add=SYS_PTRACE",
    "--security-opt=seccomp=unconfined",
    "--security-opt=apparmor=unconfined",
    "--volume=/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs=/run",
    "--tmpfs=/run/lock",
    "--env=container=docker",
)

T = TypeVar("T")


class DockerError(AssertionError):
    """A docker command failed; the message holds the command, its exit code and stderr."""


def docker(
    *args: str, input: str | None = None, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS``; raise :class:`DockerError` on a non-zero exit when ``check``."""
    try:
        done = subprocess.run(
            ["docker", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise DockerError(f"docker {' '.join(args)}: no answer within {timeout:.0f} s") from exc
    if check and done.returncode != 0:
        raise DockerError(
            f"docker {' '.join(args)} exited {done.returncode}\n"
            f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
        )
    return done


def unavailable_reason() -> str | None:
    """Why Docker cannot run here (None when it can): ``container-env.sh --check`` decides."""
    if not CONTAINER_ENV.is_file():
        return f"Docker is not set up: {CONTAINER_ENV} is missing"
    try:
        done = subprocess.run(
            ["bash", str(CONTAINER_ENV), "--check"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"Docker does not answer: `bash {CONTAINER_ENV} --check` hung for 60 s"
    if done.returncode != 0:
        return (
            f"Docker cannot start here: `bash {CONTAINER_ENV} --check` failed (dockerd not "
            f"answering, or {BASE_IMAGE} / {SYSTEMD_BASE_IMAGE} missing); run "
            f"`bash {CONTAINER_ENV}` to start dockerd and build them"
        )
    return None


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    step: float = 0.25,
    explain: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None/False; fail after ``timeout``.

    ``explain`` adds what the system under test says about itself to the failure message.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(step)


def labels(image: str) -> dict[str, str]:
    """The image's labels."""
    out = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image).stdout
    return json.loads(out) or {}


def _root_dir_0755(stream: IO[bytes], sink: IO[bytes]) -> None:
    """Copy a tar stream, giving its root directory entry mode 0755 (adding one if absent)."""
    with (
        tarfile.open(fileobj=stream, mode="r|") as src,
        tarfile.open(fileobj=sink, mode="w|") as dst,
    ):
        seen_root = False
        for member in src:
            if member.name in ("", ".", "./"):
                member.mode, seen_root = 0o755, True
            dst.addfile(member, src.extractfile(member) if member.isreg() else None)
        if not seen_root:
            root = tarfile.TarInfo("./")
            root.type, root.mode = tarfile.DIRTYPE, 0o755
            dst.addfile(root)


def ensure_traversable_root(image: str, changes: Sequence[str]) -> None:
    """Make ``image``'s ``/`` mode 0755 so a non-root user can run anything in it.

    container-env.sh imports the base from a ``mktemp -d`` rootfs, whose mode (0700) becomes
    the image's ``/``: every non-root process then fails with "permission denied". The real
    ``python:3.11-slim-bookworm`` has 0755, and a Dockerfile layer cannot change ``/``'s mode,
    so the image is re-imported once (its config re-applied through ``changes``) and labelled;
    later sessions see the label and do nothing.
    """
    if labels(image).get(ROOT_LABEL) == "0755":
        return
    probe = docker(
        "run",
        "--rm",
        "--network=host",
        "--user=65534",
        "--entrypoint=/bin/true",
        image,
        check=False,
        timeout=300,
    )
    if probe.returncode != 0:
        container = docker("create", "--network=host", image, timeout=300).stdout.strip()
        try:
            import_cmd = ["docker", "import", *(f"--change={c}" for c in changes)]
            import_cmd += [f"--change=LABEL {ROOT_LABEL}=0755", "-", image]
            with (
                subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE) as export,
                subprocess.Popen(
                    import_cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
                ) as imp,
            ):
                assert export.stdout is not None and imp.stdin is not None
                _root_dir_0755(export.stdout, imp.stdin)
                imp.stdin.close()
                if export.wait(timeout=300) != 0 or imp.wait(timeout=300) != 0:
                    raise DockerError(f"re-importing {image} with a 0755 root failed")
        finally:
            docker("rm", "-f", container, check=False)
    else:
        dockerfile = f"FROM {image}\nLABEL {ROOT_LABEL}=0755\n"
        docker("build", "--network=host", "-t", image, "-", input=dockerfile, timeout=300)


def image_id(tag: str) -> str | None:
    """The id ``tag`` points at, or None when there is no such image."""
    done = docker("image", "inspect", "--format", "{{.Id}}", tag, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def build(
    tag: str,
    context: str | None = None,
    dockerfile: str | None = None,
    target: str | None = None,
    timeout: float = 900,
) -> str | None:
    """``docker build --network=host -t TAG`` of ``context`` (its stage ``target`` alone when
    given), or of ``dockerfile`` text alone. Returns the id of the image ``tag`` pointed at
    before when the build replaced it: with the vfs storage driver every layer is a full copy
    of the root filesystem, so the caller removes it (:func:`remove_images`), once nothing waits
    for the build any more (deleting an image's files takes seconds here)."""
    old = image_id(tag)
    args = ["build", "--network=host", "-t", tag, *(["--target", target] if target else [])]
    if dockerfile is not None:
        docker(*args, "-", input=dockerfile, timeout=timeout)
    else:
        assert context is not None, "build() needs a context or a dockerfile"
        docker(*args, context, timeout=timeout)
    return old if old is not None and image_id(tag) != old else None


def remove_images(ids: list[str]) -> None:
    """``docker rmi`` each of ``ids``; one still used by a container stays, harmlessly."""
    for image in ids:
        docker("rmi", image, check=False)


def remove_stale_containers() -> None:
    """Remove containers left by earlier e2e sessions whose pytest process is gone."""
    out = docker(
        "ps",
        "-a",
        "--filter",
        f"label={SESSION_LABEL}",
        "--format",
        f'{{{{.ID}}}} {{{{.Label "{SESSION_LABEL}"}}}}',
    ).stdout
    for line in out.splitlines():
        cid, _, pid = line.partition(" ")
        if pid.isdigit() and not _alive(int(pid)):
            docker("rm", "-f", "-v", cid, check=False, timeout=120)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class SystemdImage:
    """What the systemd tests boot (``image``) and install into it (``wheel``, this checkout's,
    on the host: the container mounts its directory)."""

    image: str
    wheel: Path


@dataclass
class Container:
    """A running container started by this session; :meth:`remove` it when done."""

    id: str
    name: str

    @classmethod
    def run(cls, image: str, name: str, *options: str, command: Sequence[str] = ()) -> Container:
        """``docker run -d --network=host`` with this session's label; returns the container."""
        full = f"{name}-{os.getpid()}"
        docker("rm", "-f", "-v", full, check=False)
        cid = docker(
            "run",
            "-d",
            "--network=host",
            f"--name={full}",
            f"--label={SESSION_LABEL}={os.getpid()}",
            *options,
            image,
            *command,
            timeout=300,
        ).stdout.strip()
        return cls(cid, full)

    def exec(
        self,
        *cmd: str,
        input: str | None = None,
        user: str | None = None,
        env: Sequence[str] = (),
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """``docker exec`` a command in the container."""
        opts = ["-i"] if input is not None else []
        if user is not None:
            opts.append(f"--user={user}")
        opts.extend(f"--env={e}" for e in env)
        return docker("exec", *opts, self.id, *cmd, input=input, check=check, timeout=timeout)

    def write_file(self, path: str, text: str, mode: str = "0644") -> None:
        """Write ``path`` inside the container as root, the way editors do: a temp file renamed."""
        script = (
            'set -e; d=$(dirname "$1"); mkdir -p "$d"; t="$d/.e2e.$$"; '
            'cat > "$t"; chmod "$2" "$t"; mv -f "$t" "$1"'
        )
        self.exec("sh", "-c", script, "sh", path, mode, input=text)

    def inspect(self, fmt: str) -> str:
        """``docker inspect --format FMT``, stripped."""
        return docker("inspect", "--format", fmt, self.id).stdout.strip()

    def logs(self) -> str:
        """Everything the container wrote to stdout and stderr."""
        done = docker("logs", self.id, check=False)
        return done.stdout + done.stderr

    def remove(self) -> None:
        """Remove the container and its anonymous volumes, whatever state it is in."""
        docker("rm", "-f", "-v", self.id, check=False, timeout=120)
