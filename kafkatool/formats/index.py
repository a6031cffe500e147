# cython: infer_types=False
# (for tools/build_accel.py: Cython 3.3 types a local made by bytearray(...) as a bytearray, then
# refuses bytes on the right of an extended-slice assignment to it, _column's
# ``out[k::width] = data[...]``: "Expected bytearray, got bytes"; without inference: Python's)
"""Segment index files: ``.index`` (offset), ``.timeindex`` and ``.txnindex``.

Offset index entries are 8 bytes ``relativeOffset:int32, position:int32``; time
index entries 12 bytes ``timestamp:int64, relativeOffset:int32``.  Both files
are preallocated (zero-filled) while their segment is active, and Kafka trusts
every slot of a file it opens, so a crash can leave a zero tail behind the real
entries.  :func:`scan_offset_index` / :func:`scan_time_index` return the
entries a reader should trust and say where and why they stopped, so a caller
can tell a benign preallocated tail from garbage.

Transaction index entries are 34 bytes ``version:int16, producerId:int64,
firstOffset:int64, lastOffset:int64, lastStableOffset:int64``; Kafka reads the
version from the first byte only (``buffer.get(0)``), a quirk kept here.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import le, lt
from typing import NamedTuple

from kafkatool.formats.errors import FormatError

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
TXN_ENTRY_SIZE = 34
TXN_INDEX_VERSION = 0

DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1

_OFFSET = struct.Struct(">ii")
_TIME = struct.Struct(">qi")
_TXN = struct.Struct(">hqqqq")
_TXN_BODY = struct.Struct(">qqqq")
_SWAP = sys.byteorder == "little"
assert array("i").itemsize == 4 and array("q").itemsize == 8

# Why a scan stopped trusting slots.
STOP_END = "end"  # every whole slot is a valid entry
STOP_ZERO_TAIL = "zero_tail"  # an all-zero slot, and only zero bytes from there to EOF
STOP_ZERO_SLOT = "zero_slot"  # an all-zero slot followed by non-zero bytes (garbage)
STOP_NEGATIVE_OFFSET = "negative_offset"
STOP_NEGATIVE_POSITION = "negative_position"
STOP_OFFSET_NOT_INCREASING = "offset_not_increasing"
STOP_OFFSET_DECREASING = "offset_decreasing"
STOP_TIMESTAMP_NOT_INCREASING = "timestamp_not_increasing"
STOP_NEGATIVE_TIMESTAMP = "negative_timestamp"


class IndexOffsetOverflowError(FormatError):
    """An offset that cannot be stored relative to the segment base (Kafka's
    IndexOffsetOverflowException: the segment must be split)."""

    kind = "index_overflow"


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class AbortedTxn(NamedTuple):
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class IndexScan:
    """What a reader should trust in an offset or time index buffer.

    The trusted entries are held as two columns (arrays, cheap even for a
    million entries); ``entries`` builds tuples with absolute offsets on
    demand.  ``stop_slot`` is the first slot not trusted (None when ``reason``
    is ``end``); ``tail_zero`` says whether every byte from there (or from the
    end of the entries) to the end of the buffer, partial entry included, is
    zero.
    """

    base_offset: int
    entry_size: int
    slots: int
    partial_bytes: int
    stop_slot: int | None
    reason: str
    tail_zero: bool
    keys: array  # offset index: relative offsets; time index: timestamps
    values: array  # offset index: positions; time index: relative offsets

    @property
    def count(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def stop_position(self) -> int | None:
        return None if self.stop_slot is None else self.stop_slot * self.entry_size

    @property
    def partial_position(self) -> int | None:
        return self.slots * self.entry_size if self.partial_bytes else None

    @property
    def clean(self) -> bool:
        """Only real entries, possibly followed by a preallocated zero tail."""
        return self.reason in (STOP_END, STOP_ZERO_TAIL) and self.partial_bytes == 0


@dataclass(frozen=True, slots=True)
class OffsetIndexScan(IndexScan):
    @property
    def entries(self) -> list[OffsetPosition]:
        return list(map(OffsetPosition, map(self.base_offset.__add__, self.keys), self.values))

    def entry(self, i: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self.keys[i], self.values[i])

    @property
    def last_offset(self) -> int:
        """Kafka's lastOffset: the last entry's offset, else the base offset."""
        return self.base_offset + self.keys[-1] if self.keys else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest entry with offset <= target, else (base offset, 0)."""
        i = bisect_right(self.keys, target_offset - self.base_offset)
        return self.entry(i - 1) if i else OffsetPosition(self.base_offset, 0)


