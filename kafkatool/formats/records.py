"""Record batches (magic 2) and legacy message sets (magic 0 and 1).

Parsing is lazy: a batch object reads its fixed header with one
``struct.unpack_from`` and keeps a memoryview of its bytes; records are only
decoded (and decompressed) when iterated.  Positions in errors are relative to
the buffer the batch was read from.

Layouts: ../shared/notes/storage.md section 1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kafkatool.formats import compression, java_utf8
from kafkatool.formats.crc import crc32, crc32c
from kafkatool.formats.errors import (
    CompressionError,
    CorruptRecordError,
    FormatError,
    IllegalArgumentError,
    InvalidRecordError,
    LegacyFieldError,
    StreamError,
    TruncatedError,
)
from kafkatool.formats.varint import (
    ZIGZAG_14,
    append_uvarint,
    size_of_uvarint,
    write_uvarint,
    zigzag32,
    zigzag64,
)
from kafkatool.formats.varint import read_zz32 as _read_zz32
from kafkatool.formats.varint import read_zz64 as _read_zz64

# ---------------------------------------------------------------- constants

LOG_OVERHEAD = 12  # offset:int64 + size:int32 in front of every entry
HEADER_PEEK = 17  # enough to read offset, size and the magic byte (always at 16)
RECORD_BATCH_OVERHEAD = 61
LEGACY_OVERHEAD_V0 = 14  # crc, magic, attributes, key length, value length
LEGACY_OVERHEAD_V1 = 22  # + timestamp
MIN_ENTRY_SIZE = LEGACY_OVERHEAD_V0  # Kafka: size < 14 is corrupt

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP_TYPE = -1
TIMESTAMP_TYPE_NAMES = {
    NO_TIMESTAMP_TYPE: "NoTimestampType",
    CREATE_TIME: "CreateTime",
    LOG_APPEND_TIME: "LogAppendTime",
}

# Control record types (key: version:int16, type:int16)
ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
CONTROL_TYPE_NAMES = {
    ABORT: "ABORT",
    COMMIT: "COMMIT",
    LEADER_CHANGE: "LEADER_CHANGE",
    SNAPSHOT_HEADER: "SNAPSHOT_HEADER",
    SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    KRAFT_VERSION: "KRAFT_VERSION",
    KRAFT_VOTERS: "KRAFT_VOTERS",
}

_ENTRY_PEEK = struct.Struct(">qiib")  # offset, size, (crc or leader epoch), magic
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_CRC_FIELDS = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (bytes 21..61)
_LEGACY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LEGACY_V1_TS = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
_OFFSET_FIELD = struct.Struct(">q")
_LEADER_EPOCH_FIELD = struct.Struct(">i")


# ---------------------------------------------------------------- records


@dataclass(slots=True)
class Record:
    """One record as a consumer sees it (any magic)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    #: (key, value); a key that is not UTF-8 holds its bytes as surrogate escapes (walk_headers)
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    # v2 only
    offset_delta: int = 0
    timestamp_delta: int = 0
    sequence: int = NO_SEQUENCE
    size_in_bytes: int = 0
    # legacy only
    crc: int | None = None
    is_valid: bool = True
    magic: int = 2
    #: the message's own attributes byte, and its CRC as computed
    attributes: int = 0
    computed_crc: int | None = None
    #: the type Kafka's LegacyRecord.timestampType() gives: an inner v1 message takes its
    #: wrapper's, magic 0 has none
    timestamp_type: int = NO_TIMESTAMP_TYPE
    position: int = 0  # byte position of the record (v2) or message (legacy) in its buffer

    @property
    def key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        return -1 if self.value is None else len(self.value)


@dataclass(slots=True)
class UnreadableRecord(Record):
    """A legacy message whose key or value Kafka's LegacyRecord cannot read (``error``, a
    :class:`LegacyFieldError`), as ``LegacyBatch.records(lenient=True)`` hands it out: key and
    value None.  LogValidator reads a message's key and value only after its checks
    (validateRecord) or, for an uncompressed set kept uncompressed, before them all
    (estimateSizeInBytes); the validator raises ``error`` where Kafka's read would throw."""

    error: LegacyFieldError | None = None


