"""LogValidator's record rules on a leader's CLIENT append (log/validator.py through
Log.append_as_leader): KIP-937's timestamp limits, the deprecated difference, keys of a compacted
topic, and a client's LogAppendTime; a batch is read only when it might break a rule."""

from __future__ import annotations

import struct

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import CorruptRecordError, InvalidRecordError
from kafkatool.log.config import LONG_MAX, LogConfig
from kafkatool.log.log import (
    ORIGIN_COORDINATOR,
    IllegalArgumentError,
    Log,
    RecordTooLargeError,
    UnknownCodecError,
)
from kafkatool.log.validator import RecordValidationError

NOW = 1_700_000_000_000
HOUR = 3_600_000


def make_log(tmp_path, **cfg) -> Log:
    return Log(tmp_path / "t-0", LogConfig(**cfg), clock=lambda: NOW)


def batch(*stamps, key=b"k", codec=compression.NONE, **kw) -> bytes:
    return R.build_record_batch([R.SimpleRecord(b"v", key, (), ts) for ts in stamps], codec=codec, **kw)


def refused(lg: Log, data) -> RecordValidationError:
    end = lg.log_end_offset
    with pytest.raises(RecordValidationError) as info:
        lg.append_as_leader(bytearray(data), 0)
    assert lg.log_end_offset == end  # nothing of the append was written
    return info.value


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.LZ4, compression.ZSTD])
def test_after_max_refuses_a_future_record_and_names_its_index(tmp_path, codec):
    lg = make_log(tmp_path, message_timestamp_after_max_ms=60_000)
    err = refused(lg, batch(NOW, NOW + HOUR, NOW + 1000, NOW + 2 * HOUR, codec=codec))
    assert err.invalid_timestamp
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in err.record_errors] == [1, 3]
    assert err.record_errors[0][1] == (
        f"Timestamp {NOW + HOUR} of message with offset 1 is out of range. The timestamp should be "
        f"within [{NOW - LONG_MAX}, {NOW + 60_000}]"
    )
    # inside the window (and up to its edge): appended
    assert (
        lg.append_as_leader(bytearray(batch(NOW - 10 * HOUR, NOW + 60_000, codec=codec)), 0).last_offset == 1
    )


def test_before_max_refuses_old_records_even_behind_a_recent_first_timestamp(tmp_path):
    """A v2 timestamp delta is signed: baseTimestamp is the first record's, not the least."""
    lg = make_log(tmp_path, message_timestamp_before_max_ms=HOUR)
    err = refused(lg, batch(NOW, NOW - 2 * HOUR, codec=compression.SNAPPY))
    assert [i for i, _ in err.record_errors] == [1]
    assert err.record_errors[0][1].endswith(f"within [{NOW - HOUR}, {NOW + LONG_MAX - 2**64}]")
    assert lg.append_as_leader(bytearray(batch(NOW - HOUR, NOW + 10 * HOUR)), 0).first_offset == 0


def test_no_timestamp_records_are_not_checked(tmp_path):
    lg = make_log(tmp_path, message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    assert lg.append_as_leader(bytearray(batch(R.NO_TIMESTAMP, NOW)), 0).last_offset == 1
    assert [i for i, _ in refused(lg, batch(R.NO_TIMESTAMP, NOW - 1)).record_errors] == [1]


def test_the_deprecated_difference_applies_where_before_or_after_is_at_its_default(tmp_path):
    cfg = LogConfig(message_timestamp_difference_max_ms=1000, message_timestamp_after_max_ms=HOUR)
    assert (cfg.timestamp_before_max_ms, cfg.timestamp_after_max_ms) == (1000, HOUR)
    lg = Log(tmp_path / "t-0", cfg, clock=lambda: NOW)
    assert [i for i, _ in refused(lg, batch(NOW + 30 * 60_000, NOW - 2000)).record_errors] == [1]
    assert lg.append_as_leader(bytearray(batch(NOW + 30 * 60_000, NOW - 1000)), 0).first_offset == 0


def test_log_append_time_topics_are_not_checked(tmp_path):
    lg = make_log(
        tmp_path,
        message_timestamp_type="LogAppendTime",
        message_timestamp_before_max_ms=0,
        message_timestamp_after_max_ms=0,
    )
    info = lg.append_as_leader(bytearray(batch(1000, NOW + 10 * HOUR)), 0)
    assert info.log_append_time == NOW and info.last_offset == 1


def test_a_client_may_not_set_log_append_time(tmp_path):
    data = bytearray(batch(NOW, NOW))
    R.set_log_append_time(data, 0, NOW)  # attributes and CRC, as a broker stamps it
    err = refused(make_log(tmp_path, message_timestamp_type="LogAppendTime"), data)
    assert err.invalid_timestamp and [i for i, _ in err.record_errors] == [0, 1]
    assert err.record_errors[0][1] == (
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=1 bytes, "
        "value=1 bytes). Producer should not set timestamp type to LogAppendTime."
    )
    # on a CreateTime topic its records carry the batch's timestamp, checked as any other
    assert make_log(tmp_path / "c").append_as_leader(data, 0).first_offset == 0


def test_compacted_keys_and_timestamps_are_one_rule(tmp_path):
    """validateRecord: a record's key error first, else its timestamp; any timestamp error makes
    the partition's error INVALID_TIMESTAMP, with every record error."""
    lg = make_log(tmp_path, cleanup_policy=("compact",), message_timestamp_after_max_ms=0)
    err = refused(lg, batch(NOW, key=None))
    assert not err.invalid_timestamp and err.record_errors == [
        (0, "Compacted topic cannot accept message without key in topic partition t-0")
    ]
    assert err.message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing "
        "the first three errors at most: [RecordError(batchIndex=0, message='Compacted topic cannot "
        "accept message without key in topic partition t-0')]"
    )
    err = refused(
        lg,
        R.build_record_batch(
            [R.SimpleRecord(b"v", None, (), NOW + 5), R.SimpleRecord(b"v", b"k", (), NOW + 5)]
        ),
    )
    assert err.invalid_timestamp and [i for i, _ in err.record_errors] == [0, 1]
    assert err.record_errors[0][1].startswith("Compacted topic")


