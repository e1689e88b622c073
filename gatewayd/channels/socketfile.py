"""The control socket's file on disk: its directory, its lock, a stale socket, bind and removal.

Nothing here speaks the protocol; :mod:`gatewayd.channels.control` asks this module for a
listening socket and hands it back at the end.

Safety: the socket is ``0600`` inside a directory created ``0700``. A lock file beside the socket
(``<socket>.lock``, ``flock``) is held for the daemon's lifetime: a second daemon is refused
instead of stealing the socket, and a socket left by a crashed daemon (lock free, nobody
listening) is replaced. Only the lock holder ever removes the socket path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
from pathlib import Path

import structlog

from gatewayd.channels import ChannelError
from gatewayd.paths import ensure_private_dir

log = structlog.get_logger("gatewayd.control")

MAX_SUN_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
BACKLOG = 128


class SocketFile:
    """The path of a Unix stream socket, the lock that makes it ours, and its directory."""

    def __init__(self, path: Path, *, private_dir: bool = False) -> None:
        """``private_dir``: the socket's directory is ours alone (the default ``<state>/run``)
        and is kept at 0700; a configured directory is created 0700 when missing, else left
        as it is (with a warning when other users can enter it)."""
        self.path = path
        self.private_dir = private_dir
        self._lock_fd: int | None = None
        self._listen_fd: int | None = None

    def fds(self) -> list[int]:
        """The lock's and the listening socket's descriptors (closed in a forked child, so a
        process a hook forks never holds the lock or the socket after the daemon is gone)."""
        return [fd for fd in (self._lock_fd, self._listen_fd) if fd is not None]

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def claim(self) -> None:
        """Check the path, create its directory and take the lock; raise :class:`ChannelError`."""
        if self._lock_fd is not None:
            return
        path = self.path
        if len(os.fsencode(path)) > MAX_SUN_PATH:
            raise ChannelError(
                f"control socket path {path} is {len(os.fsencode(path))} bytes; Unix sockets allow "
                f"{MAX_SUN_PATH}: set gateway.control.socket (or ELIZA_STATE_DIR) to a shorter path"
            )
        self._prepare_dir(path.parent)
        self._take_lock()

    def bind(self) -> socket.socket:
        """Claim, replace a stale socket, and return a non-blocking listening socket.

        On failure the lock is released and :class:`ChannelError` says what to do.
        """
        path = self.path
        self.claim()
        try:
            self._clear_stale(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(str(path))
                # The directory is 0700, so nobody else can reach the socket before this chmod.
                os.chmod(path, 0o600)
                sock.listen(BACKLOG)
                sock.setblocking(False)
                self._listen_fd = sock.fileno()
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            self.release()
            raise ChannelError(f"cannot listen on {path}: {exc.strerror or exc}") from None
        except BaseException:
            self.release()
            raise
        return sock

    def remove(self) -> None:
        """Unlink the socket path (new clients get ``ENOENT``); only while we hold the lock."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def release(self) -> None:
        """Drop the lock; the lock file stays for the next daemon."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _prepare_dir(self, directory: Path) -> None:
        try:
            ensure_private_dir(directory)  # 0700 whatever the umask
            st = directory.stat()
        except OSError as exc:
            raise ChannelError(
                f"cannot create the control socket directory {directory}: {exc.strerror or exc}"
            ) from None
        if st.st_mode & 0o077 and self.private_dir and st.st_uid == os.getuid():
            os.chmod(directory, 0o700)
        elif st.st_mode & 0o077:
            log.warning(
                "control.dir_shared",
                directory=str(directory),
                mode=oct(stat.S_IMODE(st.st_mode)),
                note="other users can see the socket; it is 0600 and peers are checked by uid",
            )

    def _take_lock(self) -> None:
        lock = self.lock_path
        # Never through a symlink (root could be made to write anywhere), never a FIFO/device.
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(lock, flags, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ChannelError(
                    f"the lock file {lock} is a symbolic link, which gatewayd never follows; "
                    "remove it"
                ) from None
            raise ChannelError(f"cannot open the lock file {lock}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ChannelError(f"the lock file {lock} is not a regular file; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ChannelError(
                    f"another gatewayd (pid {owner}) is already running on {self.path}; stop it "
                    "first, or give this one its own ELIZA_STATE_DIR or gateway.control.socket"
                ) from None
            raise ChannelError(f"cannot lock {lock}: {exc.strerror or exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _clear_stale(self, path: Path) -> None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ChannelError(
                f"{path} exists and is not a socket; remove it or set gateway.control.socket"
            )
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink(missing_ok=True)  # nobody listening: a crashed daemon's leftover
            log.info("control.stale_socket_removed", socket=str(path))
            return
        finally:
            probe.close()
        raise ChannelError(
            f"a process that holds no gatewayd lock is listening on {path}; stop it or set "
            "gateway.control.socket to another path"
        )
