"""Builders and parsers of record batches and legacy message sets."""

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import FormatError, IllegalArgumentError, InvalidRecordError
from kafkatool.formats.varint import write_uvarint, zigzag32


def _msgs(client_batches_dir, name):
    meta = json.loads((client_batches_dir / f"{name}.json").read_text())
    h = lambda x: None if x is None else bytes.fromhex(x)  # noqa: E731
    return [
        R.SimpleRecord(
            h(m["value"]), h(m["key"]), [(k, h(v)) for k, v in (m["headers"] or [])], m["timestamp"]
        )
        for m in meta["messages"]
    ]


@pytest.mark.parametrize(
    "name", ["confluent-kafka-v2-none", "kafka-python-v2-none", "confluent-kafka-v2nullhdr-none"]
)
def test_v2_builder_reproduces_client_bytes(name, client_batches_dir):
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    built = R.build_record_batch(_msgs(client_batches_dir, name), partition_leader_epoch=0)
    assert built == data


@pytest.mark.parametrize("name", ["kafka-python-v1-none", "kafka-python-v0-none", "confluent-kafka-v1-none"])
def test_legacy_builder_reproduces_client_bytes(name, client_batches_dir):
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    magic = 1 if "-v1-" in name else 0
    built = R.build_legacy_message_set(_msgs(client_batches_dir, name), magic=magic)
    assert built == data


def test_v2_header_layout_by_hand():
    b = R.build_record_batch(
        [R.SimpleRecord(b"v", b"k", [("h", None)], 1000)],
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=5,
        producer_epoch=3,
        base_sequence=9,
        is_transactional=True,
    )
    assert struct.unpack_from(">q", b, 0)[0] == 42
    assert struct.unpack_from(">i", b, 8)[0] == len(b) - 12
    assert struct.unpack_from(">i", b, 12)[0] == 7
    assert b[16] == 2
    assert struct.unpack_from(">h", b, 21)[0] == 0x10
    assert struct.unpack_from(">i", b, 23)[0] == 0
    assert struct.unpack_from(">qq", b, 27) == (1000, 1000)
    assert struct.unpack_from(">qhii", b, 43) == (5, 3, 9, 1)
    # record: len, attrs 0, tsDelta 0, offDelta 0, key len 1 (zigzag 2), 'k', val len 1, 'v', 1 header,
    # key len 1 'h', value null (zigzag -1 = 1)
    body = bytes.fromhex("000000026b027602026801")
    assert b[61:] == bytes([len(body) * 2]) + body
    import crc32c

    assert struct.unpack_from(">I", b, 17)[0] == crc32c.crc32c(b[21:])


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_round_trip_every_codec(codec):
    recs = [
        R.SimpleRecord(
            bytes([i]) * (i * 37), f"k{i}".encode() if i % 3 else None, [("a", b"1"), ("b", None)], 1000 + i
        )
        for i in range(60)
    ]
    recs.append(R.SimpleRecord(None, b"tombstone", (), 2000))
    b = R.build_record_batch(
        recs, base_offset=100, codec=codec, producer_id=7, producer_epoch=1, base_sequence=2**31 - 3
    )
    batch = R.read_batch(b)
    assert isinstance(batch, R.RecordBatch)
    batch.ensure_valid()
    assert batch.codec == codec and batch.count == 61 and batch.last_offset == 160
    assert batch.max_timestamp == 2000
    out = list(batch.records())
    assert [r.offset for r in out] == list(range(100, 161))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in out] == [
        (r.key, r.value, list(r.headers), r.timestamp) for r in recs
    ]
    # sequences wrap from Int32.MAX to 0
    assert [r.sequence for r in out[:4]] == [2**31 - 3, 2**31 - 2, 2**31 - 1, 0]
    assert batch.last_sequence == 57


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_round_trip(magic, codec):
    recs = [R.SimpleRecord(b"value-%d" % i, b"key" if i % 2 else None, (), 5000 + i) for i in range(20)]
    data = R.build_legacy_message_set(recs, magic=magic, codec=codec, base_offset=300)
    batches = list(R.iter_batches(data))
    assert len(batches) == (20 if codec == 0 else 1)
    for b in batches:
        b.ensure_valid()
    out = [r for b in batches for r in b.records()]
    assert [r.offset for r in out] == list(range(300, 320))
    assert [(r.key, r.value) for r in out] == [(r.key, r.value) for r in recs]
    assert all(r.is_valid for r in out)
    if magic == 1:
        assert [r.timestamp for r in out] == [5000 + i for i in range(20)]
    else:
        assert all(r.timestamp == -1 for r in out)
    if codec:
        assert batches[0].last_offset == 319 and batches[0].base_offset == 300 and batches[0].count == 20


