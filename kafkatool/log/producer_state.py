"""Producer state of one partition (idempotence and transactions): Kafka's ProducerStateManager.

Each producer's epoch, its last five batches (sequence range and offsets, for
duplicate detection), coordinator epoch, last timestamp and open transaction;
the set of open transactions (for the last stable offset); snapshots
(``<offset>.snapshot``, which keep the last batch only, as Kafka's do) and
rebuilding from the log.  :meth:`ProducerStateManager.update` applies a batch
with Kafka's REPLICATION-origin semantics (no validation: loading, recovery,
followers); :meth:`ProducerStateManager.check_client_append` is the CLIENT-origin
check a leader runs first (Kafka's ProducerAppendInfo.checkProducerEpoch /
checkSequence and ProducerStateEntry.findDuplicateBatch).
"""

from __future__ import annotations

import os
from bisect import insort
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import records as R
from kafkatool.formats import snapshot as snap
from kafkatool.formats.errors import FormatError
from kafkatool.formats.index import AbortedTxn
from kafkatool.log import fileops
from kafkatool.log.file_records import (
    SNAPSHOT_SUFFIX,
    file_name_for_offset,
    offset_from_file_name,
    read_regular,
)

#: batches remembered per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN)
BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_EPOCH = -1


class ProducerStateError(FormatError):
    """An append that producer state rejects; ``kind`` names Kafka's error
    (``out_of_order_sequence``, ``invalid_producer_epoch``, ``coordinator_fenced``)."""


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int = -1
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    #: the last BATCHES_TO_RETAIN batches of the current epoch, oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN), repr=False)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def to_snapshot(self) -> snap.ProducerSnapshotEntry:
        return snap.ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_sequence,
            self.last_offset,
            self.offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def _new_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            # a bumped epoch forgets the retained batches
            self.producer_epoch = epoch
            self.last_sequence = -1
            self.last_offset = -1
            self.offset_delta = 0
            self.batches.clear()


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    def __init__(self, log_dir: str | os.PathLike, *, expiration_ms: int = 86400000, writable: bool = True):
        self.dir = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        self.expiration_ms = expiration_ms
        self.writable = writable
        self.producers: dict[int, ProducerEntry] = {}
        self._ongoing: list[tuple[int, int]] = []  # (first offset, producer id), sorted
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        # snapshots a read-only manager treats as deleted
        self._hidden: set[int] = set()

    # ------------------------------------------------------------ snapshots on disk
    def snapshot_files(self) -> dict[int, Path]:
        out = {}
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return out
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                off = offset_from_file_name(name)
                if off is not None and off not in self._hidden:
                    out[off] = self.dir / name
        return dict(sorted(out.items()))

    @property
    def latest_snapshot_offset(self) -> int | None:
        files = self.snapshot_files()
        return max(files) if files else None

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write ``<map end offset>.snapshot`` (if not already there)."""
        if not self.writable:
            return None
        path = self.dir / file_name_for_offset(self.map_end_offset, SNAPSHOT_SUFFIX)
        if self.map_end_offset <= self.last_snapshot_offset:
            # Kafka: "if not a new offset, then it is not worth taking another copy"
            return None
        entries = [p.to_snapshot() for _, p in sorted(self.producers.items())]
        # in place, as Kafka writes a snapshot: its CRC tells a torn file, which loading drops
        fileops.write_in_place(path, snap.encode_snapshot(entries), sync=sync)
        self.last_snapshot_offset = self.map_end_offset
        return path

    def delete_snapshot(self, offset: int) -> None:
        if self.writable:
            fileops.delete(self.dir / file_name_for_offset(offset, SNAPSHOT_SUFFIX))
        else:
            self._hidden.add(offset)

    def delete_snapshots_below(self, offset: int) -> None:
        for off in self.snapshot_files():
            if off < offset:
                self.delete_snapshot(off)

    def remove_stray_snapshots(self, segment_bases: list[int]) -> dict[int, Path]:
        """Keep snapshots at segment bases, plus the newest one above the last base; returns
        the snapshot files kept (Kafka reloads its snapshot map here)."""
        files = self.snapshot_files()
        bases = set(segment_bases)
        last_base = max(segment_bases) if segment_bases else None
        newest_above = None
        for off in files:
            if last_base is not None and off > last_base:
                newest_above = off
        kept = {}
        for off, path in files.items():
            if off not in bases and off != newest_above:
                self.delete_snapshot(off)
            else:
                kept[off] = path
        return kept

    # ------------------------------------------------------------ loading
    def is_expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= self.expiration_ms

    def clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()

    def load_from_snapshot(
        self, log_start_offset: int, now_ms: int, *, snapshots: dict[int, Path] | None = None
    ) -> int | None:
        """Load the latest valid snapshot; corrupt ones are deleted (as Kafka does; a read-only
        manager just skips them) and older ones tried.  Returns the snapshot offset or None.
        ``snapshots``: the snapshot files as just listed (None: list them)."""
        self.bad_snapshots: list[tuple[Path, str]] = []
        files = self.snapshot_files() if snapshots is None else snapshots
        for off, path in sorted(files.items(), reverse=True):
            result = snap.read_snapshot(read_regular(path))
            if result.error is not None:
                self.bad_snapshots.append((path, str(result.error)))
                self.delete_snapshot(off)
                continue
            for e in result.entries:
                entry = ProducerEntry(
                    e.producer_id,
                    e.producer_epoch,
                    e.last_sequence,
                    e.last_offset,
                    e.offset_delta,
                    e.timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
                if e.has_batch_metadata:
                    entry.batches.append(
                        BatchMetadata(
                            e.first_sequence, e.last_sequence, e.first_offset, e.last_offset, e.timestamp
                        )
                    )
                if not self.is_expired(entry, now_ms):
                    self.producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset >= 0:
                        insort(self._ongoing, (entry.current_txn_first_offset, entry.producer_id))
            self.last_snapshot_offset = self.map_end_offset = off
            return off
        self.last_snapshot_offset = self.map_end_offset = log_start_offset
        return None

    def truncate_and_reload(
        self,
        log_start_offset: int,
        log_end_offset: int,
        now_ms: int,
        *,
        snapshots: dict[int, Path] | None = None,
    ) -> None:
        """``snapshots``: the snapshot files as just listed (None: list them)."""
        kept = {}
        for off, path in (self.snapshot_files() if snapshots is None else snapshots).items():
            if off > log_end_offset:
                self.delete_snapshot(off)
            else:
                kept[off] = path
        if log_end_offset != self.map_end_offset:
            self.clear()
            self.load_from_snapshot(log_start_offset, now_ms, snapshots=kept)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear()
        for off in self.snapshot_files():
            self.delete_snapshot(off)
        self.map_end_offset = self.last_snapshot_offset = offset

    # ------------------------------------------------------------ applying batches
    def update(self, batch: R.Batch) -> CompletedTxn | None:
        """Apply one batch (REPLICATION origin); a transaction marker returns its CompletedTxn."""
        completed = None
        if batch.magic >= 2 and batch.producer_id >= 0:
            pid = batch.producer_id
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerEntry(pid)
            if batch.is_control:
                if batch.records_count > 0:
                    record = next(iter(batch.records()))
                    marker = R.parse_control_record(record)
                    if marker.type in (R.ABORT, R.COMMIT):
                        entry._new_epoch(batch.producer_epoch)
                        first = entry.current_txn_first_offset
                        completed = CompletedTxn(
                            pid,
                            first if first >= 0 else batch.base_offset,
                            batch.base_offset,
                            marker.type == R.ABORT,
                        )
                        entry.current_txn_first_offset = -1
                        entry.coordinator_epoch = marker.coordinator_epoch
                        entry.last_timestamp = record.timestamp
            else:
                entry._new_epoch(batch.producer_epoch)
                entry.last_sequence = batch.last_sequence
                entry.last_offset = batch.last_offset
                entry.offset_delta = batch.last_offset - batch.base_offset
                entry.last_timestamp = batch.max_timestamp
                if batch.base_sequence >= 0:
                    entry.batches.append(
                        BatchMetadata(
                            batch.base_sequence,
                            batch.last_sequence,
                            batch.base_offset,
                            batch.last_offset,
                            batch.max_timestamp,
                        )
                    )
                if batch.is_transactional and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = batch.base_offset
                    insort(self._ongoing, (batch.base_offset, pid))
        self.map_end_offset = batch.last_offset + 1
        return completed

    def check_client_append(self, batch: R.Batch) -> BatchMetadata | None:
        """Kafka's CLIENT-origin checks of a leader append, before anything is written: a
        duplicate of one of the producer's last five batches returns that batch (the append
        must not happen; the client gets the original offsets); an older epoch raises
        invalid_producer_epoch; a sequence that does not follow raises
        out_of_order_sequence.  An unknown producer (or one whose state retention removed)
        may start at any sequence."""
        if batch.magic < 2 or batch.producer_id < 0 or batch.is_control:
            return None
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return None
        epoch = batch.producer_epoch
        first_seq = batch.base_sequence
        dup = entry.find_duplicate(epoch, first_seq, batch.last_sequence)
        if dup is not None:
            return dup
        if epoch < entry.producer_epoch:
            raise ProducerStateError(
                f"epoch of producer {batch.producer_id} is {epoch}, which is smaller than the last seen "
                f"epoch {entry.producer_epoch}",
                batch.position,
                kind="invalid_producer_epoch",
            )
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    f"invalid sequence number for new epoch of producer {batch.producer_id}: {epoch} "
                    f"(request epoch), {first_seq} (seq. number), {entry.producer_epoch} (current producer epoch)",
                    batch.position,
                    kind="out_of_order_sequence",
                )
            return None
        last = entry.last_sequence
        if entry.producer_epoch != NO_PRODUCER_EPOCH and not (
            first_seq == last + 1 or (first_seq == 0 and last == INT32_MAX)
        ):
            raise ProducerStateError(
                f"out of order sequence number for producer {batch.producer_id} at offset "
                f"{batch.base_offset}: {first_seq} (incoming seq. number), {last} (current end sequence number)",
                batch.position,
                kind="out_of_order_sequence",
            )
        return None

    def check_marker_append(self, batch: R.Batch) -> None:
        """A transaction marker the coordinator writes (ProducerAppendInfo.appendEndTxnMarker,
        COORDINATOR origin): an epoch older than the producer's raises invalid_producer_epoch;
        a coordinator epoch older than the last marker's raises coordinator_fenced (a zombie
        coordinator after a failover)."""
        if batch.magic < 2 or batch.producer_id < 0 or not batch.is_control or batch.records_count <= 0:
            return
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return
        if batch.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                f"epoch of producer {batch.producer_id} is {batch.producer_epoch}, which is smaller than "
                f"the last seen epoch {entry.producer_epoch}",
                batch.position,
                kind="invalid_producer_epoch",
            )
        marker = R.parse_control_record(next(iter(batch.records())))
        if marker.type in (R.ABORT, R.COMMIT) and entry.coordinator_epoch > marker.coordinator_epoch:
            raise ProducerStateError(
                f"invalid coordinator epoch for producer {batch.producer_id}: {marker.coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)",
                batch.position,
                kind="coordinator_fenced",
            )

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """First offset of the earliest other open transaction, else the marker offset + 1."""
        for first, pid in self._ongoing:
            if pid != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        try:
            self._ongoing.remove((completed.first_offset, completed.producer_id))
        except ValueError:
            pass

    def aborted_txn(self, completed: CompletedTxn) -> AbortedTxn:
        return AbortedTxn(
            0,
            completed.producer_id,
            completed.first_offset,
            completed.last_offset,
            self.last_stable_offset(completed),
        )

    def first_unstable_offset(self) -> int | None:
        return self._ongoing[0][0] if self._ongoing else None
