"""The order of the produce path's checks, as Kafka's (ReplicaManager -> Partition ->
UnifiedLog.append -> LogValidator): size, then CRC, then the batch's own fields, then the
segment size, and only then producer state (duplicates and sequences)."""

from __future__ import annotations

from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_protocol import batch, create_topic, produce
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