def test_legacy_log_append_time_wrapper_stamps_inner_records():
    recs = [R.SimpleRecord(b"x", None, (), 5) for _ in range(3)]
    data = R.build_legacy_message_set(recs, magic=1, codec=compression.GZIP, log_append_time=777)
    b = R.read_batch(data)
    assert b.timestamp_type == R.LOG_APPEND_TIME
    assert [r.timestamp for r in b.records()] == [777, 777, 777]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [1, 2, 3])
def test_legacy_wrapper_of_records_with_gaps(magic, codec):
    """encode_legacy_wrapper (MemoryRecordsBuilder of a legacy codec): the offsets of a compacted
    batch, gaps and all; inner v1 offsets relative to the first, the wrapper's the last."""
    entries = [(100, 7, b"a", b"1"), (103, 9, None, b"2"), (110, 8, b"c", None)]
    data = R.encode_legacy_wrapper(magic, codec, entries)
    (w,) = R.iter_batches(data)
    w.ensure_valid()
    assert (w.magic, w.codec, w.offset, w.timestamp) == (magic, codec, 110, 9 if magic else R.NO_TIMESTAMP)
    out = list(w.records())
    assert [(r.offset, r.key, r.value) for r in out] == [(o, k, v) for o, _, k, v in entries]
    if magic == 1:
        assert [r.timestamp for r in out] == [7, 9, 8]
    inner = list(R.iter_batches(compression.decompress(codec, w.key_value()[1], magic=magic)))
    assert [m.offset for m in inner] == ([0, 3, 10] if magic == 1 else [100, 103, 110])


def test_control_batch():
    b = R.build_control_batch(
        R.COMMIT, base_offset=10, producer_id=4, producer_epoch=2, coordinator_epoch=9, timestamp=123
    )
    batch = R.read_batch(b)
    batch.ensure_valid()
    assert batch.is_control and batch.is_transactional and batch.base_sequence == -1
    (rec,) = list(batch.records())
    marker = R.parse_control_record(rec)
    assert (marker.type_name, marker.coordinator_epoch, marker.version) == ("COMMIT", 9, 0)


def test_empty_batch_and_gaps_after_compaction():
    b = R.build_record_batch(
        [], base_offset=50, last_offset_delta=9, producer_id=3, producer_epoch=0, base_sequence=0
    )
    batch = R.read_batch(b)
    batch.ensure_valid()
    assert batch.count == 0 and batch.last_offset == 59 and list(batch.records()) == []
    assert batch.base_timestamp == -1
    b = R.build_record_batch([b"a", b"b"], base_offset=50, offset_deltas=[2, 7], last_offset_delta=9)
    out = list(R.read_batch(b).records())
    assert [r.offset for r in out] == [52, 57]


def test_delete_horizon():
    b = R.build_record_batch([R.SimpleRecord(None, b"k", (), 900)], delete_horizon_ms=1000)
    batch = R.read_batch(b)
    assert batch.delete_horizon_ms == 1000 and batch.has_delete_horizon
    (rec,) = list(batch.records())
    assert rec.timestamp == 900 and rec.timestamp_delta == -100


