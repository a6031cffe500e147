"""Test helper: lay out a Kafka partition directory from batches, following Kafka's index rules
(an index entry when more than index.interval.bytes were appended since the last one, keyed on
the batch's last offset at the batch's start; time index entries only for increasing timestamps)."""

from __future__ import annotations

from pathlib import Path

from kafkatool.formats import index as I
from kafkatool.formats import records as R


def write_segment(
    pdir: Path, batches: list[bytes], *, interval: int = 4096, base_offset: int | None = None
) -> Path:
    pdir.mkdir(parents=True, exist_ok=True)
    first = R.read_batch(batches[0])
    base = first.base_offset if base_offset is None else base_offset
    stem = f"{base:020d}"
    log = b""
    idx, tidx = [], []
    since = 0
    max_ts = -1
    max_ts_offset = base
    last_tidx_ts = -1
    for raw in batches:
        b = R.read_batch(raw)
        if b.max_timestamp > max_ts:
            max_ts, max_ts_offset = b.max_timestamp, b.last_offset
        if since > interval:
            idx.append((b.last_offset, len(log)))
            if max_ts > last_tidx_ts:
                tidx.append((max_ts, max_ts_offset))
                last_tidx_ts = max_ts
            since = 0
        since += len(raw)
        log += raw
    if max_ts > last_tidx_ts:
        tidx.append((max_ts, max_ts_offset))  # the final entry written on roll/close
    (pdir / f"{stem}.log").write_bytes(log)
    (pdir / f"{stem}.index").write_bytes(I.encode_offset_index(idx, base))
    (pdir / f"{stem}.timeindex").write_bytes(I.encode_time_index(tidx, base))
    return pdir / f"{stem}.log"


def make_batches(
    n: int,
    *,
    start: int = 0,
    per_batch: int = 5,
    codec_cycle=(0,),
    value_size: int = 300,
    ts0: int = 1_700_000_000_000,
) -> list[bytes]:
    out = []
    offset = start
    for i in range(n):
        recs = [
            R.SimpleRecord(
                bytes([65 + j % 26]) * value_size, b"k%d" % (offset + j), [("h", b"v")], ts0 + offset + j
            )
            for j in range(per_batch)
        ]
        out.append(
            R.build_record_batch(
                recs,
                base_offset=offset,
                codec=codec_cycle[i % len(codec_cycle)],
                partition_leader_epoch=0,
                producer_id=7,
                producer_epoch=0,
                base_sequence=offset,
            )
        )
        offset += per_batch
    return out


def make_partition(
    root: Path,
    name: str = "topic-0",
    segments: int = 2,
    batches_per_segment: int = 30,
    codec_cycle=(0, 1, 2, 3, 4),
) -> Path:
    pdir = root / name
    offset = 0
    for _ in range(segments):
        bs = make_batches(batches_per_segment, start=offset, codec_cycle=codec_cycle)
        write_segment(pdir, bs)
        offset = R.read_batch(bs[-1]).next_offset
    return pdir