@dataclass(slots=True)
class ControlRecord:
    """The decoded key (and, for transaction markers, value) of a control record."""

    version: int
    type: int
    coordinator_epoch: int | None = None  # COMMIT/ABORT only

    @property
    def type_name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type, "UNKNOWN")


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: a producer's sequence numbers wrap from
    Integer.MAX_VALUE to 0."""
    return (sequence + increment) & 0x7FFFFFFF


def parse_control_record(record: Record) -> ControlRecord:
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key shorter than 4 bytes", record.position)
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has negative version {version}", record.position)
    marker = ControlRecord(version, ctype)
    if ctype in (ABORT, COMMIT):
        value = record.value
        if value is None or len(value) < 6:
            raise CorruptRecordError("transaction marker value shorter than 6 bytes", record.position)
        _, marker.coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    return marker


def walk_headers(data, pos: int, rec_end: int, out: list | None, key_at: list | None = None) -> int:
    """Read a record's headers from their count at ``pos``, with DefaultRecord.readFrom's
    structure rules (the count in [0, bytes left], no negative key length, no field past the
    record); returns the position after them.  The one header walker: the decoder passes
    ``out`` to get the headers, the cleaner's key scan None to check them only; with ``out``,
    ``key_at`` (verify's header key findings) gets each key's byte position in ``data``.

    A key is decoded with ``surrogateescape``: Kafka never refuses a key that is not UTF-8
    (RecordHeader.key is Java's String of the bytes, malformed sequences as U+FFFD), and the
    escapes keep its bytes (:func:`header_key_bytes`; :func:`kafka_header_key` is Kafka's
    String)."""
    # one-byte varints (every length below 64) by one index into ZIGZAG_14, as the key scan
    # reads them; longer ones, and a varint at the record's end, by the varint readers
    zz = ZIGZAG_14
    n, pos = _read_zz32(data, pos, rec_end)
    if n < 0 or n > rec_end - pos:
        raise CorruptRecordError(f"invalid header count {n}", pos)
    for _h in range(n):
        if pos < rec_end and data[pos] < 0x80:
            klen = zz[data[pos]]
            pos += 1
        else:
            klen, pos = _read_zz32(data, pos, rec_end)
        if klen < 0 or pos + klen > rec_end:
            raise CorruptRecordError(f"invalid header key length {klen}", pos)
        kstart = pos
        pos += klen
        if pos < rec_end and data[pos] < 0x80:
            vlen = zz[data[pos]]
            pos += 1
        else:
            vlen, pos = _read_zz32(data, pos, rec_end)
        if vlen < 0:
            vstart = -1
        else:
            if pos + vlen > rec_end:
                raise TruncatedError("header value runs past the record", pos)
            vstart = pos
            pos += vlen
        if out is not None:
            key = str(data[kstart : kstart + klen], "utf-8", "surrogateescape")
            out.append((key, None if vstart < 0 else bytes(data[vstart:pos])))
            if key_at is not None:
                key_at.append(kstart)
    return pos


def header_key_bytes(key: str | bytes) -> bytes:
    """The bytes of a header key as the decoder read them (its surrogate escapes undone)."""
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    return key.encode("utf-8", "surrogateescape")


def kafka_header_key(key: str) -> str:
    """The String Kafka holds for a decoded header key (RecordHeader.key: Java's
    ``new String(bytes, UTF_8)``, each malformed sequence one U+FFFD): what DumpLogSegments
    prints and what Kafka writes when it rebuilds the record."""
    try:
        key.encode("utf-8")
        return key
    except UnicodeEncodeError:
        pass
    try:
        return java_utf8.decode(key.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a lone surrogate the decoder never makes (a caller's str)
        return key


def decode_records_v2(
    data,
    count: int,
    base_offset: int,
    base_timestamp: int,
    *,
    log_append_time: int | None = None,
    base_sequence: int = NO_SEQUENCE,
    position_base: int = 0,
    key_at: list | None = None,
) -> Iterator[Record]:
    """Decode ``count`` v2 records from ``data`` (already decompressed).

    ``position_base`` is added to positions in errors and records (the byte
    position of ``data[0]`` in the caller's coordinates; for compressed
    batches positions are inside the decompressed stream).  ``key_at`` gets the
    byte position of every header key, record after record, in the same coordinates once
    every record was read.
    """
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            length, pos = _read_zz32(data, pos, end)
            body_start = pos
            if length < 0:
                raise CorruptRecordError(f"record has negative length {length}", start)
            rec_end = pos + length
            if rec_end > end:
                raise TruncatedError(f"record of {length} bytes runs past the end of the batch", start)
            try:
                if pos >= rec_end:
                    raise TruncatedError("empty record body", start)
                pos += 1  # attributes (unused)
                ts_delta, pos = _read_zz64(data, pos, rec_end)
                off_delta, pos = _read_zz32(data, pos, rec_end)
                klen, pos = _read_zz32(data, pos, rec_end)
                if klen < 0:
                    key = None
                else:
                    if pos + klen > rec_end:
                        raise TruncatedError("record key runs past the record", pos)
                    key = bytes(data[pos : pos + klen])
                    pos += klen
                vlen, pos = _read_zz32(data, pos, rec_end)
                if vlen < 0:
                    value = None
                else:
                    if pos + vlen > rec_end:
                        raise TruncatedError("record value runs past the record", pos)
                    value = bytes(data[pos : pos + vlen])
                    pos += vlen
                headers = []
                if pos < rec_end and not data[pos]:
                    pos += 1  # no headers (most records)
                else:
                    pos = walk_headers(data, pos, rec_end, headers, key_at)
            except TruncatedError as exc:
                raise CorruptRecordError(exc.message, exc.position) from None
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record declares {length} bytes but its fields use {pos - body_start}",
                    start,
                )
            if base_sequence >= 0:
                seq = increment_sequence(base_sequence, off_delta)
            else:
                seq = NO_SEQUENCE
            yield Record(
                offset=base_offset + off_delta,
                timestamp=log_append_time if log_append_time is not None else base_timestamp + ts_delta,
                key=key,
                value=value,
                headers=headers,
                offset_delta=off_delta,
                timestamp_delta=ts_delta,
                sequence=seq,
                size_in_bytes=rec_end - start,
                position=position_base + start,
            )
    except FormatError as exc:
        # errors inside (the varint readers' too) are relative to ``data``: one shift for all
        raise _invalid_record(exc).shifted(position_base) from None
    if key_at and position_base:
        key_at[:] = [k + position_base for k in key_at]
    if pos != end:
        more = _whole_records(data, pos, end)
        held = f"; they hold {more} more whole records" if more else ""
        raise InvalidRecordError(
            f"batch declares {count} records but {end - pos} bytes are left after them{held}",
            position_base + pos,
            kind="bad_count",
        )


def _invalid_record(exc: FormatError) -> FormatError:
    """A v2 record that does not decode is Kafka's InvalidRecordException, whatever broke
    (DefaultRecord.readFrom: "Found invalid record structure", "Invalid record size ...";
    DefaultRecordBatch.RecordIterator: "Incorrect declared batch size ..."), so a produce
    answers INVALID_RECORD; the error keeps its kind (verify's and recovery's category)."""
    if isinstance(exc, InvalidRecordError):
        return exc
    return InvalidRecordError(exc.message, exc.position, kind=exc.kind)


def skip_key_value_records(batch: RecordBatch, *, partial: bool) -> Iterator[tuple[int, int, int, int]]:
    """(offset, timestamp, key size, value size) of each record of the v2 ``batch`` as a consumer
    sees them, read as Kafka's LogValidator reads them and copying no key, value or header (a
    compressed batch is decompressed): what its record rules need (a timestamp, whether there is
    a key, a record error's text).  A size is as written, -1 (or any negative) for null.

    The reader decides which records are refused, so it is Kafka's (DefaultRecordBatch):
    - ``partial``: DefaultRecord.readPartiallyFrom, which Kafka uses for a compressed batch it
      keeps in place (skipKeyValueIterator; the caller decides): the fields are read one after
      the other from the stream, the declared length is never looked at (a record whose length
      disagrees with its fields is taken, the next one read where its fields ended); a field
      past the stream's end, a negative header count or header key length is
      InvalidRecordException;
    - otherwise DefaultRecord.readFrom (an uncompressed batch, whatever LogValidator does with
      it; a compressed one it rebuilds: streamingIterator): the record must hold its declared
      length, and its fields must end exactly there (a key, value, header count or header past
      the record is InvalidRecordException too: readFrom reads an uncompressed record from the
      whole batch and fails at the length check if not before, the same records);
    then, after the last record (RecordIterator.next's ensureNoneRemaining), no byte may be left.
    A record length varint longer than 5 bytes is ByteUtils.readVarint's IllegalArgumentException,
    which only the uncompressed iterator lets through (UNKNOWN_SERVER_ERROR); everything else here
    is InvalidRecordException (INVALID_RECORD), including a negative count (RecordIterator).

    Why three record walkers (this one, :func:`decode_records_v2` and the cleaner's
    ``scan_keys``) and not one reader of the prefix they share (length, attributes, timestamp
    delta, offset delta, key): the cleaner's scan is a hot loop with every varint's one-byte
    case inlined, and taking the prefix from a shared reader slowed it by 5-8% (timeit, 200
    records of 100-byte values: 936-970 ns a record inline, 1004-1022 through a generator,
    1017-1025 through a function called per record); and this walk costs a third of the
    decoder's, which copies every key and value (timeit, 150 records of 100-byte values: 109 us
    against 340 uncompressed, 174 against 406 gzip; the walk it replaced, which skipped each
    record by its length unread, took 121 and 175).  What they do share is one rule each: the varint
    readers (formats/varint.py), the header walker (:func:`walk_headers`) and the decoder's
    refusals, which the scan defers to by re-reading any batch it is unsure of."""
    count = batch.records_count
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch", batch.position + 57)
    if count == 0:
        return
    data = batch.record_data()
    compressed = batch.codec != compression.NONE
    base_offset, base_ts = batch.base_offset, batch.base_timestamp
    append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
    shift = 0 if compressed else batch.position + RECORD_BATCH_OVERHEAD
    # varints of one or two bytes (every length, delta and count below 8192) are decoded inline
    # by one index into ZIGZAG_14, as the cleaner's scan reads them; longer ones, and any that
    # would cross ``bound``, by the varint readers
    zz = ZIGZAG_14
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            if pos < end and data[pos] < 0x80:
                length = zz[data[pos]]
                pos += 1
            elif pos + 1 < end and data[pos + 1] < 0x80:
                length = zz[(data[pos] & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                try:
                    length, pos = _read_zz32(data, pos, end)
                except TruncatedError:
                    raise InvalidRecordError(
                        "Incorrect declared batch size, premature EOF reached", start
                    ) from None
                except CorruptRecordError as exc:  # more than 5 bytes
                    if compressed:  # StreamRecordIterator.readNext: InvalidRecordException
                        raise InvalidRecordError(
                            "Incorrect declared batch size, premature EOF reached", start
                        ) from None
                    raise IllegalArgumentError(f"record length {exc.message}", start) from None
            body_start = pos
            if partial:
                bound = end
            else:
                bound = pos + length
                if length < 0 or bound > end:
                    raise InvalidRecordError(
                        f"Invalid record size: expected {length} bytes in record payload, but instead the "
                        f"buffer has only {end - pos} remaining bytes.",
                        start,
                    )
            pos += 1  # the attributes
            if pos < bound and data[pos] < 0x80:
                ts_delta = zz[data[pos]]
                pos += 1
            elif pos + 1 < bound and data[pos + 1] < 0x80:
                ts_delta = zz[(data[pos] & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                ts_delta, pos = _read_zz64(data, pos, bound)
            if pos < bound and data[pos] < 0x80:
                off_delta = zz[data[pos]]
                pos += 1
            elif pos + 1 < bound and data[pos + 1] < 0x80:
                off_delta = zz[(data[pos] & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                off_delta, pos = _read_zz32(data, pos, bound)
            if pos < bound and data[pos] < 0x80:
                key_size = zz[data[pos]]
                pos += 1
            else:
                key_size, pos = _read_zz32(data, pos, bound)
            if key_size > 0:
                pos += key_size
                if pos > bound:
                    raise TruncatedError(
                        f"record key of {key_size} bytes runs past the record", pos - key_size
                    )
            if pos < bound and data[pos] < 0x80:
                value_size = zz[data[pos]]
                pos += 1
            elif pos + 1 < bound and data[pos + 1] < 0x80:
                value_size = zz[(data[pos] & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                value_size, pos = _read_zz32(data, pos, bound)
            if value_size > 0:
                pos += value_size
                if pos > bound:
                    raise TruncatedError(
                        f"record value of {value_size} bytes runs past the record", pos - value_size
                    )
            if pos < bound and not data[pos]:
                pos += 1  # no headers (most records)
            else:
                pos = walk_headers(data, pos, bound, None)
            if not partial and pos != bound:
                raise InvalidRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, but instead "
                    f"read {pos - body_start}",
                    start,
                )
            yield (
                base_offset + off_delta,
                base_ts + ts_delta if append_time is None else append_time,
                key_size,
                value_size,
            )
        if pos != end:  # RecordIterator.next's ensureNoneRemaining after the last record
            raise InvalidRecordError(
                f"Incorrect declared batch size, records still remaining in file: {end - pos} bytes "
                f"after {count} records",
                pos,
                kind="bad_count",
            )
    except (InvalidRecordError, IllegalArgumentError) as exc:
        raise exc.shifted(shift) from None
    except FormatError as exc:  # a field past the record or the stream, a varint too long
        raise InvalidRecordError(f"Found invalid record structure: {exc.message}", exc.position).shifted(
            shift
        ) from None


def _whole_records(data, pos: int, end: int) -> int:
    """How many length-prefixed records follow at ``pos`` (to name a count mismatch)."""
    n = 0
    try:
        while pos < end:
            length, pos = _read_zz32(data, pos, end)
            if length <= 0 or pos + length > end:
                break
            pos += length
            n += 1
    except FormatError:
        pass
    return n


# ---------------------------------------------------------------- batches


class RecordBatch:
    """A magic-2 record batch, read lazily from ``buf`` at ``position``."""

    __slots__ = (
        "buf",
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "size",
        "end",
    )

    def __init__(self, buf, position: int = 0):
        end = position + RECORD_BATCH_OVERHEAD
        if end > len(buf):
            raise TruncatedError(
                f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, {len(buf) - position} left",
                position,
            )
        self.buf = buf
        self.position = position
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = _V2_HEADER.unpack_from(buf, position)
        # plain attributes, not properties: the produce path reads them several times a batch
        self.size = self.batch_length + LOG_OVERHEAD
        self.end = position + self.size

    # --- sizes and offsets (size and end: attributes set when the header is read)
    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def count(self) -> int:
        return self.records_count

    # --- attributes
    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def codec_name(self) -> str:
        return compression.CODEC_NAMES.get(self.codec, f"unknown({self.codec})")

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    # --- bytes and checks
    def raw(self) -> memoryview:
        return memoryview(self.buf)[self.position : self.end]

    def compute_crc(self) -> int:
        return crc32c(memoryview(self.buf)[self.position + 21 : self.end])

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except FormatError:
            return False
        return True

    def ensure_checksum(self) -> None:
        """Kafka's ensureValid: the size and the CRC, nothing of the header's fields (a leader
        append: UnifiedLog.analyzeAndValidateRecords; LogValidator.validateBatch then answers a
        client's impossible offset range or count, INVALID_RECORD)."""
        _ensure_valid(self, self.size, RECORD_BATCH_OVERHEAD, "record batch")

    def ensure_valid(self) -> None:
        """Kafka's ensureValid (size and CRC, no per-record parsing), then the header's
        offset range and count: a CRC-valid batch whose lastOffsetDelta or record count is
        impossible is as invalid as a corrupt one, for the recovery scan, verify and a
        follower's append (a leader's append checks only ``ensure_checksum``)."""
        _ensure_valid(self, self.size, RECORD_BATCH_OVERHEAD, "record batch")
        delta, count = self.last_offset_delta, self.records_count
        if delta < 0:
            raise CorruptRecordError(
                f"record batch at offset {self.base_offset} has lastOffsetDelta {delta}: "
                "its offset range is empty",
                self.position + 23,
                kind="bad_offset_range",
            )
        if count < 0 or count > delta + 1:
            raise CorruptRecordError(
                f"record batch at offset {self.base_offset} declares {count} records but its "
                f"lastOffsetDelta {delta} leaves room for at most {delta + 1}",
                self.position + 57,
                kind="bad_count",
            )

    def record_data(self, *, max_size: int | None = None) -> bytes | memoryview:
        """The (decompressed) record area."""
        area = memoryview(self.buf)[self.position + RECORD_BATCH_OVERHEAD : self.end]
        if self.codec == compression.NONE:
            return area
        try:
            return compression.decompress(self.codec, area, magic=2, max_size=max_size)
        except FormatError as exc:
            # DefaultRecordBatch wraps the codec's IOException in a KafkaException (StreamError);
            # "too_large" is our own limit, not the stream's
            cls = StreamError if isinstance(exc, CompressionError) and exc.kind != "too_large" else type(exc)
            if exc.position is not None:
                err = cls(exc.message, exc.position + self.position + RECORD_BATCH_OVERHEAD, kind=exc.kind)
            else:
                err = cls(
                    f"{exc.message} in the batch at offset {self.base_offset}", self.position, kind=exc.kind
                )
            raise err from None

    def records(self, *, max_size: int | None = None, key_at: list | None = None) -> Iterator[Record]:
        """The batch's records (``key_at``: see :func:`decode_records_v2`)."""
        if self.records_count < 0:
            raise CorruptRecordError(f"negative record count {self.records_count}", self.position + 57)
        if self.end > len(self.buf):
            raise TruncatedError("record batch runs past the end of the data", self.position)
        if self.records_count == 0 and self.end == self.position + RECORD_BATCH_OVERHEAD:
            return iter(())  # an empty batch (the cleaner keeps them for producer state)
        data = self.record_data(max_size=max_size)
        compressed = self.codec != compression.NONE
        return decode_records_v2(
            data,
            self.records_count,
            self.base_offset,
            self.base_timestamp,
            log_append_time=self.max_timestamp if self.timestamp_type == LOG_APPEND_TIME else None,
            base_sequence=self.base_sequence,
            # positions inside a decompressed stream are not file positions:
            # report the start of the record area instead.
            position_base=0 if compressed else self.position + RECORD_BATCH_OVERHEAD,
            key_at=key_at,
        )

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, position={self.position}, size={self.size}, codec={self.codec_name})"
        )


class LegacyBatch:
    """One top-level entry of a magic 0/1 message set (a plain message or a compressed wrapper)."""

    __slots__ = (
        "buf",
        "position",
        "offset",
        "message_size",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "inner_leftover",
        "value_leftover",
    )

    def __init__(self, buf, position: int = 0, *, inner: bool = False):
        """``inner``: a wrapper's inner message, which Kafka reads whatever its magic (the
        deep iterator checks none): any magic but 0 with the v1 layout (LegacyRecord), so one
        of magic 2 or more is validateRecord's "magic does not match" record error."""
        # 12 + 14 bytes: the log header, then crc, magic, attributes and (v1) the timestamp
        if position + LOG_OVERHEAD + LEGACY_OVERHEAD_V0 > len(buf):
            raise TruncatedError("legacy message header runs past the end of the data", position)
        self.buf = buf
        self.position = position
        #: bytes after the last whole inner message of a wrapper (known once it was read)
        self.inner_leftover = 0
        #: bytes after the value of the message, and of a wrapper's inner messages once they
        #: were all read (LegacyRecord ignores them)
        self.value_leftover = 0
        self.offset, self.message_size, self.crc, self.magic, self.attributes = _LEGACY_V0.unpack_from(
            buf, position
        )
        if self.magic not in (0, 1) and not inner:
            raise CorruptRecordError(f"invalid magic {self.magic} for a legacy message", position + 16)
        if self.magic != 0:
            (self.timestamp,) = _LEGACY_V1_TS.unpack_from(buf, position + 18)
        else:
            self.timestamp = NO_TIMESTAMP

    @property
    def size(self) -> int:
        return self.message_size + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.message_size + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def codec_name(self) -> str:
        return compression.CODEC_NAMES.get(self.codec, f"unknown({self.codec})")

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    # v2-only header fields, as Kafka's legacy batches report them
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    is_transactional = False
    is_control = False
    delete_horizon_ms = None
    has_producer_id = False

    def raw(self) -> memoryview:
        return memoryview(self.buf)[self.position : self.end]

    def compute_crc(self) -> int:
        return crc32(memoryview(self.buf)[self.position + 16 : self.end])

    def is_valid(self) -> bool:
        """LegacyRecord.isValid: 14 bytes or more and the CRC, at either magic (a v1 message
        smaller than its 22-byte header is valid there: its key and value are not read)."""
        return (
            self.message_size >= LEGACY_OVERHEAD_V0
            and self.end <= len(self.buf)
            and self.compute_crc() == self.crc
        )

    def ensure_valid(self) -> None:
        _ensure_valid(self, self.message_size, LEGACY_OVERHEAD_V0, "message")

    ensure_checksum = ensure_valid  # a message's header has no count to check

    def key_value(self) -> tuple[bytes | None, bytes | None]:
        """The message's own key and value as LegacyRecord reads them (a wrapper's value is its
        compressed inner set): LegacyFieldError where Kafka's read throws."""
        key, value, self.value_leftover = _legacy_key_value(self.buf, self.position, self.magic, self.end)
        return key, value

    def _inner_entries(self, *, max_size: int | None = None) -> list[LegacyBatch]:
        """The wrapper's inner messages as Kafka's deep iterator reads them
        (AbstractLegacyRecordBatch.DeepRecordsIterator and its DataLogInputStream, 3.7.0), its
        checks and their exceptions: a zstd wrapper, a null value and a set of no messages are
        InvalidRecordException; a stream its codec cannot read is a KafkaException
        (StreamError); an inner size below 14 is CorruptRecordException.  The set ends
        where fewer than a message's 12-byte log header remain or where a message is cut short:
        Kafka ends the iteration there without an error (the bytes left: ``inner_leftover``)."""
        if self.codec == compression.NONE:
            return [self]
        if self.codec == compression.ZSTD:
            raise InvalidRecordError(
                f"Invalid wrapper compressionType found in legacy deep record iterator {self.magic}",
                self.position,
            )
        _, value = self.key_value()
        if value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})", self.position
            )
        try:
            data = compression.decompress(self.codec, value, magic=self.magic, max_size=max_size)
        except CompressionError as exc:
            cls = CompressionError if exc.kind == "too_large" else StreamError
            raise cls(
                f"{exc.message} in the wrapper message at offset {self.offset}", self.position, kind=exc.kind
            ) from None
        except FormatError as exc:
            raise type(exc)(
                f"{exc.message} in the wrapper message at offset {self.offset}", self.position
            ) from None
        inner: list[LegacyBatch] = []
        pos = 0
        end = len(data)
        while end - pos >= LOG_OVERHEAD:
            (size,) = _I32.unpack_from(data, pos + 8)
            if size < LEGACY_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"Record size is less than the minimum record overhead ({LEGACY_OVERHEAD_V0}) (inner "
                    f"message at byte {pos} of the wrapper message at offset {self.offset}, size {size})",
                    self.position,
                )
            if pos + LOG_OVERHEAD + size > end:
                break
            try:
                msg = LegacyBatch(data, pos, inner=True)
            except FormatError as exc:
                raise CorruptRecordError(
                    f"inner message at byte {pos} of the decompressed wrapper: {exc.message}", self.position
                ) from None
            inner.append(msg)
            pos = msg.end
        self.inner_leftover = end - pos
        if not inner:
            raise InvalidRecordError(
                "Found invalid compressed record set with no inner records", self.position
            )
        return inner

    @property
    def base_offset(self) -> int:
        """First offset (decompresses a wrapper, as Kafka's legacy batches do)."""
        if self.codec == compression.NONE:
            return self.offset
        return next(iter(self.records(lenient=True))).offset  # an offset needs no key or value

    @property
    def count(self) -> int:
        if self.codec == compression.NONE:
            return 1
        inner = self._inner_entries()
        for i, msg in enumerate(inner):
            if msg.codec != compression.NONE:
                raise self._nested_error(i, msg)
        return len(inner)

    def _nested_error(self, index: int, msg: LegacyBatch) -> FormatError:
        """An inner message that is itself compressed: Kafka's DeepRecordsIterator throws
        InvalidRecordException when it reaches it (makeNext, after the messages before it were
        handed out), so a produce answers INVALID_RECORD (no record error); the bytes are not
        damaged, and recovery (which reads no inner message) keeps them.  Compression bits that
        name no codec (5-7) are CompressionType.forId's IllegalArgumentException there
        (isCompressed)."""
        if not compression.is_known(msg.codec):
            return IllegalArgumentError(
                f"Unknown compression type id: {msg.codec} (inner message {index} of the wrapper message "
                f"at offset {self.offset})",
                self.position,
            )
        return InvalidRecordError(
            f"Inner messages must not be compressed (inner message {index} of the wrapper message "
            f"at offset {self.offset} is {msg.codec_name})",
            self.position,
        )

    def records(self, *, max_size: int | None = None, lenient: bool = False) -> Iterator[Record]:
        """The messages as Kafka's legacy batch hands them out: a plain message itself; a
        wrapper's inner messages (DeepRecordsIterator) with absolute offsets (v1: the wrapper's
        offset less the last inner one, a wrapper offset of 0 meaning base 0, some librdkafka
        producers; a non-zero wrapper offset below the last inner one is InvalidRecordException),
        an inner v1 message taking its wrapper's timestamp type and, for LogAppendTime, its
        timestamp.  A message whose key or value Kafka cannot read raises LegacyFieldError, or
        with ``lenient`` is handed out as an :class:`UnreadableRecord` (LogValidator's order)."""
        inner = self._inner_entries(max_size=max_size)
        wrapper = inner[0] is not self
        base = None
        if wrapper and self.magic == 1:
            if self.offset == 0:
                base = 0
            else:
                last_rel = inner[-1].offset
                if self.offset < last_rel:
                    raise InvalidRecordError(
                        "Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                        f"'{self.offset}' is less than the last inner message offset '{last_rel}' and it "
                        "is not zero.",
                        self.position,
                    )
                base = self.offset - last_rel
        wrapper_type = self.timestamp_type
        stray = 0
        for i, msg in enumerate(inner):
            if wrapper and msg.codec != compression.NONE:
                raise self._nested_error(i, msg)
            cls, error = Record, None
            try:
                key, value = msg.key_value()
            except LegacyFieldError as exc:
                if wrapper:
                    exc = LegacyFieldError(
                        f"inner message {i} of the wrapper message at offset {self.offset}: {exc.message}",
                        self.position,
                        has_key=exc.has_key,
                    )
                if not lenient:
                    raise exc from None
                cls, error, key, value = UnreadableRecord, exc, None, None
            stray += msg.value_leftover
            offset = msg.offset if base is None else base + msg.offset
            ts_type = msg.timestamp_type
            ts = msg.timestamp
            if wrapper and msg.magic == 1:
                ts_type = wrapper_type
                if wrapper_type == LOG_APPEND_TIME:
                    ts = self.timestamp
            computed = msg.compute_crc()
            record = cls(
                offset=offset,
                timestamp=ts,
                key=key,
                value=value,
                crc=msg.crc,
                is_valid=msg.message_size >= LEGACY_OVERHEAD_V0 and computed == msg.crc,
                magic=msg.magic,
                size_in_bytes=msg.size,
                position=msg.position if not wrapper else self.position,
                attributes=msg.attributes,
                computed_crc=computed,
                timestamp_type=ts_type,
            )
            if error is not None:
                record.error = error
            yield record
        if wrapper:
            self.value_leftover += stray

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(offset={self.offset}, magic={self.magic}, position={self.position}, "
            f"size={self.size}, codec={self.codec_name})"
        )