def test_legacy_message_sets_count_records_per_batch(tmp_path):
    """Kafka validates a v0/v1 message set batch by batch (each uncompressed message is one):
    the first failing batch is refused, its index counted from 0."""
    lg = make_log(tmp_path, message_timestamp_after_max_ms=0)
    data = R.build_legacy_message_set(
        [R.SimpleRecord(b"a", b"k", (), NOW), R.SimpleRecord(b"b", b"k", (), NOW + 1)], magic=1
    )
    assert [i for i, _ in refused(lg, data).record_errors] == [0]


def corrupt_record_batch(ts: int) -> bytearray:
    """A batch whose CRC is right but whose record area cannot be read (a record length past the
    batch): the engine passes such bytes along, so it shows when a record is read."""
    data = bytearray(batch(ts, ts))
    data[R.RECORD_BATCH_OVERHEAD] = 0x7E  # zig-zag 63: longer than the batch holds
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    return data


def test_records_are_read_only_when_a_batch_might_break_a_limit(tmp_path):
    data = corrupt_record_batch(NOW)
    assert R.RecordBatch(data).is_valid()
    # both limits at their default: nothing read
    assert make_log(tmp_path / "a").append_as_leader(bytearray(data), 0).first_offset == 0
    # either limit set: the records are read (the header bounds neither end of their range); a
    # record that does not decode is DefaultRecord's InvalidRecordException (INVALID_RECORD)
    for name, limit in (("b", "after"), ("c", "before")):
        lg = make_log(tmp_path / name, **{f"message_timestamp_{limit}_max_ms": HOUR})
        with pytest.raises(InvalidRecordError):
            lg.append_as_leader(bytearray(data), 0)


def forged_max_timestamp(data: bytes, max_ts: int) -> bytearray:
    """``data`` with a maxTimestamp the records do not say (the CRC made right again)."""
    out = bytearray(data)
    out[35:43] = max_ts.to_bytes(8, "big", signed=True)
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return out


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_the_after_limit_reads_every_record_not_the_headers_max_timestamp(tmp_path, codec):
    """validateTimestamp runs per record: a header claiming a maxTimestamp inside the limit does
    not let a later record through."""
    lg = make_log(tmp_path, message_timestamp_after_max_ms=60_000)
    data = forged_max_timestamp(batch(NOW, NOW + HOUR, codec=codec), NOW)
    assert R.RecordBatch(data).is_valid() and R.RecordBatch(data).max_timestamp == NOW
    err = refused(lg, data)
    assert err.invalid_timestamp and [i for i, _ in err.record_errors] == [1]


def test_a_batch_whose_records_were_read_gets_their_max_timestamp(tmp_path):
    """assignOffsetsNonCompressed / the compressed in-place branch: setMaxTimestamp(CREATE_TIME,
    the records' greatest) on a CreateTime topic."""
    lg = make_log(tmp_path, message_timestamp_before_max_ms=HOUR)
    info = lg.append_as_leader(forged_max_timestamp(batch(NOW - 5, NOW - 9), NOW - 100), 0)
    (stored,) = lg.batches(0)
    assert stored.max_timestamp == info.max_timestamp == NOW - 5 and stored.is_valid()


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4])
@pytest.mark.parametrize("limit", [LONG_MAX, HOUR])
def test_a_clients_log_append_time_becomes_create_time_on_a_create_time_topic(tmp_path, codec, limit):
    """validateTimestamp lets a LogAppendTime batch with a timestamp through on a CreateTime topic
    (its records read as maxTimestamp, checked as any other); setMaxTimestamp(CREATE_TIME, ...)
    then stores it as CreateTime with that maxTimestamp, so its records read as base + delta."""
    data = bytearray(batch(NOW - 30, NOW - 10, codec=codec))
    R.set_log_append_time(data, 0, NOW - 20)
    lg = make_log(tmp_path, message_timestamp_before_max_ms=limit)
    info = lg.append_as_leader(data, 0)
    assert info.log_append_time is None and info.max_timestamp == NOW - 20
    (stored,) = lg.batches(0)
    assert stored.timestamp_type == R.CREATE_TIME and stored.max_timestamp == NOW - 20
    assert stored.is_valid()
    assert [r.timestamp for r in stored.records()] == [NOW - 30, NOW - 10]
    # without a timestamp it is refused (the LogAppendTime branch of validateTimestamp)
    data = bytearray(batch(NOW))
    R.set_log_append_time(data, 0, R.NO_TIMESTAMP)
    err = refused(make_log(tmp_path / "none", message_timestamp_before_max_ms=limit), data)
    assert err.invalid_timestamp and err.record_errors[0][1].endswith(
        "Producer should not set timestamp type to LogAppendTime."
    )


