"""Runtime for the message classes generated from Kafka's JSON schemas.

``tools/gen_protocol.py`` turns every schema (requests, responses, headers,
``__consumer_offsets`` / ``__transaction_state`` records, KRaft metadata
records) into straight-line encode/decode functions.  Those functions call the
small primitive readers and writers defined here: fixed-width integers go
through precompiled ``struct.Struct`` objects in the generated modules, the
variable-width types (classic and compact strings, bytes, records, arrays,
unsigned varints, tagged sections) through the helpers below.

Decoding never trusts a length: every string, bytes, array count and tagged
field size is checked against the bytes left in the buffer *before* anything
is sliced or allocated, so a corrupt length claiming 2 GiB raises
``SchemaDecodeError`` at once instead of allocating.  ``records`` fields are
returned as memoryview slices of the input (zero copy); ``bytes`` fields are
copied, as Java copies them.
"""

from __future__ import annotations

import base64
import struct
import uuid as _uuid
from typing import NoReturn

from kafkatool.errors import KafkatoolError
from kafkatool.formats import java_utf8
from kafkatool.formats.errors import CorruptRecordError, FormatError, TruncatedError
from kafkatool.formats.varint import append_uvarint, read_uvarint, write_uvarint

__all__ = [
    "MISSING",
    "ZERO_UUID",
    "FieldInfo",
    "Message",
    "SchemaDecodeError",
    "SchemaEncodeError",
    "UnsupportedVersionError",
    "kafka_uuid_str",
]


class SchemaDecodeError(FormatError):
    """Bytes that do not decode as the schema message they are supposed to be."""

    kind = "protocol"


class SchemaEncodeError(KafkatoolError, ValueError):
    """A message object that cannot be written (a null in a non-nullable field, a value out of range)."""


