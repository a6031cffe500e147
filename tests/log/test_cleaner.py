"""The log cleaner on engine-written logs: Kafka's retention rules record by record and batch by batch."""

from __future__ import annotations

import dataclasses
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError, InvalidRecordError
from kafkatool.log.cleaner import (
    _rebuild_legacy,
    cleanable_offsets,
    compact,
    group_segments_by_size,
    scan_keys,
)
from kafkatool.log.config import LogConfig
from kafkatool.log.log import ORIGIN_COORDINATOR, Log
from kafkatool.log.offset_map import OffsetMap
from kafkatool.log.retention import apply_retention, plan_retention
from kafkatool.log.segment import scan_for_recovery
from tests.log.maint_util import (
    DAY,
    NOW,
    bad_header_count_batch,
    batch,
    batches_of,
    latest_per_key,
    overlong_varint_batch,
    rec,
    records_of,
)

CFG = LogConfig(segment_bytes=1_500, index_interval_bytes=200, cleanup_policy=("compact",))


def open_log(tmp_path, config=CFG) -> Log:
    log = Log(tmp_path / "t-0", config, clock=lambda: NOW)
    return log


def run(log: Log, config=CFG, *, now=NOW, checkpoint=None, memory=1 << 20, write=True):
    log.update_high_watermark(log.log_end_offset)
    return compact(log, config, checkpoint=checkpoint, now_ms=now, offset_map=OffsetMap(memory), write=write)


def data(log: Log):
    out = []
    for b in log.batches():
        if b.is_control:
            continue
        for r in b.records():
            out.append((r.offset, r.key, r.value))
    return out


def check_indexes(log: Log):
    """Every inactive segment's offset and time index equal what recovery would rebuild (the active
    segment gets its final time-index entry on close)."""
    for seg in log.segments[:-1]:
        buf = seg.log_path.read_bytes()
        scan = scan_for_recovery(buf, seg.base_offset, log.config.index_interval_bytes)
        assert scan.valid_bytes == len(buf)
        assert [(e.offset, e.position) for e in seg.offset_index.entries_list()] == scan.index_entries
        assert [(e.timestamp, e.offset) for e in seg.time_index.entries_list()] == scan.time_entries


def test_latest_value_per_key_wins_and_full_batches_are_copied(tmp_path):
    log = open_log(tmp_path)
    for i in range(60):
        log.append_as_leader(batch([rec(b"k%d" % (i % 7), b"v%d" % i, NOW + i)]), 0)
    keep_raw = None
    # a batch whose records are all the latest for their keys, at the end of the cleanable range
    log.append_as_leader(batch([rec(b"x", b"1"), rec(b"y", b"2")]), 0)
    log.roll()
    log.append_as_leader(batch([rec(b"k0", b"active")]), 0)
    before = data(log)
    for b in log.batches():
        if b.count == 2:
            keep_raw = bytes(b.raw())
    res = run(log)
    after = data(log)
    cleaned = [r for r in after if r[0] < res.range.first_uncleanable]
    # exactly the latest record of each key below the upper bound
    expected = sorted(
        (off, k, v)
        for k, (off, v) in latest_per_key([r for r in before if r[0] < res.range.first_uncleanable]).items()
    )
    assert sorted(cleaned) == expected
    assert after[-1] == before[-1]  # the active segment is untouched
    assert any(bytes(b.raw()) == keep_raw for b in log.batches())
    assert res.stats.batches_copied >= 1 and res.checkpoint_after == res.range.first_uncleanable
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    check_indexes(log)
    log.close()


def test_keyless_records_are_dropped(tmp_path):
    # a client cannot append a keyless record to a compacted log (LogValidator): these were
    # written while the topic was not compacted yet
    log = open_log(tmp_path, config=dataclasses.replace(CFG, cleanup_policy=("delete",)))
    log.append_as_leader(batch([rec(None, b"nokey"), rec(b"a", b"1")]), 0)
    log.append_as_leader(batch([rec(b"b", b"2")]), 0)
    log.config = CFG
    log.roll()
    res = run(log)
    assert [(k, v) for _, k, v in data(log)] == [(b"a", b"1"), (b"b", b"2")]
    assert res.stats.keyless_removed == 1 and res.stats.batches_reencoded == 1
    log.close()


def test_partially_kept_batch_keeps_base_offset_last_offset_and_codec(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(
        batch(
            [rec(b"a", b"1"), rec(b"b", b"1"), rec(b"c", b"1")],
            codec=compression.GZIP,
            producer_id=9,
            producer_epoch=0,
            base_sequence=0,
        ),
        0,
    )
    log.append_as_leader(batch([rec(b"b", b"2")], producer_id=9, producer_epoch=0, base_sequence=3), 0)
    log.roll()
    run(log)
    first = batches_of(log.dir)[0]
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 2, 2)
    assert first.codec == compression.GZIP and first.base_sequence == 0 and first.last_sequence == 2
    assert [r.offset for r in first.records()] == [0, 2]
    first.ensure_valid()
    log.close()


