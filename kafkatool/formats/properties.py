"""``meta.properties`` (java.util.Properties) and ``partition.metadata``.

Kafka writes meta.properties with ``Properties.store(Writer, "")`` into a UTF-8
writer: a ``#`` line, a ``#<Date.toString()>`` line, then ``key=value`` lines
(sorted by key since JDK 18; older JDKs wrote hash order).  It reads them back
with ``Properties.load(InputStream)``, which decodes ISO-8859-1, so a non-ASCII
value does not survive Kafka's own round trip; these codecs mirror both sides
exactly (``escape_unicode=True`` gives ``store(OutputStream)`` output, which
does).

partition.metadata is ``version: 0\\ntopic_id: <Uuid>`` with no trailing
newline; Kafka's reader takes two readLine() lines, each split once at ``:``
followed by whitespace, accepts any version >= 0 and ignores what follows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from kafkatool.formats.errors import FormatError
from kafkatool.formats.uuid import ZERO_UUID, Uuid, UuidError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"

META_PROPERTIES_FILE = "meta.properties"
PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0


class PropertiesError(FormatError):
    kind = "malformed_properties"

    def __init__(self, message: str, position: int | None = None, *, line: int | None = None, kind=None):
        super().__init__(message, position, kind=kind)
        self.line = line


class MetaPropertiesError(FormatError):
    kind = "invalid_meta_properties"


class PartitionMetadataError(FormatError):
    kind = "malformed_partition_metadata"


# ---------------------------------------------------------------------------
# java.util.Properties

_WS = " \t\f"  # what Properties treats as whitespace inside a line
_NATURAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_HEX = "0123456789ABCDEF"
_JAVA_INT = re.compile(r"[+-]?\d+")


def _logical_lines(text: str):
    """Yield (start index, 1-based line number, logical line) like Properties.LineReader."""
    pos = 0
    lineno = 0
    n = len(text)
    buf: list[str] | None = None  # pieces of a logical line being continued
    start = start_line = 0
    while pos < n:
        m = _NATURAL_LINE.match(text, pos)
        raw = m.group()
        content = raw.rstrip("\r\n")
        line_pos = pos
        pos = m.end()
        lineno += 1
        stripped = content.lstrip(_WS)
        if buf is None:
            if not stripped or stripped[0] in "#!":
                continue
            buf = []
            start, start_line = line_pos, lineno
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2:
            buf.append(stripped[:-1])
            continue  # continued on the next natural line
        buf.append(stripped)
        yield start, start_line, "".join(buf)
        buf = None
    if buf is not None:  # a trailing backslash at EOF is dropped
        yield start, start_line, "".join(buf)


def _split_key_value(line: str) -> tuple[str, str]:
    key_len = 0
    limit = len(line)
    value_start = limit
    has_sep = False
    preceding_backslash = False
    while key_len < limit:
        c = line[key_len]
        if c in "=:" and not preceding_backslash:
            value_start = key_len + 1
            has_sep = True
            break
        if c in _WS and not preceding_backslash:
            value_start = key_len + 1
            break
        preceding_backslash = (not preceding_backslash) if c == "\\" else False
        key_len += 1
    while value_start < limit:
        c = line[value_start]
        if c not in _WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def _load_convert(s: str, where: int, lineno: int) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # unreachable for LineReader output; Java would fail here
            raise PropertiesError(f"dangling backslash on line {lineno}", where, line=lineno)
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"malformed \\uxxxx encoding on line {lineno}", where, line=lineno)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "r": "\r", "n": "\n", "f": "\f"}.get(c, c))
    result = "".join(out)
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in result):
        # \\uXXXX escapes are UTF-16 code units: pair up surrogates like Java's String does.
        result = result.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return result


def parse_properties_text(text: str) -> dict[str, str]:
    """``Properties.load`` over already-decoded text; later keys win."""
    props: dict[str, str] = {}
    for start, lineno, line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_load_convert(key, start, lineno)] = _load_convert(value, start, lineno)
    return props


def decode_properties(buf) -> dict[str, str]:
    """``Properties.load(InputStream)``: ISO-8859-1 bytes (positions are byte positions)."""
    return parse_properties_text(bytes(buf).decode("latin-1"))


def _save_convert(s: str, escape_space: bool, escape_unicode: bool) -> str:
    out = []
    for x, c in enumerate(s):
        o = ord(c)
        if 61 < o < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if x == 0 or escape_space else " ")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!":
            out.append("\\" + c)
        elif (o < 0x20 or o > 0x7E) and escape_unicode:
            out.append(_u_escape(c))
        else:
            out.append(c)
    return "".join(out)


def _u_escape(c: str) -> str:
    # Java escapes UTF-16 code units: a supplementary character becomes two escapes.
    units = c.encode("utf-16-be", "surrogatepass")
    return "".join(
        "\\u" + "".join(_HEX[(u >> s) & 0xF] for s in (12, 8, 4, 0))
        for u in (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
    )


def _comment_lines(comments: str) -> str:
    """Properties.writeComments: '#', line breaks re-prefixed, chars > 0xFF escaped."""
    out = ["#"]
    n = len(comments)
    i = 0
    while i < n:
        c = comments[i]
        if ord(c) > 0xFF:
            out.append(_u_escape(c))
        elif c in "\r\n":
            out.append("\n")
            if c == "\r" and i != n - 1 and comments[i + 1] == "\n":
                i += 1
            if i == n - 1 or comments[i + 1] not in "#!":
                out.append("#")
        else:
            out.append(c)
        i += 1
    out.append("\n")
    return "".join(out)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(when: datetime) -> str:
    """``java.util.Date.toString()``: ``EEE MMM dd HH:mm:ss zzz yyyy`` in the datetime's zone."""
    if when.tzinfo is None:
        raise ValueError("need a timezone-aware datetime (Date.toString prints the zone)")
    zone = when.tzname() or "UTC"
    return (
        f"{_DAYS[when.weekday()]} {_MONTHS[when.month - 1]} {when.day:02d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} {zone} {when.year}"
    )