def test_coordinator_appends_meet_the_same_record_rules(tmp_path):
    """UnifiedLog.append runs LogValidator for AppendOrigin.COORDINATOR too: its record rules
    are the client's (the client-only batch checks are the produce handler's)."""
    lg = make_log(tmp_path, message_timestamp_before_max_ms=60_000)
    with pytest.raises(RecordValidationError) as info:
        lg.append_as_leader(bytearray(batch(NOW - HOUR)), 0, origin=ORIGIN_COORDINATOR)
    assert info.value.error_name == "INVALID_TIMESTAMP" and lg.log_end_offset == 0
    assert lg.append_as_leader(bytearray(batch(NOW - 1000)), 0, origin=ORIGIN_COORDINATOR).first_offset == 0
    compacted = make_log(tmp_path / "c", cleanup_policy=("compact",))
    with pytest.raises(RecordValidationError) as info:
        compacted.append_as_leader(bytearray(batch(NOW, key=None)), 0, origin=ORIGIN_COORDINATOR)
    assert info.value.error_name == "INVALID_RECORD"
    # a transaction marker has a key (its control record's), so a compacted topic takes it
    marker = R.build_control_batch(
        R.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=NOW
    )
    assert compacted.append_as_leader(bytearray(marker), 0, origin=ORIGIN_COORDINATOR).first_offset == 0


def test_a_broker_difference_is_the_topic_default_of_before_and_after():
    """KafkaConfig.logMessageTimestampBeforeMaxMs / AfterMaxMs: the broker's before/after while
    at Long.MAX_VALUE, else log.message.timestamp.difference.max.ms (extractLogConfigMap)."""
    from kafkatool.log import topic_settings as ts

    broker = {"log.message.timestamp.difference.max.ms": "5000", "log.message.timestamp.after.max.ms": "9"}
    assert ts.broker_value("message.timestamp.before.max.ms", broker) == (
        "5000",
        "log.message.timestamp.difference.max.ms",
    )
    assert ts.broker_value("message.timestamp.after.max.ms", broker) == (
        "9",
        "log.message.timestamp.after.max.ms",
    )
    assert ts.broker_value("message.timestamp.before.max.ms", {}) == (str(LONG_MAX), None)
    cfg = ts.log_config_from(ts.topic_defaults(broker))
    assert (cfg.timestamp_before_max_ms, cfg.timestamp_after_max_ms) == (5000, 9)
    with pytest.raises(ts.SettingsError):
        ts.validate_topic_config("message.timestamp.after.max.ms", "-1")


def test_batch_rules_are_the_logs_and_client_only_where_kafka_says(tmp_path):
    """LogValidator.validateBatch runs in the log's append: a client may not write a control
    batch, a batch whose count disagrees with its offset range, or an idempotent batch without
    a sequence; a coordinator may write markers; every origin needs one magic for the whole
    append. UnifiedLog.analyzeAndValidateRecords: a client's v2 batch starts at offset 0."""
    lg = make_log(tmp_path)
    marker = R.build_control_batch(R.COMMIT, producer_id=4, producer_epoch=0)
    with pytest.raises(
        InvalidRecordError, match="^Clients are not allowed to write control records in topic"
    ):
        lg.append_as_leader(marker, 0)
    assert lg.append_as_leader(marker, 0, origin=ORIGIN_COORDINATOR).first_offset == 0
    lying = bytearray(batch(1_000, 1_001))
    lying[57:61] = (1).to_bytes(4, "big")  # records count 1, last offset delta 1
    lying[17:21] = crc32c(bytes(lying[21:])).to_bytes(4, "big")
    with pytest.raises(
        InvalidRecordError, match=r"^Inconsistent batch offset range \[0, 1\] and count of records 1"
    ):
        lg.append_as_leader(lying, 0)
    no_seq = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), 1_000)], producer_id=9, producer_epoch=0)
    with pytest.raises(
        InvalidRecordError, match="^Invalid sequence number -1 in record batch with producerId 9"
    ):
        lg.append_as_leader(no_seq, 0)
    moved = bytearray(batch(1_000))
    R.set_base_offset(moved, 0, 7)
    with pytest.raises(InvalidRecordError, match="should be 0, but it is 7"):
        lg.append_as_leader(moved, 0)
    # getFirstBatchAndMaybeValidateNoMoreBatches comes first: an append whose first batch is
    # v2 is one batch, whatever follows it
    mixed = bytes(batch(1_000)) + R.encode_legacy_message(1, b"k", b"v", timestamp=1_000)
    with pytest.raises(InvalidRecordError, match="^Compressed outer record has more than one batch"):
        lg.append_as_leader(mixed, 0, origin=ORIGIN_COORDINATOR)
    mixed = R.encode_legacy_message(1, b"k", b"v", timestamp=1_000) + bytes(batch(1_000))
    with pytest.raises(
        InvalidRecordError, match="^Batch magic 2 is not the same as the first batch's magic byte 1"
    ):
        lg.append_as_leader(mixed, 0, origin=ORIGIN_COORDINATOR)
    assert lg.log_end_offset == 1  # only the marker went in


