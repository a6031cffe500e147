"""LogManager's failed log dirs (Kafka's LogDirFailureChannel and LogManager.handleLogDirFailure):
a dir reported failed goes offline once, its logs leave the manager, nothing more is written to
it (checkpoints, the clean-shutdown marker, its lock is let go), new partitions go elsewhere;
at start-up a dir that cannot be opened is offline while another one is usable.  The errors are
built as the OS gives them (``OSError(errno.EIO, ...)``: a report is what a caller hands over);
the real full disk is tests/broker/test_log_dir_failure.py's."""

from __future__ import annotations

import errno

import pytest

from kafkatool.formats import checkpoint as ck
from kafkatool.log import lock
from kafkatool.log.config import LogConfig
from kafkatool.log.manager import LogDirOfflineError, LogManager
from tests.log.logtest_util import batch

EIO = OSError(errno.EIO, "Input/output error")


@pytest.fixture
def two_dirs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager([a, b], LogConfig())
    try:
        m.create_log("t", 0, log_dir=a).append_as_leader(batch(1), 0)
        m.create_log("t", 1, log_dir=b).append_as_leader(batch(1), 0)
        m.create_log("u", 0, log_dir=b)
        m.checkpoint_all()
        yield m, a, b
    finally:
        m.shutdown()


def test_the_first_report_takes_the_dir_offline_once(two_dirs):
    m, a, b = two_dirs
    calls = []
    m.on_offline_dir = lambda d, msg, exc: calls.append((d, msg, exc))
    lg = m.get_log("t", 1)
    assert m.report_io_error(lg.dir / "00000000000000000000.log", "Error while appending", EIO) is True
    assert m.report_io_error(lg.dir, "again", EIO) is False  # one dir, one failure
    assert m.report_io_error(b, "the dir itself", EIO) is False
    assert calls == [(b, "Error while appending", EIO)]
    assert m.offline_dirs == {b: f"Error while appending: {EIO}"} and m.live_dirs == [a]
    # the hook runs take_offline where the logs are owned
    assert m.get_log("t", 1) is not None
    assert m.take_offline(b) == [("t", 1), ("u", 0)]
    assert m.get_log("t", 1) is None and m.get_log("u", 0) is None and m.get_log("t", 0) is not None
    assert m.offline_partitions == {("t", 1), ("u", 0)}
    assert lg.closed and not lock.held_here(b) and lock.held_here(a)


def test_what_is_not_a_disk_failure_changes_nothing(two_dirs):
    m, a, b = two_dirs
    lg = m.get_log("t", 1)
    for exc in (OSError(errno.EMFILE, "Too many open files"), LogDirOfflineError("offline"), ValueError("x")):
        assert m.report_io_error(lg.dir, "msg", exc) is False
    assert m.report_io_error("/elsewhere", "msg", EIO) is False  # not one of the manager's dirs
    assert m.offline_dirs == {}


