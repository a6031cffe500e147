"""Index files of one segment, on disk: Kafka's OffsetIndex, TimeIndex and TransactionIndex.

The byte layouts and the trust rules live in kafkatool.formats.index; this
module owns the files.  A writable offset/time index is preallocated to its
maximum size (zero filled) and memory-mapped, exactly as Kafka does; it is
trimmed to ``entries * entry_size`` on roll, close and after recovery, and
re-grown when its segment becomes active again.  Opening an existing file
trusts every whole slot, as Kafka does (a crashed active segment is recovered,
which resets its indexes).

Lookups binary-search the map itself: no per-entry Python objects are kept,
so a broker with thousands of segments does not pay for their indexes in
memory.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from kafkatool.formats import index as fx
from kafkatool.log import fileops

_OFFSET = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


class _MappedIndex:
    entry_size = 0
    _struct: struct.Struct

    def __init__(self, path: str | os.PathLike, base_offset: int, max_index_size: int, *, writable: bool):
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size // self.entry_size * self.entry_size
        self.writable = writable
        self._fd = -1
        self._mm: mmap.mmap | None = None
        self._length = 0
        if writable:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(self._fd).st_size
            self.entries = size // self.entry_size
            self._map(size)
        else:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self.entries = 0
                return
            size = os.fstat(self._fd).st_size
            self.entries = size // self.entry_size
            self._map(size)

    # --- mapping
    def _map(self, length: int) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._length = length
        if length:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(self._fd, length, access=access)

    def resize(self, new_size: int) -> None:
        """Set the file length (rounded down to whole entries, never below the entries held)."""
        if not self.writable:
            raise OSError(f"{self.path}: index opened read-only")
        rounded = max(new_size // self.entry_size * self.entry_size, self.entries * self.entry_size)
        if rounded == self._length and os.fstat(self._fd).st_size == rounded:
            return
        if self._mm is not None:
            self._mm.flush()
            self._mm.close()
            self._mm = None
        os.ftruncate(self._fd, rounded)
        self._map(rounded)

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.entry_size)

    def grow_to_max(self) -> None:
        self.resize(self.max_index_size)

    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    @property
    def file_size(self) -> int:
        return self._length

    def is_full(self) -> bool:
        return fx.offset_index_is_full(self.entries, self.max_entries)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from the log)."""
        self.entries = 0
        if self.writable:
            self.resize(0)
            self.grow_to_max()

    def _append_raw(self, packed: bytes) -> None:
        pos = self.entries * self.entry_size
        if self._mm is None or pos + self.entry_size > self._length:
            self.resize(max(self.max_index_size, pos + self.entry_size))
        self._mm[pos : pos + self.entry_size] = packed
        self.entries += 1

    def _entry(self, i: int) -> tuple:
        return self._struct.unpack_from(self._mm, i * self.entry_size)

    def flush(self) -> None:
        if self._mm is not None and self.writable:
            self._mm.flush()

    def close(self, *, trim: bool = True) -> None:
        if self.writable and trim and self._fd >= 0:
            self.trim_to_valid_size()
        if self._mm is not None:
            if self.writable:
                self._mm.flush()
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, new_path: Path) -> None:
        if self.path.exists():
            fileops.replace(self.path, new_path, sync=False)
        self.path = Path(new_path)


class OffsetIndex(_MappedIndex):
    entry_size = fx.OFFSET_ENTRY_SIZE
    _struct = _OFFSET

    @property
    def last_offset(self) -> int:
        if not self.entries:
            return self.base_offset
        return self.base_offset + self._entry(self.entries - 1)[0]

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_offset:
            raise fx.FormatError(
                f"attempt to append offset {offset} to the offset index at slot {self.entries}, "
                f"no larger than the last offset {self.last_offset}",
                self.entries * self.entry_size,
                kind="invalid_offset",
            )
        if self.is_full():
            raise fx.FormatError(f"offset index {self.path} is full", kind="index_full")
        self._append_raw(_OFFSET.pack(fx.relative_offset(self.base_offset, offset), position))

    def entry(self, i: int) -> fx.OffsetPosition:
        rel, pos = self._entry(i)
        return fx.OffsetPosition(self.base_offset + rel, pos)

    def entries_list(self) -> list[fx.OffsetPosition]:
        return [self.entry(i) for i in range(self.entries)]

    def lookup(self, target_offset: int) -> fx.OffsetPosition:
        """Greatest entry with offset <= target, else (base offset, 0)."""
        rel_target = target_offset - self.base_offset
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid)[0] <= rel_target:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo - 1) if lo else fx.OffsetPosition(self.base_offset, 0)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """First indexed offset whose position is past ``start_position + fetch_size``."""
        target = start_position + fetch_size
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid)[1] <= target:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo).offset if lo < self.entries else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        rel = offset - self.base_offset
        keep = 0
        while keep < self.entries and self._entry(keep)[0] < rel:
            keep += 1
        self.entries = keep