class UnsupportedVersionError(SchemaEncodeError):
    """A non-default value in a non-ignorable field that the requested version does not have."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: Default marker for array and struct parameters (``None`` is a real value for nullable ones).
MISSING = _Missing()

ZERO_UUID = _uuid.UUID(int=0)
_UUID = _uuid.UUID

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U16_NULL = b"\xff\xff"
_I32_NULL = b"\xff\xff\xff\xff"


# --------------------------------------------------------------------------- errors


def truncated(pos: int, what: str) -> None:
    raise SchemaDecodeError(f"buffer ends inside {what}", pos, kind="truncated")


def null_error(pos: int, what: str) -> None:
    raise SchemaDecodeError(f"non-nullable field {what} was serialized as null", pos)


def _too_long(pos: int, n: int, left: int, what: str) -> None:
    raise SchemaDecodeError(f"{what} length {n} exceeds the {left} bytes left", pos, kind="truncated")


# --------------------------------------------------------------------------- varints


def r_uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (Java ``readUnsignedVarint``)."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    try:
        value, after = read_uvarint(buf, pos, end, 5)
    except TruncatedError:
        raise SchemaDecodeError("buffer ends inside an unsigned varint", pos, kind="truncated") from None
    except CorruptRecordError:
        raise SchemaDecodeError("unsigned varint longer than 5 bytes", pos) from None
    if value > 0xFFFFFFFF:
        raise SchemaDecodeError("unsigned varint does not fit 32 bits", pos)
    return value, after


uvarint_bytes = write_uvarint
w_uvarint = append_uvarint


# --------------------------------------------------------------------------- strings


def _utf8(buf, start: int, stop: int) -> str:
    # Java's new String(bytes, UTF_8) replaces malformed sequences, it never throws
    # (java_utf8: one U+FFFD for what Java makes one of).
    return str(buf[start:stop], "utf-8", java_utf8.ERRORS)


def r_str(buf, pos: int, end: int) -> tuple[str, int]:
    """Classic (int16 length) non-nullable string."""
    if end - pos < 2:
        truncated(pos, "a string length")
    n = (buf[pos] << 8) | buf[pos + 1]
    if n & 0x8000:
        null_error(pos, "string")
    pos += 2
    if n > end - pos:
        _too_long(pos - 2, n, end - pos, "string")
    return _utf8(buf, pos, pos + n), pos + n


def r_nstr(buf, pos: int, end: int) -> tuple[str | None, int]:
    """Classic nullable string (length -1 = null)."""
    if end - pos < 2:
        truncated(pos, "a string length")
    n = (buf[pos] << 8) | buf[pos + 1]
    if n & 0x8000:  # Java reads any negative length of a nullable string as null
        return None, pos + 2
    pos += 2
    if n > end - pos:
        _too_long(pos - 2, n, end - pos, "string")
    return _utf8(buf, pos, pos + n), pos + n


def r_cstr(buf, pos: int, end: int) -> tuple[str, int]:
    """Compact non-nullable string (uvarint length+1)."""
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        null_error(start, "string")
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "string")
    if n > 0x7FFF:
        raise SchemaDecodeError(f"string length {n} exceeds the maximum 32767", start)
    return _utf8(buf, pos, pos + n), pos + n


def r_ncstr(buf, pos: int, end: int) -> tuple[str | None, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "string")
    if n > 0x7FFF:
        raise SchemaDecodeError(f"string length {n} exceeds the maximum 32767", start)
    return _utf8(buf, pos, pos + n), pos + n


def _encode_str(s, what: str = "string") -> bytes:
    if not isinstance(s, str):
        raise SchemaEncodeError(f"{what}: expected str, got {type(s).__name__}")
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise SchemaEncodeError(f"string of {len(b)} bytes is longer than 32767")
    return b


def w_str(out: bytearray, s: str) -> None:
    b = _encode_str(s)
    out += _I16.pack(len(b))
    out += b


def w_nstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _U16_NULL
        return
    b = _encode_str(s)
    out += _I16.pack(len(b))
    out += b


def w_cstr(out: bytearray, s: str) -> None:
    b = _encode_str(s)
    w_uvarint(out, len(b) + 1)
    out += b


def w_ncstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
        return
    b = _encode_str(s)
    w_uvarint(out, len(b) + 1)
    out += b


# --------------------------------------------------------------------------- bytes and records


def _r_i32_len(buf, pos: int, end: int) -> int:
    if end - pos < 4:
        truncated(pos, "a length")
    return _I32.unpack_from(buf, pos)[0]


def r_bytes(buf, pos: int, end: int) -> tuple[bytes, int]:
    n = _r_i32_len(buf, pos, end)
    if n < 0:
        null_error(pos, "bytes")
    p = pos + 4
    if n > end - p:
        _too_long(pos, n, end - p, "bytes")
    return bytes(buf[p : p + n]), p + n


def r_nbytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    n = _r_i32_len(buf, pos, end)
    if n < 0:
        return None, pos + 4
    p = pos + 4
    if n > end - p:
        _too_long(pos, n, end - p, "bytes")
    return bytes(buf[p : p + n]), p + n


def r_cbytes(buf, pos: int, end: int) -> tuple[bytes, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        null_error(start, "bytes")
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "bytes")
    return bytes(buf[pos : pos + n]), pos + n


def r_ncbytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "bytes")
    return bytes(buf[pos : pos + n]), pos + n


def r_records(buf, pos: int, end: int) -> tuple[memoryview, int]:
    n = _r_i32_len(buf, pos, end)
    if n < 0:
        null_error(pos, "records")
    p = pos + 4
    if n > end - p:
        _too_long(pos, n, end - p, "records")
    return buf[p : p + n], p + n


def r_nrecords(buf, pos: int, end: int) -> tuple[memoryview | None, int]:
    n = _r_i32_len(buf, pos, end)
    if n < 0:
        return None, pos + 4
    p = pos + 4
    if n > end - p:
        _too_long(pos, n, end - p, "records")
    return buf[p : p + n], p + n


def r_crecords(buf, pos: int, end: int) -> tuple[memoryview, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        null_error(start, "records")
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "records")
    return buf[pos : pos + n], pos + n


def r_ncrecords(buf, pos: int, end: int) -> tuple[memoryview | None, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "records")
    return buf[pos : pos + n], pos + n


def _nbytes(b) -> int:
    if type(b) is memoryview:
        return b.nbytes
    if not isinstance(b, bytes | bytearray | memoryview):
        raise SchemaEncodeError(f"expected bytes, got {type(b).__name__}")
    return len(b)


def w_bytes(out: bytearray, b) -> None:
    out += _I32.pack(_nbytes(b))
    out += b


def w_nbytes(out: bytearray, b) -> None:
    if b is None:
        out += _I32_NULL
        return
    out += _I32.pack(_nbytes(b))
    out += b


def w_cbytes(out: bytearray, b) -> None:
    w_uvarint(out, _nbytes(b) + 1)
    out += b


def w_ncbytes(out: bytearray, b) -> None:
    if b is None:
        out.append(0)
        return
    w_uvarint(out, _nbytes(b) + 1)
    out += b


# --------------------------------------------------------------------------- arrays


def r_count(buf, pos: int, end: int) -> tuple[int, int]:
    """Classic int32 array count; -1 = null.  A count above the bytes left is rejected."""
    if end - pos < 4:
        truncated(pos, "an array count")
    n = _I32.unpack_from(buf, pos)[0]
    if n < 0:  # Java: any negative count is null (an error for non-nullable arrays)
        return -1, pos + 4
    p = pos + 4
    if n > end - p:
        _too_long(pos, n, end - p, "array")
    return n, p


def r_ccount(buf, pos: int, end: int) -> tuple[int, int]:
    """Compact array count (uvarint count+1); -1 = null."""
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    n -= 1
    if n > end - pos:
        _too_long(start, n, end - pos, "array")
    return n, pos


#: ``array_structs(count, code)[n]`` packs an array's count and its n fixed-width elements in
#: one call (unpacks them with ``count=""``): a Metadata answer of 10,000 partitions writes and
#: reads 30,000 replica lists of one to a few ids.  Below 127, so a compact count is one byte.
ARRAY_STRUCTS_MAX_N = 32
_ARRAY_STRUCTS: dict[tuple[str, str], tuple[struct.Struct, ...]] = {}


def array_structs(count: str, code: str) -> tuple[struct.Struct, ...]:
    """Structs of ``count`` then 0 to ``ARRAY_STRUCTS_MAX_N`` values of ``code``, by length.

    ``count`` is ``"i"`` (classic int32 count), ``"B"`` (compact count: uvarint n + 1, one
    byte for every length here) or ``""`` (the elements alone)."""
    table = _ARRAY_STRUCTS.get((count, code))
    if table is None:
        table = tuple(struct.Struct(f">{count}{n}{code}") for n in range(ARRAY_STRUCTS_MAX_N + 1))
        _ARRAY_STRUCTS[(count, code)] = table
    return table


def _array_struct(code: str, n: int) -> struct.Struct:
    if n <= ARRAY_STRUCTS_MAX_N:
        return array_structs("", code)[n]
    return struct.Struct(f">{n}{code}")


def r_fixed_array(buf, pos: int, end: int, n: int, code: str, size: int) -> tuple[list, int]:
    total = n * size
    if total > end - pos:
        _too_long(pos, n, (end - pos) // size, "array")
    if not n:
        return [], pos
    return list(_array_struct(code, n).unpack_from(buf, pos)), pos + total


def r_uuid_array(buf, pos: int, end: int, n: int) -> tuple[list, int]:
    total = n * 16
    if total > end - pos:
        _too_long(pos, n, (end - pos) // 16, "array")
    raw = bytes(buf[pos : pos + total])
    return [_UUID(bytes=raw[i : i + 16]) for i in range(0, total, 16)], pos + total


def r_str_array(buf, pos: int, end: int, n: int, compact: bool) -> tuple[list, int]:
    read = r_cstr if compact else r_str
    values = []
    for _ in range(n):
        s, pos = read(buf, pos, end)
        values.append(s)
    return values, pos


def w_count(out: bytearray, arr) -> None:
    out += _I32.pack(len(arr))


def w_ccount(out: bytearray, arr) -> None:
    w_uvarint(out, len(arr) + 1)


def w_fixed_array(out: bytearray, arr, code: str) -> None:
    if arr:
        out += _array_struct(code, len(arr)).pack(*arr)


def w_uuid_array(out: bytearray, arr) -> None:
    for u in arr:
        out += u.bytes


def w_str_array(out: bytearray, arr, compact: bool) -> None:
    write = w_cstr if compact else w_str
    for s in arr:
        write(out, s)


def null_field(what: str) -> NoReturn:
    raise SchemaEncodeError(f"non-nullable field {what} is null")


def not_null(value, what: str):
    if value is None:
        null_field(what)
    return value


def r_uuid(raw: bytes) -> _uuid.UUID:
    return _UUID(bytes=raw)


# --------------------------------------------------------------------------- tagged fields


def r_tag_header(buf, pos: int, end: int) -> tuple[int, int, int]:
    """Read one tagged field's tag and size; return (tag, start of value, end of value)."""
    tag, pos = r_uvarint(buf, pos, end)
    start = pos
    size, pos = r_uvarint(buf, pos, end)
    if size > end - pos:
        _too_long(start, size, end - pos, "tagged field")
    return tag, pos, pos + size


