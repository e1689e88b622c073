"""The Docker image for real: built from the repository's Dockerfile, run with a hooks directory
bind-mounted from the host, and stopped the way ``docker stop`` does.

One container serves the module; the tests run in file order and the last one stops it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.container.e2e_docker import Container, docker, wait_until

pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    # One worker for this module (its containers are module-scoped); the systemd module has
    # a group of its own, so the two run side by side once the images are built.
    pytest.mark.xdist_group("container-docker"),
]

IMAGE_UID = "10001"
STOP_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def host_hooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hooks directory on the host, readable by the image's unprivileged user."""
    hooks = tmp_path_factory.mktemp("docker-hooks")
    hooks.chmod(0o755)
    return hooks


@pytest.fixture(scope="module")
def ctr(app_image: str, host_hooks: Path) -> Iterator[Container]:
    """The app container, the host's hooks directory mounted read-only at /data/hooks."""
    container = Container.run(
        app_image, "gatewayd-e2e-app", f"--volume={host_hooks}:/data/hooks:ro"
    )
    try:
        yield container
    finally:
        container.remove()


def diagnostics(ctr: Container) -> str:
    """The daemon's own account: hooks, last reload, watch mode, the hooks dir, recent logs."""
    status = ctr.exec("gatewayd", "status", "--json", check=False).stdout
    listing = ctr.exec("ls", "-laR", "/data/hooks", check=False).stdout
    logs = "\n".join(ctr.logs().splitlines()[-40:])
    return f"status: {status}\n/data/hooks:\n{listing}\nlogs:\n{logs}"


def reply(ctr: Container, text: str) -> str:
    done = ctr.exec("gatewayd", "send", text, "--session", "docker", check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def test_healthy_within_seconds(ctr: Container) -> None:
    wait_until(
        lambda: ctr.inspect("{{.State.Health.Status}}") == "healthy",
        120,
        "the HEALTHCHECK (gatewayd status) to pass",
    )


def answering(ctr: Container) -> None:
    """Wait until ``gatewayd status`` answers inside the container, so that a test which runs
    before (or without) the HEALTHCHECK wait finds the daemon up rather than still starting."""
    wait_until(
        lambda: ctr.exec("gatewayd", "status", check=False).returncode == 0,
        120,
        "gatewayd status to answer inside the container",
        explain=lambda: diagnostics(ctr),
    )


def test_docker_exec_gatewayd_status(ctr: Container) -> None:
    answering(ctr)
    done = ctr.exec("gatewayd", "status")
    assert "running" in done.stdout
    status = json.loads(ctr.exec("gatewayd", "status", "--json").stdout)
    assert status["state"] == "running"
    assert status["channels"][0]["address"] == "/data/run/gatewayd.sock"


def test_the_daemon_is_not_root_and_tini_is_pid_1(ctr: Container) -> None:
    answering(ctr)
    pid = json.loads(ctr.exec("gatewayd", "status", "--json").stdout)["pid"]
    assert ctr.exec("stat", "-c", "%u", f"/proc/{pid}").stdout.strip() == IMAGE_UID
    init = ctr.exec("cat", "/proc/1/cmdline").stdout.split("\0")
    assert init[0] == "tini"
    assert pid != 1


def test_a_hook_edited_on_the_host_is_reloaded_inside(
    ctr: Container, host_hooks: Path, write_hook: Callable[..., Path]
) -> None:
    handler = "async def handler(event):\n    event.messages.append('from the host {v}')\n"
    explain = functools.partial(diagnostics, ctr)
    write_hook(host_hooks, "host-greeter", handler=handler.format(v="v1"))
    wait_until(
        lambda: "from the host v1" in reply(ctr, "/new"),
        60,
        "the mounted hook's reply",
        explain=explain,
    )
    # Rewrite in place (same inode) and also by rename, the two ways editors save.
    (host_hooks / "host-greeter" / "handler.py").write_text(handler.format(v="v2"))
    wait_until(
        lambda: "from the host v2" in reply(ctr, "/new"),
        60,
        "the edited hook's reply",
        explain=explain,
    )
    staged = host_hooks / "host-greeter" / ".handler.py.swp"
    staged.write_text(handler.format(v="v3"))
    staged.rename(host_hooks / "host-greeter" / "handler.py")
    wait_until(
        lambda: "from the host v3" in reply(ctr, "/new"),
        60,
        "the renamed hook's reply",
        explain=explain,
    )


def test_a_typescript_hook_runs_and_reloads_inside(ctr: Container, host_hooks: Path) -> None:
    """The image ships Node: an OpenClaw-style handler.ts runs with no Node on the host's side."""
    hook = host_hooks / "ts-greeter"
    (hook / "lib").mkdir(parents=True)
    (hook / "HOOK.md").write_text(
        "---\nname: ts-greeter\nmetadata: {openclaw: {events: ['command:tshello']}}\n---\n"
    )
    source = (
        'import type {{ HookHandler }} from "openclaw/hooks";\n'
        'import {{ tag }} from "./lib/tag.ts";\n'
        "const handler: HookHandler = async (event) => {{\n"
        "  event.messages.push(tag(`ts {v} ${{process.versions.node.split('.')[0]}}`));\n"
        "}};\n"
        "export default handler;\n"
    )
    (hook / "lib" / "tag.ts").write_text("export const tag = (s: string): string => `<${s}>`;\n")
    (hook / "handler.ts").write_text(source.format(v="v1"))
    explain = functools.partial(diagnostics, ctr)
    wait_until(
        lambda: reply(ctr, "/tshello").startswith("<ts v1 "),
        60,
        "the TypeScript hook's reply",
        explain=explain,
    )
    assert int(reply(ctr, "/tshello")[len("<ts v1 ") : -1]) >= 22  # a Node that strips types
    (hook / "handler.ts").write_text(source.format(v="v2"))
    wait_until(
        lambda: reply(ctr, "/tshello").startswith("<ts v2 "),
        60,
        "the edited TypeScript hook's reply",
        explain=explain,
    )


def test_docker_stop_drains_and_exits_zero_within_the_timeout(ctr: Container) -> None:
    wait_until(lambda: ctr.inspect("{{.State.Health.Status}}") == "healthy", 120, "healthy")
    docker("stop", f"--time={STOP_TIMEOUT_S}", ctr.id, timeout=STOP_TIMEOUT_S + 60)
    # 0, not 137: the daemon exited on SIGTERM by itself, docker never had to SIGKILL it.
    assert ctr.inspect("{{.State.ExitCode}}") == "0"
    logs = ctr.logs()
    assert "shutdown.begin" in logs
    assert "shutdown on SIGTERM" in logs
