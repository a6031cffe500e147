"""Text checkpoint files and the clean-shutdown marker.

Kafka's CheckpointFile writes ``version``, ``count`` and one entry per line,
each line ended by the platform separator (``\\n``).  Its reader uses
BufferedReader.readLine (``\\n``, ``\\r`` and ``\\r\\n`` all end a line) and
splits entries with the regex ``\\s+`` (so a line with leading whitespace
does not parse, trailing whitespace is fine).  An empty file, or one holding
only the version line, reads as no entries.

Offset-style files (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint, cleaner-offset-checkpoint): ``topic partition offset``.
leader-epoch-checkpoint: ``epoch startOffset``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkatool.formats.errors import FormatError

CHECKPOINT_VERSION = 0
CLEAN_SHUTDOWN_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Java's \s (ASCII only): space, \t, \n, \x0b, \f, \r.
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")
_LINE_END = re.compile(rb"\r\n|\r|\n")
# Integer.parseInt / Long.parseLong: optional sign, then decimal digits (Unicode Nd, as
# Character.digit accepts them).
_JAVA_INT = re.compile(r"[+-]?\d+")


class CheckpointError(FormatError):
    """A checkpoint file Kafka would refuse to read; ``line`` is 1-based."""

    kind = "malformed_checkpoint"

    def __init__(self, message: str, position: int | None = None, *, line: int | None = None, kind=None):
        super().__init__(message, position, kind=kind)
        self.line = line


def java_parse_int(text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int | None:
    """``Integer.parseInt`` (or ``Long.parseLong`` with int64 bounds); None when Java would throw."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def java_split_whitespace(line: str) -> list[str]:
    """``line.split("\\\\s+")``: a leading separator gives a leading empty field,
    trailing empty fields are dropped."""
    parts = _JAVA_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts if _JAVA_WS.search(line) else [line]


def _lines(buf) -> list[tuple[int, int, str]]:
    """(1-based line number, byte position, text) for each readLine() result."""
    data = bytes(buf)
    out = []
    pos = 0
    lineno = 1
    for m in _LINE_END.finditer(data):
        out.append((lineno, pos, _utf8(data[pos : m.start()], pos, lineno)))
        pos = m.end()
        lineno += 1
    if pos < len(data):
        out.append((lineno, pos, _utf8(data[pos:], pos, lineno)))
    return out


def _utf8(raw: bytes, pos: int, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"line {lineno} is not valid UTF-8: {exc.reason}", pos + exc.start, line=lineno
        ) from None


def _read(buf, version: int, parse_entry) -> list:
    lines = _lines(buf)
    if not lines:
        return []
    lineno, pos, text = lines[0]
    read_version = java_parse_int(text)
    if read_version is None:
        raise CheckpointError(f"malformed line {lineno} in checkpoint file: {text!r}", pos, line=lineno)
    if read_version != version:
        raise CheckpointError(
            f"unrecognised version {read_version} in checkpoint file, expected version {version}",
            pos,
            line=lineno,
            kind="bad_version",
        )
    if len(lines) == 1:
        return []
    lineno, pos, text = lines[1]
    expected = java_parse_int(text)
    if expected is None:
        raise CheckpointError(f"malformed line {lineno} in checkpoint file: {text!r}", pos, line=lineno)
    if expected < 0:
        raise CheckpointError(
            f"negative entry count {expected} in checkpoint file", pos, line=lineno, kind="count_mismatch"
        )
    entries = []
    for lineno, pos, text in lines[2:]:
        entry = parse_entry(text)
        if entry is None:
            raise CheckpointError(f"malformed line {lineno} in checkpoint file: {text!r}", pos, line=lineno)
        entries.append(entry)
    if len(entries) != expected:
        end = len(bytes(buf))
        raise CheckpointError(
            f"expected [{expected}] entries in checkpoint file, but found [{len(entries)}]",
            end,
            line=len(lines),
            kind="count_mismatch",
        )
    return entries


