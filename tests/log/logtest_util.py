"""Helpers shared by the storage-engine tests (batches, expected Kafka layouts)."""

from __future__ import annotations

import struct

from kafkatool.formats import records as R


def batch(
    n: int = 1,
    *,
    size: int = 100,
    ts: int = 1000,
    key: bytes | None = b"k",
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    codec: int = 0,
) -> bytes:
    """A client batch of ``n`` records with values of ``size`` bytes (base offset 0)."""
    recs = [R.SimpleRecord(bytes([65 + i % 26]) * size, key, (), ts + i) for i in range(n)]
    return R.build_record_batch(
        recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn, codec=codec
    )


def expected_layout(sizes: list[int], last_offsets: list[int], max_ts: list[int], interval: int):
    """Kafka's index rules, written out independently of the engine:
    offset entry (last offset of the batch, its position) when the bytes appended since
    the previous entry exceed the interval (checked before the batch); time entry
    (max timestamp so far, its batch's last offset) at the same moments when larger
    than the last one, plus a final one on close."""
    index, tindex = [], []
    pos = 0
    since = 0
    best = (-1, -1)
    last_t = -1
    for size, last, ts in zip(sizes, last_offsets, max_ts, strict=True):
        if ts > best[0]:
            best = (ts, last)
        if since > interval:
            index.append((last, pos))
            if best[0] > last_t:
                tindex.append(best)
                last_t = best[0]
            since = 0
        since += size
        pos += size
    if best[0] > last_t and best[0] >= 0:
        tindex.append(best)
    return index, tindex


def read_index(path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def read_time_index(path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def all_records(log) -> list[tuple[int, bytes | None]]:
    out = []
    for b in log.batches():
        for r in b.records():
            out.append((r.offset, r.value))
    return out
