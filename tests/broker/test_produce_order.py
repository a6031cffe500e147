"""The order of the produce path's checks, as Kafka's (ReplicaManager -> Partition ->
UnifiedLog.append -> LogValidator): size, then CRC, then the batch's own fields, then the
segment size, and only then producer state (duplicates and sequences)."""

from __future__ import annotations

import json

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.test_protocol import batch, batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient


def _pid(c: WireClient) -> tuple[int, int]:
    resp = c.request(
        22,
        4,
        G.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
    )
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def _corrupt(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[-3] ^= 0xFF  # a byte of the last record: the CRC no longer matches
    return bytes(bad)


def test_a_corrupt_duplicate_is_corrupt_message_not_a_silent_success(broker):
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-dup")
        pid, epoch = _pid(c)
        good = batch(3, pid=pid, epoch=epoch, seq=0)
        first = produce(c, "order-dup", good)
        assert first.error_code == 0 and first.base_offset == 0
        # the same batch again: a duplicate, answered with the first offset, nothing written
        again = produce(c, "order-dup", good)
        assert again.error_code == 0 and again.base_offset == 0
        # the same duplicate with a broken CRC: Kafka validates before the duplicate check
        bad = produce(c, "order-dup", _corrupt(good))
        assert bad.error_code == ErrorCode.CORRUPT_MESSAGE, bad
        # the next in-sequence batch still goes in: the corrupt one changed no state
        nxt = produce(c, "order-dup", batch(2, pid=pid, epoch=epoch, seq=3))
        assert nxt.error_code == 0 and nxt.base_offset == 3


def test_larger_than_segment_bytes_is_record_list_too_large(broker):
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-seg", configs={"segment.bytes": "14", "max.message.bytes": "1000000"})
        resp = produce(c, "order-seg", batch(5, size=200))
        assert resp.error_code == ErrorCode.RECORD_LIST_TOO_LARGE, resp


def test_the_segment_size_comes_after_the_record_rules_and_before_producer_state(broker):
    """UnifiedLog.append: LogValidator's record rules (a compacted topic's keys), then the
    append's size against segment.bytes (RecordBatchTooLargeException), then producer state."""
    with WireClient(broker.bootstrap) as c:
        create_topic(
            c,
            "order-seg-key",
            configs={"segment.bytes": "14", "max.message.bytes": "1000000", "cleanup.policy": "compact"},
        )
        keyless = produce(c, "order-seg-key", batch(5, size=200, key=None))
        assert keyless.error_code == ErrorCode.INVALID_RECORD, keyless
        too_large = produce(c, "order-seg-key", batch(5, size=200))
        assert too_large.error_code == ErrorCode.RECORD_LIST_TOO_LARGE, too_large
        # no message, as ReplicaManager answers a RecordBatchTooLargeException
        # (hasCustomErrorMessage = false); the broker's debug line says it
        assert too_large.error_message is None


def test_max_message_bytes_comes_before_the_crc(broker):
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-size", configs={"max.message.bytes": "100"})
        resp = produce(c, "order-size", _corrupt(batch(5, size=200)))
        assert resp.error_code == ErrorCode.MESSAGE_TOO_LARGE, resp


def test_producer_state_errors_come_from_the_log(broker):
    """Sequences and epochs are the log's producer state (no broker-side copy): a gap is
    OUT_OF_ORDER_SEQUENCE_NUMBER, an epoch older than one the log has seen is
    INVALID_PRODUCER_EPOCH, and neither appends anything."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-seq")
        pid, epoch = _pid(c)
        assert produce(c, "order-seq", batch(1, pid=pid, epoch=epoch, seq=0)).base_offset == 0
        gap = produce(c, "order-seq", batch(1, pid=pid, epoch=epoch, seq=7))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert produce(c, "order-seq", batch(1, pid=pid, epoch=epoch + 1, seq=0)).base_offset == 1
        old = produce(c, "order-seq", batch(1, pid=pid, epoch=epoch, seq=1))
        assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH, old
        assert produce(c, "order-seq", batch(1, pid=pid, epoch=epoch + 1, seq=1)).base_offset == 2


def _resealed(data: bytes, at: int, value: bytes) -> bytes:
    """``data`` with ``value`` written at byte ``at`` of its header and a CRC that matches."""
    out = bytearray(data)
    out[at : at + len(value)] = value
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def _records(c: WireClient, topic: str) -> list:
    return batches_of(fetch(c, topic, 0).responses[0].partitions[0].records)


def test_unknown_compression_bits_answer_kafkas_unknown_server_error(broker):
    """CompressionType.forId's IllegalArgumentException: from v7 in the log's
    analyzeAndValidateRecords, which ReplicaManager's catch-all answers UNKNOWN_SERVER_ERROR
    without a message (not CORRUPT_MESSAGE); below v7 ProduceRequest.validateRecords throws it
    out of KafkaApis.handleProduceRequest, and every partition of the request gets it, the
    valid ones too, nothing appended."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-codec")
        create_topic(c, "order-codec-ok")
        bad = _resealed(batch(2), 21, (6).to_bytes(2, "big"))
        r = produce(c, "order-codec", bad)
        assert (r.error_code, r.error_message, r.base_offset) == (ErrorCode.UNKNOWN_SERVER_ERROR, None, -1)
        req = G.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name="order-codec-ok", partition_data=[PartitionProduceData(index=0, records=batch(1))]
                ),
                TopicProduceData(
                    name="order-codec", partition_data=[PartitionProduceData(index=0, records=bad)]
                ),
            ],
        )
        resp = c.request(0, 5, req)
        got = [
            (t.name, p.error_code, p.error_message, p.base_offset)
            for t in resp.responses
            for p in t.partition_responses
        ]
        assert got == [
            ("order-codec-ok", ErrorCode.UNKNOWN_SERVER_ERROR, None, -1),
            ("order-codec", ErrorCode.UNKNOWN_SERVER_ERROR, None, -1),
        ]
        assert _records(c, "order-codec-ok") == [] and _records(c, "order-codec") == []
        # at v7 and later only the partition itself
        resp = c.request(0, 7, req)
        got = [(t.name, p.error_code) for t in resp.responses for p in t.partition_responses]
        assert got == [("order-codec-ok", 0), ("order-codec", ErrorCode.UNKNOWN_SERVER_ERROR)]


