"""kafka-console-producer.sh's input: lines as Kafka's LineMessageReader reads them (Kafka 3.7,
ConsoleProducer.LineMessageReader) and the lines themselves as Java's BufferedReader.readLine
splits them (a line ends at \\n, \\r or \\r\\n; the last line needs no end).

The line's bytes are kept as they are: kafka-console-producer.sh decodes the input as UTF-8 and
writes each malformed sequence as U+FFFD, which corrupts binary input; kcat -P keeps the bytes, and
so do we (for UTF-8 input both write the same bytes).
"""

from __future__ import annotations

import os
import re
import select
from collections.abc import Iterator
from dataclasses import dataclass

from kafkatool.errors import KafkatoolError


class LineReaderError(KafkatoolError):
    """A --property LineMessageReader refuses, or a line it cannot parse (Kafka's KafkaException)."""


#: LineMessageReader's properties and their defaults (ConsoleProducer's --property help)
DEFAULTS = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "ignore.error": "false",
    "null.marker": None,
}


#: the names Kafka gives LineMessageReader: 3.7's (ConsoleProducer's --line-reader default,
#: classOf[LineMessageReader].getName) and 4.0's (org.apache.kafka.tools, after ConsoleProducer
#: moved to the tools module)
READER_CLASSES = ("kafka.tools.ConsoleProducer$LineMessageReader", "org.apache.kafka.tools.LineMessageReader")


def check_reader_class(name: str) -> None:
    """--line-reader: LineMessageReader by one of its class names; another reader class is Java
    code kafkatool cannot run."""
    if name.strip() not in READER_CLASSES:
        raise LineReaderError(
            f"--line-reader {name}: kafkatool reads lines with LineMessageReader only ("
            + " or ".join(READER_CLASSES)
            + ")"
        )


def check_properties(props: dict[str, str], where: str = "--property") -> dict[str, str]:
    """The property names LineMessageReader takes (``where``: --property or the --reader-config
    file); another is refused: kafkatool runs no other reader, so it can only be a typo (Kafka
    hands it to a custom reader)."""
    for key in props:
        if key not in DEFAULTS:
            raise LineReaderError(
                f"{where} {key}={props[key]!r}: unknown property {key!r} (LineMessageReader takes "
                + ", ".join(DEFAULTS)
                + ")"
            )
    return props


@dataclass
class Line:
    number: int
    data: bytes


@dataclass
class ParsedLine:
    number: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes, bytes | None]]