# --------------------------------------------------------------- LogValidator's rebuild


def legacy_set(magic: int, stamps, codec: int = compression.NONE) -> bytes:
    """A client's magic 0/1 message set: one message per record, or one compressed wrapper."""
    recs = [R.SimpleRecord(b"v%d" % i, b"k%d" % i, (), ts) for i, ts in enumerate(stamps)]
    return R.build_legacy_message_set(recs, magic=magic, codec=codec)


def stored(lg: Log) -> list:
    return list(lg.batches())


def expected_v2(stamps, *, base_offset: int, codec: int, epoch: int, log_append_time=None, **kw) -> bytes:
    """The batch Kafka's MemoryRecordsBuilder writes for these records (LogValidator's rebuild):
    consecutive offset deltas, baseTimestamp the first record's, maxTimestamp the largest (or the
    append time), the given producer fields, the leader's epoch."""
    recs = [R.SimpleRecord(b"v%d" % i, b"k%d" % i, (), ts) for i, ts in enumerate(stamps)]
    return R.build_record_batch(
        recs,
        base_offset=base_offset,
        codec=codec,
        partition_leader_epoch=epoch,
        log_append_time=log_append_time,
        **kw,
    )


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    ("source", "forced"),
    [
        (compression.NONE, None),  # convertAndAssignOffsetsNonCompressed
        (compression.NONE, compression.GZIP),  # buildRecordsAndAssignOffsets
        (compression.GZIP, None),  # the source's codec (compression.type=producer)
        (compression.SNAPPY, compression.LZ4),
        (compression.LZ4, compression.NONE),
    ],
)
def test_a_legacy_set_becomes_one_v2_batch_as_kafka_writes_it(tmp_path, magic, source, forced):
    """Whatever the codecs, a magic 0/1 set is one v2 batch of every record after the log end
    offset: no producer, the records' own timestamps (magic 0 has none: -1), the leader's epoch."""
    names = {
        None: "producer",
        compression.NONE: "uncompressed",
        compression.GZIP: "gzip",
        compression.LZ4: "lz4",
    }
    lg = make_log(tmp_path, compression_type=names[forced])
    lg.append_as_leader(bytearray(batch(NOW)), 3)  # the log end offset is 1
    stamps = [NOW - 5, NOW - 9, NOW - 1]
    info = lg.append_as_leader(bytearray(legacy_set(magic, stamps, source)), 4)
    want_ts = stamps if magic == 1 else [R.NO_TIMESTAMP] * 3
    assert (info.first_offset, info.last_offset) == (1, 3)
    assert info.max_timestamp == (NOW - 1 if magic == 1 else R.NO_TIMESTAMP)
    first, b = stored(lg)
    want = expected_v2(want_ts, base_offset=1, codec=source if forced is None else forced, epoch=4)
    assert bytes(b.raw()) == want
    assert (b.base_timestamp, b.max_timestamp, b.timestamp_type) == (want_ts[0], max(want_ts), R.CREATE_TIME)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
    assert [(r.offset, r.timestamp, r.key) for r in b.records()] == [
        (1 + i, ts, b"k%d" % i) for i, ts in enumerate(want_ts)
    ]


def test_a_legacy_set_on_a_log_append_time_topic(tmp_path):
    """The rebuilt batch is LogAppendTime with the broker's clock as maxTimestamp; the records
    keep their own timestamps in their deltas (MemoryRecordsBuilder writes record.timestamp())."""
    lg = make_log(tmp_path, message_timestamp_type="LogAppendTime", compression_type="zstd")
    info = lg.append_as_leader(bytearray(legacy_set(1, [NOW - 7, NOW - 3])), 0)
    assert info.log_append_time == NOW and info.max_timestamp == NOW
    (b,) = stored(lg)
    assert bytes(b.raw()) == expected_v2(
        [NOW - 7, NOW - 3], base_offset=0, codec=4, epoch=0, log_append_time=NOW
    )
    assert b.base_timestamp == NOW - 7 and [r.timestamp for r in b.records()] == [NOW, NOW]


def test_a_v2_batch_under_a_forced_codec_is_rebuilt_with_its_producer(tmp_path):
    """buildRecordsAndAssignOffsets: producer id, epoch, base sequence and the transactional flag
    are the source's; offset deltas are renumbered 0..n-1, baseTimestamp is the first record's
    and maxTimestamp the largest of the records (not the header's word); headers are kept."""
    lg = make_log(tmp_path, compression_type="gzip")
    recs = [R.SimpleRecord(b"a", b"k", [("h", b"1")], NOW), R.SimpleRecord(b"b", b"k", (), NOW - 20)]
    src = R.build_record_batch(
        recs,
        codec=compression.SNAPPY,
        producer_id=12,
        producer_epoch=3,
        base_sequence=40,
        offset_deltas=[0, 0],  # a count of 2 over the range [0, 1], deltas not 0..n-1
        last_offset_delta=1,
        base_timestamp=NOW - 100,
        max_timestamp=NOW + 100,
    )
    info = lg.append_as_leader(bytearray(src), 2)
    (b,) = stored(lg)
    assert bytes(b.raw()) == R.build_record_batch(
        recs,
        codec=compression.GZIP,
        producer_id=12,
        producer_epoch=3,
        base_sequence=40,
        partition_leader_epoch=2,
    )
    assert (b.base_timestamp, b.max_timestamp, b.last_offset_delta) == (NOW, NOW, 1)
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 1, NOW)
    assert [r.headers for r in b.records()] == [[("h", b"1")], []]
    assert lg.producer_state.producers[12].last_sequence == 41


