"""A log dir on a disk that fills up (ENOSPC) goes offline, as Kafka's LogDirFailureChannel
takes it: a real ``kafkatool serve`` with a log dir on a small tmpfs, mounted in a private
mount namespace (``unshare -rm``, or as root) that the broker process lives in; the network
stays 127.0.0.1's.

Two dirs (a normal one first, holding the embedded metadata, and the tmpfs): producing until
the tmpfs is full answers KAFKA_STORAGE_ERROR, logs one ERROR line naming the dir and the
cause, and from then on every request to a partition of that dir answers KAFKA_STORAGE_ERROR
while the other dir's partitions are served; DescribeLogDirs reports the dir with the error
and no partitions; serve does not crash and shuts down cleanly.  One tmpfs dir alone: serve
halts with Kafka's fatal line and exit status 1 (Exit.halt(1))."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkatool.formats import checkpoint as ck
from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.broker.conftest import REPO, BrokerProcess
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient

TMPFS_SIZE = "4m"
BATCH_VALUE = 64 * 1024
#: 4 MiB of tmpfs takes at most 64 such batches; the loop stops at the first error
MAX_BATCHES = 200


def _mount_prefix(dir_) -> list[str]:
    """The command prefix that runs the broker in a mount namespace with ``dir_`` a tmpfs."""
    script = f'mount -t tmpfs -o size={TMPFS_SIZE} tmpfs "$0" && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", script, str(dir_)]


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1): a tmpfs cannot be mounted for the broker")
    probe = tmp_path_factory.mktemp("probe")
    r = subprocess.run(_mount_prefix(probe) + ["true"], capture_output=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"neither root nor a user namespace can mount a tmpfs here: {r.stderr.decode()!r}")


def _batch(i: int) -> bytes:
    return R.build_record_batch([R.SimpleRecord(b"x" * BATCH_VALUE, b"k%d" % i, [], int(time.time() * 1000))])


def _fill(c: WireClient, topic: str) -> tuple[int, int]:
    """Produce to ``topic`` until an answer is not NONE: (batches acknowledged, that error)."""
    for i in range(MAX_BATCHES):
        code = produce(c, topic, _batch(i)).error_code
        if code != 0:
            return i, code
    raise AssertionError(f"{MAX_BATCHES} batches of {BATCH_VALUE} bytes fit a {TMPFS_SIZE} tmpfs")


def _list_offset(c: WireClient, topic: str) -> int:
    req = G.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])
        ],
    )
    return c.request(2, 7, req).topics[0].partitions[0].error_code


def _offset_at(c: WireClient, topic: str, timestamp: int):
    req = G.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)]
            )
        ],
    )
    return c.request(2, 7, req).topics[0].partitions[0]


def _errors(b: BrokerProcess) -> list[str]:
    return [ln for ln in b.log_text().splitlines() if "level=error" in ln or "level=critical" in ln]


def test_a_full_disk_takes_its_log_dir_offline_and_the_other_dir_serves(can_mount, tmp_path):
    data, full = tmp_path / "data", tmp_path / "full"
    full.mkdir()
    b = BrokerProcess(
        data, extra=[f"log.dirs={data},{full}", "log.roll.jitter.ms=0"], prefix=_mount_prefix(full)
    )
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "keep")  # the first dir (fewest partitions, then the name)
            create_topic(c, "fill")  # the tmpfs
            assert produce(c, "keep", _batch(0)).error_code == 0
            acked, code = _fill(c, "fill")
            assert acked > 10 and code == ErrorCode.KAFKA_STORAGE_ERROR, (acked, code)
            # every request to the failed dir's partition answers KAFKA_STORAGE_ERROR from now on
            assert produce(c, "fill", b"").error_code == ErrorCode.KAFKA_STORAGE_ERROR
            part = fetch(c, "fill", 0).responses[0].partitions[0]
            assert part.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # Fetch up to v5: NOT_LEADER_OR_FOLLOWER (KafkaApis.maybeDownConvertStorageError)
            part = fetch(c, "fill", 0, version=5).responses[0].partitions[0]
            assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert _list_offset(c, "fill") == ErrorCode.KAFKA_STORAGE_ERROR
            # Metadata: no leader, the broker's replica offline (as Kafka's controller shows it)
            meta = c.request(3, 12, G.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            node = meta.brokers[0].node_id
            (fill,) = [t for t in meta.topics if t.name == "fill"]
            p = fill.partitions[0]
            assert (p.error_code, p.leader_id, p.offline_replicas) == (
                ErrorCode.LEADER_NOT_AVAILABLE,
                -1,
                [node],
            )
            # the other dir serves as ever
            assert produce(c, "keep", _batch(1)).error_code == 0
            part = fetch(c, "keep", 0).responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == 2
            assert _list_offset(c, "keep") == 0
            dirs = {r.log_dir: r for r in c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results}
            assert dirs[str(full)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert dirs[str(full)].topics == [] and dirs[str(full)].total_bytes == -1
            assert dirs[str(data)].error_code == 0
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in dirs[str(data)].topics] == [
                ("keep", [0])
            ]
            # a new topic's partitions go to the live dir
            create_topic(c, "later")
            assert produce(c, "later", _batch(0)).error_code == 0
            assert (data / "later-0").is_dir()
        errors = _errors(b)
        assert len(errors) == 1, b.log_text()[-3000:]
        assert f"Error while appending records to fill-0 in dir {full}" in errors[0]
        assert "No space left on device" in errors[0] and f"log dir {full} is offline" in errors[0]
        assert "Traceback" not in b.log_text()
        assert b.alive()
        assert b.stop() == 0, b.log_text()[-3000:]
        assert (data / ck.CLEAN_SHUTDOWN_FILE).exists()
        # the last line says which dirs got the marker and which are offline, not clean=true
        text = b.log_text()
        assert f"shutdown complete clean=false marked={data} offline={full}" in text, text[-2000:]
        assert "clean=true" not in text
    finally:
        b.kill()


def test_a_full_disk_under_the_only_log_dir_halts_the_broker(can_mount, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    b = BrokerProcess(full, prefix=_mount_prefix(full)).start()
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "fill")
            try:
                acked, code = _fill(c, "fill")
            except OSError:
                pass  # the broker halted before it answered
            else:
                assert code == ErrorCode.KAFKA_STORAGE_ERROR, (acked, code)
        b.proc.wait(20)
        assert b.proc.returncode == 1, b.log_text()[-3000:]
        text = b.log_text()
        assert (
            f"level=critical logger=kafkatool.broker Shutdown broker because all log dirs in {full} have failed"
            in text
        )
        assert "No space left on device" in text and "Traceback" not in text, text[-3000:]
    finally:
        b.kill()


def test_a_dir_whose_meta_properties_cannot_be_read_starts_offline(tmp_path):
    """MetaPropertiesEnsemble.Loader: a meta.properties that cannot be read puts its dir among
    the error dirs and the broker starts with it offline (here the file is a directory: EISDIR);
    with no usable dir left, serve refuses to start (exit 2, one line)."""
    data, second = tmp_path / "data", tmp_path / "second"
    extra = [f"log.dirs={data},{second}"]
    b = BrokerProcess(data, extra=extra).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "keep")
        create_topic(c, "gone")
        assert produce(c, "gone", _batch(0)).error_code == 0
    assert b.stop() == 0
    assert (second / "gone-0").is_dir()
    meta = second / "meta.properties"
    meta.unlink()
    meta.mkdir()
    before = {p: p.read_bytes() for p in second.rglob("*") if p.is_file()}
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            assert produce(c, "gone", _batch(1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert fetch(c, "gone", 0).responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(c, "keep", _batch(1)).error_code == 0
            dirs = {
                r.log_dir: r.error_code
                for r in c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results
            }
            assert dirs == {str(data): 0, str(second): ErrorCode.KAFKA_STORAGE_ERROR}
        errors = _errors(b)
        assert len(errors) == 1 and f"Error while reading meta.properties file {meta}" in errors[0], errors
        assert b.stop() == 0
        # the offline dir was neither locked nor written: its files are as they were
        assert {p: p.read_bytes() for p in second.rglob("*") if p.is_file()} == before
    finally:
        b.kill()
    # the first dir too: nothing left to serve from
    (data / "meta.properties").unlink()
    (data / "meta.properties").mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "kafkatool", "serve", "--no-banner", *("-o", f"log.dirs={data},{second}")],
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    assert r.returncode == 2, r.stderr.decode()[-2000:]
    out = r.stderr.decode() + r.stdout.decode()
    assert "none of the specified log dirs" in out and "Traceback" not in out, out[-2000:]


def test_a_log_dir_move_into_a_full_disk_takes_the_destination_offline(can_mount, tmp_path):
    """AlterReplicaLogDirs of a partition larger than the destination's free space: the copy's
    ENOSPC takes the destination dir offline (the future log's append in Kafka's
    ReplicaAlterLogDirsThread), the partition keeps being served from where it was, and a
    later move into the failed dir answers KAFKA_STORAGE_ERROR."""
    from kafkatool.protocol.generated.alter_replica_log_dirs_request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirTopic,
    )

    data, full = tmp_path / "data", tmp_path / "full"
    full.mkdir()
    b = BrokerProcess(data, extra=[f"log.dirs={data},{full}"], prefix=_mount_prefix(full)).start()
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "big")  # the first dir
            for i in range(80):  # 5 MiB
                assert produce(c, "big", _batch(i)).error_code == 0

            def move(topic: str) -> int:
                req = G.AlterReplicaLogDirsRequest(
                    dirs=[
                        AlterReplicaLogDir(
                            path=str(full), topics=[AlterReplicaLogDirTopic(name=topic, partitions=[0])]
                        )
                    ]
                )
                return c.request(34, 2, req).results[0].partitions[0].error_code

            assert move("big") == 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and "is offline" not in b.log_text():
                time.sleep(0.05)
            errors = _errors(b)
            assert len(errors) == 1 and f"Error while copying big-0 into dir {full}" in errors[0], (
                b.log_text()[-3000:]
            )
            assert "No space left on device" in errors[0]
            assert produce(c, "big", _batch(80)).error_code == 0  # still served from the first dir
            part = fetch(c, "big", 0).responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == 81
            assert move("big") == ErrorCode.KAFKA_STORAGE_ERROR
            dirs = {r.log_dir: r for r in c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results}
            assert dirs[str(full)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert [t.name for t in dirs[str(data)].topics] == ["big"]
        assert "Traceback" not in b.log_text()
        assert b.stop() == 0
    finally:
        b.kill()


def test_an_index_read_error_in_list_offsets_takes_the_dir_offline(tmp_path):
    """ListOffsets by timestamp reads the time index and the segment inside Kafka's
    maybeHandleIOException (UnifiedLog.fetchOffsetByTimestamp): an I/O error there is the dir's
    failure, one ERROR line with Kafka's message, KAFKA_STORAGE_ERROR from then on; the other
    dir serves on.  The error is the kernel's: an older segment's .timeindex (read through a
    descriptor opened per read) is replaced by a directory, so its pread fails (EISDIR).
    OffsetForLeaderEpoch reads no file (the leader epoch cache is in memory, as Kafka's
    endOffsetForEpoch): it answers until the dir is offline."""
    from kafkatool.protocol.generated.offset_for_leader_epoch_request import (
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )

    data, second = tmp_path / "data", tmp_path / "second"
    extra = [f"log.dirs={data},{second}", "log.segment.bytes=1024", "log.index.interval.bytes=1"]
    b = BrokerProcess(data, extra=extra).start()

    def small(ts: int) -> bytes:
        return R.build_record_batch([R.SimpleRecord(b"v" * 300, b"k", [], ts)])

    def epoch_end(c) -> tuple[int, int]:
        req = G.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                OffsetForLeaderTopic(
                    topic="ts",
                    partitions=[
                        OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)
                    ],
                )
            ],
        )
        p = c.request(23, 4, req).topics[0].partitions[0]
        return p.error_code, p.end_offset

    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "keep")  # the first dir
            create_topic(c, "ts")  # the second
            for i in range(8):
                assert produce(c, "ts", small(1000 + i)).error_code == 0
            first = sorted((second / "ts-0").glob("*.timeindex"))
            assert len(first) > 2, first  # rolled: the first segment is not the active one
            p = _offset_at(c, "ts", 1003)
            assert (p.error_code, p.offset) == (0, 3)
            assert epoch_end(c) == (0, 8)
            first[0].unlink()
            first[0].mkdir()
            p = _offset_at(c, "ts", 0)
            assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR, p
            assert _offset_at(c, "ts", 1003).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert epoch_end(c)[0] == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(c, "keep", small(5)).error_code == 0
            assert _offset_at(c, "keep", 0).error_code == 0
        errors = _errors(b)
        assert len(errors) == 1, b.log_text()[-3000:]
        assert f"Error while fetching offset by timestamp for ts-0 in dir {second}" in errors[0]
        assert "Is a directory" in errors[0] and f"log dir {second} is offline" in errors[0]
        assert "Traceback" not in b.log_text()
        assert b.stop() == 0
    finally:
        b.kill()


def _owned_by(index: int, prefix: str) -> str:
    """A topic name whose partition 0 process ``index`` of two owns."""
    from kafkatool.broker.processes import owner_index

    return next(f"{prefix}{i}" for i in range(100) if owner_index(f"{prefix}{i}", 0, 2) == index)


def _nodes(c: WireClient) -> dict[int, str]:
    meta = c.request(3, 12, G.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}


def _leader(c: WireClient, topic: str) -> tuple[int, int]:
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    meta = c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
    p = meta.topics[0].partitions[0]
    return p.error_code, p.leader_id


def _until(what, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.05)
    return what()


def _two_processes(full: Path, dirs: list[Path]) -> BrokerProcess:
    """A serve of kafkatool.processes=2 on ``dirs`` (the first holds the metadata), ``full`` a
    small tmpfs in its own mount namespace, one partition per new topic."""
    full.mkdir()
    extra = ["kafkatool.processes=2", "num.partitions=1"]
    if len(dirs) > 1:
        extra.insert(0, "log.dirs=" + ",".join(map(str, dirs)))
    return BrokerProcess(dirs[0], extra=extra, prefix=_mount_prefix(full)).start(timeout=40)


def test_a_dir_one_process_finds_failed_is_failed_for_every_process(can_mount, tmp_path):
    """kafkatool.processes=2, the second dir a small tmpfs: the member fills its partition
    there; the dir goes offline for the whole broker (the processes share the dirs): the
    primary's own partition on it answers KAFKA_STORAGE_ERROR too, Metadata shows both without
    a leader, DescribeLogDirs (either process) reports the dir failed, one ERROR line in all,
    the first dir serves on in both processes, and the shutdown marks the first dir only."""
    data, full = tmp_path / "data", tmp_path / "full"
    b = _two_processes(full, [data, full])
    keep0, keep1 = _owned_by(0, "keep"), _owned_by(1, "keep")
    other0, fill1 = _owned_by(0, "other"), _owned_by(1, "fill")
    try:
        with WireClient(b.bootstrap) as c:
            # each process puts its first partition in the first dir, its second in the tmpfs
            for topic in (keep0, keep1, other0, fill1):
                create_topic(c, topic)
            nodes = _nodes(c)
            assert len(nodes) == 2
            assert _until(lambda: _leader(c, fill1)[1] >= 0)
            member = nodes[_leader(c, fill1)[1]]
            assert member != b.bootstrap
            assert produce(c, other0, _batch(0)).error_code == 0
            with WireClient(member) as m:
                assert produce(m, keep1, _batch(0)).error_code == 0
                acked, code = _fill(m, fill1)
                assert acked > 10 and code == ErrorCode.KAFKA_STORAGE_ERROR, (acked, code)
                assert produce(m, keep1, _batch(1)).error_code == 0  # the member's first dir serves
                dirs = {
                    r.log_dir: r.error_code
                    for r in m.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results
                }
                assert dirs == {str(data): 0, str(full): ErrorCode.KAFKA_STORAGE_ERROR}

            # the primary, told, takes the dir offline too, before it writes there itself (reads
            # only: its own write would meet the full disk): its partition there is offline
            def primary_dirs() -> dict[str, int]:
                res = c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results
                return {r.log_dir: r.error_code for r in res}

            assert _until(lambda: primary_dirs() == {str(data): 0, str(full): ErrorCode.KAFKA_STORAGE_ERROR})
            assert _list_offset(c, other0) == ErrorCode.KAFKA_STORAGE_ERROR
            assert fetch(c, other0, 0).responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(c, other0, _batch(1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(c, keep0, _batch(0)).error_code == 0
            for topic in (other0, fill1):
                assert _leader(c, topic) == (ErrorCode.LEADER_NOT_AVAILABLE, -1), topic
            for topic in (keep0, keep1):
                assert _leader(c, topic)[0] == 0, topic
            # a new topic of either process goes to the live dir
            new1 = _owned_by(1, "later")
            create_topic(c, new1)
            with WireClient(member) as m:
                assert _until(lambda: produce(m, new1, _batch(0)).error_code == 0)
            assert (data / f"{new1}-0").is_dir()
        text = b.log_text()
        errors = _errors(b)
        assert len(errors) == 1, text[-3000:]
        assert (
            "process=1" in errors[0]
            and f"Error while appending records to {fill1}-0 in dir {full}" in errors[0]
        )
        assert f"log dir {full} is offline: process 1 of this broker found it failed" in text, text[-3000:]
        assert "Traceback" not in text
        assert b.stop(timeout=60) == 0, text[-3000:]
        assert (data / ck.CLEAN_SHUTDOWN_FILE).exists()
        assert f"shutdown complete clean=false marked={data} offline={full}" in b.log_text()
    finally:
        b.kill()


def test_the_last_dir_failing_in_a_member_halts_the_whole_broker(can_mount, tmp_path):
    """kafkatool.processes=2 on one tmpfs dir: the member's full disk leaves the broker without a
    live dir; the primary, told, halts the broker: every process gone, Kafka's fatal line,
    exit status 1, no marker (a member does not halt alone to be restarted onto a failed dir)."""
    full = tmp_path / "full"
    b = _two_processes(full, [full])
    fill1 = _owned_by(1, "fill")
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, fill1)
            nodes = _nodes(c)
            assert _until(lambda: _leader(c, fill1)[1] >= 0)
            member = nodes[_leader(c, fill1)[1]]
        with WireClient(member) as m:
            try:
                acked, code = _fill(m, fill1)
            except OSError:
                pass  # halted before it answered
            else:
                assert code == ErrorCode.KAFKA_STORAGE_ERROR, (acked, code)
        b.proc.wait(30)
        text = b.log_text()
        assert b.proc.returncode == 1, text[-3000:]
        assert f"Shutdown broker because all log dirs in {full} have failed" in text, text[-3000:]
        assert "restarting it" not in text and "Traceback" not in text, text[-3000:]
    finally:
        b.kill()


def _primary_dirs(c: WireClient) -> dict[str, int]:
    return {r.log_dir: r.error_code for r in c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results}


def _break_index(part_dir) -> None:
    """The partition's first offset index becomes a directory: its load meets the kernel's
    EISDIR, a real I/O error of that partition alone."""
    index = part_dir / "00000000000000000000.index"
    index.unlink()
    index.mkdir()


def _two_process_topics(c: WireClient, data, second) -> tuple[str, str, str, str]:
    """keep0/keep1 in the first dir, other0/bad1 in the second (each process places its first
    partition in the first dir, its second in the other), every one with a record."""
    keep0, keep1 = _owned_by(0, "keep"), _owned_by(1, "keep")
    other0, bad1 = _owned_by(0, "other"), _owned_by(1, "bad")
    for topic in (keep0, keep1, other0, bad1):
        create_topic(c, topic)
    assert _until(lambda: _leader(c, bad1)[1] >= 0 and _leader(c, keep1)[1] >= 0)
    member = _nodes(c)[_leader(c, bad1)[1]]
    assert produce(c, keep0, _batch(0)).error_code == 0
    assert produce(c, other0, _batch(0)).error_code == 0
    with WireClient(member) as m:
        for topic in (keep1, bad1):
            assert produce(m, topic, _batch(0)).error_code == 0
    assert (data / f"{keep1}-0").is_dir() and (second / f"{bad1}-0").is_dir()
    assert (data / f"{keep0}-0").is_dir() and (second / f"{other0}-0").is_dir()
    return keep0, keep1, other0, bad1


def _assert_second_dir_offline_for_the_broker(c: WireClient, data, second, topics) -> None:
    """The second dir is offline in both processes, the first serves in both."""
    keep0, keep1, other0, bad1 = topics
    assert _until(lambda: _primary_dirs(c) == {str(data): 0, str(second): ErrorCode.KAFKA_STORAGE_ERROR})
    assert produce(c, other0, _batch(1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert produce(c, keep0, _batch(1)).error_code == 0
    for topic in (other0, bad1):
        assert _leader(c, topic) == (ErrorCode.LEADER_NOT_AVAILABLE, -1), topic
    assert _until(lambda: _leader(c, keep1)[0] == 0)
    member = _nodes(c)[_leader(c, keep1)[1]]
    with WireClient(member) as m:
        assert produce(m, keep1, _batch(1)).error_code == 0
        assert produce(m, bad1, _batch(1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert _primary_dirs(m) == {str(data): 0, str(second): ErrorCode.KAFKA_STORAGE_ERROR}


def test_a_dir_a_member_fails_to_load_at_start_up_is_offline_for_the_broker(tmp_path):
    """kafkatool.processes=2: a partition of the member fails to load (an I/O error in the
    second dir); the member starts with that dir offline and tells the primary (dir_failed),
    which takes it offline too: the broker starts and serves the first dir in both processes."""
    data, second = tmp_path / "data", tmp_path / "second"
    extra = [f"log.dirs={data},{second}", "kafkatool.processes=2", "num.partitions=1"]
    b = BrokerProcess(data, extra=extra).start(timeout=40)
    try:
        with WireClient(b.bootstrap) as c:
            topics = _two_process_topics(c, data, second)
        assert b.stop(timeout=60) == 0
        _break_index(second / f"{topics[3]}-0")
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            _assert_second_dir_offline_for_the_broker(c, data, second, topics)
        text = b.log_text()
        errors = _errors(b)
        assert len(errors) == 1, errors
        assert "process=1" in errors[0] and f"Error while loading log dir {second}" in errors[0], errors
        index = second / f"{topics[3]}-0" / "00000000000000000000.index"
        assert f"Is a directory: '{index}'" in errors[0], errors  # the pread's error names the index
        assert f"log dir {second} is offline: process 1 of this broker found it failed" in text
        assert "Traceback" not in text
        assert b.stop(timeout=60) == 0, b.log_text()[-3000:]
        assert f"shutdown complete clean=false marked={data} offline={second}" in b.log_text()
    finally:
        b.kill()


def test_a_dir_a_member_fails_to_load_at_its_restart_is_offline_for_the_broker(tmp_path):
    """kafkatool.processes=2: the member is killed, and its partition in the second dir fails
    to load at its restart; it comes back with that dir offline (no failed respawn), and the
    primary takes the dir offline too."""
    import os
    import signal

    from tests.broker.test_processes import children

    data, second = tmp_path / "data", tmp_path / "second"
    extra = [f"log.dirs={data},{second}", "kafkatool.processes=2", "num.partitions=1"]
    b = BrokerProcess(data, extra=extra).start(timeout=40)
    try:
        with WireClient(b.bootstrap) as c:
            topics = _two_process_topics(c, data, second)
            [member_pid] = children(b.proc.pid)
            _break_index(second / f"{topics[3]}-0")
            os.kill(member_pid, signal.SIGKILL)
            assert _until(lambda: "is back" in b.log_text(), timeout=30), b.log_text()[-3000:]
            _assert_second_dir_offline_for_the_broker(c, data, second, topics)
        text = b.log_text()
        errors = _errors(b)
        assert len(errors) == 1, errors
        index = second / f"{topics[3]}-0" / "00000000000000000000.index"
        assert "process=1" in errors[0] and f"Is a directory: '{index}'" in errors[0], errors
        assert f"log dir {second} is offline: process 1 of this broker found it failed" in text
        assert "Traceback" not in text and "the broker stops" not in text
        assert b.stop(timeout=60) == 0, b.log_text()[-3000:]
        assert f"shutdown complete clean=false marked={data} offline={second}" in b.log_text()
    finally:
        b.kill()


def test_the_primary_losing_the_metadata_dir_halts_every_process_of_the_broker(can_mount, tmp_path):
    """kafkatool.processes=2, the first dir (the embedded metadata's) a small tmpfs: the primary's
    own full disk there halts the broker on purpose (KRaft's metadata log dir), not a crash:
    Kafka's fatal line is serve's last line, exit status 1, the member is killed first (it
    neither logs that the primary is gone nor closes its logs, and is not restarted), and no
    dir gets the clean-shutdown marker."""
    from tests.broker.test_processes import children, gone

    full, data = tmp_path / "full", tmp_path / "data"
    b = _two_processes(full, [full, data])
    keep0, fill0 = _owned_by(0, "keep"), _owned_by(0, "fill")
    first1, second1 = _owned_by(1, "first"), _owned_by(1, "second")
    try:
        with WireClient(b.bootstrap) as c:
            for topic in (keep0, fill0, first1, second1):
                create_topic(c, topic)
            # each process places its partitions one per dir: fill0 is on the tmpfs
            assert (data / f"{keep0}-0").is_dir() and not (data / f"{fill0}-0").exists()
            assert _until(lambda: _leader(c, second1)[1] >= 0)
            member = _nodes(c)[_leader(c, second1)[1]]
            with WireClient(member) as m:
                for topic in (first1, second1):
                    assert produce(m, topic, _batch(0)).error_code == 0
            [member_pid] = children(b.proc.pid)
            try:
                acked, code = _fill(c, fill0)
            except OSError:
                pass  # halted before it answered
            else:
                assert code == ErrorCode.KAFKA_STORAGE_ERROR, (acked, code)
        b.proc.wait(30)
        text = b.log_text()
        assert b.proc.returncode == 1, text[-3000:]
        lines = text.strip().splitlines()
        assert (
            f"level=critical logger=kafkatool.broker process=0 Shutdown broker because the metadata log dir {full} has failed"
            in lines[-1]
        ), lines[-5:]
        assert gone(member_pid)
        for absent in ("primary process of this broker is gone", "restarting it", "Traceback", "exited ("):
            assert absent not in text, (absent, text[-3000:])
        assert not (data / ck.CLEAN_SHUTDOWN_FILE).exists()
    finally:
        b.kill()


@pytest.mark.parametrize("processes", [1, 2])
def test_a_topic_deleted_while_its_dir_is_offline_stays_deleted_when_the_dir_is_back(tmp_path, processes):
    """KRaft's stray replicas (LogManager.findStrayReplicas, asyncDelete isStray): a topic
    deleted while its partition's dir is offline is gone from the metadata; when the dir is
    readable again the next start does not bring the topic back from it: its log is renamed to
    ``<dir>.<uuid>-stray`` and kept (3.7 deletes no stray), never served, and a topic made
    again under the name starts empty.  processes=2: the member's partition, set aside by the
    primary before the member starts."""
    import json
    import re

    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    data, second = tmp_path / "data", tmp_path / "second"
    extra = [f"log.dirs={data},{second}", f"kafkatool.processes={processes}", "num.partitions=1"]
    keep, gone = _owned_by(1, "keep"), _owned_by(1, "gone")
    b = BrokerProcess(data, extra=extra)

    def topic_error(c: WireClient, topic: str) -> int:
        req = G.MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
        return c.request(3, 12, req).topics[0].error_code

    def client_of(c: WireClient, topic: str) -> str:
        assert _until(lambda: _leader(c, topic)[1] >= 0)
        return _nodes(c)[_leader(c, topic)[1]]

    try:
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            create_topic(c, keep)
            create_topic(c, gone)  # each process places its partitions one per dir
            with WireClient(client_of(c, gone)) as m:
                assert produce(m, keep, _batch(0)).error_code == 0
                assert produce(m, gone, _batch(0)).error_code == 0
        assert b.stop(timeout=60) == 0
        part = second / f"{gone}-0"
        assert part.is_dir() and (data / f"{keep}-0").is_dir()
        segment = (part / "00000000000000000000.log").read_bytes()
        meta = second / "meta.properties"
        meta_bytes = meta.read_bytes()
        meta.unlink()
        meta.mkdir()  # EISDIR: the dir starts offline
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            resp = c.request(20, 1, G.DeleteTopicsRequest(topic_names=[gone], timeout_ms=10000))
            assert resp.responses[0].error_code == 0
            assert topic_error(c, gone) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert b.stop(timeout=60) == 0
        assert part.is_dir()  # out of reach while the dir was offline
        meta.rmdir()
        meta.write_bytes(meta_bytes)  # the disk is back
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            assert topic_error(c, gone) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert _until(lambda: _leader(c, keep)[0] == 0)
            with WireClient(client_of(c, keep)) as m:
                assert produce(m, keep, _batch(1)).error_code == 0
        assert not part.exists()
        [stray] = [p for p in second.iterdir() if p.name.startswith(f"{gone}-0.")]
        assert re.fullmatch(rf"{gone}-0\.[0-9a-f]{{32}}-stray", stray.name), stray.name
        assert (stray / "00000000000000000000.log").read_bytes() == segment
        text = b.log_text()
        assert (
            f"Found stray log dir {part}: the topicId " in text
            and "does not exist in the metadata image" in text
        )
        assert f"Log for partition {gone}-0 is marked as stray and renamed to {stray}" in text
        # the one ERROR line is the offline start's
        assert "Traceback" not in text and len(_errors(b)) == 1, text[-3000:]
        assert "deleted_topic_ids" not in json.loads((data / "kafkatool-cluster.json").read_text())
        # a later start keeps it aside; the name made again is a new, empty topic
        assert b.stop(timeout=60) == 0
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            assert topic_error(c, gone) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            create_topic(c, gone)
            with WireClient(client_of(c, gone)) as m:
                assert _until(lambda: produce(m, gone, _batch(7)).error_code == 0)
                records = fetch(m, gone, 0).responses[0].partitions[0].records
                [only] = batches_of(records)
                assert only.base_offset == 0 and b"k7" in bytes(records)
        assert b.stop(timeout=60) == 0
        assert stray.is_dir() and (stray / "00000000000000000000.log").read_bytes() == segment
    finally:
        b.kill()


def _old_log_of_a_topic_made_again(
    b: BrokerProcess, data: Path, second: Path, gone: str
) -> tuple[Path, bytes]:
    """``gone`` gets a record; its dir is taken away while the broker deletes the
    topic and makes it again (a new topic id, its log in one of the dirs), then put back in the
    dir that does not hold the new log.  Returns that dir and the old segment's bytes."""
    b.start(timeout=40)
    with WireClient(b.bootstrap) as c:
        create_topic(c, gone)
        assert _until(lambda: _leader(c, gone)[1] >= 0)
        with WireClient(_nodes(c)[_leader(c, gone)[1]]) as m:
            assert produce(m, gone, _batch(0)).error_code == 0
    assert b.stop(timeout=60) == 0
    [old] = [d / f"{gone}-0" for d in (data, second) if (d / f"{gone}-0").is_dir()]
    segment = (old / "00000000000000000000.log").read_bytes()
    away = data.parent / "away"
    shutil.move(old, away)
    b.start(timeout=40)
    with WireClient(b.bootstrap) as c:
        resp = c.request(20, 1, G.DeleteTopicsRequest(topic_names=[gone], timeout_ms=10000))
        assert resp.responses[0].error_code == 0
        create_topic(c, gone)
        assert _until(lambda: _leader(c, gone)[1] >= 0)
    assert b.stop(timeout=60) == 0
    home = data if (second / f"{gone}-0").is_dir() else second
    assert not (home / f"{gone}-0").exists()
    shutil.move(away, home / f"{gone}-0")
    return home / f"{gone}-0", segment


@pytest.mark.parametrize("processes", [1, 2])
def test_a_log_whose_topic_id_is_not_the_metadatas_is_a_stray(tmp_path, processes):
    """KRaft (LogManager.findStrayReplicas): a log whose partition.metadata names another topic
    id than the metadata's for its topic (the topic deleted and made again while the log was
    away) is a stray: set aside as ``<dir>.<uuid>-stray``, not served, not a duplicate of the
    new topic's log (on main: 'duplicate log directories', exit 2).  processes=2: the member's
    partition, set aside by the primary."""
    import re

    data, second = tmp_path / "data", tmp_path / "second"
    gone = _owned_by(1, "gone")
    extra = [f"log.dirs={data},{second}", f"kafkatool.processes={processes}", "num.partitions=1"]
    b = BrokerProcess(data, extra=extra)
    try:
        part, segment = _old_log_of_a_topic_made_again(b, data, second, gone)
        b.start(timeout=40)
        with WireClient(b.bootstrap) as c:
            assert _until(lambda: _leader(c, gone)[1] >= 0)
            with WireClient(_nodes(c)[_leader(c, gone)[1]]) as m:
                assert _until(lambda: produce(m, gone, _batch(7)).error_code == 0)
                [only] = batches_of(fetch(m, gone, 0).responses[0].partitions[0].records)
                assert only.base_offset == 0  # the new topic's log, not the old one's
        assert b.stop(timeout=60) == 0
        assert not part.exists()
        [stray] = [p for p in part.parent.iterdir() if p.name.startswith(f"{gone}-0.")]
        assert re.fullmatch(rf"{gone}-0\.[0-9a-f]{{32}}-stray", stray.name), stray.name
        assert (stray / "00000000000000000000.log").read_bytes() == segment
        text = b.log_text()
        assert f"Found stray log dir {part}: the topicId " in text, text[-3000:]
        assert f"Log for partition {gone}-0 is marked as stray and renamed to {stray}" in text
        assert "Traceback" not in text and not _errors(b), text[-3000:]
    finally:
        b.kill()


def test_a_member_stray_that_cannot_be_renamed_takes_its_dir_offline(can_mount, tmp_path):
    """processes=2: the primary sets aside the member's stray log, and the rename fails (the
    partition dir is a bind mount of itself in the broker's mount namespace: EBUSY, a real
    error of the kernel): the dir is offline from the start for both processes, as any load
    error there, with one ERROR line naming the partition and the dir; the broker runs (on
    main: exit 2)."""
    data, second = tmp_path / "data", tmp_path / "second"
    gone = _owned_by(1, "gone")
    extra = [f"log.dirs={data},{second}", "kafkatool.processes=2", "num.partitions=1"]
    part, _segment = _old_log_of_a_topic_made_again(BrokerProcess(data, extra=extra), data, second, gone)
    script = 'mount --bind "$0" "$0" && exec "$@"'
    b = BrokerProcess(data, extra=extra, prefix=["unshare", "-rm", "sh", "-c", script, str(part)])
    try:
        b.start(timeout=40)
        home = part.parent
        other = data if home == second else second
        with WireClient(b.bootstrap) as c:
            assert _until(
                lambda: _primary_dirs(c) == {str(other): 0, str(home): ErrorCode.KAFKA_STORAGE_ERROR}
            )
        text = b.log_text()
        errors = _errors(b)
        assert len(errors) == 1, errors
        assert f"Error while renaming dir for {gone}-0 in log dir {home}" in errors[0], errors
        assert "Device or resource busy" in errors[0], errors
        assert "Traceback" not in text
        assert b.stop(timeout=60) == 0, b.log_text()[-3000:]
        assert part.is_dir()  # nothing renamed
    finally:
        b.kill()