class LineMessageReader:
    """LineMessageReader.configure and its parse of one line."""

    def __init__(self, props: dict[str, str]):
        def flag(name: str) -> bool:
            return props.get(name, DEFAULTS[name]).strip().lower() == "true"

        def text(name: str) -> str:
            return props.get(name, DEFAULTS[name])

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = text("key.separator").encode()
        self.headers_delimiter = text("headers.delimiter").encode()
        self.headers_separator = text("headers.separator").encode()
        self.headers_key_separator = text("headers.key.separator").encode()
        marker = props.get("null.marker")
        self.null_marker = marker.encode() if marker is not None else None
        try:
            # Java's Pattern.compile: headers.separator is a regular expression
            self._headers_split = re.compile(self.headers_separator)
        except re.error as exc:
            raise LineReaderError(f"headers.separator {text('headers.separator')!r}: {exc}") from None
        pairs = [
            ("headers.delimiter", self.headers_delimiter, "headers.separator", self.headers_separator),
            (
                "headers.delimiter",
                self.headers_delimiter,
                "headers.key.separator",
                self.headers_key_separator,
            ),
            (
                "headers.separator",
                self.headers_separator,
                "headers.key.separator",
                self.headers_key_separator,
            ),
        ]
        if self.null_marker is not None:
            pairs += [
                ("null.marker", self.null_marker, "key.separator", self.key_separator),
                ("null.marker", self.null_marker, "headers.separator", self.headers_separator),
                ("null.marker", self.null_marker, "headers.delimiter", self.headers_delimiter),
                ("null.marker", self.null_marker, "headers.key.separator", self.headers_key_separator),
            ]
        for a, va, b, vb in pairs:
            if va == vb:
                raise LineReaderError(f"{a} and {b} may not be equal")

    def _field(self, enabled: bool, line: Line, start: int, sep: bytes, name: str) -> bytes | None:
        if not enabled:
            return None
        index = line.data.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise LineReaderError(
                f"No {name} found on line number {line.number}: '{line.data.decode('utf-8', 'replace')}'"
            )
        return line.data[start:index]

    def _null(self, field: bytes | None) -> bytes | None:
        return None if field is None or field == self.null_marker else field

    def parse(self, line: Line) -> ParsedLine:
        headers = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._field(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line.data[header_end + key_end :]
        out = ParsedLine(line.number, self._null(key), self._null(value), [])
        if headers is not None and headers != self.null_marker:
            out.headers = self._split_headers(headers, line.number)
        return out

    def _split_headers(self, headers: bytes, number: int) -> list[tuple[bytes, bytes | None]]:
        pairs = self._headers_split.split(headers)
        if len(pairs) > 1:  # Java's Pattern.split drops trailing empty strings
            while pairs and pairs[-1] == b"":
                pairs.pop()
        out = []
        for pair in pairs:
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if not self.ignore_error:
                    raise LineReaderError(
                        f"No header key separator found in pair '{pair.decode('utf-8', 'replace')}' "
                        f"on line number {number}"
                    )
                out.append((pair, None))
                continue
            hkey = pair[:i]
            if hkey == self.null_marker:
                raise LineReaderError(
                    f"Header keys should not be equal to the null marker "
                    f"'{self.null_marker.decode('utf-8', 'replace')}' as they can't be null"
                )
            hvalue = pair[i + len(self.headers_key_separator) :]
            out.append((hkey, None if hvalue == self.null_marker else hvalue))
        return out


class LineSource:
    """Lines of a file descriptor as BufferedReader.readLine splits them, numbered from 1,
    read without blocking past a deadline (``poll``) so that linger.ms holds for a terminal
    or a slow pipe too."""

    CHUNK = 1 << 16

    def __init__(self, stream):
        """``stream``: a binary file object (stdin's buffer, an open --file)."""
        self.stream = stream
        try:
            self.fd = stream.fileno()
        except (OSError, AttributeError, ValueError):  # no descriptor (an in-memory stream)
            self.fd = None
        self.eof = False
        self._buf = b""
        self._skip_lf = False
        self._number = 0
        try:
            import stat

            self._selectable = self.fd is not None and not stat.S_ISREG(os.fstat(self.fd).st_mode)
        except OSError:
            self._selectable = False

    def _split(self, data: bytes, final: bool) -> Iterator[Line]:
        if self._skip_lf and data[:1] == b"\n":
            data = data[1:]
        self._skip_lf = False
        data = self._buf + data
        start = 0
        for m in re.finditer(b"\r\n|\r|\n", data):
            if m.group() == b"\r" and m.end() == len(data) and not final:
                # a \r at the end of what was read: a following \n belongs to it
                self._skip_lf = True
            self._number += 1
            yield Line(self._number, data[start : m.start()])
            start = m.end()
        self._buf = data[start:]
        if final and self._buf:
            self._number += 1
            yield Line(self._number, self._buf)
            self._buf = b""

    def poll(self, timeout: float | None) -> list[Line]:
        """The complete lines readable within ``timeout`` seconds (None: wait for some)."""
        if self.eof:
            return []
        if self._selectable and timeout is not None:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
            if not ready:
                return []
        data = os.read(self.fd, self.CHUNK) if self.fd is not None else self.stream.read(self.CHUNK)
        if not data:
            self.eof = True
            return list(self._split(b"", True))
        return list(self._split(data, False))