def test_a_clients_log_append_time_batch_is_rebuilt_with_the_timestamps_its_records_had(tmp_path):
    """On a CreateTime topic the records of a LogAppendTime batch read as its maxTimestamp: a
    rebuild writes those (Kafka sets nothing on a source batch it rebuilds)."""
    data = bytearray(batch(NOW - 50, NOW - 40))
    R.set_log_append_time(data, 0, NOW - 10)
    lg = make_log(tmp_path, compression_type="lz4")
    lg.append_as_leader(data, 0)
    (b,) = stored(lg)
    assert b.codec == compression.LZ4 and b.timestamp_type == R.CREATE_TIME
    assert [r.timestamp for r in b.records()] == [NOW - 10, NOW - 10] and b.max_timestamp == NOW - 10


def test_what_is_appended_in_place(tmp_path):
    """The codec already matches (or compression.type=producer): the very bytes, offsets written
    into them; a coordinator's uncompressed marker on a compressed topic is never compressed."""
    lg = make_log(tmp_path, compression_type="gzip")
    sent = bytearray(batch(NOW, NOW, codec=compression.GZIP))
    body = bytes(sent[21:])
    lg.append_as_leader(sent, 0)
    marker = bytearray(R.build_control_batch(R.COMMIT, producer_id=4, producer_epoch=0))
    lg.append_as_leader(marker, 0, origin=ORIGIN_COORDINATOR)
    a, m = stored(lg)
    assert bytes(a.raw())[21:] == body and a.base_offset == 0
    assert m.codec == compression.NONE and m.is_control and m.base_offset == 2


def test_a_compressed_legacy_message_is_alone_in_its_append(tmp_path):
    """getFirstBatchAndMaybeValidateNoMoreBatches: several messages only when none is compressed."""
    lg = make_log(tmp_path)
    two = legacy_set(1, [NOW]) + legacy_set(1, [NOW], compression.GZIP)
    with pytest.raises(InvalidRecordError, match="^Compressed outer record has more than one batch"):
        lg.append_as_leader(bytearray(two), 0)
    assert lg.log_end_offset == 0


def test_a_rebuilt_batch_larger_than_max_message_bytes_is_refused(tmp_path):
    """messageSizeMaybeChanged: the rebuilt batch is checked against max.message.bytes again."""
    big = [R.SimpleRecord(bytes(3000), b"k", (), NOW)]
    wrapper = R.build_legacy_message_set(big, magic=1, codec=compression.GZIP)
    lg = make_log(tmp_path, max_message_bytes=1000, compression_type="uncompressed")
    assert len(wrapper) < 1000
    with pytest.raises(RecordTooLargeError, match="^Message batch size is 3"):
        lg.append_as_leader(bytearray(wrapper), 0)
    assert lg.log_end_offset == 0


def test_a_count_beyond_the_offset_range_is_invalid_record_for_a_client_and_corrupt_for_verify(tmp_path):
    """Kafka's isValid is size and CRC; LogValidator.validateBatch refuses a client's batch whose
    count exceeds its offset range (INVALID_RECORD).  The recovery scan and verify still call it
    corrupt (bad_count), and so does a follower's append."""
    lying = bytearray(batch(NOW, NOW))
    lying[23:27] = (0).to_bytes(4, "big")  # lastOffsetDelta 0, records count 2
    lying[17:21] = crc32c(bytes(lying[21:])).to_bytes(4, "big")
    b = R.RecordBatch(lying)
    with pytest.raises(CorruptRecordError) as info:
        b.ensure_valid()
    assert info.value.kind == "bad_count"
    b.ensure_checksum()  # size and CRC hold
    lg = make_log(tmp_path)
    with pytest.raises(
        InvalidRecordError, match=r"^Inconsistent batch offset range \[0, 0\] and count of records 2"
    ):
        lg.append_as_leader(bytearray(lying), 0)
    empty_range = bytearray(batch(NOW))
    empty_range[23:27] = (-1).to_bytes(4, "big", signed=True)
    empty_range[17:21] = crc32c(bytes(empty_range[21:])).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match=r"^Batch has an invalid offset range: \[0, -1\]"):
        lg.append_as_leader(empty_range, 0)
    with pytest.raises(CorruptRecordError) as info:
        lg.append_as_follower(bytes(lying))
    assert info.value.kind == "bad_count"
    assert lg.log_end_offset == 0


@pytest.mark.parametrize("bits", [5, 6, 7])
def test_unknown_compression_bits_are_kafkas_illegal_argument_not_corrupt(tmp_path, bits):
    """CompressionType.forId throws for 5-7 in analyzeAndValidateRecords (after the CRC)."""
    data = bytearray(batch(NOW))
    data[22] = (data[22] & ~R.CODEC_MASK) | bits
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    lg = make_log(tmp_path)
    with pytest.raises(UnknownCodecError):
        lg.append_as_leader(data, 0)
    assert R.RecordBatch(data).is_valid()  # the CRC is valid: verify's compression finding says why