def test_an_offline_dir_gets_no_checkpoint_and_no_marker(two_dirs):
    m, a, b = two_dirs
    before = {p.name: p.read_bytes() for p in b.iterdir() if p.is_file()}
    m.report_io_error(b, "Error while flushing", EIO)  # no hook: taken offline at once
    m.get_log("t", 0).append_as_leader(batch(1), 0)
    m.checkpoint_all()
    m.checkpoint_cleaner_offsets()
    m.shutdown()
    assert (a / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert not (b / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert {p.name: p.read_bytes() for p in b.iterdir() if p.is_file()} == before


def test_a_partition_known_before_is_not_made_again_while_a_dir_is_offline(two_dirs):
    m, a, b = two_dirs
    m.report_io_error(b, "Error while reading", EIO)
    with pytest.raises(LogDirOfflineError, match="are offline"):
        m.create_log("t", 1)  # its data is on the failed dir
    with pytest.raises(LogDirOfflineError, match="are offline"):
        m.create_log("v", 0, is_new=False)
    with pytest.raises(LogDirOfflineError):
        m.create_log("v", 0, log_dir=b)
    assert m.create_log("v", 0).dir.parent == a  # a new one goes to a live dir


def test_a_dir_that_cannot_be_opened_starts_offline(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_bytes(b"not a directory")  # mkdir/listing fails: ENOTDIR/EEXIST
    m = LogManager([a, b], LogConfig())
    try:
        assert m.live_dirs == [a] and list(m.offline_dirs) == [b]
        assert "Error while loading log dir" in m.offline_dirs[b]
        assert m.create_log("t", 0).dir.parent == a
        m.checkpoint_all()
    finally:
        m.shutdown()
    assert (a / ck.CLEAN_SHUTDOWN_FILE).exists()
    # named offline up front (an unreadable meta.properties): never opened
    m = LogManager([a, tmp_path / "c"], LogConfig(), offline={str(tmp_path / "c"): "unreadable"})
    try:
        assert m.offline_dirs == {tmp_path / "c": "unreadable"} and not (tmp_path / "c").exists()
        assert m.get_log("t", 0) is not None
    finally:
        m.shutdown()
    with pytest.raises(OSError, match="none of the specified log dirs"):
        LogManager([b], LogConfig())
    assert not lock.held_here(b)


def test_a_deleted_offline_partition_can_be_made_again(two_dirs):
    m, a, b = two_dirs
    m.report_io_error(b, "Error while appending", EIO)
    assert m.delete_log("u", 0) is None  # out of reach on the failed dir
    assert ("u", 0) not in m.offline_partitions
    assert m.create_log("u", 0).dir.parent == a


def test_a_dir_marked_by_another_process_is_one_failure_with_the_reports(two_dirs):
    """mark_offline (a dir another process of the broker found failed) and report_io_error
    mark a dir by one rule: whichever comes first, the dir fails once and the other is a no-op;
    a dir the manager does not hold is never marked."""
    m, a, b = two_dirs
    calls = []
    m.on_offline_dir = lambda d, msg, exc: calls.append(d)
    assert m.mark_offline(b, "process 1: Error while appending") is True
    assert m.mark_offline(b, "again") is False
    assert m.report_io_error(m.get_log("t", 1).dir, "Error while appending", EIO) is False
    assert calls == []  # the hook is for this process's own reports; the marker runs take_offline
    assert m.offline_dirs == {b: "process 1: Error while appending"}
    assert m.mark_offline(a.parent / "elsewhere", "x") is False
    assert m.take_offline(b) == [("t", 1), ("u", 0)]
    assert m.report_io_error(a, "Error while flushing", EIO) is True and m.live_dirs == []


def test_a_stray_log_is_set_aside_as_it_loads_before_the_duplicate_check(tmp_path):
    """``stray`` (the broker's KRaft rule): a partition's log whose topic id the metadata lacks
    is renamed to ``<dir>.<uuid>-stray`` as it loads and never served, even when the metadata's
    own log of a topic made again under the name is in another dir (Kafka 3.7 refuses such a
    pair as duplicates); its checkpoint entries go; read-only renames nothing."""
    import os
    import re

    from kafkatool.formats.uuid import random_uuid

    a, b = tmp_path / "a", tmp_path / "b"
    old_id, new_id = random_uuid(os.urandom), random_uuid(os.urandom)
    m = LogManager([a, b], LogConfig())
    m.create_log("t", 0, log_dir=b, topic_id=old_id).append_as_leader(batch(3), 0)
    m.checkpoint_all()
    m.shutdown()
    # while b was offline (untouched: its files are put back), a new incarnation made in a
    kept = {p.name: p.read_bytes() for p in b.iterdir() if p.is_file()}
    (b / "t-0").rename(tmp_path / "t-0")
    m = LogManager([a, b], LogConfig())
    m.create_log("t", 0, log_dir=a, topic_id=new_id)
    m.shutdown()
    (tmp_path / "t-0").rename(b / "t-0")
    for name, data in kept.items():
        (b / name).write_bytes(data)
    assert "t 0" in (b / ck.RECOVERY_POINT_CHECKPOINT).read_text()

    def stray(tp, topic_id):
        return "the topicId does not exist in the metadata image" if topic_id == old_id else None

    with pytest.raises(Exception, match="duplicate log directories"):
        LogManager([a, b], LogConfig())
    ro = LogManager([a, b], LogConfig(), writable=False, stray=stray)
    assert ro.get_log("t", 0).topic_id == new_id and (b / "t-0").is_dir()
    assert [(tp, path) for tp, path, _, _ in ro.moved_aside] == [(("t", 0), b / "t-0")]
    ro.close()
    m = LogManager([a, b], LogConfig(), stray=stray)
    try:
        assert m.get_log("t", 0).topic_id == new_id and m.get_log("t", 0).dir.parent == a
        [(tp, path, target, why)] = m.moved_aside
        assert tp == ("t", 0) and path == b / "t-0" and not path.exists()
        assert (
            re.fullmatch(r"t-0\.[0-9a-f]{32}-stray", target.name)
            and (target / "00000000000000000000.log").exists()
        )
        assert "t 0" not in (b / ck.RECOVERY_POINT_CHECKPOINT).read_text()
    finally:
        m.shutdown()
    m = LogManager([a, b], LogConfig(), stray=stray)  # a -stray dir loads as one, never served
    try:
        assert m.get_log("t", 0).dir.parent == a and m.moved_aside == [] and ("t", 0) in m.stray_logs
    finally:
        m.shutdown()