def _legacy_key_value(buf, position: int, magic: int, end: int) -> tuple[bytes | None, bytes | None, int]:
    """(key, value, bytes after the value) of the message at ``position`` as Kafka's LegacyRecord
    reads them (keySize, key(), value(): Utils.sizeDelimited): the v0 layout at magic 0, the v1
    layout at any other; a negative length is null; a length field past the message or a key or
    value running past it throws there (LegacyFieldError); bytes after the value are ignored."""
    pos = position + LOG_OVERHEAD + (LEGACY_OVERHEAD_V0 - 8 if magic == 0 else LEGACY_OVERHEAD_V1 - 8)
    out = []
    has_key = None
    for what in ("key", "value"):
        if pos + 4 > end:
            raise LegacyFieldError(
                f"the message's {what} length field at byte {pos} is past its end at {end} "
                "(LegacyRecord: IndexOutOfBoundsException)",
                pos,
                has_key=has_key,
            )
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if has_key is None:
            has_key = n >= 0
        if n < 0:
            out.append(None)
            continue
        if pos + n > end:
            raise LegacyFieldError(
                f"the message's {what} of {n} bytes runs past its end at {end} "
                "(LegacyRecord: IllegalArgumentException)",
                pos - 4,
                has_key=has_key,
            )
        out.append(bytes(buf[pos : pos + n]))
        pos += n
    return out[0], out[1], end - pos


