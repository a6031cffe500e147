"""Producer-state snapshot codec (storage.md §2.6)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import FormatError, TruncatedError
from kafkatool.formats.snapshot import (
    ENTRY_SIZE,
    ProducerSnapshotEntry,
    SnapshotCrcError,
    SnapshotVersionError,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
)

ENTRY = ProducerSnapshotEntry(
    producer_id=4000,
    producer_epoch=3,
    last_sequence=41,
    last_offset=1234,
    offset_delta=9,
    timestamp=1_700_000_000_000,
    coordinator_epoch=7,
    current_txn_first_offset=-1,
)

# The entry above, laid out by hand (46 bytes).
ENTRY_BYTES = (
    b"\x00\x00\x00\x00\x00\x00\x0f\xa0"  # producerId 4000
    + b"\x00\x03"  # producerEpoch 3
    + b"\x00\x00\x00\x29"  # lastSequence 41
    + b"\x00\x00\x00\x00\x00\x00\x04\xd2"  # lastOffset 1234
    + b"\x00\x00\x00\x09"  # offsetDelta 9
    + b"\x00\x00\x01\x8b\xcf\xe5\x68\x00"  # timestamp 1700000000000
    + b"\x00\x00\x00\x07"  # coordinatorEpoch 7
    + b"\xff\xff\xff\xff\xff\xff\xff\xff"  # currentTxnFirstOffset -1
)


def _file(body_after_crc: bytes, version: bytes = b"\x00\x01") -> bytes:
    return version + struct.pack(">I", crc32c(body_after_crc)) + body_after_crc


def test_entry_layout_is_46_bytes():
    assert len(ENTRY_BYTES) == ENTRY_SIZE == 46


def test_empty_snapshot_exact_bytes():
    # CRC-32C of four zero bytes (the count) is 0x48674BC7.
    assert encode_snapshot([]) == b"\x00\x01" + b"\x48\x67\x4b\xc7" + b"\x00\x00\x00\x00"
    assert decode_snapshot(b"\x00\x01\x48\x67\x4b\xc7\x00\x00\x00\x00") == []


def test_one_entry_exact_bytes():
    expected = _file(b"\x00\x00\x00\x01" + ENTRY_BYTES)
    assert encode_snapshot([ENTRY]) == expected
    assert decode_snapshot(expected) == [ENTRY]


def test_crc_mismatch_detected_with_position_and_forensic_read():
    good = bytearray(encode_snapshot([ENTRY, ENTRY]))
    good[30] ^= 0x40  # inside the first entry
    with pytest.raises(SnapshotCrcError) as info:
        decode_snapshot(bytes(good))
    err = info.value
    assert err.kind == "crc_mismatch" and err.position == 2 and isinstance(err, FormatError)
    # forensic view: entries still there, CRC reported as bad
    result = read_snapshot(bytes(good))
    assert not result.ok and not result.crc_ok and result.count == 2 and len(result.entries) == 2
    assert result.stored_crc == struct.unpack(">I", bytes(good[2:6]))[0]
    assert result.computed_crc == crc32c(bytes(good[6:]))
    assert decode_snapshot(bytes(good), verify_crc=False) == result.entries


def test_crc_field_itself_corrupt():
    data = bytearray(encode_snapshot([ENTRY]))
    data[3] ^= 1
    with pytest.raises(SnapshotCrcError):
        decode_snapshot(bytes(data))
    assert decode_snapshot(bytes(data), verify_crc=False) == [ENTRY]


def test_unknown_version():
    data = _file(b"\x00\x00\x00\x01" + ENTRY_BYTES, version=b"\x00\x02")
    with pytest.raises(SnapshotVersionError) as info:
        decode_snapshot(data)
    assert info.value.kind == "bad_version" and info.value.position == 0
    with pytest.raises(SnapshotVersionError):
        decode_snapshot(data, verify_crc=False)
    assert read_snapshot(data).entries == [ENTRY] and read_snapshot(data).crc_ok


def test_truncated_entries():
    data = encode_snapshot([ENTRY, ENTRY])[:-10]
    with pytest.raises(TruncatedError) as info:
        decode_snapshot(data)
    assert info.value.kind == "truncated" and info.value.position == 10 + 46
    result = read_snapshot(data)
    assert result.entries == [ENTRY] and result.count == 2 and not result.ok


@pytest.mark.parametrize("n", [0, 1, 5, 9])
def test_truncated_header(n):
    data = encode_snapshot([ENTRY])[:n]
    with pytest.raises(TruncatedError) as info:
        decode_snapshot(data)
    assert info.value.position == n
    assert read_snapshot(data).entries == []


def test_negative_count():
    data = _file(b"\xff\xff\xff\xff")
    with pytest.raises(FormatError) as info:
        decode_snapshot(data)
    assert info.value.position == 6


def test_trailing_bytes_are_covered_by_the_crc():
    body = b"\x00\x00\x00\x01" + ENTRY_BYTES + b"junk"
    assert decode_snapshot(_file(body)) == [ENTRY]
    assert read_snapshot(_file(body)).trailing_bytes == 4
    # Stale bytes left behind a shorter rewrite (the writer does not truncate) break the CRC.
    stale = encode_snapshot([ENTRY]) + b"junk"
    with pytest.raises(SnapshotCrcError):
        decode_snapshot(stale)


def test_entry_helpers():
    assert ENTRY.first_sequence == 32 and ENTRY.first_offset == 1225 and ENTRY.has_batch_metadata
    wrapped = ProducerSnapshotEntry(1, 0, last_sequence=2, last_offset=10, offset_delta=5)
    assert wrapped.first_sequence == 2**31 - 1 - 3 + 1
    bare = ProducerSnapshotEntry(2, 0)
    assert (bare.last_sequence, bare.last_offset, bare.offset_delta) == (-1, -1, 0)
    assert not bare.has_batch_metadata and not bare.has_open_transaction
    assert ProducerSnapshotEntry(3, 0, current_txn_first_offset=5).has_open_transaction


i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
entries = st.builds(ProducerSnapshotEntry, i64, i16, i32, i64, i32, i64, i32, i64)


@settings(max_examples=200, deadline=None)
@given(st.lists(entries, max_size=20))
def test_round_trip(items):
    data = encode_snapshot(items)
    assert len(data) == 10 + 46 * len(items)
    assert decode_snapshot(data) == items
    assert read_snapshot(bytearray(data)).ok


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_format_error(data):
    try:
        decode_snapshot(data)
    except FormatError as exc:
        assert exc.position is not None
    result = read_snapshot(data)
    assert result.ok == (result.error is None)


@settings(max_examples=200, deadline=None)
@given(st.lists(entries, min_size=1, max_size=5), st.data())
def test_truncation_or_bit_flip_always_detected(items, data):
    good = encode_snapshot(items)
    cut = data.draw(st.integers(0, len(good) - 1))
    with pytest.raises(FormatError):
        decode_snapshot(good[:cut])
    pos = data.draw(st.integers(0, len(good) - 1))
    flipped = bytearray(good)
    flipped[pos] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(FormatError):
        decode_snapshot(bytes(flipped))
