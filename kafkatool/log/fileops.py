"""Every file operation of the storage engine that changes a directory goes through here.

One place for "write aside, fsync, rename, fsync the directory" (checkpoints,
rebuilt indexes, recovery output), and one place where a test can inject a
fault: :func:`fault_point` is called *before* each operation with its name and
path.  A hook may raise (the operation then never happens) or kill the process
(a real crash between two steps).  Production code never installs a hook.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

FaultHook = Callable[[str, Path], None]

_hooks: list[FaultHook] = []


def fault_point(op: str, path: str | os.PathLike) -> None:
    """Called before each mutating file operation (``op`` names it)."""
    for hook in list(_hooks):
        hook(op, Path(path))


@contextlib.contextmanager
def fault_hook(hook: FaultHook) -> Iterator[None]:
    """Install ``hook`` for the duration of the block (tests and crash drills)."""
    _hooks.append(hook)
    try:
        yield
    finally:
        _hooks.remove(hook)


def fsync_dir(path: str | os.PathLike) -> None:
    """Make renames and creations inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a file written earlier without sync (a missing file is nothing to do)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tmp_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.with_name(p.name + ".tmp")


def atomic_write(
    path: str | os.PathLike,
    data: bytes | bytearray | memoryview,
    *,
    sync: bool = True,
    mode: int = 0o644,
) -> None:
    """Replace ``path`` with ``data``: write ``<name>.tmp``, fsync, rename, fsync the directory.

    A crash leaves either the old file or the new one (and maybe a stray .tmp).  ``mode``
    (less the umask) is the new file's permissions: commands' output files that may hold
    secrets (a ZooKeeper dump) are 0o600.
    """
    path = Path(path)
    tmp = tmp_path(path)
    fault_point("write", tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            fault_point("fsync", tmp)
            os.fsync(fd)
    finally:
        os.close(fd)
    replace(tmp, path, sync=sync)


def write_in_place(
    path: str | os.PathLike, data: bytes | bytearray | memoryview, *, sync: bool = True
) -> None:
    """Write ``path`` where it is: overwrite from the start (or create), cut what is left of a
    longer old file, fdatasync; the directory is fsynced only for a new file (an overwrite of
    the same size changes no directory entry and no block map).

    For files whose own checksum shows a torn write, which their reader then drops:
    producer snapshots, as Kafka's ProducerStateManager.writeSnapshot writes them.  A crash
    may leave the file torn (the loader deletes it and rebuilds from an older snapshot and
    the log), never a wrong one.
    """
    path = Path(path)
    fault_point("write", path)
    try:
        fd = os.open(path, os.O_WRONLY)
        created = False
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        created = True
    try:
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            pos += os.pwrite(fd, view[pos:], pos)
        if not created and os.fstat(fd).st_size > pos:
            os.ftruncate(fd, pos)
        if sync:
            fault_point("fsync", path)
            os.fdatasync(fd)
    finally:
        os.close(fd)
    if sync and created:
        fsync_dir(path.parent)


def replace(src: str | os.PathLike, dst: str | os.PathLike, *, sync: bool = True) -> None:
    """Atomic rename (overwrites ``dst``), then fsync of the destination directory."""
    fault_point("rename", dst)
    os.replace(src, dst)
    if sync:
        fsync_dir(Path(dst).parent)


def rename(src: str | os.PathLike, dst: str | os.PathLike, *, sync: bool = True) -> None:
    """Rename that refuses to overwrite an existing ``dst``."""
    if os.path.lexists(dst):
        raise FileExistsError(17, "refusing to overwrite", str(dst))
    replace(src, dst, sync=sync)


def delete(path: str | os.PathLike, *, missing_ok: bool = True) -> None:
    fault_point("delete", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def truncate(path: str | os.PathLike, size: int, *, sync: bool = True) -> None:
    """Cut a file to ``size`` bytes and make that durable."""
    fault_point("truncate", path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def mkdir(path: str | os.PathLike) -> None:
    path = Path(path)
    if path.is_dir():
        return
    fault_point("mkdir", path)
    path.mkdir(parents=True, exist_ok=True)
    fsync_dir(path.parent)


def copy_range(src: str | os.PathLike, start: int, end: int, dst: str | os.PathLike) -> None:
    """Copy bytes [start, end) of ``src`` into a new file ``dst`` (written aside, fsynced, renamed)."""
    dst = Path(dst)
    tmp = tmp_path(dst)
    fault_point("write", tmp)
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        fin.seek(start)
        left = end - start
        while left > 0:
            chunk = fin.read(min(left, 1 << 20))
            if not chunk:
                break
            fout.write(chunk)
            left -= len(chunk)
        fout.flush()
        fault_point("fsync", tmp)
        os.fsync(fout.fileno())
    rename(tmp, dst)
