"""The ``.lock`` file of a log dir, compatible with a running Kafka broker.

Kafka's FileLock calls ``FileChannel.tryLock()``, which on Linux is a POSIX
record lock (``fcntl(F_SETLK)``), not ``flock``: the two kinds do not see each
other on Linux, so a tool that used ``flock`` would happily open a dir a live
broker holds.  We use ``fcntl.lockf`` (POSIX) for the same reason.

POSIX locks belong to the process, and closing *any* descriptor of the file
drops them all; so a process must never probe a lock it holds.  Locks taken
here are remembered in ``_held`` and probes of those dirs answer "not locked
by another process" without touching the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from kafkatool.errors import KafkatoolError

LOCK_FILE = ".lock"

_held: dict[Path, int] = {}


class LogDirLockedError(KafkatoolError, OSError):
    """The log dir's ``.lock`` is held by another process (a running broker, or another tool)."""

    def __init__(self, log_dir: str | os.PathLike):
        super().__init__(
            errno.EWOULDBLOCK,
            "log dir is locked by a running process (a Kafka broker or another kafkatool); "
            "stop it before modifying this dir",
            str(log_dir),
        )
        self.log_dir = Path(log_dir)


def _key(log_dir: str | os.PathLike) -> Path:
    return Path(log_dir).resolve()


def is_locked(log_dir: str | os.PathLike) -> bool:
    """True when another process holds ``<log_dir>/.lock`` (a non-blocking probe)."""
    key = _key(log_dir)
    if key in _held:
        return False
    path = key / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR)
        kind = fcntl.LOCK_EX
    except FileNotFoundError:
        return False
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)
        kind = fcntl.LOCK_SH  # a shared lock still conflicts with the broker's exclusive one
    try:
        try:
            fcntl.lockf(fd, kind | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def held_here(log_dir: str | os.PathLike) -> bool:
    """True when this process holds ``<log_dir>/.lock``."""
    return _key(log_dir) in _held


def acquire(log_dir: str | os.PathLike) -> None:
    """Take ``<log_dir>/.lock`` (created if missing) or raise LogDirLockedError."""
    key = _key(log_dir)
    if key in _held:
        raise LogDirLockedError(log_dir)
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise LogDirLockedError(log_dir) from None
        raise
    _held[key] = fd


def release(log_dir: str | os.PathLike) -> None:
    fd = _held.pop(_key(log_dir), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def locked(log_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold the log dir's lock for a modifying tool."""
    acquire(log_dir)
    try:
        yield Path(log_dir)
    finally:
        release(log_dir)