class TimeIndex(_MappedIndex):
    entry_size = fx.TIME_ENTRY_SIZE
    _struct = _TIME

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._last = self._read_last()

    def _read_last(self) -> fx.TimestampOffset:
        if not self.entries:
            return fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)
        ts, rel = self._entry(self.entries - 1)
        return fx.TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> fx.TimestampOffset:
        return self._last

    def is_full(self) -> bool:
        return fx.time_index_is_full(self.entries, self.max_entries)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Kafka's TimeIndex.maybeAppend: only a strictly larger timestamp is written."""
        if not skip_full_check and self.is_full():
            raise fx.FormatError(f"time index {self.path} is full", kind="index_full")
        if self.entries and offset < self._last.offset:
            raise fx.FormatError(
                f"attempt to append offset {offset} to the time index, smaller than {self._last.offset}",
                kind="invalid_offset",
            )
        if timestamp > self._last.timestamp:
            self._append_raw(_TIME.pack(timestamp, fx.relative_offset(self.base_offset, offset)))
            self._last = fx.TimestampOffset(timestamp, offset)
            return True
        return False

    def entry(self, i: int) -> fx.TimestampOffset:
        ts, rel = self._entry(i)
        return fx.TimestampOffset(ts, self.base_offset + rel)

    def entries_list(self) -> list[fx.TimestampOffset]:
        return [self.entry(i) for i in range(self.entries)]

    def lookup(self, target_timestamp: int) -> fx.TimestampOffset:
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid)[0] <= target_timestamp:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo - 1) if lo else fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)

    def reset(self) -> None:
        super().reset()
        self._last = fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        rel = offset - self.base_offset
        keep = 0
        while keep < self.entries and self._entry(keep)[1] < rel:
            keep += 1
        self.entries = keep
        self._last = self._read_last()


class TransactionIndex:
    """The ``.txnindex``: not preallocated, created on the first aborted transaction."""

    def __init__(self, path: str | os.PathLike, base_offset: int, *, writable: bool):
        self.path = Path(path)
        self.base_offset = base_offset
        self.writable = writable
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        self.entries: list[fx.AbortedTxn] = fx.decode_txn_entries(data)
        # Kafka's reader ignores a trailing partial entry; appends go after the whole ones.
        self._size = len(self.entries) * fx.TXN_ENTRY_SIZE

    def append(self, txn: fx.AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise fx.FormatError(
                f"the last offset {txn.last_offset} of an appended aborted transaction is not larger "
                f"than the previous {self.entries[-1].last_offset}",
                kind="invalid_offset",
            )
        data = fx.encode_txn_index([txn])
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, self._size)
        finally:
            os.close(fd)
        self._size += len(data)
        self.entries.append(txn)

    def reset(self) -> None:
        self.entries = []
        self._size = 0
        if self.path.exists():
            fileops.truncate(self.path, 0, sync=False)

    def truncate_to(self, offset: int) -> None:
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._size = len(keep) * fx.TXN_ENTRY_SIZE
            if self.path.exists():
                fileops.truncate(self.path, self._size, sync=False)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> tuple[list[fx.AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound); True when the search may stop here."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def flush(self) -> None:
        if self.path.exists() and self.writable:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        pass

    def rename_to(self, new_path: Path) -> None:
        if self.path.exists():
            fileops.replace(self.path, new_path, sync=False)
        self.path = Path(new_path)
