"""The consumer's check.crcs over fetched bytes (Kafka's CompletedFetch.maybeEnsureValid): a v2
batch's CRC, and a legacy (magic 0/1) message's own CRC record by record from the fetch offset:
a plain message, or each inner message of a compressed wrapper, whose own CRC Kafka does not
check.  The records before a corrupt one are handed out with the error.  Until session 26 a
compressed wrapper's inner messages were not checked."""

from __future__ import annotations

import struct

import pytest

from kafkatool.assign.consume import CorruptFetch, fetched_records
from kafkatool.formats import compression
from kafkatool.formats import records as R


def _flip_crc(entry: bytes) -> bytes:
    """A legacy entry (offset, size, message) with its message's stored CRC changed."""
    data = bytearray(entry)
    data[12] ^= 0xFF
    return bytes(data)


def _wrapper(magic: int, codec: int, inner: list[bytes], last_offset: int) -> bytes:
    payload = compression.compress(codec, b"".join(inner), magic=magic)
    return R.encode_legacy_message(magic, None, payload, offset=last_offset, attributes=codec)


def _inner(magic: int, n: int, bad: int | None) -> list[bytes]:
    out = []
    for i in range(n):
        e = R.encode_legacy_message(magic, None, b"v%d" % i, offset=i, timestamp=1000 + i)
        out.append(_flip_crc(e) if i == bad else e)
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4])
def test_a_corrupt_inner_message_of_a_wrapper_stops_after_the_ones_before(magic, codec):
    data = _wrapper(magic, codec, _inner(magic, 4, bad=2), last_offset=3)
    with pytest.raises(CorruptFetch) as got:
        fetched_records("t", 0, data, 0, None, False, check_crcs=True)
    stored = struct.unpack(">I", _inner(magic, 4, bad=2)[2][12:16])[0]
    computed = struct.unpack(">I", _inner(magic, 4, bad=None)[2][12:16])[0]
    assert str(got.value) == (
        f"Record for partition t-0 at offset 2 is invalid, cause: Record is corrupt (stored crc = {stored}, "
        f"computed crc = {computed})"
    )
    assert [r.value for r in got.value.records] == [b"v0", b"v1"] and got.value.next_offset == 2
    # below the fetch offset it is not checked (nextFetchedRecord skips it first)
    recs, nxt = fetched_records("t", 0, data, 3, None, False, check_crcs=True)
    assert [r.offset for r in recs] == [3] and nxt == 4
    # check.crcs=false hands it out as it is
    recs, _ = fetched_records("t", 0, data, 0, None, False)
    assert [r.value for r in recs] == [b"v0", b"v1", b"v2", b"v3"]


def test_a_wrappers_own_crc_is_not_checked():
    data = _flip_crc(_wrapper(1, compression.GZIP, _inner(1, 2, bad=None), last_offset=1))
    recs, nxt = fetched_records("t", 0, data, 0, None, False, check_crcs=True)
    assert [r.offset for r in recs] == [0, 1] and nxt == 2


def test_a_plain_legacy_message_is_checked_from_the_fetch_offset():
    msgs = _inner(1, 3, bad=1)
    data = b"".join(msgs)
    with pytest.raises(CorruptFetch) as got:
        fetched_records("t", 0, data, 0, None, False, check_crcs=True)
    assert str(got.value).startswith(
        "Record for partition t-0 at offset 1 is invalid, cause: Record is corrupt"
    )
    assert [r.offset for r in got.value.records] == [0]
    recs, _ = fetched_records("t", 0, data, 2, None, False, check_crcs=True)
    assert [r.offset for r in recs] == [2]


def test_a_v2_batch_is_checked_whole():
    good = R.build_record_batch([R.SimpleRecord(b"a", None, (), 1)], base_offset=0)
    bad = bytearray(R.build_record_batch([R.SimpleRecord(b"b", None, (), 1)], base_offset=1))
    bad[17] ^= 0xFF
    with pytest.raises(CorruptFetch) as got:
        fetched_records("t", 0, good + bytes(bad), 0, None, False, check_crcs=True)
    assert str(got.value).startswith("Record batch for partition t-0 at offset 1 is invalid")
    assert [r.offset for r in got.value.records] == [0]