def test_tombstones_get_a_horizon_then_go_after_delete_retention(tmp_path):
    cfg = LogConfig(segment_bytes=1_500, index_interval_bytes=200, delete_retention_ms=DAY)
    log = open_log(tmp_path, cfg)
    log.append_as_leader(batch([rec(b"a", b"1"), rec(b"b", b"1")]), 0)
    log.append_as_leader(batch([rec(b"a", None)]), 0)
    log.append_as_leader(batch([rec(b"c", b"1")]), 0)
    log.roll()
    res = run(log, cfg)
    assert res.stats.horizons_set == 1
    assert [(k, v) for _, k, v in data(log)] == [(b"b", b"1"), (b"a", None), (b"c", b"1")]
    tomb = [b for b in batches_of(log.dir) if any(r.value is None for r in b.records())][0]
    assert tomb.delete_horizon_ms == NOW + DAY and tomb.has_delete_horizon
    assert [r.timestamp for r in tomb.records()] == [NOW]  # record timestamps survive the re-stamp
    # before the horizon: kept, batch copied as is
    run(log, cfg, now=NOW + DAY - 1)
    assert (b"a", None) in [(k, v) for _, k, v in data(log)]
    # after: gone
    res = run(log, cfg, now=NOW + DAY + 1)
    assert [(k, v) for _, k, v in data(log)] == [(b"b", b"1"), (b"c", b"1")]
    assert res.stats.tombstones_read == 1 and res.stats.tombstones_kept == 0
    log.close()