def test_in_place_rewrites_keep_crc_valid():
    b = bytearray(R.build_record_batch([b"a", b"b"], codec=compression.LZ4))
    R.set_base_offset(b, 0, 12345)
    R.set_partition_leader_epoch(b, 0, 6)
    batch = R.read_batch(bytes(b))
    assert batch.base_offset == 12345 and batch.partition_leader_epoch == 6 and batch.is_valid()
    R.set_log_append_time(b, 0, 99999)
    batch = R.read_batch(bytes(b))
    assert batch.is_valid() and batch.timestamp_type == R.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [99999, 99999]


def test_read_batch_end_of_data_rules():
    b = R.build_record_batch([b"a"])
    assert R.read_batch(b[:16]) is None  # fewer than 17 bytes
    assert R.read_batch(b[:-1]) is None  # entry past EOF = end of data
    bad = bytearray(b)
    struct.pack_into(">i", bad, 8, 13)
    with pytest.raises(R.CorruptRecordError) as e:
        R.read_batch(bytes(bad))
    assert e.value.kind == "bad_length" and e.value.position == 0
    bad = bytearray(b)
    bad[16] = 3
    with pytest.raises(R.CorruptRecordError) as e:
        R.read_batch(bytes(bad))
    assert e.value.kind == "bad_magic" and e.value.position == 16


def test_find_next_valid_batch_resynchronises():
    batches = [R.build_record_batch([b"x" * 50] * 3, base_offset=i * 3) for i in range(4)]
    data = bytearray(b"".join(batches))
    data[len(batches[0]) + 30] ^= 0xFF  # damage batch 1
    second_start = len(batches[0])
    found = R.find_next_valid_batch(bytes(data), second_start + 1)
    assert found is not None and found.position == second_start + len(batches[1]) and found.base_offset == 6
    garbage = b"\x02" * 100 + b"\x00" * 50
    assert R.find_next_valid_batch(garbage, 0) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 3))
