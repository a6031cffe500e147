"""A compressed v2 batch whose records cannot be read, CRC valid, answered as Kafka 3.7.0 answers
it where this broker reads a compressed batch's records (a compacted topic's keys, a timestamp
limit, a client's LogAppendTime attribute, a rebuild for another compression.type):
DefaultRecordBatch wraps the codec's IOException in a KafkaException (compressedIterator's
wrapForInput, StreamRecordIterator.readNext "Failed to decompress record stream"), no
ApiException, so UNKNOWN_SERVER_ERROR; a stream that decompresses but holds fewer or more
records than the count, or a record cut short, is InvalidRecordException (readNext's
IllegalArgumentException "premature EOF", DefaultRecord.readFrom, "records still remaining"),
INVALID_RECORD.  Elsewhere the batch is appended in place unread (DESIGN.md: Kafka
decompresses it too; this broker does not, a documented divergence).  Below, records whose
fields disagree with their lengths, uncompressed and compressed, answered as the reader Kafka
uses for each answers them (DefaultRecord.readFrom or readPartiallyFrom)."""

from __future__ import annotations

import struct

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.formats.varint import write_uvarint, zigzag32
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_produce_legacy import answer, inproc  # noqa: F401 (the fixture)
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient
from tests.formats.test_records import v2_batch as v2

TS = 1_700_000_000_000
AREA = R.build_record_batch([R.SimpleRecord(b"v%d" % i, b"k%d" % i, (), TS) for i in range(3)])[61:]


def gz(data: bytes) -> bytes:
    return compression.compress(compression.GZIP, data)


STREAMS = [
    ("garbage", v2(b"\x1f\x8b not a deflate stream", 3), ErrorCode.UNKNOWN_SERVER_ERROR),
    ("no-gzip-header", v2(b"plain bytes", 3), ErrorCode.UNKNOWN_SERVER_ERROR),
    ("lz4-garbage", v2(b"\x04\x22\x4d\x18 garbage", 3, compression.LZ4), ErrorCode.UNKNOWN_SERVER_ERROR),
    ("cut-stream", v2(gz(AREA)[:-12], 3), ErrorCode.UNKNOWN_SERVER_ERROR),
    ("fewer-records", v2(gz(AREA), 4), ErrorCode.INVALID_RECORD),
    ("more-records", v2(gz(AREA), 2), ErrorCode.INVALID_RECORD),
    ("record-cut", v2(gz(AREA[:-3]), 3), ErrorCode.INVALID_RECORD),
]
#: the topics on which this broker reads a compressed batch's records, and the batch attributes
READING = [
    ("compacted", {"cleanup.policy": "compact"}, 0),
    ("limited", {"message.timestamp.before.max.ms": str(10**15)}, 0),
    ("recompressed", {"compression.type": "snappy"}, 0),
    ("append-time-attribute", {"message.timestamp.type": "LogAppendTime"}, R.TIMESTAMP_TYPE_MASK),
]


def with_attributes(data: bytes, attributes: int) -> bytes:
    out = bytearray(data)
    out[22] |= attributes
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize(("reading", "configs", "attributes"), READING, ids=[r[0] for r in READING])
@pytest.mark.parametrize(("name", "data", "code"), STREAMS, ids=[s[0] for s in STREAMS])
def test_the_answer_is_kafkas(inproc, reading, configs, attributes, name, data, code):  # noqa: F811
    topic = f"v2-{reading}-{name}"
    inproc.create_topic(topic, 1, configs)
    r = answer(inproc, topic, with_attributes(data, attributes), version=8)
    assert (r.error_code, r.base_offset, r.error_message, r.record_errors) == (code, -1, None, [])
    assert inproc.get_log(topic, 0).log_end_offset == 0


def test_a_batch_nothing_reads_is_appended_unread(inproc):  # noqa: F811
    """The documented divergence: with no rule that needs the records, the batch is appended
    in place without decompressing it (Kafka would refuse it)."""
    inproc.create_topic("v2-unread", 1, {})
    r = answer(inproc, "v2-unread", STREAMS[0][1], version=8)
    assert (r.error_code, r.base_offset) == (0, 0)


