"""Writing files so that nothing written is lost or torn (the one atomic-write helper), and
reading a file that must be a regular one.

* :func:`atomic_write` replaces a whole file: the new content goes to a temporary file beside it
  (created ``O_EXCL | O_NOFOLLOW``), every byte is written (a short write is continued, a write
  that makes no progress is ``ENOSPC``), the file is fsynced, given the old file's mode (and,
  when run as root, its owner), renamed over the old one, and the directory is fsynced. If any
  step fails (a full disk, a quota) the temporary file is removed and the old file is intact.
* :func:`write_all` writes a whole buffer to a descriptor, never silently stopping short.
* :func:`append_whole` appends bytes to an open ``O_APPEND`` descriptor all or nothing: a failed
  write (a full disk) truncates back to where it began, leaving no torn line behind.
* :func:`trim_torn_tail` cuts an unterminated last line (a writer killed mid-line) off a
  line-oriented file before anything is appended after it.

* :func:`read_regular` reads a file gatewayd expects to be a regular file (config, ``HOOK.md``,
  bootstrap files) without ever blocking on a FIFO or reading a device or an endless file.

Blocking calls: from async code, run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

TYPE_CHECKING = False  # typing's, without importing typing or pathlib at run time (see store.py)
if TYPE_CHECKING:
    from pathlib import Path

TAIL_CHUNK = 64 * 1024


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``; raise ``OSError(ENOSPC)`` if a write stalls."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # a regular file returns 0 only when it cannot take more
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    """Make the entries of ``directory`` durable (a file created or renamed in it)."""
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(
    path: Path,
    data: bytes | str,
    *,
    mode: int = 0o600,
    keep_mode: bool = True,
    keep_owner: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically (see the module docstring); raise ``OSError``.

    The new file gets the existing file's permission bits when ``keep_mode`` (else ``mode``,
    which is also used for a new file). With ``keep_owner``, a process running as root keeps the
    existing file's owner and group, so ``sudo gatewayd ...`` does not take a daemon user's file
    away from it. A symlink at ``path`` is replaced by the file, never followed.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = path.parent
    try:
        old: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        old = None  # a symlink or special file is replaced, and lends nothing
    new_mode = stat.S_IMODE(old.st_mode) if (old is not None and keep_mode) else mode
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for attempt in range(100):
        tmp = directory / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            if attempt == 99:
                raise
    try:
        try:
            write_all(fd, payload)
            os.fchmod(fd, new_mode)
            owner = (old.st_uid, old.st_gid) if old is not None else (0, 0)
            if keep_owner and os.geteuid() == 0 and owner != (0, 0):
                os.fchown(fd, *owner)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def append_whole(fd: int, data: bytes, size: int | None = None) -> None:
    """Append ``data`` to the ``O_APPEND`` descriptor ``fd`` whole, or not at all.

    If the write fails part-way (``ENOSPC``, ``EDQUOT``, ``EIO``) the file is truncated back to
    its size before the call (``size``, when the caller knows it; else an ``fstat``) and the
    error is raised.
    """
    if size is None:
        size = os.fstat(fd).st_size
    try:
        write_all(fd, data)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


TORN_SCAN = 16 * 1024 * 1024
"""How far back :func:`trim_torn_tail` looks for the last newline. Unbounded, a large file with
none (a sparse 8 GiB one: 18 s) was read whole on the event loop at a transcript's first append,
which froze the daemon meanwhile; this bound reads at most ~35 ms of it."""


def trim_torn_tail(fd: int) -> int:
    """Cut an unterminated last line off the file open (read/write, ``O_APPEND``) on ``fd``.

    Returns the number of bytes removed (0 when the file is empty or ends with a newline). A
    last line longer than :data:`TORN_SCAN` is not one a writer tore: it is ended with a newline
    instead (nothing removed), so that the next line starts on its own.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    end, floor = size, max(0, size - TORN_SCAN)
    while end > floor:
        start = max(floor, end - TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            keep = start + cut + 1
            break
        end = start
    else:
        if floor:
            write_all(fd, b"\n")
            return 0
        keep = 0
    os.ftruncate(fd, keep)
    return size - keep


class NotRegularFile(OSError):
    """A path that is a FIFO, device, socket or directory, or a file over the size limit."""


def not_regular(path: str | os.PathLike[str], mode: int) -> str | None:
    """Why ``path``, whose ``st_mode`` is ``mode``, is not a regular file; None when it is."""
    if stat.S_ISREG(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, device or socket"
    return f"{os.fspath(path)} is {kind}, not a regular file"


def read_regular(path: str | os.PathLike[str], limit: int, *, head: bool = False) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (with ``head``:
    its first ``limit`` bytes, whatever its size).

    The file is opened non-blocking (opening a FIFO would wait for a writer) and checked on the
    descriptor, so a FIFO, a device (``/dev/zero`` behind a symlink included) or a socket raises
    :class:`NotRegularFile` without a single read; so does a file over ``limit``.
    ``FileNotFoundError`` and other ``OSError`` pass through.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if (why := not_regular(path, st.st_mode)) is not None:
            raise NotRegularFile(why)
        # one byte more tells a file over the limit
        data = read_fd(fd, st.st_size, limit if head else limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotRegularFile(f"{os.fspath(path)} is larger than {limit} bytes")
    return data


def read_fd(fd: int, size: int, want: int = sys.maxsize) -> bytes:
    """At most ``want`` bytes from ``fd`` up to its end; ``size`` is what ``fstat`` said of it.

    Reads sized from that, doubling while the file grows: ``os.read(fd, n)`` allocates ``n``
    bytes first, and a fixed 1 MiB request made each small file's read cost heap growth and page
    faults (~400 page faults in a cold load of 1,000 hooks, for the end-of-file read alone)."""
    chunks: list[bytes] = []
    got = 0
    step = size + 1
    while got < want:
        chunk = os.read(fd, min(step, want - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        step = min(step * 2, 1 << 20)
    return b"".join(chunks)


def rotate(path: Path, backups: int) -> None:
    """Shift ``path.N-1`` -> ``path.N`` ... ``path`` -> ``path.1``, dropping the oldest; with no
    backups, ``path`` is removed."""
    if backups == 0:
        path.unlink(missing_ok=True)
        return
    for n in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
    os.replace(path, path.with_name(f"{path.name}.1"))
