"""Kafka's compression codecs: what we write byte for byte, and what real clients send."""

import gzip
import json
import random
import struct
import time
import tracemalloc
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard
from conftest import CLIENT_BATCHES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.formats import compression as C
from kafkatool.formats.errors import CompressionError, FormatError

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
# (codec, magic) pairs Kafka allows.
CODEC_MAGICS = [(c, m) for c in CODECS for m in (0, 1, 2) if not (c == C.ZSTD and m < 2)]
XERIAL_HEADER = bytes.fromhex("82534E4150505900") + b"\x00\x00\x00\x01\x00\x00\x00\x01"
LZ4_MAGIC = bytes.fromhex("04224D18")

# Published XXH32 vectors (seed 0), used to check our own hash before it checks frames.
XXH32_VECTORS = {
    b"": 0x02CC5D05,
    b"a": 0x550D7456,
    b"abc": 0x32D153FF,
    b"Nobody inspects the spammish repetition": 0xE2293B2F,
}


def _random_bytes(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _compressible(seed: int, size: int) -> bytes:
    rnd = random.Random(seed)
    words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(16)]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words)
    return bytes(out[:size])


FIXED_PAYLOADS = {
    "empty": b"",
    "one-byte": b"\x07",
    "random-100k": _random_bytes(1, 100 * 1024),
    "compressible-100k": _compressible(2, 100 * 1024),
    "compressible-300k": _compressible(3, 300 * 1024),  # several lz4 blocks, 10 xerial chunks
    "exactly-64k": _compressible(4, 64 * 1024),
    "mixed": _random_bytes(5, 70 * 1024) + bytes(70 * 1024),  # raw lz4 block then compressed
}

payloads = st.one_of(
    st.binary(max_size=600),
    st.builds(_random_bytes, st.integers(0, 2**32), st.integers(0, 140 * 1024)),
    st.builds(_compressible, st.integers(0, 2**32), st.integers(0, 200 * 1024)),
)

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# names, codec/magic rules


def test_codec_names_are_kafkas():
    assert C.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    for codec, name in C.CODEC_NAMES.items():
        assert C.codec_from_name(name) == codec
        assert C.codec_from_name(name.upper()) == codec
    assert C.codec_from_name("uncompressed") == C.NONE
    for bad in ("producer", "brotli", "", "lz4hc"):
        with pytest.raises(ValueError):
            C.codec_from_name(bad)


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 8])
def test_unknown_codecs_raise(codec):
    with pytest.raises(CompressionError, match="unsupported compression codec"):
        C.compress(codec, b"abc")
    with pytest.raises(CompressionError, match="unsupported compression codec"):
        C.decompress(codec, b"abc")


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_needs_magic_2(magic):
    frame = C.compress(C.ZSTD, b"hello")
    with pytest.raises(CompressionError, match="zstd"):
        C.compress(C.ZSTD, b"hello", magic=magic)
    with pytest.raises(CompressionError, match="zstd"):
        C.decompress(C.ZSTD, frame, magic=magic)


def test_compression_error_is_a_format_error():
    with pytest.raises(FormatError) as info:
        C.decompress(C.GZIP, b"not gzip at all")
    assert info.value.kind == "compression"


def test_none_codec_copies():
    data = bytearray(b"abc")
    out = C.compress(C.NONE, data)
    assert out == b"abc" and type(out) is bytes
    assert C.decompress(C.NONE, memoryview(data)) == b"abc"


@pytest.mark.parametrize(
    "codec,level",
    [(C.GZIP, 0), (C.GZIP, 10), (C.LZ4, 0), (C.LZ4, 18), (C.ZSTD, 23), (C.ZSTD, -131073)],
)
def test_levels_out_of_kafkas_range_are_refused(codec, level):
    with pytest.raises(CompressionError, match="level"):
        C.compress(codec, b"abc" * 100, level=level)


# ---------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("name", FIXED_PAYLOADS)
@pytest.mark.parametrize("codec,magic", CODEC_MAGICS)
def test_round_trip_fixed(codec, magic, name):
    data = FIXED_PAYLOADS[name]
    packed = C.compress(codec, data, magic=magic)
    assert type(packed) is bytes
    for form in (packed, bytearray(packed), memoryview(packed)):
        assert C.decompress(codec, form, magic=magic) == data
    assert C.decompress(codec, packed, magic=magic, max_size=len(data)) == data


