"""Kafka's compression codecs, both directions, as the Java client frames them.

What is compressed: the record area of a v2 batch (bytes 61..end) or the value
of a legacy wrapper message.  The codec id is the low 3 bits of the batch or
message attributes.

Writers produce what Kafka's Java producer produces:

- gzip: a ``GZIPOutputStream`` member (MTIME 0, XFL 0, OS 255), level 6 by default;
- snappy: xerial ``SnappyOutputStream`` framing (16-byte header, then
  ``int32 BE length`` + raw block per <= 32 KiB of input), for every magic;
- lz4: Kafka's own frame (``Lz4BlockOutputStream``): FLG 0x60, BD 0x40,
  independent <= 64 KiB blocks, a block stored raw when compressing does not
  shrink it, no checksums; for magic 0 the header checksum is the historical
  broken one (KAFKA-3160, xxh32 over magic number + descriptor);
- zstd: a streaming frame without content size, as zstd-jni writes it.

Readers accept what real clients send (see the client capture corpus): gzip
members from any writer, raw or xerial-framed snappy, lz4 frames with content
size / block checksums / content checksum and blocks up to 4 MiB, zstd with or
without content size and several frames.  Every failure raises
:class:`CompressionError`; ``max_size`` bounds the output so that a
decompression bomb stops early instead of filling memory.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import snappy
import zstandard

from .errors import CompressionError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_NAME_TO_CODEC = {name: codec for codec, name in CODEC_NAMES.items()}
# "uncompressed" is how topic configs spell codec 0 (compression.type=uncompressed).
_NAME_TO_CODEC["uncompressed"] = NONE

# Errors the C libraries raise on bad input; all become CompressionError.
_LIBRARY_ERRORS = (
    zlib.error,
    snappy.UncompressError,
    cramjam.DecompressionError,
    cramjam.CompressionError,
    lz4.block.LZ4BlockError,
    RuntimeError,  # lz4.frame
    zstandard.ZstdError,
    struct.error,
    ValueError,
    OverflowError,
    EOFError,
)


def codec_from_name(name: str) -> int:
    """The codec id for a name as Kafka spells it (``gzip``, ``lz4``, ...)."""
    try:
        return _NAME_TO_CODEC[name.strip().lower()]
    except KeyError:
        known = ", ".join(CODEC_NAMES.values())
        raise ValueError(f"unknown compression codec {name!r} (expected one of {known})") from None


def is_known(codec: int) -> bool:
    """A codec id Kafka's CompressionType.forId knows (0-4); other bits make it throw."""
    return codec in CODEC_NAMES


def _codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"codec {codec}")


def _check_codec(codec: int, magic: int) -> None:
    if not is_known(codec):
        raise CompressionError(f"unsupported compression codec {codec} (Kafka knows 0-4)")
    if magic not in (0, 1, 2):
        raise CompressionError(f"unsupported message format magic {magic}")
    if codec == ZSTD and magic < 2:
        raise CompressionError(f"zstd is not allowed with message format magic {magic} (needs magic 2)")


# ---------------------------------------------------------------------------
# public API


