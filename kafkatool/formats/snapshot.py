"""Producer-state snapshots (``<offset>.snapshot``).

Layout: ``version:int16 (1), crc:uint32, count:int32`` then ``count`` entries of
46 bytes: ``producerId:int64, producerEpoch:int16, lastSequence:int32,
lastOffset:int64, offsetDelta:int32, timestamp:int64, coordinatorEpoch:int32,
currentTxnFirstOffset:int64``.  The CRC is CRC-32C over bytes 6..EOF (the count,
the entries and any stray bytes after them).

Kafka's reader checks, in order: the structure (truncation, negative count),
the version, the CRC; bytes after the last entry are not an error in
themselves but are covered by the CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import FormatError, TruncatedError

SNAPSHOT_VERSION = 1
HEADER_SIZE = 10
CRC_OFFSET = 2
ENTRIES_OFFSET = 6  # where the CRC coverage starts (the count field)
ENTRY_SIZE = 46
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _ENTRY.size == ENTRY_SIZE


class SnapshotCrcError(FormatError):
    kind = "crc_mismatch"


class SnapshotVersionError(FormatError):
    kind = "bad_version"


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def has_batch_metadata(self) -> bool:
        """Kafka keeps the last batch's metadata only when lastOffset >= 0."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """lastSequence - offsetDelta, wrapping below 0 to Int32.MAX as sequences do."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    """Everything a forensic dump needs, whatever state the file is in.

    ``entries`` are the whole entries that could be read (even when the CRC or
    version is wrong); ``error`` is the FormatError Kafka's reader would have
    failed with (None when the snapshot loads).
    """

    version: int | None
    stored_crc: int | None
    computed_crc: int | None
    count: int | None
    entries: list[ProducerSnapshotEntry]
    trailing_bytes: int
    error: FormatError | None

    @property
    def crc_ok(self) -> bool:
        return self.stored_crc is not None and self.stored_crc == self.computed_crc

    @property
    def ok(self) -> bool:
        return self.error is None


def encode_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    entries = list(entries)
    body = bytearray(_HEADER.pack(SNAPSHOT_VERSION, 0, len(entries)))
    pack = _ENTRY.pack
    for e in entries:
        body += pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    struct.pack_into(">I", body, CRC_OFFSET, crc32c(memoryview(body)[ENTRIES_OFFSET:]))
    return bytes(body)


def read_snapshot(buf) -> SnapshotRead:
    """Decode without raising: entries, CRC status and the error, if any."""
    mv = memoryview(buf).cast("B")
    n = len(mv)
    if n < HEADER_SIZE:
        version = struct.unpack_from(">h", mv)[0] if n >= 2 else None
        stored = struct.unpack_from(">I", mv, CRC_OFFSET)[0] if n >= ENTRIES_OFFSET else None
        computed = crc32c(mv[ENTRIES_OFFSET:]) if n >= ENTRIES_OFFSET else None
        err = TruncatedError(f"snapshot header needs {HEADER_SIZE} bytes, file has {n}", n)
        return SnapshotRead(version, stored, computed, None, [], 0, err)

    version, stored, count = _HEADER.unpack_from(mv)
    computed = crc32c(mv[ENTRIES_OFFSET:])
    error: FormatError | None = None
    available = (n - HEADER_SIZE) // ENTRY_SIZE
    if count < 0:
        error = FormatError(
            f"snapshot entry count {count} cannot be negative", ENTRIES_OFFSET, kind="corrupt"
        )
        readable = 0
    elif count > available:
        error = TruncatedError(
            f"snapshot declares {count} entries but only {available} fit in the {n - HEADER_SIZE} bytes "
            "after the header",
            HEADER_SIZE + available * ENTRY_SIZE,
        )
        readable = available
    else:
        readable = count
    end = HEADER_SIZE + readable * ENTRY_SIZE
    entries = [ProducerSnapshotEntry(*t) for t in _ENTRY.iter_unpack(mv[HEADER_SIZE:end])]
    trailing = n - end if error is None else 0
    if error is None and version != SNAPSHOT_VERSION:
        error = SnapshotVersionError(f"snapshot contained an unknown file version {version}", 0)
    if error is None and stored != computed:
        error = SnapshotCrcError(
            f"snapshot is corrupt (CRC is no longer valid): stored crc {stored}, computed crc {computed}",
            CRC_OFFSET,
        )
    return SnapshotRead(version, stored, computed, count, entries, trailing, error)


def decode_snapshot(buf, verify_crc: bool = True) -> list[ProducerSnapshotEntry]:
    """Entries of a snapshot, or the FormatError Kafka's reader would fail with.

    With ``verify_crc=False`` only a CRC mismatch is tolerated.
    """
    result = read_snapshot(buf)
    if result.error is not None and (verify_crc or not isinstance(result.error, SnapshotCrcError)):
        raise result.error
    return result.entries
