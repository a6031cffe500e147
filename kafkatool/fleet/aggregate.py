"""The aggregation side of the fleet scan, in plain Python (called from Spark tasks).

- :func:`summarize_replica`: the per-partition checks of ``verify`` that need
  consecutive segments (overlaps, segments after a damaged one, leader epochs
  against the checkpoint: verify's own functions where they take no file handle), plus offset gaps between segments, the replica's
  offset extent and the offsets it cannot vouch for (damaged stretches).
- :func:`compare_replicas`: two copies of a partition compared batch by batch
  (base offset, last offset, leader epoch, CRC) over their common offset range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.forensics import verify as V

# A replica is named by (broker, log dir): a broker id alone is not unique when
# several log dirs are scanned without an inventory.
ReplicaId = tuple  # (broker, log_dir)


@dataclass
class ReplicaSummary:
    topic: str
    partition: int
    broker: int | None
    log_dir: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    corrupt_segments: int = 0
    findings: list[dict] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    unknown: list[tuple[float, float]] = field(default_factory=list)  # inclusive offset ranges
    cleaner_offset: int | None = None


def _finding(file, position, end, offset, kind, message, severity) -> dict:
    return {
        "file": file,
        "position": position,
        "end": end,
        "offset": offset,
        "kind": kind,
        "severity": severity,
        "message": message,
    }


def _seg_order(row: dict):
    base = row["base_offset"]
    name = row["file"].rsplit("/", 1)[-1]
    return (base is None, base or 0, name)


def summarize_replica(
    topic: str,
    partition: int,
    broker: int | None,
    log_dir: str,
    segments: list[dict],
    epoch_checkpoint: list[tuple[int, int]] | None = None,
    epoch_checkpoint_file: str | None = None,
    cleaner_offset: int | None = None,
    compacted: bool = False,
) -> ReplicaSummary:
    """``segments``: the per-segment rows of one partition copy (any order)."""
    s = ReplicaSummary(topic, partition, broker, log_dir, cleaner_offset=cleaner_offset)
    compacted_topic = compacted or cleaner_offset is not None
    segs = sorted(segments, key=_seg_order)
    prev = None
    last_nonempty = None
    epoch_starts: list[tuple[int, int]] = []
    for i, seg in enumerate(segs):
        f = seg["file"]
        s.segments += 1
        s.batches += seg["batches"]
        s.records += seg["records"]
        s.bytes += seg["bytes"]
        if seg["errors"]:
            s.corrupt_segments += 1
        first, last, base = seg["first_offset"], seg["last_offset"], seg["base_offset"]
        if first is not None and (s.first_offset is None or first < s.first_offset):
            s.first_offset = first
        if last is not None and (s.last_offset is None or last > s.last_offset):
            s.last_offset = last
        for key, pick in (("min_timestamp", min), ("max_timestamp", max)):
            v = seg[key]
            if v is not None:
                cur = getattr(s, key)
                setattr(s, key, v if cur is None else pick(cur, v))
        # --- verify_partition's cross-segment checks, in its order
        if prev is not None and first is not None and prev["last_offset"] is not None:
            if first <= prev["last_offset"]:
                name = prev["file"].rsplit("/", 1)[-1]
                s.findings.append(
                    _finding(
                        f,
                        0,
                        None,
                        first,
                        "segment_overlap",
                        f"first offset {first} is not above the previous segment's "
                        f"last offset {prev['last_offset']} ({name})",
                        V.ERROR,
                    )
                )
        if (
            base is not None
            and prev is not None
            and prev["last_offset"] is not None
            and base <= prev["last_offset"]
        ):
            s.findings.append(
                _finding(
                    f,
                    None,
                    None,
                    base,
                    "segment_overlap",
                    f"segment base offset {base} is not above the previous segment's "
                    f"last offset {prev['last_offset']}",
                    V.ERROR,
                )
            )
        prev_damaged = prev is not None and prev["valid_end"] < prev["bytes"]
        if prev_damaged and seg["batches"]:
            s.findings.append(
                _finding(
                    f,
                    0,
                    seg["bytes"],
                    first,
                    "after_damaged_segment",
                    "this segment follows a damaged one: Kafka's recovery deletes every segment "
                    "after a truncated one",
                    V.WARNING,
                )
            )
        # --- offset gaps between consecutive segments (not after damage: reported above)
        if (
            last_nonempty is not None
            and first is not None
            and not prev_damaged
            and first > last_nonempty["last_offset"] + 1
        ):
            lo, hi = last_nonempty["last_offset"] + 1, first - 1
            compacted = compacted_topic
            gap = {
                "topic": topic,
                "partition": partition,
                "broker": broker,
                "log_dir": log_dir,
                "file": f,
                "previous_file": last_nonempty["file"],
                "from_offset": lo,
                "to_offset": hi,
                "missing": hi - lo + 1,
                "compacted": compacted,
            }
            s.gaps.append(gap)
            # missing offsets are not a different history: compare around them
            s.unknown.append((lo, hi))
            s.findings.append(
                _finding(
                    f,
                    None,
                    None,
                    lo,
                    "offset_gap",
                    f"offsets {lo}..{hi} ({hi - lo + 1}) are in no segment between "
                    f"{last_nonempty['file'].rsplit('/', 1)[-1]} and this one"
                    + (
                        " (the topic is compacted: the cleaner removes offsets)"
                        if compacted
                        else " (a missing segment file?)"
                    ),
                    V.INFO if compacted else V.WARNING,
                )
            )
        for epoch, start in seg.get("epoch_starts") or ():
            if not epoch_starts or epoch_starts[-1][0] != epoch:
                epoch_starts.append((epoch, start))
        # --- offsets this copy cannot vouch for: its damaged stretches
        for before, after in seg.get("damaged") or ():
            lo = before + 1 if before is not None else (base if base is not None else -math.inf)
            if after is not None:
                hi = after - 1
            else:
                nxt = next((x["first_offset"] for x in segs[i + 1 :] if x["first_offset"] is not None), None)
                hi = nxt - 1 if nxt is not None else math.inf
            if hi >= lo:
                s.unknown.append((lo, hi))
        prev = seg
        if last is not None:
            last_nonempty = seg
    if epoch_checkpoint is not None and epoch_checkpoint_file is not None:
        # (the listing found the checkpoint well-formed, as verify requires before comparing)
        s.findings += epochs_vs_log(epoch_checkpoint_file, epoch_starts)
    return s


def epochs_vs_log(path: str, epoch_starts: list[tuple[int, int]]) -> list[dict]:
    """verify's leader-epoch check (the checkpoint against the epochs seen in the batches),
    once every segment of the copy is scanned.  Reads the small checkpoint file again: as
    everything in the scan, it must be readable from any executor."""
    if not epoch_starts:
        return []
    from kafkatool.fleet.scan import finding_dict

    return [finding_dict(f) for f in V.epochs_vs_log(Path(path), epoch_starts)]


# ---------------------------------------------------------------- replica comparison


@dataclass
class ReplicaExtent:
    start: int
    end: int
    unknown: list[tuple[float, float]]
    cleaner_offset: int | None = None


def _in_unknown(d, unknown) -> bool:
    base, last = d[0], d[1]
    return any(lo <= last and base <= hi for lo, hi in unknown)


def compare_replicas(
    a: list[tuple[int, int, int, int]],
    b: list[tuple[int, int, int, int]],
    ext_a: ReplicaExtent,
    ext_b: ReplicaExtent,
) -> dict | None:
    """First difference between two copies' batch digests (each sorted by base offset), or None.

    Only the common offset range counts, and offsets one copy cannot vouch for
    (a damaged stretch, reported as corruption already) are skipped.  Below the
    cleaner's checkpoint of a compacted partition, batches of the same leader
    epoch may legitimately differ (each broker cleans on its own)."""
    lo, hi = max(ext_a.start, ext_b.start), min(ext_a.end, ext_b.end)
    if lo > hi:
        return None
    la = [d for d in a if lo <= d[0] <= hi and not _in_unknown(d, ext_b.unknown)]
    lb = [d for d in b if lo <= d[0] <= hi and not _in_unknown(d, ext_a.unknown)]
    cleaned = max(x for x in (ext_a.cleaner_offset, ext_b.cleaner_offset, -1) if x is not None)
    i = j = 0
    while i < len(la) and j < len(lb):
        x, y = la[i], lb[j]
        if x == y:
            i += 1
            j += 1
            continue
        low = min(x[0], y[0])
        # the cleaner keeps a rewritten batch's base offset and epoch, or drops it whole
        tolerate = low < cleaned
        if x[0] == y[0]:
            if tolerate and x[2] == y[2]:
                i += 1
                j += 1
                continue
            return _divergence(low, x, y)
        if x[0] < y[0]:
            if tolerate:
                i += 1
                continue
            return _divergence(low, x, y)
        if tolerate:
            j += 1
            continue
        return _divergence(low, x, y)
    rest_a, rest_b = la[i:], lb[j:]
    for rest, side in ((rest_a, 0), (rest_b, 1)):
        for d in rest:
            if d[0] < cleaned:
                continue
            return _divergence(d[0], d if side == 0 else None, d if side == 1 else None)
    return None


def _divergence(offset: int, x, y) -> dict:
    def side(d):
        return None if d is None else {"base_offset": d[0], "last_offset": d[1], "epoch": d[2], "crc": d[3]}

    return {"offset": offset, "a": side(x), "b": side(y)}
