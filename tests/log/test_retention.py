"""Retention planning and deletion on engine-written logs, and where settings come from."""

from __future__ import annotations

import os

import pytest

from kafkatool.log import topic_settings as ts
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.maintenance import Quarantine
from kafkatool.log.retention import (
    REASON_LOG_START,
    REASON_SIZE,
    REASON_TIME,
    apply_retention,
    plan_retention,
)
from tests.log.maint_util import NOW, batch, rec, records_of

CFG = LogConfig(segment_bytes=1_000, index_interval_bytes=200)
HOUR = 3_600_000


def make(tmp_path, n_segments=5, per=4, ts_step=HOUR) -> Log:
    """Segments of ``per`` records; segment i has timestamps around NOW - (n - i) * ts_step."""
    log = Log(tmp_path / "t-0", CFG, clock=lambda: NOW)
    for s in range(n_segments):
        for j in range(per):
            log.append_as_leader(batch([rec(b"k", b"x" * 100, NOW - (n_segments - s) * ts_step + j)]), 0)
        log.roll()
    log.append_as_leader(batch([rec(b"k", b"last", NOW)]), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_time_retention_deletes_old_segments_oldest_first_and_stops(tmp_path):
    log = make(tmp_path)
    cfg = LogConfig(retention_ms=int(2.5 * HOUR))
    plan = plan_retention(log, cfg, now_ms=NOW)
    assert [d.base_offset for d in plan.deletions] == [0, 4, 8]
    assert all(d.reason == REASON_TIME and d.timestamp_source == "time index" for d in plan.deletions)
    assert plan.log_start_after == 12
    apply_retention(log, plan, quarantine=Quarantine(log.dir, "test"))
    assert log.log_start_offset == 12 and log.segments[0].base_offset == 12
    names = os.listdir(log.dir)
    assert not [n for n in names if n.endswith(".deleted")]
    assert "00000000000000000000.log" not in names and "00000000000000000004.snapshot" not in names
    log.close()
    assert [o for o, _, _ in records_of(log.dir)] == list(range(12, 21))
    # a second plan finds nothing
    log = Log(tmp_path / "t-0", CFG, log_start_offset=12, clock=lambda: NOW)
    log.update_high_watermark(log.log_end_offset)
    assert not plan_retention(log, cfg, now_ms=NOW).deletions
    log.close()


def test_size_retention(tmp_path):
    log = make(tmp_path)
    seg_size = log.segments[0].size
    total = sum(s.size for s in log.segments)
    cfg = LogConfig(retention_bytes=total - 2 * seg_size, retention_ms=-1)
    plan = plan_retention(log, cfg, now_ms=NOW)
    assert [d.base_offset for d in plan.deletions] == [0, 4]
    assert all(d.reason == REASON_SIZE for d in plan.deletions)
    cfg = LogConfig(retention_bytes=total - 2 * seg_size + 1, retention_ms=-1)
    assert [d.base_offset for d in plan_retention(log, cfg, now_ms=NOW).deletions] == [0]
    log.close()


def test_never_the_last_segment_and_note_when_kafka_would(tmp_path):
    log = make(tmp_path)
    plan = plan_retention(log, LogConfig(retention_ms=0), now_ms=NOW + 10)
    assert [d.base_offset for d in plan.deletions] == [0, 4, 8, 12, 16]
    assert log.active_segment.base_offset == 20
    assert any("last segment" in n for n in plan.notes)
    log.close()


def test_high_watermark_bounds_deletion(tmp_path):
    log = make(tmp_path)
    log.update_high_watermark(9)
    plan = plan_retention(log, LogConfig(retention_ms=0), now_ms=NOW + 10)
    assert [d.next_offset for d in plan.deletions] == [4, 8]
    assert any("high watermark 9" in n for n in plan.notes)
    log.close()


def test_log_start_offset_deletion_even_for_compacted_topics(tmp_path):
    log = make(tmp_path)
    log.log_start_offset = 9  # as DeleteRecords leaves it (log-start-offset-checkpoint)
    cfg = LogConfig(cleanup_policy=("compact",), retention_ms=0)
    plan = plan_retention(log, cfg, now_ms=NOW)
    assert [d.base_offset for d in plan.deletions] == [0, 4]
    assert all(d.reason == REASON_LOG_START for d in plan.deletions)
    assert any("only segments below the log start offset" in n for n in plan.notes)
    apply_retention(log, plan, quarantine=None)
    assert log.log_start_offset == 9  # stays mid-segment
    log.close()


def test_mtime_stands_in_when_no_timestamp(tmp_path):
    log = Log(tmp_path / "t-0", CFG, clock=lambda: NOW)
    log.append_as_leader(batch([rec(b"k", b"v", -1)]), 0)  # no timestamp
    log.roll()
    log.append_as_leader(batch([rec(b"k", b"v", NOW)]), 0)
    log.update_high_watermark(log.log_end_offset)
    seg0 = log.segments[0].log_path
    os.utime(seg0, (NOW / 1000 - 7200, NOW / 1000 - 7200))
    plan = plan_retention(log, LogConfig(retention_ms=HOUR), now_ms=NOW)
    assert [(d.base_offset, d.timestamp_source) for d in plan.deletions] == [(0, "mtime")]
    log.close()


def test_quarantine_keeps_what_retention_deletes(tmp_path):
    log = make(tmp_path, n_segments=2)
    before = records_of(log.dir)
    q = Quarantine(log.dir, "test", stamp="20240101T000000Z")
    plan = plan_retention(log, LogConfig(retention_ms=0), now_ms=NOW + 10)
    result = apply_retention(log, plan, quarantine=q)
    log.close()
    kept = [p for p in result.quarantined if p.endswith(".log")]
    assert len(kept) == 2
    from kafkatool.formats import records as R

    quarantined = []
    for p in kept:
        for b in R.iter_batches(open(p, "rb").read()):
            quarantined += [(r.offset, r.key, r.value) for r in b.records()]
    assert sorted(quarantined + records_of(log.dir)) == before
    assert os.path.exists(kept[0] + ".json")


def test_settings_precedence_and_synonyms():
    props = {
        "log.retention.hours": "5",
        "log.retention.minutes": "7",
        "log.retention.bytes": "100",
        "log.cleanup.policy": "compact,delete",
        "log.segment.bytes": "2048",
    }
    r = ts.resolve("orders", server_props=props)
    assert r.config.retention_ms == 7 * 60_000  # minutes before hours
    assert r.source_of("retention.ms") == "server.properties (log.retention.minutes)"
    assert r.config.cleanup_policy == ("compact", "delete") and r.config.segment_bytes == 2048
    overrides = ts.parse_topic_overrides(
        ["retention.ms=1000", "orders:retention.bytes=5", "other:retention.bytes=9"]
    )
    r = ts.resolve("orders", server_props=props, topic_overrides=overrides, flags={"retention.bytes": None})
    assert (r.config.retention_ms, r.source_of("retention.ms")) == (1000, ts.SOURCE_TOPIC)
    assert r.config.retention_bytes == 5
    r = ts.resolve("orders", server_props=props, topic_overrides=overrides, flags={"retention.ms": 42})
    assert (r.config.retention_ms, r.source_of("retention.ms")) == (42, ts.SOURCE_FLAG)
    assert ts.resolve("x").source_of("retention.ms") == ts.SOURCE_DEFAULT
    assert ts.resolve("x", server_props={"log.retention.hours": "-1"}).config.retention_ms == -1
    with pytest.raises(ts.SettingsError):
        ts.resolve("x", server_props={"log.retention.ms": "soon"})
    with pytest.raises(ts.SettingsError):
        ts.parse_topic_overrides(["retention.msx=1"])


def test_future_timestamps_block_time_retention_with_a_note(tmp_path):
    log = Log(tmp_path / "t-0", CFG, clock=lambda: NOW)
    log.append_as_leader(batch([rec(b"k", b"v", NOW + HOUR)]), 0)
    log.roll()
    log.append_as_leader(batch([rec(b"k", b"v", NOW)]), 0)
    log.update_high_watermark(log.log_end_offset)
    plan = plan_retention(log, LogConfig(retention_ms=1), now_ms=NOW)
    assert not plan.deletions and any("in the future" in n for n in plan.notes)
    log.close()
