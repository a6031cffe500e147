"""Fetch of a partition whose log read fails with an I/O error, on a real Broker (storage in
temp dirs, no sockets): KAFKA_STORAGE_ERROR (LocalLog.read's KafkaStorageException), which
Fetch v0-5 gets as NOT_LEADER_OR_FOLLOWER (KafkaApis.maybeDownConvertStorageError), and the
read's log dir goes offline (LogDirFailureChannel): the partition keeps answering so, the other
dir's partitions are served.  An EIO cannot be had from a real disk here (that needs a failing
device), so the segment read is made to raise it; a full disk (ENOSPC) is tested for real in
tests/broker/test_log_dir_failure.py.  Damaged data on the way (a real index entry changed to
point into a batch) is not the dir's failure: Fetch and ListOffsets by time answer that
partition CORRUPT_MESSAGE, as Kafka's ReplicaManager does."""

from __future__ import annotations

import errno
import struct

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.server import Broker
from kafkatool.formats import records as R
from kafkatool.log.segment import Segment
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request, parse_response
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.broker.test_protocol import fetch_req
from tests.broker.wire import DispatchConn


@pytest.fixture
def broker(tmp_path, monkeypatch):
    """Topics "good" (first log dir) and "bad" (second; its log's reads fail with EIO), one
    record batch each."""
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    b = Broker(BrokerConfig.load(None, [f"log.dirs={dirs}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    b.open_storage()
    try:
        for name in ("good", "bad"):  # each new partition goes to the dir with the fewest
            b.create_topic(name, 1, {})
            lg = b.get_log(name, 0)
            lg.append_as_leader(R.build_record_batch([R.SimpleRecord(b"v", b"k", [], 1)]), 0)
            lg.update_high_watermark(lg.log_end_offset)
        bad = b.get_log("bad", 0).segments
        real = Segment.translate_offset

        def failing(seg, *args, **kw):
            if any(seg is s for s in bad):
                raise OSError(errno.EIO, "Input/output error")
            return real(seg, *args, **kw)

        monkeypatch.setattr(Segment, "translate_offset", failing)
        yield b
    finally:
        b.close_storage()


def fetch(broker, version: int) -> dict:
    req = fetch_req(("bad", "good"), 0, max_bytes=1 << 20)
    frame = encode_request(1, version, 7, "test", req)[4:]
    out = broker.router.dispatch(DispatchConn(), bytearray(frame))
    resp = parse_response(bytes(out)[4:], 1, version)[1]
    return {t.topic: t.partitions[0] for t in resp.responses}


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5, 6, 9, 12])
def test_a_storage_error_is_not_leader_or_follower_up_to_fetch_v5(broker, version):
    got = fetch(broker, version)
    bad, good = got["bad"], got["good"]
    want = ErrorCode.NOT_LEADER_OR_FOLLOWER if version <= 5 else ErrorCode.KAFKA_STORAGE_ERROR
    assert (bad.error_code, bad.high_watermark, bad.records or b"") == (want, -1, b""), version
    # the other partition of the fetch is read as ever
    assert good.error_code == 0 and good.high_watermark == 1
    assert [r.value for e in R.iter_batches(bytes(good.records)) for r in e.records()] == [b"v"]


def test_the_failed_read_takes_its_log_dir_offline(broker, tmp_path):
    bad_dir = broker.manager.log_dir_of("bad", 0)
    assert bad_dir == tmp_path / "b"
    fetch(broker, 12)
    assert list(broker.manager.offline_dirs) == [bad_dir]
    assert broker.get_log("bad", 0) is None
    # from now on the partition answers KAFKA_STORAGE_ERROR without touching the disk
    # (v0-5: NOT_LEADER_OR_FOLLOWER), and the other dir serves as ever
    for version in (4, 12):
        got = fetch(broker, version)
        want = ErrorCode.NOT_LEADER_OR_FOLLOWER if version <= 5 else ErrorCode.KAFKA_STORAGE_ERROR
        assert got["bad"].error_code == want
        assert got["good"].error_code == 0 and got["good"].high_watermark == 1


@pytest.fixture
def damaged(tmp_path):
    """Topics "good" and "bad", four batches of three records of 200 zero bytes (batch i's
    timestamps 1000 x (i + 1)) in an inactive segment, one more in the active one; the second
    offset-index entry of "bad"'s inactive segment then points 12 bytes into its batch's first
    record value (zeros, read as a batch of length 0), as bytes changed on the disk under a
    clean-shutdown marker (which start-up trusts, as Kafka's does) would. Yields (broker, the
    entry's offset, the byte it points at, the segment)."""
    b = Broker(
        BrokerConfig.load(
            None,
            [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0", "log.index.interval.bytes=100"],
        )
    )
    b.open_storage()
    try:
        for name in ("good", "bad"):
            b.create_topic(name, 1, {})
            lg = b.get_log(name, 0)
            for i in range(4):
                ts = 1000 * (i + 1)
                lg.append_as_leader(R.build_record_batch([R.SimpleRecord(bytes(200), b"k", [], ts)] * 3), 0)
            lg.roll()
            lg.append_as_leader(R.build_record_batch([R.SimpleRecord(b"v", b"k", [], 9000)]), 0)
            lg.update_high_watermark(lg.log_end_offset)
        seg = b.get_log("bad", 0).segments[0]
        raw = bytearray(seg.offset_index.path.read_bytes())
        offset, pos = struct.unpack_from(">ii", raw, 8)
        struct.pack_into(">ii", raw, 8, offset, pos + R.RECORD_BATCH_OVERHEAD + 12)
        seg.offset_index.path.write_bytes(bytes(raw))
        yield b, offset, pos + R.RECORD_BATCH_OVERHEAD + 12, seg
    finally:
        b.close_storage()


def ask(b, conn, api_key: int, version: int, req):
    out = b.router.dispatch(conn, bytearray(encode_request(api_key, version, 7, "test", req)[4:]))
    return parse_response(bytes(out)[4:], api_key, version)[1]


def test_damaged_data_on_the_way_answers_corrupt_message(damaged, caplog):
    """The fetch of a partition whose read meets damaged data fails with
    CorruptRecordException in Kafka's ReplicaManager.readFromLocalLog, which logs it and
    answers the partition CORRUPT_MESSAGE; the other partitions of the fetch are read as ever
    and the connection stays. It used to fail the whole request, with a traceback in the log
    and the connection closed (found by a corruption fuzz of whole log dirs under serve)."""
    b, offset, at, seg = damaged
    conn = DispatchConn()
    for version in (4, 12):
        got = {
            t.topic: t.partitions[0]
            for t in ask(b, conn, 1, version, fetch_req(("bad", "good"), offset)).responses
        }
        assert (got["bad"].error_code, got["bad"].records or b"") == (ErrorCode.CORRUPT_MESSAGE, b"")
        assert got["good"].error_code == 0 and got["good"].records
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    want = (
        f"Error processing fetch from offset {offset} on partition bad-0: entry size 0 is smaller than "
        f"the minimum 14 in {seg.log_path} (at byte {at})"
    )
    assert errors == [want] * 2
    assert not any(r.exc_info for r in caplog.records)
    assert b.metrics.topics.topic("bad").failed_fetch == 2


def test_damaged_data_answers_list_offsets_by_time_corrupt_message(damaged, caplog):
    """ListOffsets by timestamp reading through the damage: KafkaApis' "Error while responding
    to offset request" and the partition's Errors.forException (CORRUPT_MESSAGE); the other
    partition is answered."""
    b, offset, at, seg = damaged
    req = G.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsTopic(name=n, partitions=[ListOffsetsPartition(partition_index=0, timestamp=3000)])
            for n in ("bad", "good")
        ],
    )
    got = {t.name: t.partitions[0] for t in ask(b, DispatchConn(), 2, 7, req).topics}
    assert got["bad"].error_code == ErrorCode.CORRUPT_MESSAGE
    assert (got["good"].error_code, got["good"].offset, got["good"].timestamp) == (0, 6, 3000)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        f"Error while responding to offset request for bad-0: entry size 0 is smaller than the minimum 14 "
        f"in {seg.log_path} (at byte {at})"
    ]
    assert not any(r.exc_info for r in caplog.records)
