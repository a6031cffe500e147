"""Index files of one segment, on disk: Kafka's OffsetIndex, TimeIndex and TransactionIndex.

The byte layouts and the trust rules live in kafkatool.formats.index; this
module owns the files.  A writable offset/time index is preallocated to its
maximum size (zero filled), as Kafka's is; it is trimmed to
``entries * entry_size`` on roll, close and after recovery, and re-grown when
its segment becomes active again.  Opening an existing file trusts every whole
slot, as Kafka does (a crashed active segment is recovered, which resets its
indexes).  Files are read and written with pread/pwrite, not mapped
(``_FileIndex`` says why).

Lookups binary-search the file itself (``_FileIndex._search``): no per-entry
Python objects are kept, so a broker with thousands of segments does not pay
for their indexes in memory.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from kafkatool.formats import index as fx
from kafkatool.log import fileops

_OFFSET = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


# Kafka's warm section (AbstractIndex.warmEntries): the last 8 KiB of an index, where the
# lookups of consumers at the tail and of the appender land; one read covers it.
_WARM_BYTES = 8192
#: appended entries are written to the file in runs of this many bytes (or before any read,
#: resize, flush or release): one pwrite per entry cost a quarter of the produce path's
#: throughput with 16 KiB batches (an entry per batch); an entry lost to a crash only makes
#: the index sparser, which is valid (lookups scan forward from the entry before)
_PENDING_BYTES = 512


class _FileIndex:
    """One index file, opened lazily (Kafka's LazyIndex) and read and written through one
    descriptor with pread/pwrite.

    Why not mmap, as Kafka does: a Python mmap holds a duplicate descriptor of its own
    (CPython dups the file), so a mapped index costs two descriptors; and the first store
    into a page of a preallocated (sparse) file takes the filesystem's page-fault path,
    measured at 2-13 ms on ext4 under load, on the event loop, where a pwrite of the same
    bytes takes microseconds.  A segment's index costs no descriptor until it is used; a
    writable index (the active segment's) keeps its descriptor until ``release`` (roll,
    close); any other read opens, reads and closes, so a broker holds one descriptor per
    segment (the ``.log``) plus two per active segment, however many segments are read.
    Appended entries wait in a small buffer (``_PENDING_BYTES``) and go to the file together.
    """

    entry_size = 0
    _struct: struct.Struct

    def __init__(self, path: str | os.PathLike, base_offset: int, max_index_size: int, *, writable: bool):
        self.path = path if isinstance(path, Path) else Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size // self.entry_size * self.entry_size
        #: entries the file can hold (AbstractIndex.maxEntries)
        self.max_entries = self.max_index_size // self.entry_size
        self.writable = writable
        self._fd = -1
        self._entries: int | None = None  # None: not loaded yet
        self._length = 0
        self._pending = bytearray()  # appended entries not written yet
        self._pending_pos = 0  # their file position

    # --- loading
    def _load(self) -> None:
        """Entries and length from the file's size (no descriptor kept)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        self._length = size
        self._entries = size // self.entry_size

    @property
    def entries(self) -> int:
        if self._entries is None:
            self._load()
        return self._entries

    @entries.setter
    def entries(self, value: int) -> None:
        if self._entries is None:
            self._load()
        self._write_pending()
        self._entries = value

    def _write_pending(self) -> None:
        if self._pending:
            os.pwrite(self._fd, self._pending, self._pending_pos)
            self._pending.clear()

    def _hold(self) -> int:
        """The descriptor a writable index keeps (created with the file if missing)."""
        if self._fd < 0:
            if not self.writable:
                raise OSError(f"{self.path}: index opened read-only")
            if self._entries is None:
                self._load()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._length = os.fstat(self._fd).st_size
        return self._fd

    def _pread(self, n: int, position: int) -> bytes:
        self._write_pending()
        if self._fd >= 0:
            try:
                return os.pread(self._fd, n, position)
            except OSError as exc:
                raise self._named(exc) from None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        try:
            return os.pread(fd, n, position)
        except OSError as exc:
            raise self._named(exc) from None
        finally:
            os.close(fd)

    def _named(self, exc: OSError) -> OSError:
        """A read's error naming the index (a pread on a descriptor names no file): the one
        line a failed dir gets names it.  Only errors take this path (a try costs nothing)."""
        if exc.filename is not None or exc.errno is None:
            return exc
        return OSError(exc.errno, exc.strerror, str(self.path))

    def release(self) -> None:
        """Let go of the descriptor (the segment is no longer active); reads reopen."""
        self._write_pending()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # --- sizing
    def resize(self, new_size: int) -> None:
        """Set the file length (rounded down to whole entries, never below the entries held)."""
        fd = self._hold()
        self._write_pending()
        rounded = max(new_size // self.entry_size * self.entry_size, self.entries * self.entry_size)
        if rounded == self._length and os.fstat(fd).st_size == rounded:
            return
        os.ftruncate(fd, rounded)
        self._length = rounded

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.entry_size)

    def grow_to_max(self) -> None:
        if self._fd < 0 and self.writable:
            # a released index (a segment made active by loading): set the length by path, with
            # no descriptor (one stat and at most one truncate instead of open/fstat/close)
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = None  # created by resize's descriptor
            if size is not None:
                if self._entries is None:
                    self._entries = size // self.entry_size
                rounded = max(self.max_index_size, self._entries * self.entry_size)
                if rounded != size:
                    os.truncate(self.path, rounded)
                self._length = rounded
                return
        self.resize(self.max_index_size)

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    @property
    def file_size(self) -> int:
        if self._entries is None:
            self._load()
        return self._length

    def is_full(self) -> bool:
        n = self._entries  # loaded: a plain read (every append asks, through shouldRoll)
        return fx.offset_index_is_full(self.entries if n is None else n, self.max_entries)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from the log), as Kafka's reset does: the count
        goes to zero and the rebuilt entries overwrite the file from its start; recovery then
        trims it to them (a file cut to nothing first cost a block release per segment)."""
        self.entries = 0

    def _append_raw(self, packed: bytes) -> None:
        if self._fd < 0:
            self._hold()
        pos = self._entries * self.entry_size
        if pos + self.entry_size > self._length:
            self.resize(max(self.max_index_size, pos + self.entry_size))
        if not self._pending:
            self._pending_pos = pos
        self._pending += packed
        if len(self._pending) >= _PENDING_BYTES:
            try:
                self._write_pending()
            except OSError:
                del self._pending[-len(packed) :]  # the entry is not taken: the index is as it was
                raise
        self._entries += 1

    # --- reads
    def _entry(self, i: int) -> tuple:
        data = self._pread(self.entry_size, i * self.entry_size)
        if len(data) < self.entry_size:
            raise fx.FormatError(f"{self.path}: entry {i} is past the end of the file", i * self.entry_size)
        return self._struct.unpack(data)

    def _search(self, field: int, target: int) -> tuple[int, tuple | None, tuple | None]:
        """How many entries have ``field`` <= ``target`` (every field of an index grows with the
        slot), with the last such entry and the first other one (None where there is none), as
        raw tuples, all read through one descriptor.

        Kafka's AbstractIndex.indexSlotRangeFor on a map: the warm section first (the tail,
        where the appender's and the tail consumers' lookups land: one read), else a binary
        search of the cold part that probes single entries until the range left fits the warm
        section's size, then reads that range, with its neighbours, at once.  An inactive
        segment's index is opened once for the whole search and closed (measured on a 1 GiB
        segment's 262,144 entries: a lookup and an upper bound cost 134 us when every probe
        opened the file, a consumer catching up pays that per partition per fetch)."""
        n = self.entries
        if n == 0:
            return 0, None, None
        self._write_pending()
        fd = self._fd
        opened = fd < 0
        if opened:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # gone (a deleted segment's): no entries, the log is scanned
                return 0, None, None
        try:
            size = self.entry_size
            window = _WARM_BYTES // size
            lo, hi = max(0, n - window), n
            if lo:  # read the warm section, one entry before it included
                first, buf = lo - 1, self._read_at(fd, lo - 1, n - lo + 1)
                if self._struct.unpack_from(buf, size)[field] > target:  # in the cold part
                    hi = lo
                    lo = 0
                    while hi - lo > window:
                        mid = (lo + hi) // 2
                        if self._struct.unpack_from(self._read_at(fd, mid, 1))[field] <= target:
                            lo = mid + 1
                        else:
                            hi = mid
                    first = max(lo - 1, 0)
                    buf = self._read_at(fd, first, min(hi + 1, n) - first)
            else:
                first, buf = 0, self._read_at(fd, 0, n)
        except OSError as exc:
            raise self._named(exc) from None
        finally:
            if opened:
                os.close(fd)
        # entries lo .. hi - 1 are in buf (which starts at ``first``): bisect them in memory
        unpack = self._struct.unpack_from
        while lo < hi:
            mid = (lo + hi) // 2
            if unpack(buf, (mid - first) * size)[field] <= target:
                lo = mid + 1
            else:
                hi = mid
        before = unpack(buf, (lo - 1 - first) * size) if lo else None
        after = unpack(buf, (lo - first) * size) if lo < n else None
        return lo, before, after

    def _read_at(self, fd: int, first: int, count: int) -> bytes:
        """Entries ``first`` .. ``first + count - 1`` through ``fd``, all of them or an error."""
        data = os.pread(fd, count * self.entry_size, first * self.entry_size)
        if len(data) < count * self.entry_size:
            missing = first + len(data) // self.entry_size
            raise fx.FormatError(
                f"{self.path}: entry {missing} is past the end of the file", missing * self.entry_size
            )
        return data

    def _all(self) -> list[tuple]:
        n = self.entries
        buf = self._pread(n * self.entry_size, 0)
        return [t for t in self._struct.iter_unpack(buf[: len(buf) // self.entry_size * self.entry_size])]

    def flush(self) -> None:
        if self._fd >= 0 and self.writable:
            self._write_pending()
            os.fsync(self._fd)

    def close(self, *, trim: bool = True) -> None:
        if self.writable and trim and self._entries is not None and self._length != self.size_in_bytes:
            self.trim_to_valid_size()
        self.release()

    def rename_to(self, new_path: Path) -> None:
        if self.path.exists():
            fileops.replace(self.path, new_path, sync=False)
        self.path = Path(new_path)


class OffsetIndex(_FileIndex):
    entry_size = fx.OFFSET_ENTRY_SIZE
    _struct = _OFFSET

    #: (entries, last offset) as of the last append: the appender's check reads no file
    _last_known: tuple[int, int] = (-1, 0)

    @property
    def last_offset(self) -> int:
        n = self._entries
        if n is None:
            n = self.entries
        if not n:
            return self.base_offset
        if self._last_known[0] == n:
            return self._last_known[1]
        return self.base_offset + self._entry(n - 1)[0]

    def append(self, offset: int, position: int) -> None:
        n = self._entries
        if n is None:
            n = self.entries
        if n and offset <= self.last_offset:
            raise fx.FormatError(
                f"attempt to append offset {offset} to the offset index at slot {n}, "
                f"no larger than the last offset {self.last_offset}",
                n * self.entry_size,
                kind="invalid_offset",
            )
        if fx.offset_index_is_full(n, self.max_entries):
            raise fx.FormatError(f"offset index {self.path} is full", kind="index_full")
        self._append_raw(_OFFSET.pack(fx.relative_offset(self.base_offset, offset), position))
        self._last_known = (self._entries, offset)

    def entry(self, i: int) -> fx.OffsetPosition:
        rel, pos = self._entry(i)
        return fx.OffsetPosition(self.base_offset + rel, pos)

    def entries_list(self) -> list[fx.OffsetPosition]:
        base = self.base_offset
        return [fx.OffsetPosition(base + rel, pos) for rel, pos in self._all()]

    def lookup(self, target_offset: int) -> fx.OffsetPosition:
        """Greatest entry with offset <= target, else (base offset, 0)."""
        _, before, _ = self._search(0, target_offset - self.base_offset)
        if before is None:
            return fx.OffsetPosition(self.base_offset, 0)
        return fx.OffsetPosition(self.base_offset + before[0], before[1])

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """First indexed offset whose position is past ``start_position + fetch_size``."""
        _, _, after = self._search(1, start_position + fetch_size)
        return self.base_offset + after[0] if after is not None else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        self.entries = self._search(0, offset - self.base_offset - 1)[0]


class TimeIndex(_FileIndex):
    entry_size = fx.TIME_ENTRY_SIZE
    _struct = _TIME

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._last_entry: fx.TimestampOffset | None = None  # read on first use

    def _read_last(self) -> fx.TimestampOffset:
        if not self.entries:
            return fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)
        ts, rel = self._entry(self.entries - 1)
        return fx.TimestampOffset(ts, self.base_offset + rel)

    @property
    def _last(self) -> fx.TimestampOffset:
        if self._last_entry is None:
            self._last_entry = self._read_last()
        return self._last_entry

    @_last.setter
    def _last(self, value: fx.TimestampOffset) -> None:
        self._last_entry = value

    @property
    def last_entry(self) -> fx.TimestampOffset:
        return self._last

    def is_full(self) -> bool:
        n = self._entries
        return fx.time_index_is_full(self.entries if n is None else n, self.max_entries)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Kafka's TimeIndex.maybeAppend: only a strictly larger timestamp is written."""
        n = self._entries
        if n is None:
            n = self.entries
        if not skip_full_check and fx.time_index_is_full(n, self.max_entries):
            raise fx.FormatError(f"time index {self.path} is full", kind="index_full")
        last = self._last
        if n and offset < last.offset:
            raise fx.FormatError(
                f"attempt to append offset {offset} to the time index, smaller than {last.offset}",
                kind="invalid_offset",
            )
        if timestamp > last.timestamp:
            self._append_raw(_TIME.pack(timestamp, fx.relative_offset(self.base_offset, offset)))
            self._last = fx.TimestampOffset(timestamp, offset)
            return True
        return False

    def entry(self, i: int) -> fx.TimestampOffset:
        ts, rel = self._entry(i)
        return fx.TimestampOffset(ts, self.base_offset + rel)

    def entries_list(self) -> list[fx.TimestampOffset]:
        base = self.base_offset
        return [fx.TimestampOffset(ts, base + rel) for ts, rel in self._all()]

    def lookup(self, target_timestamp: int) -> fx.TimestampOffset:
        _, before, _ = self._search(0, target_timestamp)
        if before is None:
            return fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)
        return fx.TimestampOffset(before[0], self.base_offset + before[1])

    def reset(self) -> None:
        super().reset()
        self._last = fx.TimestampOffset(fx.NO_TIMESTAMP, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        self.entries = self._search(1, offset - self.base_offset - 1)[0]
        self._last = self._read_last()


class TransactionIndex:
    """The ``.txnindex``: not preallocated, created on the first aborted transaction."""

    def __init__(self, path: str | os.PathLike, base_offset: int, *, writable: bool):
        self.path = path if isinstance(path, Path) else Path(path)
        self.base_offset = base_offset
        self.writable = writable
        self._entries: list[fx.AbortedTxn] | None = None  # read on first use (Kafka's LazyIndex)
        self._size = 0

    @property
    def entries(self) -> list[fx.AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._entries = fx.decode_txn_entries(data)
            # Kafka's reader ignores a trailing partial entry; appends go after the whole ones.
            self._size = len(self._entries) * fx.TXN_ENTRY_SIZE
        return self._entries

    @entries.setter
    def entries(self, value: list[fx.AbortedTxn]) -> None:
        self._entries = value

    def append(self, txn: fx.AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise fx.FormatError(
                f"the last offset {txn.last_offset} of an appended aborted transaction is not larger "
                f"than the previous {self.entries[-1].last_offset}",
                kind="invalid_offset",
            )
        entries = self.entries
        data = fx.encode_txn_index([txn])
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, self._size)
        finally:
            os.close(fd)
        self._size += len(data)
        entries.append(txn)

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
