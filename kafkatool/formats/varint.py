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


def read_zz32(buf, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag int32 (a record's varint)."""
    raw, pos = read_uvarint(buf, pos, end, 5)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_zz64(buf, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag int64 (a record's varlong)."""
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