Batch = RecordBatch | LegacyBatch


def _ensure_valid(batch: Batch, size: int, minimum: int, what: str) -> None:
    if size < minimum:
        raise CorruptRecordError(
            f"{what} size {size} is smaller than the minimum {minimum}", batch.position, kind="bad_length"
        )
    if batch.end > len(batch.buf):
        raise TruncatedError(f"{what} runs past the end of the data", batch.position)
    actual = batch.compute_crc()
    if actual != batch.crc:
        raise CorruptRecordError(
            f"{what} CRC mismatch: stored {batch.crc}, computed {actual}", batch.position, kind="crc_mismatch"
        )


def peek_entry(buf, position: int = 0) -> tuple[int, int, int] | None:
    """(offset, size, magic) of the entry at ``position``, or None if fewer than 17 bytes remain."""
    if position < 0 or position + HEADER_PEEK > len(buf):
        return None
    offset, size, _, magic = _ENTRY_PEEK.unpack_from(buf, position)
    return offset, size, magic


def read_batch(buf, position: int = 0) -> Batch | None:
    """The entry at ``position``, or None when the data ends (fewer than 17 bytes, or the
    entry runs past the end: Kafka treats both as the end of the log, not as errors).

    Raises CorruptRecordError for an impossible size or magic, as Kafka's
    FileLogInputStream does.
    """
    peek = peek_entry(buf, position)
    if peek is None:
        return None
    _offset, size, magic = peek
    if not check_entry_header(size, magic, position, len(buf)):
        return None
    if magic >= 2:
        return RecordBatch(buf, position)
    return LegacyBatch(buf, position)


