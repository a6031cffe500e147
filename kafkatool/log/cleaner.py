"""The log cleaner (compaction): Kafka's LogCleanerManager.cleanableOffsets, Cleaner and
MemoryRecords.filterTo, on the engine's Log and Segment (notes/storage.md section 8).

One cleaning round:

1. The cleanable range: the first dirty offset (the cleaner-offset checkpoint,
   reset to the log start offset when below it or above the log end) up to
   the first uncleanable offset (min of the last stable offset, the active
   segment's base and the first dirty segment younger than
   ``min.compaction.lag.ms``), rounded down to a segment base.
2. The offset map: key -> latest offset over the dirty segments, skipping the
   data of aborted transactions (``.txnindex``) and control batches.  When the
   map is full the round stops there (the map's latest offset + 1 becomes the
   new checkpoint and the next round goes on from it).
3. The rewrite: every segment from the log start to that end is recopied,
   grouped under ``segment.bytes`` / ``segment.index.bytes`` / an offset span
   of 2^31-1 into one ``.cleaned`` segment per group, batch by batch:

   * a record is kept when it is past the map, or has a key whose mapped
     offset is not newer and is not a tombstone whose delete horizon passed
     (v2: the batch's horizon; v0/v1: the segment's mtime against the last
     clean segment's mtime minus ``delete.retention.ms``); keyless records go;
   * batches of aborted transactions go; an ABORT marker stays until none of
     its data is left (its ``.txnindex`` entry is copied meanwhile), a COMMIT
     marker once no data of its transaction was seen; a removable marker is
     first stamped with a delete horizon and removed in a later round;
   * a batch holding an active producer's last sequence (or its last marker),
     and the batch ending at the round's upper bound, stay even when empty
     (a 61-byte header); other empty batches go;
   * a batch that keeps every record and needs no new horizon is copied byte
     for byte; one that loses records, or gets a tombstone horizon
     (now + ``delete.retention.ms``), is re-encoded with its codec, base
     offset and last offset delta (so the producer's last sequence survives);
     legacy wrappers are re-encoded with the same magic from the first kept
     offset.
4. The swap, through the engine: ``.cleaned`` flushed, given the last source
   segment's mtime, then ``Log.replace_segments`` (``.cleaned`` -> ``.swap``,
   old segments ``.deleted`` and removed, ``.swap`` suffix dropped).  A crash
   at any step is finished or rolled back by the loader (section 6).

A record the decoder refuses (the key scan refuses the same, headers included)
stops the round as it stops Kafka's (the exception out of Cleaner.clean becomes a
LogCleaningException and the partition is marked uncleanable): groups already
swapped in stay, the group being written is discarded, the later segments and
the checkpoint stay as they were.  The error names the segment file, the batch
offset and the byte position (:class:`UnreadableBatchError`); ``compact``
reports it and goes on, the broker's cleaner skips the partition from then on.

Offsets never change and no record is duplicated: the cleaner only drops.
Index entries are written per batch (Kafka's cleaner writes one per read
chunk), so a rebuilt index equals the written one.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import compression
from kafkatool.formats import index as fx
from kafkatool.formats import records as R
from kafkatool.formats.errors import CorruptRecordError, FormatError
from kafkatool.formats.varint import ZIGZAG_14, read_zz32, read_zz64
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import TXN_INDEX_SUFFIX, file_name_for_offset
from kafkatool.log.log import Log
from kafkatool.log.maintenance import Quarantine
from kafkatool.log.offset_map import OffsetMap
from kafkatool.log.segment import CLEANED_SUFFIX, Segment, segment_file_paths
from kafkatool.log.throttle import REPORT_BYTES, Throttler

INT32_MAX = 2**31 - 1

RETAIN_EMPTY = "retain_empty"
DELETE = "delete"
DELETE_EMPTY = "delete_empty"


# ---------------------------------------------------------------- the cleanable range


@dataclass
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    checkpoint: int | None
    checkpoint_reset: str | None  # why the checkpointed offset was not used
    uncleanable_reason: str
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int = 0

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    def not_due_reason(self, config: LogConfig) -> str | None:
        """The one cleanable-partition rule (LogCleanerManager.grabFilthiestCompactedLog):
        due when the dirty ratio exceeds min.cleanable.dirty.ratio, or when a segment is
        past max.compaction.lag.ms and there are cleanable bytes. None when due; else why
        not. The broker's cleaner and ``kafkatool compact`` both ask this."""
        if self.first_dirty >= self.first_uncleanable or self.cleanable_bytes <= 0:
            return "no cleanable bytes (the dirty range is empty)"
        if self.dirty_ratio > config.min_cleanable_dirty_ratio:
            return None
        if self.max_compaction_delay_ms > 0:
            return None
        return (
            f"dirty ratio {self.dirty_ratio:.3f} <= min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio} and no segment is past max.compaction.lag.ms"
        )

    def as_dict(self) -> dict:
        return {
            "first_dirty_offset": self.first_dirty,
            "first_uncleanable_offset": self.first_uncleanable,
            "checkpoint": self.checkpoint,
            "checkpoint_reset": self.checkpoint_reset,
            "uncleanable_because": self.uncleanable_reason,
            "clean_bytes": self.clean_bytes,
            "cleanable_bytes": self.cleanable_bytes,
            "dirty_ratio": round(self.dirty_ratio, 4),
        }


