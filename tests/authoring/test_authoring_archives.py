"""Archive safety: every hostile member is refused, named, and nothing is written.

``extract()`` is called directly on real archives for every attack (fast), and a few attacks go
through the real ``gatewayd hooks install`` to show that the state dir stays untouched.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import gatewayd.archives
from gatewayd.archives import ArchiveError, extract
from tests.support.archives import make_tar, make_zip, tar_member, tree
from tests.support.cli import RunCli, refused
from tests.support.hooks import hook_files

GOOD = hook_files("good")
Attack = Callable[[Path], Path]


def tar_with(*members: tarfile.TarInfo) -> Attack:
    return lambda path: make_tar(path / "evil.tar.gz", GOOD, extra=members)


TAR_ATTACKS: dict[str, tuple[Attack, str]] = {
    "absolute": (
        tar_with(tar_member("/tmp/evil.txt", tarfile.REGTYPE, size=4)),
        "member '/tmp/evil.txt' has an absolute path",
    ),
    "dotdot": (
        tar_with(tar_member("../evil.txt", tarfile.REGTYPE, size=4)),
        "member '../evil.txt' has a '..' component",
    ),
    "nested-dotdot": (
        tar_with(tar_member("lib/../../evil.txt", tarfile.REGTYPE, size=4)),
        "member 'lib/../../evil.txt' has a '..' component",
    ),
    "symlink": (
        tar_with(tar_member("data", tarfile.SYMTYPE, linkname="/etc/passwd")),
        "member 'data' is a symlink (to '/etc/passwd')",
    ),
    "relative-symlink": (
        tar_with(tar_member("data", tarfile.SYMTYPE, linkname="handler.py")),
        "member 'data' is a symlink",
    ),
    "hardlink": (
        tar_with(tar_member("copy.py", tarfile.LNKTYPE, linkname="handler.py")),
        "member 'copy.py' is a hard link (to 'handler.py')",
    ),
    "char-device": (
        tar_with(tar_member("null", tarfile.CHRTYPE)),
        "member 'null' is a device file",
    ),
    "block-device": (
        tar_with(tar_member("disk", tarfile.BLKTYPE)),
        "member 'disk' is a device file",
    ),
    "fifo": (tar_with(tar_member("pipe", tarfile.FIFOTYPE)), "member 'pipe' is a FIFO"),
    "duplicate": (
        tar_with(tar_member("handler.py", tarfile.REGTYPE, size=4)),
        "member 'handler.py' appears more than once",
    ),
}

ZIP_ATTACKS: dict[str, tuple[Attack, str]] = {
    "zip-symlink": (
        lambda p: make_zip(p / "evil.zip", GOOD, symlinks={"data": "/etc/passwd"}),
        "member 'data' is a symlink",
    ),
    "zip-absolute": (
        lambda p: make_zip(p / "evil.zip", GOOD, raw_names={"/tmp/evil.txt": "x"}),
        "member '/tmp/evil.txt' has an absolute path",
    ),
    "zip-dotdot": (
        lambda p: make_zip(p / "evil.zip", GOOD, raw_names={"../evil.txt": "x"}),
        "member '../evil.txt' has a '..' component",
    ),
    "zip-backslash-dotdot": (
        lambda p: make_zip(p / "evil.zip", GOOD, raw_names={"..\\evil.txt": "x"}),
        "has a '..' component",
    ),
    "zip-drive": (
        lambda p: make_zip(p / "evil.zip", GOOD, raw_names={"C:\\evil.txt": "x"}),
        "has an absolute path",
    ),
}


@pytest.mark.parametrize("attack", sorted(TAR_ATTACKS) + sorted(ZIP_ATTACKS))
def test_extract_refuses_before_writing(tmp_path: Path, attack: str) -> None:
    build, message = {**TAR_ATTACKS, **ZIP_ATTACKS}[attack]
    archive = build(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ArchiveError) as info:
        extract(archive, dest)
    assert any(message in problem for problem in info.value.problems), info.value.problems
    assert all(problem.startswith(f"{archive.name}: ") for problem in info.value.problems)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def test_zip_device_mode_is_refused(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "dev.zip", GOOD)
    with zipfile.ZipFile(archive, "a") as zf:
        info = zipfile.ZipInfo("null")
        info.create_system = 3
        info.external_attr = (stat.S_IFCHR | 0o666) << 16
        zf.writestr(info, b"")
    with pytest.raises(ArchiveError, match="member 'null' is a device file"):
        extract(archive, tmp_path)


def test_member_and_size_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {**GOOD, "a.txt": "x" * 100, "b.txt": "y" * 100}
    tar = make_tar(tmp_path / "big.tgz", files)
    zipped = make_zip(tmp_path / "big.zip", files)
    monkeypatch.setattr(gatewayd.archives, "MAX_MEMBERS", 3)
    for archive in (tar, zipped):
        with pytest.raises(ArchiveError, match="has 4 members; a hook archive may hold at most 3"):
            extract(archive, tmp_path / "out")
    monkeypatch.setattr(gatewayd.archives, "MAX_MEMBERS", 10)
    monkeypatch.setattr(gatewayd.archives, "MAX_BYTES", 150)
    for archive in (tar, zipped):
        with pytest.raises(ArchiveError, match=r"unpacks to .* bytes; .* at most 150"):
            extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_clean_archive_unpacks(tmp_path: Path) -> None:
    for archive in (make_tar(tmp_path / "ok.tgz", GOOD), make_zip(tmp_path / "ok.zip", GOOD)):
        dest = tmp_path / archive.name.replace(".", "-")
        dest.mkdir()
        extract(archive, dest)
        assert {k: v[1] for k, v in tree(dest).items()} == {k: v.encode() for k, v in GOOD.items()}


@pytest.mark.parametrize("attack", ["dotdot", "char-device", "hardlink", "zip-symlink"])
def test_install_refuses_hostile_archives(
    run_cli: RunCli, state_dir: Path, tmp_path: Path, attack: str
) -> None:
    build, message = {**TAR_ATTACKS, **ZIP_ATTACKS}[attack]
    archive = build(tmp_path)
    before = tree(state_dir)
    refused(run_cli("hooks", "install", str(archive)), message, "(nothing was installed)")
    assert tree(state_dir) == before
    assert not (state_dir / "hooks").exists()
