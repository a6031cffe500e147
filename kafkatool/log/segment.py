"""One segment: a ``.log`` with its ``.index``, ``.timeindex`` and ``.txnindex`` (Kafka's LogSegment).

Layout rules (notes/storage.md section 2): an offset-index entry keys on the
*last* offset of an appended chunk at the chunk's start position, and is only
written once more than ``index.interval.bytes`` were appended since the
previous entry (so the first chunk of a segment is never indexed); the time
index gets (max timestamp so far, its batch's last offset) at the same moments
when that timestamp grew, plus one final entry when the segment is rolled,
closed or recovered.  Index files are preallocated while the segment is
active and trimmed to their entries afterwards.

:func:`scan_for_recovery` is the recovery pass of Kafka's ``LogSegment.recover``
as a pure function over the segment's bytes; the engine, ``recover`` and
``rebuild-index`` all use it, so they agree on where valid data ends and on
what the rebuilt indexes hold.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import index as fx
from kafkatool.formats import records as R
from kafkatool.formats.errors import CorruptRecordError, FormatError
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
    all_zero_from,
    file_name_for_offset,
)
from kafkatool.log.indexes import OffsetIndex, TimeIndex, TransactionIndex

# a segment's tag for the append writer (log/append_writer.py): unique in the process, never reused
_TAGS = itertools.count(1)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- the recovery pass


@dataclass
class SegmentScan:
    """What Kafka's segment recovery finds in one ``.log`` (and would rebuild)."""

    base_offset: int
    file_size: int
    valid_bytes: int = 0
    batches: int = 0
    next_offset: int | None = None  # last valid batch's last offset + 1
    first_offset: int | None = None  # first valid batch's base offset (v2) / offset (legacy)
    stop_reason: str | None = None  # None: all bytes valid
    stop_message: str | None = None
    index_entries: list[tuple[int, int]] = field(default_factory=list)
    time_entries: list[tuple[int, int]] = field(default_factory=list)
    max_timestamp: int = fx.NO_TIMESTAMP
    offset_of_max_timestamp: int = -1
    invalid_offset: bool = False  # Kafka empties the whole segment in that case

    @property
    def truncated_bytes(self) -> int:
        return self.file_size - self.valid_bytes


def scan_for_recovery(
    buf,
    base_offset: int,
    index_interval_bytes: int,
    *,
    on_batch: Callable[[R.Batch], None] | None = None,
) -> SegmentScan:
    """Walk the batches like ``LogSegment.recover``: validate each (size and CRC, no
    record parsing), stop at the first invalid one or a partial tail, and compute
    the offset and time index entries Kafka would rebuild.

    ``on_batch`` sees every valid batch in order (producer state, epoch cache).
    An offset too far from ``base_offset`` raises IndexOffsetOverflowError
    (Kafka splits such a segment).
    """
    view = memoryview(buf)
    scan = SegmentScan(base_offset, len(view))
    valid = 0
    last_index_entry = 0
    last_indexed_offset = None
    last_time = (fx.NO_TIMESTAMP, base_offset)
    max_ts = fx.NO_TIMESTAMP
    max_ts_offset = -1
    index_entries = scan.index_entries
    time_entries = scan.time_entries
    try:
        while True:
            batch = R.read_batch(view, valid)
            if batch is None:
                if valid < len(view):
                    scan.stop_reason = "partial_tail"
                    scan.stop_message = f"entry at byte {valid} runs past the end of the file"
                break
            batch.ensure_valid()
            last = batch.last_offset
            fx.relative_offset(base_offset, last)
            ts = batch.max_timestamp
            if ts > max_ts:
                max_ts, max_ts_offset = ts, last
            if valid - last_index_entry > index_interval_bytes:
                if last_indexed_offset is not None and last <= last_indexed_offset:
                    scan.invalid_offset = True
                    scan.stop_reason = "invalid_offset"
                    scan.stop_message = (
                        f"batch at byte {valid} has last offset {last}, not above the previously "
                        f"indexed offset {last_indexed_offset}"
                    )
                    break
                index_entries.append((last, valid))
                last_indexed_offset = last
                if max_ts > last_time[0]:
                    if max_ts_offset < last_time[1] and time_entries:
                        scan.invalid_offset = True
                        scan.stop_reason = "invalid_offset"
                        scan.stop_message = (
                            f"time index offset {max_ts_offset} goes backwards at byte {valid}"
                        )
                        break
                    last_time = (max_ts, max_ts_offset)
                    time_entries.append(last_time)
                last_index_entry = valid
            if scan.first_offset is None:
                scan.first_offset = batch.base_offset if batch.magic >= 2 else batch.offset
            valid = batch.end
            scan.batches += 1
            scan.next_offset = last + 1
            if on_batch is not None:
                on_batch(batch)
    except CorruptRecordError as exc:
        scan.stop_reason = _reason(exc, view, valid)
        scan.stop_message = exc.message
    except fx.IndexOffsetOverflowError:
        raise
    except FormatError as exc:
        scan.stop_reason = _reason(exc, view, valid)
        scan.stop_message = exc.message
    scan.valid_bytes = valid
    scan.max_timestamp = max_ts
    scan.offset_of_max_timestamp = max_ts_offset
    # the final entry a clean close (or the end of recovery) appends
    if max_ts > last_time[0] and max_ts >= 0:
        time_entries.append((max_ts, max_ts_offset))
    return scan