def _aborted_then_committed(log: Log):
    def txn(pid, key, value, seq, transactional=True):
        return batch(
            [rec(key, value)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=transactional,
        )

    log.append_as_leader(
        batch(
            [rec(b"a", b"aborted"), rec(b"b", b"aborted")],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        ),
        0,
    )  # 0-1
    log.append_as_leader(
        R.build_control_batch(R.ABORT, producer_id=5, producer_epoch=0, timestamp=NOW),
        0,
        origin=ORIGIN_COORDINATOR,
    )  # 2
    log.append_as_leader(txn(6, b"c", b"committed", 0), 0)  # 3
    log.append_as_leader(
        R.build_control_batch(R.COMMIT, producer_id=6, producer_epoch=0, timestamp=NOW),
        0,
        origin=ORIGIN_COORDINATOR,
    )  # 4
    log.append_as_leader(batch([rec(b"c", b"newer")]), 0)  # 5
    log.append_as_leader(batch([rec(b"d", b"plain")]), 0)  # 6
    log.append_as_leader(txn(5, b"e", b"later", 2, False), 0)  # 7: producer 5's last data
    log.append_as_leader(txn(6, b"f", b"later", 1, False), 0)  # 8: producer 6's last data
    log.roll()


def test_aborted_transactions_and_markers(tmp_path):
    cfg = LogConfig(segment_bytes=10_000, delete_retention_ms=DAY, cleanup_policy=("compact",))
    log = open_log(tmp_path, cfg)
    _aborted_then_committed(log)
    assert log.segments[0].txn_index.entries  # the abort is indexed
    res = run(log, cfg)
    kinds = [(b.base_offset, b.is_control, b.records_count) for b in batches_of(log.dir)]
    expected = [(b"c", b"newer"), (b"d", b"plain"), (b"e", b"later"), (b"f", b"later")]
    assert [(k, v) for _, k, v in data(log)] == expected
    assert res.stats.aborted_batches_removed == 1 and 0 not in [k[0] for k in kinds]
    # the ABORT marker stays while this pass still removed data of its transaction; its txnindex entry is copied
    assert (2, True, 1) in kinds and log.segments[0].txn_index.entries
    # the COMMIT marker stays: this pass saw its transaction's data
    assert (4, True, 1) in kinds
    # second pass: no data of either transaction left -> both markers get a delete horizon
    res = run(log, cfg)
    markers = [b for b in batches_of(log.dir) if b.is_control and b.records_count]
    assert len(markers) == 2 and all(b.delete_horizon_ms == NOW + DAY for b in markers)
    assert not log.segments[0].txn_index.entries
    # still before the horizon: kept
    run(log, cfg, now=NOW + DAY - 1)
    assert len([b for b in batches_of(log.dir) if b.is_control]) == 2
    # after the horizon the markers go
    res = run(log, cfg, now=NOW + DAY + 1)
    assert not [b for b in batches_of(log.dir) if b.is_control]
    assert res.stats.markers_removed == 2
    assert [(k, v) for _, k, v in data(log)] == expected
    log.close()


def test_aborted_batch_kept_empty_when_it_holds_the_producers_last_sequence(tmp_path):
    cfg = LogConfig(segment_bytes=10_000, delete_retention_ms=DAY, cleanup_policy=("compact",))
    log = open_log(tmp_path, cfg)
    log.append_as_leader(
        batch([rec(b"a", b"x")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True), 0
    )
    log.append_as_leader(
        R.build_control_batch(R.ABORT, producer_id=5, producer_epoch=0, timestamp=NOW),
        0,
        origin=ORIGIN_COORDINATOR,
    )
    log.append_as_leader(batch([rec(b"z", b"1")]), 0)
    log.roll()
    run(log, cfg)
    kinds = [(b.base_offset, b.is_control, b.records_count, b.producer_id) for b in batches_of(log.dir)]
    assert kinds[0] == (0, False, 0, 5)
    # the empty batch still belongs to the aborted transaction, so the marker stays (as in Kafka)
    run(log, cfg, now=NOW + 2 * DAY)
    assert (1, True, 1, 5) in [
        (b.base_offset, b.is_control, b.records_count, b.producer_id) for b in batches_of(log.dir)
    ]
    log.close()


def test_open_transaction_bounds_the_cleanable_range(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch([rec(b"a", b"1")]), 0)
    log.roll()
    log.append_as_leader(
        batch([rec(b"a", b"2")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True), 0
    )
    log.roll()
    log.append_as_leader(batch([rec(b"a", b"3")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    rng = cleanable_offsets(log, CFG, None, NOW)
    assert (rng.first_uncleanable, rng.uncleanable_reason) == (1, "last stable offset")
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    cfg = LogConfig(segment_bytes=1_500, min_compaction_lag_ms=60_000, cleanup_policy=("compact",))
    log = open_log(tmp_path, cfg)
    log.append_as_leader(batch([rec(b"a", b"old", NOW - 120_000)]), 0)
    log.roll()
    log.append_as_leader(batch([rec(b"a", b"young", NOW - 1_000)]), 0)
    log.roll()
    log.append_as_leader(batch([rec(b"b", b"x", NOW)]), 0)
    log.update_high_watermark(log.log_end_offset)
    rng = cleanable_offsets(log, cfg, None, NOW)
    assert rng.first_uncleanable == 1 and "min.compaction.lag.ms" in rng.uncleanable_reason
    res = run(log, cfg)
    # only segment 0 was cleanable: its record is the latest *within the range*, so it stays
    assert [(k, v) for _, k, v in data(log)] == [(b"a", b"old"), (b"a", b"young"), (b"b", b"x")]
    assert res.checkpoint_after == 1
    log.close()


def test_checkpoint_below_log_start_or_above_end_is_reset(tmp_path):
    log = open_log(tmp_path)
    for i in range(5):
        log.append_as_leader(batch([rec(b"a", b"%d" % i)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert cleanable_offsets(log, CFG, 99, NOW).checkpoint_reset
    assert cleanable_offsets(log, CFG, 99, NOW).first_dirty == 0
    assert cleanable_offsets(log, CFG, 3, NOW).first_dirty == 3
    log.close()


def test_segments_are_grouped_under_segment_bytes(tmp_path):
    log = open_log(tmp_path)
    for i in range(40):
        log.append_as_leader(batch([rec(b"k%d" % i, b"x" * 100)]), 0)  # all distinct: nothing removed
    log.roll()
    sizes = [s.size for s in log.segments[:-1]]
    groups = group_segments_by_size(
        log.segments[:-1], CFG.segment_bytes, CFG.segment_index_bytes, log.log_end_offset
    )
    assert [len(g) for g in groups] == [1] * len(sizes)  # full segments cannot merge
    groups = group_segments_by_size(log.segments[:-1], 10 * CFG.segment_bytes, CFG.segment_index_bytes, 40)
    assert sum(len(g) for g in groups) == len(sizes) and all(sum(s.size for s in g) <= 15_000 for g in groups)
    before = data(log)
    big = LogConfig(segment_bytes=4_000, index_interval_bytes=200, cleanup_policy=("compact",))
    res = run(log, big)
    assert data(log) == before
    assert res.stats.segments_after < res.stats.segments_before
    assert all(s.size <= 4_000 for s in log.segments)
    check_indexes(log)
    log.close()


def test_full_offset_map_cleans_in_rounds_with_the_same_result(tmp_path):
    def fill(log):
        for i in range(300):
            log.append_as_leader(batch([rec(b"k%d" % (i % 40), b"v%d" % i)]), 0)
        log.roll()

    a = open_log(tmp_path / "a")
    fill(a)
    run(a)
    b = open_log(tmp_path / "b")
    fill(b)
    res = run(b, memory=24 * 20)  # 20 slots, 18 keys per round
    assert len(res.rounds) > 1 and res.rounds[0].map_full
    assert data(a) == data(b)
    a.close()
    b.close()


def test_empty_batch_kept_for_active_producer_last_sequence(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch([rec(b"a", b"1")], producer_id=11, producer_epoch=2, base_sequence=0), 0)
    log.append_as_leader(batch([rec(b"a", b"2")]), 0)
    log.append_as_leader(batch([rec(b"z", b"end")]), 0)
    log.roll()
    run(log)
    bs = batches_of(log.dir)
    empty = [b for b in bs if b.records_count == 0]
    assert len(empty) == 1
    e = empty[0]
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.base_offset, e.last_offset) == (
        11,
        2,
        0,
        0,
        0,
    )
    assert (
        e.base_timestamp == R.NO_TIMESTAMP
        and e.codec == compression.NONE
        and e.size == R.RECORD_BATCH_OVERHEAD
    )
    e.ensure_valid()
    # reopening keeps the producer's sequence
    log.close()
    log = Log(tmp_path / "t-0", CFG, clock=lambda: NOW)
    assert log.producer_state.producers[11].last_sequence == 0
    log.close()


def test_legacy_wrapper_partially_kept_is_reencoded_with_its_magic(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    wrapper = R.build_legacy_message_set(
        [rec(b"a", b"1", NOW), rec(b"b", b"1", NOW + 1), rec(b"c", b"1", NOW + 2)],
        magic=1,
        base_offset=0,
        codec=compression.GZIP,
    )
    later = R.build_legacy_message_set([rec(b"b", b"2", NOW + 3)], magic=1, base_offset=3)
    tail = R.build_record_batch([rec(b"z", b"v2", NOW + 4)], base_offset=4)
    (part / "00000000000000000000.log").write_bytes(wrapper + later)
    (part / "00000000000000000004.log").write_bytes(tail)
    log = Log(part, CFG, clock=lambda: NOW)
    run(log)
    bs = batches_of(part)
    assert bs[0].magic == 1 and bs[0].codec == compression.GZIP and bs[0].offset == 2
    assert [(r.offset, r.key, r.timestamp) for r in bs[0].records()] == [(0, b"a", NOW), (2, b"c", NOW + 2)]
    bs[0].ensure_valid()
    assert [(o, k, v) for o, k, v in data(log)] == [
        (0, b"a", b"1"),
        (2, b"c", b"1"),
        (3, b"b", b"2"),
        (4, b"z", b"v2"),
    ]
    log.close()
    # v0 wrappers keep absolute inner offsets
    v0 = R.LegacyBatch(
        R.build_legacy_message_set(
            [rec(b"a", b"1"), rec(b"b", b"2"), rec(b"c", b"3")],
            magic=0,
            base_offset=10,
            codec=compression.SNAPPY,
        )
    )
    kept = [r for r in v0.records() if r.key != b"b"]
    out = R.LegacyBatch(_rebuild_legacy(v0, kept))
    assert out.magic == 0 and out.offset == 12 and [r.offset for r in out.records()] == [10, 12]


def test_dry_run_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        log.append_as_leader(batch([rec(b"k%d" % (i % 3), b"v")]), 0)
    log.roll()
    names = sorted(os.listdir(log.dir))
    sizes = [s.size for s in log.segments]
    res = run(log, write=False)
    assert res.changes and res.stats.records_kept == 3
    assert sorted(os.listdir(log.dir)) == names and [s.size for s in log.segments] == sizes
    log.close()


def test_records_of_helper_reads_back(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch([rec(b"a", b"1")]), 0)
    log.close()
    assert records_of(tmp_path / "t-0") == [(0, b"a", b"1")]


# ---------------------------------------------------------------- property test


_op = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(st.tuples(st.integers(0, 7), st.booleans(), st.booleans()), min_size=1, max_size=4),
        st.sampled_from([0, 0, 1, 4]),
    ),
    st.tuples(st.just("roll")),
    st.tuples(st.just("compact"), st.sampled_from([1 << 20, 24 * 4])),
    st.tuples(st.just("retention"), st.integers(200, 3_000)),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_op, min_size=1, max_size=25))
def test_random_appends_rolls_compactions_and_retentions_keep_the_invariants(ops):
    cfg = LogConfig(
        segment_bytes=700, index_interval_bytes=150, cleanup_policy=("compact", "delete"), retention_ms=-1
    )
    with tempfile.TemporaryDirectory() as tmp:
        # the appends' config is not compacted (a client cannot append a keyless record to a
        # compacted log: LogValidator), as if the topic became compacted later; the cleaner
        # and the retention runs get their own configs
        log = Log(
            os.path.join(tmp, "t-0"), dataclasses.replace(cfg, cleanup_policy=("delete",)), clock=lambda: NOW
        )
        model: list[tuple[int, bytes | None, bytes | None]] = []
        n = 0
        try:
            for op in ops:
                if op[0] == "append":
                    recs = []
                    for key, tomb, keyless in op[1]:
                        k = None if keyless and not tomb else b"k%d" % key
                        v = None if tomb else b"v%d" % n
                        recs.append(rec(k, v, NOW + n))
                        n += 1
                    info = log.append_as_leader(batch(recs, codec=op[2]), 0)
                    model += [(info.first_offset + i, r.key, r.value) for i, r in enumerate(recs)]
                elif op[0] == "roll":
                    if log.active_segment.size:
                        log.roll()
                elif op[0] == "compact":
                    active_before = [r for r in data(log) if r[0] >= log.active_segment.base_offset]
                    log.update_high_watermark(log.log_end_offset)
                    compact(log, cfg, checkpoint=None, now_ms=NOW, offset_map=OffsetMap(op[1]), write=True)
                    assert [r for r in data(log) if r[0] >= log.active_segment.base_offset] == active_before
                else:
                    log.update_high_watermark(log.log_end_offset)
                    plan = plan_retention(log, LogConfig(retention_bytes=op[1], retention_ms=-1), now_ms=NOW)
                    apply_retention(log, plan, quarantine=None)
                    model = [r for r in model if r[0] >= log.log_start_offset]
                now_records = data(log)
                offsets = [o for o, _, _ in now_records]
                # offsets increase, nothing invented, nothing below the log start
                assert offsets == sorted(set(offsets))
                assert set(now_records) <= set(model)
                assert all(o >= log.log_start_offset for o in offsets)
                # the latest record of every key survives (tombstones too: the horizon is a day away)
                present = set(now_records)
                for key, (off, value) in latest_per_key(model).items():
                    assert (off, key, value) in present
                check_indexes(log)
            log.close()
            # reopening (clean) gives the same log
            reopened = Log(
                os.path.join(tmp, "t-0"),
                cfg,
                log_start_offset=log.log_start_offset,
                had_clean_shutdown=True,
                clock=lambda: NOW,
            )
            assert data(reopened) == now_records
            reopened.close()
        finally:
            log._close_segments(trim=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=300)),
            st.one_of(st.none(), st.binary(max_size=9000)),
            st.lists(
                st.tuples(
                    st.one_of(st.text(max_size=5), st.binary(max_size=5)),  # keys that may not be UTF-8
                    st.one_of(st.none(), st.binary(max_size=20)),
                ),
                max_size=2,
            ),
            st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([0, 1, 3, 4]),
    st.integers(0, 10_000),
)
def test_key_scan_agrees_with_the_record_decoder(records, codec, gap):
    recs = [R.SimpleRecord(v, k, h, NOW + ts) for k, v, h, ts in records]
    deltas = [i * gap for i in range(len(recs))]
    raw = R.build_record_batch(recs, base_offset=1_000, codec=codec, offset_deltas=deltas)
    b = R.read_batch(raw)
    assert scan_keys(b) == [(r.offset, r.key, r.value is None) for r in b.records()]


def test_legacy_tombstones_follow_the_segment_mtime_horizon(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()

    def v1(offset, key, value):
        return R.build_legacy_message_set([rec(key, value, NOW)], magic=1, base_offset=offset)

    (part / "00000000000000000000.log").write_bytes(v1(0, b"a", None) + v1(1, b"b", b"1"))
    (part / "00000000000000000002.log").write_bytes(v1(2, b"x", None))
    (part / "00000000000000000003.log").write_bytes(v1(3, b"c", b"1"))
    (part / "00000000000000000004.log").write_bytes(R.build_record_batch([rec(b"d", b"1")], base_offset=4))
    for name, age in (("0", 10 * DAY), ("2", 0), ("3", 0), ("4", 0)):
        t = (NOW - age) / 1000
        os.utime(part / f"{int(name):020d}.log", (t, t))
    cfg = LogConfig(delete_retention_ms=DAY, cleanup_policy=("compact",))
    log = Log(part, cfg, clock=lambda: NOW)
    # segment 2 is the last clean one: tombstones in segments older than its mtime - 1 day go
    res = run(log, cfg, checkpoint=3)
    assert res.range.first_dirty == 3
    assert [(o, k, v) for o, k, v in data(log)] == [
        (1, b"b", b"1"),
        (2, b"x", None),
        (3, b"c", b"1"),
        (4, b"d", b"1"),
    ]
    log.close()


def test_one_cleanable_rule_kafkas_boundaries():
    """LogCleanerManager.grabFilthiestCompactedLog: ratio strictly above the minimum, or a
    segment past max.compaction.lag.ms with cleanable bytes. The broker's cleaner and
    `kafkatool compact` both decide through CleanableRange.not_due_reason."""
    import inspect

    from kafkatool.broker import maintenance as broker_maintenance
    from kafkatool.commands import compact as compact_cmd
    from kafkatool.log.cleaner import CleanableRange
    from kafkatool.log.config import LogConfig

    cfg = LogConfig(min_cleanable_dirty_ratio=0.5)

    def rng(clean, dirty, delay=0, first_dirty=0, first_uncleanable=10):
        return CleanableRange(first_dirty, first_uncleanable, None, None, "hw", clean, dirty, delay)

    assert rng(50, 50).not_due_reason(cfg) is not None  # 0.5 is not > 0.5
    assert rng(49, 51).not_due_reason(cfg) is None
    assert rng(99, 1, delay=5).not_due_reason(cfg) is None  # past max.compaction.lag.ms
    assert rng(100, 0, delay=5).not_due_reason(cfg) is not None  # ... but nothing to clean
    assert rng(0, 10, first_dirty=10, first_uncleanable=10).not_due_reason(cfg) is not None
    for mod in (broker_maintenance, compact_cmd):
        assert "not_due_reason(" in inspect.getsource(mod)
        assert "min_cleanable_dirty_ratio" not in inspect.getsource(mod)


FIELDS = ["length", "timestamp_delta", "offset_delta", "key_length", "value_length"]


def _refusal(fn):
    # DefaultRecord.readFrom's InvalidRecordException ("Found invalid record structure")
    with pytest.raises(InvalidRecordError) as e:
        fn()
    return type(e.value), e.value.message, e.value.position


@pytest.mark.parametrize("field", FIELDS)
def test_key_scan_refuses_an_overlong_varint_as_the_decoder_does(field):
    """Kafka's ByteUtils.readVarint reads at most 5 bytes ("Varint is too long"), readVarlong
    10: DefaultRecord.readFrom refuses a CRC-valid record whose varint is longer, and so must
    the cleaner's key scan, with the decoder's message and byte position."""
    before = batch([rec(b"a", b"x" * 30)], base_offset=3)
    buf = before + overlong_varint_batch(4, b"k1", b"v" * 40, field)
    b = R.read_batch(buf, len(before))
    assert b.is_valid()
    decoder = _refusal(lambda: list(b.records()))
    assert decoder[1].startswith("varint longer than")
    assert len(before) + 61 <= decoder[2] < len(buf)  # a file byte inside the record
    assert _refusal(lambda: scan_keys(b)) == decoder


def test_key_scan_drops_the_bits_a_5_byte_varint_carries_past_the_32nd():
    """readVarint keeps 32 bits of a 5-byte varint (Java's int shift drops the rest): the
    record decodes, with the same key in the scan and the decoder."""
    raw = overlong_varint_batch(4, b"k1", b"v" * 40, "key_length", width=5, top=0x70)
    b = R.read_batch(raw)
    assert [(r.offset, r.key) for r in b.records()] == [(4, b"k1")]
    assert scan_keys(b) == [(4, b"k1", False)]


def _log_with_an_overlong_varint(tmp_path, at: int, n: int = 60) -> Log:
    log = open_log(tmp_path)
    for i in range(n):
        if i == at:
            log.append_as_follower(overlong_varint_batch(i, b"k%d" % (i % 5), b"v" * 40, "key_length"))
        else:
            log.append_as_follower(batch([rec(b"k%d" % (i % 5), b"v" * 40, NOW + i)], base_offset=i))
    log.roll()
    log.append_as_follower(batch([rec(b"k0", b"active")], base_offset=n))
    log.update_high_watermark(log.log_end_offset)
    return log


def _contents(part_dir) -> list:
    """(offset, key, value) of every record; the raw bytes of a batch the decoder refuses."""
    out = []
    for b in batches_of(part_dir):
        try:
            out += [(r.offset, r.key, r.value) for r in b.records()]
        except InvalidRecordError:
            out.append((b.base_offset, "undecodable", bytes(b.raw())))
    return out


def _bad_batch_position(log: Log, offset: int):
    for seg in log.segments:
        for b in seg.batches():
            if b.base_offset == offset:
                return seg.log_path, b.position
    raise AssertionError(offset)


def test_a_damaged_batch_header_names_its_file_once(tmp_path):
    """A batch whose length field is zero (the next batch of the segment cannot be read): the
    round stops with the segment's own error, which names the file and the byte once."""
    log = _log_with_an_overlong_varint(tmp_path, at=-1)
    path, position = _bad_batch_position(log, 23)
    with open(path, "r+b") as f:
        f.seek(position + 8)
        f.write(bytes(4))
    res = run(log, checkpoint=None)
    assert res.error == f"entry size 0 is smaller than the minimum 14 in {path} (at byte {position})"
    assert not res.changes and res.checkpoint_after == 0
    log.close()


def test_a_record_the_decoder_refuses_stops_the_round_and_changes_nothing(tmp_path):
    """Kafka's cleaner reads every record (buildOffsetMapForSegment, filterTo): the
    exception ends Cleaner.clean, the cleaner thread marks the partition uncleanable, no
    segment is swapped and the checkpoint is the round's first dirty offset (cleanLog's
    finally: doneCleaning with the start offset, here the log start).  Before, the key scan
    accepted the record and the cleaner dropped it as superseded."""
    log = _log_with_an_overlong_varint(tmp_path, at=23)
    path, position = _bad_batch_position(log, 23)
    files = {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix in (".log", ".index")}
    before = _contents(log.dir)
    res = run(log, checkpoint=None)
    assert res.error == (
        f"{path}: varint longer than 5 bytes in the batch at offset 23 (at byte {position + 61 + 4})"
    )
    assert not res.changes and res.checkpoint_after == 0
    assert {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix in (".log", ".index")} == files
    assert not list(log.dir.glob("*.cleaned"))
    log.close()
    assert _contents(log.dir) == before


def test_a_bad_batch_below_the_dirty_range_stops_the_rewrite_at_its_group(tmp_path):
    """The offset map pass reads only the dirty range; the rewrite reads every segment from
    the log start.  As in Kafka (cleanSegments swaps each group when it is done), groups
    before the bad one are swapped in, the bad one's group and those after stay as they
    were, and the checkpoint does not move."""
    log = _log_with_an_overlong_varint(tmp_path, at=40)
    path, _ = _bad_batch_position(log, 40)
    tail = {p.name: p.read_bytes() for p in log.dir.glob("*.log") if p.name >= path.name}
    before = _contents(log.dir)
    res = run(log, checkpoint=50)
    assert res.error is not None and res.error.startswith(f"{path}: varint longer than 5 bytes")
    assert res.changes and res.checkpoint_after == 50
    swapped = {g.base_offset for r in res.rounds for g in r.groups}
    assert swapped and max(swapped) < int(path.stem)
    assert {p.name: p.read_bytes() for p in log.dir.glob("*.log") if p.name >= path.name} == tail
    after = _contents(log.dir)
    # below the bad segment only records superseded inside the dirty range went
    latest = latest_per_key([r for r in before if r[0] >= 50])
    assert [r for r in after if r[0] >= int(path.stem)] == [r for r in before if r[0] >= int(path.stem)]
    for off, key, value in before:
        if off < int(path.stem) and (off, key, value) not in after:
            assert key in latest and latest[key][0] > off
    log.close()


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=70)),
            st.one_of(st.none(), st.binary(max_size=200)),
            st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=5))), max_size=1),
            st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_damaged_records_the_key_scan_and_the_decoder_read_alike(records, damage):
    """Random bytes of the record area changed: where the decoder reads the records, the scan
    gives the same (offset, key, tombstone); where the decoder refuses, the scan refuses, with
    the decoder's error and byte position (headers included: both walk them with
    records.walk_headers)."""
    recs = [R.SimpleRecord(v, k, h, NOW + ts) for k, v, h, ts in records]
    raw = bytearray(
        R.build_record_batch(recs, base_offset=1_000, offset_deltas=[i * 3 for i in range(len(recs))])
    )
    for at, byte in damage:
        raw[61 + at % (len(raw) - 61)] = byte
    b = R.read_batch(bytes(raw))
    try:
        decoded = [(r.offset, r.key, r.value is None) for r in b.records()]
    except FormatError as exc:
        decoded = (type(exc), exc.message, exc.position)
    try:
        scanned = scan_keys(b)
    except FormatError as exc:
        scanned = (type(exc), exc.message, exc.position)
    assert scanned == decoded