def test_the_codes_on_the_wire(broker):
    """Produce v9 frames against a `kafkatool serve`: the codes, nothing appended."""
    with WireClient(broker.bootstrap) as c:
        for reading, configs, attributes in READING:
            topic = f"wire-v2-{reading}"
            create_topic(c, topic, configs=configs)
            for name, data, code in STREAMS:
                r = produce(c, topic, with_attributes(data, attributes))
                assert (r.error_code, r.base_offset) == (code, -1), (reading, name)
            assert batches_of(fetch(c, topic, 0).responses[0].partitions[0].records) == []
        good = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), TS)], codec=compression.GZIP)
        assert produce(c, "wire-v2-compacted", good).error_code == 0


# ---------------------------------------------------------------- records whose fields do not fit
# Where LogValidator reads a v2 batch's records, it reads each record field by field, and which
# reader it uses decides the answer: an uncompressed batch (in place or rebuilt) and a compressed
# one it rebuilds are read by DefaultRecord.readFrom (the fields must end at the record's declared
# length: InvalidRecordException otherwise), a compressed batch it keeps in place by
# skipKeyValueIterator's DefaultRecord.readPartiallyFrom, which reads the fields one after the
# other from the stream and never looks at the declared length (a field past the stream's end,
# or bytes left after the last record, is InvalidRecordException).


def body(i: int, key: bytes | None = None, headers: bytes = b"\x00") -> bytes:
    """Record ``i``'s fields after its length: attributes, deltas, key and value as written,
    then ``headers`` (the header count and headers as the client wrote them)."""
    whole = R.encode_record_v2(i, 0, b"k%d" % i if key is None else key, b"v%d" % i)
    return whole[1:-1] + headers  # a small record's length is one byte; its header count 0 last


def rec(fields: bytes, length: int | None = None) -> bytes:
    """A record: its declared length (default: the fields' own) and its fields."""
    n = len(fields) if length is None else length
    return write_uvarint(zigzag32(n)) + fields


#: (name, record area of 2 records, answer when read by readFrom, answer by readPartiallyFrom)
FIELDS = [
    # the first record's length claims 2 bytes more / fewer than its fields: readFrom reads the
    # fields and finds it did not end at the length; readPartiallyFrom reads the next record
    # where the fields ended and takes the batch
    ("length-longer", rec(body(0), len(body(0)) + 2) + rec(body(1)), ErrorCode.INVALID_RECORD, 0),
    ("length-shorter", rec(body(0), len(body(0)) - 2) + rec(body(1)), ErrorCode.INVALID_RECORD, 0),
    # the last record's length covers 2 bytes after its fields: ensureNoneRemaining for both
    (
        "padded-last",
        rec(body(0)) + rec(body(1) + b"\0\0"),
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_RECORD,
    ),
    # a key length past the record (and the batch), the record's length its bytes' own
    (
        "key-past",
        rec(b"\x00\x00\x00" + write_uvarint(zigzag32(90)) + b"k0" + b"\x04v0\x00") + rec(body(1)),
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_RECORD,
    ),
    (
        "header-count-past",
        rec(body(0, headers=b"\x64")) + rec(body(1)),
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_RECORD,
    ),
    (
        "header-key-past",
        rec(body(0, headers=b"\x02\x50hk\x02hv")) + rec(body(1)),
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_RECORD,
    ),
    (
        "header-value-past",
        rec(body(0, headers=b"\x02\x04hk\x50hv")) + rec(body(1)),
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_RECORD,
    ),
]
#: (name, topic configs, codec, read partially): the topics on which a v2 batch's records are read
FIELD_READERS = [
    ("limited-none", {"message.timestamp.before.max.ms": str(10**15)}, compression.NONE, False),
    ("limited-gzip", {"message.timestamp.before.max.ms": str(10**15)}, compression.GZIP, True),
    ("limited-after-gzip", {"message.timestamp.after.max.ms": str(10**15)}, compression.GZIP, True),
    ("deprecated-gzip", {"message.timestamp.difference.max.ms": str(10**15)}, compression.GZIP, True),
    (
        "limited-gzip-rebuilt",
        {"message.timestamp.before.max.ms": str(10**15), "compression.type": "snappy"},
        compression.GZIP,
        False,
    ),
    (
        "limited-none-rebuilt",
        {"message.timestamp.before.max.ms": str(10**15), "compression.type": "gzip"},
        compression.NONE,
        False,
    ),
    ("compacted-none", {"cleanup.policy": "compact"}, compression.NONE, False),
    ("compacted-gzip", {"cleanup.policy": "compact"}, compression.GZIP, True),
]


