"""Partitions loaded in parallel (Kafka's num.recovery.threads.per.data.dir, issue 16): a pool
of threads loads and recovers a dir's partitions and gives exactly what one thread gives."""

from __future__ import annotations

import pytest

from kafkatool.formats.errors import FormatError
from kafkatool.log.config import LogConfig
from kafkatool.log.manager import LogManager
from tests.log.logtest_util import all_records, batch

CONFIG = LogConfig(segment_bytes=3_000)


def state(mgr: LogManager) -> dict:
    return {
        tp: (log.log_start_offset, log.log_end_offset, log.recovery_point, all_records(log))
        for tp, log in sorted(mgr.logs.items())
    }


def crashed_dir(tmp_path):
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    for t in ("a", "b"):
        for p in range(8):
            log = mgr.create_log(t, p)
            for i in range(p + 3):
                log.append_as_leader(batch(2, size=200, ts=1000 + i), 0)
    mgr.checkpoint_recovery_points()
    for p in range(0, 8, 2):  # appends past the checkpointed recovery point
        mgr.get_log("a", p).append_as_leader(batch(1, size=50), 0)
    mgr._abort()  # a crash: no clean-shutdown marker
    return d


@pytest.mark.parametrize("threads", [2, 5])
def test_parallel_recovery_matches_one_thread(tmp_path, threads):
    d = crashed_dir(tmp_path)
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(d, copy)
    one = LogManager([d], CONFIG, recovery_threads=1)
    many = LogManager([copy], CONFIG, recovery_threads=threads)
    try:
        assert not one.dirs[d].had_clean_shutdown and not many.dirs[copy].had_clean_shutdown
        assert list(many.logs) == list(one.logs)  # registered in dir order
        assert state(many) == state(one)
        assert len(state(one)) == 16
        recovered_one = sorted((lg.dir.name, len(lg.load_result.recovered)) for lg in one.logs.values())
        recovered_many = sorted((lg.dir.name, len(lg.load_result.recovered)) for lg in many.logs.values())
        assert recovered_many == recovered_one
        assert any(n for _, n in recovered_one)
    finally:
        one.shutdown()
        many.shutdown()


def test_parallel_load_failure_releases_every_log(tmp_path):
    """A partition that cannot be registered (the same partition in two dirs) fails the
    start-up, as in Kafka, with every loaded partition's descriptors let go and the dirs
    unlocked."""
    import os
    import shutil

    d = crashed_dir(tmp_path)
    d2 = tmp_path / "data2"
    d2.mkdir()
    for name in ("a-3", "b-0", "b-5"):
        shutil.copytree(d / name, d2 / name)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(FormatError, match="duplicate log directories for a-3"):
        LogManager([d, d2], CONFIG, recovery_threads=3)
    assert len(os.listdir("/proc/self/fd")) == before
    LogManager([d], CONFIG, recovery_threads=3).shutdown()  # not left locked