def check_entry_header(size: int, magic: int, position: int, data_end: int) -> bool:
    """The one rule for an entry's size and magic (Kafka's FileLogInputStream): raises
    CorruptRecordError for an impossible size or magic; False when the entry runs past
    ``data_end`` (the end of the log, not an error)."""
    if size < MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"entry size {size} is smaller than the minimum {MIN_ENTRY_SIZE}", position, kind="bad_length"
        )
    if position + LOG_OVERHEAD + size > data_end:
        return False
    if magic >= 2:
        if magic > 2:
            raise CorruptRecordError(f"unknown magic {magic}", position + 16, kind="bad_magic")
        if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"record batch size {size + LOG_OVERHEAD} is smaller than the minimum {RECORD_BATCH_OVERHEAD}",
                position,
                kind="bad_length",
            )
        return True
    if magic < 0:
        raise CorruptRecordError(f"unknown magic {magic}", position + 16, kind="bad_magic")
    # a v1 message of 14-21 bytes passes here as in Kafka (the log input streams check only the
    # v0 overhead, "stricter checking is done later"): it is valid with its CRC (isValid) and
    # kept by recovery; reading its key or value throws (LegacyFieldError)
    return True


#: bytes of an entry's header that give its last offset (a v2 batch's lastOffsetDelta ends at 27)
SPAN_PEEK = 27
_SPAN = struct.Struct(">qiibIhi")  # baseOffset, length, epoch/crc, magic, crc/attrs, attrs, lastOffsetDelta


