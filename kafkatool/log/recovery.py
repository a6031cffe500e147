"""Kafka's start-up recovery of a partition dir, on demand: plan it, report it, apply it.

:func:`plan_partition` works read-only and predicts exactly what opening the
log would do (notes/storage.md section 6): finish or roll back interrupted
``.cleaned``/``.swap``/``.deleted`` operations, delete orphaned index files,
recover segments whose ``.index`` is missing and every segment from the
recovery point on, truncate at the first invalid batch, drop every later
segment, drop everything when the log end falls below the log start offset.

:func:`apply_plan` then keeps what would be lost -- the cut bytes go to a
quarantine file, dropped segments are moved whole -- and runs the engine's own
loader (:class:`kafkatool.log.log.Log`), which does the truncation, index
rebuild and producer-state rebuild.  Steps are ordered so that a crash at any
point leaves a dir that the next run (or a Kafka broker) recovers without
losing a valid record or duplicating one: quarantine copies are written
aside and renamed, dropped segments are moved newest first (no holes), and
the log itself is only touched by the loader.

Quarantine location: ``<partition dir>/kafkatool-quarantine/<UTC time>/``.  A
Kafka broker only loads regular files of a partition dir (subdirectories are
skipped by LogLoader), and at the log-dir level it treats every directory as a
partition (an unparsable name takes the whole dir offline), so a folder
*inside* the partition dir is the one place Kafka safely ignores.  Deleting the
topic deletes it with the partition dir.  Cut bytes are named
``<base>.cut-<from>-<to>.log`` and salvaged batches ``<first offset>.salvaged.log``;
both end in ``.log`` so ``kafkatool dump-log`` reads them, with a ``.json``
sidecar describing the origin.  A zero-filled (preallocated) tail is cut
without a copy: it holds no data.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.formats.index import IndexOffsetOverflowError
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
    file_name_for_offset,
    offset_from_file_name,
)
from kafkatool.log.leftovers import plan_leftovers
from kafkatool.log.log import Log
from kafkatool.log.rebuild import KIND_SUFFIX, compare_index
from kafkatool.log.segment import SWAP_SUFFIX, scan_for_recovery

QUARANTINE_DIR = "kafkatool-quarantine"
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def utc_stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))


@dataclass
class BatchRef:
    position: int
    end: int
    base_offset: int
    last_offset: int

    def as_dict(self) -> dict:
        return {
            "position": self.position,
            "end": self.end,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
        }


@dataclass
class Cut:
    """Bytes recovery removes from the end of one segment."""

    segment: Path  # the .log file as it is on disk now
    base_offset: int
    file_size: int
    start: int  # first byte removed
    reason: str
    message: str | None
    batches_kept: int
    next_offset: int  # the segment's next offset after the cut
    first_offset_cut: int | None  # offset field of the entry at the cut, when a header is there
    zero_tail: bool
    valid_after: list[BatchRef] = field(default_factory=list)  # valid batches inside the cut region
    why: str = "recovery"  # recovery | missing_index

    @property
    def bytes(self) -> int:
        return self.file_size - self.start

    def as_dict(self) -> dict:
        va = self.valid_after
        return {
            "segment": str(self.segment),
            "base_offset": self.base_offset,
            "byte_range": [self.start, self.file_size],
            "bytes": self.bytes,
            "reason": self.reason,
            "message": self.message,
            "batches_kept": self.batches_kept,
            "next_offset": self.next_offset,
            "first_offset_cut": self.first_offset_cut,
            "zero_tail": self.zero_tail,
            "valid_batches_in_cut": len(va),
            "valid_offsets_in_cut": [va[0].base_offset, va[-1].last_offset] if va else None,
            "recovered_because": self.why,
        }


@dataclass
class DroppedSegment:
    base_offset: int
    path: Path
    size: int
    first_offset: int | None
    last_offset: int | None
    batches: int
    reason: str

    def as_dict(self) -> dict:
        return {
            "segment": str(self.path),
            "base_offset": self.base_offset,
            "bytes": self.size,
            "offsets": [self.first_offset, self.last_offset] if self.first_offset is not None else None,
            "batches": self.batches,
            "reason": self.reason,
        }


@dataclass
class PartitionPlan:
    dir: Path
    recovery_point: int
    log_start_offset: int
    file_actions: list[dict] = field(default_factory=list)  # delete / rename of leftover files
    recovered: list[dict] = field(default_factory=list)  # segments recovery rebuilds (index differences)
    cuts: list[Cut] = field(default_factory=list)
    dropped: list[DroppedSegment] = field(default_factory=list)
    log_end_before: int | None = None
    log_end_after: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def findings(self) -> bool:
        return bool(
            self.file_actions or self.cuts or self.dropped or any(r["index_changes"] for r in self.recovered)
        )

    @property
    def cut_bytes(self) -> int:
        return sum(c.bytes for c in self.cuts) + sum(d.size for d in self.dropped)


def _segment_facts(path: Path, base: int, config: LogConfig) -> tuple[int | None, int | None, int, int]:
    """(first offset, last offset, batches, next offset) by a header walk (stops at damage)."""
    first = last = None
    n = 0
    with FileRecords(path) as fr:
        try:
            for b in fr.batches():
                if first is None:
                    first = b.base_offset if b.magic >= 2 else b.offset
                last = b.last_offset
                n += 1
        except FormatError:
            pass
    return first, last, n, (last + 1 if last is not None else base)


def _valid_at(region: bytes, pos: int) -> R.Batch | None:
    try:
        batch = R.read_batch(region, pos)
    except FormatError:
        return None
    return batch if batch is not None and batch.is_valid() else None


def _valid_batches_after(buf, start: int, limit: int = 1_000_000) -> list[BatchRef]:
    """Valid batches in buf[start:]: walk batch by batch, resynchronising after damage."""
    region = bytes(memoryview(buf)[start:])  # one copy: the resync search needs bytes.find
    out: list[BatchRef] = []
    pos = 0
    while len(out) < limit and pos < len(region):
        batch = _valid_at(region, pos) or R.find_next_valid_batch(region, pos)
        if batch is None:
            break
        base = batch.base_offset if batch.magic >= 2 else batch.offset
        out.append(BatchRef(start + batch.position, start + batch.end, base, batch.last_offset))
        pos = batch.end
    return out


def plan_partition(
    part_dir: str | os.PathLike,
    config: LogConfig | None = None,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
) -> PartitionPlan:
    """Predict what Kafka's loader does to this partition dir after an unclean shutdown."""
    part_dir = Path(part_dir)
    config = config or LogConfig()
    plan = PartitionPlan(part_dir, recovery_point, log_start_offset)
    names = {n for n in os.listdir(part_dir) if (part_dir / n).is_file()}

    # 1. leftovers of interrupted operations, exactly as the loader handles them
    leftovers = plan_leftovers(part_dir, names, config)
    for n, reason in leftovers.deletes:
        plan.file_actions.append({"action": "delete", "file": str(part_dir / n), "reason": reason})
        names.discard(n)
    # physical path of each logical file name once swaps are renamed
    physical = {n: part_dir / n for n in names}
    for n in sorted(names):
        if n.endswith(SWAP_SUFFIX):
            target = n[: -len(SWAP_SUFFIX)]
            plan.file_actions.append(
                {
                    "action": "rename",
                    "file": str(part_dir / n),
                    "to": str(part_dir / target),
                    "reason": "finish an interrupted swap",
                }
            )
            physical.pop(n)
            physical[target] = part_dir / n
    names = set(physical)

    # 2. orphaned indexes, segments
    for n in sorted(names):
        if any(n.endswith(s) for s in _INDEX_SUFFIXES) and offset_from_file_name(n) is not None:
            if n.rsplit(".", 1)[0] + LOG_SUFFIX not in names:
                plan.file_actions.append(
                    {"action": "delete", "file": str(physical[n]), "reason": "orphaned index file"}
                )
    bases = sorted(
        off for n in names if n.endswith(LOG_SUFFIX) and (off := offset_from_file_name(n)) is not None
    )
    if bases:
        last_path = physical[file_name_for_offset(bases[-1], LOG_SUFFIX)]
        plan.log_end_before = _segment_facts(last_path, bases[-1], config)[3]

    def log_path(base: int) -> Path:
        return physical[file_name_for_offset(base, LOG_SUFFIX)]

    next_offsets: dict[int, int] = {}
    recovered_at_load: set[int] = set()

    def recover(base: int, why: str) -> bool:
        path = log_path(base)
        with FileRecords(path) as fr:
            try:
                scan = scan_for_recovery(fr.buf, base, config.index_interval_bytes)
            except IndexOffsetOverflowError as exc:
                plan.file_actions.append(
                    {
                        "action": "split",
                        "file": str(path),
                        "reason": f"offsets overflow the segment's 32-bit relative range ({exc.message}); "
                        "Kafka splits it into segments that fit",
                    }
                )
                return False
            start = 0 if scan.invalid_offset else scan.valid_bytes
            kept = 0 if scan.invalid_offset else scan.batches
            nxt = base if scan.invalid_offset or scan.next_offset is None else scan.next_offset
            next_offsets[base] = nxt
            entries = ([], []) if scan.invalid_offset else (scan.index_entries, scan.time_entries)
            changes = []
            from kafkatool.formats import index as fx

            rebuilt = {
                "offset": fx.encode_offset_index(entries[0], base),
                "time": fx.encode_time_index(entries[1], base),
            }
            for kind, data in rebuilt.items():
                name = file_name_for_offset(base, KIND_SUFFIX[kind])
                p = physical.get(name)
                existing = p.read_bytes() if p is not None else None
                d = compare_index(kind, p or part_dir / name, existing, data, base)
                if d.differs:
                    changes.append(d.as_dict())
            plan.recovered.append(
                {
                    "segment": str(path),
                    "base_offset": base,
                    "recovered_because": why,
                    "index_changes": changes,
                }
            )
            if start < scan.file_size:
                head = R.peek_entry(fr.buf, start)
                plan.cuts.append(
                    Cut(
                        path,
                        base,
                        scan.file_size,
                        start,
                        scan.stop_reason or "invalid_offset",
                        scan.stop_message,
                        kept,
                        nxt,
                        head[0] if head is not None else None,
                        scan.stop_reason == "zero_tail",
                        _valid_batches_after(fr.buf, start) if scan.stop_reason != "zero_tail" else [],
                        why,
                    )
                )
                return True
        return False

    for base in bases:
        if file_name_for_offset(base, INDEX_SUFFIX) not in names:
            recover(base, "missing_index")
            recovered_at_load.add(base)
    # 3. segments from the one holding the recovery point on
    first_unflushed = 0
    for i, b in enumerate(bases):
        if b <= recovery_point:
            first_unflushed = i
    unflushed = bases[first_unflushed:]
    for i, base in enumerate(unflushed):
        if base in recovered_at_load:
            continue  # a second pass finds nothing more to cut
        if recover(base, "unflushed"):
            for later in reversed(unflushed[i + 1 :]):
                _drop(plan, part_dir, physical, later, config, "follows a truncated segment")
            bases = [b for b in bases if b <= base]
            break
    # 4. log end below the log start offset: everything goes
    if bases:
        last = bases[-1]
        log_end = next_offsets.get(last)
        if log_end is None:
            log_end = _segment_facts(log_path(last), last, config)[3]
        if log_end < log_start_offset:
            for b in reversed(bases):
                _drop(
                    plan,
                    part_dir,
                    physical,
                    b,
                    config,
                    f"log end offset {log_end} is below the log start offset {log_start_offset}",
                )
            plan.cuts = []
            plan.log_end_after = log_start_offset
        else:
            plan.log_end_after = log_end
    else:
        plan.log_end_after = log_start_offset
    return plan


