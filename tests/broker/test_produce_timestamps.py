"""KIP-937's produce timestamp validation on a `kafkatool serve` process, as Kafka 3.7 answers it:
a CreateTime topic's message.timestamp.before/after.max.ms (and the deprecated difference), topic
overrides and the broker's dynamic default, INVALID_TIMESTAMP (32) with one record error per
offending record, and nothing of the partition appended."""

from __future__ import annotations

import time

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_admin import describe
from tests.broker.test_broker_configs import BROKER, DELETE, SET, inc, syns
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient

HOUR = 3_600_000
AFTER, BEFORE = "message.timestamp.after.max.ms", "message.timestamp.before.max.ms"
TOPIC_CONFIG, DYNAMIC_DEFAULT, DEFAULT = 1, 3, 5


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(*stamps: int, codec: int = compression.NONE) -> bytes:
    return R.build_record_batch([R.SimpleRecord(b"v", b"k", (), ts) for ts in stamps], codec=codec)


def records_in(c, topic: str) -> int:
    return sum(b.count for b in batches_of(fetch(c, topic, 0).responses[0].partitions[0].records))


@pytest.fixture(scope="module")
def c(broker):
    with WireClient(broker.bootstrap) as client:
        yield client


def test_after_max_refuses_a_future_record_with_its_batch_index(c):
    create_topic(c, "ts-after", configs={AFTER: "60000"})
    now = now_ms()
    r = produce(c, "ts-after", batch(now, now + HOUR, now))
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP and r.base_offset == -1
    assert r.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in r.record_errors] == [1]
    msg = r.record_errors[0].batch_index_error_message
    assert msg.startswith(f"Timestamp {now + HOUR} of message with offset 1 is out of range.")
    assert records_in(c, "ts-after") == 0  # nothing of the partition appended
    r = produce(c, "ts-after", batch(now - 10 * HOUR, now, now + 1000))
    assert (r.error_code, r.base_offset) == (0, 0)
    assert records_in(c, "ts-after") == 3


def test_before_max_refuses_old_records_compressed_too(c):
    create_topic(c, "ts-before", configs={BEFORE: str(HOUR)})
    now = now_ms()
    for codec in (compression.NONE, compression.GZIP, compression.ZSTD):
        r = produce(c, "ts-before", batch(now, now - 2 * HOUR, now - 3 * HOUR, codec=codec))
        assert r.error_code == ErrorCode.INVALID_TIMESTAMP, codec
        assert [e.batch_index for e in r.record_errors] == [1, 2]
        assert produce(c, "ts-before", batch(now, now - 60_000, now + 10 * HOUR, codec=codec)).error_code == 0
    assert records_in(c, "ts-before") == 9


def test_log_append_time_topic_is_not_checked(c):
    cfg = {"message.timestamp.type": "LogAppendTime", AFTER: "0", BEFORE: "0"}
    create_topic(c, "ts-lat", configs=cfg)
    r = produce(c, "ts-lat", batch(1000, now_ms() + 10 * HOUR))
    assert r.error_code == 0 and r.log_append_time_ms > 0


def test_the_deprecated_difference_still_applies(c):
    create_topic(c, "ts-diff", configs={"message.timestamp.difference.max.ms": "60000"})
    now = now_ms()
    assert produce(c, "ts-diff", batch(now - HOUR)).error_code == ErrorCode.INVALID_TIMESTAMP
    assert produce(c, "ts-diff", batch(now + HOUR)).error_code == ErrorCode.INVALID_TIMESTAMP
    assert produce(c, "ts-diff", batch(now)).error_code == 0


def test_create_topics_takes_the_configs_and_describe_configs_lists_them(c):
    create_topic(c, "ts-bad", configs={AFTER: "-1"}, error=ErrorCode.INVALID_CONFIG)
    create_topic(c, "ts-desc", configs={AFTER: "60000"})
    res, cfg = describe(c, "ts-desc")
    assert res.error_code == 0
    a = cfg[AFTER]
    assert (a.value, a.config_source, a.config_type) == ("60000", TOPIC_CONFIG, 5)
    b = cfg[BEFORE]
    assert (b.value, b.config_source) == (str(2**63 - 1), DEFAULT)
    assert syns(b) == [("log.message.timestamp.before.max.ms", str(2**63 - 1), DEFAULT)]
    assert cfg["message.timestamp.difference.max.ms"].value == str(2**63 - 1)


def test_a_dynamic_broker_default_applies_to_topics_without_an_override(c):
    create_topic(c, "ts-dyn", configs={})
    create_topic(c, "ts-dyn-own", configs={AFTER: str(10 * HOUR)})
    name = "log.message.timestamp.after.max.ms"
    # KafkaConfig's atLeast(0), refused as DynamicBrokerConfig refuses a value (KAFKA-13609)
    assert inc(c, BROKER, "", (name, SET, "-5")) == (
        ErrorCode.INVALID_REQUEST,
        f"Invalid value -5 for configuration {name}: Value must be at least 0",
    )
    assert inc(c, BROKER, "", (name, SET, "60000")) == (0, None)
    try:
        now = now_ms()
        r = produce(c, "ts-dyn", batch(now, now + HOUR))
        assert r.error_code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in r.record_errors] == [1]
        assert produce(c, "ts-dyn-own", batch(now + HOUR)).error_code == 0  # its own override wins
        _, cfg = describe(c, "ts-dyn", keys=[AFTER])
        assert (cfg[AFTER].value, cfg[AFTER].config_source) == ("60000", DYNAMIC_DEFAULT)
        _, brk = describe(c, "", keys=[name], rtype=BROKER)
        assert (brk[name].value, brk[name].config_source, brk[name].read_only) == (
            "60000",
            DYNAMIC_DEFAULT,
            False,
        )
    finally:
        assert inc(c, BROKER, "", (name, DELETE, None)) == (0, None)
    assert produce(c, "ts-dyn", batch(now_ms() + HOUR)).error_code == 0


def test_a_confluent_kafka_producer_gets_invalid_timestamp(broker, c):
    from confluent_kafka import KafkaError, Producer

    create_topic(c, "ts-client", configs={AFTER: "60000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "retries": 0})
    got: list = []
    for stamp in (now_ms() + HOUR, now_ms()):
        p.produce("ts-client", value=b"v", timestamp=stamp, on_delivery=lambda err, _m: got.append(err))
        assert p.flush(20) == 0
    assert got[0] is not None and got[0].code() == KafkaError.INVALID_TIMESTAMP, got
    assert got[1] is None, got


def test_a_keyless_record_of_a_compacted_topic_is_invalid_record_with_its_record_error(c):
    """The other RecordValidationError: LogValidator's compacted-topic key rule is INVALID_RECORD
    (RecordValidationError.error_name, the one mapping), its message and one record error."""
    create_topic(c, "ts-compact", configs={"cleanup.policy": "compact"})
    data = R.build_record_batch(
        [R.SimpleRecord(b"v", b"k", (), now_ms()), R.SimpleRecord(b"v", None, (), now_ms())]
    )
    r = produce(c, "ts-compact", data)
    why = "Compacted topic cannot accept message without key in topic partition ts-compact-0"
    assert (r.error_code, r.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(1, why)]
    assert r.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{why}')]"
    )
    assert records_in(c, "ts-compact") == 0
