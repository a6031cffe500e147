"""Log (one partition dir): offsets, rolls, reads, producer state, epochs, reopening."""

from __future__ import annotations

import os

import pytest

from kafkatool.formats import checkpoint as ck
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as snap
from kafkatool.formats.index import IndexOffsetOverflowError
from kafkatool.formats.uuid import Uuid
from kafkatool.log.config import LogConfig
from kafkatool.log.log import (
    ISOLATION_COMMITTED,
    ISOLATION_HIGH_WATERMARK,
    ORIGIN_COORDINATOR,
    Log,
    OffsetOutOfRangeError,
)
from tests.log.logtest_util import all_records, batch


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_leader_append_assigns_offsets_in_place(tmp_path):
    log = Log(tmp_path / "t-0")
    info = log.append_as_leader(batch(3), leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (0, 2)
    info = log.append_as_leader(batch(2), leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    batches = list(log.batches())
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch) for b in batches] == [
        (0, 2, 5),
        (3, 4, 5),
    ]
    assert all(b.is_valid() for b in batches)
    assert log.leader_epoch_cache.entries == [(5, 0)]
    log.close()
    assert ck.decode_leader_epoch_checkpoint((tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes()) == [
        (5, 0)
    ]


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path):
    clock = Clock(5_000)
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    info = log.append_as_leader(batch(2, ts=10), leader_epoch=0)
    assert info.log_append_time == 5_000
    (b,) = list(log.batches())
    assert b.timestamp_type == R.LOG_APPEND_TIME and b.max_timestamp == 5_000 and b.is_valid()
    assert [r.timestamp for r in b.records()] == [5_000, 5_000]
    log.close()


def test_legacy_input_is_up_converted_to_v2(tmp_path):
    log = Log(tmp_path / "t-0")
    legacy = R.build_legacy_message_set(
        [R.SimpleRecord(b"a", None, (), 7), R.SimpleRecord(b"b", None, (), 8)], magic=1
    )
    log.append_as_leader(legacy, leader_epoch=0)
    (b,) = list(log.batches())
    assert b.magic == 2 and [(r.offset, r.value) for r in b.records()] == [(0, b"a"), (1, b"b")]
    log.close()


def test_roll_on_segment_bytes_segment_ms_index_full_and_offset_overflow(tmp_path):
    clock = Clock()
    cfg = LogConfig(segment_bytes=5_000, segment_ms=60_000, index_interval_bytes=1, segment_index_bytes=80)
    log = Log(tmp_path / "t-0", cfg, clock=clock)
    one = len(batch(1, size=500))
    # bytes: at most floor(5000 / one) batches per segment
    for _ in range(9):
        log.append_as_leader(batch(1, size=500, ts=clock.now), leader_epoch=0)
    per_segment = 5_000 // one
    assert [s.base_offset for s in log.segments][:2] == [0, per_segment]
    # index full: segment.index.bytes 80 -> 10 offset entries / 6 time entries (last slot reserved)
    log2 = Log(tmp_path / "t-1", cfg, clock=clock)
    for _ in range(12):
        log2.append_as_leader(batch(1, size=10, ts=clock.now), leader_epoch=0)
        clock.now += 1
    first = log2.segments[0]
    assert first.time_index.entries <= 6 + 1 and len(log2.segments) >= 2
    # time: the first batch's timestamp is compared with the incoming max timestamp
    log3 = Log(tmp_path / "t-2", cfg, clock=clock)
    log3.append_as_leader(batch(1, size=10, ts=100_000), leader_epoch=0)
    log3.append_as_leader(batch(1, size=10, ts=159_999), leader_epoch=0)
    assert len(log3.segments) == 1
    log3.append_as_leader(batch(1, size=10, ts=160_001), leader_epoch=0)
    assert [s.base_offset for s in log3.segments] == [0, 2]
    # relative offset overflow (follower data with a jump): rolls instead of failing
    log4 = Log(tmp_path / "t-3", cfg, clock=clock)
    b = bytearray(batch(1))
    log4.append_as_follower(bytes(b))
    R.set_base_offset(b, 0, 2**31 + 5)
    log4.append_as_follower(bytes(b))
    assert [s.base_offset for s in log4.segments] == [0, 2**31 + 5]
    with pytest.raises(IndexOffsetOverflowError):
        log4.segments[0].append(2**31 + 10, 0, 0, b"x" * 61)
    for lg in (log, log2, log3, log4):
        lg.close()