def test_random_bytes_only_raise_format_errors(blob, start):
    try:
        for batch in R.iter_batches(blob, min(start, len(blob))):
            batch.is_valid()
            for _ in batch.records(max_size=1 << 20):
                pass
    except FormatError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_batches_only_raise_format_errors(data):
    codec = data.draw(st.sampled_from([0, 1, 2, 3, 4]))
    magic = data.draw(st.sampled_from([0, 1, 2]))
    recs = [
        R.SimpleRecord(b"v%d" % i * i, b"k", [("h", b"1")] if magic == 2 else (), 10 + i) for i in range(8)
    ]
    if magic == 2:
        blob = bytearray(R.build_record_batch(recs, codec=codec))
    else:
        blob = bytearray(R.build_legacy_message_set(recs, magic=magic, codec=min(codec, 3)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    try:
        for batch in R.iter_batches(bytes(blob[:cut])):
            batch.is_valid()
            for _ in batch.records(max_size=1 << 20):
                pass
    except FormatError:
        pass


# ---------------------------------------------------------------- header keys that are not UTF-8


def header_keys_on_the_wire(raw: bytes) -> list[bytes]:
    """The header keys' bytes of every record, read by hand from the record layout."""
    from kafkatool.formats.varint import read_zz32, read_zz64

    b = R.read_batch(raw)
    data = bytes(b.record_data())
    pos, out = 0, []
    for _ in range(b.records_count):
        length, pos = read_zz32(data, pos, len(data))
        end = pos + length
        _, p = read_zz64(data, pos + 1, end)
        _, p = read_zz32(data, p, end)
        for _field in ("key", "value"):
            n, p = read_zz32(data, p, end)
            p += max(n, 0)
        count, p = read_zz32(data, p, end)
        for _ in range(count):
            n, p = read_zz32(data, p, end)
            out.append(data[p : p + n])
            p += n
            n, p = read_zz32(data, p, end)
            p += max(n, 0)
        pos = end
    return out


def test_a_header_key_that_is_not_utf8_is_read_as_kafka_reads_it():
    """DefaultRecord.readHeaders never refuses a key (RecordHeader.key is Java's String of the
    bytes, U+FFFD for each malformed sequence).  The decoder keeps the bytes (surrogate
    escapes), kafka_header_key gives Kafka's String."""
    keys = [b"a\xffb", b"\xed\xa0\x80", "caf\u00e9".encode(), b""]
    raw = R.build_record_batch([R.SimpleRecord(b"v", b"k", [(k, b"x") for k in keys], 1_000)])
    assert header_keys_on_the_wire(raw) == keys  # bytes keys are written as they are
    b = R.read_batch(raw)
    assert b.is_valid()
    (r,) = b.records()
    assert [R.header_key_bytes(k) for k, _ in r.headers] == keys
    assert [R.kafka_header_key(k) for k, _ in r.headers] == ["a\ufffdb", "\ufffd", "caf\u00e9", ""]
    assert [v for _, v in r.headers] == [b"x"] * 4


def test_a_rebuilt_record_writes_such_a_key_as_kafka_writes_it():
    """DefaultRecord.writeTo writes Utils.utf8(header.key()): a record Kafka rebuilds (the
    cleaner's partial batches, a recompression) carries U+FFFD's UTF-8 where the key's bytes
    were not UTF-8; so does ours.  Keys that are UTF-8 come back as they were."""
    keys = [b"a\xffb", b"\xed\xa0\x80", "caf\u00e9".encode(), b"ok"]
    raw = R.build_record_batch([R.SimpleRecord(b"v", b"k", [(k, None) for k in keys], 1_000)])
    rebuilt = R.build_record_batch(list(R.read_batch(raw).records()), codec=compression.GZIP)
    assert header_keys_on_the_wire(rebuilt) == [b"a\xef\xbf\xbdb", b"\xef\xbf\xbd", keys[2], b"ok"]
    (r,) = R.read_batch(rebuilt).records()
    assert r.headers == [("a\ufffdb", None), ("\ufffd", None), ("caf\u00e9", None), ("ok", None)]


@pytest.mark.parametrize(
    "tail, message",
    [
        (b"\x64", "invalid header count 50"),  # 50 headers, no byte left
        (b"\x01", "invalid header count -1"),
        (b"\x02\x01", "invalid header key length -1"),
        (b"\x02\x08ab\x00", "invalid header key length 4"),  # the key runs past the record
        (b"\x02\x02a\x08xy", "header value runs past the record"),
    ],
)
def test_header_structure_errors(tail, message):
    """Kafka's readFrom rules on the headers, with the position of the field: its
    InvalidRecordException (a produce's INVALID_RECORD), a corrupt record to verify."""
    body = b"\x00\x00\x00\x02k\x02v" + tail
    rec = write_uvarint(zigzag32(len(body))) + body
    good = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), 0)], base_timestamp=0)
    head = bytearray(good[:61])
    struct.pack_into(">i", head, 8, 49 + len(rec))
    struct.pack_into(">I", head, 17, crc32c(bytes(head[21:]) + rec))
    b = R.read_batch(bytes(head) + rec)
    assert b.is_valid()
    with pytest.raises(InvalidRecordError) as e:
        list(b.records())
    assert (e.value.message, e.value.kind) == (message, "corrupt_record")
    assert 61 < e.value.position <= 61 + len(rec)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.ZSTD])
def test_skip_key_value_records_match_the_decoded_records(codec, partial):
    """Signed timestamp deltas (a first record later than the others), null and empty keys and
    values, headers, LogAppendTime: both readers see what the decoder sees."""
    stamps = [5000, 1000, -1, 9000, 4000]
    keys = [b"k", None, b"", b"key", None]
    values = [b"v" * 70, b"", None, b"v", b"vv"]
    recs = [
        R.SimpleRecord(v, k, [("h", b"1")] * (i % 3), ts)
        for i, (k, v, ts) in enumerate(zip(keys, values, stamps, strict=True))
    ]
    data = bytearray(R.build_record_batch(recs, codec=codec, base_offset=7))
    b = R.RecordBatch(data)
    sizes = [
        (r.offset, r.timestamp, -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value))
        for r in b.records()
    ]
    assert list(R.skip_key_value_records(b, partial=partial)) == sizes
    assert [ts for _, ts, _, _ in sizes] == stamps
    R.set_log_append_time(data, 0, 123)
    assert [ts for _, ts, _, _ in R.skip_key_value_records(R.RecordBatch(data), partial=partial)] == [123] * 5


