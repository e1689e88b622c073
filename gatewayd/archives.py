"""Unpacking a hook archive (``.tar.gz``, ``.tgz``, ``.zip``) without trusting it.

Every member is checked *before* anything is extracted, and one bad member refuses the whole
archive, naming it: an absolute path, a ``..`` component, a symlink or hard link, a device file
or FIFO (anything but regular files and directories), an encrypted zip member, or an archive
over :data:`MAX_MEMBERS` members or :data:`MAX_BYTES` unpacked bytes. Only then are the members
written into an empty directory the caller owns: tar archives through ``tarfile``'s ``data``
filter (a second line of defence: it re-checks paths and links and drops set-uid and
group/other-write bits), zip members one by one with the same checks already done, keeping only
an executable bit from their Unix mode (so a command hook stays runnable).

:func:`extract` raises :class:`ArchiveError` carrying every problem found.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Final

MAX_MEMBERS: Final = 10_000
MAX_BYTES: Final = 256 << 20
"""Limits on what one hook archive may unpack to (a hook is a few small files)."""
ARCHIVE_SUFFIXES: Final = (".tar.gz", ".tgz", ".zip")
MAX_REPORTED: Final = 20


class ArchiveError(ValueError):
    """An archive refused or unreadable; ``problems`` holds one line per offending member."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def is_archive(path: Path) -> bool:
    """True when ``path``'s name ends in one of :data:`ARCHIVE_SUFFIXES` (any case)."""
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _path_problem(name: str, separators: str = "/") -> str | None:
    """Why a member name cannot be extracted as a relative path, or None."""
    if not name or "\0" in name:
        return "has an empty or NUL-containing name"
    normalized = name
    for sep in separators[1:]:
        normalized = normalized.replace(sep, "/")
    if normalized.startswith("/") or (len(normalized) > 1 and normalized[1] == ":"):
        return "has an absolute path"
    if ".." in PurePosixPath(normalized).parts:
        return "has a '..' component (it would land outside the extraction directory)"
    return None


def _refuse(archive: Path, problems: list[str]) -> ArchiveError:
    shown = problems[:MAX_REPORTED]
    if len(problems) > MAX_REPORTED:
        shown.append(f"... and {len(problems) - MAX_REPORTED} more")
    return ArchiveError([f"{archive.name}: {p}" for p in shown])


def _check_totals(count: int, size: int) -> list[str]:
    problems = []
    if count > MAX_MEMBERS:
        problems.append(f"has {count} members; a hook archive may hold at most {MAX_MEMBERS}")
    if size > MAX_BYTES:
        problems.append(f"unpacks to {size} bytes; a hook archive may hold at most {MAX_BYTES}")
    return problems


def _tar_kind(member: tarfile.TarInfo) -> str | None:
    """What makes a tar member unacceptable, or None for a regular file or directory."""
    if member.issym():
        return f"is a symlink (to {member.linkname!r}); archives may not contain links"
    if member.islnk():
        return f"is a hard link (to {member.linkname!r}); archives may not contain links"
    if member.ischr() or member.isblk():
        return "is a device file"
    if member.isfifo():
        return "is a FIFO"
    if not (member.isfile() or member.isdir()):
        return f"has an unsupported type ({member.type!r})"
    return None


def _duplicates(names: list[str]) -> list[str]:
    seen: set[tuple[str, ...]] = set()
    problems = []
    for name in names:
        parts = tuple(p for p in PurePosixPath(name.replace("\\", "/")).parts if p != ".")
        if parts and parts in seen:
            problems.append(f"member {name!r} appears more than once")
        seen.add(parts)
    return problems


def _extract_tar(archive: Path, dest: Path) -> None:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members: list[tarfile.TarInfo] = []
            for member in tar:  # streamed, so a huge archive is refused without a full read
                members.append(member)
                if len(members) > MAX_MEMBERS:
                    raise _refuse(archive, _check_totals(len(members), 0))
            problems = []
            for member in members:
                problem = _path_problem(member.name) or _tar_kind(member)
                if problem:
                    problems.append(f"member {member.name!r} {problem}")
            problems += _duplicates([m.name for m in members])
            problems += _check_totals(len(members), sum(m.size for m in members if m.isfile()))
            if problems:
                raise _refuse(archive, problems)
            tar.extractall(dest, members=members, filter="data")
    except tarfile.FilterError as exc:
        raise ArchiveError([f"{archive.name}: refused by tarfile's data filter: {exc}"]) from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError([f"{archive.name}: not a readable .tar.gz archive: {exc}"]) from None


def _zip_mode(info: zipfile.ZipInfo) -> int:
    """The Unix file mode stored in a zip member (0 when it was made elsewhere)."""
    return (info.external_attr >> 16) & 0xFFFF if info.create_system == 3 else 0


def _zip_kind(info: zipfile.ZipInfo) -> str | None:
    mode = _zip_mode(info)
    kind = stat.S_IFMT(mode)
    if stat.S_ISLNK(mode):
        return "is a symlink; archives may not contain links"
    if kind and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "is a device file, FIFO or socket" if kind != stat.S_IFSOCK else "is a socket"
    if info.flag_bits & 0x1:
        return "is encrypted"
    return None


def _extract_zip(archive: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            problems = []
            for info in infos:
                problem = _path_problem(info.filename, "/\\") or _zip_kind(info)
                if problem:
                    problems.append(f"member {info.filename!r} {problem}")
            problems += _duplicates([i.filename for i in infos])
            problems += _check_totals(len(infos), sum(i.file_size for i in infos))
            if problems:
                raise _refuse(archive, problems)
            for info in infos:
                target = dest.joinpath(*PurePosixPath(info.filename.replace("\\", "/")).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                executable = _zip_mode(info) & 0o111
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                    while chunk := src.read(1 << 16):
                        out.write(chunk)
                os.chmod(target, 0o755 if executable else 0o644)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise ArchiveError([f"{archive.name}: not a readable .zip archive: {exc}"]) from None


def extract(archive: Path, dest: Path) -> None:
    """Check every member of ``archive`` and, if all are acceptable, unpack it into ``dest``
    (an existing empty directory). Raises :class:`ArchiveError`; when the members are refused,
    nothing has been written."""
    if not archive.is_file():
        raise ArchiveError([f"{archive}: not a file"])
    if archive.name.lower().endswith(".zip"):
        _extract_zip(archive, dest)
    else:
        _extract_tar(archive, dest)
