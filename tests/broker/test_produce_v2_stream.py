"""A compressed v2 batch whose records cannot be read, CRC valid, answered as Kafka 3.7.0 answers
it where this broker reads a compressed batch's records (a compacted topic's keys, a timestamp
limit, a client's LogAppendTime attribute, a rebuild for another compression.type):
DefaultRecordBatch wraps the codec's IOException in a KafkaException (compressedIterator's
wrapForInput, StreamRecordIterator.readNext "Failed to decompress record stream"), no
ApiException, so UNKNOWN_SERVER_ERROR; a stream that decompresses but holds fewer or more
records than the count, or a record cut short, is InvalidRecordException (readNext's
IllegalArgumentException "premature EOF", DefaultRecord.readFrom, "records still remaining"),
INVALID_RECORD.  Elsewhere the batch is appended in place unread (DESIGN.md: Kafka
decompresses it too; this broker does not, a documented divergence)."""

from __future__ import annotations

import struct

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_produce_legacy import answer, inproc  # noqa: F401 (the fixture)
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient

TS = 1_700_000_000_000
AREA = R.build_record_batch([R.SimpleRecord(b"v%d" % i, b"k%d" % i, (), TS) for i in range(3)])[61:]


def v2(area: bytes, count: int, codec: int = compression.GZIP, attributes: int = 0) -> bytes:
    """A v2 batch of ``count`` records whose record area is ``area`` as given, its CRC right."""
    out = bytearray(R.build_record_batch([R.SimpleRecord(b"v", b"k", (), TS)])[:61] + area)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">hi", out, 21, codec | attributes, count - 1)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


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
