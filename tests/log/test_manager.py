"""LogManager: several log dirs, the .lock file, checkpoints, the clean-shutdown marker."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kafkatool.formats import checkpoint as ck
from kafkatool.log import lock
from kafkatool.log.config import LogConfig
from kafkatool.log.manager import LogManager
from tests.log.logtest_util import all_records, batch

HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from kafkatool.log import lock
    lock.acquire(sys.argv[1])
    print("locked", flush=True)
    sys.stdin.readline()
    """
)


@pytest.fixture
def other_process_lock():
    procs = []

    def hold(path):
        p = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdout.readline().strip() == "locked"
        procs.append(p)
        return p

    yield hold
    for p in procs:
        p.stdin.close()
        p.wait(timeout=10)


def test_lifecycle_checkpoints_and_marker(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, LogConfig(segment_bytes=2_000))
    a = mgr.create_log("a", 0)
    b = mgr.create_log("b", 1)
    assert mgr.log_dir_of("a", 0) != mgr.log_dir_of("b", 1)  # fewest partitions first
    for _ in range(12):
        a.append_as_leader(batch(1, size=300), 0)
    b.append_as_leader(batch(1), 0)
    a.update_high_watermark(10)
    a.increment_log_start_offset(8)
    mgr.shutdown()
    da = mgr.log_dir_of("a", 0)
    assert (da / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert ck.decode_offset_checkpoint((da / "recovery-point-offset-checkpoint").read_bytes()) == {
        ("a", 0): 12
    }
    assert ck.decode_offset_checkpoint((da / "log-start-offset-checkpoint").read_bytes()) == {("a", 0): 8}
    assert ck.decode_offset_checkpoint((da / "replication-offset-checkpoint").read_bytes()) == {("a", 0): 10}
    db = mgr.log_dir_of("b", 1)
    assert ck.decode_offset_checkpoint((db / "log-start-offset-checkpoint").read_bytes()) == {}
    # restart: clean, nothing recovered; the marker is removed while running
    mgr = LogManager(dirs, LogConfig(segment_bytes=2_000))
    assert all(s.had_clean_shutdown for s in mgr.dirs.values())
    assert not (da / ".kafka_cleanshutdown").exists()
    a = mgr.get_log("a", 0)
    assert a.load_result.recovered == [] and a.log_start_offset == 8 and a.high_watermark == 10
    assert [o for o, _ in all_records(a)] == list(range(8, 12))
    mgr._abort()  # a crash: no marker written
    mgr = LogManager(dirs, LogConfig(segment_bytes=2_000))
    assert not any(s.had_clean_shutdown for s in mgr.dirs.values())
    a = mgr.get_log("a", 0)
    # unclean: recovery from the recovery point (12 -> the active segment only)
    assert [r.base_offset for r in a.load_result.recovered] == [a.active_segment.base_offset]
    mgr.shutdown()


def test_second_process_cannot_open_a_locked_dir(tmp_path, other_process_lock):
    d = tmp_path / "d1"
    d.mkdir()
    assert not lock.is_locked(d)
    other_process_lock(d)
    assert lock.is_locked(d)
    with pytest.raises(lock.LogDirLockedError, match="locked by a running process"):
        LogManager([d])
    # read-only opening takes no lock
    LogManager([d], writable=False).shutdown()


def test_lock_released_on_shutdown_and_own_lock_not_reported(tmp_path):
    d = tmp_path / "d1"
    mgr = LogManager([d])
    assert not lock.is_locked(d)  # held by this process: not "another process"
    with pytest.raises(lock.LogDirLockedError):
        lock.acquire(d)
    mgr.shutdown()
    with lock.locked(d):
        pass


def test_ignores_kraft_metadata_and_delete_dirs(tmp_path):
    d = tmp_path / "d1"
    (d / "__cluster_metadata-0").mkdir(parents=True)
    (d / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (d / "not_a_partition").mkdir()
    mgr = LogManager([d], writable=False)
    assert mgr.logs == {}
    assert mgr.dirs[d].skipped == ["not_a_partition"]
    mgr.shutdown()


def _hw_file(d):
    return ck.decode_offset_checkpoint((d / "replication-offset-checkpoint").read_bytes())


def _hw_bytes(d):
    path = d / "replication-offset-checkpoint"
    return path.read_bytes() if path.exists() else None


def test_checkpoint_writer_gets_snapshots_and_never_writes_an_older_one(tmp_path):
    """With a checkpoint_writer (a broker's scheduler thread) the owner's thread only takes
    snapshots; a snapshot written after a newer one reached the disk is dropped."""
    mgr = LogManager([tmp_path / "d"], LogConfig())
    d = tmp_path / "d"
    a = mgr.create_log("a", 0)
    queued: list = []
    mgr.checkpoint_writer = queued.extend
    a.append_as_leader(batch(3), 0)
    a.update_high_watermark(3)
    before = _hw_bytes(d)
    mgr.checkpoint_high_watermarks()
    assert [(j.name, j.entries) for j in queued] == [("replication-offset-checkpoint", {("a", 0): 3})]
    # nothing written on this thread
    now = _hw_bytes(d)
    assert now == before
    # unchanged entries: no second snapshot
    mgr.checkpoint_high_watermarks()
    assert len(queued) == 1
    old = queued.pop()
    a.append_as_leader(batch(2), 0)
    a.update_high_watermark(5)
    mgr.checkpoint_high_watermarks()
    new = queued.pop()
    assert new.seq > old.seq
    assert mgr.write_checkpoint(new) is True
    assert _hw_file(d) == {("a", 0): 5}
    assert mgr.write_checkpoint(old) is False  # late: the file keeps the newer entries
    assert _hw_file(d) == {("a", 0): 5}
    # a synchronous write (shutdown) supersedes snapshots still queued, even when it finds
    # the file current and writes nothing
    a.update_high_watermark(4)
    mgr.checkpoint_high_watermarks()
    stale = queued.pop()
    a.update_high_watermark(5)
    mgr.shutdown()
    assert mgr.write_checkpoint(stale) is False
    assert _hw_file(d) == {("a", 0): 5}


def test_checkpoint_write_failure_is_tried_again(tmp_path):
    """A failed write raises for the writer to report, and the next checkpoint snapshots the
    same entries again (they never reached the disk)."""
    d = tmp_path / "d"
    mgr = LogManager([d], LogConfig())
    a = mgr.create_log("a", 0)
    queued: list = []
    mgr.checkpoint_writer = queued.extend
    a.append_as_leader(batch(3), 0)
    a.update_high_watermark(3)
    mgr.checkpoint_high_watermarks()
    job = queued.pop()
    tmp = d / "replication-offset-checkpoint.tmp"
    tmp.mkdir()  # the write aside cannot open its file
    with pytest.raises(OSError):
        mgr.write_checkpoint(job)
    tmp.rmdir()
    mgr.checkpoint_high_watermarks()
    again = queued.pop()
    assert again.entries == {("a", 0): 3}
    assert mgr.write_checkpoint(again) is True
    assert _hw_file(d) == {("a", 0): 3}
    mgr.shutdown()


def test_a_deleted_partition_leaves_the_checkpoints_at_once(tmp_path):
    """With a checkpoint writer elsewhere too, deleting a partition rewrites its dir's
    checkpoints before it returns (Kafka's asyncDelete), and a snapshot taken before the
    deletion and written after it changes nothing: a topic created again under the same
    name never meets the old one's recovery point after a crash."""
    d = tmp_path / "d"
    mgr = LogManager([d], LogConfig())
    a = mgr.create_log("a", 0)
    a.append_as_leader(batch(3), 0)
    a.flush()
    queued: list = []
    mgr.checkpoint_writer = queued.extend
    mgr.checkpoint_recovery_points()
    [before] = queued
    assert before.entries == {("a", 0): 3}
    mgr.delete_log("a", 0)
    path = d / "recovery-point-offset-checkpoint"
    assert ck.decode_offset_checkpoint(path.read_bytes()) == {}
    assert mgr.write_checkpoint(before) is False
    assert ck.decode_offset_checkpoint(path.read_bytes()) == {}
    mgr.shutdown()


def test_processes_of_one_broker_share_the_checkpoint_files(tmp_path):
    """A broker of several processes: each manager loads the partitions it owns; the member
    takes no lock and hands its checkpoint entries over; the primary writes them with its own,
    keeps what the file says of partitions it does not hold, and alone writes the marker."""
    d = tmp_path / "d"
    with LogManager([d], LogConfig()) as setup:  # a first broker run: both partitions, one process
        for p in (0, 1):
            setup.create_log("t", p).append_as_leader(batch(2 + p), 0)
    primary = LogManager([d], LogConfig(), owns=lambda tp: tp[1] == 0)
    assert set(primary.logs) == {("t", 0)}
    with pytest.raises(OSError, match="not locked"):
        LogManager([tmp_path / "elsewhere"], LogConfig(), owns=lambda tp: tp[1] == 1, member=True)
    member = LogManager(
        [d], LogConfig(), owns=lambda tp: tp[1] == 1, member=True, clean_shutdown={str(d): True}
    )
    assert set(member.logs) == {("t", 1)} and member.dirs[d].had_clean_shutdown
    handed: list = []
    member.checkpoint_sink = lambda job, now: handed.append((job, now))
    member.get_log("t", 1).append_as_leader(batch(4), 0)
    member.get_log("t", 1).flush()
    member.checkpoint_recovery_points()
    [(job, now)] = handed
    assert job.name == ck.RECOVERY_POINT_CHECKPOINT and job.entries == {("t", 1): 7} and not now
    member.checkpoint_recovery_points()
    assert len(handed) == 1  # unchanged: nothing handed over again
    path = d / ck.RECOVERY_POINT_CHECKPOINT
    before = ck.decode_offset_checkpoint(path.read_bytes())
    primary.merge_entries(d, job.name, job.entries, lambda tp: tp[1] == 1)
    assert ck.decode_offset_checkpoint(path.read_bytes()) == {**before, ("t", 1): 7}
    primary.get_log("t", 0).append_as_leader(batch(1), 0)
    primary.get_log("t", 0).flush()
    primary.checkpoint_recovery_points()  # its own refresh keeps the member's entry
    assert ck.decode_offset_checkpoint(path.read_bytes()) == {("t", 0): 3, ("t", 1): 7}
    seen = len(handed)
    member.delete_log("t", 1)  # a deletion is handed over at once, every file
    jobs = handed[seen:]
    assert {job.name for job, _ in jobs} == set(ck_names()) and all(now for _, now in jobs)
    for job, now in jobs:
        assert job.entries == {}
        primary.merge_entries(d, job.name, job.entries, lambda tp: tp[1] == 1, now=now)
    assert ck.decode_offset_checkpoint(path.read_bytes()) == {("t", 0): 3}
    member.shutdown()
    assert lock.held_here(d) and not (d / ".kafka_cleanshutdown").exists()
    primary.members_clean = False  # a member that did not stop cleanly: no marker
    primary.shutdown()
    assert not (d / ".kafka_cleanshutdown").exists() and not lock.held_here(d)


def ck_names():
    from kafkatool.log.manager import OFFSET_CHECKPOINTS

    return OFFSET_CHECKPOINTS


def test_a_member_whose_primary_is_gone_takes_the_locks_or_stays_away(tmp_path, other_process_lock):
    d = tmp_path / "d"
    with LogManager([d], LogConfig()) as setup:
        setup.create_log("t", 0).append_as_leader(batch(1), 0)
    holder = other_process_lock(d)  # the primary
    member = LogManager([d], LogConfig(), member=True, clean_shutdown={str(d): True})
    assert not member.adopt_locks()  # the primary (or a new broker) holds it: hands off
    assert not lock.held_here(d)
    holder.stdin.close()
    holder.wait(timeout=10)  # the primary is gone
    assert member.adopt_locks() and lock.held_here(d)
    member.shutdown()
    assert not lock.held_here(d) and not lock.is_locked(d)
