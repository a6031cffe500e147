"""Legacy message sets (magic 0 and 1) in Produce v0-v2, answered as Kafka 3.7.0 answers them:
the error code per partition, and the error message and record errors ReplicaManager puts in
the partition's answer (a RecordValidationException's own; none for any other exception).  A
Produce response below v8 carries neither message nor record errors on the wire, so those are
read from the handler's answer on an in-process broker (real storage in a temp dir) before it
is encoded; the codes are also checked over a socket against a `kafkatool serve`."""

from __future__ import annotations

import struct
import zlib

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.router import RequestContext
from kafkatool.broker.server import Broker
from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request, parse_request
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.wire import DispatchConn, WireClient
from tests.formats.test_records import v2_batch as v2

TS = 1_700_000_000_000


def message(magic: int, key, value, offset: int, ts: int = TS, attributes: int = 0) -> bytes:
    return R.encode_legacy_message(magic, key, value, offset=offset, timestamp=ts, attributes=attributes)


def wrapper(magic: int, inner: bytes, offset: int, codec: int = compression.GZIP) -> bytes:
    value = compression.compress(codec, inner, magic=magic)
    return R.encode_legacy_message(magic, None, value, offset=offset, timestamp=TS, attributes=codec)


def damaged(entry: bytes) -> bytes:
    out = bytearray(entry)
    out[-1] ^= 1
    return bytes(out)


def crc_of(entry: bytes) -> int:
    return struct.unpack_from(">I", entry, 12)[0]


def forged(magic: int, fields: bytes, offset: int, ts: int = TS, attributes: int = 0) -> bytes:
    """A message of ``magic`` whose bytes after the header (key and value lengths and bytes,
    as the client wrote them) are ``fields``, with a valid CRC: the v0 layout at magic 0, the
    v1 layout (a timestamp) at any other, as Kafka's LegacyRecord reads it."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", ts) if magic != 0 else b"") + fields
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def kv(
    key: bytes | None, value: bytes | None, key_len: int | None = None, value_len: int | None = None
) -> bytes:
    """Key and value fields, their lengths as given (default: the bytes' own, -1 for None)."""
    k = key or b""
    v = value or b""
    kl = (-1 if key is None else len(k)) if key_len is None else key_len
    vl = (-1 if value is None else len(v)) if value_len is None else value_len
    return struct.pack(">i", kl) + k + struct.pack(">i", vl) + v


M0 = message(1, b"k0", b"v0", 0)
BAD = damaged(message(1, b"k1", b"v1", 1))
V0 = message(0, b"k1", b"v1", 1)
MAGIC_TEXT = (
    f"Record LegacyRecordBatch(offset=1, Record(magic=0, attributes=0, compression=none, crc={crc_of(V0)}, "
    "key=2 bytes, value=2 bytes))'s magic does not match outer magic 1 in topic partition {topic}-0"
)
KEY_TEXT = "Compacted topic cannot accept message without key in topic partition {topic}-0"
# an inner message of magic 2, read with the v1 layout (LegacyRecord: any magic but 0)
V2_INNER = forged(2, kv(b"k1", b"v1"), 1)


def magic2_text(outer: int) -> str:
    return (
        f"Record LegacyRecordBatch(offset=1, Record(magic=2, attributes=0, compression=none, "
        f"crc={crc_of(V2_INNER)}, CreateTime={TS}, key=2 bytes, value=2 bytes))'s magic does not match "
        f"outer magic {outer} in topic partition {{topic}}-0"
    )


# CRC-valid messages whose key or value LegacyRecord cannot read (Utils.sizeDelimited: a length
# past the message throws IllegalArgumentException, a length field past it
# IndexOutOfBoundsException; no ApiException: UNKNOWN_SERVER_ERROR)
KEY_PAST = forged(1, kv(b"k1", b"v1", key_len=50), 1)
VALUE_PAST = forged(1, kv(b"k1", b"v1", value_len=3), 1)
NO_VALUE_FIELD = forged(1, struct.pack(">i", 2) + b"k1", 1)


V2_OK = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), TS)])
V2_GZIP = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), TS)], codec=compression.GZIP)
V2_LONG_VARINT = v2(b"\xff" * 5 + V2_OK[61:], 1, compression.NONE)
V2_CUT = v2(V2_OK[61:-2], 1, compression.NONE)