def peek_entry_span(head, position: int, data_end: int) -> tuple[int, int] | None:
    """(last offset, size with LOG_OVERHEAD) of the entry at ``position`` whose first
    :data:`SPAN_PEEK` bytes (fewer at the end of the data) are ``head``, by the same rule
    as :func:`read_batch`; None where the data ends."""
    peek = peek_entry(head, 0)
    if peek is None:
        return None
    base, size, magic = peek
    if not check_entry_header(size, magic, position, data_end):
        return None
    if magic >= 2:
        if len(head) < SPAN_PEEK:
            return None
        return base + _SPAN.unpack_from(head)[6], size + LOG_OVERHEAD
    return base, size + LOG_OVERHEAD


def iter_batches(buf, start: int = 0, end: int | None = None) -> Iterator[Batch]:
    """Every entry from ``start`` until the data ends or an entry is impossible (raises)."""
    view = memoryview(buf)
    if end is not None:
        view = view[:end]
    pos = start
    while True:
        batch = read_batch(view, pos)
        if batch is None:
            return
        yield batch
        pos = batch.end


def find_next_valid_batch(
    buf, start: int, end: int | None = None, *, max_scan: int | None = None
) -> Batch | None:
    """Search forward from ``start`` for the next entry whose header is plausible and
    whose CRC checks (a resynchronisation point after damage).

    Candidates are found by looking for a magic byte; each is checked cheaply
    (size within the data, fields sane) before its CRC is computed.
    """
    view = memoryview(buf)
    if end is None:
        end = len(view)
    view = view[:end]
    limit = end if max_scan is None else min(end, start + max_scan)
    raw = view.obj if isinstance(view.obj, bytes | bytearray) and view.nbytes == len(view.obj) else None
    candidates = raw if raw is not None else bytes(view)
    pos = start
    while pos < limit:
        # nearest magic byte (0, 1 or 2) at pos+16 or later
        best = -1
        for m in (b"\x02", b"\x01", b"\x00"):
            i = candidates.find(m, pos + 16, limit + 16)
            if i != -1 and (best == -1 or i < best):
                best = i
        if best == -1:
            return None
        cand = best - 16
        pos = cand + 1
        batch = _plausible_at(view, cand)
        if batch is not None:
            return batch
    return None


def _plausible_at(view, pos: int) -> Batch | None:
    try:
        peek = peek_entry(view, pos)
        if peek is None:
            return None
        offset, size, magic = peek
        if offset < 0 or size < MIN_ENTRY_SIZE or pos + LOG_OVERHEAD + size > len(view):
            return None
        if magic == 2:
            if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                return None
            batch = RecordBatch(view, pos)
            if batch.records_count < 0 or batch.last_offset_delta < 0 or batch.attributes & 0xFF80:
                return None
        elif magic in (0, 1):
            batch = LegacyBatch(view, pos)
        else:
            return None
        return batch if batch.is_valid() else None
    except FormatError:
        return None


