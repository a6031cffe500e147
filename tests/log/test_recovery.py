"""Start-up recovery: what it cuts, what it finishes or rolls back, and the recover tool's plan."""

from __future__ import annotations

import json
import os

from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.recovery import QUARANTINE_DIR, apply_plan, plan_partition
from tests.log.logtest_util import all_records, batch

CFG = LogConfig(segment_bytes=3_000, index_interval_bytes=500)


def make_log(d, n=30, size=300, cfg=CFG):
    log = Log(d, cfg)
    for _ in range(n):
        log.append_as_leader(batch(1, size=size), leader_epoch=1)
    bases = [s.base_offset for s in log.segments]
    log.close()
    return bases


def test_partial_tail_is_cut_and_quarantined(tmp_path):
    d = tmp_path / "t-0"
    bases = make_log(d)
    last = d / f"{bases[-1]:020d}.log"
    whole = last.read_bytes()
    torn = whole + batch(1, size=300)[:100]  # a write torn by the crash
    last.write_bytes(torn)
    plan = plan_partition(d, CFG, recovery_point=bases[-1])
    (cut,) = plan.cuts
    assert (cut.start, cut.file_size, cut.reason) == (len(whole), len(torn), "partial_tail")
    assert plan.dropped == [] and plan.log_end_after == 30
    res = apply_plan(plan, CFG, stamp="T")
    q = d / QUARANTINE_DIR / "T" / f"{bases[-1]:020d}.cut-{len(whole)}-{len(torn)}.log"
    assert q.read_bytes() == torn[len(whole) :]
    side = json.loads(q.with_suffix(".json").read_text())
    assert side["origin"] == str(last) and side["byte_range"] == [len(whole), len(torn)]
    assert last.read_bytes() == whole and res.log_end_offset == 30


def test_corruption_truncates_and_drops_later_segments_like_kafka(tmp_path):
    d = tmp_path / "t-0"
    bases = make_log(d)
    assert len(bases) >= 4
    victim = d / f"{bases[1]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[700] ^= 0x01
    victim.write_bytes(data)
    plan = plan_partition(d, CFG, recovery_point=0)
    (cut,) = plan.cuts
    assert cut.reason == "crc_mismatch" and cut.base_offset == bases[1]
    assert [x.base_offset for x in plan.dropped] == sorted(bases[2:], reverse=True)
    expected_end = cut.next_offset
    res = apply_plan(plan, CFG, stamp="T", salvage=True)
    assert res.log_end_offset == expected_end
    log = Log(d, CFG, had_clean_shutdown=True)
    assert [o for o, _ in all_records(log)] == list(range(expected_end))
    log.close()
    qdir = d / QUARANTINE_DIR / "T"
    for b in bases[2:]:
        assert (qdir / f"{b:020d}.log").exists()
    # salvage file: valid batches after the damage, a readable segment
    (salv,) = res.salvaged
    got = [b.base_offset for b in R.iter_batches(open(salv["file"], "rb").read())]
    assert got[0] == expected_end + 1 and got[-1] == bases[2] - 1
    # Kafka's own loader on the same damage gives the same log (ours kept the extra bytes)
    assert plan_partition(d, CFG, recovery_point=0).findings is False


def test_zero_filled_preallocated_tail(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=50_000, preallocate=True)
    log = Log(d, cfg)
    for _ in range(5):
        log.append_as_leader(batch(1, size=100), 0)
    size = log.active_segment.size
    log._close_segments(trim=False)  # crash: the preallocated file and indexes stay at full size
    assert os.path.getsize(d / "00000000000000000000.log") == 50_000
    plan = plan_partition(d, cfg)
    (cut,) = plan.cuts
    assert cut.zero_tail and cut.start == size and cut.bytes == 50_000 - size
    assert any(r["index_changes"] for r in plan.recovered)
    res = apply_plan(plan, cfg, stamp="T")
    assert res.quarantined == []  # zeros are not worth keeping
    assert os.path.getsize(d / "00000000000000000000.log") == size
    assert res.log_end_offset == 5


