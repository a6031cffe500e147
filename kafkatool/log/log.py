"""One partition dir: Kafka's LocalLog + UnifiedLog + LogLoader.

A :class:`Log` owns the segments of ``<topic>-<partition>/`` (bisect on base
offsets), assigns offsets, rolls, reads, flushes, truncates, and keeps the
log start offset, recovery point, high watermark, producer state
(``.snapshot``), leader-epoch cache (``leader-epoch-checkpoint``) and
``partition.metadata``.  Opening a writable Log runs Kafka's start-up loading
and recovery (notes/storage.md section 6).

No asyncio here: a broker registers append listeners (plain callables, called
after each append with the new log end offset) to wake its long polls.

Threads (Kafka's UnifiedLog lock discipline: one writer plus background workers).
``Log.lock`` (re-entrant) is held by every change of the segment map, the log end
offset, the log start offset and the recovery point: appends, roll, truncation,
``delete_segments``, ``replace_segments``, ``increment_log_start_offset``, the
recovery-point step of ``flush`` and ``close``.  So a cleaner swap or a retention
delete on a background thread and an append on the event loop never interleave,
and offsets are assigned by one holder at a time.  Reads take no lock, as Kafka's
do: the map changes keep ``_bases`` a subset of ``_segments`` at every step (a base
is added to the dict before the list and removed from the list before the dict),
and with ``defer_deletes`` set (a broker) a segment leaving the map is renamed
``.deleted`` but stays open until ``file.delete.delay.ms`` passed
(``close_retired``), so a fetch slice taken before the change still reads (or
sendfiles) the same file by the same descriptor.  fsyncs run outside the lock.
"""

from __future__ import annotations

import bisect
import functools
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.errors import KafkatoolError
from kafkatool.formats import compression
from kafkatool.formats import index as fx
from kafkatool.formats import properties as props
from kafkatool.formats import records as R
from kafkatool.formats.checkpoint import LEADER_EPOCH_CHECKPOINT
from kafkatool.formats.errors import CorruptRecordError, FormatError, IllegalArgumentError, InvalidRecordError
from kafkatool.formats.uuid import Uuid
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
    offset_from_file_name,
    read_regular,
)
from kafkatool.log.leader_epoch import LeaderEpochCache
from kafkatool.log.leftovers import plan_leftovers
from kafkatool.log.producer_state import ProducerStateManager
from kafkatool.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    Segment,
    SegmentScan,
    SegmentSlice,
    scan_for_recovery,
    segment_file_paths,
)
from kafkatool.log.validator import validate_append

PARTITION_METADATA_FILE = props.PARTITION_METADATA_FILE
INDEX_FILE_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

ISOLATION_LOG_END = "log_end"
ISOLATION_HIGH_WATERMARK = "high_watermark"
ISOLATION_COMMITTED = "committed"

#: ListOffsets' special timestamps (ListOffsetsRequest; -4/-5: KIP-405/KIP-1005)
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = -4, -5


ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"


class OffsetOutOfRangeError(KafkatoolError):
    def __init__(self, offset: int, log_start: int, log_end: int):
        super().__init__(f"offset {offset} is out of range [{log_start}, {log_end}]")
        self.offset = offset


class RecordTooLargeError(FormatError):
    kind = "record_too_large"


class UnknownCodecError(IllegalArgumentError):
    """A batch whose compression bits name no codec (5-7), its CRC valid: Kafka's
    CompressionType.forId throws IllegalArgumentException in analyzeAndValidateRecords (not
    CORRUPT_MESSAGE; verify and recovery still call such a batch corrupt)."""

    kind = "unknown_codec"


class RecordBatchTooLargeError(RecordTooLargeError):
    """An append larger than segment.bytes (Kafka's RecordBatchTooLargeException: the produce
    path answers RECORD_LIST_TOO_LARGE)."""

    kind = "record_batch_too_large"


def _locked(method):
    """Run the method holding the log's lock (Kafka's ``lock synchronized``)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return run


def parse_topic_partition(dir_name: str) -> tuple[str, int] | None:
    """Kafka's parseTopicPartitionName: strip a ``.<uuid>-delete|-future|-stray`` suffix, split at the last '-'."""
    name = dir_name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix) and "." in name:
            name = name[: name.rindex(".")]
            break
    m = _DIR_NAME.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int | None
    batches: int
    bytes: int
    log_start_offset: int = 0
    #: a client's retry of a batch already in the log: nothing was appended, the offsets
    #: are the original's (Kafka's duplicate LogAppendInfo)
    duplicate: bool = False
    #: the append writer's sequence number of this append's write (0: written synchronously)
    write_seq: int = 0


@dataclass
class FetchInfo:
    """What a fetch returns: file slices to send as they are (``sendfile``), plus metadata."""

    fetch_offset: int
    slices: list[SegmentSlice] = field(default_factory=list)
    high_watermark: int = 0
    log_end_offset: int = 0
    log_start_offset: int = 0
    last_stable_offset: int = 0
    aborted_transactions: list[fx.AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)

    def read_bytes(self) -> bytes:
        return b"".join(s.read_bytes() for s in self.slices)


#: what a reader of damaged data did about it (ReadDamage.action)
READ_AS_IS = "its records are read as they are"
BATCH_LEFT_OUT = "the batch's records from there on are left out"
RECORD_LEFT_OUT = "that record is left out"
REST_LEFT_OUT = "the rest of the segment is left out"
PRODUCERS_BEFORE = "the producer state is rebuilt from the batches before it"


@dataclass
class ReadDamage:
    """Damage an offline reader met in a log's data and read past (``Log.batches`` with
    ``damage``, the offline consumer, the offline group and transaction readers): the segment
    file, the byte in it, the offset the reader was at, what, and what the reader did about it
    (READ_AS_IS: a batch failing its CRC; BATCH_LEFT_OUT: a batch whose records do not decode;
    REST_LEFT_OUT: an entry that does not parse, after which the segment cannot be walked)."""

    path: Path
    position: int | None
    #: None: not known (a producer-state replay names the file and byte, not the offset)
    offset: int | None
    message: str
    action: str

    @classmethod
    def of(cls, path: Path, exc: FormatError, offset: int | None, action: str, base: int = 0) -> ReadDamage:
        """From a codec's error: one that names its file (FormatError.in_file) is said with
        that file's byte; one of a buffer with ``path``, the file the buffer was read from,
        and ``base``, where in it the buffer starts."""
        if exc.path is not None:
            return cls(exc.path, exc.position, offset, exc.message, action)
        position = None if exc.position is None else exc.position + base
        return cls(path, position, offset, exc.message, action)

    def line(self) -> str:
        where = [f"at byte {self.position}"] if self.position is not None else []
        where += [f"offset {self.offset}"] if self.offset is not None else []
        at = f" ({', '.join(where)})" if where else ""
        return f"{self.path}: {self.message}{at}: {self.action}"