# ---------------------------------------------------------------- headers


def _with_headers(base_offset: int, headers_tail: bytes) -> bytes:
    """A one-record batch (key b"k1") whose header section is ``headers_tail``, valid CRC."""
    import struct

    from kafkatool.formats.crc import crc32c
    from kafkatool.formats.varint import write_uvarint, zigzag32

    body = b"\x00\x00\x00\x04k1\x04v1" + headers_tail
    record = write_uvarint(zigzag32(len(body))) + body
    head = bytearray(batch([rec(b"k1", b"v1")], base_offset=base_offset)[:61])
    struct.pack_into(">i", head, 8, 49 + len(record))
    struct.pack_into(">I", head, 17, crc32c(bytes(head[21:]) + record))
    return bytes(head) + record


@pytest.mark.parametrize(
    "tail",
    [
        b"\x64",  # 50 headers, no byte left
        b"\x01",  # -1 headers
        b"\x02\x01",  # a negative key length
        b"\x02\x08ab\x00",  # a key past the record
        b"\x02\x02a\x08xy",  # a value past the record
        b"\x02\x02a\x00\x00",  # a byte left after the headers
        b"\x02\x02a\x00\x02\x02b\x00",  # one header more than the count
        b"\x02\x02a\x80\x80\x80\x80\x80\x00",  # an overlong value length
    ],
)
def test_key_scan_refuses_what_the_decoder_refuses_in_the_headers(tail):
    """Kafka's cleaner reads each record with DefaultRecord.readFrom, headers included: a
    record whose header structure is impossible fails the round.  The scan used to skip the
    headers by the record's length and took the key; now it walks them with the decoder's
    walker and refuses with the decoder's error and byte position."""
    before = batch([rec(b"a", b"x" * 30)], base_offset=3)
    buf = before + _with_headers(4, tail)
    b = R.read_batch(buf, len(before))
    assert b.is_valid()
    decoder = _refusal(lambda: list(b.records()))
    assert _refusal(lambda: scan_keys(b)) == decoder
    assert len(before) + 61 <= decoder[2] <= len(buf)  # a byte of the bad record


