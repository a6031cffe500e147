"""Offset, time and transaction index codecs (storage.md §2.3-2.5)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats import index as ix
from kafkatool.formats.errors import FormatError

BASE = 1000

# ---------------------------------------------------------------------------
# hand-built bytes


def test_offset_entry_exact_bytes():
    assert ix.encode_offset_entry(5, 4096) == b"\x00\x00\x00\x05\x00\x00\x10\x00"
    assert ix.OFFSET_ENTRY_SIZE == 8


def test_offset_index_exact_bytes_relative_to_base():
    data = ix.encode_offset_index([(1005, 4096), (1300, 0x01020304)], BASE)
    assert data == b"\x00\x00\x00\x05\x00\x00\x10\x00" + b"\x00\x00\x01\x2c\x01\x02\x03\x04"


def test_time_entry_exact_bytes():
    assert ix.encode_time_entry(0x0102030405060708, 7) == bytes(range(1, 9)) + b"\x00\x00\x00\x07"
    assert ix.TIME_ENTRY_SIZE == 12
    data = ix.encode_time_index([(0x10, 1002)], BASE)
    assert data == b"\x00" * 7 + b"\x10" + b"\x00\x00\x00\x02"


def test_decode_entries_from_hand_bytes_ignores_partial():
    buf = b"\x00\x00\x00\x05\x00\x00\x10\x00" + b"\x00\x00\x00\x09\x00\x00\x20\x00" + b"\x00\x00\x01"
    assert ix.decode_offset_entries(buf) == [(5, 4096), (9, 8192)]
    tbuf = bytes(range(1, 9)) + b"\x00\x00\x00\x07" + b"\xff"
    assert ix.decode_time_entries(tbuf) == [(0x0102030405060708, 7)]
    assert ix.decode_offset_entries(memoryview(bytearray(buf))) == [(5, 4096), (9, 8192)]


# ---------------------------------------------------------------------------
# offset index scan


def _off(*pairs) -> bytes:
    return b"".join(struct.pack(">ii", r, p) for r, p in pairs)


def test_scan_stops_at_preallocated_zero_tail():
    buf = _off((3, 100), (8, 4200)) + bytes(8 * 100)
    scan = ix.scan_offset_index(buf, BASE)
    assert scan.entries == [(1003, 100), (1008, 4200)]
    assert scan.reason == ix.STOP_ZERO_TAIL
    assert scan.stop_slot == 2 and scan.stop_position == 16
    assert scan.tail_zero and scan.clean
    assert scan.slots == 102 and scan.partial_bytes == 0
    assert scan.last_offset == 1008


def test_scan_zero_slot_followed_by_garbage_is_not_a_clean_tail():
    buf = _off((3, 100), (0, 0), (0, 0), (9, 5000))
    scan = ix.scan_offset_index(buf, BASE)
    assert scan.entries == [(1003, 100)]
    assert scan.reason == ix.STOP_ZERO_SLOT
    assert scan.stop_slot == 1 and not scan.tail_zero and not scan.clean


def test_scan_stops_where_offsets_do_not_increase():
    buf = _off((3, 100), (7, 200), (7, 300), (9, 400))
    scan = ix.scan_offset_index(buf, BASE)
    assert [e.offset for e in scan.entries] == [1003, 1007]
    assert scan.reason == ix.STOP_OFFSET_NOT_INCREASING and scan.stop_slot == 2 and scan.stop_position == 16


def test_scan_relative_zero_after_first_slot_stops_like_dump_log_segments():
    scan = ix.scan_offset_index(_off((3, 100), (0, 500)), BASE)
    assert scan.entries == [(1003, 100)]
    assert scan.reason == ix.STOP_OFFSET_NOT_INCREASING and scan.stop_slot == 1


def test_scan_negative_values():
    scan = ix.scan_offset_index(_off((-1, 100), (3, 200)), BASE)
    assert scan.entries == [] and scan.reason == ix.STOP_NEGATIVE_OFFSET and scan.stop_slot == 0
    scan = ix.scan_offset_index(_off((2, 100), (3, -5)), BASE)
    assert scan.entries == [(1002, 100)] and scan.reason == ix.STOP_NEGATIVE_POSITION and scan.stop_slot == 1


def test_scan_reports_partial_entry_instead_of_crashing():
    buf = _off((3, 100), (8, 200)) + b"\x00\x00\x00\x09\x00"
    scan = ix.scan_offset_index(buf, BASE)
    assert scan.entries == [(1003, 100), (1008, 200)]
    assert scan.reason == ix.STOP_END and scan.stop_slot is None
    assert scan.partial_bytes == 5 and scan.partial_position == 16
    assert not scan.tail_zero and not scan.clean


def test_scan_partial_zero_bytes_after_zero_tail():
    scan = ix.scan_offset_index(_off((3, 100)) + bytes(8 * 3 + 3), BASE)
    assert scan.reason == ix.STOP_ZERO_TAIL and scan.tail_zero
    assert scan.partial_bytes == 3 and not scan.clean


def test_scan_all_zero_file_trusts_only_slot_zero():
    # Kafka reads slot 0 as (base, 0) whatever it holds; every later zero slot is the tail.
    scan = ix.scan_offset_index(bytes(ix.max_index_size(ix.DEFAULT_SEGMENT_INDEX_BYTES, 8)), BASE)
    assert scan.entries == [(BASE, 0)]
    assert scan.reason == ix.STOP_ZERO_TAIL and scan.stop_slot == 1 and scan.slots == 1_310_720


def test_scan_empty_and_single_slot():
    scan = ix.scan_offset_index(b"", BASE)
    assert scan.entries == [] and scan.reason == ix.STOP_END and scan.clean and scan.last_offset == BASE
    scan = ix.scan_offset_index(bytes(8), BASE)
    assert scan.entries == [(BASE, 0)] and scan.reason == ix.STOP_END


def test_scan_full_preallocated_index_with_many_entries():
    n = 200_000
    body = b"".join(struct.pack(">ii", 2 * i + 1, 100 * i) for i in range(n))
    buf = bytearray(ix.max_index_size(ix.DEFAULT_SEGMENT_INDEX_BYTES, ix.OFFSET_ENTRY_SIZE))
    buf[: len(body)] = body
    scan = ix.scan_offset_index(buf, BASE)
    assert len(scan) == n and scan.reason == ix.STOP_ZERO_TAIL and scan.stop_slot == n
    assert scan.entry(n - 1) == (BASE + 2 * n - 1, 100 * (n - 1))
    assert scan.lookup(BASE + 2 * 777 + 1) == (BASE + 2 * 777 + 1, 77_700)
    assert scan.lookup(BASE + 2 * 777 + 2) == (BASE + 2 * 777 + 1, 77_700)


def test_offset_lookup_rules():
    entries = [ix.OffsetPosition(1005, 400), ix.OffsetPosition(1010, 900)]
    assert ix.lookup_offset(entries, 1004, BASE) == (BASE, 0)
    assert ix.lookup_offset(entries, 1005, BASE) == (1005, 400)
    assert ix.lookup_offset(entries, 1009, BASE) == (1005, 400)
    assert ix.lookup_offset(entries, 99999, BASE) == (1010, 900)
    assert ix.lookup_offset([], 1005, BASE) == (BASE, 0)
    scan = ix.scan_offset_index(ix.encode_offset_index(entries, BASE), BASE)
    for target in (0, 1004, 1005, 1009, 1010, 5000):
        assert scan.lookup(target) == ix.lookup_offset(entries, target, BASE)


# ---------------------------------------------------------------------------
# time index scan


def _time(*pairs) -> bytes:
    return b"".join(struct.pack(">qi", t, r) for t, r in pairs)


def test_time_scan_zero_tail_and_lookup():
    buf = _time((1_700_000_000_000, 4), (1_700_000_000_500, 9)) + bytes(12 * 10)
    scan = ix.scan_time_index(buf, BASE)
    assert scan.entries == [(1_700_000_000_000, 1004), (1_700_000_000_500, 1009)]
    assert scan.reason == ix.STOP_ZERO_TAIL and scan.stop_slot == 2 and scan.stop_position == 24
    assert scan.lookup(1_699_999_999_999) == (-1, BASE)
    assert scan.lookup(1_700_000_000_000) == (1_700_000_000_000, 1004)
    assert scan.lookup(1_700_000_000_499) == (1_700_000_000_000, 1004)
    assert scan.lookup(2**62) == (1_700_000_000_500, 1009)
    assert scan.last_entry == (1_700_000_000_500, 1009)
    assert ix.lookup_timestamp(scan.entries, 5, BASE) == (-1, BASE)
    assert ix.lookup_timestamp(scan.entries, 1_700_000_000_600, BASE) == (1_700_000_000_500, 1009)


def test_time_scan_stop_reasons():
    s = ix.scan_time_index(_time((10, 1), (10, 2)), BASE)
    assert s.reason == ix.STOP_TIMESTAMP_NOT_INCREASING and s.stop_slot == 1 and s.entries == [(10, 1001)]
    s = ix.scan_time_index(_time((10, 5), (20, 4)), BASE)
    assert s.reason == ix.STOP_OFFSET_DECREASING and s.stop_slot == 1
    s = ix.scan_time_index(_time((10, 5), (20, 5)), BASE)  # offsets may repeat, timestamps may not
    assert s.reason == ix.STOP_END and len(s) == 2
    s = ix.scan_time_index(_time((-1, 0)), BASE)
    assert s.reason == ix.STOP_NEGATIVE_TIMESTAMP and s.entries == [] and s.last_entry == (-1, BASE)
    s = ix.scan_time_index(_time((10, -3)), BASE)
    assert s.reason == ix.STOP_NEGATIVE_OFFSET
    s = ix.scan_time_index(_time((10, 5), (0, 0), (30, 9)), BASE)
    assert s.reason == ix.STOP_ZERO_SLOT and not s.tail_zero
    s = ix.scan_time_index(_time((10, 5)) + b"\x01\x02", BASE)
    assert s.reason == ix.STOP_END and s.partial_bytes == 2 and not s.clean


def test_time_scan_first_slot_zero_is_trusted():
    s = ix.scan_time_index(bytes(12 * 5), BASE)
    assert s.entries == [(0, BASE)] and s.reason == ix.STOP_ZERO_TAIL and s.stop_slot == 1


# ---------------------------------------------------------------------------
# sizes


def test_preallocation_sizes():
    assert ix.max_index_size(10_485_760, ix.OFFSET_ENTRY_SIZE) == 10_485_760
    assert ix.max_index_size(10_485_760, ix.TIME_ENTRY_SIZE) == 10_485_756
    assert ix.max_entries(10_485_760, ix.OFFSET_ENTRY_SIZE) == 1_310_720
    assert ix.max_entries(10_485_760, ix.TIME_ENTRY_SIZE) == 873_813
    assert ix.max_index_size(1001, 8) == 1000
    with pytest.raises(ValueError):
        ix.max_index_size(7, 8)


def test_full_rules():
    assert not ix.offset_index_is_full(9, 10) and ix.offset_index_is_full(10, 10)
    assert not ix.time_index_is_full(8, 10) and ix.time_index_is_full(9, 10)


def test_relative_offset_overflow():
    assert ix.relative_offset(BASE, BASE + 2**31 - 1) == 2**31 - 1
    with pytest.raises(ix.IndexOffsetOverflowError) as info:
        ix.relative_offset(BASE, BASE + 2**31)
    assert isinstance(info.value, FormatError) and info.value.kind == "index_overflow"
    with pytest.raises(ix.IndexOffsetOverflowError):
        ix.encode_offset_index([(BASE - 1, 0)], BASE)


# ---------------------------------------------------------------------------
# transaction index

TXN_HAND = (
    b"\x00\x00"  # version 0
    + b"\x00\x00\x00\x00\x00\x00\x00\x0a"  # producerId 10
    + b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # firstOffset 1000
    + b"\x00\x00\x00\x00\x00\x00\x03\xf2"  # lastOffset 1010
    + b"\x00\x00\x00\x00\x00\x00\x03\xf3"  # lastStableOffset 1011
)


def test_txn_entry_exact_bytes():
    assert len(TXN_HAND) == ix.TXN_ENTRY_SIZE == 34
    assert ix.encode_aborted_txn(10, 1000, 1010, 1011) == TXN_HAND
    assert ix.encode_txn_index([(10, 1000, 1010, 1011)]) == TXN_HAND
    assert ix.decode_txn_entries(TXN_HAND) == [ix.AbortedTxn(0, 10, 1000, 1010, 1011)]


def test_txn_version_read_from_first_byte_only():
    # Kafka reads buffer.get(0): the low byte of the int16 is never looked at, and a
    # negative first byte passes the "version > 0" check.
    low_byte_set = b"\x00\x07" + TXN_HAND[2:]
    assert ix.decode_txn_entries(low_byte_set)[0].version == 0
    negative = b"\xff\x00" + TXN_HAND[2:]
    assert ix.decode_txn_entries(negative)[0].version == -1
    assert ix.encode_txn_index(ix.decode_txn_entries(negative)) == b"\xff\xff" + TXN_HAND[2:]


def test_txn_unknown_version_raises_with_position():
    bad = b"\x01\x00" + TXN_HAND[2:]
    with pytest.raises(ix.TxnIndexError) as info:
        ix.decode_txn_entries(TXN_HAND + bad)
    assert info.value.position == 34 and info.value.kind == "bad_version"
    assert "at byte 34" in str(info.value)


def test_txn_partial_entry_and_sanity_problems():
    second = ix.encode_aborted_txn(11, 900, 995, 996)  # lastOffset below base and not increasing
    scan = ix.scan_txn_index(TXN_HAND + second + b"\x00\x00\x00", BASE)
    assert [t.producer_id for t in scan.entries] == [10, 11]
    assert scan.partial_bytes == 3 and not scan.clean
    positions = [p for p, _ in scan.problems]
    assert positions == [34, 34]
    assert ix.scan_txn_index(TXN_HAND, BASE).clean
    assert ix.decode_txn_entries(TXN_HAND[:20]) == []


# ---------------------------------------------------------------------------
# properties


def _reference_offset_scan(buf: bytes, base: int):
    """The rule written the slow, obvious way."""
    out = []
    prev = -1
    n = len(buf) // 8
    for i in range(n):
        rel, pos = struct.unpack_from(">ii", buf, 8 * i)
        if rel < 0 or pos < 0 or (i > 0 and rel <= prev):
            return out, i
        out.append((base + rel, pos))
        prev = rel
    return out, None


def _reference_time_scan(buf: bytes, base: int):
    out = []
    prev_ts = prev_rel = None
    n = len(buf) // 12
    for i in range(n):
        ts, rel = struct.unpack_from(">qi", buf, 12 * i)
        if (i > 0 and ts == 0 and rel == 0) or ts < 0 or rel < 0:
            return out, i
        if prev_ts is not None and (ts <= prev_ts or rel < prev_rel):
            return out, i
        out.append((ts, base + rel))
        prev_ts, prev_rel = ts, rel
    return out, None


increasing_offsets = st.lists(st.integers(1, 2**31 - 1), unique=True, max_size=60).map(sorted)


@settings(max_examples=150, deadline=None)
@given(increasing_offsets, st.data(), st.integers(0, 40))
def test_offset_index_round_trip_with_zero_tail(rels, data, tail):
    positions = data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=len(rels), max_size=len(rels)))
    entries = [(BASE + r, p) for r, p in zip(rels, positions, strict=True)]
    buf = ix.encode_offset_index(entries, BASE) + bytes(8 * tail)
    scan = ix.scan_offset_index(buf, BASE)
    # With no entries, slot 0 of a zero-filled file reads as (base, 0), as in Kafka.
    assert scan.entries == (entries or ([(BASE, 0)] if tail else []))
    assert ix.decode_offset_entries(buf)[: len(rels)] == [
        (r, p) for r, p in zip(rels, positions, strict=True)
    ]
    if tail and entries:
        assert scan.reason == ix.STOP_ZERO_TAIL and scan.stop_slot == len(entries)
    elif entries:
        assert scan.reason == ix.STOP_END
    assert scan.clean


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2**62), unique=True, max_size=60).map(sorted), st.data(), st.integers(0, 40))
def test_time_index_round_trip_with_zero_tail(timestamps, data, tail):
    rels = sorted(
        data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=len(timestamps), max_size=len(timestamps)))
    )
    entries = [(t, BASE + r) for t, r in zip(timestamps, rels, strict=True)]
    buf = ix.encode_time_index(entries, BASE) + bytes(12 * tail)
    scan = ix.scan_time_index(buf, BASE)
    assert scan.entries == (entries or ([(0, BASE)] if tail else []))
    assert scan.clean
    if entries:
        assert scan.reason == (ix.STOP_ZERO_TAIL if tail else ix.STOP_END)


def _mixed_buffer(entry_size: int):
    # Realistic prefixes (valid entries) followed by junk, zeros or nothing.
    return st.tuples(
        st.lists(st.integers(1, 50), max_size=30),
        st.sampled_from(["none", "zeros", "junk", "junk_after_zeros"]),
        st.binary(max_size=3 * entry_size + 5),
        st.integers(0, 20),
    )


@settings(max_examples=300, deadline=None)
@given(_mixed_buffer(8), st.integers(0, 2**40))
def test_offset_scan_matches_reference_rule(spec, base):
    steps, kind, junk, zeros = spec
    rel = 0
    body = b""
    for i, step in enumerate(steps):
        rel += step
        body += struct.pack(">ii", rel, i * 100)
    if kind in ("zeros", "junk_after_zeros"):
        body += bytes(8 * zeros)
    if kind in ("junk", "junk_after_zeros"):
        body += junk
    scan = ix.scan_offset_index(body, base)
    expected, stop = _reference_offset_scan(body, base)
    assert scan.entries == expected
    assert scan.stop_slot == stop
    assert scan.partial_bytes == len(body) % 8
    tail = body[len(expected) * 8 :]
    assert scan.tail_zero == (not any(tail))
    if scan.reason == ix.STOP_ZERO_TAIL:
        assert not any(tail)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 2**40))
def test_random_bytes_never_crash_any_index_reader(buf, base):
    o = ix.scan_offset_index(buf, base)
    assert (o.entries, o.stop_slot) == _reference_offset_scan(buf, base)
    t = ix.scan_time_index(buf, base)
    assert (t.entries, t.stop_slot) == _reference_time_scan(buf, base)
    for target in (base - 1, base, base + 2**20, 2**63):
        o.lookup(target)
        t.lookup(target)
    try:
        ix.scan_txn_index(buf, base)
    except FormatError as exc:
        assert exc.position is not None and exc.position % 34 == 0


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**63 - 1)
        ),
        max_size=20,
    ),
    st.integers(0, 2**63 - 1),
)
def test_txn_round_trip(rows, lso):
    entries = [(pid, first, last, lso) for pid, first, last in rows]
    buf = ix.encode_txn_index(entries)
    assert len(buf) == 34 * len(entries)
    assert [tuple(t)[1:] for t in ix.decode_txn_entries(buf)] == entries