def test_a_timestamp_below_minus_one_is_refused_only_where_kafka_rebuilds(tmp_path):
    """MemoryRecordsBuilder throws IllegalArgumentException ("Invalid negative timestamp") for
    a record timestamp below -1: a rebuilt append fails (UNKNOWN_SERVER_ERROR at the produce
    path), a v2 batch appended in place is taken as it is."""
    lg = make_log(tmp_path)
    with pytest.raises(IllegalArgumentError, match="^Invalid negative timestamp -5 in the append to t-0"):
        lg.append_as_leader(bytearray(legacy_set(1, [NOW, -5])), 0)
    assert lg.log_end_offset == 0
    assert lg.append_as_leader(bytearray(batch(-5)), 0).first_offset == 0
    forced = make_log(tmp_path / "f", compression_type="gzip")
    with pytest.raises(IllegalArgumentError):
        forced.append_as_leader(bytearray(batch(-5)), 0)


def nested_wrapper(codec: int = compression.GZIP, first_key: bytes | None = b"k0") -> bytes:
    """A v1 wrapper whose second inner message is itself a compressed wrapper (every CRC right)."""
    deeper = R.encode_legacy_message(1, b"k", b"v", offset=0, timestamp=NOW)
    inner = R.encode_legacy_message(1, first_key, b"v0", offset=0, timestamp=NOW) + R.encode_legacy_message(
        1, None, compression.compress(codec, deeper, magic=1), offset=1, timestamp=NOW, attributes=codec
    )
    return R.encode_legacy_message(
        1, None, compression.compress(codec, inner, magic=1), offset=1, timestamp=NOW, attributes=codec
    )


@pytest.mark.parametrize("compacted", [False, True])
def test_a_compressed_inner_message_is_invalid_record_not_corrupt(tmp_path, compacted):
    """AbstractLegacyRecordBatch's DeepRecordsIterator (3.7.0) throws InvalidRecordException
    "Inner messages must not be compressed" when it reaches the compressed inner message, after
    the messages before it were validated; LogValidator's validateRecordCompression record error
    is never reached, so the partition answers INVALID_RECORD with no record error (a keyless
    message before it on a compacted topic loses its record error too)."""
    lg = make_log(tmp_path, **({"cleanup_policy": ("compact",)} if compacted else {}))
    data = nested_wrapper(first_key=None if compacted else b"k0")
    (w,) = R.iter_batches(data)
    w.ensure_valid()  # the bytes are not damaged
    with pytest.raises(InvalidRecordError, match="^Inner messages must not be compressed") as exc:
        lg.append_as_leader(bytearray(data), 0)
    assert not isinstance(exc.value, CorruptRecordError) and exc.value.position == 0
    assert lg.log_end_offset == 0
    # the messages before it are handed out first, as Kafka's iterator does
    it = w.records()
    assert next(it).value == b"v0"
    with pytest.raises(InvalidRecordError):
        next(it)


# ---- legacy (magic 0/1) sets: the deep iterator's and validateRecord's checks, Kafka 3.7.0


def message(magic: int, key, value, offset: int, ts: int = NOW, attributes: int = 0) -> bytes:
    return R.encode_legacy_message(magic, key, value, offset=offset, timestamp=ts, attributes=attributes)


def wrapper(
    magic: int,
    inner: bytes,
    offset: int,
    codec: int = compression.GZIP,
    timestamp: int = NOW,
    lat: bool = False,
) -> bytes:
    """A compressed wrapper of ``inner`` (the inner entries' bytes as given, compressed as is),
    CreateTime or (``lat``) LogAppendTime."""
    value = compression.compress(codec, inner, magic=magic)
    attributes = codec | (R.TIMESTAMP_TYPE_MASK if lat else 0)
    return R.encode_legacy_message(
        magic, None, value, offset=offset, timestamp=timestamp, attributes=attributes
    )


def refused_with(lg: Log, data, cls) -> Exception:
    with pytest.raises(cls) as info:
        lg.append_as_leader(bytearray(data), 0)
    assert lg.log_end_offset == 0  # nothing of the append was written
    return info.value


def damaged(entry: bytes) -> bytes:
    """``entry`` with the last byte of its value flipped: its own CRC fails."""
    out = bytearray(entry)
    out[-1] ^= 1
    return bytes(out)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4])
def test_an_inner_message_with_a_wrong_crc_is_corrupt_message(tmp_path, magic, codec):
    """validateRecord checks a wrapper's inner messages with LegacyRecord.ensureValid, whose
    CorruptRecordException the catch (InvalidRecordException only) lets through: CORRUPT_MESSAGE,
    no record error, though the wrapper's own CRC is right; the messages before it are not
    appended either."""
    bad = damaged(message(magic, b"k1", b"v1", 1))
    data = wrapper(magic, message(magic, b"k0", b"v0", 0) + bad, 1, codec)
    (w,) = R.iter_batches(data)
    w.ensure_valid()
    stored = int.from_bytes(bad[12:16], "big")
    computed = R.LegacyBatch(bad).compute_crc()
    err = refused_with(make_log(tmp_path), data, CorruptRecordError)
    assert err.message == f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"
    assert err.position == 0