def _write(version: int, lines: list[str]) -> bytes:
    out = [str(version), str(len(lines)), *lines]
    return ("\n".join(out) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------
# offset checkpoints


def _parse_offset_line(text: str):
    parts = java_split_whitespace(text)
    if len(parts) != 3:
        return None
    partition = java_parse_int(parts[1])
    offset = java_parse_int(parts[2], INT64_MIN, INT64_MAX)
    if partition is None or offset is None:
        return None
    return (parts[0], partition), offset


def decode_offset_checkpoint(buf) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; a repeated partition keeps its last line, as Kafka's map does."""
    return dict(_read(buf, CHECKPOINT_VERSION, _parse_offset_line))


def decode_offset_checkpoint_entries(buf) -> list[tuple[str, int, int]]:
    """The lines in file order, duplicates kept (for forensic display)."""
    return [(tp[0], tp[1], off) for tp, off in _read(buf, CHECKPOINT_VERSION, _parse_offset_line)]


def encode_offset_checkpoint(
    offsets: Mapping[tuple[str, int], int] | Iterable[tuple[str, int, int]],
) -> bytes:
    """Lines in the order given (Kafka writes its map's order, which is unspecified)."""
    items = offsets.items() if isinstance(offsets, Mapping) else (((t, p), o) for t, p, o in offsets)
    lines = []
    for (topic, partition), offset in items:
        _check_topic(topic)
        _check_range("partition", partition, INT32_MIN, INT32_MAX)
        _check_range("offset", offset, INT64_MIN, INT64_MAX)
        lines.append(f"{topic} {partition} {offset}")
    return _write(CHECKPOINT_VERSION, lines)


def _check_topic(topic: str) -> None:
    if not topic or _JAVA_WS.search(topic):
        raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint file")


def _check_range(name: str, value: int, lo: int, hi: int) -> None:
    if not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} {value!r} is out of range")


# ---------------------------------------------------------------------------
# leader-epoch-checkpoint


def _parse_epoch_line(text: str):
    parts = java_split_whitespace(text)
    if len(parts) != 2:
        return None
    epoch = java_parse_int(parts[0])
    start = java_parse_int(parts[1], INT64_MIN, INT64_MAX)
    if epoch is None or start is None:
        return None
    return epoch, start


def decode_leader_epoch_checkpoint(buf) -> list[tuple[int, int]]:
    """[(epoch, startOffset)] in file order."""
    return _read(buf, CHECKPOINT_VERSION, _parse_epoch_line)


def encode_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    lines = []
    for epoch, start in entries:
        _check_range("epoch", epoch, INT32_MIN, INT32_MAX)
        _check_range("start offset", start, INT64_MIN, INT64_MAX)
        lines.append(f"{epoch} {start}")
    return _write(CHECKPOINT_VERSION, lines)


# ---------------------------------------------------------------------------
# .kafka_cleanshutdown


@dataclass(frozen=True, slots=True)
class CleanShutdown:
    """Contents of ``.kafka_cleanshutdown``; Kafka only needs the file to exist.

    Brokers before KIP-966 left the file empty: version and broker epoch are
    then None.
    """

    version: int | None
    broker_epoch: int | None


def encode_clean_shutdown(broker_epoch: int, version: int = CLEAN_SHUTDOWN_VERSION) -> bytes:
    # Jackson writes the fields in declaration order, without spaces.
    return b'{"version":%d,"brokerEpoch":%d}' % (version, broker_epoch)


def decode_clean_shutdown(buf) -> CleanShutdown:
    data = bytes(buf)
    if not data.strip():
        return CleanShutdown(None, None)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"clean shutdown file is not valid JSON: {exc}", 0, kind="malformed_json") from None
    if not isinstance(obj, dict):
        raise FormatError("clean shutdown file is not a JSON object", 0, kind="malformed_json")
    version = obj.get("version", 0)
    epoch = obj.get("brokerEpoch")
    if not _is_int(version) or not INT32_MIN <= version <= INT32_MAX:
        raise FormatError(f"clean shutdown file has a bad version {version!r}", 0, kind="malformed_json")
    if epoch is not None and (not _is_int(epoch) or not INT64_MIN <= epoch <= INT64_MAX):
        raise FormatError(f"clean shutdown file has a bad brokerEpoch {epoch!r}", 0, kind="malformed_json")
    return CleanShutdown(version, epoch)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