def r_tag_count(buf, pos: int, end: int) -> tuple[int, int]:
    start = pos
    n, pos = r_uvarint(buf, pos, end)
    if n > end - pos:
        _too_long(start, n, end - pos, "tagged field section")
    return n, pos


def w_tags(out: bytearray, tags: list) -> None:
    """Write a tagged section from ``[(tag, payload bytes), ...]`` (sorted here)."""
    tags.sort(key=lambda t: t[0])
    w_uvarint(out, len(tags))
    for tag, payload in tags:
        w_uvarint(out, tag)
        w_uvarint(out, len(payload))
        out += payload


def w_unknown_tags(out: bytearray, unknown) -> None:
    if not unknown:
        out.append(0)
    else:
        w_tags(out, list(unknown))


# --------------------------------------------------------------------------- message base


class FieldInfo(tuple):
    """Static description of one schema field, used by JSON rendering and tests.

    ``kind`` is the schema type of the field (``int32``, ``string``, ``records``,
    ``uuid``, ``struct``, ``array``); for arrays ``elem`` is the element kind and
    ``cls`` the element class when it is a struct.  Version ranges are
    ``(low, high)`` pairs or ``None``.
    """

    __slots__ = ()
    _names = (
        "attr",
        "json_name",
        "kind",
        "elem",
        "cls",
        "versions",
        "nullable",
        "tagged",
        "tag",
        "default",
        "ignorable",
    )

    def __new__(
        cls, attr, json_name, kind, elem, struct_cls, versions, nullable, tagged, tag, default, ignorable
    ):
        return tuple.__new__(
            cls,
            (attr, json_name, kind, elem, struct_cls, versions, nullable, tagged, tag, default, ignorable),
        )

    attr = property(lambda self: self[0])
    json_name = property(lambda self: self[1])
    kind = property(lambda self: self[2])
    elem = property(lambda self: self[3])
    cls = property(lambda self: self[4])
    versions = property(lambda self: self[5])
    nullable = property(lambda self: self[6])
    tagged = property(lambda self: self[7])
    tag = property(lambda self: self[8])
    default = property(lambda self: self[9])
    ignorable = property(lambda self: self[10])

    def default_value(self):
        d = self[9]
        if d is MISSING:
            return [] if self[2] == "array" else self[4]()
        return d


