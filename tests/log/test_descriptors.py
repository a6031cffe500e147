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