# ---------------------------------------------------------------- in-place rewrites (broker append path)


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Overwrite a v2 batch's baseOffset (not covered by the CRC)."""
    _OFFSET_FIELD.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    _LEADER_EPOCH_FIELD.pack_into(buf, position + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark a v2 batch LogAppendTime with ``timestamp`` as its maxTimestamp; recomputes the CRC."""
    set_max_timestamp(buf, position, LOG_APPEND_TIME, timestamp)


def set_max_timestamp(
    buf: bytearray | memoryview, position: int, timestamp_type: int, timestamp: int
) -> None:
    """Give a v2 batch this timestamp type and maxTimestamp and recompute its CRC (Kafka's
    DefaultRecordBatch.setMaxTimestamp)."""
    view = memoryview(buf)
    (attrs,) = _I16.unpack_from(view, position + 21)
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    else:
        attrs &= ~TIMESTAMP_TYPE_MASK
    _I16.pack_into(view, position + 21, attrs)
    struct.pack_into(">q", view, position + 35, timestamp)
    (length,) = _I32.unpack_from(view, position + 8)
    struct.pack_into(
        ">I", view, position + 17, crc32c(view[position + 21 : position + LOG_OVERHEAD + length])
    )


# ---------------------------------------------------------------- builders


@dataclass(slots=True)
class SimpleRecord:
    """Input to the builders."""

    value: bytes | None
    key: bytes | None = None
    #: (key, value); a str key is written as Kafka writes a String (see encode_record_v2),
    #: a bytes key as it is
    headers: list[tuple[str | bytes, bytes | None]] | tuple = ()
    timestamp: int | None = None


def _as_simple(r) -> SimpleRecord:
    if isinstance(r, SimpleRecord):
        return r
    if isinstance(r, Record):
        return SimpleRecord(r.value, r.key, list(r.headers), r.timestamp)
    if isinstance(r, tuple):
        return SimpleRecord(*r)
    if isinstance(r, bytes | bytearray) or r is None:
        return SimpleRecord(r)
    raise TypeError(f"cannot build a record from {type(r).__name__}")


def _uv(value: int) -> bytes:
    return write_uvarint(value)


def _written_header_key(hkey: str | bytes) -> bytes:
    """A header key's bytes as written: a str as Kafka writes a String, a bytes key as it is."""
    if isinstance(hkey, str):
        try:
            return hkey.encode("utf-8")
        except UnicodeEncodeError:
            # DefaultRecord.writeTo writes Utils.utf8(header.key()): Kafka's String of the
            # bytes it read, so a rebuilt record's key that was not UTF-8 is written with
            # U+FFFD for each malformed sequence, as Kafka writes it (DESIGN.md)
            return java_utf8.encode(kafka_header_key(hkey))
    return bytes(hkey)  # given as bytes: written as they are


def encode_record_v2(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str | bytes, bytes | None]] = (),
) -> bytes:
    """DefaultRecord.writeTo: the length-prefixed record (its size is :func:`record_v2_size`)."""
    body = bytearray(b"\x00")
    append_uvarint(body, zigzag64(timestamp_delta))
    append_uvarint(body, zigzag32(offset_delta))
    if key is None:
        body.append(1)
    else:
        append_uvarint(body, zigzag32(len(key)))
        body += key
    if value is None:
        body.append(1)
    else:
        append_uvarint(body, zigzag32(len(value)))
        body += value
    headers = list(headers)
    append_uvarint(body, zigzag32(len(headers)))
    for hkey, hval in headers:
        hk = _written_header_key(hkey)
        append_uvarint(body, zigzag32(len(hk)))
        body += hk
        if hval is None:
            body.append(1)
        else:
            append_uvarint(body, zigzag32(len(hval)))
            body += hval
    out = bytearray()
    append_uvarint(out, zigzag32(len(body)))
    out += body
    return bytes(out)


def _field_size(data) -> int:
    return 1 if data is None else size_of_uvarint(zigzag32(len(data))) + len(data)


def record_v2_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str | bytes, bytes | None]] = (),
) -> int:
    """DefaultRecord.sizeInBytes: the length of what :func:`encode_record_v2` writes, counted
    without writing it (the producer sizes every record it batches)."""
    body = (
        1
        + size_of_uvarint(zigzag64(timestamp_delta))
        + size_of_uvarint(zigzag32(offset_delta))
        + _field_size(key)
        + _field_size(value)
        + size_of_uvarint(zigzag32(len(headers)))
    )
    for hkey, hval in headers:
        body += _field_size(_written_header_key(hkey)) + _field_size(hval)
    return size_of_uvarint(zigzag32(body)) + body


def build_record_batch(
    records: Iterable,
    *,
    base_offset: int = 0,
    codec: int = compression.NONE,
    compression_level: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
    offset_deltas: Iterable[int] | None = None,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    default_timestamp: int = NO_TIMESTAMP,
) -> bytes:
    """Build a v2 batch.  Offset deltas default to 0..n-1; pass ``offset_deltas`` and
    ``last_offset_delta`` to build compacted batches with gaps (or an empty batch)."""
    recs = [_as_simple(r) for r in records]
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(recs)))
    if len(deltas) != len(recs):
        raise ValueError("offset_deltas must have one entry per record")
    stamps = [default_timestamp if r.timestamp is None else r.timestamp for r in recs]
    if base_timestamp is None:
        base_timestamp = (
            delete_horizon_ms if delete_horizon_ms is not None else (stamps[0] if stamps else NO_TIMESTAMP)
        )
    if max_timestamp is None:
        max_timestamp = max(stamps) if stamps else NO_TIMESTAMP
    if timestamp_type == LOG_APPEND_TIME or log_append_time is not None:
        timestamp_type = LOG_APPEND_TIME
        if log_append_time is not None:
            max_timestamp = log_append_time
    body = b"".join(
        encode_record_v2(d, ts - base_timestamp, r.key, r.value, r.headers)
        for d, ts, r in zip(deltas, stamps, recs, strict=True)
    )
    if codec != compression.NONE and recs:
        body = compression.compress(codec, body, magic=2, level=compression_level)
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if deltas else 0
    attributes = codec & CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    tail = _V2_CRC_FIELDS.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    crc = crc32c(body, crc32c(tail))
    head = struct.pack(
        ">qiibI",
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        2,
        crc,
    )
    return head + tail + body


def rebuild_as_v2(batches: Sequence[Batch], codec: int, *, log_append_time: int | None = None) -> bytes:
    """Every record of ``batches`` (any magic) in one v2 batch of ``codec``, as LogValidator
    rebuilds an append with MemoryRecordsBuilder (buildRecordsAndAssignOffsets,
    convertAndAssignOffsetsNonCompressed): offset deltas 0..n-1 in the records' order (a
    source's own deltas and gaps are not kept), each record's key, value, headers and
    timestamp as a consumer reads them (a LogAppendTime batch's records: its maxTimestamp; magic
    0: none, -1), baseTimestamp the first record's, maxTimestamp the largest, or
    ``log_append_time``, which also makes the batch LogAppendTime; producer id, epoch, base
    sequence and the transactional flag the first batch's (a legacy one has none).  A record
    timestamp below -1 raises ValueError, as the builder throws IllegalArgumentException
    ("Invalid negative timestamp")."""
    recs = [SimpleRecord(r.value, r.key, r.headers, r.timestamp) for b in batches for r in b.records()]
    for r in recs:
        if r.timestamp < NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {r.timestamp}")
    first = batches[0]
    return build_record_batch(
        recs,
        codec=codec,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        base_sequence=first.base_sequence,
        is_transactional=first.is_transactional,
        log_append_time=log_append_time,
    )