def test_a_plain_legacy_message_with_a_wrong_crc_is_corrupt_before_anything_else(tmp_path):
    """An uncompressed message is its own batch: analyzeAndValidateRecords' isValid, before
    LogValidator (a compacted topic's missing key is not reached)."""
    data = message(1, None, b"v0", 0) + damaged(message(1, b"k1", b"v1", 1))
    err = refused_with(make_log(tmp_path, cleanup_policy=("compact",)), data, CorruptRecordError)
    assert err.kind == "crc_mismatch" and err.position == len(message(1, None, b"v0", 0))


def test_an_inner_message_of_another_magic_is_a_record_error(tmp_path):
    """validateRecord's hasMagic: INVALID_RECORD with a record error naming the entry as Kafka's
    toString prints it (LegacyRecordBatch around LegacyRecord: the inner message's own attributes
    and CRC; magic 0 has no timestamp, a v1 message in a v0 wrapper reads NoTimestampType); its
    CRC is not looked at (validateRecord returns first)."""
    v0 = damaged(message(0, b"k1", b"v1", 1))
    crc = int.from_bytes(v0[12:16], "big")
    err = refused(make_log(tmp_path), wrapper(1, message(1, b"k0", b"v0", 0) + v0, 7))
    assert not err.invalid_timestamp and err.error_name == "INVALID_RECORD"
    text = (
        f"Record LegacyRecordBatch(offset=7, Record(magic=0, attributes=0, compression=none, crc={crc}, "
        "key=2 bytes, value=2 bytes))'s magic does not match outer magic 1 in topic partition t-0"
    )
    assert err.record_errors == [(1, text)]
    assert err.message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{text}')]"
    )
    v1 = message(1, None, b"xyz", 4, ts=55, attributes=R.TIMESTAMP_TYPE_MASK)
    crc = int.from_bytes(v1[12:16], "big")
    err = refused(make_log(tmp_path / "b"), wrapper(0, v1 + message(0, b"k", b"v", 5), 5))
    assert err.record_errors == [
        (
            0,
            f"Record LegacyRecordBatch(offset=4, Record(magic=1, attributes=8, compression=none, crc={crc}, "
            "NoTimestampType=55, key=0 bytes, value=3 bytes))'s magic does not match outer magic 0 in "
            "topic partition t-0",
        )
    ]


def test_a_v1_wrapper_offset_below_its_last_inner_offset_is_invalid_record(tmp_path):
    """DeepRecordsIterator: a non-zero v1 wrapper offset below the last inner (relative) offset
    is InvalidRecordException; 0 means base 0 (librdkafka) and inner offsets with gaps are only
    rebuilt (offsets 0..n-1 at the log end)."""
    inner = message(1, b"k0", b"v0", 0) + message(1, b"k1", b"v1", 3)
    err = refused_with(make_log(tmp_path), wrapper(1, inner, 2), InvalidRecordError)
    assert not isinstance(err, CorruptRecordError)
    assert err.message == (
        "Found invalid wrapper offset in compressed v1 message set, wrapper offset '2' is less than "
        "the last inner message offset '3' and it is not zero."
    )
    for offset in (0, 3, 9):
        lg = make_log(tmp_path / str(offset))
        assert lg.append_as_leader(bytearray(wrapper(1, inner, offset)), 0).last_offset == 1


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (wrapper(1, b"", 0), "Found invalid compressed record set with no inner records"),
        (wrapper(0, b"\0" * 11, 0), "Found invalid compressed record set with no inner records"),
        (
            R.encode_legacy_message(1, None, None, attributes=compression.GZIP),
            "Found invalid compressed record set with null value (magic = 1)",
        ),
        (
            R.encode_legacy_message(0, None, b"x", attributes=compression.ZSTD),
            "Invalid wrapper compressionType found in legacy deep record iterator 0",
        ),
    ],
)
def test_the_deep_iterators_own_refusals_are_invalid_record(tmp_path, data, text):
    err = refused_with(make_log(tmp_path), data, InvalidRecordError)
    assert not isinstance(err, CorruptRecordError) and err.message == text


def test_an_unreadable_wrapper_stream_is_kafkas_unchecked_exception(tmp_path):
    """The deep iterator wraps the stream's IOException in a KafkaException (no ApiException):
    UNKNOWN_SERVER_ERROR at the produce path, a compression finding for verify."""
    from kafkatool.formats.errors import UNCHECKED_ERRORS, CompressionError

    good = wrapper(1, message(1, b"k", b"v", 0), 0)
    cut = compression.compress(compression.GZIP, message(1, b"k", b"v", 0), magic=1)[:-12]
    for data in (
        R.encode_legacy_message(1, None, b"\x1f\x8b not gzip", attributes=compression.GZIP),
        R.encode_legacy_message(1, None, cut, attributes=compression.GZIP),
    ):
        err = refused_with(make_log(tmp_path / str(len(data))), data, CompressionError)
        assert isinstance(err, UNCHECKED_ERRORS)
    assert make_log(tmp_path / "ok").append_as_leader(bytearray(good), 0).last_offset == 0


