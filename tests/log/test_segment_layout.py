"""A segment written by the engine has Kafka's layout: names, index entries, trimmed sizes."""

from __future__ import annotations

import os
import random

from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.segment import Segment
from tests.log.logtest_util import batch, expected_layout, read_index, read_time_index


def _append_all(log: Log, sizes: list[int], ts_list: list[int], counts: list[int]):
    lasts = []
    for size, ts, n in zip(sizes, ts_list, counts, strict=True):
        info = log.append_as_leader(batch(n, size=size, ts=ts - n + 1), leader_epoch=0)
        lasts.append(info.last_offset)
    return lasts


def test_index_entries_and_trimmed_sizes_follow_kafka_rules(tmp_path):
    rng = random.Random(7)
    cfg = LogConfig(index_interval_bytes=4096)
    log = Log(tmp_path / "t-0", cfg)
    n = 200
    counts = [rng.randint(1, 5) for _ in range(n)]
    sizes_in = [rng.randint(10, 3000) for _ in range(n)]
    ts = [1000 + rng.randint(-50, 400) + i * 3 for i in range(n)]
    lasts = _append_all(log, sizes_in, ts, counts)
    seg_path = tmp_path / "t-0" / "00000000000000000000.log"
    batches = list(R.iter_batches(seg_path.read_bytes()))
    # while active the indexes are preallocated to segment.index.bytes rounded to whole entries
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.index") == 10485760
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.timeindex") == 10485756
    log.close()
    sizes = [b.size for b in batches]
    assert [b.last_offset for b in batches] == lasts
    exp_index, exp_time = expected_layout(sizes, lasts, [b.max_timestamp for b in batches], 4096)
    d = tmp_path / "t-0"
    assert read_index(d / "00000000000000000000.index") == exp_index
    assert read_time_index(d / "00000000000000000000.timeindex") == exp_time
    assert os.path.getsize(d / "00000000000000000000.index") == 8 * len(exp_index)
    assert os.path.getsize(d / "00000000000000000000.timeindex") == 12 * len(exp_time)
    assert not (d / "00000000000000000000.txnindex").exists()
    assert exp_index and exp_index[0][1] > 4096  # the first batch is never indexed


def test_roll_names_and_trims_segments(tmp_path):
    cfg = LogConfig(segment_bytes=20_000, index_interval_bytes=1000, preallocate=True)
    d = tmp_path / "t-3"
    log = Log(d, cfg)
    for _ in range(100):
        log.append_as_leader(batch(2, size=450), leader_epoch=1)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    # preallocated active log is sized to segment.bytes; rolled ones are trimmed
    assert os.path.getsize(log.active_segment.log_path) == 20_000
    for seg in log.segments[:-1]:
        assert os.path.getsize(seg.log_path) == seg.size <= 20_000
        assert os.path.getsize(seg.offset_index.path) == 8 * seg.offset_index.entries
        assert os.path.getsize(seg.time_index.path) == 12 * seg.time_index.entries
        assert (d / f"{seg.base_offset:020d}.snapshot").exists() or seg.base_offset == 0
    log.close()
    names = sorted(os.listdir(d))
    for b in bases:
        assert f"{b:020d}.log" in names
        assert f"{b:020d}.index" in names
        assert f"{b:020d}.timeindex" in names
    assert os.path.getsize(d / f"{bases[-1]:020d}.log") == log.segments[-1].size
    # each segment starts at the offset following the previous one
    for prev, nxt in zip(bases, bases[1:], strict=False):
        seg = Segment(d, prev, cfg, writable=False)
        assert seg.read_next_offset() == nxt
        seg.close()


def test_segment_read_slice_and_min_one_message(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    for _ in range(50):
        log.append_as_leader(batch(3, size=200), leader_epoch=0)
    seg = log.active_segment
    found = seg.translate_offset(31)
    assert found.offset == 32 and found.position == 10 * (found.size)
    piece = seg.read(31, 10)
    assert piece.size == 10 and piece.position == found.position
    piece = seg.read(31, 10, min_one_message=True)
    assert piece.size == found.size
    data = piece.read_bytes()
    b = R.read_batch(data)
    assert b.base_offset == 30 and b.last_offset == 32
    assert seg.read(150, 100) is None
    log.close()


def test_follower_chunk_indexes_chunk_last_offset_at_chunk_start(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=10))
    chunks = []
    off = 0
    for _ in range(4):
        parts = []
        for _ in range(3):
            b = bytearray(batch(2, size=50))
            R.set_base_offset(b, 0, off)
            off += 2
            parts.append(bytes(b))
        chunks.append(b"".join(parts))
    pos = 0
    expected = []
    for i, chunk in enumerate(chunks):
        log.append_as_follower(chunk)
        if i > 0:
            expected.append((6 * i + 5, pos))
        pos += len(chunk)
    log.close()
    assert read_index(tmp_path / "t-0" / "00000000000000000000.index") == expected