def build_control_batch(
    control_type: int,
    *,
    base_offset: int = 0,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int = NO_TIMESTAMP,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """A transaction marker (COMMIT/ABORT) batch as the transaction coordinator writes it."""
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch) if control_type in (ABORT, COMMIT) else b""
    return build_record_batch(
        [SimpleRecord(value, key, (), timestamp)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=control_type in (ABORT, COMMIT),
        is_control=True,
        timestamp_type=timestamp_type,
    )


def encode_legacy_message(
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    offset: int = 0,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One legacy entry: offset, size, then the message with its CRC-32."""
    if magic not in (0, 1):
        raise ValueError("legacy messages are magic 0 or 1")
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _LEGACY_V1_TS.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(part))
            body += part
    message = struct.pack(">I", crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def overflow_entry(remaining: int, max_size: int) -> bytes:
    """The overflow entry a sized record set ends in (LazyDownConversionRecordsSend's
    buildOverflowBatch): offset -1 and a length past the set's end, zero filled, at most
    ``max_size`` and at least an entry header long, cut to the ``remaining`` bytes; a client
    reads it as a partial entry and ignores it."""
    n = max(LOG_OVERHEAD, min(remaining + 1, max_size))
    head = _OVERFLOW_HEAD.pack(-1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
    return (head + bytes(n - LOG_OVERHEAD))[:remaining]


_OVERFLOW_HEAD = struct.Struct(">qi")


def down_convert_batch(b: Batch, magic: int, fetch_offset: int) -> bytes | None:
    """RecordsUtil.downConvert of one batch (the fetch path's down-conversion for Fetch v0-3): a control batch gives nothing, a zstd one None;
    one at or below ``magic`` is kept as it is; an uncompressed one gives its records from the
    fetch offset on as single messages, a compressed one all of its records as one wrapper
    message of the same codec (MemoryRecordsBuilder of that magic)."""
    if b.is_control:
        return b""
    if b.codec == compression.ZSTD:
        return None
    if b.magic <= magic:
        return bytes(b.raw())
    ts_type = b.timestamp_type if magic == 1 else CREATE_TIME
    if b.codec != compression.NONE:
        entries = [
            (r.offset, r.timestamp if magic == 1 else NO_TIMESTAMP, r.key, r.value) for r in b.records()
        ]
        if not entries:
            return b""
        return encode_legacy_wrapper(magic, b.codec, entries, timestamp_type=ts_type)
    attributes = TIMESTAMP_TYPE_MASK if ts_type == LOG_APPEND_TIME else 0
    return b"".join(
        encode_legacy_message(
            magic,
            r.key,
            r.value,
            offset=r.offset,
            timestamp=r.timestamp if magic == 1 else NO_TIMESTAMP,
            attributes=attributes,
        )
        for r in b.records()
        if r.offset >= fetch_offset
    )


def build_legacy_message_set(
    records: Iterable,
    *,
    magic: int,
    base_offset: int = 0,
    codec: int = compression.NONE,
    compression_level: int | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    wrapper_offset: int | None = None,
) -> bytes:
    """A magic 0/1 message set as a Java producer and broker lay it out.

    Uncompressed: one entry per record with absolute offsets.  Compressed: one
    wrapper whose offset is the last inner offset (override with
    ``wrapper_offset``); inner offsets are relative (v1) or absolute (v0).
    """
    recs = [_as_simple(r) for r in records]
    ts_attr = (
        TIMESTAMP_TYPE_MASK if (magic == 1 and (timestamp_type == LOG_APPEND_TIME or log_append_time)) else 0
    )
    stamps = [NO_TIMESTAMP if r.timestamp is None else r.timestamp for r in recs]
    if codec == compression.NONE:
        return b"".join(
            encode_legacy_message(
                magic,
                r.key,
                r.value,
                offset=base_offset + i,
                timestamp=(log_append_time if log_append_time is not None else ts),
                attributes=ts_attr,
            )
            for i, (r, ts) in enumerate(zip(recs, stamps, strict=True))
        )
    if not recs:
        raise ValueError("a compressed legacy message set needs at least one record")
    return encode_legacy_wrapper(
        magic,
        codec,
        [(base_offset + i, ts, r.key, r.value) for i, (r, ts) in enumerate(zip(recs, stamps, strict=True))],
        offset=wrapper_offset,
        timestamp=log_append_time,
        timestamp_type=LOG_APPEND_TIME if ts_attr else CREATE_TIME,
        inner_timestamp_type=CREATE_TIME,
        level=compression_level,
    )


def encode_legacy_wrapper(
    magic: int,
    codec: int,
    entries: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    offset: int | None = None,
    timestamp: int | None = None,
    timestamp_type: int = CREATE_TIME,
    inner_timestamp_type: int | None = None,
    level: int | None = None,
) -> bytes:
    """One compressed magic 0/1 entry as Kafka's MemoryRecordsBuilder closes one: ``entries``
    (absolute offset, timestamp, key, value) as inner messages, absolute offsets (v0) or
    relative to the first entry's (v1), compressed with ``codec`` as that magic frames it (lz4
    v0: the broken header checksum); the wrapper's offset is the last entry's (or ``offset``),
    its timestamp ``timestamp`` or else the largest inner one, its attributes the codec and,
    for v1, the timestamp type. Inner v1 messages carry ``inner_timestamp_type`` (default:
    the wrapper's), as the builder writes them."""
    if not entries:
        raise ValueError("a compressed legacy message set needs at least one record")
    if codec == compression.NONE:
        raise ValueError("a legacy wrapper message is compressed")
    if inner_timestamp_type is None:
        inner_timestamp_type = timestamp_type
    first = entries[0][0]
    inner_attr = TIMESTAMP_TYPE_MASK if (magic == 1 and inner_timestamp_type == LOG_APPEND_TIME) else 0
    inner = b"".join(
        encode_legacy_message(
            magic,
            key,
            value,
            offset=(o - first if magic == 1 else o),
            timestamp=ts,
            attributes=inner_attr,
        )
        for o, ts, key, value in entries
    )
    payload = compression.compress(codec, inner, magic=magic, level=level)
    if timestamp is None:
        timestamp = max(NO_TIMESTAMP, *(e[1] for e in entries))
    ts_attr = TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    return encode_legacy_message(
        magic,
        None,
        payload,
        offset=entries[-1][0] if offset is None else offset,
        timestamp=timestamp,
        attributes=(codec & CODEC_MASK) | ts_attr,
    )