def test_an_inner_size_below_the_overhead_is_corrupt_and_a_cut_tail_ends_the_set(tmp_path):
    """DataLogInputStream: an inner size below 14 is CorruptRecordException; fewer than 12 bytes
    left, or a message cut short, end the set without an error (Kafka appends what came before)."""
    first = message(1, b"k0", b"v0", 0)
    tiny = struct.pack(">qi", 1, 13) + b"\0" * 13
    err = refused_with(make_log(tmp_path), wrapper(1, first + tiny, 1), CorruptRecordError)
    assert err.message.startswith("Record size is less than the minimum record overhead (14)")
    for tail in (message(1, b"k1", b"v1", 1)[:-1], b"\0" * 11):
        data = wrapper(1, first + tail, 1)
        (w,) = R.iter_batches(data)
        assert [r.value for r in w.records()] == [b"v0"] and w.inner_leftover == len(tail)
        lg = make_log(tmp_path / str(len(tail)))
        info = lg.append_as_leader(bytearray(data), 0)
        assert (info.first_offset, info.last_offset) == (0, 0)


def test_an_inner_codec_that_kafka_does_not_know_is_illegal_argument(tmp_path):
    """makeNext's isCompressed reads CompressionType.forId: bits 5-7 throw
    IllegalArgumentException (UNKNOWN_SERVER_ERROR), not the nested-compression refusal."""
    inner = message(1, b"k0", b"v0", 0) + message(1, b"k1", b"v1", 1, attributes=5)
    err = refused_with(make_log(tmp_path), wrapper(1, inner, 1), IllegalArgumentError)
    assert err.message.startswith("Unknown compression type id: 5")


def test_keyless_legacy_messages_on_a_compacted_topic(tmp_path):
    """A plain legacy set is a batch per message, each with its record index 0, and the first
    batch with errors ends the append (processRecordErrors after each batch); a wrapper's inner
    messages are one batch.  A later message's other magic (validateBatch) comes after an earlier
    message's record errors."""
    compact = {"cleanup_policy": ("compact",)}
    text = "Compacted topic cannot accept message without key in topic partition t-0"
    plain = message(1, b"k0", b"v0", 0) + message(1, None, b"v1", 1) + message(1, None, b"v2", 2)
    assert refused(make_log(tmp_path / "p", **compact), plain).record_errors == [(0, text)]
    err = refused(make_log(tmp_path / "w", **compact), wrapper(1, plain, 2))
    assert err.record_errors == [(1, text), (2, text)] and err.error_name == "INVALID_RECORD"
    mixed = message(1, None, b"v0", 0) + message(0, b"k", b"v1", 1)
    assert refused(make_log(tmp_path / "m", **compact), mixed).record_errors == [(0, text)]
    err = refused_with(make_log(tmp_path / "n"), mixed, InvalidRecordError)
    assert (
        err.message
        == "Batch magic 0 is not the same as the first batch's magic byte 1 in topic partition t-0"
    )


def test_a_legacy_log_append_time_message_names_the_entry_as_kafka_prints_it(tmp_path):
    """A client's LogAppendTime on a LogAppendTime topic: the record error prints the entry
    (LegacyRecordBatch(offset=...) around the message: its own attributes, the wrapper's type and
    timestamp for an inner v1 message; a plain message its own offset as sent)."""
    lg = make_log(tmp_path, message_timestamp_type="LogAppendTime")
    inner = message(1, b"k0", b"v0", 0, ts=3)
    crc = int.from_bytes(inner[12:16], "big")
    err = refused(lg, wrapper(1, inner, 4, timestamp=NOW - 9, lat=True))
    assert err.invalid_timestamp and err.record_errors == [
        (
            0,
            f"Invalid timestamp type in message LegacyRecordBatch(offset=4, Record(magic=1, attributes=0, "
            f"compression=none, crc={crc}, LogAppendTime={NOW - 9}, key=2 bytes, value=2 bytes)). Producer "
            "should not set timestamp type to LogAppendTime.",
        )
    ]
    plain = message(1, b"k", b"v", 6, ts=11, attributes=R.TIMESTAMP_TYPE_MASK)
    crc = int.from_bytes(plain[12:16], "big")
    assert refused(lg, plain).record_errors == [
        (
            0,
            f"Invalid timestamp type in message LegacyRecordBatch(offset=6, Record(magic=1, attributes=8, "
            f"compression=none, crc={crc}, LogAppendTime=11, key=1 bytes, value=1 bytes)). Producer "
            "should not set timestamp type to LogAppendTime.",
        )
    ]


def test_a_v0_message_in_a_log_append_time_v1_wrapper_keeps_no_timestamp():
    """Only an inner v1 message takes the wrapper's timestamp (DeepRecordsIterator wraps magic 1
    alone); a v0 one reads -1, NoTimestampType."""
    data = wrapper(1, message(0, b"a", b"b", 0) + message(1, b"c", b"d", 1, ts=2), 1, timestamp=77, lat=True)
    (w,) = R.iter_batches(data)
    assert [(r.timestamp, r.timestamp_type) for r in w.records()] == [
        (-1, R.NO_TIMESTAMP_TYPE),
        (77, R.LOG_APPEND_TIME),
    ]