def in_range(version: int, rng) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class Message:
    """Base of every generated struct and message class."""

    __slots__ = ()

    #: FieldInfo tuples, in schema order.
    _FIELDS: tuple = ()
    #: For top-level messages: decoder / encoder per version (index = version).
    _DECODERS: tuple = ()
    _ENCODERS: tuple = ()
    NAME = ""
    API_KEY: int | None = None
    VALID_VERSIONS: tuple[int, int] = (0, 0)
    FLEXIBLE_VERSIONS: tuple[int, int] | None = None

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__ if s != "_unknown_tags"
        ) and ((self._unknown_tags or None) == (other._unknown_tags or None))

    __hash__ = None  # mutable

    def __copy__(self):
        """A shallow copy (lists shared), slot by slot: copy.copy's default way (__reduce_ex__
        and copyreg) costs 1.5 us for a request, this 0.3."""
        new = object.__new__(type(self))
        for s in self.__slots__:
            try:
                setattr(new, s, getattr(self, s))
            except AttributeError:  # never set
                pass
        return new

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.attr}={getattr(self, f.attr)!r}" for f in self._FIELDS)
        return f"{type(self).__name__}({parts})"

    # -- versions

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return in_range(version, cls.FLEXIBLE_VERSIONS)

    @classmethod
    def _decoder(cls, version: int):
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise SchemaDecodeError(
                f"{cls.NAME} has no version {version} (valid {lo}-{hi})", 0, kind="version"
            )
        return cls._DECODERS[version]

    # -- bytes

    @classmethod
    def decode_from(cls, buf, pos: int, end: int, version: int):
        """Decode at ``buf[pos:end]`` (``buf`` a memoryview); return (message, position after it)."""
        return cls._decoder(version)(buf, pos, end)

    @classmethod
    def decode(cls, data, version: int, *, allow_trailing: bool = False):
        """Decode one whole message from ``data`` (bytes or memoryview)."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        end = len(buf)
        msg, pos = cls._decoder(version)(buf, 0, end)
        if pos != end and not allow_trailing:
            raise SchemaDecodeError(f"{end - pos} unexpected bytes after {cls.NAME} v{version}", pos)
        return msg

    def encode_into(self, out: bytearray, version: int) -> None:
        lo, hi = self.VALID_VERSIONS
        if not lo <= version <= hi:
            raise UnsupportedVersionError(f"{self.NAME} has no version {version} (valid {lo}-{hi})")
        try:
            self._ENCODERS[version](self, out)
        except struct.error as e:
            raise SchemaEncodeError(f"{self.NAME} v{version}: {e}") from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    # -- JSON, as Kafka's generated *JsonConverter classes write it

    def to_json(self, version: int) -> dict:
        return struct_to_json(self, version)


def _scalar_to_json(kind: str, value):
    if value is None:
        return None
    if kind == "uuid":
        return kafka_uuid_str(value)
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "float64":
        return JavaDouble(value)
    return value


class JavaDouble(float):
    """A float that ``json_dumps_java`` prints as Java's ``Double.toString`` would."""