def v2_batch(area: bytes, count: int, codec: int = compression.GZIP, attributes: int = 0) -> bytes:
    """A v2 batch of ``count`` records whose record area is ``area`` as given (already compressed
    for a ``codec``), its CRC right."""
    out = bytearray(R.build_record_batch([R.SimpleRecord(b"v", b"k", (), 1_700_000_000_000)])[:61] + area)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">hi", out, 21, codec | attributes, count - 1)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def field_batch(area: bytes, count: int, codec: int) -> R.RecordBatch:
    """A v2 batch of ``count`` records whose record area is ``area`` (compressed with ``codec``)."""
    return R.RecordBatch(
        v2_batch(area if codec == compression.NONE else compression.compress(codec, area), count, codec)
    )


def record(fields: bytes, length: int | None = None) -> bytes:
    return write_uvarint(zigzag32(len(fields) if length is None else length)) + fields


FIELDS = b"\x00\x00\x00\x04k0\x04v0\x00"  # attributes, deltas 0, key "k0", value "v0", no header


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_read_from_holds_a_record_to_its_length_read_partially_from_does_not(codec):
    """DefaultRecord.readFrom refuses a record whose fields do not end at its declared length;
    readPartiallyFrom (a compressed batch Kafka keeps in place) reads the fields one after the
    other and never looks at it, so the next record is read where the fields ended."""
    for length in (len(FIELDS) + 2, len(FIELDS) - 2, -1):
        b = field_batch(record(FIELDS, length) + record(FIELDS), 2, codec)
        with pytest.raises(InvalidRecordError):
            list(R.skip_key_value_records(b, partial=False))
        assert list(R.skip_key_value_records(b, partial=True)) == [(0, b.base_timestamp, 2, 2)] * 2
    # bytes left after the last record's fields: readFrom's length check inside its length,
    # ensureNoneRemaining after it, and for readPartiallyFrom always the latter
    for area, inside in ((record(FIELDS + b"\0"), True), (record(FIELDS) + b"\0", False)):
        b = field_batch(record(FIELDS) + area, 2, codec)
        for partial in (False, True):
            with pytest.raises(InvalidRecordError) as e:
                list(R.skip_key_value_records(b, partial=partial))
            assert ("records still remaining" in e.value.message) == (partial or not inside)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize(
    "fields",
    [
        b"\x00\x00\x00\x50k0\x04v0\x00",  # a key of 40 bytes
        b"\x00\x00\x00\x04k0\x50v0\x00",  # a value of 40 bytes
        b"\x00\x00\x00\x04k0\x04v0\x64",  # 50 headers
        b"\x00\x00\x00\x04k0\x04v0\x01",  # -1 headers
        b"\x00\x00\x00\x04k0\x04v0\x02\x01\x00",  # a header key of length -1
        b"\x00\x00\x00\x04k0\x04v0\x02\x50hk\x00",  # a header key of 40 bytes
        b"\x00\x00\x00\x04k0\x04v0\x02\x04hk\x50",  # a header value of 40 bytes
        b"\x00\x00\x00\x04k0\x04v0",  # no header count
        b"\x00",  # attributes only
    ],
)
def test_a_field_past_the_batch_is_invalid_record_for_both_readers(fields, partial):
    for codec in (compression.NONE, compression.GZIP):
        b = field_batch(record(fields), 1, codec)
        with pytest.raises(InvalidRecordError):
            list(R.skip_key_value_records(b, partial=partial))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_read_from_refuses_the_records_the_decoder_refuses(data):
    """The walk's readFrom (``partial=False``) and the decoder hold a record to the same rules:
    on a mutated record area one refuses what the other refuses (the decoder also refuses a
    length varint longer than 5 bytes, as InvalidRecordError), and where both read, they read the
    same offsets, timestamps and sizes (any negative size a null)."""
    codec = data.draw(st.sampled_from([compression.NONE, compression.GZIP]))
    recs = [
        R.SimpleRecord(b"v" * i, b"k%d" % i if i % 3 else None, [("h", b"1")] * (i % 2), 10 + i)
        for i in range(6)
    ]
    area = bytearray(R.build_record_batch(recs)[61:])
    for _ in range(data.draw(st.integers(1, 3))):
        area[data.draw(st.integers(0, len(area) - 1))] = data.draw(st.integers(0, 255))
    b = field_batch(bytes(area), data.draw(st.integers(5, 7)), codec)
    try:
        decoded = [
            (
                r.offset,
                r.timestamp,
                -1 if r.key is None else len(r.key),
                -1 if r.value is None else len(r.value),
            )
            for r in b.records()
        ]
    except InvalidRecordError:
        decoded = None
    try:
        walked = [
            (o, ts, max(k, -1), max(v, -1)) for o, ts, k, v in R.skip_key_value_records(b, partial=False)
        ]
    except (InvalidRecordError, IllegalArgumentError):
        walked = None
    assert walked == decoded