def compress(codec: int, data, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress ``data`` as Kafka's Java producer would for this codec and magic.

    ``level`` follows Kafka's ``compression.<codec>.level``: gzip 1-9 (default
    6), lz4 1-17 (default 9, the fast compressor; other levels use LZ4 HC),
    zstd -131072..22 (default 3).  None and snappy take no level; it is ignored.
    """
    _check_codec(codec, magic)
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _gzip_compress(data, level)
        if codec == SNAPPY:
            return _xerial_compress(data)
        if codec == LZ4:
            return _lz4_compress(data, magic, level)
        return _zstd_compress(data, level)
    except CompressionError:
        raise
    except _LIBRARY_ERRORS as exc:
        raise CompressionError(f"{_codec_name(codec)} compression failed: {exc}") from exc


def decompress(codec: int, data, *, magic: int = 2, max_size: int | None = None) -> bytes:
    """Decompress a record area or wrapper value; raise CompressionError on any failure.

    ``max_size`` (bytes) stops decompression as soon as the output would
    exceed it.
    """
    _check_codec(codec, magic)
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    try:
        if codec == NONE:
            out = bytes(view)
            _check_size(len(out), max_size, codec)
            return out
        if codec == GZIP:
            return _gzip_decompress(view, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(view, max_size)
        if codec == LZ4:
            return _lz4_decompress(view, magic, max_size)
        return _zstd_decompress(view, max_size)
    except CompressionError:
        raise
    except _LIBRARY_ERRORS as exc:
        raise CompressionError(f"corrupt {_codec_name(codec)} data: {exc}") from exc


def _check_size(size: int, max_size: int | None, codec: int) -> None:
    if max_size is not None and size > max_size:
        raise CompressionError(
            f"{_codec_name(codec)} output exceeds the limit of {max_size} bytes",
            kind="too_large",
        )


# ---------------------------------------------------------------------------
# gzip

# java.util.zip.GZIPOutputStream's fixed header: no flags, MTIME 0, XFL 0,
# OS 255 (unknown; JDK 16+).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_GZIP_MAGIC = b"\x1f\x8b"


def _gzip_compress(data, level: int | None) -> bytes:
    if level is None or level == -1:
        level = 6
    if not 1 <= level <= 9:
        raise CompressionError(f"gzip level {level} out of range 1-9")
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(memoryview(data).cast("B")) & 0xFFFFFFFF)
    return _GZIP_HEADER + body + trailer


def _gzip_decompress(data, max_size: int | None) -> bytes:
    if len(data) == 0:
        raise CompressionError("empty gzip payload", 0)
    chunks: list[bytes] = []
    total = 0
    pending = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while True:
            if max_size is None:
                chunk = inflater.decompress(pending)
                pending = b""
            else:
                chunk = inflater.decompress(pending, max_size - total + 1)
                pending = inflater.unconsumed_tail
            if chunk:
                total += len(chunk)
                _check_size(total, max_size, GZIP)
                chunks.append(chunk)
            if inflater.eof:
                break
            if not pending and not chunk:
                raise CompressionError("truncated gzip stream", len(data))
        rest = inflater.unused_data
        # GZIPInputStream reads further members; bytes after a member that do
        # not start a gzip header are ignored, as Java does.
        if len(rest) < 10 or rest[:2] != _GZIP_MAGIC or rest[2] != 8:
            break
        pending = rest
    return b"".join(chunks)


# ---------------------------------------------------------------------------
# snappy

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _xerial_compress(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = snappy.compress(view[start : start + _XERIAL_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_declared_length(block, position: int) -> int:
    """The uncompressed length a raw snappy block starts with (a uvarint)."""
    result = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
    raise CompressionError("bad snappy block length", position)


def _snappy_block(block, position: int, total: int, max_size: int | None) -> bytes:
    declared = _snappy_declared_length(block, position)
    # One snappy tag copies at most 64 bytes for 3 input bytes, so a claim far
    # beyond that is corrupt; refusing it avoids allocating the claimed size.
    if declared > 22 * len(block) + 64:
        raise CompressionError(
            f"snappy block claims {declared} bytes from {len(block)} compressed bytes", position
        )
    _check_size(total + declared, max_size, SNAPPY)
    try:
        return snappy.uncompress(block)
    except (snappy.UncompressError, cramjam.DecompressionError, ValueError) as exc:
        reason = str(exc) or str(exc.__cause__ or "") or "invalid data"
        raise CompressionError(f"corrupt snappy block: {reason}", position) from exc


def _snappy_decompress(data, max_size: int | None) -> bytes:
    if len(data) >= 16 and data[:8] == _XERIAL_MAGIC:
        return _xerial_decompress(data, max_size)
    # xerial's SnappyInputStream decodes a stream without its magic as one raw block.
    if len(data) == 0:
        return b""
    return _snappy_block(data, 0, 0, max_size)


def _xerial_decompress(data, max_size: int | None) -> bytes:
    chunks: list[bytes] = []
    total = 0
    pos = 0
    end = len(data)
    while True:
        # A header, at the start or where another stream was concatenated.
        if end - pos < 16:
            raise CompressionError("truncated xerial snappy header", pos)
        version, _compat = struct.unpack_from(">ii", data, pos + 8)
        if version < 1:
            raise CompressionError(f"incompatible xerial snappy version {version}", pos + 8)
        pos += 16
        while True:
            # SnappyInputStream stops quietly when fewer than 4 bytes remain.
            if end - pos < 4:
                return b"".join(chunks)
            if data[pos : pos + 8] == _XERIAL_MAGIC:
                break
            (length,) = _INT32.unpack_from(data, pos)
            if length < 0:
                raise CompressionError(f"negative xerial snappy chunk length {length}", pos)
            pos += 4
            if end - pos < length:
                raise CompressionError(f"xerial snappy chunk of {length} bytes runs past the end", pos - 4)
            if length:
                block = _snappy_block(data[pos : pos + length], pos, total, max_size)
                total += len(block)
                chunks.append(block)
            pos += length


# ---------------------------------------------------------------------------
# lz4 (Kafka's frame layer over independent LZ4 blocks)

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB maximum block size
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")
_LZ4_DEFAULT_LEVEL = 9

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed: int = 0) -> int:
    """XXH32, in Python: only ever used on the few bytes of an LZ4 frame descriptor."""
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i <= n - 16:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl32((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl32((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl32((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl32((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = _UINT32_LE.unpack_from(data, i)
        h = (_rotl32((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl32((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def lz4_header_checksum(frame_prefix, magic: int) -> int:
    """The HC byte Kafka writes after the descriptor of an LZ4 frame.

    ``frame_prefix`` is the frame from its magic number up to (excluding) the
    HC byte.  Magic 0 keeps KafkaLZ4's historical mistake: the hash covers
    the magic number too.
    """
    covered = frame_prefix if magic == 0 else frame_prefix[4:]
    return (xxh32(covered) >> 8) & 0xFF


def _lz4_compress(data, magic: int, level: int | None) -> bytes:
    if level is None:
        level = _LZ4_DEFAULT_LEVEL
    if not 1 <= level <= 17:
        raise CompressionError(f"lz4 level {level} out of range 1-17")
    if level == _LZ4_DEFAULT_LEVEL:
        options = {"mode": "default"}
    else:
        options = {"mode": "high_compression", "compression": level}
    prefix = _LZ4_MAGIC + bytes((_LZ4_FLG, _LZ4_BD))
    parts = [prefix, bytes((lz4_header_checksum(prefix, magic),))]
    view = memoryview(data).cast("B")
    for start in range(0, len(view), _LZ4_BLOCK):
        raw = view[start : start + _LZ4_BLOCK]
        block = lz4.block.compress(raw, store_size=False, **options)
        if len(block) >= len(raw):
            parts.append(_UINT32_LE.pack(len(raw) | _LZ4_UNCOMPRESSED))
            parts.append(bytes(raw))
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_checked_block(data, pos: int, size: int, bd: int) -> bytes:
    """Verify a block's xxh32 and decompress it, through liblz4's frame decoder.

    The checksum covers the whole (compressed) block; hashing it in Python
    would be slow, so the block is wrapped alone in a minimal frame that
    liblz4 checks in C.
    """
    prefix = _LZ4_MAGIC + bytes((0x70, bd))
    mini = b"".join(
        (prefix, bytes((lz4_header_checksum(prefix, 2),)), data[pos - 4 : pos + size + 4], _LZ4_END_MARK)
    )
    try:
        return lz4.frame.decompress(mini)
    except RuntimeError as exc:
        if "blockChecksum" in str(exc):
            raise CompressionError("lz4 block checksum mismatch", pos - 4) from exc
        raise CompressionError(f"corrupt lz4 block: {exc}", pos - 4) from exc


def _lz4_decompress(data, magic: int, max_size: int | None) -> bytes:
    end = len(data)
    if end < 7:
        raise CompressionError("truncated lz4 frame header", 0)
    if data[:4] != _LZ4_MAGIC:
        raise CompressionError(f"not an lz4 frame (magic {bytes(data[:4]).hex()})", 0)
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise CompressionError(f"unsupported lz4 frame version {flg >> 6}", 4)
    if flg & 0x03:
        raise CompressionError(f"lz4 FLG reserved bits set (0x{flg:02x})", 4)
    if not flg & 0x20:
        raise CompressionError("lz4 frame with dependent (linked) blocks is not supported by Kafka", 4)
    if bd & 0x8F:
        raise CompressionError(f"lz4 BD reserved bits set (0x{bd:02x})", 5)
    size_code = (bd >> 4) & 0x07
    if size_code < 4:
        raise CompressionError(f"lz4 block size code {size_code} must be 4-7", 5)
    max_block = 1 << (2 * size_code + 8)
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos = 6
    if flg & 0x08:  # content size: skipped, as Kafka does
        pos += 8
    if end < pos + 1:
        raise CompressionError("truncated lz4 frame header", 0)
    # Magic-0 frames carry the broken checksum; Kafka does not check it there.
    if magic != 0:
        expected = lz4_header_checksum(data[:pos], magic)
        if data[pos] != expected:
            raise CompressionError(
                f"lz4 frame header checksum mismatch (0x{data[pos]:02x}, expected 0x{expected:02x})", pos
            )
    pos += 1

    chunks: list[bytes] = []
    total = 0
    while True:
        if end - pos < 4:
            raise CompressionError("lz4 frame ends without an end mark", pos)
        (word,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if word == 0:
            if content_checksum:
                # Kafka consumes the content checksum without verifying it.
                if end - pos < 4:
                    raise CompressionError("truncated lz4 content checksum", pos)
            break
        size = word & ~_LZ4_UNCOMPRESSED
        if size > max_block:
            raise CompressionError(f"lz4 block size {size} exceeds the frame's maximum {max_block}", pos - 4)
        trailer = 4 if block_checksum else 0
        if end - pos < size + trailer:
            raise CompressionError("lz4 block runs past the end of the data", pos - 4)
        if block_checksum:
            block = _lz4_checked_block(data, pos, size, bd)
        elif word & _LZ4_UNCOMPRESSED:
            block = bytes(data[pos : pos + size])
        else:
            try:
                block = lz4.block.decompress(data[pos : pos + size], uncompressed_size=max_block)
            except lz4.block.LZ4BlockError as exc:
                raise CompressionError(f"corrupt lz4 block: {exc}", pos - 4) from exc
        pos += size + trailer
        total += len(block)
        _check_size(total, max_size, LZ4)
        chunks.append(block)
    return b"".join(chunks)


# ---------------------------------------------------------------------------
# zstd

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_DEFAULT_LEVEL = 3
_ZSTD_MIN_LEVEL = -131072
_ZSTD_MAX_LEVEL = 22
_ZSTD_READ = 1 << 20


def _zstd_compress(data, level: int | None) -> bytes:
    if level is None:
        level = _ZSTD_DEFAULT_LEVEL
    if not _ZSTD_MIN_LEVEL <= level <= _ZSTD_MAX_LEVEL:
        raise CompressionError(f"zstd level {level} out of range {_ZSTD_MIN_LEVEL}..{_ZSTD_MAX_LEVEL}")
    # Streaming with an unknown size, like zstd-jni's ZstdOutputStream: no
    # content size in the frame header, a window descriptor instead.
    compressor = zstandard.ZstdCompressor(level=level, write_content_size=False, write_checksum=False)
    stream = compressor.compressobj()
    return stream.compress(data) + stream.flush()


def _zstd_frame_end(data, pos: int) -> tuple[int, bool]:
    """Walk one frame's block headers: (end position, is a data frame).

    The C decoder alone returns short output silently for a truncated frame;
    walking the block headers (a few per 128 KiB) finds truncation exactly.
    """
    end = len(data)
    if end - pos < 4:
        raise CompressionError("truncated zstd frame", pos)
    (magic,) = _UINT32_LE.unpack_from(data, pos)
    if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
        if end - pos < 8:
            raise CompressionError("truncated zstd skippable frame", pos)
        (length,) = _UINT32_LE.unpack_from(data, pos + 4)
        if end - pos - 8 < length:
            raise CompressionError("truncated zstd skippable frame", pos)
        return pos + 8 + length, False
    if magic != _ZSTD_MAGIC:
        raise CompressionError(f"not a zstd frame (magic {bytes(data[pos : pos + 4]).hex()})", pos)
    if end - pos < 5:
        raise CompressionError("truncated zstd frame header", pos)
    fhd = data[pos + 4]
    if fhd & 0x08:
        raise CompressionError(f"zstd frame header reserved bit set (0x{fhd:02x})", pos + 4)
    single_segment = bool(fhd & 0x20)
    fcs_flag = fhd >> 6
    header = 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03]
    header += (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    p = pos + 4 + header
    while True:
        if end - p < 3:
            raise CompressionError("truncated zstd frame", pos)
        word = data[p] | data[p + 1] << 8 | data[p + 2] << 16
        last, block_type, size = word & 1, (word >> 1) & 3, word >> 3
        if block_type == 3:
            raise CompressionError("reserved zstd block type", p)
        p += 3 + (1 if block_type == 1 else size)
        if p > end:
            raise CompressionError("truncated zstd block", pos)
        if last:
            break
    if fhd & 0x04:
        p += 4
        if p > end:
            raise CompressionError("truncated zstd frame checksum", pos)
    return p, True


def _zstd_decompress(data, max_size: int | None) -> bytes:
    if len(data) == 0:
        raise CompressionError("empty zstd payload", 0)
    decompressor = zstandard.ZstdDecompressor()
    chunks: list[bytes] = []
    total = 0
    pos = 0
    while pos < len(data):
        frame_end, is_data = _zstd_frame_end(data, pos)
        if is_data:
            reader = decompressor.stream_reader(data[pos:frame_end], read_across_frames=False)
            while True:
                want = _ZSTD_READ if max_size is None else min(_ZSTD_READ, max_size - total + 1)
                try:
                    chunk = reader.read(want)
                except zstandard.ZstdError as exc:
                    raise CompressionError(f"corrupt zstd frame: {exc}", pos) from exc
                if not chunk:
                    break
                total += len(chunk)
                _check_size(total, max_size, ZSTD)
                chunks.append(chunk)
        pos = frame_end
    return b"".join(chunks)
