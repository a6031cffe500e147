"""Retention: which whole segments Kafka deletes, and deleting them (UnifiedLog.deleteOldSegments).

Kafka runs three passes in this order, each oldest-first and each stopping at
the first segment that does not qualify (notes/storage.md section 7):

1. log start offset (always, whatever ``cleanup.policy``): a segment goes when
   the next segment's base offset is <= the log start offset;
2. size (``retention.bytes`` >= 0, policy contains ``delete``): while the log
   minus the segment stays >= ``retention.bytes``;
3. time (``retention.ms`` >= 0, policy contains ``delete``): now minus the
   segment's largest timestamp (time index, else the ``.log`` mtime) is more
   than ``retention.ms``.

A segment only qualifies when its end (the next base offset, or the log end
offset) is <= the high watermark, so the log start offset never passes it.
Unlike the broker (which rolls a new empty segment first), this tool never
deletes the last segment: an offline tool must not invent the active segment;
the plan says when Kafka would have deleted it too.

Deleting follows Kafka's dance through the engine (``Log.delete_segments``):
the segment's files get ``.deleted`` appended and are removed, its producer
snapshot likewise, the log start offset moves to the next segment's base.
The broker waits ``file.delete.delay.ms`` before the physical delete; an
offline tool has no background thread, so the removal is immediate, after a
hard link of the ``.log`` (and ``.txnindex``) went to the quarantine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import TXN_INDEX_SUFFIX
from kafkatool.log.log import Log
from kafkatool.log.maintenance import Quarantine
from kafkatool.log.segment import Segment

REASON_LOG_START = "log-start-offset"
REASON_SIZE = "retention.bytes"
REASON_TIME = "retention.ms"


@dataclass
class SegmentDeletion:
    path: Path
    base_offset: int
    next_offset: int  # the next segment's base offset (end of this segment's offsets, exclusive)
    size: int
    largest_timestamp: int
    timestamp_source: str  # "time index" or "mtime"
    reason: str
    detail: str

    def as_dict(self) -> dict:
        return {
            "segment": str(self.path),
            "base_offset": self.base_offset,
            "offsets": [self.base_offset, self.next_offset - 1],
            "next_offset": self.next_offset,
            "bytes": self.size,
            "largest_timestamp": self.largest_timestamp,
            "timestamp_source": self.timestamp_source,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass
class RetentionPlan:
    dir: Path
    log_start_before: int
    log_end_offset: int
    high_watermark: int
    size_before: int
    segments_before: int
    deletions: list[SegmentDeletion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def log_start_after(self) -> int:
        return self.deletions[-1].next_offset if self.deletions else self.log_start_before

    @property
    def bytes_deleted(self) -> int:
        return sum(d.size for d in self.deletions)

    @property
    def changes(self) -> bool:
        return bool(self.deletions)


def _timestamp(seg: Segment) -> tuple[int, str]:
    if seg.max_timestamp_so_far >= 0:
        return seg.max_timestamp_so_far, "time index"
    return seg.last_modified_ms, "mtime"


def plan_retention(log: Log, config: LogConfig, *, now_ms: int) -> RetentionPlan:
    """What Kafka's deleteOldSegments would delete now (the log's high watermark must be set)."""
    segments = log.segments
    hw = log.high_watermark
    plan = RetentionPlan(
        log.dir, log.log_start_offset, log.log_end_offset, hw, sum(s.size for s in segments), len(segments)
    )
    remaining = list(segments)

    def run(predicate, reason: str) -> None:
        nonlocal remaining
        i = 0
        while i < len(remaining) - 1:
            seg, nxt = remaining[i], remaining[i + 1]
            if hw < nxt.base_offset:
                break
            detail = predicate(seg, nxt)
            if detail is None:
                break
            ts, source = _timestamp(seg)
            plan.deletions.append(
                SegmentDeletion(
                    seg.log_path, seg.base_offset, nxt.base_offset, seg.size, ts, source, reason, detail
                )
            )
            i += 1
        remaining = remaining[i:]
        if len(remaining) == 1:
            last = remaining[0]
            if last.size > 0 and hw >= log.log_end_offset and predicate(last, None) is not None:
                plan.notes.append(
                    f"the last segment ({last.base_offset}) also breaches {reason}: a broker would roll a new "
                    "segment and delete it; this tool keeps the last segment"
                )

    lso = log.log_start_offset
    run(
        lambda seg, nxt: (
            f"next segment starts at {nxt.base_offset} <= log start offset {lso}"
            if nxt is not None and nxt.base_offset <= lso
            else None
        ),
        REASON_LOG_START,
    )
    if config.delete:
        if config.retention_bytes >= 0:
            diff = sum(s.size for s in remaining) - config.retention_bytes

            def by_size(seg: Segment, nxt) -> str | None:
                nonlocal diff
                if diff < 0 or diff - seg.size < 0:
                    return None
                diff -= seg.size
                return f"log is {diff + seg.size} bytes over retention.bytes {config.retention_bytes}"

            if diff >= 0:
                run(by_size, REASON_SIZE)
        if config.retention_ms >= 0:

            def by_time(seg: Segment, nxt) -> str | None:
                ts, source = _timestamp(seg)
                if ts > now_ms:
                    plan.notes.append(
                        f"segment {seg.base_offset} has its largest timestamp {ts} in the future: time "
                        "retention cannot delete it (nor anything after it) until then"
                    )
                age = now_ms - ts
                if age > config.retention_ms:
                    return f"largest timestamp {ts} ({source}) is {age} ms old > retention.ms {config.retention_ms}"
                return None

            run(by_time, REASON_TIME)
    else:
        plan.notes.append(
            f"cleanup.policy={','.join(config.cleanup_policy)}: only segments below the log start offset are deleted"
        )
    if hw < log.log_end_offset:
        plan.notes.append(f"segments ending above the high watermark {hw} are kept")
    return plan


@dataclass
class RetentionResult:
    deleted: list[int] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    log_start_offset: int = 0


def apply_retention(log: Log, plan: RetentionPlan, *, quarantine: Quarantine | None) -> RetentionResult:
    """Delete the planned segments, oldest first (so an interruption never leaves a hole)."""
    result = RetentionResult(log_start_offset=log.log_start_offset)
    for d in plan.deletions:
        seg = log.floor_segment(d.base_offset)
        if seg is None or seg.base_offset != d.base_offset or seg is log.active_segment:
            raise RuntimeError(
                f"{log.dir}: planned segment {d.base_offset} is not a deletable segment of the log"
            )
        if quarantine is not None:
            kept = quarantine.keep(seg.log_path, {"kind": "segment removed by retention", **d.as_dict()})
            result.quarantined.append(str(kept))
            txn = seg.log_path.with_suffix(TXN_INDEX_SUFFIX)
            if txn.exists() and txn.stat().st_size:
                result.quarantined.append(
                    str(quarantine.keep(txn, {"kind": "aborted transactions of the segment"}))
                )
        # Kafka's dance, one segment at a time: .deleted rename, removal, log start offset
        log.delete_segments([seg], async_delete=False)
        result.deleted.append(d.base_offset)
    result.log_start_offset = log.log_start_offset
    return result