def test_read_limits_isolation_and_out_of_range(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=3_000, index_interval_bytes=200))
    for _ in range(30):
        log.append_as_leader(batch(2, size=100), leader_epoch=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(61, 1000)
    info = log.read(60, 1000)
    assert info.slices == [] and info.log_end_offset == 60
    info = log.read(17, 100_000)
    got = list(R.iter_batches(info.read_bytes()))
    assert (
        got[0].base_offset == 16
        and got[-1].last_offset == log.segments_in_range(17, 18)[0].read_next_offset() - 1
    )
    # min one message: a tiny max_bytes still returns the first batch whole
    info = log.read(17, 1)
    assert len(list(R.iter_batches(info.read_bytes()))) == 1
    assert log.read(17, 1, min_one_message=False).size == 1
    # high watermark isolation stops at the HW position
    log.update_high_watermark(20)
    info = log.read(10, 100_000, isolation=ISOLATION_HIGH_WATERMARK)
    got = list(R.iter_batches(info.read_bytes()))
    assert got[-1].last_offset == 19
    assert log.read(20, 1000, isolation=ISOLATION_HIGH_WATERMARK).slices == []
    log.close()


def test_transactions_producer_state_txn_index_and_committed_reads(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    log.append_as_leader(batch(2, pid=7, epoch=1, seq=0, txn=True), leader_epoch=0)  # 0-1 (txn 7)
    log.append_as_leader(batch(1, pid=8, epoch=0, seq=0, txn=True), leader_epoch=0)  # 2 (txn 8)
    log.append_as_leader(batch(1), leader_epoch=0)  # 3
    log.append_as_leader(
        R.build_control_batch(R.ABORT, producer_id=7, producer_epoch=1, coordinator_epoch=3),
        0,
        origin=ORIGIN_COORDINATOR,
    )  # 4
    assert log.producer_state.first_unstable_offset() == 2
    log.append_as_leader(
        R.build_control_batch(R.COMMIT, producer_id=8, producer_epoch=0), 0, origin=ORIGIN_COORDINATOR
    )  # 5
    assert log.producer_state.first_unstable_offset() is None
    seg = log.active_segment
    assert [
        (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in seg.txn_index.entries
    ] == [(7, 0, 4, 2)]
    log.update_high_watermark(6)
    info = log.read(0, 100_000, isolation=ISOLATION_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(7, 0)]
    entry = log.producer_state.producers[7]
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 3
    log.close()
    snaps = sorted(p for p in os.listdir(tmp_path / "t-0") if p.endswith(".snapshot"))
    assert snaps == ["00000000000000000006.snapshot"]
    entries = snap.decode_snapshot((tmp_path / "t-0" / snaps[0]).read_bytes())
    assert {e.producer_id: (e.last_sequence, e.last_offset) for e in entries} == {7: (1, 1), 8: (0, 2)}
    # the txn index survives an unclean reopen (rebuilt by recovery) identically
    data = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    os.remove(tmp_path / "t-0" / "00000000000000000000.index")
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    assert log.load_result.recovered
    log.close()
    assert (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes() == data


def test_reopen_clean_and_unclean(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(segment_bytes=2_000))
    for _ in range(20):
        log.append_as_leader(batch(1, size=300), leader_epoch=2)
    before = all_records(log)
    log.close()
    log = Log(d, LogConfig(segment_bytes=2_000), had_clean_shutdown=True, recovery_point=20)
    assert log.load_result.recovered == [] and log.log_end_offset == 20 and log.recovery_point == 20
    assert all_records(log) == before
    # the active segment's indexes are preallocated again
    assert os.path.getsize(log.active_segment.offset_index.path) == 10485760
    log.append_as_leader(batch(1, size=300), leader_epoch=3)
    log.close()
    log = Log(d, LogConfig(segment_bytes=2_000), recovery_point=0)
    assert len(log.load_result.recovered) == len(log.segments)
    assert all_records(log) == before + [(20, b"A" * 300)]
    assert log.leader_epoch_cache.entries == [(2, 0), (3, 20)]
    log.close()


def test_truncate_to_and_follower_checks(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=2_000, index_interval_bytes=100))
    for i in range(20):
        log.append_as_leader(batch(1, size=300), leader_epoch=i // 5)
    log.truncate_to(7)
    assert log.log_end_offset == 7 and [o for o, _ in all_records(log)] == list(range(7))
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 5)]
    info = log.append_as_leader(batch(1), leader_epoch=9)
    assert info.first_offset == 7
    b = bytearray(batch(1))
    R.set_base_offset(b, 0, 3)
    with pytest.raises(Exception, match="out of order"):
        log.append_as_follower(bytes(b))
    log.close()


def test_truncate_to_the_log_end_drops_an_epoch_that_started_there(tmp_path):
    """UnifiedLog.truncateTo: a broker that became leader (epoch 11 at its log end 7) and appended
    nothing before a new leader took over must lose that entry, or it diverges for ever (found
    by librdkafka's tests against a restarted cluster)."""
    log = Log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(batch(7), leader_epoch=7)
    log.leader_epoch_cache.assign(11, log.log_end_offset)  # makeLeader
    assert log.truncate_to(7) is False  # nothing to cut ...
    assert log.leader_epoch_cache.entries == [(7, 0)]  # ... but the empty epoch goes
    log.close()


def test_partition_metadata_and_listeners(tmp_path):
    tid = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")
    tid = Uuid(bytes(range(16)))
    log = Log(tmp_path / "t-0", topic_id=tid)
    data = (tmp_path / "t-0" / "partition.metadata").read_bytes()
    assert data == f"version: 0\ntopic_id: {tid}".encode()
    seen = []
    log.add_append_listener(lambda lg, leo: seen.append(leo))
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(1), 0)
    assert seen == [2, 3]
    log.close()
    assert Log(tmp_path / "t-0", writable=False).topic_id == tid


def test_read_only_open_changes_nothing(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d)
    log.append_as_leader(batch(1), 0)
    log._close_segments(trim=False)  # a crash: preallocated indexes left behind
    before = {p.name: (p.stat().st_size, p.read_bytes()) for p in d.iterdir()}
    ro = Log(d, writable=False)
    assert ro.log_end_offset == 1
    ro.close()
    assert {p.name: (p.stat().st_size, p.read_bytes()) for p in d.iterdir()} == before


def test_delete_segments_moves_log_start(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=1_000))
    for _ in range(10):
        log.append_as_leader(batch(1, size=300), leader_epoch=0)
    first_two = log.segments[:2]
    log.update_high_watermark(10)
    log.delete_segments(first_two)
    assert log.log_start_offset == log.segments[0].base_offset
    for seg in first_two:
        assert not seg.log_path.exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()