def read_past_damage(
    batches: Iterator[R.Batch], said: Callable[[FormatError, int, str], None], offset: int
) -> Iterator[R.Batch]:
    """The offline readers' one rule for damaged data, over any walk of batches (a segment's,
    a fetched slice's): a batch failing its CRC is yielded as it is (READ_AS_IS), an entry that
    does not parse ends the walk (REST_LEFT_OUT, at the offset after the last batch yielded,
    ``offset`` before the first); each said with ``said(error, offset, action)``."""
    at = offset
    try:
        for b in batches:
            try:
                b.ensure_checksum()
            except CorruptRecordError as exc:
                said(exc, b.base_offset, READ_AS_IS)
            yield b
            at = b.next_offset
    except FormatError as exc:
        said(exc, at, REST_LEFT_OUT)


@dataclass
class LoadResult:
    """What opening the log found and did (start-up recovery), for logs and reports."""

    removed_files: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    renamed_files: list[tuple[str, str]] = field(default_factory=list)
    recovered: list[SegmentScan] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    created_segment: int | None = None
    truncated: bool = False


@dataclass
class _DirListing:
    """A partition dir's names as the loader listed them: regular files (sorted) and the rest."""

    files: list[str]
    file_set: set[str]
    others: set[str]

    def exists(self, dir: Path, name: str) -> bool:
        """``(dir / name).exists()`` as of the listing (only a name that is not a regular
        file, a link or a special file, is asked of the file system)."""
        return name in self.file_set or (name in self.others and (dir / name).exists())


def read_topic_id(part_dir: Path) -> Uuid | None:
    """The topic id of a partition dir's ``partition.metadata`` (None when it has none)."""
    try:
        data = read_regular(part_dir / PARTITION_METADATA_FILE)
    except FileNotFoundError:
        return None
    return props.decode_partition_metadata(data).topic_id