def test_a_record_length_varint_too_long_is_illegal_argument_only_uncompressed():
    """ByteUtils.readVarint's IllegalArgumentException: the uncompressed iterator catches only a
    BufferUnderflowException, StreamRecordIterator makes it InvalidRecordException."""
    area = b"\xff" * 5 + FIELDS
    with pytest.raises(IllegalArgumentError):
        list(R.skip_key_value_records(field_batch(area, 1, compression.NONE), partial=False))
    for partial in (False, True):
        with pytest.raises(InvalidRecordError):
            list(R.skip_key_value_records(field_batch(area, 1, compression.GZIP), partial=partial))
    with pytest.raises(InvalidRecordError) as e:  # RecordIterator's constructor
        list(R.skip_key_value_records(field_batch(record(FIELDS), -1, compression.NONE), partial=False))
    assert e.value.message == "Found invalid record count -1 in magic v2 batch"


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_header_key_positions_are_asked_for_not_kept(codec):
    """walk_headers' key_at (verify's header key findings): every key's byte position, record
    after record, in the coordinates of Record.position (the buffer's, or the decompressed
    stream's); the decoder keeps none without it."""
    recs = [
        R.SimpleRecord(b"v", b"k0", [("a", b"1"), (b"\xff\xfe", None)], 5),
        R.SimpleRecord(b"v", b"k1", (), 5),
        R.SimpleRecord(b"v", b"k2", [("long-key-" * 10, b"")], 5),
    ]
    pad = b"\x00" * 7
    buf = pad + R.build_record_batch(recs, codec=codec)
    b = R.read_batch(buf, len(pad))
    key_at: list[int] = []
    got = list(b.records(key_at=key_at))
    assert got == list(b.records())
    stream = bytes(buf) if codec == compression.NONE else bytes(b.record_data())
    keys = [R.header_key_bytes(k) for r in got for k, _ in r.headers]
    assert len(key_at) == len(keys) == 3
    assert [stream[p : p + len(k)] for p, k in zip(key_at, keys, strict=True)] == keys


@settings(max_examples=200, deadline=None)
@given(
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**63), 2**63 - 1),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=20000),
    headers=st.lists(
        st.tuples(st.text(max_size=20) | st.binary(max_size=20), st.none() | st.binary(max_size=200)),
        max_size=5,
    ),
)
def test_record_size_is_the_encoded_length(offset_delta, timestamp_delta, key, value, headers):
    """DefaultRecord.sizeInBytes (what the producer batches by) against what writeTo writes."""
    encoded = R.encode_record_v2(offset_delta, timestamp_delta, key, value, headers)
    assert R.record_v2_size(offset_delta, timestamp_delta, key, value, headers) == len(encoded)
    rec = next(iter(R.RecordBatch(R.build_record_batch([R.SimpleRecord(value, key, headers, 5)])).records()))
    assert (rec.key, rec.value) == (key, value)