def test_a_negative_timestamp_in_a_rebuilt_append_is_unknown_server_error(broker):
    """MemoryRecordsBuilder's IllegalArgumentException ("Invalid negative timestamp") when
    LogValidator rebuilds a legacy set: ReplicaManager's catch-all, no message."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-neg-ts")
        ms = R.build_legacy_message_set([R.SimpleRecord(b"v", b"k", (), -5)], magic=1)
        r = produce(c, "order-neg-ts", ms, version=2)
        assert (r.error_code, r.error_message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None), r
        assert _records(c, "order-neg-ts") == []


def test_a_count_beyond_the_offset_range_is_invalid_record(broker):
    """Kafka's isValid checks size and CRC; LogValidator.validateBatch answers the count
    (InvalidRecordException: INVALID_RECORD, no message in the answer)."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-count")
        lying = _resealed(batch(3), 23, (1).to_bytes(4, "big"))  # 3 records, lastOffsetDelta 1
        r = produce(c, "order-count", lying)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_RECORD, None), r
        assert _records(c, "order-count") == []


@pytest.mark.parametrize(("magic", "version"), [(0, 1), (1, 2)])
@pytest.mark.parametrize(("source", "forced"), [(0, None), (0, "snappy"), (1, None), (1, "lz4")])
def test_a_legacy_produce_is_one_v2_batch_as_kafka_writes_it(broker, magic, version, source, forced):
    """Produce v0-2 carrying magic 0/1 messages: LogValidator writes one v2 batch for the whole
    set after the log end offset (uncompressed messages are many top-level entries, a compressed
    set one wrapper), with the source's codec unless compression.type names one; v1 timestamps
    kept, v0 none (-1); no producer id."""
    topic = f"order-legacy-{magic}-{source}-{forced}"
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, configs={"compression.type": forced} if forced else None)
        assert produce(c, topic, batch(2)).base_offset == 0
        stamps = [1_700_000_000_005, 1_700_000_000_001, 1_700_000_000_009]
        recs = [R.SimpleRecord(b"v%d" % i, b"k%d" % i, (), ts) for i, ts in enumerate(stamps)]
        ms = R.build_legacy_message_set(recs, magic=magic, codec=source)
        r = produce(c, topic, ms, version=version)
        assert (r.error_code, r.base_offset) == (0, 2)
        _, b = _records(c, topic)
        want_ts = stamps if magic == 1 else [R.NO_TIMESTAMP] * 3
        codec = {None: source, "snappy": 2, "lz4": 3}[forced]
        assert (b.magic, b.codec, b.base_offset, b.last_offset_delta, b.records_count) == (2, codec, 2, 2, 3)
        assert (b.base_timestamp, b.max_timestamp, b.timestamp_type) == (
            want_ts[0],
            max(want_ts),
            R.CREATE_TIME,
        )
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records()] == [
            (2 + i, ts, b"k%d" % i, b"v%d" % i, []) for i, ts in enumerate(want_ts)
        ]


def test_a_real_clients_legacy_set_under_a_forced_codec(broker, client_batches_dir):
    """kcat's magic 1 set of 50 uncompressed messages (Produce v2) on a gzip topic: one gzip
    batch of 50 records, the client's timestamps and keys in order."""
    meta = json.loads((client_batches_dir / "kcat-v1-none.json").read_text())
    (pr,) = meta["produce_requests"]
    data = (client_batches_dir / meta["file"]).read_bytes()[
        pr["file_offset"] : pr["file_offset"] + pr["length"]
    ]
    entries = list(R.iter_batches(data))
    assert len(entries) == 50 and {b.magic for b in entries} == {1}
    sent = [r for b in entries for r in b.records()]
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "order-kcat", configs={"compression.type": "gzip"})
        r = produce(c, "order-kcat", data, version=pr["produce_version"])
        assert (r.error_code, r.base_offset) == (0, 0)
        (b,) = _records(c, "order-kcat")
        assert (b.magic, b.codec, b.last_offset_delta) == (2, compression.GZIP, 49)
        assert [(r.offset, r.key, r.timestamp) for r in b.records()] == [
            (i, m.key, m.timestamp) for i, m in enumerate(sent)
        ]
        assert b.max_timestamp == max(m.timestamp for m in sent)