@PROPERTY
@given(data=payloads, codec_magic=st.sampled_from(CODEC_MAGICS))
def test_round_trip_property(data, codec_magic):
    codec, magic = codec_magic
    assert C.decompress(codec, C.compress(codec, data, magic=magic), magic=magic) == data


@pytest.mark.parametrize("level", [1, 5, 9, -1])
def test_gzip_levels(level):
    data = FIXED_PAYLOADS["compressible-100k"]
    packed = C.compress(C.GZIP, data, level=level)
    assert C.decompress(C.GZIP, packed) == data
    if level == -1:
        assert packed == C.compress(C.GZIP, data, level=6) == C.compress(C.GZIP, data)


@pytest.mark.parametrize("level", [1, 4, 9, 12, 17])
def test_lz4_levels(level):
    data = FIXED_PAYLOADS["compressible-300k"]
    packed = C.compress(C.LZ4, data, level=level)
    assert C.decompress(C.LZ4, packed) == data
    if level == 9:  # Kafka's default level means the fast compressor
        assert packed == C.compress(C.LZ4, data)


@pytest.mark.parametrize("level", [-5, 1, 3, 19])
def test_zstd_levels(level):
    data = FIXED_PAYLOADS["compressible-100k"]
    assert C.decompress(C.ZSTD, C.compress(C.ZSTD, data, level=level)) == data


# ---------------------------------------------------------------------------
# exact bytes of what we write


def test_xxh32_vectors():
    for data, want in XXH32_VECTORS.items():
        assert C.xxh32(data) == want, data
    # The 16-byte stripe loop, checked against liblz4's block checksum.
    block_data = _random_bytes(9, 3000)
    frame = lz4.frame.compress(
        block_data, block_linked=False, block_checksum=True, content_checksum=False, store_size=False
    )
    (size,) = struct.unpack_from("<I", frame, 7)
    size &= 0x7FFFFFFF
    (checksum,) = struct.unpack_from("<I", frame, 11 + size)
    assert C.xxh32(frame[11 : 11 + size]) == checksum


def _hc(covered: bytes) -> int:
    return (C.xxh32(covered) >> 8) & 0xFF


def test_lz4_header_bytes_per_magic():
    # Expected checksums computed from the descriptor alone (magic 1/2) and from
    # magic number + descriptor (magic 0, KafkaLZ4's historical bug).
    proper = _hc(b"\x60\x40")
    broken = _hc(LZ4_MAGIC + b"\x60\x40")
    assert proper == 0x82 and broken == 0x1A
    for magic, hc in ((0, broken), (1, proper), (2, proper)):
        frame = C.compress(C.LZ4, b"", magic=magic)
        assert frame == LZ4_MAGIC + bytes((0x60, 0x40, hc)) + b"\x00\x00\x00\x00"
    # liblz4 agrees on the proper checksum.
    std = lz4.frame.compress(
        b"", block_linked=False, content_checksum=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB
    )
    assert std[:7] == LZ4_MAGIC + bytes((0x60, 0x40, proper))


def _lz4_blocks(frame: bytes):
    """(stored size, is raw) for each block of one of our frames, and the position after the end mark."""
    pos = 7
    blocks = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            return blocks, pos
        size = word & 0x7FFFFFFF
        blocks.append((size, bool(word & 0x80000000), frame[pos : pos + size]))
        pos += size


def test_lz4_blocks_independent_and_raw_when_incompressible():
    data = FIXED_PAYLOADS["mixed"]  # 70 KiB random + 70 KiB zeros
    frame = C.compress(C.LZ4, data)
    blocks, end = _lz4_blocks(frame)
    assert end == len(frame)  # end mark, no content checksum
    assert [raw for _, raw, _ in blocks] == [True, False, False]
    assert blocks[0][0] == 65536 and blocks[0][2] == data[:65536]
    # Every block decodes alone: none refers to an earlier one.
    parts = [body if raw else lz4.block.decompress(body, uncompressed_size=65536) for _, raw, body in blocks]
    assert b"".join(parts) == data
    assert [len(p) for p in parts] == [65536, 65536, len(data) - 131072]
    # A standard LZ4 decoder reads our magic 1/2 frame.
    assert lz4.frame.decompress(frame) == data