def test_key_scan_reads_keys_past_well_formed_headers():
    keys = [(b"\xff\xfe", b"1"), ("trace", None), ("", b"")]
    raw = batch([R.SimpleRecord(b"v", b"k%d" % i, keys, NOW) for i in range(5)], base_offset=10)
    assert scan_keys(R.read_batch(raw)) == [(10 + i, b"k%d" % i, False) for i in range(5)]


@pytest.mark.parametrize("superseded", [True, False])
def test_a_batch_with_impossible_headers_stops_the_round(tmp_path, superseded):
    """Before, the scan took the key of a record claiming 50 headers in no bytes: superseded,
    the cleaner dropped the batch without a word; kept, it copied it; either way the
    checkpoint moved.  Kafka's cleaner fails on it (LogCleaningException: the partition is
    uncleanable); ours stops the round with one error naming the file, the batch offset and
    the byte position, and changes nothing."""
    log = open_log(tmp_path)
    bad = bad_header_count_batch(9, b"k1" if superseded else b"only-once", b"v" * 40)
    for i in range(40):
        key = b"k%d" % (i % 4)
        if i == 9:
            log.append_as_follower(bad)
        else:
            log.append_as_follower(batch([rec(key, b"v" * 40, NOW + i)], base_offset=i))
    log.roll()
    log.append_as_follower(batch([rec(b"k0", b"active")], base_offset=40))
    path, position = _bad_batch_position(log, 9)
    files = {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix in (".log", ".index")}
    res = run(log, checkpoint=None)
    end_of_record = position + len(bad)  # the count is the batch's last byte
    assert res.error == f"{path}: invalid header count 50 in the batch at offset 9 (at byte {end_of_record})"
    assert not res.changes and res.checkpoint_after == 0  # written at the round's start, not advanced
    assert {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix in (".log", ".index")} == files
    assert not list(log.dir.glob("*.cleaned"))
    log.close()