def fields_batch(area: bytes, codec: int) -> bytes:
    return v2(area if codec == compression.NONE else compression.compress(codec, area), 2, codec)


@pytest.mark.parametrize(
    ("reader", "configs", "codec", "partial"), FIELD_READERS, ids=[r[0] for r in FIELD_READERS]
)
@pytest.mark.parametrize(("name", "area", "full", "partly"), FIELDS, ids=[f[0] for f in FIELDS])
def test_a_records_fields_are_read_as_kafka_reads_them(
    inproc,  # noqa: F811
    reader,
    configs,
    codec,
    partial,
    name,
    area,
    full,
    partly,
):
    topic = f"fields-{reader}-{name}"
    inproc.create_topic(topic, 1, configs)
    code = partly if partial else full
    r = answer(inproc, topic, fields_batch(area, codec), version=8)
    assert (r.error_code, r.base_offset, r.error_message, r.record_errors) == (
        code,
        -1 if code else 0,
        None,
        [],
    )
    assert inproc.get_log(topic, 0).log_end_offset == (0 if code else 2)


def test_a_partial_record_names_itself_in_a_record_error(inproc):  # noqa: F811
    """A client's LogAppendTime on a LogAppendTime topic is a record error naming the record:
    read by readPartiallyFrom (a compressed batch kept in place) it is a PartialDefaultRecord,
    whose key and value sizes are as written (-1 for null); rebuilt, a DefaultRecord (0)."""
    area = rec(body(0, key=b"")[:3] + b"\x01\x04v0\x00") + rec(body(1))  # record 0: a null key
    for topic, configs, cls, null in (
        ("partial-append-time", {}, "PartialDefaultRecord", -1),
        ("partial-append-time-rebuilt", {"compression.type": "lz4"}, "DefaultRecord", 0),
    ):
        inproc.create_topic(topic, 1, {"message.timestamp.type": "LogAppendTime", **configs})
        data = with_attributes(fields_batch(area, compression.GZIP), R.TIMESTAMP_TYPE_MASK)
        r = answer(inproc, topic, data, version=8)
        texts = [
            f"Invalid timestamp type in message {cls}(offset={i}, timestamp={TS}, key={k} bytes, value=2 bytes). "
            "Producer should not set timestamp type to LogAppendTime."
            for i, k in ((0, null), (1, 2))
        ]
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
        )
        assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == list(
            enumerate(texts)
        )
        assert inproc.get_log(topic, 0).log_end_offset == 0


def test_fields_on_the_wire(broker):
    """Produce v9 frames of the same batches against a `kafkatool serve`: code, message and record
    errors as Kafka's, and what is appended (a batch readPartiallyFrom takes is stored as it came)."""
    with WireClient(broker.bootstrap) as c:
        for reader, configs, codec, partial in FIELD_READERS:
            topic = f"wire-fields-{reader}"
            create_topic(c, topic, configs=configs)
            taken = 0
            for name, area, full, partly in FIELDS:
                code = partly if partial else full
                r = produce(c, topic, fields_batch(area, codec))
                want = (code, -1 if code else taken, None, [])
                assert (r.error_code, r.base_offset, r.error_message, r.record_errors) == want, (reader, name)
                taken += 0 if code else 2
            stored = batches_of(fetch(c, topic, 0).responses[0].partitions[0].records)
            assert [b.records_count for b in stored] == [2] * (taken // 2), reader
