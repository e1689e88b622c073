"""``gatewayd install-service`` and the deployment files, checked without Docker: the rendered
units, the files it writes and refuses to overwrite, the unit's sandbox score and the
Dockerfile's lint. The units running for real are in test_systemd_service.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gatewayd import service
from tests.support.cli import RunCli
from tests.support.inline import gatewayd_inline

REPO = Path(__file__).resolve().parents[2]
SYSTEM_UNIT = REPO / "systemd" / "gatewayd.service"
USER_UNIT = REPO / "systemd" / "user" / "gatewayd.service"
EXEC_START = re.compile(r"^ExecStart=(.*)$", re.MULTILINE)


@pytest.fixture
def run_cli(run_cli_inline: RunCli) -> RunCli:
    """``install-service`` renders and writes files only: run by the test's own thread, where
    coverage measures it."""
    return run_cli_inline


def this_gatewayd() -> str:
    return str(Path(sys.executable).parent / "gatewayd")


def without_exec_start(text: str) -> str:
    return EXEC_START.sub("", text)


def test_stdout_is_the_repository_unit_with_this_installations_gatewayd(run_cli: RunCli) -> None:
    done = run_cli("install-service", "--stdout", "--notify-reload", "no")
    assert done.returncode == 0, done.stderr
    assert EXEC_START.findall(done.stdout) == [f"{this_gatewayd()} run"]
    assert without_exec_start(done.stdout) == without_exec_start(SYSTEM_UNIT.read_text())


def test_user_unit_takes_the_state_dir_from_the_environment(tmp_path: Path) -> None:
    state = tmp_path / "my state"
    state.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = gatewayd_inline(
        state, "install-service", "--user", "--stdout", "--notify-reload", "no", env=env
    )
    assert done.returncode == 0, done.stderr
    assert f'\nEnvironment="ELIZA_STATE_DIR={state}"\n' in done.stdout
    assert "\nEnvironment=ELIZA_STATE_DIR=%h/.eliza\n" in USER_UNIT.read_text()
    assert EXEC_START.findall(done.stdout) == [f"{this_gatewayd()} run"]


def test_writes_once_reports_unchanged_and_refuses_to_clobber_local_edits(
    tmp_path: Path, run_cli: RunCli
) -> None:
    args = ("install-service", "--unit-dir", str(tmp_path), "--notify-reload", "yes")
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    unit = tmp_path / "gatewayd.service"
    dropin = tmp_path / "gatewayd.service.d" / "notify-reload.conf"
    assert f"wrote {unit}" in first.stdout
    assert dropin.read_text() == (REPO / "systemd" / "notify-reload.conf").read_text()
    assert "systemctl daemon-reload && systemctl enable --now gatewayd.service" in first.stdout

    assert f"unchanged {unit}" in run_cli(*args).stdout

    unit.write_text(unit.read_text() + "Nice=5\n")
    refused = run_cli(*args)
    assert refused.returncode == 1
    assert "differs" in refused.stderr and "--force" in refused.stderr
    assert unit.read_text().endswith("Nice=5\n")

    assert run_cli(*args, "--force").returncode == 0
    assert not unit.read_text().endswith("Nice=5\n")


def test_an_installation_under_home_gets_protecthome_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/home/alice/venv/bin/python")
    rendered = service.render(user=False, notify_reload=False)
    assert "\nProtectHome=read-only\n" in rendered.unit
    assert EXEC_START.findall(rendered.unit) == ["/home/alice/venv/bin/python -m gatewayd run"]
    assert any("/home/alice/venv/bin" in note for note in rendered.notes)


def test_exec_start_words_are_quoted_for_systemd() -> None:
    assert service.systemd_quote("/opt/gatewayd/bin/gatewayd") == "/opt/gatewayd/bin/gatewayd"
    assert service.systemd_quote("/srv/my apps/50%/python") == '"/srv/my apps/50%%/python"'


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_the_system_unit_scores_ok_and_the_rendered_unit_verifies(
    tmp_path: Path, run_cli: RunCli
) -> None:
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(SYSTEM_UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", security.stdout)
    assert match, security.stdout[-2000:] + security.stderr
    assert float(match.group(1)) <= 2.0, match.group(0)

    assert run_cli("install-service", "--unit-dir", str(tmp_path)).returncode == 0
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / "gatewayd.service")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr


def test_the_dockerfile_is_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run(
        [hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