def test_compaction_keeps_a_key_that_is_not_utf8_where_kafka_keeps_it(tmp_path):
    """MemoryRecords.filterTo: a batch that keeps every record is written as its bytes; one
    that loses records is rebuilt from the parsed records, and DefaultRecord.writeTo writes
    the header key as Utils.utf8(String): U+FFFD's UTF-8 for each malformed sequence.  Ours
    does both alike (DESIGN.md), and the round never refuses such a key."""
    log = open_log(tmp_path)
    hdr = [(b"id\xff", b"1"), (b"\xed\xa0\x80", None)]
    kept = batch([R.SimpleRecord(b"v", b"whole", hdr, NOW)], base_offset=0)
    log.append_as_follower(kept)
    log.append_as_follower(
        batch(
            [R.SimpleRecord(b"old", b"dup", hdr, NOW), R.SimpleRecord(b"v", b"part", hdr, NOW)], base_offset=1
        )
    )
    for i in range(3, 30):
        log.append_as_follower(batch([rec(b"dup", b"v" * 40, NOW + i)], base_offset=i))
    log.roll()
    log.append_as_follower(batch([rec(b"x", b"active")], base_offset=30))
    res = run(log, checkpoint=None)
    assert res.error is None and res.changes
    bs = {b.base_offset: b for b in log.batches()}
    assert bytes(bs[0].raw()) == kept  # copied byte for byte: the key's bytes kept
    (part,) = bs[1].records()
    assert (part.offset, part.key) == (2, b"part")
    assert [(R.header_key_bytes(k), v) for k, v in part.headers] == [
        (b"id\xef\xbf\xbd", b"1"),
        (b"\xef\xbf\xbd", None),
    ]
    log.close()
