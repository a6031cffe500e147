"""Rebuild a segment's ``.index``, ``.timeindex`` and ``.txnindex`` from its ``.log``.

The rebuilt files are exactly what Kafka's recovery writes (same pass:
:func:`kafkatool.log.segment.scan_for_recovery`), trimmed to their entries.
The transaction index needs the producer state before the segment (an
aborted transaction may have started in an earlier segment, and its last
stable offset depends on other open transactions), so a partition is
processed in segment order from the latest valid producer snapshot at or
below its first segment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import index as fx
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
    file_name_for_offset,
    offset_from_file_name,
)
from kafkatool.log.producer_state import ProducerStateManager
from kafkatool.log.segment import SegmentScan, scan_for_recovery

KIND_SUFFIX = {"offset": INDEX_SUFFIX, "time": TIME_INDEX_SUFFIX, "txn": TXN_INDEX_SUFFIX}


@dataclass
class IndexDiff:
    """How an existing index file differs from the rebuilt one."""

    kind: str  # offset | time | txn
    path: Path
    exists: bool
    existing_size: int
    rebuilt_size: int
    existing_entries: int  # entries a reader would trust
    rebuilt_entries: int
    first_difference: int | None = None  # first slot that differs
    existing_at: list | None = None  # entry at that slot in the existing file (None: absent)
    rebuilt_at: list | None = None
    note: str | None = None

    @property
    def differs(self) -> bool:
        return (
            self.first_difference is not None
            or self.existing_size != self.rebuilt_size
            or (not self.exists and self.rebuilt_size > 0)
        )

    def as_dict(self) -> dict:
        return {
            "index": self.kind,
            "file": str(self.path),
            "exists": self.exists,
            "existing_bytes": self.existing_size,
            "rebuilt_bytes": self.rebuilt_size,
            "existing_entries": self.existing_entries,
            "rebuilt_entries": self.rebuilt_entries,
            "first_difference_slot": self.first_difference,
            "existing_entry": self.existing_at,
            "rebuilt_entry": self.rebuilt_at,
            "note": self.note,
        }


@dataclass
class SegmentRebuild:
    base_offset: int
    log_path: Path
    scan: SegmentScan
    rebuilt: dict[str, bytes] = field(default_factory=dict)  # kind -> file bytes
    diffs: list[IndexDiff] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[IndexDiff]:
        return [d for d in self.diffs if d.differs]

    @property
    def damaged(self) -> bool:
        return self.scan.valid_bytes < self.scan.file_size or self.scan.invalid_offset


def _entries(kind: str, data: bytes, base: int) -> list:
    if kind == "offset":
        return [list(e) for e in fx.scan_offset_index(data, base).entries]
    if kind == "time":
        return [list(e) for e in fx.scan_time_index(data, base).entries]
    try:
        return [
            [t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset]
            for t in fx.decode_txn_entries(data)
        ]
    except fx.FormatError:
        return []


ENTRY_SIZE = {"offset": fx.OFFSET_ENTRY_SIZE, "time": fx.TIME_ENTRY_SIZE, "txn": fx.TXN_ENTRY_SIZE}


def _slot(kind: str, data: bytes, i: int, base: int) -> list | None:
    size = ENTRY_SIZE[kind]
    chunk = data[i * size : (i + 1) * size]
    if len(chunk) < size:
        return None
    if kind == "offset":
        r, p = fx.decode_offset_entries(chunk)[0]
        return [base + r, p]
    if kind == "time":
        t, r = fx.decode_time_entries(chunk)[0]
        return [t, base + r]
    return _entries(kind, chunk, base)[0] if _entries(kind, chunk, base) else None


def _first_difference(a: bytes, b: bytes) -> int | None:
    """Index of the first differing byte (C-speed bisection on prefixes); None if one is a prefix of the other."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return None
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def compare_index(kind: str, path: Path, existing: bytes | None, rebuilt: bytes, base: int) -> IndexDiff:
    exists = existing is not None
    old = existing or b""
    trusted = _entries(kind, old, base)
    diff = IndexDiff(
        kind, path, exists, len(old), len(rebuilt), len(trusted), len(_entries(kind, rebuilt, base))
    )
    if old == rebuilt:
        return diff
    size = ENTRY_SIZE[kind]
    at = _first_difference(old, rebuilt)
    slot = at // size if at is not None else min(len(old), len(rebuilt)) // size
    x, y = _slot(kind, old, slot, base), _slot(kind, rebuilt, slot, base)
    if x != y:
        diff.first_difference = slot
        diff.existing_at, diff.rebuilt_at = x, y
    if len(old) > len(rebuilt) and not old[len(rebuilt) :].strip(b"\x00") and at is None:
        diff.note = "untrimmed zero-filled (preallocated) tail"
    elif at is None and len(old) % size:
        diff.note = f"{len(old) % size} trailing bytes (partial slot)"
    return diff


def segment_bases(part_dir: Path) -> list[int]:
    out = []
    for name in os.listdir(part_dir):
        if name.endswith(LOG_SUFFIX) and (part_dir / name).is_file():
            off = offset_from_file_name(name)
            if off is not None:
                out.append(off)
    return sorted(out)


def rebuild_partition(
    part_dir: str | os.PathLike, config: LogConfig | None = None, *, apply: bool = False
) -> list[SegmentRebuild]:
    """Rebuild every segment's indexes; with ``apply`` replace the files that differ
    (each atomically: write aside, fsync, rename, fsync the dir)."""
    part_dir = Path(part_dir)
    config = config or LogConfig()
    bases = segment_bases(part_dir)
    psm = ProducerStateManager(part_dir, expiration_ms=config.producer_id_expiration_ms, writable=False)
    if bases:
        for off in list(psm.snapshot_files()):
            if off > bases[0]:
                psm.delete_snapshot(off)  # read-only: only hides it
        # expiry only drops producers without an open transaction: irrelevant to the txn index
        psm.load_from_snapshot(bases[0], now_ms=0)
    results = []
    for base in bases:
        log_path = part_dir / file_name_for_offset(base, LOG_SUFFIX)
        aborted: list[fx.AbortedTxn] = []

        def on_batch(batch, _aborted=aborted):
            completed = psm.update(batch)
            if completed is not None:
                if completed.is_aborted:
                    _aborted.append(psm.aborted_txn(completed))
                psm.complete_txn(completed)

        with FileRecords(log_path) as fr:
            scan = scan_for_recovery(fr.buf, base, config.index_interval_bytes, on_batch=on_batch)
        if scan.invalid_offset:
            # Kafka's recovery would empty this segment: indexes describe nothing
            scan.index_entries.clear()
            scan.time_entries.clear()
            aborted.clear()
        res = SegmentRebuild(base, log_path, scan)
        res.rebuilt = {
            "offset": fx.encode_offset_index(scan.index_entries, base),
            "time": fx.encode_time_index(scan.time_entries, base),
            "txn": fx.encode_txn_index(aborted),
        }
        for kind, data in res.rebuilt.items():
            path = part_dir / file_name_for_offset(base, KIND_SUFFIX[kind])
            try:
                existing = path.read_bytes()
            except FileNotFoundError:
                existing = None
            res.diffs.append(compare_index(kind, path, existing, data, base))
        if apply:
            for d in res.changed:
                if d.kind == "txn" and not res.rebuilt["txn"] and not d.exists:
                    continue
                fileops.atomic_write(d.path, res.rebuilt[d.kind])
                res.replaced.append(str(d.path))
        results.append(res)
    return results