def shown(*errors: tuple[int, str]) -> str:
    inner = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors)
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{inner}]"
    )


#: (name, topic configs, records, error code, record errors (index, text with {topic}))
CASES = [
    ("inner-crc", {}, wrapper(1, M0 + BAD, 1), ErrorCode.CORRUPT_MESSAGE, []),
    (
        "inner-crc-v0",
        {},
        wrapper(0, message(0, b"a", b"b", 0) + damaged(V0), 1),
        ErrorCode.CORRUPT_MESSAGE,
        [],
    ),
    ("plain-crc", {}, M0 + BAD, ErrorCode.CORRUPT_MESSAGE, []),
    ("inner-magic", {}, wrapper(1, M0 + V0, 1), ErrorCode.INVALID_RECORD, [(1, MAGIC_TEXT)]),
    # the mismatched message's CRC is not looked at: validateRecord returns first
    ("inner-magic-crc", {}, wrapper(1, M0 + damaged(V0), 1), ErrorCode.INVALID_RECORD, None),
    (
        "wrapper-offset",
        {},
        wrapper(1, M0 + message(1, b"k1", b"v1", 3), 2),
        ErrorCode.INVALID_RECORD,
        [],
    ),
    ("empty", {}, wrapper(1, b"", 0), ErrorCode.INVALID_RECORD, []),
    ("null-value", {}, R.encode_legacy_message(1, None, None, attributes=1), ErrorCode.INVALID_RECORD, []),
    ("zstd", {}, R.encode_legacy_message(1, None, b"x", attributes=4), ErrorCode.INVALID_RECORD, []),
    (
        "bad-stream",
        {},
        R.encode_legacy_message(1, None, b"\x1f\x8b junk", attributes=1),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    (
        "inner-small",
        {},
        wrapper(1, M0 + struct.pack(">qi", 1, 13) + bytes(13), 1),
        ErrorCode.CORRUPT_MESSAGE,
        [],
    ),
    (
        "inner-codec-5",
        {},
        wrapper(1, M0 + message(1, b"k1", b"v1", 1, attributes=5), 1),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    # 1. an inner message of magic 2 or more: validateRecord's magic record error
    ("inner-magic-2", {}, wrapper(1, M0 + V2_INNER, 1), ErrorCode.INVALID_RECORD, [(1, magic2_text(1))]),
    (
        "inner-magic-2-v0",
        {},
        wrapper(0, message(0, b"a", b"b", 0) + V2_INNER, 1),
        ErrorCode.INVALID_RECORD,
        [(1, magic2_text(0))],
    ),
    # ... whose record error's text (LegacyRecord.toString) cannot read its key: that throws
    (
        "inner-magic-2-short",
        {},
        wrapper(1, M0 + forged(2, b"", 1), 1),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    # 2. key or value lengths that do not fit a CRC-valid message
    ("plain-key-past", {}, M0 + KEY_PAST, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("plain-value-past", {}, M0 + VALUE_PAST, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("plain-no-value-field", {}, M0 + NO_VALUE_FIELD, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("plain-v0-key-past", {}, forged(0, kv(b"k", b"v", key_len=9), 0), ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("wrapped-key-past", {}, wrapper(1, M0 + KEY_PAST, 1), ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("wrapped-value-past", {}, wrapper(1, M0 + VALUE_PAST, 1), ErrorCode.UNKNOWN_SERVER_ERROR, []),
    (
        "wrapper-key-past",
        {},
        forged(1, kv(None, compression.compress(compression.GZIP, M0), key_len=1000), 0, attributes=1),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    # an uncompressed set kept uncompressed is sized first (estimateSizeInBytes reads every
    # key and value): that throws before the first message's record error
    (
        "plain-key-past-after-keyless",
        {"cleanup.policy": "compact"},
        message(1, None, b"v0", 0) + KEY_PAST,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    # recompressed (compression.type), the records are checked first: the record error wins
    (
        "plain-key-past-after-keyless-gzip",
        {"cleanup.policy": "compact", "compression.type": "gzip"},
        message(1, None, b"v0", 0) + KEY_PAST,
        ErrorCode.INVALID_RECORD,
        [(0, KEY_TEXT)],
    ),
    # in a wrapper too: validateRecord's errors come before the rebuild reads a key
    (
        "wrapped-key-past-then-magic",
        {},
        wrapper(1, forged(1, kv(b"k", b"v", key_len=50), 0) + V0, 1),
        ErrorCode.INVALID_RECORD,
        [(1, MAGIC_TEXT)],
    ),
    # hasKey reads the key length: a compacted topic's check throws where it is past the message
    (
        "wrapped-no-key-field-compacted",
        {"cleanup.policy": "compact"},
        wrapper(1, message(1, None, b"v0", 0) + forged(1, b"\0\0", 1), 1),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        [],
    ),
    # 3. a top-level v1 message smaller than the v1 header (14-21 bytes), CRC valid: its key or
    # value length field is past its end
    ("v1-14-bytes", {}, forged(1, b"", 0), ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("v1-21-bytes", {}, forged(1, struct.pack(">i", -1) + b"\0\0\0", 0), ErrorCode.UNKNOWN_SERVER_ERROR, []),
    # 4. Produce v0-2 takes a set that starts with a v2 batch and goes on with legacy messages
    # (ProduceRequest.validateRecords checks nothing below v3).  Uncompressed and kept so, it is
    # LogValidator.convertAndAssignOffsetsNonCompressed's: estimateSizeInBytes reads every record
    # of every batch (the v2 batch's by DefaultRecord.readFrom, each message's key and value)
    # before getFirstBatchAndMaybeValidateNoMoreBatches refuses a v2 batch with others
    # (INVALID_RECORD): what the read throws wins
    ("v2-then-legacy", {}, V2_OK + M0, ErrorCode.INVALID_RECORD, []),
    ("v2-then-key-past", {}, V2_OK + KEY_PAST, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("v2-then-no-value-field", {}, V2_OK + NO_VALUE_FIELD, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    # a v2 record's length varint longer than 5 bytes: ByteUtils.readVarint's
    # IllegalArgumentException, which the uncompressed iterator lets through
    ("v2-long-varint-then-legacy", {}, V2_LONG_VARINT + M0, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ("v2-cut-record-then-key-past", {}, V2_CUT + KEY_PAST, ErrorCode.INVALID_RECORD, []),
    # led by a legacy message the v2 batch is read too, before validateBatch's magic check
    ("legacy-then-v2", {}, M0 + V2_OK, ErrorCode.INVALID_RECORD, []),
    ("legacy-then-v2-long-varint", {}, M0 + V2_LONG_VARINT, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    # compressed (a batch, or compression.type): validateMessagesAndAssignOffsetsCompressed,
    # whose first step is the one-batch check: nothing is read
    (
        "v2-then-key-past-gzip-topic",
        {"compression.type": "gzip"},
        V2_OK + KEY_PAST,
        ErrorCode.INVALID_RECORD,
        [],
    ),
    ("v2-gzip-then-key-past", {}, V2_GZIP + KEY_PAST, ErrorCode.INVALID_RECORD, []),
    ("v2-then-key-past-wrapped", {}, V2_OK + wrapper(1, KEY_PAST, 1), ErrorCode.INVALID_RECORD, []),
    (
        "keyless-plain",
        {"cleanup.policy": "compact"},
        M0 + message(1, None, b"v1", 1) + message(1, None, b"v2", 2),
        ErrorCode.INVALID_RECORD,
        [(0, KEY_TEXT)],
    ),
    (
        "keyless-wrapped",
        {"cleanup.policy": "compact"},
        wrapper(1, M0 + message(1, None, b"v1", 1) + message(1, None, b"v2", 2), 2),
        ErrorCode.INVALID_RECORD,
        [(1, KEY_TEXT), (2, KEY_TEXT)],
    ),
]


@pytest.fixture(scope="module")
def inproc(tmp_path_factory):
    d = tmp_path_factory.mktemp("legacy-inproc")
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    b.open_storage()
    try:
        yield b
    finally:
        b.close_storage()


def answer(broker, topic: str, data: bytes, version: int = 2):
    """The produce handler's answer to a request of ``version`` as it comes (before encoding)."""
    req = G.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=data)])
        ],
    )
    header, body = parse_request(bytearray(encode_request(0, version, 1, "legacy-test", req)[4:]))
    resp = broker.router.routes[0].handler(RequestContext(broker, DispatchConn(), header), body)
    return resp.responses[0].partition_responses[0]


@pytest.mark.parametrize(
    ("name", "configs", "data", "code", "record_errors"), CASES, ids=[c[0] for c in CASES]
)
def test_the_answer_is_kafkas(inproc, name, configs, data, code, record_errors):
    topic = f"legacy-{name}"
    inproc.create_topic(topic, 1, configs)
    r = answer(inproc, topic, data)
    assert (r.error_code, r.base_offset) == (code, -1)
    if record_errors is None:  # only the code is the point
        return
    want = [(i, text.format(topic=topic)) for i, text in record_errors]
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == want
    # only a RecordValidationException's message reaches the answer (hasCustomErrorMessage)
    assert r.error_message == (shown(*want) if want else None)
    assert inproc.get_log(topic, 0).log_end_offset == 0


def test_a_cut_tail_in_a_wrapper_is_dropped_as_kafka_does(inproc):
    """The deep iterator ends the set at a message cut short: the messages before it are taken."""
    inproc.create_topic("legacy-tail", 1, {})
    r = answer(inproc, "legacy-tail", wrapper(1, M0 + message(1, b"k1", b"v1", 1)[:-3], 1))
    assert (r.error_code, r.base_offset, r.record_errors, r.error_message) == (0, 0, [], None)
    assert inproc.get_log("legacy-tail", 0).log_end_offset == 1


def test_lengths_kafka_reads_past_are_taken(inproc):
    """LegacyRecord reads a negative key or value length as null (Utils.sizeDelimited: size < 0),
    not only -1, and ignores bytes after the value: the messages are taken, as Kafka takes them
    (their records as Kafka reads them; a null key is a compacted topic's record error)."""
    neg = forged(1, kv(None, b"v0", key_len=-7), 0)
    tail = forged(1, kv(b"k1", b"v1") + b"xyz", 1)
    inproc.create_topic("legacy-lengths", 1, {})
    for data in (neg + tail, wrapper(1, neg + tail, 1)):
        r = answer(inproc, "legacy-lengths", data)
        assert (r.error_code, r.record_errors) == (0, [])
    stored = [(x.key, x.value) for b in inproc.get_log("legacy-lengths", 0).batches(0) for x in b.records()]
    assert stored == [(None, b"v0"), (b"k1", b"v1")] * 2
    inproc.create_topic("legacy-lengths-compact", 1, {"cleanup.policy": "compact"})
    r = answer(inproc, "legacy-lengths-compact", wrapper(1, tail + neg, 1))
    want = KEY_TEXT.format(topic="legacy-lengths-compact")
    assert (r.error_code, [(e.batch_index, e.batch_index_error_message) for e in r.record_errors]) == (
        ErrorCode.INVALID_RECORD,
        [(1, want)],
    )


def test_the_codes_on_the_wire(broker):
    """Produce v0 and v2 frames of crafted legacy sets against a `kafkatool serve`: each
    partition's code as Kafka's, nothing appended, and the broker keeps serving."""
    with WireClient(broker.bootstrap) as c:
        for name, configs, data, code, _ in CASES:
            topic = f"wire-{name}"
            create_topic(c, topic, configs={k: v for k, v in configs.items()})
            for version in (0, 2):
                r = produce(c, topic, data, version=version)
                assert (r.error_code, r.base_offset) == (code, -1), (name, version)
            assert batches_of(fetch(c, topic, 0).responses[0].partitions[0].records) == []
        ok = R.build_legacy_message_set([R.SimpleRecord(b"a", b"k"), R.SimpleRecord(b"b", b"k")], magic=1)
        assert produce(c, "wire-inner-crc", ok, version=2).error_code == 0