def format_properties_text(
    props: Mapping[str, str],
    date: str | datetime,
    comments: str | None = "",
    *,
    escape_unicode: bool = False,
    sort_keys: bool = True,
) -> str:
    """``Properties.store``: optional comment, ``#<date>``, then ``key=value`` lines."""
    out = []
    if comments is not None:
        out.append(_comment_lines(comments))
    out.append("#" + (java_date_string(date) if isinstance(date, datetime) else date) + "\n")
    keys = sorted(props) if sort_keys else list(props)
    for k in keys:
        out.append(
            f"{_save_convert(k, True, escape_unicode)}={_save_convert(props[k], False, escape_unicode)}\n"
        )
    return "".join(out)


def encode_properties(
    props: Mapping[str, str],
    date: str | datetime,
    comments: str | None = "",
    *,
    escape_unicode: bool = False,
    sort_keys: bool = True,
) -> bytes:
    """Bytes as Kafka writes them (UTF-8 through a Writer, or Latin-1 escaped
    output of ``store(OutputStream)`` with ``escape_unicode=True``)."""
    text = format_properties_text(props, date, comments, escape_unicode=escape_unicode, sort_keys=sort_keys)
    return text.encode("latin-1" if escape_unicode else "utf-8")


# ---------------------------------------------------------------------------
# meta.properties


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """Typed meta.properties: version 0 (ZooKeeper: optional broker.id and
    cluster.id) or version 1 (KRaft: node.id and cluster.id required); both may
    carry directory.id.  ``node_id`` holds broker.id for version 0."""

    version: int
    node_id: int | None = None
    cluster_id: str | None = None
    directory_id: Uuid | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise ValueError(f"unknown meta.properties version number {self.version}")
        if self.version == 1 and (self.node_id is None or self.cluster_id is None):
            raise ValueError("meta.properties version 1 needs node.id and cluster.id")

    def to_properties(self) -> dict[str, str]:
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.node_id is not None:
            props[BROKER_ID_PROP if self.version == 0 else NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = str(self.directory_id)
        return props


def _required_int(props: Mapping[str, str], key: str) -> int:
    value = props.get(key)
    if value is None:
        raise MetaPropertiesError(f"failed to find {key}")
    if not _JAVA_INT.fullmatch(value) or not INT32_MIN <= int(value) <= INT32_MAX:
        raise MetaPropertiesError(f"unable to read {key} as a base-10 number: {value!r}")
    return int(value)


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_java_int(text: str, bits: int = 32) -> int | None:
    """Integer.parseInt (``bits`` 32), Long.parseLong (64) or Short.parseShort (16) of ``text``
    as given (no trimming): an optional sign and ASCII digits within the type's range; None
    where Java throws NumberFormatException.  The one rule for every Java integer the tools and
    the broker read from text."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def java_trim(s: str) -> str:
    """Java's String.trim(): every char <= U+0020 stripped from both ends (Python's strip()
    takes other whitespace, and leaves control characters)."""
    i, j = 0, len(s)
    while i < j and s[i] <= " ":
        i += 1
    while j > i and s[j - 1] <= " ":
        j -= 1
    return s[i:j]


#: Java's ``\s*,\s*`` (ConfigDef's COMMA_WITH_WHITESPACE, CoreUtils' CSV splits; Java's \s is
#: ASCII whitespace only)
COMMA_WITH_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def parse_csv_map(text: str) -> list[tuple[str, str]]:
    """Kafka's CoreUtils.parseCsvMap (KafkaConfig.getMap: listener.security.protocol.map,
    max.connections.per.ip.overrides; PasswordEncoder's stored values): ``key:value`` items
    split at commas with the whitespace around them (String.split: trailing empty items
    dropped), each at its last ``:`` (an IPv6 host keeps its colons), key and value trimmed;
    "" is no item.  The pairs in order (a later key wins, as toMap).  ValueError for an item
    with no ``:``, where Kafka's substring throws."""
    if text == "":
        return []
    items = COMMA_WITH_WHITESPACE.split(text)
    while items and items[-1] == "":
        items.pop()
    out = []
    for item in items:
        key, sep, value = item.rpartition(":")
        if not sep:
            raise ValueError(f"{item!r} is no key:value pair")
        out.append((java_trim(key), java_trim(value)))
    return out


