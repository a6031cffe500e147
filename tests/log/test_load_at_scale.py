"""Loading many partitions (issue 16): what start-up leaves on disk and which thread loads.

Recovery after a crash rewrites the recovered segment's producer snapshot in place and
removes the stale ones after it (Kafka removes them first): the files left and the state
loaded are the same as Kafka's; after a clean shutdown the partitions load on the calling
thread, after a crash on the num.recovery.threads pool."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import time

from kafkatool.formats import snapshot as snap
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.manager import LogManager
from tests.log.logtest_util import all_records, batch

CONFIG = LogConfig(segment_bytes=3_000)


def snapshots(d) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(d) if n.endswith(".snapshot"))


def write_partition(tmp_path) -> tuple:
    """A partition with an idempotent producer's batches over several segments, shut down
    cleanly (a snapshot at its log end), then opened as after a crash."""
    d = tmp_path / "t-0"
    log = Log(d, CONFIG)
    now = int(time.time() * 1000)  # a producer idle for producer.id.expiration.ms is not loaded
    for i in range(12):
        log.append_as_leader(batch(2, size=200, ts=now, pid=7, epoch=0, seq=2 * i), 0)
    end = log.log_end_offset
    active = log.active_segment.base_offset
    records = all_records(log)
    log.close()
    return d, end, active, records


def test_recovery_rewrites_the_snapshot_at_the_log_end(tmp_path):
    d, end, active, records = write_partition(tmp_path)
    assert end in snapshots(d)
    log = Log(d, CONFIG, recovery_point=end, had_clean_shutdown=False)
    try:
        assert [s.base_offset for s in log.load_result.recovered] == [active]
        assert log.log_end_offset == end
        assert all_records(log) == records
        # no stale snapshot above the recovered segment; the one at the log end is rewritten
        assert [o for o in snapshots(d) if o > active] == [end]
        entry = log.producer_state.producers[7]
        assert entry.last_sequence == 23 and entry.last_offset == end - 1
    finally:
        log.close()
    loaded = snap.read_snapshot((d / f"{end:020d}.snapshot").read_bytes())
    assert loaded.error is None and [e.producer_id for e in loaded.entries] == [7]


def test_recovery_that_cuts_the_log_drops_the_snapshot_past_the_new_end(tmp_path):
    d, end, active, _ = write_partition(tmp_path)
    seg = d / f"{active:020d}.log"
    size = seg.stat().st_size
    with open(seg, "r+b") as f:  # a torn last batch
        f.truncate(size - 10)
    log = Log(d, CONFIG, recovery_point=active, had_clean_shutdown=False)
    try:
        new_end = log.log_end_offset
        assert new_end < end
        assert [o for o in snapshots(d) if o > active] == [new_end]
        assert log.producer_state.producers[7].last_offset == new_end - 1
    finally:
        log.close()


def test_snapshot_rewritten_in_place_keeps_no_old_bytes(tmp_path):
    path = tmp_path / "00000000000000000005.snapshot"
    long = snap.encode_snapshot([snap.ProducerSnapshotEntry(i, 0, 1, 4, 0, 1000, -1, -1) for i in range(5)])
    short = snap.encode_snapshot([snap.ProducerSnapshotEntry(1, 0, 1, 4, 0, 1000, -1, -1)])
    fileops.write_in_place(path, long)
    fileops.write_in_place(path, short)
    assert path.read_bytes() == short
    fileops.write_in_place(path, long)
    assert path.read_bytes() == long


def crashed_and_clean_dirs(tmp_path):
    clean = tmp_path / "clean"
    mgr = LogManager([clean], CONFIG)
    for p in range(6):
        log = mgr.create_log("a", p)
        log.append_as_leader(batch(2, size=200), 0)
    mgr.shutdown()
    crashed = tmp_path / "crashed"
    shutil.copytree(clean, crashed)
    (crashed / ".kafka_cleanshutdown").unlink()
    return clean, crashed


def test_the_recovery_pool_runs_only_after_a_crash(tmp_path, monkeypatch):
    clean, crashed = crashed_and_clean_dirs(tmp_path)
    pools = []
    real = concurrent.futures.ThreadPoolExecutor

    class Counting(real):
        def __init__(self, *a, **kw):
            pools.append(kw.get("thread_name_prefix"))
            super().__init__(*a, **kw)

    import kafkatool.log.manager as manager_module

    monkeypatch.setattr(manager_module, "ThreadPoolExecutor", Counting)
    mgr = LogManager([clean], CONFIG, recovery_threads=4)
    try:
        assert pools == [] and len(mgr.logs) == 6
        assert not any(lg.load_result.recovered for lg in mgr.logs.values())
    finally:
        mgr.shutdown()
    mgr = LogManager([crashed], CONFIG, recovery_threads=4)
    try:
        assert pools == ["log-recovery"] and len(mgr.logs) == 6
        assert all(len(lg.load_result.recovered) == 1 for lg in mgr.logs.values())
    finally:
        mgr.shutdown()