@dataclass(frozen=True, slots=True)
class TimeIndexScan(IndexScan):
    @property
    def entries(self) -> list[TimestampOffset]:
        return list(map(TimestampOffset, self.keys, map(self.base_offset.__add__, self.values)))

    def entry(self, i: int) -> TimestampOffset:
        return TimestampOffset(self.keys[i], self.base_offset + self.values[i])

    @property
    def last_entry(self) -> TimestampOffset:
        """Kafka's lastEntry: the last entry, else (-1, base offset)."""
        return (
            self.entry(len(self.keys) - 1) if self.keys else TimestampOffset(NO_TIMESTAMP, self.base_offset)
        )

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Greatest entry with timestamp <= target, else (-1, base offset)."""
        i = bisect_right(self.keys, target_timestamp)
        return self.entry(i - 1) if i else TimestampOffset(NO_TIMESTAMP, self.base_offset)


# ---------------------------------------------------------------------------
# sizes


def max_index_size(segment_index_bytes: int, entry_size: int) -> int:
    """Preallocated file size: ``segment.index.bytes`` rounded down to whole entries."""
    if segment_index_bytes < entry_size:
        raise ValueError(f"invalid max index size: {segment_index_bytes}")
    return segment_index_bytes // entry_size * entry_size


def max_entries(segment_index_bytes: int, entry_size: int) -> int:
    return max_index_size(segment_index_bytes, entry_size) // entry_size


def offset_index_is_full(entries: int, max_entry_count: int) -> bool:
    return entries >= max_entry_count


def time_index_is_full(entries: int, max_entry_count: int) -> bool:
    # The last slot is kept for the entry appended when the segment is rolled or closed.
    return entries >= max_entry_count - 1


def relative_offset(base_offset: int, offset: int) -> int:
    rel = offset - base_offset
    if not 0 <= rel <= INT32_MAX:
        raise IndexOffsetOverflowError(
            f"integer overflow for offset: {offset} (base offset {base_offset}); "
            "the segment must be split before it can be indexed"
        )
    return rel


# ---------------------------------------------------------------------------
# offset index


def encode_offset_entry(rel_offset: int, position: int) -> bytes:
    return _OFFSET.pack(rel_offset, position)


def encode_offset_index(entries: Iterable[tuple[int, int]], base_offset: int) -> bytes:
    """Entries of absolute (offset, position) as the file bytes."""
    pack = _OFFSET.pack
    return b"".join(pack(relative_offset(base_offset, off), pos) for off, pos in entries)


def decode_offset_entries(buf) -> list[tuple[int, int]]:
    """Every whole slot as (relativeOffset, position); a trailing partial entry is ignored
    (see :func:`scan_offset_index` for what to trust)."""
    mv = memoryview(buf).cast("B")
    whole = len(mv) - len(mv) % OFFSET_ENTRY_SIZE
    return list(_OFFSET.iter_unpack(mv[:whole]))


def scan_offset_index(buf, base_offset: int) -> OffsetIndexScan:
    """Trusted entries of an ``.index`` buffer.

    Stops at the first slot i>0 whose relative offset does not increase (an
    all-zero slot is DumpLogSegments' "offset == base" stop: the preallocated
    tail), at a negative relative offset or a negative position.
    """
    data, slots, partial, nz_end, k = _layout(buf, OFFSET_ENTRY_SIZE)
    rels = _column(data, k, OFFSET_ENTRY_SIZE, 0, 4, "i")
    poss = _column(data, k, OFFSET_ENTRY_SIZE, 4, 4, "i")
    if k and min(rels) >= 0 and min(poss) >= 0 and all(map(lt, rels, rels[1:])):
        return _finish(OffsetIndexScan, base_offset, OFFSET_ENTRY_SIZE, slots, partial, nz_end, rels, poss)
    prev = -1
    for i, (rel, pos) in enumerate(zip(rels, poss, strict=True)):
        if rel < 0:
            reason = STOP_NEGATIVE_OFFSET
        elif pos < 0:
            reason = STOP_NEGATIVE_POSITION
        elif i > 0 and rel == 0 and pos == 0:
            reason = STOP_ZERO_SLOT
        elif rel <= prev:
            reason = STOP_OFFSET_NOT_INCREASING
        else:
            prev = rel
            continue
        return _stop(
            OffsetIndexScan, base_offset, OFFSET_ENTRY_SIZE, slots, partial, nz_end, rels, poss, i, reason
        )
    return _finish(OffsetIndexScan, base_offset, OFFSET_ENTRY_SIZE, slots, partial, nz_end, rels, poss)


def lookup_offset(entries: Sequence[OffsetPosition], target_offset: int, base_offset: int) -> OffsetPosition:
    """Greatest entry with offset <= target, else (base offset, 0)."""
    i = bisect_right(entries, target_offset, key=_offset_key)
    return entries[i - 1] if i else OffsetPosition(base_offset, 0)


def _offset_key(entry: OffsetPosition) -> int:
    return entry[0]


# ---------------------------------------------------------------------------
# time index


def encode_time_entry(timestamp: int, rel_offset: int) -> bytes:
    return _TIME.pack(timestamp, rel_offset)


def encode_time_index(entries: Iterable[tuple[int, int]], base_offset: int) -> bytes:
    """Entries of (timestamp, absolute offset) as the file bytes."""
    pack = _TIME.pack
    return b"".join(pack(ts, relative_offset(base_offset, off)) for ts, off in entries)


def decode_time_entries(buf) -> list[tuple[int, int]]:
    """Every whole slot as (timestamp, relativeOffset); a trailing partial entry is ignored."""
    mv = memoryview(buf).cast("B")
    whole = len(mv) - len(mv) % TIME_ENTRY_SIZE
    return list(_TIME.iter_unpack(mv[:whole]))


def scan_time_index(buf, base_offset: int) -> TimeIndexScan:
    """Trusted entries of a ``.timeindex`` buffer.

    Stops at the first all-zero slot after the first, at a timestamp that does
    not increase, an offset that decreases, a negative timestamp (the first
    entry must beat the initial -1) or a negative relative offset.
    """
    data, slots, partial, nz_end, k = _layout(buf, TIME_ENTRY_SIZE)
    tss = _column(data, k, TIME_ENTRY_SIZE, 0, 8, "q")
    rels = _column(data, k, TIME_ENTRY_SIZE, 8, 4, "i")
    if k and min(tss) >= 0 and min(rels) >= 0 and all(map(lt, tss, tss[1:])) and all(map(le, rels, rels[1:])):
        return _finish(TimeIndexScan, base_offset, TIME_ENTRY_SIZE, slots, partial, nz_end, tss, rels)
    prev_ts = prev_rel = None
    for i, (ts, rel) in enumerate(zip(tss, rels, strict=True)):
        if i > 0 and ts == 0 and rel == 0:
            reason = STOP_ZERO_SLOT
        elif ts < 0:
            reason = STOP_NEGATIVE_TIMESTAMP
        elif rel < 0:
            reason = STOP_NEGATIVE_OFFSET
        elif prev_ts is not None and ts <= prev_ts:
            reason = STOP_TIMESTAMP_NOT_INCREASING
        elif prev_rel is not None and rel < prev_rel:
            reason = STOP_OFFSET_DECREASING
        else:
            prev_ts, prev_rel = ts, rel
            continue
        return _stop(
            TimeIndexScan, base_offset, TIME_ENTRY_SIZE, slots, partial, nz_end, tss, rels, i, reason
        )
    return _finish(TimeIndexScan, base_offset, TIME_ENTRY_SIZE, slots, partial, nz_end, tss, rels)


def lookup_timestamp(
    entries: Sequence[TimestampOffset], target_timestamp: int, base_offset: int
) -> TimestampOffset:
    """Greatest entry with timestamp <= target, else (-1, base offset)."""
    i = bisect_right(entries, target_timestamp, key=_timestamp_key)
    return entries[i - 1] if i else TimestampOffset(NO_TIMESTAMP, base_offset)


def _timestamp_key(entry: TimestampOffset) -> int:
    return entry[0]


# ---------------------------------------------------------------------------
# shared scan plumbing


def _layout(buf, entry_size: int) -> tuple[bytes, int, int, int, int]:
    """(bytes, whole slots, partial bytes, end of the non-zero data, slots holding non-zero data)."""
    data = buf if isinstance(buf, bytes) else memoryview(buf).cast("B").tobytes()
    n = len(data)
    slots = n // entry_size
    # rstrip runs in C: one pass finds where the preallocated zeros begin.
    nz_end = len(data.rstrip(b"\x00"))
    # Slot 0 is decoded even when zero: it is trusted like any first entry.
    k = min(slots, max(-(-nz_end // entry_size), 1))
    return data, slots, n % entry_size, nz_end, k


def _column(data: bytes, n: int, entry_size: int, field_offset: int, width: int, typecode: str) -> array:
    """One big-endian field of ``n`` fixed-size entries as an array, gathered with
    strided byte slices (C speed, no per-entry Python work)."""
    out = bytearray(n * width)
    end = n * entry_size
    for k in range(width):
        out[k::width] = data[field_offset + k : end : entry_size]
    col = array(typecode)
    col.frombytes(out)
    if _SWAP:
        col.byteswap()
    return col


def _finish(cls, base, entry_size, slots, partial, nz_end, keys, values) -> IndexScan:
    k = len(keys)
    if k < slots:
        # Every slot from k on is zero (k >= 1 here): the preallocated tail.
        return cls(base, entry_size, slots, partial, k, STOP_ZERO_TAIL, True, keys, values)
    return cls(base, entry_size, slots, partial, None, STOP_END, slots * entry_size >= nz_end, keys, values)


def _stop(cls, base, entry_size, slots, partial, nz_end, keys, values, slot, reason) -> IndexScan:
    tail_zero = slot * entry_size >= nz_end
    if reason == STOP_ZERO_SLOT and tail_zero:
        reason = STOP_ZERO_TAIL
    return cls(base, entry_size, slots, partial, slot, reason, tail_zero, keys[:slot], values[:slot])


# ---------------------------------------------------------------------------
# transaction index


class TxnIndexError(FormatError):
    kind = "bad_version"


@dataclass(frozen=True, slots=True)
class TxnIndexScan:
    entries: list[AbortedTxn]
    partial_bytes: int
    # (byte position, description) of entries Kafka's sanity check or append
    # rule would reject: lastOffset below the segment base, or not increasing.
    problems: list[tuple[int, str]]

    @property
    def clean(self) -> bool:
        return not self.partial_bytes and not self.problems


def encode_aborted_txn(
    producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
) -> bytes:
    return _TXN.pack(TXN_INDEX_VERSION, producer_id, first_offset, last_offset, last_stable_offset)


def encode_txn_index(entries: Iterable[AbortedTxn | tuple[int, int, int, int]]) -> bytes:
    """Entries are AbortedTxn (its version is written as given) or
    (producerId, firstOffset, lastOffset, lastStableOffset)."""
    out = []
    for e in entries:
        if isinstance(e, AbortedTxn):
            out.append(_TXN.pack(*e))
        else:
            out.append(encode_aborted_txn(*e))
    return b"".join(out)


def decode_txn_entries(buf) -> list[AbortedTxn]:
    """All whole entries; a trailing partial entry is ignored as Kafka's reader does.

    The version is the signed first byte of the int16 field; a value above 0
    raises :class:`TxnIndexError` at that entry's byte position.
    """
    mv = memoryview(buf).cast("B")
    n = len(mv) - len(mv) % TXN_ENTRY_SIZE
    out: list[AbortedTxn] = []
    unpack = _TXN_BODY.unpack_from
    for pos in range(0, n, TXN_ENTRY_SIZE):
        b = mv[pos]
        version = b - 256 if b > 127 else b
        if version > TXN_INDEX_VERSION:
            raise TxnIndexError(
                f"unexpected aborted transaction version {version} in transaction index, "
                f"current version is {TXN_INDEX_VERSION}",
                pos,
            )
        out.append(AbortedTxn(version, *unpack(mv, pos + 2)))
    return out


def scan_txn_index(buf, base_offset: int) -> TxnIndexScan:
    entries = decode_txn_entries(buf)
    problems: list[tuple[int, str]] = []
    prev = None
    for i, txn in enumerate(entries):
        pos = i * TXN_ENTRY_SIZE
        if txn.last_offset < base_offset:
            problems.append(
                (
                    pos,
                    f"last offset {txn.last_offset} of aborted transaction is less than start offset {base_offset}",
                )
            )
        if prev is not None and txn.last_offset <= prev:
            problems.append((pos, f"last offset {txn.last_offset} does not increase (previous {prev})"))
        prev = txn.last_offset
    return TxnIndexScan(entries, len(memoryview(buf).cast("B")) % TXN_ENTRY_SIZE, problems)