def _reason(exc: FormatError, view, pos: int) -> str:
    if all_zero_from(view, pos):
        return "zero_tail"
    return exc.kind


# ---------------------------------------------------------------- reads


@dataclass(frozen=True)
class SegmentSlice:
    """Bytes of a segment to send: ``size`` bytes of ``path`` from ``position`` (for sendfile)."""

    segment: Segment
    position: int
    size: int
    first_batch_offset: int  # last offset of the first batch in the slice (Kafka's LogOffsetPosition)

    @property
    def path(self) -> Path:
        return self.segment.log_path

    def fileno(self) -> int:
        return self.segment.fileno()

    def read_bytes(self) -> bytes:
        return os.pread(self.segment.fileno(), self.size, self.position)


@dataclass(frozen=True)
class OffsetPosition:
    offset: int  # last offset of the batch found
    position: int
    size: int


# ---------------------------------------------------------------- the segment


class Segment:
    """A live segment.  ``writable=False`` opens the files read-only and never creates,
    resizes or trims anything (forensic tools)."""

    def __init__(
        self,
        dir: str | os.PathLike,
        base_offset: int,
        config: LogConfig | None = None,
        *,
        writable: bool = True,
        suffix: str = "",
        create: bool = False,
        preallocate: bool = False,
        now_ms: int | None = None,
    ):
        self.dir = dir if isinstance(dir, Path) else Path(dir)
        self.base_offset = base_offset
        self.config = config or LogConfig()
        self.writable = writable
        self.suffix = suffix
        self.log_path = self._path(LOG_SUFFIX)
        if create and self.log_path.exists():
            raise FileExistsError(17, "segment already exists", str(self.log_path))
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        self._fd = os.open(self.log_path, flags, 0o644)
        try:
            self.size = os.fstat(self._fd).st_size
            if create and preallocate and writable:
                os.ftruncate(self._fd, self.config.segment_bytes)
            self.offset_index = OffsetIndex(
                self._path(INDEX_SUFFIX), base_offset, self.config.max_offset_index_size, writable=writable
            )
            self.time_index = TimeIndex(
                self._path(TIME_INDEX_SUFFIX), base_offset, self.config.max_time_index_size, writable=writable
            )
            self.txn_index = TransactionIndex(self._path(TXN_INDEX_SUFFIX), base_offset, writable=writable)
            if create and writable:
                # a new segment is the active one: its index files exist from the start
                self.offset_index.resize(0)
                self.time_index.resize(0)
        except BaseException:
            for index in (getattr(self, "offset_index", None), getattr(self, "time_index", None)):
                if index is not None:
                    index.release()
            os.close(self._fd)
            raise
        self.created_ms = now_ms if now_ms is not None else _now_ms()
        # the append writer's last write of this segment (sequence number; 0: none was queued):
        # what reads, hands out the descriptor, truncates, flushes or closes waits for it
        self._writer = None
        self._last_write = 0
        self._tag = next(_TAGS)
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        # Kafka's maxTimestampAndOffsetSoFar: read from the time index on first use, so that
        # loading a partition opens none of its segments' indexes
        self._max_ts: tuple[int, int] | None = None

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset()[1]

    def _max_timestamp_and_offset(self) -> tuple[int, int]:
        if self._max_ts is None:
            last = self.time_index.last_entry
            self._max_ts = (last.timestamp, last.offset if last.timestamp >= 0 else -1)
        return self._max_ts

    def _path(self, kind: str) -> Path:
        return self.dir / (file_name_for_offset(self.base_offset, kind) + self.suffix)

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size={self.size}, path={str(self.log_path)!r})"

    # --- basics
    def wait_written(self) -> None:
        """Until every write queued to the append writer is in the file (any thread); raises
        the OSError of a failed one (as the synchronous append would have)."""
        if self._last_write:
            self._writer.wait(self._last_write, self._tag)

    def write_failure(self) -> OSError | None:
        """The OSError of a failed write of this segment queued to the append writer (every
        later one of the segment fails with it, unwritten), None while none failed."""
        writer = self._writer
        return None if writer is None else writer.failed(self._tag)

    def _wait_written_quietly(self) -> None:
        """Until the queued writes are done; a failed one is not raised (close, release: the
        append writer reports it as it collects it, AppendWriter.on_failure)."""
        try:
            self.wait_written()
        except OSError:
            pass

    def fileno(self) -> int:
        """The descriptor, for reads of the file (fetch's sendfile): the writes queued first."""
        self.wait_written()
        return self._fd

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def file_records(self) -> FileRecords:
        """A read-only map of the segment's valid bytes (close it when done)."""
        self.wait_written()
        return FileRecords(self.log_path, max_bytes=self.size)

    def batches(self, start_position: int = 0) -> Iterator[R.Batch]:
        fr = self.file_records()
        try:
            yield from fr.batches(start_position)
        except FormatError as exc:
            # the position is this file's byte: name the file, as the other reads here do
            exc.in_file(self.log_path)
            raise
        finally:
            fr.close()

    # --- append
    def append(
        self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, data, writer=None
    ) -> int:
        """Append already-validated batches whose last offset is ``largest_offset``.

        ``writer`` (log/append_writer.AppendWriter): the bytes are queued to it instead of
        written here (``data`` must not change until written; the writer holds its buffer)
        when they are ``writer.min_bytes`` or more, or when writes of this segment are still
        queued; the segment's state moves on at once, reads of the file wait for the write,
        and a failed write is raised by them (and by the writer to whoever waits for it).
        The write's sequence number when queued, else 0 (written here)."""
        n = len(data)
        if not n:
            return 0
        position = self.size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        fx.relative_offset(self.base_offset, largest_offset)
        queued = 0
        if writer is not None and (
            n >= writer.min_bytes or (self._last_write and not writer.written(self._last_write))
        ):
            # a small append goes to the writer only behind queued ones of this segment (its
            # turn in the file without a wait on the loop); alone, the loop writes it
            if self._writer is not writer:
                writer.own(self._tag, self)  # a failed write is reported for this segment
                self._writer = writer
            queued = self._last_write = writer.submit(self._fd, self._tag, data, position)
        else:
            # a synchronous append (a coordinator's, a transaction marker, a follower's)
            # lands after the queued ones: never a batch on disk past a hole a crash
            # would leave (recovery stops at the hole, dropping an answered batch)
            self.wait_written()
            written = os.pwrite(self._fd, data, position)
            while written < n:
                written += os.pwrite(self._fd, memoryview(data)[written:], position + written)
        max_ts = self._max_ts or self._max_timestamp_and_offset()
        if largest_timestamp > max_ts[0]:
            max_ts = (largest_timestamp, offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            # the index entries before the size: an I/O error here (a full disk) leaves the
            # segment as it was, so the caller's log end offset and this size still agree and
            # the next append overwrites the unused bytes (no offset is ever written twice)
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(max_ts[0], max_ts[1])
            self.bytes_since_last_index_entry = 0
        self._max_ts = max_ts
        self.size += n
        self.bytes_since_last_index_entry += n
        return queued

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= fx.INT32_MAX

    def update_txn_index(self, aborted: fx.AbortedTxn) -> None:
        self.txn_index.append(aborted)

    # --- reads
    def _peek(self, position: int) -> OffsetPosition | None:
        if position + R.HEADER_PEEK > self.size:
            return None
        self.wait_written()
        head = os.pread(self._fd, R.SPAN_PEEK, position)
        try:
            span = R.peek_entry_span(head, position, self.size)
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.message, position, kind=exc.kind).in_file(self.log_path) from None
        if span is None:
            return None
        return OffsetPosition(span[0], position, span[1])

    def headers(self, start_position: int = 0) -> Iterator[OffsetPosition]:
        """(last offset, position, size) of each entry from ``start_position``."""
        pos = start_position
        while True:
            entry = self._peek(pos)
            if entry is None:
                return
            yield entry
            pos = entry.position + entry.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> OffsetPosition | None:
        """The first batch whose last offset >= ``offset`` (index lookup, then a short scan)."""
        mapping = self.offset_index.lookup(offset)
        for entry in self.headers(max(mapping.position, starting_position)):
            if entry.offset >= offset:
                return entry
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> SegmentSlice | None:
        """Kafka's LogSegment.read: a slice from the batch holding ``start_offset``."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        if max_position is None:
            max_position = self.size
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        adjusted = max(max_size, start.size) if min_one_message else max_size
        if adjusted == 0:
            return SegmentSlice(self, start.position, 0, start.offset)
        size = min(max_position - start.position, adjusted)
        return SegmentSlice(self, start.position, max(size, 0), start.offset)

    def read_next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when empty)."""
        last_entry = self.offset_index.lookup(2**63 - 1) if self.offset_index.entries else None
        start = last_entry.position if last_entry is not None else 0
        nxt = self.base_offset
        try:
            for entry in self.headers(start):
                nxt = entry.offset + 1
        except CorruptRecordError:
            pass  # an impossible header (a zero-filled tail): the data ends there
        return nxt

    def first_batch_timestamp(self) -> int | None:
        for batch in self.batches():
            return batch.max_timestamp
        return None

    @property
    def rolling_based_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self.size:
            self._rolling_based_timestamp = self.first_batch_timestamp()
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp (from the time index), else the ``.log`` mtime (retention)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        self.wait_written()  # the mtime of the last write
        return int(os.stat(self.log_path).st_mtime * 1000)

    @property
    def last_modified_ms(self) -> int:
        self.wait_written()
        return int(os.stat(self.log_path).st_mtime * 1000)

    # --- recovery
    def recover(
        self,
        on_batch: Callable[[R.Batch], None] | None = None,
    ) -> SegmentScan:
        """Kafka's LogSegment.recover: rebuild the indexes from the log, truncate at the first
        invalid batch.  ``on_batch`` gets each valid batch (producer state, epoch cache,
        aborted transactions into this segment's txn index)."""
        self._require_writable()
        self.wait_written()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        fr = FileRecords(self.log_path)
        try:
            scan = scan_for_recovery(
                fr.buf, self.base_offset, self.config.index_interval_bytes, on_batch=on_batch
            )
        finally:
            fr.close()
        if scan.invalid_offset:
            # Kafka: "Found invalid offset during recovery. Deleting the corrupt segment and
            # creating an empty one" (truncateTo(baseOffset)).
            scan.valid_bytes = 0
            scan.index_entries.clear()
            scan.time_entries.clear()
            scan.max_timestamp, scan.offset_of_max_timestamp = fx.NO_TIMESTAMP, -1
            scan.next_offset = None
            self.txn_index.reset()
        self._apply_scan(scan)
        return scan

    def _apply_scan(self, scan: SegmentScan) -> None:
        self.wait_written()
        for offset, position in scan.index_entries:
            self.offset_index.append(offset, position)
        for ts, offset in scan.time_entries:
            self.time_index.maybe_append(ts, offset, skip_full_check=True)
        if os.fstat(self._fd).st_size != scan.valid_bytes:
            fileops.fault_point("truncate", self.log_path)
            os.ftruncate(self._fd, scan.valid_bytes)
        self.size = scan.valid_bytes
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._max_ts = (scan.max_timestamp, scan.offset_of_max_timestamp)
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None

    # --- truncation (followers, log truncation)
    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch whose last offset >= ``offset``; returns the bytes removed."""
        self._require_writable()
        self.wait_written()
        mapping = self.translate_offset(offset)
        if mapping is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.grow_to_max()
        self.time_index.grow_to_max()
        removed = self.size - mapping.position
        fileops.fault_point("truncate", self.log_path)
        os.ftruncate(self._fd, mapping.position)
        self.size = mapping.position
        if self.size == 0:
            self.created_ms = now_ms if now_ms is not None else _now_ms()
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        last = self.time_index.last_entry
        self._max_ts = (last.timestamp, last.offset if last.timestamp >= 0 else -1)
        if self.max_timestamp_so_far < 0 or self.time_index.entries == 0:
            self.recompute_max_timestamp()
        return removed

    def recompute_max_timestamp(self) -> None:
        """The max timestamp from the time index's last entry and the batches after the last
        offset-index entry (the part no index entry covers yet)."""
        start = self.offset_index.lookup(2**63 - 1).position if self.offset_index.entries else 0
        for batch in self.batches(start):
            if batch.max_timestamp > self.max_timestamp_so_far:
                self._max_ts = (batch.max_timestamp, batch.last_offset)

    # --- lifecycle
    def on_become_inactive(self) -> None:
        """On roll: the final time-index entry, then trim the indexes and a preallocated log."""
        self._require_writable()
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log()
        # reads of an inactive segment's indexes open, read and close (bounded descriptors)
        self.offset_index.release()
        self.time_index.release()

    def resize_indexes(self) -> None:
        """Grow the indexes to their preallocated size (the segment is active again)."""
        if self.writable:
            self.offset_index.grow_to_max()
            self.time_index.grow_to_max()
            # the descriptors come back with the first index entry (an idle partition holds one)
            self.offset_index.release()
            self.time_index.release()

    def _trim_log(self) -> None:
        self.wait_written()
        if os.fstat(self._fd).st_size != self.size:
            os.ftruncate(self._fd, self.size)

    def flush(self) -> None:
        if not self.writable or self._fd < 0:
            return  # read-only, or closed meanwhile (a flush on a background thread)
        self.wait_written()
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self, *, trim: bool = True) -> None:
        """Close; a writable segment gets its final time-index entry and trimmed files
        (``trim=False`` just lets go of the files, as a crash would)."""
        if self._fd < 0:
            return
        trim = trim and self.writable
        # the queued writes land before the descriptor closes (its number could be reused); a
        # failed one is the OSError of a trimming close (its dir goes offline)
        if not trim:
            self._wait_written_quietly()
        else:
            self.wait_written()
            if self.max_timestamp_so_far >= 0:
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
                )
            self._trim_log()
        self.offset_index.close(trim=trim)
        self.time_index.close(trim=trim)
        self.txn_index.close()
        os.close(self._fd)
        self._fd = -1

    def files(self) -> list[Path]:
        return [
            self.log_path,
            self.offset_index.path,
            self.time_index.path,
            self.txn_index.path,
        ]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files (``.cleaned`` -> ``.swap``, ``""`` -> ``.deleted``...)."""
        if self.suffix != old_suffix:
            raise ValueError(f"segment files end in {self.suffix!r}, not {old_suffix!r}")
        self.suffix = new_suffix
        new_log = self._path(LOG_SUFFIX)
        fileops.replace(self.log_path, new_log, sync=False)
        self.log_path = new_log
        self.offset_index.rename_to(self._path(INDEX_SUFFIX))
        self.time_index.rename_to(self._path(TIME_INDEX_SUFFIX))
        self.txn_index.rename_to(self._path(TXN_INDEX_SUFFIX))
        fileops.fsync_dir(self.dir)

    def delete_files(self) -> None:
        self.close()
        for path in self.files():
            fileops.delete(path)

    def _require_writable(self) -> None:
        if not self.writable:
            raise OSError(f"{self.log_path}: segment opened read-only")


def segment_file_paths(dir: Path, base_offset: int, suffix: str = "") -> list[Path]:
    return [
        dir / (file_name_for_offset(base_offset, s) + suffix)
        for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
    ]
