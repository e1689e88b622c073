"""Real archives and directory trees for the install, link and archive tests.

* :func:`write_tree`: files from ``{relative path: content}`` with exact modes.
* :func:`make_tar` / :func:`make_zip`: real archives from ``{name: content}`` plus hand-made
  members (symlinks, hard links, device files) that ``tarfile``/``zipfile`` would never produce
  from a normal directory (:func:`tar_member`).
* :func:`tree`: a directory's files and modes, to compare "before" and "after" exactly.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def write_tree(
    root: Path, files: Mapping[str, str | bytes], executable: Iterable[str] = ()
) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        path.chmod(0o755 if rel in set(executable) else 0o644)
    return root


def _tar_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def make_tar(
    path: Path,
    files: Mapping[str, str],
    *,
    executable: Iterable[str] = (),
    extra: Iterable[tarfile.TarInfo] = (),
) -> Path:
    """A ``.tar.gz`` with ``files`` (text), then the raw ``extra`` members."""
    exe = set(executable)
    with tarfile.open(path, "w:gz") as tar:
        for name, content in files.items():
            _tar_file(tar, name, content.encode(), 0o755 if name in exe else 0o644)
        for member in extra:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return path


def tar_member(name: str, kind: bytes, *, linkname: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = size
    info.mode = 0o644
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3  # /dev/null
    return info


def make_zip(
    path: Path,
    files: Mapping[str, str],
    *,
    executable: Iterable[str] = (),
    symlinks: Mapping[str, str] | None = None,
    raw_names: Mapping[str, str] | None = None,
) -> Path:
    """A ``.zip`` with ``files`` (Unix modes recorded), ``symlinks`` (name -> target, stored
    the way Info-ZIP stores them) and ``raw_names`` (members written under exactly that name)."""
    exe = set(executable)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in {**files, **(raw_names or {})}.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = (stat.S_IFREG | (0o755 if name in exe else 0o644)) << 16
            zf.writestr(info, content)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def tree(root: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under ``root``: relative path -> (mode, content or link target)."""
    out: dict[str, tuple[int, bytes | str]] = {}
    if not root.exists():
        return out
    for current, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(current) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = (st.st_mode, os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_mode, path.read_bytes())
            else:
                out[rel] = (st.st_mode, "")
    return out
