"""Variable-length integers.

Records use zig-zag varints/varlongs (protobuf style); flexible protocol
versions and coordinator records use unsigned varints.  Both are base-128,
low group first, high bit = more bytes follow.
"""

from __future__ import annotations

from kafkatool.formats.errors import CorruptRecordError, TruncatedError


def read_uvarint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; return (value, position after it)."""
    result = 0
    shift = 0
    end = len(buf)
    start = pos
    while True:
        if pos >= end:
            raise TruncatedError("varint runs past the end of the buffer", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes", start)


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    return read_uvarint(buf, pos, 10)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zig-zag int32."""
    raw, pos = read_uvarint(buf, pos, 5)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zig-zag int64."""
    raw, pos = read_uvarint(buf, pos, 10)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("unsigned varint cannot be negative")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag32(value: int) -> int:
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def zigzag64(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def write_varint(value: int) -> bytes:
    """Zig-zag int32."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"{value} does not fit a varint (int32)")
    return write_uvarint(zigzag32(value))


def write_varlong(value: int) -> bytes:
    """Zig-zag int64."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    return write_uvarint(zigzag64(value))


def size_of_uvarint(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def size_of_varint(value: int) -> int:
    return size_of_uvarint(zigzag32(value))


def size_of_varlong(value: int) -> int:
    return size_of_uvarint(zigzag64(value))