def test_read_only_open_of_a_crashed_preallocated_log(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(segment_bytes=100_000, preallocate=True))
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    log._close_segments(trim=False)
    ro = Log(d, writable=False)
    assert ro.log_end_offset == 6
    first = R.read_batch(ro.read(4, 1).read_bytes())
    assert (first.base_offset, first.last_offset) == (4, 5)
    ro.close()


def test_leader_epoch_end_offsets(tmp_path):
    from kafkatool.log.leader_epoch import LeaderEpochCache

    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in ((2, 0), (4, 10), (7, 25)):
        cache.assign(epoch, start)
    assert cache.end_offset_for(7, 40) == (7, 40)
    assert cache.end_offset_for(4, 40) == (4, 25)
    assert cache.end_offset_for(5, 40) == (4, 25)
    assert cache.end_offset_for(1, 40) == (1, 0)
    assert cache.end_offset_for(8, 40) == (-1, -1)
    # a new epoch at a lower offset drops the entries it contradicts
    cache.assign(5, 20)
    assert cache.entries == [(2, 0), (4, 10), (5, 20)]
    cache.truncate_from_start(12)
    assert cache.entries == [(4, 12), (5, 20)]


def test_offset_for_timestamp(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=2_000, index_interval_bytes=300))
    for i in range(30):
        log.append_as_leader(batch(2, size=200, ts=10_000 + 10 * i), leader_epoch=i // 10)
    # batch i holds offsets 2i, 2i+1 with timestamps 10000+10i, 10001+10i
    assert log.offset_for_timestamp(0) == (10_000, 0, 0)
    assert log.offset_for_timestamp(10_101) == (10_101, 21, 1)
    assert log.offset_for_timestamp(10_102) == (10_110, 22, 1)
    assert log.offset_for_timestamp(10_291) == (10_291, 59, 2)
    assert log.offset_for_timestamp(10_292) is None
    log.close()


def test_list_offset_is_listoffsets_rule(tmp_path):
    """Log.list_offset, the one ListOffsets rule (the broker's handler and get-offsets --log-dir):
    earliest/latest/max-timestamp/by time, nothing at or above the last fetchable offset, nothing
    below the log start offset."""
    from kafkatool.log.log import (
        EARLIEST_LOCAL_TIMESTAMP,
        EARLIEST_TIMESTAMP,
        LATEST_TIERED_TIMESTAMP,
        LATEST_TIMESTAMP,
        MAX_TIMESTAMP,
    )

    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=2_000, index_interval_bytes=300))
    for i in range(30):
        log.append_as_leader(batch(2, size=200, ts=10_000 + 10 * i), leader_epoch=0)
    log.append_as_leader(batch(2, size=200, ts=50_000), leader_epoch=0)  # offsets 60, 61: 61 the largest
    log.append_as_leader(batch(2, size=200, ts=20_000), leader_epoch=0)  # 62, 63
    log.update_high_watermark(64)
    assert (
        log.list_offset(EARLIEST_TIMESTAMP, 64) == (-1, 0, 0) == log.list_offset(EARLIEST_LOCAL_TIMESTAMP, 64)
    )
    assert log.list_offset(LATEST_TIMESTAMP, 64) == (-1, 64, 0)
    assert log.list_offset(LATEST_TIERED_TIMESTAMP, 64) is None
    # KAFKA-16310 (3.7.1, 3.8): the offset of the record with the largest timestamp, not its
    # batch's last offset (3.7.0's)
    assert log.list_offset(MAX_TIMESTAMP, 64) == (50_001, 61, 0)
    # Partition.fetchOffsetForTimestamp: the largest timestamp's offset is not below the last
    # fetchable offset, so there is no answer (not a smaller timestamp below the bound)
    assert log.list_offset(MAX_TIMESTAMP, 60) is None
    assert log.list_offset(10_101, 64) == (10_101, 21, 0)
    assert log.list_offset(10_292, 64) == (50_000, 60, 0)
    assert log.list_offset(10_292, 60) is None  # found at or above the last fetchable offset
    assert log.list_offset(50_001, 64) == (50_001, 61, 0)
    assert log.list_offset(50_002, 64) is None
    with pytest.raises(ValueError):
        log.list_offset(-6, 64)
    # a later epoch: latest answers the cache's latest epoch, a lookup the epoch of the batch
    # holding the offset found
    log.append_as_leader(batch(2, size=200, ts=60_000), leader_epoch=2)  # 64, 65
    log.update_high_watermark(66)
    assert log.list_offset(LATEST_TIMESTAMP, 66) == (-1, 66, 2)
    assert log.list_offset(MAX_TIMESTAMP, 66) == (60_001, 65, 2)
    assert log.list_offset(50_001, 66) == (50_001, 61, 0)
    assert log.list_offset(50_002, 66) == (60_000, 64, 2)
    assert log.increment_log_start_offset(23)
    assert log.list_offset(EARLIEST_TIMESTAMP, 66) == (-1, 23, 0)
    assert log.list_offset(0, 66) == (10_111, 23, 0)  # the first record at or above the log start
    log.close()


