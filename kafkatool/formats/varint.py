"""Variable-length integers: the project's one implementation.

Records use zig-zag varints/varlongs (protobuf style); flexible protocol
versions and coordinator records use unsigned varints.  Both are base-128,
low group first, high bit = more bytes follow.  The readers run per field of
every record in deep iteration and per field of every flexible request, so the
one-byte case returns first.
"""

from __future__ import annotations

from kafkatool.formats.errors import CorruptRecordError, TruncatedError


def read_uvarint(buf, pos: int, end: int, limit: int = 5) -> tuple[int, int]:
    """An unsigned varint of at most ``limit`` bytes at ``pos`` (before ``end``);
    returns (value, position after it)."""
    b = buf[pos] if pos < end else -1
    if b < 0:
        raise TruncatedError("varint runs past the end of the data", pos)
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        if pos >= end:
            raise TruncatedError("varint runs past the end of the data", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= limit:
            raise CorruptRecordError(f"varint longer than {limit} bytes", start)


#: The zig-zag value of every 14-bit unsigned value: a varint of one byte, or of two
#: (``(b0 & 0x7F) | (b1 << 7)``), decoded by one index.  The record readers' fast path:
#: no varint this short can break a length limit.
ZIGZAG_14 = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))


def read_zz32(buf, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag int32 (a record's varint): Kafka's ByteUtils.readVarint, at most 5 bytes
    ("Varint is too long" beyond), bits past the 32nd dropped.  The record decoder and the
    cleaner's key scan both read every int varint of a record here."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # most lengths, deltas and counts of a record
            return ZIGZAG_14[b], pos + 1
    raw, pos = read_uvarint(buf, pos, end, 5)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_zz64(buf, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag int64 (a record's varlong): Kafka's ByteUtils.readVarlong, at most 10 bytes."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # a timestamp delta inside a batch of one millisecond's records
            return ZIGZAG_14[b], pos + 1
    raw, pos = read_uvarint(buf, pos, end, 10)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def append_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("unsigned varint cannot be negative")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    append_uvarint(out, value)
    return bytes(out)


def zigzag32(value: int) -> int:
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def zigzag64(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def size_of_uvarint(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n