def test_interrupted_swap_is_finished_and_cleaned_rolled_back(tmp_path):
    d = tmp_path / "t-0"
    bases = make_log(d)
    # a finished cleaner pass over the first two segments, interrupted after the .swap rename
    seg0 = (d / f"{bases[0]:020d}.log").read_bytes()
    seg1 = (d / f"{bases[1]:020d}.log").read_bytes()
    (d / f"{bases[0]:020d}.log.swap").write_bytes(seg0 + seg1)
    (d / f"{bases[0]:020d}.index.swap").write_bytes(b"")
    # an unfinished pass on later segments, and a stray deleted file
    (d / f"{bases[2]:020d}.log.cleaned").write_bytes(b"junk")
    (d / f"{bases[3]:020d}.log.deleted").write_bytes(b"old")
    (d / f"{bases[3]:020d}.snapshot.deleted").write_bytes(b"old")
    plan = plan_partition(d, CFG, recovery_point=10**9)
    acts = {(a["action"], os.path.basename(a["file"])) for a in plan.file_actions}
    assert ("delete", f"{bases[2]:020d}.log.cleaned") in acts
    assert ("delete", f"{bases[3]:020d}.log.deleted") in acts
    assert ("delete", f"{bases[1]:020d}.log") in acts and ("delete", f"{bases[0]:020d}.log") in acts
    assert ("rename", f"{bases[0]:020d}.log.swap") in acts
    apply_plan(plan, CFG, stamp="T")
    names = set(os.listdir(d))
    assert f"{bases[0]:020d}.log" in names and f"{bases[1]:020d}.log" not in names
    assert not any(n.endswith((".swap", ".cleaned", ".deleted")) for n in names)
    log = Log(d, CFG, had_clean_shutdown=True)
    assert [o for o, _ in all_records(log)] == list(range(30))
    log.close()


def test_swap_of_incomplete_split_is_deleted(tmp_path):
    d = tmp_path / "t-0"
    bases = make_log(d)
    (d / f"{bases[1]:020d}.log.cleaned").write_bytes(b"")
    (d / f"{bases[2]:020d}.log.swap").write_bytes(b"")
    plan = plan_partition(d, CFG, recovery_point=10**9)
    acts = {(a["action"], os.path.basename(a["file"]), a["reason"]) for a in plan.file_actions}
    assert ("delete", f"{bases[2]:020d}.log.swap", "swap file of an incomplete split") in acts
    apply_plan(plan, CFG)
    log = Log(d, CFG, had_clean_shutdown=True)
    assert [o for o, _ in all_records(log)] == list(range(30))
    log.close()


def test_missing_index_and_orphan_index(tmp_path):
    d = tmp_path / "t-0"
    bases = make_log(d)
    os.remove(d / f"{bases[1]:020d}.index")
    (d / "00000000000000099999.index").write_bytes(b"\0" * 16)
    plan = plan_partition(d, CFG, recovery_point=10**9)
    assert [r["recovered_because"] for r in plan.recovered] == ["missing_index", "unflushed"]
    assert any(a["reason"] == "orphaned index file" for a in plan.file_actions)
    apply_plan(plan, CFG)
    assert (d / f"{bases[1]:020d}.index").exists()
    assert not (d / "00000000000000099999.index").exists()


def test_log_end_below_log_start_drops_everything(tmp_path):
    d = tmp_path / "t-0"
    make_log(d)
    plan = plan_partition(d, CFG, recovery_point=10**9, log_start_offset=100)
    assert len(plan.dropped) == len(os.listdir(d)) // 3 or plan.dropped
    res = apply_plan(plan, CFG, stamp="T")
    assert res.log_end_offset == 100
    log = Log(d, CFG, had_clean_shutdown=True, log_start_offset=100)
    assert [s.base_offset for s in log.segments] == [100] and all_records(log) == []
    log.close()


def test_index_offset_overflow_splits_the_segment(tmp_path):
    # a legacy-era segment: offsets more than Int32.MAX above its base (KAFKA-6264)
    d = tmp_path / "t-0"
    d.mkdir()
    parts = []
    for off in (0, 1, 2**31 + 10, 2**31 + 11):
        b = bytearray(batch(1, size=50))
        R.set_base_offset(b, 0, off)
        parts.append(bytes(b))
    (d / "00000000000000000000.log").write_bytes(b"".join(parts))
    plan = plan_partition(d, CFG)
    assert [a["action"] for a in plan.file_actions] == ["split"]
    apply_plan(plan, CFG)
    assert sorted(n for n in os.listdir(d) if n.endswith(".log")) == [
        "00000000000000000000.log",
        f"{2**31 + 10:020d}.log",
    ]
    log = Log(d, CFG, had_clean_shutdown=True)
    assert [o for o, _ in all_records(log)] == [0, 1, 2**31 + 10, 2**31 + 11]
    assert log.log_end_offset == 2**31 + 12
    log.close()
    assert plan_partition(d, CFG).findings is False