def _drop(
    plan: PartitionPlan, part_dir: Path, physical: dict, base: int, config: LogConfig, reason: str
) -> None:
    path = physical[file_name_for_offset(base, LOG_SUFFIX)]
    first, last, n, _ = _segment_facts(path, base, config)
    if any(d.base_offset == base for d in plan.dropped):
        return
    plan.dropped.append(DroppedSegment(base, path, path.stat().st_size, first, last, n, reason))


# ---------------------------------------------------------------------------- apply


@dataclass
class ApplyResult:
    quarantine_dir: Path | None
    quarantined: list[str] = field(default_factory=list)
    salvaged: list[dict] = field(default_factory=list)
    log_end_offset: int | None = None
    warnings: list[str] = field(default_factory=list)


def apply_plan(
    plan: PartitionPlan,
    config: LogConfig | None = None,
    *,
    salvage: bool = False,
    stamp: str | None = None,
) -> ApplyResult:
    """Keep what recovery would lose, then let the loader recover the dir.  The caller holds the lock."""
    config = config or LogConfig()
    part_dir = plan.dir
    stamp = stamp or utc_stamp()
    needs_quarantine = any(c.bytes and not c.zero_tail for c in plan.cuts) or plan.dropped
    qdir = part_dir / QUARANTINE_DIR / stamp if needs_quarantine else None
    result = ApplyResult(qdir)
    if qdir is not None:
        fileops.mkdir(qdir)
    for cut in plan.cuts:
        if not cut.bytes or cut.zero_tail:
            continue  # a zero-filled (preallocated) tail holds no data worth keeping
        name = f"{cut.base_offset:020d}.cut-{cut.start}-{cut.file_size}"
        target = qdir / (name + LOG_SUFFIX)
        if not target.exists():
            fileops.copy_range(cut.segment, cut.start, cut.file_size, target)
        side = {
            "origin": str(cut.segment),
            "tool": "kafkatool recover",
            "time": stamp,
            **cut.as_dict(),
            "valid_batches_in_cut": [b.as_dict() for b in cut.valid_after],
        }
        fileops.atomic_write(qdir / (name + ".json"), json.dumps(side, indent=2).encode() + b"\n")
        result.quarantined.append(str(target))
        if salvage and cut.valid_after:
            first = cut.valid_after[0].base_offset
            sname = f"{first:020d}.salvaged"
            with open(cut.segment, "rb") as f:
                parts = []
                for b in cut.valid_after:
                    f.seek(b.position)
                    parts.append(f.read(b.end - b.position))
            fileops.atomic_write(qdir / (sname + LOG_SUFFIX), b"".join(parts))
            fileops.atomic_write(
                qdir / (sname + ".json"),
                json.dumps(
                    {
                        "origin": str(cut.segment),
                        "tool": "kafkatool recover --salvage",
                        "time": stamp,
                        "batches": [b.as_dict() for b in cut.valid_after],
                    },
                    indent=2,
                ).encode()
                + b"\n",
            )
            result.salvaged.append(
                {
                    "file": str(qdir / (sname + LOG_SUFFIX)),
                    "batches": len(cut.valid_after),
                    "offsets": [first, cut.valid_after[-1].last_offset],
                }
            )
    # newest first, so an interruption never leaves a hole in the offsets
    for d in sorted(plan.dropped, key=lambda d: -d.base_offset):
        for suffix in (TXN_INDEX_SUFFIX, TIME_INDEX_SUFFIX, INDEX_SUFFIX, SNAPSHOT_SUFFIX, LOG_SUFFIX):
            src = part_dir / file_name_for_offset(d.base_offset, suffix)
            if suffix == LOG_SUFFIX:
                src = d.path
            if src.exists():
                dst = qdir / src.name
                if dst.exists():
                    dst = qdir / (src.name + ".dup")
                fileops.rename(src, dst)
                if suffix == LOG_SUFFIX:
                    result.quarantined.append(str(dst))
    log = Log(
        part_dir,
        config,
        log_start_offset=plan.log_start_offset,
        recovery_point=plan.recovery_point,
        had_clean_shutdown=False,
    )
    try:
        result.log_end_offset = log.log_end_offset
    finally:
        log.close()
    if plan.log_end_after is not None and result.log_end_offset != plan.log_end_after:
        result.warnings.append(
            f"{part_dir}: log end offset after recovery is {result.log_end_offset}, the plan said {plan.log_end_after}"
        )
    return result


# ---------------------------------------------------------------------------- checkpoints of the log dir


# ---------------------------------------------------------------------------- what a PATH names


def resolve_targets(path: str | os.PathLike) -> tuple[Path, list[Path]]:
    """(log dir, partition dirs) for a partition dir or a whole log dir, by LogManager's rule."""
    from kafkatool.log.manager import resolve_path

    log_dir, parts = resolve_path(path)
    return log_dir, [p for p, _ in parts]