def test_an_index_write_that_fails_leaves_the_log_consistent(tmp_path, monkeypatch):
    """A full disk can fail the offset index's write after the batch's bytes are written: the
    append fails as a whole (the caller answers KAFKA_STORAGE_ERROR), the next append gets the
    same offsets and overwrites the unused bytes, and no offset is ever in the log twice."""
    import errno

    from tests.log.logtest_util import all_records, batch

    lg = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    try:
        for _ in range(70):  # the index writes its entries in runs of 512 bytes (64 entries)
            lg.append_as_leader(batch(2), 0)
        index_type = type(lg.active_segment.offset_index)
        real = index_type._write_pending
        failures = []

        def full_disk(index):
            if not failures and index._pending:
                failures.append(index.path)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(index)

        monkeypatch.setattr(index_type, "_write_pending", full_disk)
        errors = 0
        for _ in range(80):  # one of these meets the failing index write
            try:
                lg.append_as_leader(batch(2), 0)
            except OSError:
                errors += 1
        monkeypatch.setattr(index_type, "_write_pending", real)
        assert failures and errors == 1
        offsets = [o for o, _ in all_records(lg)]
        assert offsets == list(range(len(offsets))) and lg.log_end_offset == len(offsets) == 2 * (70 + 79)
        seg = lg.active_segment
        assert seg.size == seg.log_path.stat().st_size
        assert seg.offset_index.lookup(offsets[-1]).offset <= offsets[-1]
    finally:
        lg.close()


def test_max_timestamp_looks_at_every_batch_and_answers_its_epoch(tmp_path):
    """MAX_TIMESTAMP as Kafka 3.8's fetchOffsetByTimestamp: the first batch holding the largest
    timestamp, a transaction marker's too (LogSegment.append counts every batch), the offset of
    its first record with that timestamp and the epoch written in that batch."""
    from kafkatool.log.log import MAX_TIMESTAMP, ORIGIN_COORDINATOR

    log = Log(tmp_path / "t-0", LogConfig())
    records = [R.SimpleRecord(b"v%d" % i, None, (), ts) for i, ts in enumerate([100, 300, 300, 200])]
    log.append_as_leader(
        R.build_record_batch(
            records, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
        ),
        1,
    )  # 0-3: the first record at 300 is offset 1
    log.update_high_watermark(4)
    assert log.list_offset(MAX_TIMESTAMP, 4) == (300, 1, 1)
    log.append_as_leader(
        R.build_control_batch(R.COMMIT, producer_id=7, producer_epoch=0, timestamp=900),
        3,
        origin=ORIGIN_COORDINATOR,
    )  # 4: the marker, written at a later time
    assert log.list_offset(MAX_TIMESTAMP, 4) is None  # the largest timestamp is not fetchable yet
    log.update_high_watermark(5)
    assert log.list_offset(MAX_TIMESTAMP, 5) == (900, 4, 3)
    log.close()