def test_lz4_magic0_frame_differs_only_in_hc():
    data = FIXED_PAYLOADS["compressible-100k"]
    v0, v2 = C.compress(C.LZ4, data, magic=0), C.compress(C.LZ4, data, magic=2)
    assert v0[:6] == v2[:6] and v0[7:] == v2[7:]
    assert v0[6] == _hc(v0[:6]) and v2[6] == _hc(v2[4:6])
    assert C.decompress(C.LZ4, v0, magic=0) == data
    with pytest.raises(CompressionError, match="header checksum"):
        C.decompress(C.LZ4, v0, magic=2)


def test_xerial_snappy_framing():
    data = FIXED_PAYLOADS["compressible-100k"]  # 3 full chunks + a partial one
    packed = C.compress(C.SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    pos, out, sizes = 16, b"", []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        chunk = snappy.uncompress(packed[pos + 4 : pos + 4 + length])
        sizes.append(len(chunk))
        out += chunk
        pos += 4 + length
    assert pos == len(packed) and out == data
    assert sizes == [32768, 32768, 32768, len(data) - 3 * 32768]
    assert C.compress(C.SNAPPY, b"") == XERIAL_HEADER
    for magic in (0, 1):
        assert C.compress(C.SNAPPY, data, magic=magic) == packed


def test_gzip_header_like_java():
    data = FIXED_PAYLOADS["compressible-100k"]
    packed = C.compress(C.GZIP, data)
    # GZIPOutputStream: no flags, MTIME 0, XFL 0, OS 255; CRC-32 and ISIZE trailer.
    assert packed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert packed[-8:] == struct.pack("<II", zlib.crc32(data), len(data))
    assert gzip.decompress(packed) == data


def test_zstd_frame_has_no_content_size():
    for data in (b"", b"x", FIXED_PAYLOADS["compressible-100k"]):
        frame = C.compress(C.ZSTD, data)
        assert frame[:4] == bytes.fromhex("28B52FFD")
        fhd = frame[4]
        assert fhd >> 6 == 0 and not fhd & 0x20, hex(fhd)  # no FCS field, not single-segment
        assert not fhd & 0x04  # no checksum
        params = zstandard.get_frame_parameters(frame)
        assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
        assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == data


# ---------------------------------------------------------------------------
# what other writers produce


def test_gzip_members_and_trailing_bytes():
    a, b = b"first member " * 50, b"second" * 70
    two = gzip.compress(a, mtime=0) + gzip.compress(b, compresslevel=9)
    assert C.decompress(C.GZIP, two) == a + b
    # GZIPInputStream ignores bytes after a member that do not start a header.
    assert C.decompress(C.GZIP, gzip.compress(a) + b"\x00\x00\x00") == a
    with pytest.raises(CompressionError, match="truncated"):
        C.decompress(C.GZIP, gzip.compress(a)[:-3])
    with pytest.raises(CompressionError):
        C.decompress(C.GZIP, b"")
    bad_crc = bytearray(gzip.compress(a))
    bad_crc[-6] ^= 0xFF
    with pytest.raises(CompressionError):
        C.decompress(C.GZIP, bytes(bad_crc))


def test_snappy_raw_block_and_concatenated_xerial():
    data = FIXED_PAYLOADS["compressible-100k"]
    assert C.decompress(C.SNAPPY, snappy.compress(data)) == data
    assert C.decompress(C.SNAPPY, b"") == b""
    a, b = data[:40000], data[40000:]
    assert C.decompress(C.SNAPPY, C.compress(C.SNAPPY, a) + C.compress(C.SNAPPY, b)) == data
    with pytest.raises(CompressionError):
        C.decompress(C.SNAPPY, C.compress(C.SNAPPY, data)[:-10])
    with pytest.raises(CompressionError):
        C.decompress(C.SNAPPY, snappy.compress(data)[:-10])
    # A raw block claiming far more output than its size can encode is refused before allocating.
    with pytest.raises(CompressionError, match="claims"):
        C.decompress(C.SNAPPY, b"\xff\xff\xff\xff\x0f\x00")


LZ4_VARIANTS = {
    # kafka-python: content size, 64 KiB blocks
    "content-size": dict(store_size=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
    # aiokafka (cramjam): block checksums
    "block-checksum": dict(store_size=False, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
    # kafkajs: content checksum, one 4 MiB block
    "content-checksum-4mb": dict(
        store_size=False, content_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX4MB
    ),
    "everything-256k": dict(
        store_size=True, content_checksum=True, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX256KB
    ),
    "1mb-blocks": dict(store_size=False, block_size=lz4.frame.BLOCKSIZE_MAX1MB),
}


def _std_lz4(data, **options):
    options.setdefault("content_checksum", False)
    return lz4.frame.compress(data, block_linked=False, **options)


@pytest.mark.parametrize("variant", LZ4_VARIANTS)
@pytest.mark.parametrize("name", ["empty", "random-100k", "compressible-300k", "mixed"])
def test_lz4_frames_from_other_writers(variant, name):
    data = FIXED_PAYLOADS[name]
    frame = _std_lz4(data, **LZ4_VARIANTS[variant])
    for magic in (0, 1, 2):
        assert C.decompress(C.LZ4, frame, magic=magic) == data


def test_lz4_block_checksum_verified_content_checksum_not():
    data = FIXED_PAYLOADS["compressible-100k"]
    frame = bytearray(_std_lz4(data, block_checksum=True))
    frame[-5] ^= 0x01  # last byte of the last block's checksum
    with pytest.raises(CompressionError, match="block checksum"):
        C.decompress(C.LZ4, bytes(frame))
    frame = bytearray(_std_lz4(data, content_checksum=True))
    frame[-1] ^= 0xFF  # Kafka consumes the content checksum without checking it
    assert C.decompress(C.LZ4, bytes(frame)) == data
    with pytest.raises(CompressionError, match="content checksum"):
        C.decompress(C.LZ4, bytes(frame[:-2]))


def _with_descriptor(frame: bytes, flg: int, bd: int, magic: int = 2) -> bytes:
    prefix = frame[:4] + bytes((flg, bd))
    return prefix + bytes((_hc(prefix if magic == 0 else prefix[4:]),)) + frame[7:]


@pytest.mark.parametrize(
    "flg,bd,message",
    [
        (0x40, 0x40, "dependent"),  # linked blocks
        (0xA0, 0x40, "version"),  # version 2
        (0x20, 0x40, "version"),  # version 0
        (0x61, 0x40, "reserved"),  # dictionary id flag
        (0x62, 0x40, "reserved"),
        (0x60, 0x30, "block size code"),
        (0x60, 0xC0, "reserved"),
        (0x60, 0x41, "reserved"),
    ],
)
def test_lz4_descriptor_rules(flg, bd, message):
    frame = C.compress(C.LZ4, b"abc" * 100)
    with pytest.raises(CompressionError, match=message):
        C.decompress(C.LZ4, _with_descriptor(frame, flg, bd))


def test_lz4_linked_frame_from_liblz4_rejected():
    data = FIXED_PAYLOADS["compressible-300k"]
    linked = lz4.frame.compress(data, content_checksum=False)  # python-lz4's default: linked blocks
    with pytest.raises(CompressionError, match="dependent"):
        C.decompress(C.LZ4, linked)


def test_lz4_other_rejections():
    frame = C.compress(C.LZ4, FIXED_PAYLOADS["compressible-100k"])
    with pytest.raises(CompressionError, match="not an lz4 frame"):
        C.decompress(C.LZ4, b"\x00" + frame[1:])
    with pytest.raises(CompressionError, match="end mark"):
        C.decompress(C.LZ4, frame[:-4])
    oversized = frame[:7] + struct.pack("<I", 65537) + bytes(65537) + b"\x00" * 4
    with pytest.raises(CompressionError, match="exceeds"):
        C.decompress(C.LZ4, oversized)


def test_zstd_variants():
    data = FIXED_PAYLOADS["compressible-300k"]
    with_size = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    assert zstandard.get_frame_parameters(with_size).content_size == len(data)
    assert C.decompress(C.ZSTD, with_size) == data
    a, b = data[:1000], data[1000:]
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"skip!"
    several = (
        zstandard.ZstdCompressor().compress(a) + skippable + C.compress(C.ZSTD, b) + C.compress(C.ZSTD, b"")
    )
    assert C.decompress(C.ZSTD, several) == data
    for bad in (with_size[:-1], with_size[:-5], with_size + b"\x00", b"", with_size[:3]):
        with pytest.raises(CompressionError):
            C.decompress(C.ZSTD, bad)
    bad_checksum = bytearray(with_size)
    bad_checksum[-1] ^= 0xFF
    with pytest.raises(CompressionError):
        C.decompress(C.ZSTD, bytes(bad_checksum))


# ---------------------------------------------------------------------------
# real clients' payloads


def _entries(data: bytes):
    pos = 0
    while pos < len(data):
        _, length = struct.unpack_from(">qi", data, pos)
        yield data[pos : pos + 12 + length]
        pos += 12 + length


def _compressed_payload(entry: bytes):
    """(magic, codec, compressed bytes) of a v2 batch or a legacy wrapper message."""
    magic = entry[16]
    if magic == 2:
        return magic, struct.unpack_from(">h", entry, 21)[0] & 7, entry[61:]
    pos = 18 + (8 if magic == 1 else 0)
    (key_len,) = struct.unpack_from(">i", entry, pos)
    pos += 4 + max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", entry, pos)
    return magic, entry[17] & 7, entry[pos + 4 : pos + 4 + value_len]


CAPTURES = sorted(p.stem for p in CLIENT_BATCHES.glob("*.bin")) if CLIENT_BATCHES.is_dir() else []
COMPRESSED_CAPTURES = [c for c in CAPTURES if not c.endswith("-none")]


@pytest.mark.parametrize("name", COMPRESSED_CAPTURES)
def test_client_payloads_decompress(name, client_batches_dir):
    meta = json.loads((client_batches_dir / f"{name}.json").read_text())
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    outputs = []
    for entry in _entries(data):
        magic, codec, payload = _compressed_payload(entry)
        assert magic == meta["magic"]
        if codec == C.NONE:  # the lone uncompressed message of v0split
            continue
        out = C.decompress(codec, payload, magic=magic)
        assert len(payload) < len(out) < 100 * len(payload)
        assert C.decompress(codec, payload, magic=magic, max_size=len(out)) == out
        with pytest.raises(CompressionError, match="exceeds"):
            C.decompress(codec, payload, magic=magic, max_size=len(out) - 1)
        outputs.append(out)
    assert outputs
    # Every value the client was asked to send is in the output, in order.
    joined, pos = b"".join(outputs), 0
    for msg in meta["messages"]:
        if msg["value"]:
            found = joined.find(bytes.fromhex(msg["value"]), pos)
            assert found >= 0, msg["index"]
            pos = found
    # Same client, same messages, uncompressed: byte-identical to the record area
    # or inner message set (kcat's v1 carries wall-clock timestamps, so only lengths match).
    client, fmt, _ = name.rsplit("-", 2)
    reference = client_batches_dir / f"{client}-{fmt}-none.bin"
    if reference.exists() and len(outputs) == 1:
        ref = reference.read_bytes()
        ref = ref[61:] if meta["magic"] == 2 else ref
        if name.startswith("kcat-v1-"):
            assert len(outputs[0]) == len(ref)
        else:
            assert outputs[0] == ref


LZ4_CAPTURES = [c for c in CAPTURES if c.endswith("-lz4")]


@pytest.mark.parametrize("name", LZ4_CAPTURES)
def test_client_lz4_header_checksums(name, client_batches_dir):
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    (entry,) = list(_entries(data))
    magic, codec, frame = _compressed_payload(entry)
    assert codec == C.LZ4
    flg, bd = frame[4], frame[5]
    descriptor_end = 14 if flg & 0x08 else 6
    if magic == 0:
        # Every client reproduces KafkaLZ4's broken checksum for magic 0 ...
        assert frame[descriptor_end] == _hc(frame[:descriptor_end])
        assert C.decompress(C.LZ4, frame, magic=0)
        with pytest.raises(CompressionError, match="header checksum"):
            C.decompress(C.LZ4, frame, magic=1)
        with pytest.raises(CompressionError, match="header checksum"):
            C.decompress(C.LZ4, frame, magic=2)
    else:
        assert frame[descriptor_end] == _hc(frame[4:descriptor_end])
        assert C.decompress(C.LZ4, frame, magic=magic) == C.decompress(C.LZ4, frame, magic=0)
    if (flg, bd) == (0x60, 0x40):
        # ... and our header matches theirs byte for byte.
        assert C.compress(C.LZ4, b"x", magic=magic)[:7] == frame[:7]


# ---------------------------------------------------------------------------
# corruption and bombs

_VALID = {
    (codec, magic): C.compress(codec, _compressible(7, 20000) + _random_bytes(8, 3000), magic=magic)
    for codec, magic in CODEC_MAGICS
    if codec != C.NONE
}
_VALID[(C.SNAPPY, 2, "raw")] = snappy.compress(_compressible(7, 20000))
_VALID[(C.LZ4, 2, "checksums")] = _std_lz4(
    _compressible(7, 100000), block_checksum=True, content_checksum=True, store_size=True
)
_VALID[(C.ZSTD, 2, "checksum")] = zstandard.ZstdCompressor(write_checksum=True).compress(
    _compressible(7, 300000)
)
_VALID[(C.GZIP, 2, "python")] = gzip.compress(_compressible(7, 20000))


def _try(codec, magic, data):
    try:
        C.decompress(codec, data, magic=magic, max_size=10_000_000)
    except CompressionError:
        pass


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(_VALID, key=repr)), cut=st.integers(0, 2**31))
def test_truncation_only_raises_compression_error(key, cut):
    codec, magic = key[0], key[1]
    payload = _VALID[key]
    cut %= len(payload)
    if codec != C.SNAPPY:
        with pytest.raises(CompressionError):
            C.decompress(codec, payload[:cut], magic=magic)
        return
    # Java's SnappyInputStream reads an empty stream as empty and stops quietly
    # at a chunk boundary (or 1-3 bytes past one); anything else must fail.
    try:
        out = C.decompress(codec, payload[:cut], magic=magic)
    except CompressionError:
        return
    full = C.decompress(codec, payload, magic=magic)
    assert payload.startswith(XERIAL_HEADER) or cut == 0
    assert len(out) < len(full) and full.startswith(out)
    assert len(out) % 32768 == 0


@settings(max_examples=400, deadline=None)
@given(
    key=st.sampled_from(sorted(_VALID, key=repr)),
    flips=st.lists(st.tuples(st.integers(0, 2**31), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_byte_flips_only_raise_compression_error(key, flips):
    codec, magic = key[0], key[1]
    payload = bytearray(_VALID[key])
    for where, mask in flips:
        payload[where % len(payload)] ^= mask
    _try(codec, magic, bytes(payload))


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS[1:]), junk=st.binary(max_size=200), magic=st.sampled_from([0, 2]))
def test_garbage_only_raises_compression_error(codec, junk, magic):
    if codec == C.ZSTD:
        magic = 2
    _try(codec, magic, junk)


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from([C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]), junk=st.binary(min_size=1, max_size=300))
def test_garbage_after_a_valid_header_only_raises_compression_error(codec, junk):
    prefixes = {
        C.GZIP: bytes.fromhex("1f8b08000000000000ff"),
        C.SNAPPY: XERIAL_HEADER,
        C.LZ4: C.compress(C.LZ4, b"")[:7],
        C.ZSTD: C.compress(C.ZSTD, b"")[:6],
    }
    _try(codec, 2, prefixes[codec] + junk)


BOMB_SIZE = 100 * 1024 * 1024
LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def zeros():
    return bytes(BOMB_SIZE)


@pytest.mark.parametrize("form", ["gzip", "snappy", "snappy-raw", "lz4", "lz4-4mb", "zstd", "zstd-with-size"])
def test_max_size_stops_a_bomb(form, zeros):
    if form == "snappy-raw":
        codec, bomb = C.SNAPPY, snappy.compress(zeros)
    elif form == "lz4-4mb":
        codec, bomb = C.LZ4, _std_lz4(zeros, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    elif form == "zstd-with-size":
        codec, bomb = C.ZSTD, zstandard.ZstdCompressor().compress(zeros)
    else:
        codec = C.codec_from_name(form)
        bomb = C.compress(codec, zeros, level=1 if codec == C.GZIP else None)
    assert len(bomb) < BOMB_SIZE // 20
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(CompressionError, match="exceeds") as info:
            C.decompress(codec, bomb, max_size=LIMIT)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.kind == "too_large"
    assert elapsed < 2.0
    assert peak < 16 * LIMIT, peak
