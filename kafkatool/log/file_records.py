"""Reading a ``.log`` file: Kafka's FileRecords, read side.

The file is memory-mapped read-only; batches are parsed lazily from the map
(see kafkatool.formats.records).  The broker's segments, ``dump-log``,
``verify``, recovery and the fleet scan all read segment bytes through here.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkatool.errors import KafkatoolError
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"


def offset_from_file_name(path: str | os.PathLike) -> int | None:
    """Kafka parses the offset from the file name up to the first '.'; None if not a number."""
    name = os.path.basename(path)
    head = name.split(".", 1)[0]
    if not head.isdigit():
        return None
    return int(head)


def file_name_for_offset(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def all_zero_from(view, start: int) -> bool:
    """True when ``view`` has bytes from ``start`` on and all of them are zero."""
    tail = view[start:]
    if not len(tail):
        return False
    # compare in chunks to avoid copying a whole preallocated gigabyte
    chunk = 1 << 20
    zeros = bytes(chunk)
    for i in range(0, len(tail), chunk):
        part = tail[i : i + chunk]
        if part != zeros[: len(part)]:
            return False
    return True


class NotRegularFileError(KafkatoolError, OSError):
    """A path named like a Kafka file that is a FIFO, socket, device or dangling link:
    reading it could block forever, and Kafka's loader ignores it."""


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def non_regular_reason(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a regular file (None if it is): the one test every reader and
    every directory walk uses before opening a file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return "a dangling symbolic link"
        raise
    return None if stat.S_ISREG(st.st_mode) else _file_kind(st.st_mode)


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY) -> int:
    """``os.open`` for a file that must be a regular file; never blocks on a FIFO."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                errno.EINVAL, f"{_file_kind(mode)}, not a regular file: refused", str(path)
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike) -> bytes:
    """The whole content of a regular file (refusing FIFOs and other special files): one
    descriptor, no buffered file object (the loader reads a few small files per partition)."""
    fd = open_regular(path)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


class FileRecords:
    """A read-only view of a ``.log`` file (or any file of concatenated batches)."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int | None = None):
        self.path = Path(path)
        self._fd = open_regular(self.path)
        try:
            self.file_size = os.fstat(self._fd).st_size
            size = self.file_size if max_bytes is None else min(self.file_size, max_bytes)
            self._mmap = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) if self.file_size else None
        except BaseException:
            os.close(self._fd)
            raise
        self.size = size
        self.buf: memoryview = memoryview(self._mmap)[:size] if self._mmap is not None else memoryview(b"")

    def close(self) -> None:
        self.buf = memoryview(b"")
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                # A batch or record view still points into the map: leave the
                # unmapping to the garbage collector rather than fail.
                pass
            self._mmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileRecords:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def batches(self, start: int = 0) -> Iterator[R.Batch]:
        """Batches from byte ``start`` until the data ends.  An impossible entry raises
        FormatError (position = file byte); a partial tail just ends the iteration."""
        return R.iter_batches(self.buf, start)

    def scan(self, start: int = 0) -> ScanResult:
        """Walk every batch header from ``start``; report where the readable data ends and why."""
        pos = start
        count = 0
        try:
            for batch in R.iter_batches(self.buf, start):
                count += 1
                pos = batch.end
        except FormatError as exc:
            return ScanResult(count, pos, exc)
        return ScanResult(count, pos, None)

    def find_next_valid_batch(self, start: int) -> R.Batch | None:
        return R.find_next_valid_batch(self.buf, start)

    def tail_is_zeros(self, start: int) -> bool:
        """True when every byte from ``start`` to the end is zero (a preallocated tail)."""
        return all_zero_from(self.buf, start)


@dataclass
class ScanResult:
    batches: int
    valid_end: int  # byte position after the last readable entry
    error: FormatError | None  # why the scan stopped early, if it did
