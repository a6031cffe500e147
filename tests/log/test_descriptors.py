"""Descriptors per partition stay bounded (issue 16, partitions at scale).

A broker holds one descriptor per segment (the ``.log``, as Kafka's FileChannel) and
the active segment's two indexes only once it writes to them; an inactive segment's
indexes are opened (Kafka's LazyIndex) for a read and closed again.  Counted on
/proc/self/fd with real files, no timing.
"""

from __future__ import annotations

import os

import pytest

from kafkatool.log.config import LogConfig
from kafkatool.log.manager import LogManager
from tests.log.logtest_util import all_records, batch

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")

PARTITIONS = 20
CONFIG = LogConfig(segment_bytes=4_000, index_interval_bytes=100)


def open_fds(under=None) -> int:
    """This process's descriptors, or only those open on files under ``under``: other tests'
    client threads (librdkafka, kazoo) may still close sockets of theirs meanwhile, which moved
    a whole-process count by two in a CI run."""
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    prefix = str(under) + os.sep
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since listed (the listing's own descriptor, say)
            continue
        n += target.startswith(prefix)
    return n


def fill(mgr: LogManager) -> None:
    for p in range(PARTITIONS):
        log = mgr.create_log("t", p)
        for _ in range(12):  # several segments, each with index entries
            log.append_as_leader(batch(3, size=300), 0)
        assert len(log.segments) >= 3


def test_descriptors_bounded_by_segments_not_indexes(tmp_path):
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    fill(mgr)
    mgr.shutdown()

    before = open_fds(d)
    mgr = LogManager([d], CONFIG)
    try:
        logs = [mgr.get_log("t", p) for p in range(PARTITIONS)]
        segments = sum(len(log.segments) for log in logs)
        loaded = open_fds(d) - before
        # the .lock, plus one .log per segment: no index is open after a clean start-up
        assert loaded <= segments + 1

        # reads from the start go through inactive segments' offset and time indexes
        for log in logs:
            assert len(all_records(log)) == 36
            first = log.segments[0]
            assert first.offset_index.entries > 0
            assert first.offset_index.lookup(log.log_start_offset + 5).offset <= log.log_start_offset + 5
            assert first.time_index.last_entry.timestamp >= 0
            assert log.read(log.log_start_offset + 5, 10_000).slices
        assert open_fds(d) - before == loaded

        # appends: the active segment keeps its two indexes open, and only those
        for log in logs:
            for _ in range(3):
                log.append_as_leader(batch(3, size=300), 0)
        segments = sum(len(log.segments) for log in logs)
        assert open_fds(d) - before <= segments + 1 + 2 * PARTITIONS
    finally:
        mgr.shutdown()
    assert open_fds(d) == before


def test_lazy_indexes_answer_as_loaded_ones(tmp_path):
    """An index read without being opened first gives the same entries and lookups as
    the writer saw (pread of the warm section and binary search of the cold part)."""
    d = tmp_path / "data"
    mgr = LogManager([d], LogConfig(segment_bytes=1 << 20, index_interval_bytes=0))
    log = mgr.create_log("t", 0)
    for i in range(1500):  # > the 1,024-entry warm section of the offset index
        log.append_as_leader(batch(1, size=10, ts=1000 + i), 0)
    written = log.active_segment.offset_index.entries_list()
    times = log.active_segment.time_index.entries_list()
    mgr.shutdown()

    mgr = LogManager([d], LogConfig(segment_bytes=1 << 20, index_interval_bytes=0))
    try:
        seg = mgr.get_log("t", 0).segments[0]
        assert seg.offset_index.entries_list() == written
        for target in (0, 1, 2, 100, 475, 476, 1000, 1498, 1499, 5000):
            expect = max((e for e in written if e.offset <= target), key=lambda e: e.offset, default=None)
            got = seg.offset_index.lookup(target)
            assert got == (expect if expect is not None else (0, 0))
        assert seg.time_index.entries_list() == times
        assert seg.time_index.last_entry == times[-1]
    finally:
        mgr.shutdown()


def test_cold_lookups_match_every_entry_through_one_descriptor(tmp_path, monkeypatch):
    """Lookups, upper bounds and truncations on an index of several warm sections' worth of
    entries, read back without a descriptor: each answers as a scan of the entries would,
    and opens the file once (a probe per open cost a catch-up fetch 134 us a lookup)."""
    import bisect
    import random

    from kafkatool.log.indexes import OffsetIndex, TimeIndex

    rng = random.Random(16)
    base = 1_000
    offsets, positions, stamps = [], [], []
    o, p, t = base, 0, 50_000
    for _ in range(5_000):  # 4.9 warm sections of the offset index, 7.3 of the time index
        o += rng.randint(1, 9)
        p += rng.randint(1, 5_000)
        t += rng.randint(1, 70)
        offsets.append(o)
        positions.append(p)
        stamps.append(t)
    oi = OffsetIndex(tmp_path / "0.index", base, 10 << 20, writable=True)
    ti = TimeIndex(tmp_path / "0.timeindex", base, 10 << 20, writable=True)
    for o, p, t in zip(offsets, positions, stamps, strict=True):
        oi.append(o, p)
        ti.maybe_append(t, o)
    oi.close()
    ti.close()
    oi = OffsetIndex(tmp_path / "0.index", base, 10 << 20, writable=False)
    ti = TimeIndex(tmp_path / "0.timeindex", base, 10 << 20, writable=False)

    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    targets = [base - 1, base, offsets[0], offsets[-1], offsets[-1] + 5]
    targets += [rng.randint(base, offsets[-1] + 1) for _ in range(400)]
    targets += [offsets[i] + d for i in (0, 1023, 1024, 3975, 3976, 4999) for d in (-1, 0, 1)]
    for target in targets:
        i = bisect.bisect_right(offsets, target)
        assert oi.lookup(target) == ((offsets[i - 1], positions[i - 1]) if i else (base, 0)), target
        assert len(opened) == 1
        opened.clear()
    for at in [0, positions[0], positions[-1], positions[-1] + 1] + [
        rng.randint(0, positions[-1]) for _ in range(200)
    ]:
        i = bisect.bisect_right(positions, at)
        assert oi.fetch_upper_bound_offset(at, 0) == (offsets[i] if i < len(offsets) else None), at
        assert len(opened) == 1
        opened.clear()
    for ts in [0, stamps[0], stamps[-1], stamps[-1] + 1] + [
        rng.randint(stamps[0], stamps[-1]) for _ in range(200)
    ]:
        i = bisect.bisect_right(stamps, ts)
        assert ti.lookup(ts) == ((stamps[i - 1], offsets[i - 1]) if i else (-1, base)), ts
        assert len(opened) == 1
        opened.clear()
    monkeypatch.undo()

    # a truncation keeps exactly the entries below the offset, in both indexes
    cut = offsets[2_500]
    wi = OffsetIndex(tmp_path / "0.index", base, 10 << 20, writable=True)
    wt = TimeIndex(tmp_path / "0.timeindex", base, 10 << 20, writable=True)
    wi.truncate_to(cut)
    wt.truncate_to(cut)
    assert wi.entries_list() == list(zip(offsets[:2_500], positions[:2_500], strict=True))
    assert wt.entries_list() == list(zip(stamps[:2_500], offsets[:2_500], strict=True))
    assert wt.last_entry == (stamps[2_499], offsets[2_499])
    wi.close()
    wt.close()


def test_a_missing_index_file_reads_as_empty(tmp_path):
    """A lookup in an index whose file is gone (a segment deleted meanwhile) finds no entry,
    so the reader scans the log from its start, as before any entry was written."""
    from kafkatool.log.indexes import OffsetIndex, TimeIndex

    oi = OffsetIndex(tmp_path / "0.index", 100, 1 << 20, writable=True)
    ti = TimeIndex(tmp_path / "0.timeindex", 100, 1 << 20, writable=True)
    for i in range(3):
        oi.append(101 + i, 4096 * (i + 1))
        ti.maybe_append(1000 + i, 101 + i)
    oi.close()
    ti.close()
    oi = OffsetIndex(tmp_path / "0.index", 100, 1 << 20, writable=False)
    ti = TimeIndex(tmp_path / "0.timeindex", 100, 1 << 20, writable=False)
    assert oi.lookup(102) == (102, 8192) and oi.entries == 3
    assert ti.lookup(1001) == (1001, 102) and ti.entries == 3
    (tmp_path / "0.index").unlink()
    (tmp_path / "0.timeindex").unlink()
    assert oi.lookup(102) == (100, 0)
    assert oi.fetch_upper_bound_offset(0, 10) is None
    assert ti.lookup(1001) == (-1, 100)
