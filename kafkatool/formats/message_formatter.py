"""Kafka's DefaultMessageFormatter (kafka-console-consumer.sh's output, Kafka 3.7) and a JSON
form of the same record: bytes in, bytes out, no I/O.

The formatter's properties and defaults are Kafka's: ``print.timestamp``, ``print.key``,
``print.offset``, ``print.partition``, ``print.headers`` (false), ``print.value`` (true),
``key.separator`` (a tab), ``line.separator`` (a newline), ``headers.separator`` (","),
``null.literal`` ("null"), and ``key.deserializer`` / ``value.deserializer`` /
``headers.deserializer``.  Without a deserializer Kafka writes a key's or value's bytes as they
are (ConsoleConsumer consumes with ByteArrayDeserializer); with
``org.apache.kafka.common.serialization.StringDeserializer`` it writes the UTF-8 of Java's
``new String(bytes, UTF_8)`` (:mod:`kafkatool.formats.java_utf8`: one U+FFFD per malformed
sequence).  A header key is always Java's String of its bytes (RecordHeader.key)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from kafkatool.errors import KafkatoolError
from kafkatool.formats import java_utf8
from kafkatool.formats.records import NO_TIMESTAMP_TYPE, TIMESTAMP_TYPE_NAMES, kafka_header_key

STRING_DESERIALIZER = "org.apache.kafka.common.serialization.StringDeserializer"
BYTE_ARRAY_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
#: the deserializers whose output this formatter can reproduce: True decodes as Java's String
DESERIALIZERS = {STRING_DESERIALIZER: True, BYTE_ARRAY_DESERIALIZER: False}

BOOL_PROPERTIES = (
    "print.timestamp",
    "print.key",
    "print.offset",
    "print.partition",
    "print.headers",
    "print.value",
)
BYTE_PROPERTIES = ("key.separator", "line.separator", "headers.separator", "null.literal")
DESERIALIZER_PROPERTIES = ("key.deserializer", "value.deserializer", "headers.deserializer")
PROPERTIES = BOOL_PROPERTIES + BYTE_PROPERTIES + DESERIALIZER_PROPERTIES


class FormatterPropertyError(KafkatoolError):
    """A --property the formatter does not take (one line, exit 2)."""


@dataclass(slots=True)
class ConsumerRecord:
    """One record as a consumer hands it out."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    #: (key as the decoder read it: surrogate escapes for bytes that are not UTF-8, value)
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def timestamp_type_name(timestamp_type: int) -> str:
    """TimestampType.toString: CreateTime, LogAppendTime (NoTimestampType for magic 0)."""
    return TIMESTAMP_TYPE_NAMES.get(timestamp_type, "NoTimestampType")


def _bool(name: str, value: str) -> bool:
    # DefaultMessageFormatter.getBoolProperty: value.trim.equalsIgnoreCase("true")
    return value.strip().lower() == "true"


class MessageFormatter:
    """DefaultMessageFormatter.configure + writeTo."""

    def __init__(self, properties: dict[str, str] | None = None):
        self.print_timestamp = self.print_key = self.print_offset = False
        self.print_partition = self.print_headers = False
        self.print_value = True
        self.key_separator = b"\t"
        self.line_separator = b"\n"
        self.headers_separator = b","
        self.null_literal = b"null"
        self.key_string = self.value_string = self.headers_string = False
        for name, value in (properties or {}).items():
            if name in BOOL_PROPERTIES:
                setattr(self, name.replace(".", "_"), _bool(name, value))
            elif name in BYTE_PROPERTIES:
                setattr(self, name.replace(".", "_"), value.encode("utf-8", "surrogateescape"))
            elif name in DESERIALIZER_PROPERTIES:
                if value.strip() not in DESERIALIZERS:
                    raise FormatterPropertyError(
                        f"--property {name}={value}: only {STRING_DESERIALIZER} and "
                        f"{BYTE_ARRAY_DESERIALIZER} are supported"
                    )
                setattr(self, name.split(".")[0] + "_string", DESERIALIZERS[value.strip()])
            else:
                raise FormatterPropertyError(
                    f"--property {name}={value}: unknown formatter property (known: {', '.join(PROPERTIES)})"
                )

    def _bytes(self, data: bytes | None, as_string: bool) -> bytes:
        data = self.null_literal if data is None else data
        if as_string:
            return java_utf8.decode(data).encode("utf-8", "surrogatepass")
        return bytes(data)

    def format(self, r: ConsumerRecord) -> bytes:
        out: list[bytes] = []

        def sep(column: bool) -> None:
            out.append(self.key_separator if column else self.line_separator)

        if self.print_timestamp:
            if r.timestamp_type != NO_TIMESTAMP_TYPE:
                out.append(f"{timestamp_type_name(r.timestamp_type)}:{r.timestamp}".encode())
            else:
                out.append(b"NO_TIMESTAMP")
            sep(
                self.print_offset
                or self.print_partition
                or self.print_headers
                or self.print_key
                or self.print_value
            )
        if self.print_partition:
            out.append(f"Partition:{r.partition}".encode())
            sep(self.print_offset or self.print_headers or self.print_key or self.print_value)
        if self.print_offset:
            out.append(f"Offset:{r.offset}".encode())
            sep(self.print_headers or self.print_key or self.print_value)
        if self.print_headers:
            if r.headers:
                for i, (k, v) in enumerate(r.headers):
                    out.append((kafka_header_key(k) + ":").encode("utf-8", "surrogatepass"))
                    out.append(self._bytes(v, self.headers_string))
                    if i + 1 < len(r.headers):
                        out.append(self.headers_separator)
            else:
                out.append(b"NO_HEADERS")
            sep(self.print_key or self.print_value)
        if self.print_key:
            out.append(self._bytes(r.key, self.key_string))
            sep(self.print_value)
        if self.print_value:
            out.append(self._bytes(r.value, self.value_string))
            out.append(self.line_separator)
        return b"".join(out)


def _text_or_base64(data: bytes | None) -> tuple[str | None, str]:
    """(text, encoding): the bytes as UTF-8 text when they are valid UTF-8, else base64."""
    if data is None:
        return None, "utf-8"
    try:
        return bytes(data).decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def json_object(r: ConsumerRecord) -> dict:
    """The record as one JSON object: key and value as text when valid UTF-8, else base64
    (``key_encoding`` / ``value_encoding`` say which; a header's value likewise)."""
    key, key_enc = _text_or_base64(r.key)
    value, value_enc = _text_or_base64(r.value)
    headers = []
    for k, v in r.headers:
        text, enc = _text_or_base64(v)
        h = {"key": kafka_header_key(k), "value": text}
        if enc != "utf-8":
            h["value_encoding"] = enc
        headers.append(h)
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": timestamp_type_name(r.timestamp_type),
        "key": key,
        "key_encoding": key_enc,
        "value": value,
        "value_encoding": value_enc,
        "headers": headers,
    }


def json_line(r: ConsumerRecord) -> bytes:
    return json.dumps(json_object(r), ensure_ascii=False, separators=(", ", ": ")).encode("utf-8") + b"\n"