def struct_to_json(obj: Message, version: int) -> dict:
    node: dict = {}
    for f in obj._FIELDS:
        if not in_range(version, f.versions):
            continue
        value = getattr(obj, f.attr)
        if in_range(version, f.tagged) and value == f.default_value():
            continue
        kind = f.kind
        if value is None:
            node[f.json_name] = None
        elif kind == "struct":
            node[f.json_name] = struct_to_json(value, version)
        elif kind == "array":
            if f.elem == "struct":
                node[f.json_name] = [struct_to_json(e, version) for e in value]
            else:
                node[f.json_name] = [_scalar_to_json(f.elem, e) for e in value]
        else:
            node[f.json_name] = _scalar_to_json(kind, value)
    return node


def kafka_uuid_str(u: _uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def java_double_str(x: float) -> str:
    """``Double.toString``: plain notation in [1e-3, 1e7), else d.dddE[-]n."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    a = abs(x)
    if 1e-3 <= a < 1e7:
        s = repr(x)
        if "e" in s or "E" in s:
            s = format(x, "f")
        if "." not in s:
            s += ".0"
        return s
    # shortest round-trip digits, re-expressed in scientific notation
    sci = format(a, ".16e")
    for prec in range(0, 17):
        cand = format(a, f".{prec}e")
        if float(cand) == a:
            sci = cand
            break
    m, e = sci.split("e")
    if "." not in m:
        m += ".0"
    m = m.rstrip("0")
    if m.endswith("."):
        m += "0"
    return ("-" if x < 0 else "") + f"{m}E{int(e)}"


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _json_str(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_dumps_java(value) -> str:
    """Compact JSON exactly as Jackson's ``JsonNode.toString()`` writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _json_str(value)
    if isinstance(value, JavaDouble):
        return java_double_str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, dict):
        return "{" + ",".join(_json_str(k) + ":" + json_dumps_java(v) for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_dumps_java(v) for v in value) + "]"
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


#: Classic null array count / null bytes length (int32 -1).
NULL_COUNT = _I32_NULL