class Log:
    """A partition's log.  ``writable=False`` opens it for reading only: nothing on disk
    changes (no recovery, no trimming), which is what forensic tools want."""

    def __init__(
        self,
        dir: str | os.PathLike,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        writable: bool = True,
        clock: Callable[[], int] | None = None,
        topic_id: Uuid | None = None,
        flush_on_roll: bool = True,
        segments_below: int | None = None,
    ):
        self.dir = Path(dir)
        self.config = config or LogConfig()
        self.writable = writable
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.flush_on_roll = flush_on_roll
        self.topic_partition = parse_topic_partition(self.dir.name)
        self._bases: list[int] = []
        self._segments: dict[int, Segment] = {}
        #: a tuple, replaced on add/remove: an append calls them without copying the list
        self.listeners: tuple[Callable[[Log, int], None], ...] = ()
        self.high_watermark = 0
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self._jitter = self._new_jitter()
        #: Kafka's Log lock: see the module docstring for what it guards
        self.lock = threading.RLock()
        #: False: segments leaving the map are closed (and deleted) at once (tools); True
        #: (a broker): renamed ``.deleted`` and closed/deleted ``file.delete.delay.ms`` later
        self.defer_deletes = False
        #: (due ms, segment, delete files) of segments left the map but still open
        self._retired: list[tuple[int, Segment, bool]] = []
        #: a broker sets this to fsync rolled segments on a background thread (Kafka's
        #: scheduled "flush-log" after a roll), called with (this log, offset): a hook that
        #: keeps no reference to the log, so that a deleted log is freed by reference
        #: counting, not left for the cyclic collector; None: a roll flushes inline
        self.flush_scheduler: Callable[[Log, int], None] | None = None
        self.closed = False
        #: the dir's clean-shutdown marker at open: a read-only log rebuilds producer state by it
        self._had_clean_shutdown = had_clean_shutdown
        if writable:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT, writable=writable)
        self.producer_state = ProducerStateManager(
            self.dir, expiration_ms=self.config.producer_id_expiration_ms, writable=writable
        )
        self.topic_id = read_topic_id(self.dir)
        self.load_result = LoadResult()
        try:
            if writable:
                self._load(log_start_offset, recovery_point, had_clean_shutdown)
            else:
                self._load_read_only(log_start_offset, recovery_point, had_clean_shutdown, segments_below)
        except BaseException:
            self._close_segments(trim=False)
            raise
        if topic_id is not None:
            self.assign_topic_id(topic_id)

    # ------------------------------------------------------------------ segments
    @property
    def segments(self) -> list[Segment]:
        return [self._segments[b] for b in self._bases]

    @property
    def active_segment(self) -> Segment:
        return self._segments[self._bases[-1]]

    def floor_segment(self, offset: int) -> Segment | None:
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i - 1]] if i else None

    def higher_segment(self, offset: int) -> Segment | None:
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i]] if i < len(self._bases) else None

    def segments_in_range(self, start: int, end: int) -> list[Segment]:
        """Segments that may hold offsets in [start, end) (the floor segment of start included)."""
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        out = []
        for b in self._bases[i:]:
            if b >= end:
                break
            out.append(self._segments[b])
        return out

    def _add_segment(self, seg: Segment) -> None:
        # dict first, list second: a lock-free reader never meets a base without its segment
        known = seg.base_offset in self._segments
        self._segments[seg.base_offset] = seg
        if not known:
            bisect.insort(self._bases, seg.base_offset)

    def _remove_segment(self, base: int) -> Segment:
        self._bases.remove(base)
        return self._segments.pop(base)

    def _retire(self, seg: Segment, *, delete_files: bool) -> None:
        """A segment that left the map: closed (and its files deleted) now, or, with
        ``defer_deletes``, kept open for in-flight reads until ``file.delete.delay.ms``
        passed (Kafka's asynchronous segment deletion)."""
        if not self.defer_deletes:
            if delete_files:
                seg.delete_files()
            else:
                seg.close()
            return
        self._retired.append((self.clock() + self.config.file_delete_delay_ms, seg, delete_files))

    @property
    def has_retired(self) -> bool:
        return bool(self._retired)

    def close_retired(self, now_ms: int | None = None) -> int:
        """Close (and delete) the retired segments whose delay passed (all when ``now_ms`` is
        None); returns how many.  Safe from any thread."""
        with self.lock:
            now = now_ms
            due = [r for r in self._retired if now is None or r[0] <= now]
            if not due:
                return 0
            self._retired = [r for r in self._retired if not (now is None or r[0] <= now)]
        for _, seg, delete_files in due:
            if delete_files:
                seg.delete_files()
            else:
                seg.close()
        return len(due)

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size(self) -> int:
        # the list is taken in one step: a metrics scrape reads it from another thread
        return sum(s.size for s in list(self._segments.values()))

    @property
    def num_segments(self) -> int:
        """UnifiedLog.numberOfSegments (the Log MBean's NumLogSegments)."""
        return len(self._bases)

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is not None:
            return min(first_unstable, self.high_watermark)
        return self.high_watermark

    # ------------------------------------------------------------------ loading
    def _new_segment(self, base: int, *, preallocate: bool | None = None) -> Segment:
        pre = self.config.preallocate if preallocate is None else preallocate
        return Segment(self.dir, base, self.config, create=True, preallocate=pre, now_ms=self.clock())

    def _load_read_only(
        self,
        log_start_offset: int,
        recovery_point: int,
        had_clean_shutdown: bool,
        segments_below: int | None = None,
    ) -> None:
        """``segments_below``: open only the segments with a lower base offset (a cleaner
        worker's view of a live log's inactive segments)."""
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(LOG_SUFFIX) and (self.dir / name).is_file():
                base = offset_from_file_name(name)
                if base is not None and (segments_below is None or base < segments_below):
                    self._add_segment(Segment(self.dir, base, self.config, writable=False))
        valid_end = None if had_clean_shutdown else self._read_only_valid_end(recovery_point)
        if self._bases:
            self._log_end_offset = (
                valid_end if valid_end is not None else self.active_segment.read_next_offset()
            )
            self.log_start_offset = max(log_start_offset, self._bases[0])
            if not had_clean_shutdown:
                # a live or crashed broker's active segment: its newest records may be past the
                # time index's last entry (written every index.interval.bytes and at close);
                # the tail after the last offset-index entry says (ListOffsets by time, --at)
                try:
                    self.active_segment.recompute_max_timestamp()
                except (FormatError, OSError):
                    pass  # damage past the valid end: the index's entry stands, verify says more
        else:
            self._log_end_offset = log_start_offset
        self.high_watermark = self.recovery_point = min(self.recovery_point, self._log_end_offset)

    def _read_only_valid_end(self, recovery_point: int) -> int | None:
        """Where the data a writable load would keep ends, without changing a byte: the
        recovery scan (size, CRC, offsets) over the segments start-up recovery would
        scan; the segments past the first damage are left out of this read-only view,
        as recovery would delete them. None when nothing would be cut."""
        start = self.floor_segment(recovery_point)
        for base in list(self._bases):
            if start is not None and base < start.base_offset:
                continue
            seg = self._segments[base]
            try:
                with FileRecords(seg.log_path) as fr:
                    scan = scan_for_recovery(fr.buf, base, self.config.index_interval_bytes)
            except (FormatError, OSError):
                return None  # an offset overflow (Kafka splits) or an unreadable file: no cut here
            if scan.valid_bytes < scan.file_size:
                for later in [b for b in self._bases if b > base]:
                    self._remove_segment(later).close(trim=False)
                # every read of this segment (fetch slices, batches) stops where recovery cuts
                seg.size = 0 if scan.invalid_offset else scan.valid_bytes
                if scan.invalid_offset:
                    return base
                return scan.next_offset if scan.next_offset is not None else base
        return None

    def _load(self, log_start_offset: int, recovery_point: int, had_clean_shutdown: bool) -> None:
        result = self.load_result
        listing = self._finish_interrupted_operations()
        is_deleted_dir = self.dir.name.endswith(DELETE_DIR_SUFFIX)
        while True:
            try:
                self._load_segment_files(listing, log_start_offset)
                if is_deleted_dir:
                    # Kafka does not recover a partition already marked for deletion
                    if not self._bases:
                        self._add_segment(self._new_segment(0))
                    next_offset, new_recovery_point = 0, 0
                else:
                    next_offset, new_recovery_point = self._recover_log(
                        had_clean_shutdown, recovery_point, log_start_offset
                    )
                break
            except fx.IndexOffsetOverflowError as exc:
                # Kafka's retryOnOffsetOverflow: split the segment, then load again from scratch
                seg = getattr(exc, "segment", None)
                if seg is None:
                    raise
                self.split_overflowed_segment(seg)
                self._close_segments(trim=False)
                self._segments.clear()
                self._bases.clear()
                self.load_result.recovered = [
                    r for r in self.load_result.recovered if r.base_offset != seg.base_offset
                ]
                listing = self._list_dir()  # the split wrote new segments
        self.active_segment.resize_indexes()
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.log_start_offset = max(log_start_offset, self._bases[0])
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        self._log_end_offset = next_offset
        self.recovery_point = new_recovery_point
        snapshots = self.producer_state.remove_stray_snapshots(self._bases)
        self._replay_producer_state(
            self.producer_state, self.log_start_offset, next_offset, had_clean_shutdown, snapshots
        )
        self.high_watermark = min(self.high_watermark, next_offset)
        result.truncated = any(s.truncated_bytes for s in result.recovered)

    def _list_dir(self) -> _DirListing:
        """The partition dir's entries in one scandir (no stat per name)."""
        files: list[str] = []
        others: set[str] = set()
        with os.scandir(self.dir) as it:
            for entry in it:
                try:
                    regular = entry.is_file()
                except OSError:
                    regular = Path(entry.path).is_file()
                # an if, not `(files.append if regular else others.add)(...)`: Cython (the
                # compiled hot path, kafkatool/accel.py) cannot type a conditional of a list's
                # and a set's bound methods and refuses to compile it
                if regular:
                    files.append(entry.name)
                else:
                    others.add(entry.name)
        files.sort()
        return _DirListing(files, set(files), others)

    def _finish_interrupted_operations(self) -> _DirListing:
        """LogLoader steps 1-2: drop leftovers, then complete the valid swaps; returns the
        dir's listing as it is afterwards."""
        listing = self._list_dir()
        plan = plan_leftovers(self.dir, listing.files, self.config)
        for name, reason in plan.deletes:
            fileops.delete(self.dir / name)
            self.load_result.removed_files.append((str(self.dir / name), reason))
        for name in plan.swaps:
            path = self.dir / name
            target = self.dir / name[: -len(SWAP_SUFFIX)]
            fileops.replace(path, target)
            self.load_result.renamed_files.append((str(path), str(target)))
        return self._list_dir() if plan.deletes or plan.swaps else listing

    def _load_segment_files(self, listing: _DirListing, log_start_offset: int) -> None:
        for name in listing.files:
            off = offset_from_file_name(name)
            if off is None:
                continue
            if name.endswith(INDEX_FILE_SUFFIXES):
                if not listing.exists(self.dir, name.rsplit(".", 1)[0] + LOG_SUFFIX):
                    path = self.dir / name
                    fileops.delete(path)
                    self.load_result.removed_files.append((str(path), "orphaned index file"))
            elif name.endswith(LOG_SUFFIX):
                missing_index = not listing.exists(self.dir, name[: -len(LOG_SUFFIX)] + INDEX_SUFFIX)
                seg = Segment(self.dir, off, self.config, now_ms=self.clock())
                self._add_segment(seg)
                if missing_index:
                    self._recover_segment(seg, log_start_offset)

    def _recover_segment(self, seg: Segment, log_start_offset: int) -> SegmentScan:
        """Rebuild producer state up to the segment, then Kafka's LogSegment.recover.

        Kafka's rebuild deletes the snapshots above the segment's base offset first; here they
        go once the segment is recovered, except the one its snapshot has just replaced in
        place (a partition recovered after a crash rewrites the snapshot at its log end offset:
        a rename over the old file, not an unlink and a new file). The files left are the same;
        a crash in between leaves a load that is unclean again and recovers the segment again."""
        psm = ProducerStateManager(self.dir, expiration_ms=self.config.producer_id_expiration_ms)
        snapshots = psm.snapshot_files()
        above = [off for off in snapshots if off > seg.base_offset]
        below = {off: path for off, path in snapshots.items() if off <= seg.base_offset}
        self._replay_producer_state(psm, log_start_offset, seg.base_offset, False, below)
        cache = self.leader_epoch_cache

        def on_batch(batch: R.Batch) -> None:
            if batch.magic >= 2:
                cache.assign_if_newer(batch.partition_leader_epoch, batch.base_offset)
            completed = psm.update(batch)
            if completed is not None:
                if completed.is_aborted:
                    seg.update_txn_index(psm.aborted_txn(completed))
                psm.complete_txn(completed)

        try:
            scan = seg.recover(on_batch)
        except fx.IndexOffsetOverflowError as exc:
            exc.segment = seg
            raise
        written = psm.take_snapshot()
        for off in above:
            if written is None or off != psm.last_snapshot_offset:
                psm.delete_snapshot(off)
        self.load_result.recovered.append(scan)
        return scan

    def _recover_log(
        self, had_clean_shutdown: bool, recovery_point: int, log_start_offset: int
    ) -> tuple[int, int]:
        if not had_clean_shutdown:
            unflushed = [s for s in self.segments_in_range(recovery_point, 2**63) if s.base_offset >= 0]
            # segments_in_range includes the floor segment of the recovery point
            for i, seg in enumerate(unflushed):
                already = any(
                    r is not None and r.base_offset == seg.base_offset for r in self.load_result.recovered
                )
                scan = None if already else self._recover_segment(seg, log_start_offset)
                if scan is not None and scan.truncated_bytes > 0:
                    for later in unflushed[i + 1 :]:
                        self._delete_segment_now(later, "after a truncated segment")
                    break
        log_end = None
        if self._bases:
            log_end = self.active_segment.read_next_offset()
            if log_end < log_start_offset:
                for seg in list(self.segments):
                    self._delete_segment_now(seg, "log end offset below the log start offset")
                self.leader_epoch_cache.clear()
                self.producer_state.truncate_fully_and_start_at(log_start_offset)
                log_end = None
        if not self._bases:
            seg = self._new_segment(log_start_offset)
            self._add_segment(seg)
            self.load_result.created_segment = log_start_offset
        if had_clean_shutdown and log_end is not None:
            return log_end, log_end
        log_end = log_end if log_end is not None else self.active_segment.read_next_offset()
        return log_end, min(recovery_point, log_end)

    def _delete_segment_now(self, seg: Segment, why: str) -> None:
        self._remove_segment(seg.base_offset)
        seg.delete_files()
        self.producer_state.delete_snapshot(seg.base_offset)
        self.load_result.deleted_segments.append(seg.base_offset)
        self.load_result.removed_files.append((str(seg.log_path), why))

    def rebuild_producer_state(
        self, now_ms: int | None = None, *, damage: list[ReadDamage] | None = None
    ) -> None:
        """A read-only log's producer state as the broker rebuilds it at start-up (the same
        stray-snapshot rule, snapshot choice and replay, UnifiedLog.rebuildProducerState),
        nothing written: the offline readers' one way to it (`consume --log-dir`, dry runs,
        `transactions --log-dir`). ``now_ms``: the instant producer expiry is judged at
        (None: the log's clock).  ``damage``: a batch the replay cannot read ends it there
        (the state is that of the batches before it), appended as a :class:`ReadDamage`,
        instead of raising FormatError."""
        if self.writable:
            raise ValueError(
                "rebuild_producer_state is for a read-only log (a writable one rebuilt it at load)"
            )
        psm = self.producer_state
        snapshots = psm.remove_stray_snapshots(self._bases)
        try:
            self._replay_producer_state(
                psm,
                self.log_start_offset,
                self.log_end_offset,
                self._had_clean_shutdown,
                snapshots,
                now_ms=now_ms,
            )
        except FormatError as exc:
            if damage is None:
                raise
            damage.append(ReadDamage.of(self.dir, exc, None, PRODUCERS_BEFORE))

    def _replay_producer_state(
        self,
        psm: ProducerStateManager,
        log_start_offset: int,
        last_offset: int,
        reload_from_clean_shutdown: bool,
        snapshots: dict[int, Path] | None = None,
        *,
        now_ms: int | None = None,
    ) -> None:
        """Kafka's UnifiedLog.rebuildProducerState; ``snapshots``: the snapshot files as just
        listed (None: list them)."""
        to_snapshot: set[int] = {last_offset}
        if self._bases:
            last_base = self._bases[-1]
            to_snapshot.add(last_base)
            if len(self._bases) > 1:
                to_snapshot.add(self._bases[-2])
        now = self.clock() if now_ms is None else now_ms
        if snapshots is None:
            snapshots = psm.snapshot_files()
        if not snapshots and reload_from_clean_shutdown:
            for off in sorted(to_snapshot):
                psm.map_end_offset = off
                psm.take_snapshot()
            return
        empty_before = not psm.producers and psm.map_end_offset >= last_offset
        psm.truncate_and_reload(log_start_offset, last_offset, now, snapshots=snapshots)
        if last_offset > psm.map_end_offset and not empty_before:
            for seg in self.segments_in_range(psm.map_end_offset, last_offset):
                start = max(seg.base_offset, psm.map_end_offset, log_start_offset)
                psm.map_end_offset = start
                if seg.base_offset in to_snapshot and psm.writable:
                    psm.take_snapshot()
                found = seg.translate_offset(start)
                if found is None:
                    continue
                for batch in seg.batches(found.position):
                    if batch.last_offset >= last_offset:
                        break
                    completed = psm.update(batch)
                    if completed is not None:
                        psm.complete_txn(completed)
        psm.map_end_offset = last_offset
        psm.take_snapshot()

    @_locked
    def split_overflowed_segment(self, seg: Segment) -> list[Segment]:
        """Kafka's splitOverflowedSegment (KAFKA-6264): a segment holding offsets more than
        Int32.MAX above its base is copied into ``.cleaned`` segments that each fit, in
        chunks of whole batches, and swapped in with :meth:`replace_segments`."""
        self._require_writable()
        new: list[Segment] = []
        chunk: list[R.Batch] = []
        cur: Segment | None = None

        def flush_chunk() -> None:
            if chunk and cur is not None:
                best = max(chunk, key=lambda b: b.max_timestamp)
                data = b"".join(bytes(b.raw()) for b in chunk)
                cur.append(chunk[-1].last_offset, best.max_timestamp, best.last_offset, data)
                chunk.clear()

        fr = seg.file_records()
        try:
            chunk_bytes = 0
            for b in fr.batches():
                if cur is None or not cur.can_convert_to_relative_offset(b.last_offset):
                    flush_chunk()
                    base = b.base_offset
                    for stale in segment_file_paths(self.dir, base, CLEANED_SUFFIX):
                        fileops.delete(stale)
                    cur = Segment(self.dir, base, self.config, suffix=CLEANED_SUFFIX, create=True)
                    new.append(cur)
                    chunk_bytes = 0
                elif chunk_bytes + b.size > 64 * 1024:
                    flush_chunk()
                    chunk_bytes = 0
                chunk.append(b)
                chunk_bytes += b.size
            flush_chunk()
        finally:
            chunk.clear()
            fr.close()
        for s in new:
            s.on_become_inactive()
        self.replace_segments(new, [seg])
        self.producer_state.delete_snapshot(seg.base_offset)
        self.load_result.renamed_files.append(
            (str(seg.log_path), f"split into {[s.base_offset for s in new]}")
        )
        return new

    # ------------------------------------------------------------------ partition.metadata
    def assign_topic_id(self, topic_id: Uuid) -> None:
        """Write ``partition.metadata`` (Kafka writes it before the first append)."""
        if self.topic_id is not None and self.topic_id != topic_id:
            raise FormatError(
                f"{self.dir}: partition.metadata has topic id {self.topic_id}, not {topic_id}",
                kind="topic_id_mismatch",
            )
        if self.topic_id is None or not (self.dir / PARTITION_METADATA_FILE).exists():
            self._require_writable()
            fileops.atomic_write(
                self.dir / PARTITION_METADATA_FILE, props.encode_partition_metadata(topic_id)
            )
        self.topic_id = topic_id

    # ------------------------------------------------------------------ append
    def append_as_leader(
        self,
        records,
        leader_epoch: int,
        *,
        timestamp_type: str | None = None,
        validated: bool = False,
        origin: str = ORIGIN_CLIENT,
        batches: list | None = None,
        writer=None,
    ) -> AppendInfo:
        """Assign offsets from the log end offset by rewriting the batch headers in place
        (``baseOffset``, ``partitionLeaderEpoch``; for LogAppendTime also the timestamp and
        CRC) and append.  LogValidator's rebuild is the one exception (``validate_append``
        decides: legacy magic 0/1 input, or a compression.type naming another codec): one new
        v2 batch of every record.  ``validated``: the caller (the produce path) has already run
        ``analyze_and_validate`` on these very batches (Kafka's order); otherwise it runs here.

        ``origin`` is Kafka's AppendOrigin: a CLIENT append is checked against producer
        state first (UnifiedLog.analyzeAndValidateProducerState): a retried batch returns
        the original's offsets with ``duplicate`` set and appends nothing; an old epoch or a
        sequence gap raises ProducerStateError.  ``batches``: the caller's parse of
        ``records`` (used only when the bytes are appended in place).  COORDINATOR appends (the group and
        transaction coordinators' own records and markers) check only a marker's producer
        and coordinator epochs (ProducerAppendInfo.appendEndTxnMarker).  ``writer``: the
        append writer (log/append_writer.py) the bytes are queued to instead of written here
        (the produce path: the answer waits for ``info.write_seq``).  Runs holding the log's
        lock (``with`` here rather than ``_locked``: the produce path's call, without a wrapper's
        ``*args, **kwargs``)."""
        with self.lock:
            self._require_writable()
            if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
                buf = records  # the request's own buffer: offsets are written into it, no copy
            else:
                buf = bytearray(records)
                batches = None  # parsed over other bytes
            # ``batches``: the caller's parse of these very bytes (the produce path's validation)
            batches = list(R.iter_batches(buf)) if batches is None else batches
            if not batches:
                raise CorruptRecordError("no complete batch in the records to append", 0)
            ts_type = timestamp_type or self.config.message_timestamp_type
            now = self.clock()
            if not validated:
                self.analyze_and_validate(batches, origin)
            # UnifiedLog.append: size and CRC, then LogValidator's batch and record rules for every
            # origin here (CLIENT and COORDINATOR; on the batches as they came: a legacy message set
            # is its own batches there), then producer state
            codec = validate_append(
                batches,
                origin == ORIGIN_CLIENT,
                self.config,
                ts_type,
                now,
                self.dir,
                self.config.target_codec,
            )
            if codec is not None:
                buf, batches = self._rebuild(batches, codec, now if ts_type == "LogAppendTime" else None)
            # UnifiedLog.append: after LogValidator, before producer state
            self._check_segment_size(batches[-1].end)
            if origin == ORIGIN_CLIENT:
                for b in batches:
                    dup = self.producer_state.check_client_append(b)
                    if dup is not None:
                        return AppendInfo(
                            dup.first_offset,
                            dup.last_offset,
                            dup.timestamp,
                            dup.last_offset,
                            dup.timestamp if ts_type == "LogAppendTime" else None,
                            0,
                            0,
                            self.log_start_offset,
                            duplicate=True,
                        )
            elif origin == ORIGIN_COORDINATOR:
                for b in batches:
                    self.producer_state.check_marker_append(b)
            offset = self._log_end_offset
            first = offset
            append_time = now if ts_type == "LogAppendTime" else None
            max_ts, max_ts_offset = R.NO_TIMESTAMP, -1
            set_base_offset = R.set_base_offset
            set_epoch = R.set_partition_leader_epoch
            for b in batches:
                pos = b.position
                set_base_offset(buf, pos, offset)
                set_epoch(buf, pos, leader_epoch)
                # keep the parsed headers in step with the bytes (no second parse)
                b.base_offset = offset
                b.partition_leader_epoch = leader_epoch
                if append_time is not None:
                    R.set_log_append_time(buf, pos, append_time)
                    b.attributes |= R.TIMESTAMP_TYPE_MASK
                    b.max_timestamp = append_time
                last = offset + b.last_offset_delta
                ts = b.max_timestamp
                if ts > max_ts:
                    max_ts, max_ts_offset = ts, last
                offset = last + 1
            end = batches[-1].end
            # Kafka's trimInvalidBytes: a trailing partial batch is dropped, not rejected
            data = buf if end == len(buf) else memoryview(buf)[:end]
            info = AppendInfo(first, offset - 1, max_ts, max_ts_offset, append_time, len(batches), end)
            self.leader_epoch_cache.assign_if_newer(leader_epoch, first)
            self._append(data, batches, info, now, writer)
            return info

    def analyze_and_validate(self, batches: list[R.Batch], origin: str = ORIGIN_CLIENT) -> None:
        """UnifiedLog.analyzeAndValidateRecords' checks of a leader append, batch by batch: a
        client's v2 batch starts at offset 0, then (every origin) the size against
        max.message.bytes, the CRC and a known compression codec."""
        max_bytes = self.config.max_message_bytes
        client = origin == ORIGIN_CLIENT
        for b in batches:
            if client and b.magic >= 2 and b.base_offset != 0:
                raise InvalidRecordError(
                    f"The baseOffset of the record batch in the append to {self.dir.name} should be 0, "
                    f"but it is {b.base_offset}",
                    b.position,
                )
            if b.size > max_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {self.dir.name} is {b.size} bytes "
                    f"which exceeds the maximum configured value of {max_bytes}.",
                    b.position,
                )
            # Kafka's isValid: size and CRC; a client's offset range and count are
            # LogValidator's (validator._validate_batch: INVALID_RECORD), not a corrupt batch here
            b.ensure_checksum()
            if b.codec not in compression.CODEC_NAMES:  # compression.is_known, without a call per batch
                # the compression type is read here (sourceCompression); no codec has these bits
                raise UnknownCodecError(
                    f"Unknown compression type id: {b.codec} in the batch in the append to {self.dir.name}",
                    b.position,
                )

    @_locked
    def append_as_follower(self, records) -> AppendInfo:
        """Append batches with their offsets as given (replication); must not go backwards."""
        self._require_writable()
        view = memoryview(records)
        batches = list(R.iter_batches(view))
        if not batches:
            raise CorruptRecordError("no complete batch in the records to append", 0)
        first = batches[0].base_offset if batches[0].magic >= 2 else batches[0].last_offset
        if first < self._log_end_offset:
            raise FormatError(
                f"out of order offsets: first offset {first} is below the log end offset {self._log_end_offset}",
                0,
                kind="invalid_offset",
            )
        max_ts, max_ts_offset = R.NO_TIMESTAMP, -1
        prev = None
        for b in batches:
            b.ensure_valid()
            if prev is not None and b.last_offset <= prev:
                raise FormatError(
                    "out of order offsets in the appended batches", b.position, kind="invalid_offset"
                )
            prev = b.last_offset
            if b.max_timestamp > max_ts:
                max_ts, max_ts_offset = b.max_timestamp, b.last_offset
            if b.magic >= 2:
                self.leader_epoch_cache.assign_if_newer(b.partition_leader_epoch, b.base_offset)
        end = batches[-1].end
        self._check_segment_size(end)
        info = AppendInfo(first, batches[-1].last_offset, max_ts, max_ts_offset, None, len(batches), end)
        self._append(view[:end], batches, info, self.clock())
        return info

    def _rebuild(self, batches: list[R.Batch], codec: int, log_append_time: int | None):
        """LogValidator's rebuild of an append (validator.rebuild_codec says when): one v2
        batch of ``codec`` holding every record, whose size is checked against
        max.message.bytes again (messageSizeMaybeChanged)."""
        try:
            buf = bytearray(R.rebuild_as_v2(batches, codec, log_append_time=log_append_time))
        except ValueError as exc:
            raise IllegalArgumentError(
                f"{exc} in the append to {self.dir.name}", batches[0].position
            ) from None
        rebuilt = list(R.iter_batches(buf))
        max_bytes = self.config.max_message_bytes
        for b in rebuilt:
            if b.size > max_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {b.size} bytes in append to partition {self.dir.name} "
                    f"which exceeds the maximum configured size of {max_bytes}.",
                    b.position,
                )
        return buf, rebuilt

    def _append(self, data, batches: list[R.Batch], info: AppendInfo, now_ms: int, writer=None) -> None:
        seg = self.active_segment
        if self.should_roll(seg, len(data), info, now_ms):
            seg = self.roll(info.first_offset)
        info.write_seq = seg.append(
            info.last_offset, info.max_timestamp, info.offset_of_max_timestamp, data, writer
        )
        self._log_end_offset = info.last_offset + 1
        psm = self.producer_state
        for b in batches:
            completed = psm.update(b)
            if completed is not None:
                if completed.is_aborted:
                    seg.update_txn_index(psm.aborted_txn(completed))
                psm.complete_txn(completed)
        psm.map_end_offset = self._log_end_offset
        info.log_start_offset = self.log_start_offset
        if self._log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        for listener in self.listeners:
            listener(self, self._log_end_offset)

    def add_append_listener(self, listener: Callable[[Log, int], None]) -> None:
        self.listeners = (*self.listeners, listener)

    def remove_append_listener(self, listener: Callable[[Log, int], None]) -> None:
        rest = list(self.listeners)
        rest.remove(listener)
        self.listeners = tuple(rest)

    # ------------------------------------------------------------------ rolling
    def _new_jitter(self) -> int:
        limit = min(self.config.segment_jitter_ms, self.config.effective_segment_ms)
        return random.randrange(limit) if limit > 0 else 0

    def should_roll(self, seg: Segment, size: int, info: AppendInfo, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll."""
        reached_ms = (
            seg.time_waited_for_roll(now_ms, info.max_timestamp)
            > self.config.effective_segment_ms - self._jitter
        )
        return (
            seg.size > self.config.segment_bytes - size
            or (seg.size > 0 and reached_ms)
            or seg.offset_index.is_full()
            or seg.time_index.is_full()
            or not seg.can_convert_to_relative_offset(info.last_offset)
        )

    def _check_segment_size(self, size: int) -> None:
        """UnifiedLog.append's check of an append's bytes against segment.bytes (every origin)."""
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.dir.name}, which "
                f"exceeds the maximum configured segment size of {self.config.segment_bytes}."
            )

    @_locked
    def roll(self, expected_next_offset: int | None = None) -> Segment:
        """Start a new active segment at max(expected, log end offset)."""
        self._require_writable()
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self.active_segment
        if new_offset in self._segments:
            if active.base_offset == new_offset and active.size == 0:
                return active
            raise FormatError(
                f"{self.dir}: trying to roll to offset {new_offset}, which already has a segment"
            )
        if new_offset < active.base_offset:
            raise FormatError(f"{self.dir}: trying to roll to offset {new_offset} below the active segment")
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = self.dir / f"{new_offset:020d}{suffix}"
            if stale.exists():
                fileops.delete(stale)
        active.on_become_inactive()
        seg = self._new_segment(new_offset)
        self._add_segment(seg)
        self._jitter = self._new_jitter()
        self.producer_state.map_end_offset = new_offset
        scheduled = self.flush_on_roll and self.flush_scheduler is not None
        self.producer_state.take_snapshot(sync=self.flush_on_roll and not scheduled)
        if scheduled:
            # Kafka's roll schedules "flush-log" instead of fsyncing in the append path
            self.flush_scheduler(self, new_offset)
        elif self.flush_on_roll:
            self.flush(new_offset)
        return seg

    # ------------------------------------------------------------------ flush
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment below ``offset`` (default: the log end offset) and advance
        the recovery point to it."""
        self._require_writable()
        with self.lock:
            offset = self._log_end_offset if offset is None else offset
            if offset <= self.recovery_point:
                return
            segments = self.segments_in_range(self.recovery_point, offset)
            snapshot = self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        # the fsyncs run outside the lock (Kafka's LocalLog.flush); appends go on meanwhile
        for seg in segments:
            seg.flush()
        if self.flush_scheduler is not None:
            # a scheduled flush after a roll also makes the roll's producer snapshot durable
            fileops.fsync_file(snapshot)
        fileops.fsync_dir(self.dir)
        with self.lock:
            if offset > self.recovery_point:
                self.recovery_point = offset

    # ------------------------------------------------------------------ reads
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        isolation: str = ISOLATION_LOG_END,
        min_one_message: bool = True,
    ) -> FetchInfo:
        """Kafka's read path: slices of segment files (zero copy), never copied bytes."""
        end = self._log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
        if isolation == ISOLATION_HIGH_WATERMARK:
            upper = self.high_watermark
        elif isolation == ISOLATION_COMMITTED:
            upper = self.last_stable_offset
        else:
            upper = end
        info = FetchInfo(
            offset,
            high_watermark=self.high_watermark,
            log_end_offset=end,
            log_start_offset=self.log_start_offset,
            last_stable_offset=self.last_stable_offset,
        )
        if offset >= upper:
            return info
        upper_seg = self.floor_segment(upper)
        upper_pos = None
        if upper_seg is not None and upper < end:
            found = upper_seg.translate_offset(upper)
            upper_pos = found.position if found is not None else upper_seg.size
        seg = self.floor_segment(offset)
        while seg is not None:
            max_position = upper_pos if (upper_seg is seg and upper_pos is not None) else seg.size
            piece = seg.read(offset, max_bytes, max_position, min_one_message)
            if piece is not None:
                if piece.size:
                    info.slices.append(piece)
                if isolation == ISOLATION_COMMITTED:
                    info.aborted_transactions = self._collect_aborted(seg, offset, piece)
                return info
            seg = self.higher_segment(seg.base_offset)
        return info

    def _collect_aborted(self, seg: Segment, fetch_offset: int, piece: SegmentSlice) -> list[fx.AbortedTxn]:
        upper = seg.offset_index.fetch_upper_bound_offset(piece.position, piece.size)
        if upper is None:
            nxt = self.higher_segment(seg.base_offset)
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
        return self.collect_aborted(fetch_offset, upper, seg)

    def collect_aborted(self, start: int, upper: int, seg: Segment | None = None) -> list[fx.AbortedTxn]:
        """UnifiedLog.collectAbortedTransactions over [start, upper): what the transaction indexes
        of ``seg`` (default: the segment holding ``start``) and the segments above it hold."""
        s = self.floor_segment(start) if seg is None else seg
        out: list[fx.AbortedTxn] = []
        while s is not None:
            found, done = s.txn_index.collect_aborted(start, upper)
            out.extend(found)
            if done:
                break
            s = self.higher_segment(s.base_offset)
        return out

    def batches(
        self, start_offset: int | None = None, *, damage: list[ReadDamage] | None = None
    ) -> Iterator[R.Batch]:
        """Every batch from ``start_offset`` (default: the log start) to the end (offline tools).

        ``damage``: read what can be read instead of raising FormatError, and say where: a
        batch failing its CRC is read as it is, an entry that does not parse ends its segment's
        walk (the next segment is read), each appended to ``damage`` as a :class:`ReadDamage`."""
        start = self.log_start_offset if start_offset is None else start_offset
        for seg in self.segments_in_range(start, 2**63):
            if damage is not None:
                yield from self._readable_batches(seg, start, damage)
                continue
            found = seg.translate_offset(start)
            if found is None:
                continue
            yield from seg.batches(found.position)

    def replay(
        self,
        feed: Callable[[R.Batch], None],
        damage: list[ReadDamage],
        *,
        keep: Callable[[R.Batch], bool] | None = None,
        skipped: list[str] | None = None,
    ) -> None:
        """An internal topic's loader fed every readable batch from the log start, offline (the
        group and transaction readers of a log dir or a backup): damage is read past as
        :meth:`batches` with ``damage`` does; a batch ``feed`` cannot decode (a compressed
        stream its codec cannot read) is left out from there on, and the records the loader
        itself skipped (``skipped``: its list of them, one text each) are said with the batch
        that held them, each a :class:`ReadDamage` in ``damage``.  ``keep``: which batches to
        feed (an instant's cut-off)."""
        for b in self.batches(self.log_start_offset, damage=damage):
            if keep is not None and not keep(b):
                continue
            before = len(skipped) if skipped is not None else 0
            said: list[tuple[str, str]] = []
            try:
                feed(b)
            except FormatError as exc:
                said.append((exc.message, BATCH_LEFT_OUT))
            said += [(f"a record skipped: {text}", RECORD_LEFT_OUT) for text in (skipped or [])[before:]]
            if said:  # the file only when there is something to say (a lookup a batch otherwise)
                path = self.floor_segment(b.base_offset).log_path
                damage.extend(ReadDamage(path, b.position, b.base_offset, m, a) for m, a in said)

    def _readable_batches(self, seg: Segment, start: int, damage: list[ReadDamage]) -> Iterator[R.Batch]:
        at = max(start, seg.base_offset)

        def said(exc: FormatError, offset: int, action: str) -> None:
            damage.append(ReadDamage.of(seg.log_path, exc, offset, action))

        try:
            found = seg.translate_offset(start)
        except FormatError as exc:  # an index entry into damage
            said(exc, at, REST_LEFT_OUT)
            return
        if found is not None:
            yield from read_past_damage(seg.batches(found.position), said, at)

    # ------------------------------------------------------------------ offsets
    def list_offset(self, spec: int, upper: int) -> tuple[int, int, int] | None:
        """The (timestamp, offset, leader epoch) ListOffsets answers for ``spec`` on this local
        log (Partition.fetchOffsetForTimestamp over UnifiedLog.fetchOffsetByTimestamp, Kafka
        3.8), ``upper`` the last fetchable offset (high watermark, last stable offset, or the log
        end for a replica); None: no such offset (-1, -1); an epoch of -1: none. The broker's
        handler and the offline ``topics get-offsets --log-dir`` both answer with it. ``spec``
        below LATEST_TIERED_TIMESTAMP raises ValueError (the handler's INVALID_REQUEST).
        Earliest: the leader-epoch cache's first epoch if it starts at or below the log start;
        latest: its latest epoch; by time and max-timestamp: the epoch written in the batch
        holding the offset found (FileRecords.searchForTimestamp, RecordBatch.partitionLeaderEpoch),
        not the cache's."""
        if spec in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # without tiered storage the local log start is the log start (KIP-405)
            entries = self.leader_epoch_cache.entries
            epoch = entries[0][0] if entries and entries[0][1] <= self.log_start_offset else -1
            return R.NO_TIMESTAMP, self.log_start_offset, epoch
        if spec == LATEST_TIMESTAMP:
            latest = self.leader_epoch_cache.latest_epoch
            return R.NO_TIMESTAMP, upper, -1 if latest is None else latest
        if spec == LATEST_TIERED_TIMESTAMP:
            return None  # no tiered offset: Kafka answers -1 with no error (KIP-1005)
        if spec == MAX_TIMESTAMP:
            return self.max_timestamp_offset(upper)
        if spec < 0:
            raise ValueError(f"ListOffsets timestamp {spec} names no offset")
        return self.offset_for_timestamp(spec, upper)

    def offset_for_timestamp(self, target: int, upper: int | None = None) -> tuple[int, int, int] | None:
        """ListOffsets by time: (timestamp, offset, leader epoch of its batch) of the first record
        at or after ``target`` and at or above the log start offset, if it is below ``upper``
        (default: the log end offset). Starts in the first segment whose largest timestamp
        reaches ``target``, at the time index's entry for it."""
        upper = self._log_end_offset if upper is None else upper
        start_offset = self.log_start_offset
        for seg in self.segments:
            if seg.base_offset >= upper:
                break
            if seg.max_timestamp_so_far < target:
                continue
            entry = seg.time_index.lookup(target)
            found = seg.translate_offset(max(entry.offset, start_offset, seg.base_offset))
            if found is None:
                continue
            for b in seg.batches(found.position):
                if b.last_offset < start_offset:
                    continue
                if b.base_offset >= upper if b.magic >= 2 else b.last_offset >= upper:
                    return None
                if b.max_timestamp < target:
                    continue
                for r in b.records():
                    if r.timestamp >= target and start_offset <= r.offset < upper:
                        return r.timestamp, r.offset, max(b.partition_leader_epoch, -1)
        return None

    def max_timestamp_offset(self, upper: int) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP as Kafka 3.7.1/3.8 answer it (UnifiedLog.fetchOffsetByTimestamp
        after KAFKA-16310, which 3.7.0 had broken by answering the batch's last offset): the first
        batch holding the log's largest timestamp (in the first segment whose largest timestamp
        it is; any batch, a control batch's too, as Kafka looks at every batch), the offset of
        its first record with that timestamp (RecordBatch.offsetOfMaxTimestamp) and the batch's
        leader epoch. None when no record holds it or that offset is not below ``upper``
        (Partition.fetchOffsetForTimestamp keeps no answer at or above the last fetchable offset:
        no smaller timestamp is answered instead)."""
        segs = [seg for seg in self.segments if seg.size > 0]
        if not segs:
            return None
        top = max(seg.max_timestamp_so_far for seg in segs)
        seg = next(seg for seg in segs if seg.max_timestamp_so_far == top)
        best = next((b for b in seg.batches() if b.max_timestamp == top), None)
        if best is None or best.magic == 0:
            return None  # a v0 message has no timestamp (offsetOfMaxTimestamp: empty)
        for r in best.records():
            if r.timestamp == best.max_timestamp:
                return (
                    (r.timestamp, r.offset, max(best.partition_leader_epoch, -1))
                    if r.offset < upper
                    else None
                )
        return None

    @_locked
    def become_leader(self, leader_epoch: int) -> int:
        """This broker leads the partition from ``leader_epoch`` on (Kafka's makeLeader): the
        epoch starts at the log end offset, recorded in the leader-epoch cache at once unless
        the cache has that epoch or a later one. Returns the epoch's start offset."""
        self.leader_epoch_cache.assign_if_newer(leader_epoch, self._log_end_offset)
        return self._log_end_offset

    def update_high_watermark(self, offset: int) -> int:
        self.high_watermark = max(self.log_start_offset, min(offset, self._log_end_offset))
        return self.high_watermark

    @_locked
    def increment_log_start_offset(self, new_start: int) -> bool:
        """Raise the log start offset (DeleteRecords, retention); never above the high watermark."""
        if new_start > self.high_watermark:
            raise OffsetOutOfRangeError(new_start, self.log_start_offset, self.high_watermark)
        if new_start <= self.log_start_offset:
            return False
        self.log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.delete_snapshots_below(self.floor_segment(new_start).base_offset)
        return True

    # ------------------------------------------------------------------ truncation and deletion
    @_locked
    def truncate_to(self, target: int) -> bool:
        """Follower truncation: remove every offset >= ``target``."""
        self._require_writable()
        if target < 0:
            raise ValueError("cannot truncate to a negative offset")
        if target >= self._log_end_offset:
            # UnifiedLog.truncateTo: the epoch cache is truncated anyway -- a broker that became
            # leader wrote (epoch, log end) and appended nothing before losing leadership keeps
            # an entry no other replica has, and would diverge at the same offset for ever
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if target < self.log_start_offset:
            self.truncate_fully_and_start_at(target)
            return True
        for base in [b for b in self._bases if b > target]:
            self._delete_segment_now(self._segments[base], "log truncation")
        if not self._bases:
            self._add_segment(self._new_segment(target))
        self.active_segment.truncate_to(target, self.clock())
        self.active_segment.resize_indexes()
        self._log_end_offset = target
        self.leader_epoch_cache.truncate_from_end(target)
        self.recovery_point = min(self.recovery_point, target)
        self.high_watermark = min(self.high_watermark, target)
        self._replay_producer_state(self.producer_state, self.log_start_offset, target, False)
        return True

    @_locked
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        self._require_writable()
        for seg in list(self.segments):
            self._delete_segment_now(seg, "full truncation")
        self._add_segment(self._new_segment(new_offset))
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self._log_end_offset = self.log_start_offset = self.recovery_point = self.high_watermark = new_offset

    @_locked
    def delete_segments(self, segments: list[Segment], *, async_delete: bool = False) -> None:
        """Kafka's deletion dance: rename the files ``.deleted`` and drop them from the map;
        the log start offset moves to the next remaining segment.  With ``async_delete``
        the ``.deleted`` files stay for the caller to remove later
        (``file.delete.delay.ms``); otherwise they are removed now."""
        self._require_writable()
        for seg in segments:
            if len(self._bases) == 1 and seg is self.active_segment:
                self.roll()
            self._remove_segment(seg.base_offset)
            if not self.defer_deletes:
                seg.close()
            seg.change_file_suffixes("", DELETED_SUFFIX)
            snap = self.dir / f"{seg.base_offset:020d}{SNAPSHOT_SUFFIX}"
            snap_deleted = snap.with_name(snap.name + DELETED_SUFFIX)
            if snap.exists():
                fileops.replace(snap, snap_deleted, sync=False)
            if self.defer_deletes:
                # still open for in-flight fetches; closed and deleted after the delay
                self._retire(seg, delete_files=not async_delete)
                if not async_delete:
                    fileops.delete(snap_deleted)
            elif not async_delete:
                for path in seg.files() + [snap_deleted]:
                    fileops.delete(path)
        if self._bases and self._bases[0] > self.log_start_offset:
            self.log_start_offset = self._bases[0]
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        fileops.fsync_dir(self.dir)

    @_locked
    def replace_segments(self, new_segments: list[Segment], old_segments: list[Segment]) -> None:
        """Kafka's replaceSegments (cleaner, split): ``.cleaned`` -> ``.swap`` (descending),
        old segments renamed ``.deleted`` and removed, ``.swap`` suffix dropped.  A crash at
        any step is finished or rolled back by the next load."""
        self._require_writable()
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        for seg in reversed(new_sorted):
            seg.flush()
            if seg.suffix == CLEANED_SUFFIX:
                seg.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        new_bases = {s.base_offset for s in new_sorted}
        for seg in old_segments:
            if seg.base_offset in self._segments and self._segments[seg.base_offset] is seg:
                if seg.base_offset not in new_bases:
                    # a base the new segments take over stays mapped until the swap below,
                    # so a lock-free reader never finds a hole
                    self._remove_segment(seg.base_offset)
            if not self.defer_deletes:
                seg.close()
            seg.change_file_suffixes("", DELETED_SUFFIX)
            if not self.defer_deletes:
                for path in seg.files():
                    fileops.delete(path)
            else:
                self._retire(seg, delete_files=True)
        for seg in new_sorted:
            seg.change_file_suffixes(SWAP_SUFFIX, "")
            self._add_segment(seg)
        for base in new_bases:
            if base not in self._segments:
                raise AssertionError("replaced segment missing")
        fileops.fsync_dir(self.dir)

    # ------------------------------------------------------------------ close
    def close(self) -> None:
        """Clean close: flush, snapshot producer state at the log end, trim the active segment."""
        with self.lock:
            if self.writable and self._bases:
                self.flush()
                self.producer_state.map_end_offset = self._log_end_offset
                self.producer_state.take_snapshot()
            self._close_segments(trim=self.writable)
            self.closed = True
        self.close_retired()

    def release(self) -> None:
        """Let go of the files after a failure: no flush, no producer snapshot, no trim (the
        next start-up treats the partition as not shut down cleanly)."""
        with self.lock:
            self._close_segments(trim=False)
            self.closed = True
        self.close_retired()

    def _close_segments(self, trim: bool) -> None:
        for seg in self._segments.values():
            try:
                seg.close(trim=trim)
            except OSError:
                if trim:
                    raise

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _require_writable(self) -> None:
        if not self.writable:
            raise OSError(f"{self.dir}: log opened read-only")