def cleanable_offsets(log: Log, config: LogConfig, checkpoint: int | None, now_ms: int) -> CleanableRange:
    """LogCleanerManager.cleanableOffsets + calculateCleanableBytes (the log's high watermark must be set)."""
    start = log.log_start_offset
    first_dirty = start if checkpoint is None else checkpoint
    reset = None
    if checkpoint is not None and checkpoint < start:
        first_dirty, reset = start, f"checkpoint {checkpoint} is below the log start offset {start}"
    elif checkpoint is not None and checkpoint > log.log_end_offset:
        first_dirty, reset = (
            start,
            f"checkpoint {checkpoint} is above the log end offset {log.log_end_offset}",
        )
    if not log.num_segments:
        # a read-only view of a partition dir with no segment file (a backup that lost them; a
        # writable load makes an empty one, as Kafka's LogLoader does): nothing to clean
        return CleanableRange(first_dirty, first_dirty, checkpoint, reset, "no log segment", 0, 0)
    active = log.active_segment
    candidates = [
        (log.last_stable_offset, "last stable offset"),
        (active.base_offset, "active segment"),
    ]
    lag = max(config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in _non_active_from(log, first_dirty):
            if seg.largest_timestamp > now_ms - lag:
                candidates.append((seg.base_offset, f"min.compaction.lag.ms (segment {seg.base_offset})"))
                break
    uncleanable, why = min(candidates, key=lambda c: c[0])
    uncleanable = max(first_dirty, uncleanable)
    # round down to the base of the segment holding it (calculateCleanableBytes)
    non_active = _non_active_from(log, uncleanable)
    first_uncleanable = non_active[0].base_offset if non_active else active.base_offset
    cleanable = sum(
        s.size for s in log.segments_in_range(min(first_dirty, first_uncleanable), first_uncleanable)
    )
    clean = sum(s.size for s in log.segments if s.base_offset < first_dirty)
    rng = CleanableRange(first_dirty, first_uncleanable, checkpoint, reset, why, clean, cleanable)
    rng.max_compaction_delay_ms = _max_compaction_delay(log, config, first_dirty, now_ms)
    return rng


def _non_active_from(log: Log, offset: int) -> list[Segment]:
    segs = log.segments_in_range(offset, 2**63)
    return [s for s in segs if s is not log.active_segment]


def _max_compaction_delay(log: Log, config: LogConfig, first_dirty: int, now_ms: int) -> int:
    stamps = [ts for s in _non_active_from(log, first_dirty) if (ts := s.first_batch_timestamp() or -1) > 0]
    if not stamps:
        return 0
    until = now_ms - max(config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return until - earliest if earliest < until else 0


# ---------------------------------------------------------------- transactions


class TxnMetadata:
    """Kafka's CleanedTransactionMetadata: which markers and aborted batches may go. Its batch
    rule is also the consumer's (CompletedFetch.nextFetchedRecord for read_committed: a
    transactional batch of a producer with an aborted transaction begun at or below the batch's
    last offset is dropped until that producer's ABORT marker), which `kafkatool consume` runs
    over a Fetch answer's aborted transactions."""

    def __init__(self) -> None:
        self.committed: set[int] = set()
        self.aborted: dict[int, list] = {}  # producer id -> [AbortedTxn, last observed batch offset | None]
        self._heap: list[tuple[int, int, fx.AbortedTxn]] = []
        self._seq = 0
        self.cleaned_index = None  # callable(AbortedTxn)

    def add_aborted(self, txns: list[fx.AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._heap, (t.first_offset, self._seq, t))

    def _consume_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            _, _, t = heapq.heappop(heap)
            self.aborted.setdefault(t.producer_id, [t, None])

    def on_control_batch(self, batch) -> bool:
        """True when the marker may be discarded."""
        self._consume_up_to(batch.last_offset)
        if batch.records_count == 0:
            return True  # an empty control batch was already cleaned
        record = next(iter(batch.records()))
        marker = R.parse_control_record(record)
        pid = batch.producer_id
        if marker.type == R.ABORT:
            meta = self.aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index(meta[0])
                return False
            return True
        if marker.type == R.COMMIT:
            if pid in self.committed:
                self.committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, batch) -> bool:
        """True when the batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if batch.is_transactional:
            meta = self.aborted.get(batch.producer_id)
            if meta is not None:
                meta[1] = batch.last_offset
                return True
            self.committed.add(batch.producer_id)
        return False


# ---------------------------------------------------------------- statistics


@dataclass
class CleanStats:
    records_read: int = 0
    records_kept: int = 0
    tombstones_read: int = 0
    tombstones_kept: int = 0
    keyless_removed: int = 0
    aborted_batches_removed: int = 0
    markers_removed: int = 0
    batches_read: int = 0
    batches_copied: int = 0
    batches_reencoded: int = 0
    empty_batches_kept: int = 0
    horizons_set: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    map_records: int = 0
    map_keys: int = 0
    segments_before: int = 0
    segments_after: int = 0
    #: with a throttler (log.cleaner.io.max.bytes.per.second; the broker and compact always
    #: have one): bytes the round read and wrote, seconds it slept
    io_bytes: int = 0
    throttled_s: float = 0.0

    def add(self, other: CleanStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["records_removed"] = self.records_read - self.records_kept
        d["tombstones_removed"] = self.tombstones_read - self.tombstones_kept
        return d


@dataclass
class GroupResult:
    base_offset: int
    sources: list[int]
    bytes_before: int
    bytes_after: int
    records_read: int
    records_kept: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RoundResult:
    first_dirty: int
    first_uncleanable: int
    end_offset: int  # the new cleaner checkpoint
    map_full: bool
    groups: list[GroupResult] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


# ---------------------------------------------------------------- output segments


class _Sink:
    """Where retained batches of one group go: a ``.cleaned`` segment, or nowhere (dry run);
    ``throttle`` (log.cleaner.io.max.bytes.per.second) hears of every byte appended, in runs
    of REPORT_BYTES and the rest at :meth:`finish`."""

    def __init__(self, log: Log, base: int, config: LogConfig, *, write: bool, throttle=None):
        self.base = base
        self.throttle = throttle
        self.unreported = 0
        self.size = 0
        self.aborted: list[fx.AbortedTxn] = []
        self.segment: Segment | None = None
        if write:
            for p in segment_file_paths(log.dir, base, CLEANED_SUFFIX):
                fileops.delete(p)
            self.segment = Segment(
                log.dir, base, config, suffix=CLEANED_SUFFIX, create=True, now_ms=log.clock()
            )

    def append(self, data: bytes) -> None:
        if self.segment is not None:
            last = max_ts = ts_offset = -1
            for b in R.iter_batches(data):  # one batch, or the messages of a legacy message set
                last = b.last_offset
                if b.max_timestamp > max_ts:
                    max_ts, ts_offset = b.max_timestamp, last
            self.segment.append(last, max_ts, ts_offset if ts_offset >= 0 else last, data)
        self.size += len(data)
        if self.throttle is not None:
            self.unreported += len(data)
            if self.unreported >= REPORT_BYTES:
                self.throttle(self.unreported)
                self.unreported = 0

    def add_aborted(self, txn: fx.AbortedTxn) -> None:
        self.aborted.append(txn)
        if self.segment is not None:
            self.segment.update_txn_index(txn)

    def finish(self, mtime_ms: int) -> None:
        if self.unreported:
            self.throttle(self.unreported)
            self.unreported = 0
        seg = self.segment
        if seg is None:
            return
        seg.on_become_inactive()
        seg.flush()
        for p in seg.files():
            if p.exists():
                os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    def discard(self) -> None:
        if self.segment is not None:
            self.segment.delete_files()


# ---------------------------------------------------------------- a key-only record scan


def scan_keys(batch: R.RecordBatch) -> list[tuple[int, bytes | None, bool]]:
    """(offset, key, is tombstone) of each record of a v2 batch, reading only what the cleaner
    needs; the full decoder runs only for batches that get re-encoded.

    Up to the headers, the scan refuses what the record decoder refuses (Kafka's cleaner
    reads every record with DefaultRecord.readFrom).  Varints of one byte (two for the
    record and value lengths), below every limit, are decoded by one index into
    ``ZIGZAG_14``; longer ones by the decoder's own readers (formats/varint.py:
    readVarint's 5 bytes and 32 bits, readVarlong's 10).  A record the scan is not sure of
    (a reader's error, a field past the record, bytes left after the last record) sends
    the whole batch to the decoder, which raises its own error with its byte position.
    Headers are walked by the decoder's own walker (``walk_headers``: count, key and value
    lengths, Kafka's structure rules) without making their keys and values, so a batch the
    decoder refuses for its headers is refused here too, as Kafka's cleaner refuses it.
    The record prefix is read inline, not by a reader shared with records.skip_key_value_records:
    why is said there (measured: a shared one costs this loop 5-8%)."""
    count = batch.records_count
    if count <= 0:
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", batch.position + 57)
        return []
    data = bytes(batch.record_data())
    end = len(data)
    base = batch.base_offset
    zz = ZIGZAG_14
    out = []
    append = out.append
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                length = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                length, pos = read_zz32(data, pos, end)
            rec_end = pos + length  # a length below 1 or past the batch fails the last check
            # the attributes byte, then the timestamp delta (skipped)
            if data[pos + 1] < 0x80:
                p = pos + 2
            else:
                _, p = read_zz64(data, pos + 1, rec_end)
            b = data[p]
            if b < 0x80:
                delta = zz[b]
                p += 1
            else:
                delta, p = read_zz32(data, p, rec_end)
            b = data[p]
            if b < 0x80:
                klen = zz[b]
                p += 1
            else:
                klen, p = read_zz32(data, p, rec_end)
            if klen < 0:
                key = None
            else:
                key = data[p : p + klen]
                p += klen
            b = data[p]
            if b < 0x80:
                vlen = zz[b]
                p += 1
            elif data[p + 1] < 0x80:
                vlen = zz[(b & 0x7F) | (data[p + 1] << 7)]
                p += 2
            else:
                vlen, p = read_zz32(data, p, rec_end)
            if vlen > 0:
                p += vlen
            # the header count: every byte read above lay inside the record; without headers
            # the record ends after it, as the decoder checks; headers are walked with the
            # decoder's rules (its own walker), unread
            if p >= rec_end:
                break
            if data[p]:
                if R.walk_headers(data, p, rec_end, None) != rec_end:
                    break
            elif p + 1 != rec_end:
                break
            append((base + delta, key, vlen < 0))
            pos = rec_end
        else:
            if pos == end:
                return out
    except (FormatError, IndexError):
        pass
    return [(r.offset, r.key, r.value is None) for r in batch.records()]


def _read_batches(seg: Segment, position: int, reading: list, throttle=None):
    """The segment's batches from byte ``position`` (every batch the cleaner reads comes
    through here, and ``throttle`` hears of its bytes: in runs of REPORT_BYTES, as Kafka's
    cleaner reports each read buffer, and what is left when the caller stops reading);
    ``reading[0]`` holds the one the caller works on, None while the next is read."""
    reading[0] = None
    if throttle is None:
        for batch in seg.batches(position):
            reading[0] = batch
            yield batch
            reading[0] = None
        return
    start = position  # the first byte not reported yet
    batch = None
    try:
        for batch in seg.batches(position):
            reading[0] = batch
            if batch.position - start >= REPORT_BYTES:
                throttle(batch.position - start)
                start = batch.position
            yield batch
            reading[0] = None
    finally:
        if batch is not None and batch.end > start:  # the rest, up to the last batch read
            throttle(batch.end - start)


class UnreadableBatchError(CorruptRecordError):
    """Bytes of a segment the cleaner cannot read (Kafka: the exception out of
    ``Cleaner.clean`` becomes a LogCleaningException, and the partition is marked
    uncleanable): the round stops, the group being written is discarded, the segments
    stay as they are, the checkpoint does not move."""

    @classmethod
    def of(cls, seg: Segment, batch, exc: FormatError) -> UnreadableBatchError:
        if isinstance(exc, cls):
            return exc
        if batch is None:  # reading the segment's next batch: Segment.batches named the file
            return cls(exc.message, exc.position, kind=exc.kind).in_file(exc.path)
        inside = " (a position in its decompressed records)" if batch.codec != compression.NONE else ""
        offset = batch.base_offset if batch.magic >= 2 else batch.offset
        return cls(
            f"{seg.log_path}: {exc.message} in the batch at offset {offset}{inside}",
            exc.position,
            kind=exc.kind,
        )


def _light_records(batch) -> list[tuple[int, bytes | None, bool]]:
    if batch.magic >= 2:
        return scan_keys(batch)
    return [(r.offset, r.key, r.value is None) for r in batch.records()]


# ---------------------------------------------------------------- the cleaner


class Cleaner:
    """One cleaning round over one log (Kafka's Cleaner.doClean)."""

    def __init__(
        self,
        log: Log,
        config: LogConfig,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        swap=None,
        last_records: dict[int, tuple[int, int]] | None = None,
        throttler: Throttler | None = None,
    ):
        self.log = log
        self.config = config
        self.map = offset_map
        self.now = now_ms
        #: callable(cleaned segment, source segments) instead of swapping into ``log``
        #: (a worker process leaves the swap to the live log's owner: install_cleaned)
        self.swap = swap
        #: producer id -> (last offset, epoch) of the live log (a worker's view has none)
        self.last_records = last_records
        #: log.cleaner.io.max.bytes.per.second: told every byte read and written (None: no
        #: limit); the caller's, living across rounds and partitions as Kafka's LogCleaner's
        self.throttler = throttler
        self.throttle = throttler.maybe_throttle if throttler is not None else None
        #: the batch being read (None between batches), to name it when its bytes do not decode
        self.reading: list[R.Batch | None] = [None]

    # --- the offset map
    def build_offset_map(self, start: int, end: int, stats: CleanStats) -> bool:
        """Key -> latest offset over [start, end); True when the map filled up before ``end``."""
        m = self.map
        m.clear()
        dirty = self.log.segments_in_range(start, end)
        txn = TxnMetadata()
        txn.add_aborted(self.log.collect_aborted(start, end))
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            try:
                if self._map_segment(seg, start, next_start, txn, stats):
                    return True
            except FormatError as exc:
                raise UnreadableBatchError.of(seg, self.reading[0], exc) from None
        return False

    def _map_segment(
        self, seg: Segment, start: int, next_start: int, txn: TxnMetadata, stats: CleanStats
    ) -> bool:
        m = self.map
        limit = m.max_entries
        entries = m.entries
        position = seg.offset_index.lookup(start).position
        for batch in _read_batches(seg, position, self.reading, self.throttle):
            if batch.is_control:
                txn.on_control_batch(batch)
            elif not txn.on_batch(batch):
                for offset, key, _ in _light_records(batch):
                    if key is not None and offset >= start:
                        # Kafka checks the size before every put, even of a key already there
                        if len(entries) >= limit:
                            return True
                        entries[key] = offset
                        m.latest_offset = offset
                    stats.map_records += 1
            if batch.last_offset >= start:
                m.latest_offset = batch.last_offset
        m.latest_offset = next_start - 1
        return False

    # --- a round
    def clean(
        self,
        first_dirty: int,
        first_uncleanable: int,
        *,
        write: bool,
        quarantine: Quarantine | None = None,
    ) -> RoundResult:
        log = self.log
        config = self.config
        below = [s for s in log.segments if s.base_offset < first_dirty]
        legacy_horizon = below[-1].last_modified_ms - config.delete_retention_ms if below else 0
        stats = CleanStats()
        throttler = self.throttler
        if throttler is not None:  # one throttler lives across rounds: the round's share
            io0, slept0 = throttler.total, throttler.slept
        full = self.build_offset_map(first_dirty, first_uncleanable, stats)
        end_offset = self.map.latest_offset + 1
        stats.map_keys = len(self.map.entries)
        result = RoundResult(first_dirty, first_uncleanable, end_offset, full, stats=stats)
        segments = [s for s in log.segments if s.base_offset < end_offset]
        groups = group_segments_by_size(
            segments, config.segment_bytes, config.segment_index_bytes, first_uncleanable
        )
        txn = TxnMetadata()
        last_records = self.last_records
        if last_records is None:
            last_records = {
                pid: (e.last_offset, e.producer_epoch) for pid, e in log.producer_state.producers.items()
            }
        for group in groups:
            try:
                gr = self._clean_group(
                    group, txn, last_records, legacy_horizon, first_uncleanable, stats, write, quarantine
                )
            except UnreadableBatchError as exc:
                exc.partial_round = result  # the groups swapped in before this one
                raise
            result.groups.append(gr)
        stats.segments_before = sum(len(g.sources) for g in result.groups)
        stats.segments_after = len(result.groups)
        if throttler is not None:
            stats.io_bytes = throttler.total - io0
            stats.throttled_s = throttler.slept - slept0
        return result

    def _clean_group(
        self,
        group: list[Segment],
        txn: TxnMetadata,
        last_records: dict[int, tuple[int, int]],
        legacy_horizon: int,
        upper_bound: int,
        stats: CleanStats,
        write: bool,
        quarantine: Quarantine | None,
    ) -> GroupResult:
        log = self.log
        sink = _Sink(log, group[0].base_offset, self.config, write=write, throttle=self.throttle)
        txn.cleaned_index = sink.add_aborted
        read0, kept0 = stats.records_read, stats.records_kept
        before = sum(s.size for s in group)
        try:
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txn.add_aborted(log.collect_aborted(seg.base_offset, upper))
                retain_legacy = seg.last_modified_ms > legacy_horizon
                try:
                    self._clean_into(seg, sink, txn, last_records, retain_legacy, upper_bound, stats)
                except FormatError as exc:
                    raise UnreadableBatchError.of(seg, self.reading[0], exc) from None
            sink.finish(group[-1].last_modified_ms)
        except BaseException:
            if write:
                sink.discard()
            raise
        stats.bytes_before += before
        stats.bytes_after += sink.size
        if write:
            if quarantine is not None:
                for seg in group:
                    quarantine.keep(
                        seg.log_path,
                        {
                            "kind": "segment before compaction",
                            "base_offset": seg.base_offset,
                            "bytes": seg.size,
                            "replaced_by": file_name_for_offset(group[0].base_offset, ".log"),
                        },
                    )
                    txn_path = seg.log_path.with_suffix(TXN_INDEX_SUFFIX)
                    if txn_path.exists() and txn_path.stat().st_size:
                        quarantine.keep(txn_path, {"kind": "aborted transactions of the segment"})
            if self.swap is not None:
                self.swap(sink.segment, group)
            else:
                old_bases = [s.base_offset for s in group]
                log.replace_segments([sink.segment], group)
                for base in old_bases:
                    if base != group[0].base_offset:
                        log.producer_state.delete_snapshot(base)
        return GroupResult(
            group[0].base_offset,
            [s.base_offset for s in group],
            before,
            sink.size,
            stats.records_read - read0,
            stats.records_kept - kept0,
        )

    def _clean_into(
        self,
        seg: Segment,
        sink: _Sink,
        txn: TxnMetadata,
        last_records: dict[int, tuple[int, int]],
        retain_legacy_deletes: bool,
        upper_bound: int,
        stats: CleanStats,
    ) -> None:
        now = self.now
        m = self.map
        latest = m.latest_offset
        entries = m.entries
        delete_retention = self.config.delete_retention_ms
        for batch in _read_batches(seg, 0, self.reading, self.throttle):
            stats.batches_read += 1
            is_control = batch.is_control
            magic = batch.magic
            can_discard = txn.on_control_batch(batch) if is_control else txn.on_batch(batch)
            horizon = batch.delete_horizon_ms
            if is_control:
                discard_records = can_discard and horizon is not None and horizon <= now
            else:
                discard_records = can_discard
            pid = batch.producer_id
            is_last_of_producer = False
            if pid >= 0:
                last = last_records.get(pid)
                if last is not None:
                    if last[0] >= 0:
                        is_last_of_producer = batch.last_offset == last[0]
                    else:
                        is_last_of_producer = is_control and batch.producer_epoch == last[1]
            if pid >= 0 and is_last_of_producer:
                retention = RETAIN_EMPTY
            elif batch.next_offset == upper_bound:
                retention = RETAIN_EMPTY
            elif discard_records:
                retention = DELETE
            else:
                retention = DELETE_EMPTY
            marker_for_empty_txn = can_discard and is_control
            if retention == DELETE:
                n = batch.records_count
                stats.records_read += n
                if is_control:
                    stats.markers_removed += 1
                else:
                    stats.aborted_batches_removed += 1
                continue
            retained = []
            tombstones = False
            write_original = True
            for offset, key, value_none in _light_records(batch):
                stats.records_read += 1
                if value_none and not is_control:
                    stats.tombstones_read += 1
                if discard_records:
                    keep = False
                elif is_control:
                    keep = True
                elif offset > latest:
                    keep = True
                elif key is None:
                    stats.keyless_removed += 1
                    keep = False
                elif offset >= entries.get(key, -1):
                    if not value_none:
                        keep = True
                    elif magic >= 2:
                        keep = horizon is None or now < horizon
                    else:
                        keep = retain_legacy_deletes
                else:
                    keep = False
                if keep:
                    retained.append(offset)
                    if value_none:
                        tombstones = True
                        if not is_control:
                            stats.tombstones_kept += 1
                else:
                    write_original = False
            if magic < 2 and retained and any(r.magic != magic for r in batch.records()):
                write_original = False  # KAFKA-4298: rewrite a wrapper whose inner magic differs
            if retained:
                stats.records_kept += len(retained)
                need_horizon = magic >= 2 and (tombstones or marker_for_empty_txn) and horizon is None
                if write_original and not need_horizon:
                    sink.append(bytes(batch.raw()))
                    stats.batches_copied += 1
                else:
                    if need_horizon:
                        new_horizon = now + delete_retention
                        stats.horizons_set += 1
                    else:
                        new_horizon = horizon
                    keep_offsets = set(retained)
                    records = [r for r in batch.records() if r.offset in keep_offsets]
                    if magic >= 2:
                        sink.append(_rebuild_v2(batch, records, new_horizon))
                    else:
                        sink.append(_rebuild_legacy(batch, records))
                    stats.batches_reencoded += 1
            else:
                if is_control and can_discard:
                    stats.markers_removed += 1
                elif can_discard:
                    stats.aborted_batches_removed += 1
                if retention == RETAIN_EMPTY and magic >= 2:
                    sink.append(_empty_batch(batch))
                    stats.empty_batches_kept += 1


def _rebuild_v2(batch: R.RecordBatch, retained: list[R.Record], horizon: int | None) -> bytes:
    lat = batch.timestamp_type == R.LOG_APPEND_TIME
    base = batch.base_offset
    return R.build_record_batch(
        [R.SimpleRecord(r.value, r.key, r.headers, r.timestamp) for r in retained],
        base_offset=base,
        codec=batch.codec,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if lat else None,
        delete_horizon_ms=horizon,
        offset_deltas=[r.offset - base for r in retained],
        last_offset_delta=batch.last_offset_delta,
    )


def _empty_batch(batch: R.RecordBatch) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader: codec none, no records, base timestamp -1, no horizon."""
    return R.build_record_batch(
        [],
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=batch.timestamp_type,
        last_offset_delta=batch.last_offset_delta,
        base_timestamp=R.NO_TIMESTAMP,
        max_timestamp=batch.max_timestamp,
    )


def _rebuild_legacy(batch: R.LegacyBatch, retained: list[R.Record]) -> bytes:
    """A legacy wrapper with the kept records: same magic and codec, base = first kept offset."""
    magic = batch.magic
    lat = magic == 1 and batch.timestamp_type == R.LOG_APPEND_TIME
    ts_attr = R.TIMESTAMP_TYPE_MASK if lat else 0
    codec = batch.codec
    if codec == compression.NONE:
        return b"".join(
            R.encode_legacy_message(
                magic, r.key, r.value, offset=r.offset, timestamp=r.timestamp, attributes=ts_attr
            )
            for r in retained
        )
    base = retained[0].offset
    inner = b"".join(
        R.encode_legacy_message(
            magic,
            r.key,
            r.value,
            offset=(r.offset - base) if magic == 1 else r.offset,
            timestamp=r.timestamp,
            attributes=ts_attr,
        )
        for r in retained
    )
    payload = compression.compress(codec, inner, magic=magic)
    wrapper_ts = batch.max_timestamp if lat else max(r.timestamp for r in retained)
    return R.encode_legacy_message(
        magic, None, payload, offset=retained[-1].offset, timestamp=wrapper_ts, attributes=codec | ts_attr
    )


def group_segments_by_size(
    segments: list[Segment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[Segment]]:
    """Cleaner.groupSegmentsBySize: consecutive segments whose log bytes, offset-index bytes and
    time-index bytes each fit the limits, and whose offsets fit a 32-bit relative offset."""
    groups: list[list[Segment]] = []
    i = 0
    n = len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.size_in_bytes
        time_size = first.time_index.size_in_bytes
        i += 1
        while i < n:
            s = segments[i]
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable - 1
            if not (
                log_size + s.size <= max_size
                and index_size + s.offset_index.size_in_bytes <= max_index_size
                and time_size + s.time_index.size_in_bytes <= max_index_size
                and (s.size == 0 or last_offset - first.base_offset <= INT32_MAX)
            ):
                break
            group.append(s)
            log_size += s.size
            index_size += s.offset_index.size_in_bytes
            time_size += s.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


@dataclass
class CompactionResult:
    dir: Path
    range: CleanableRange
    rounds: list[RoundResult] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)
    checkpoint_after: int | None = None
    notes: list[str] = field(default_factory=list)
    #: why a round stopped (one line: file, batch offset, byte position), else None
    error: str | None = None

    @property
    def changes(self) -> bool:
        return any(r.groups for r in self.rounds)


def cleaning_failed(result: CompactionResult, exc: Exception, first_dirty: int) -> None:
    """The one rule for a partition whose cleaning round failed, in the broker's cleaner and in
    ``compact`` alike (Kafka's CleanerThread.cleanLog: ``doneCleaning`` in its ``finally``
    writes the round's start offset, then the LogCleaningException marks the partition
    uncleanable; the other partitions are cleaned and checkpointed as ever): the groups the
    round finished stay swapped in, the rest of the log is as it was, the checkpoint is the
    round's first dirty offset (the last finished round's end, never past it) and is written,
    and ``result.error`` is the one line naming what failed."""
    result.error = str(exc)
    partial = getattr(exc, "partial_round", None)
    if partial is not None and partial.groups:
        result.rounds.append(partial)
        result.stats.add(partial.stats)
    result.checkpoint_after = first_dirty


def compact(
    log: Log,
    config: LogConfig,
    *,
    checkpoint: int | None,
    now_ms: int,
    offset_map: OffsetMap,
    write: bool,
    quarantine: Quarantine | None = None,
    max_rounds: int = 10_000,
    throttler: Throttler | None = None,
) -> CompactionResult:
    """Clean the log's cleanable range; rounds repeat while the offset map fills before its end
    (a dry run does one round: later rounds would read what the first one wrote).  ``throttler``
    (log.cleaner.io.max.bytes.per.second) is the run's one throttler, for every round of every
    partition."""
    rng = cleanable_offsets(log, config, checkpoint, now_ms)
    result = CompactionResult(log.dir, rng)
    if rng.first_dirty >= rng.first_uncleanable:
        result.notes.append(
            f"nothing to clean: first dirty offset {rng.first_dirty} is at the first uncleanable offset "
            f"{rng.first_uncleanable} ({rng.uncleanable_reason})"
        )
        result.checkpoint_after = rng.first_dirty if rng.checkpoint_reset else checkpoint
        return result
    first_dirty = rng.first_dirty
    result.checkpoint_after = first_dirty if rng.checkpoint_reset else checkpoint
    cleaner = Cleaner(log, config, offset_map, now_ms=now_ms, throttler=throttler)
    for _ in range(max_rounds):
        try:
            rnd = cleaner.clean(first_dirty, rng.first_uncleanable, write=write, quarantine=quarantine)
        except UnreadableBatchError as exc:
            cleaning_failed(result, exc, first_dirty)
            break
        result.rounds.append(rnd)
        result.stats.add(rnd.stats)
        result.checkpoint_after = rnd.end_offset
        if rnd.end_offset >= rng.first_uncleanable or rnd.end_offset <= first_dirty:
            break
        if not write:
            result.notes.append(
                f"the offset map filled up at offset {rnd.end_offset - 1}: a real run continues with "
                "further rounds from there"
            )
            break
        first_dirty = rnd.end_offset
    return result


# ---------------------------------------------------------------- a round in a worker process


@dataclass
class CleanedGroup:
    """A ``.cleaned`` segment a worker left, and the segments (base offset, size) it replaces."""

    base_offset: int
    sources: list[tuple[int, int]]


def clean_round_files(
    dir: str,
    config: LogConfig,
    *,
    log_start_offset: int,
    first_dirty: int,
    first_uncleanable: int,
    last_records: dict[int, tuple[int, int]],
    now_ms: int,
    map_bytes: int,
    load_factor: float,
    throttler: Throttler | None = None,
) -> tuple[RoundResult, list[CleanedGroup], Throttler | None]:
    """One cleaning round (Kafka's doClean) for a worker process: the partition's segments
    below ``first_uncleanable`` (inactive, so no writer touches them) are opened read-only
    and each group is written into a flushed ``.cleaned`` segment; nothing of the live log
    changes here.  The process owning the live :class:`Log` swaps them in with
    :func:`install_cleaned`, under the log's lock.  The CPU work (key scans, re-encoding)
    thus never competes for the broker's interpreter lock.  ``throttler``
    (log.cleaner.io.max.bytes.per.second) is a copy of the broker cleaner's one throttler: it
    hears of what the round reads and writes and comes back as the third item (on a failure as
    the exception's ``throttler``), for the broker's to :meth:`~Throttler.adopt`."""
    log = Log(
        dir,
        config,
        writable=False,
        had_clean_shutdown=True,
        log_start_offset=log_start_offset,
        segments_below=first_uncleanable,
    )
    groups: list[CleanedGroup] = []

    def keep(cleaned: Segment, sources: list[Segment]) -> None:
        groups.append(CleanedGroup(cleaned.base_offset, [(s.base_offset, s.size) for s in sources]))
        cleaned.close()

    try:
        cleaner = Cleaner(
            log,
            config,
            OffsetMap(map_bytes, load_factor),
            now_ms=now_ms,
            swap=keep,
            last_records=last_records,
            throttler=throttler,
        )
        rnd = cleaner.clean(first_dirty, first_uncleanable, write=True)
    except UnreadableBatchError as exc:
        # as Kafka's round: the groups finished before the unreadable batch are swapped in
        # (by the live log's owner), the rest stays
        exc.cleaned_groups = groups
        exc.throttler = throttler
        raise
    except BaseException as exc:
        exc.throttler = throttler  # what the round read before it failed still counts
        for g in groups:
            for p in segment_file_paths(Path(dir), g.base_offset, CLEANED_SUFFIX):
                fileops.delete(p)
        raise
    finally:
        log.release()
    return rnd, groups, throttler


def discard_cleaned_files(dir: str | os.PathLike) -> list[Path]:
    """Remove the ``.cleaned`` files of an aborted cleaning round in a partition dir (only the
    cleaner writes them, and a live log never holds one outside a swap)."""
    gone = []
    for name in sorted(os.listdir(dir)):
        if name.endswith(CLEANED_SUFFIX):
            fileops.delete(Path(dir) / name)
            gone.append(Path(dir) / name)
    return gone


def inactive_segments_below(log: Log, offset: int) -> dict[int, tuple[Segment, int]]:
    """base offset -> (segment, size) of the log's segments below ``offset``, taken when a
    worker's round starts; :func:`install_cleaned` swaps only over exactly these."""
    with log.lock:
        return {s.base_offset: (s, s.size) for s in log.segments if s.base_offset < offset}


def install_cleaned(log: Log, group: CleanedGroup, before: dict[int, tuple[Segment, int]]) -> bool:
    """Swap a worker's ``.cleaned`` segment into the live log (``Log.replace_segments``) under
    the log's lock, if the segments it replaces are still the very segments ``before`` held,
    unchanged in size and inactive (a truncation, retention, DeleteRecords or a topic delete
    meanwhile voids it: the ``.cleaned`` files are deleted and False returned)."""
    with log.lock:
        sources = []
        ok = not log.closed
        if ok:
            active = log.active_segment.base_offset
            for base, _ in group.sources:
                seg = log.floor_segment(base)
                known = before.get(base)
                if (
                    seg is None
                    or known is None
                    or seg is not known[0]
                    or seg.size != known[1]
                    or base >= active
                ):
                    ok = False
                    break
                sources.append(seg)
        if not ok:
            for p in segment_file_paths(log.dir, group.base_offset, CLEANED_SUFFIX):
                fileops.delete(p)
            return False
        cleaned = Segment(log.dir, group.base_offset, log.config, suffix=CLEANED_SUFFIX, now_ms=log.clock())
        log.replace_segments([cleaned], sources)
        for base, _ in group.sources:
            if base != group.base_offset:
                log.producer_state.delete_snapshot(base)
    return True