def meta_properties_from_dict(props: Mapping[str, str]) -> MetaProperties:
    """Kafka's MetaProperties.Builder(Properties) followed by build()."""
    raw_version = props.get(VERSION_PROP, "0")
    stripped = java_trim(raw_version)
    if not _JAVA_INT.fullmatch(stripped) or not INT32_MIN <= int(stripped) <= INT32_MAX:
        raise MetaPropertiesError(f"invalid meta.properties version string '{raw_version}'")
    version = int(stripped)
    if version not in (0, 1):
        raise MetaPropertiesError(f"unknown meta.properties version number {version}")
    if version == 0:
        node_id = _required_int(props, BROKER_ID_PROP) if BROKER_ID_PROP in props else None
    else:
        node_id = _required_int(props, NODE_ID_PROP)
    cluster_id = props.get(CLUSTER_ID_PROP)
    directory_id = None
    if DIRECTORY_ID_PROP in props:
        try:
            directory_id = Uuid.from_string(props[DIRECTORY_ID_PROP])
        except UuidError as exc:
            raise MetaPropertiesError(
                f"unable to read {DIRECTORY_ID_PROP} as a Uuid: {exc.message}"
            ) from None
    if version == 1:
        if cluster_id is None:
            raise MetaPropertiesError("cluster.id was not found")
    return MetaProperties(version, node_id, cluster_id, directory_id)


def decode_meta_properties(buf) -> MetaProperties:
    return meta_properties_from_dict(decode_properties(buf))


def encode_meta_properties(meta: MetaProperties, date: str | datetime) -> bytes:
    """As PropertiesUtils.writePropertiesFile writes it (``store(writer, "")``)."""
    return encode_properties(meta.to_properties(), date, "")


# ---------------------------------------------------------------------------
# partition.metadata

_PM_SEP = re.compile(r":[ \t\n\x0b\f\r]+")  # Java ":\s+"
_PM_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    version: int
    topic_id: Uuid


def encode_partition_metadata(topic_id: Uuid, version: int = PARTITION_METADATA_VERSION) -> bytes:
    return f"version: {version}\ntopic_id: {topic_id}".encode()


def decode_partition_metadata(buf) -> PartitionMetadata:
    data = bytes(buf)
    try:
        # Java's reader decodes ahead of the lines it uses, so bad UTF-8 anywhere fails.
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PartitionMetadataError(f"not valid UTF-8: {exc.reason}", exc.start) from None
    lines: list[tuple[int, str]] = []
    pos = 0
    for _ in range(2):
        if pos >= len(text):
            break
        m = _PM_LINE_END.search(text, pos)
        end = m.start() if m else len(text)
        lines.append((len(text[:pos].encode()), text[pos:end]))
        pos = m.end() if m else len(text)
    version_value, vpos = _pm_field(lines, 0, "version", len(data))
    if not _JAVA_INT.fullmatch(version_value) or not INT32_MIN <= int(version_value) <= INT32_MAX:
        raise PartitionMetadataError(f"malformed line 1: {lines[0][1]!r}", vpos)
    version = int(version_value)
    if version < PARTITION_METADATA_VERSION:
        raise PartitionMetadataError(f"unrecognized version of partition metadata file: {version}", vpos)
    id_value, ipos = _pm_field(lines, 1, "topic_id", len(data))
    try:
        topic_id = Uuid.from_string(id_value)
    except UuidError as exc:
        raise PartitionMetadataError(f"malformed line 2: {lines[1][1]!r} ({exc.message})", ipos) from None
    if topic_id == ZERO_UUID:
        raise PartitionMetadataError("invalid topic ID in partition metadata file (the all-zero id)", ipos)
    return PartitionMetadata(version, topic_id)


def _pm_field(lines, index: int, key: str, eof: int) -> tuple[str, int]:
    if index >= len(lines):
        raise PartitionMetadataError(f"malformed line {index + 1}: missing {key} line", eof)
    pos, text = lines[index]
    parts = _PM_SEP.split(text, maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        raise PartitionMetadataError(f"malformed line {index + 1}: {text!r}", pos)
    return parts[1], pos
