"""Random, truncated and mutated bytes only ever raise the codec's decode error, and never over-allocate."""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol.protocol_values import filled

import kafkatool.formats.generated as fgen
import kafkatool.protocol.generated as pgen
from kafkatool.formats.schema import Message, SchemaDecodeError
from kafkatool.protocol.framing import FrameReader, parse_request
from kafkatool.protocol.generated import MetadataRequest, ProduceRequest

CLASSES = [
    obj
    for mod in (pgen, fgen)
    for obj in (getattr(mod, n) for n in mod.__all__)
    if isinstance(obj, type) and issubclass(obj, Message)
]
PAIRS = [(cls, v) for cls in CLASSES for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_valid_cache: dict = {}


def valid_encoding(cls, version, seed) -> bytes:
    key = (cls, version, seed % 4)
    if key not in _valid_cache:
        _valid_cache[key] = filled(cls, version, random.Random(f"{cls.NAME}/{version}/{seed % 4}")).encode(
            version
        )
    return _valid_cache[key]


def decode_only_raises_decode_error(cls, version, data) -> None:
    try:
        cls.decode(data, version)
    except SchemaDecodeError as e:
        assert e.position is None or 0 <= e.position <= len(data)


@FUZZ
@given(pair=st.sampled_from(PAIRS), data=st.binary(max_size=200))
def test_random_bytes(pair, data):
    decode_only_raises_decode_error(*pair, data)


@FUZZ
@given(pair=st.sampled_from(PAIRS), seed=st.integers(0, 3), cut=st.floats(0, 1, exclude_max=True))
def test_truncations(pair, seed, cut):
    cls, version = pair
    data = valid_encoding(cls, version, seed)
    decode_only_raises_decode_error(cls, version, data[: int(len(data) * cut)])


@FUZZ
@given(
    pair=st.sampled_from(PAIRS),
    seed=st.integers(0, 3),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutations(pair, seed, edits):
    cls, version = pair
    data = bytearray(valid_encoding(cls, version, seed))
    if not data:
        return
    for where, value in edits:
        data[int(len(data) * where)] = value
    decode_only_raises_decode_error(cls, version, bytes(data))


@FUZZ
@given(chunks=st.lists(st.binary(max_size=64), max_size=12))
def test_frames_and_request_parsing(chunks):
    reader = FrameReader(max_frame_size=1 << 16)
    try:
        for chunk in chunks:
            for frame in reader.feed(chunk):
                try:
                    parse_request(frame)
                except SchemaDecodeError:
                    pass
    except SchemaDecodeError:
        pass


# --------------------------------------------------------------------------- allocation bounds


def peak_allocation(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _expect_error(cls, data, version):
    def run():
        with pytest.raises(SchemaDecodeError):
            cls.decode(data, version)

    return run


@pytest.mark.parametrize(
    ("cls", "version", "data"),
    [
        # array count 2^31-1 with 10 bytes left
        (MetadataRequest, 0, struct.pack(">i", 2**31 - 1) + bytes(10)),
        # compact array count near 2^32
        (MetadataRequest, 12, bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + bytes(10)),
        # records length claiming 2 GB
        (
            ProduceRequest,
            3,
            bytes.fromhex("ffff ffff 00007530 00000001 0001 74 00000001 00000000 7fffffff") + bytes(8),
        ),
        # string length 32767 with nothing behind it
        (ProduceRequest, 3, bytes.fromhex("7fff")),
        # tagged section claiming 2^31 fields
        (ProduceRequest, 9, bytes.fromhex("00 ffff 00007530 01 ffffffff07")),
    ],
)
def test_huge_lengths_do_not_allocate(cls, version, data):
    peak = peak_allocation(_expect_error(cls, data, version))
    assert peak < 64 * 1024, f"decoding {len(data)} bytes allocated {peak} bytes"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), data=st.binary(min_size=1, max_size=300))
def test_allocation_is_bounded_by_the_input(pair, data):
    cls, version = pair

    def run():
        try:
            cls.decode(data, version)
        except SchemaDecodeError:
            pass

    # Python objects cost more than their wire bytes, but never more than a fixed factor of them
    assert peak_allocation(run) < 256 * len(data) + 64 * 1024
