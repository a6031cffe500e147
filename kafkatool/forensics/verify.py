"""Verification of Kafka log files: the library behind ``kafkatool verify`` and the fleet scan.

Where Kafka's recovery stops at the first invalid batch, this walks on: after
damage it searches forward for the next plausible valid batch, reports the
damaged byte range, and verifies what lies beyond.

A finding has a ``kind`` (stable, for scripts), a ``severity`` (``error``:
data Kafka would reject or lose; ``warning``: a state Kafka repairs itself at
start-up, or suspicious metadata; ``info``: noted, not a problem) and the byte
range ``[position, end)`` in its file.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import checkpoint as C
from kafkatool.formats import compression
from kafkatool.formats import index as I
from kafkatool.formats import properties as P
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as S
from kafkatool.formats.errors import FormatError
from kafkatool.formats.index import IndexOffsetOverflowError
from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
    NotRegularFileError,
    non_regular_reason,
    offset_from_file_name,
    read_regular,
)
from kafkatool.log.manager import resolve_path
from kafkatool.log.segment import scan_for_recovery

ERROR = "error"
WARNING = "warning"
INFO = "info"
#: --fail-on's values, lowest last
FAIL_ON_VALUES = (ERROR, WARNING)


def failing_severities(fail_on: str) -> frozenset[str]:
    """The finding severities that make a check exit 1 under ``--fail-on`` (every command's one rule)."""
    if fail_on not in FAIL_ON_VALUES:
        raise ValueError(f"--fail-on {fail_on!r}: must be 'error' or 'warning'")
    return frozenset({ERROR}) if fail_on == ERROR else frozenset({ERROR, WARNING})


OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
_SEGMENT_NAME = re.compile(r"^\d{20}$")
PARTITION_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
SPECIAL_DIR_RE = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)\.(?P<uuid>[0-9a-f]{32})-(?P<kind>delete|future|stray)$"
)
IGNORED_DIRS = {"__cluster_metadata-0", "remote-log-index-cache"}
INTERRUPTED_SUFFIXES = (".deleted", ".cleaned", ".swap")
INT32_MAX = 2**31 - 1
#: index.interval.bytes for the recovery scan (Kafka's default; it only decides where the
#: scan checks that index offsets grow)
DEFAULT_INDEX_INTERVAL = LogConfig().index_interval_bytes


@dataclass
class Finding:
    file: str
    position: int | None
    end: int | None
    offset: int | None
    kind: str
    message: str
    severity: str = ERROR

    def to_json(self) -> dict:
        return {
            "type": "finding",
            "file": self.file,
            "position": self.position,
            "end": self.end,
            "offset": self.offset,
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
        }


@dataclass
class SegmentReport:
    """What was found in one ``.log`` file, plus the statistics the fleet scan tabulates."""

    file: str
    base_offset: int | None
    size: int = 0
    valid_end: int = 0  # where Kafka's recovery would truncate (first invalid entry), or the size
    batches: int = 0
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: set[str] = field(default_factory=set)
    magics: set[int] = field(default_factory=set)
    producer_ids: set[int] = field(default_factory=set)
    leader_epochs: set[int] = field(default_factory=set)
    batches_after_damage: int = 0
    findings: list[Finding] = field(default_factory=list)
    # batch layout kept for the index checks: start positions, last offsets,
    # running max timestamps, and the first/last offsets of control batches.
    positions: array = field(default_factory=lambda: array("q"), repr=False)
    last_offsets: array = field(default_factory=lambda: array("q"), repr=False)
    running_max_ts: array = field(default_factory=lambda: array("q"), repr=False)
    first_offsets: array = field(default_factory=lambda: array("q"), repr=False)
    control_last_offsets: set[int] = field(default_factory=set, repr=False)
    #: batches whose offset range runs past their last record: (position, end, last record
    #: offset, last offset); only the log cleaner leaves such a gap (verify_partition decides)
    offset_gaps: list[tuple[int, int, int, int]] = field(default_factory=list, repr=False)
    epoch_starts: list[tuple[int, int]] = field(default_factory=list, repr=False)  # (epoch, first offset)
    # [start, end) byte ranges and (last good offset, first offset after) of each damaged stretch
    damaged: list[tuple[int, int, int | None, int | None]] = field(default_factory=list, repr=False)

    def in_damage(self, position: int | None = None, offset: int | None = None) -> bool:
        for start, end, before, after in self.damaged:
            if position is not None and start <= position < end:
                return True
            if (
                offset is not None
                and (before is None or offset > before)
                and (after is None or offset < after)
            ):
                return True
        return False

    @property
    def next_offset(self) -> int | None:
        return None if self.last_offset is None else self.last_offset + 1

    def stats(self) -> dict:
        return {
            "file": self.file,
            "base_offset": self.base_offset,
            "size": self.size,
            "valid_end": self.valid_end,
            "batches": self.batches,
            "records": self.records,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "min_timestamp": self.min_timestamp,
            "max_timestamp": self.max_timestamp,
            "codecs": sorted(self.codecs),
            "magics": sorted(self.magics),
            "producer_ids": sorted(self.producer_ids),
            "leader_epochs": sorted(self.leader_epochs),
            "batches_after_damage": self.batches_after_damage,
        }


@dataclass
class FileResult:
    """One verified file of any kind (the unit of progress and of the human table)."""

    file: str
    kind: str  # log, index, timeindex, txnindex, snapshot, checkpoint, properties, dir
    size: int
    findings: list[Finding]
    segment: SegmentReport | None = None


# ---------------------------------------------------------------- segments


def verify_segment(
    path: str | os.PathLike, *, deep: bool = True, max_bytes: int | None = None
) -> SegmentReport:
    """Verify one ``.log`` file: framing, CRCs, offsets, counts, timestamps; with
    ``deep`` every record is decoded too (decompressing as needed)."""
    path = Path(path)
    name = str(path)
    base = offset_from_file_name(path) if path.name.endswith(LOG_SUFFIX) else None
    report = SegmentReport(name, base)
    if path.name.endswith(LOG_SUFFIX) and not _SEGMENT_NAME.match(path.name[: -len(LOG_SUFFIX)]):
        report.findings.append(
            Finding(
                name,
                None,
                None,
                None,
                "bad_file_name",
                "segment file name is not a 20-digit base offset (Kafka will not load it)",
                WARNING,
            )
        )
    with FileRecords(path, max_bytes=max_bytes) as fr:
        report.size = fr.size
        report.valid_end = fr.size
        codec_ids: set[int] = set()
        _scan_segment(fr, report, deep, codec_ids)
        report.codecs = {compression.CODEC_NAMES.get(c, f"unknown({c})") for c in codec_ids}
    return report


def _scan_segment(fr: FileRecords, rep: SegmentReport, deep: bool, codec_ids: set[int]) -> None:
    buf = fr.buf
    size = fr.size
    name = rep.file
    base = rep.base_offset
    add = rep.findings.append
    pos = 0
    prev_last: int | None = None
    damaged = False
    running_max = R.NO_TIMESTAMP
    last_epoch: int | None = None
    positions, last_offsets, running_ts, first_offsets = (
        rep.positions,
        rep.last_offsets,
        rep.running_max_ts,
        rep.first_offsets,
    )
    magics, pids, epochs = rep.magics, rep.producer_ids, rep.leader_epochs
    walked = 0  # end of the last batch taken

    def damage(at: int, kind: str, message: str, offset: int | None) -> int | None:
        """Record damage at ``at``; return where valid data resumes (None: nothing valid follows)."""
        nonlocal damaged
        if not damaged:
            rep.valid_end = at
            damaged = True
        if fr.tail_is_zeros(at):
            rep.damaged.append((at, size, prev_last, None))
            add(
                Finding(
                    name,
                    at,
                    size,
                    offset,
                    "zero_tail",
                    f"{size - at} zero bytes from byte {at} to the end of the file (a preallocated "
                    "or unflushed tail; Kafka's recovery truncates it)",
                    WARNING,
                )
            )
            return None
        nxt = fr.find_next_valid_batch(at + 1)
        end = nxt.position if nxt is not None else size
        if nxt is not None and kind in ("garbage_tail", "truncated_tail"):
            # not a tail at all: a size field points past the end of the file, and valid
            # batches follow; name it for what it is
            peek = R.peek_entry(buf, at)
            claims = f" claims {peek[1] + R.LOG_OVERHEAD} bytes" if peek is not None else ""
            kind, message = (
                "bad_length",
                f"the entry at byte {at}{claims}, past the end of the file ({size} bytes)",
            )
        if nxt is None and kind in ("bad_length", "bad_magic"):
            # nothing valid follows an impossible header: the rest of the file is garbage
            kind, message = (
                "garbage_tail",
                f"{size - at} bytes at the end of the file are not Kafka entries ({message})",
            )
        after = None
        if nxt is not None:
            after = nxt.base_offset if nxt.magic == 2 else nxt.last_offset
        rep.damaged.append((at, end, prev_last, after))
        beyond = f"; valid data resumes at byte {end}" if nxt is not None else "; no valid batch follows"
        add(Finding(name, at, end, offset, kind, message + beyond, ERROR))
        return end if nxt is not None else None

    def take(batch) -> None:
        """A batch whose framing and CRC are valid: header invariants, deep checks, statistics."""
        nonlocal prev_last, running_max, last_epoch, walked
        pos = batch.position
        walked = batch.end
        is_v2 = batch.magic == 2
        if is_v2:
            first = batch.base_offset
        else:
            first = batch.offset if batch.codec == 0 else None
        last = batch.last_offset
        if damaged:
            rep.batches_after_damage += 1
        # --- header invariants
        if is_v2:
            if batch.attributes & 0xFF80:
                add(
                    Finding(
                        name,
                        pos,
                        batch.end,
                        last,
                        "bad_attributes",
                        f"batch at offset {first} sets unused attribute bits (0x{batch.attributes & 0xFFFF:04x})",
                        WARNING,
                    )
                )
            if batch.codec > 4:
                add(
                    Finding(
                        name, pos, batch.end, last, "compression", f"unknown compression codec {batch.codec}"
                    )
                )
            if batch.max_timestamp < R.NO_TIMESTAMP:
                add(
                    Finding(
                        name,
                        pos,
                        batch.end,
                        last,
                        "bad_timestamp",
                        f"batch at offset {first} has a negative maxTimestamp {batch.max_timestamp}",
                    )
                )
        if first is not None and base is not None and first < base:
            add(
                Finding(
                    name,
                    pos,
                    batch.end,
                    first,
                    "offset_below_segment_base",
                    f"batch offset {first} is below the segment's base offset {base}",
                )
            )
        if base is not None and last - base > INT32_MAX:
            add(
                Finding(
                    name,
                    pos,
                    batch.end,
                    last,
                    "offset_overflow",
                    f"offset {last} is not representable relative to base offset {base}",
                )
            )
        check_first = first if first is not None else last
        if prev_last is not None and check_first <= prev_last:
            add(
                Finding(
                    name,
                    pos,
                    batch.end,
                    check_first,
                    "offset_not_increasing",
                    f"batch offset {check_first} does not follow the previous batch's last offset {prev_last}",
                )
            )
        # --- deep record checks
        if deep:
            first = _check_records(batch, rep, first)
        # --- statistics and layout
        rep.batches += 1
        rep.records += batch.records_count if is_v2 else (1 if batch.codec == 0 else _legacy_count(batch))
        if rep.first_offset is None:
            rep.first_offset = first if first is not None else last
        rep.last_offset = last if rep.last_offset is None else max(rep.last_offset, last)
        prev_last = last
        ts = batch.max_timestamp
        if ts >= 0:
            if ts > running_max:
                running_max = ts
            if rep.max_timestamp is None or ts > rep.max_timestamp:
                rep.max_timestamp = ts
            low = (
                batch.base_timestamp
                if is_v2 and not batch.has_delete_horizon and batch.base_timestamp >= 0
                else ts
            )
            if rep.min_timestamp is None or low < rep.min_timestamp:
                rep.min_timestamp = low
        codec_ids.add(batch.attributes & R.CODEC_MASK)
        magics.add(batch.magic)
        if is_v2:
            if batch.producer_id >= 0:
                pids.add(batch.producer_id)
            ple = batch.partition_leader_epoch
            epochs.add(ple)
            if ple >= 0 and ple != last_epoch:
                rep.epoch_starts.append((ple, first))
                last_epoch = ple
            if batch.is_control:
                rep.control_last_offsets.add(last)
        positions.append(pos)
        last_offsets.append(last)
        running_ts.append(running_max)
        first_offsets.append(first if first is not None else last)

    # Where valid data ends is the recovery scan's answer (Kafka's LogSegment.recover):
    # every batch it accepts goes through take(); verify adds its findings on top and
    # walks on past the first damage to report what lies beyond.
    scan = None
    if base is not None or size == 0:
        try:
            scan = scan_for_recovery(buf, base or 0, DEFAULT_INDEX_INTERVAL, on_batch=take)
        except IndexOffsetOverflowError:
            scan = None  # Kafka splits such a segment and cuts nothing: verify walks the rest itself
    if scan is not None:
        pos = scan.valid_bytes
        recovery_stop = pos if pos < size else None
        if scan.invalid_offset:
            # Kafka's recovery empties the whole segment (InvalidOffsetException)
            damage(0, "invalid_offset", f"{scan.stop_message}: Kafka's recovery empties this segment", None)
            rep.damaged[-1] = (0, size, None, None)
            recovery_stop = None
    else:
        pos = walked
        recovery_stop = None

    while pos < size:
        try:
            batch = R.read_batch(buf, pos)
        except FormatError as exc:
            resume = damage(pos, exc.kind, exc.message, None)
            if resume is None:
                return
            pos = resume
            continue
        if batch is None:
            # fewer than 17 bytes left, or an entry running past the end of the file
            if fr.tail_is_zeros(pos):
                damage(pos, "zero_tail", "", None)
                return
            peek = R.peek_entry(buf, pos)
            if peek is not None:
                p_off, p_size, p_magic = peek
                plausible = (
                    p_magic in (0, 1, 2)
                    and p_off >= 0
                    and p_size < (1 << 30)
                    and (prev_last is None or p_off > prev_last)
                )
                claimed = f" claims {p_size + R.LOG_OVERHEAD} bytes, only {size - pos} remain"
            else:
                plausible, claimed = True, f" ({size - pos} bytes, less than an entry header)"
            if plausible:
                resume = damage(
                    pos,
                    "truncated_tail",
                    f"partial entry at the end of the file{claimed} (an interrupted write)",
                    peek[0] if peek else None,
                )
            else:
                resume = damage(
                    pos,
                    "garbage_tail",
                    f"{size - pos} bytes at the end of the file are not a Kafka entry (its size field{claimed})",
                    None,
                )
            if resume is None:
                return
            pos = resume
            continue
        is_v2 = batch.magic == 2
        if is_v2:
            last = batch.last_offset
            try:
                # the recovery scan's own test (size, CRC, offset range, count): what
                # recovery would cut, verify reports as damage, by construction
                batch.ensure_valid()
            except FormatError as exc:
                if exc.kind != "crc_mismatch":
                    resume = damage(pos, exc.kind, exc.message, last)
                    if resume is None:
                        return
                    pos = resume
                    continue
            valid_crc = batch.compute_crc() == batch.crc
        else:
            valid_crc = batch.is_valid()
            last = batch.last_offset
        if not valid_crc:
            resume = damage(
                pos,
                "crc_mismatch",
                f"{'record batch' if is_v2 else 'message'} at offset {last} fails its CRC "
                f"(stored {batch.crc}, computed {batch.compute_crc()})",
                last,
            )
            if resume is None:
                return
            pos = resume
            continue
        if pos == recovery_stop and not damaged:
            # recovery stops here although the batch looks valid to verify's own checks:
            # the recovery scan's answer wins (verify and recover agree by construction)
            resume = damage(
                pos, scan.stop_reason or "invalid_batch", scan.stop_message or "recovery stops here", last
            )
            if resume is None:
                return
            pos = resume
            continue
        if damaged:
            rep.batches_after_damage += 1
        take(batch)
        pos = batch.end


def _legacy_count(batch) -> int:
    try:
        return batch.count
    except FormatError:
        return 0


def _check_records(batch, rep: SegmentReport, first: int | None) -> int | None:
    """Decode every record of ``batch``; returns the batch's first offset (legacy wrappers
    reveal it only now)."""
    name = rep.file
    pos = batch.position
    last = batch.last_offset

    def add(offset: int | None, kind: str, message: str, severity: str = ERROR) -> None:
        """A finding about this batch (its whole byte range), at ``offset``."""
        rep.findings.append(Finding(name, pos, batch.end, offset, kind, message, severity))

    try:
        recs = list(batch.records())
    except FormatError as exc:
        kind = exc.kind if exc.kind in ("compression", "bad_count") else "record_corrupt"
        add(
            last,
            kind,
            f"records of the batch at offset {first if first is not None else last} "
            f"cannot be decoded: {exc.message}",
        )
        return first
    if batch.magic == 2 and batch.is_control:
        # a control batch is written whole (a transaction marker is one record; KRaft's control
        # records sit at consecutive offsets) and the log cleaner keeps or drops it whole
        # (LogCleaner's checkBatchRetention: the original batch, or an empty one that keeps the
        # marker's one offset), so its offsets end at its last record (empty: at its base
        # offset) wherever the cleaner has been
        end = recs[-1].offset if recs else batch.base_offset
        if end < last:
            held = f"its last record is at {end}" if recs else "it holds no record"
            add(
                last,
                "bad_offset_range",
                f"control batch ends at offset {last} but {held}: a header rewritten with a valid CRC",
            )
    if not recs:
        return first
    if batch.magic == 2:
        if len(recs) != batch.records_count:
            add(
                last,
                "bad_count",
                f"batch declares {batch.records_count} records and holds {len(recs)}",
            )
        prev = None
        for r in recs:
            if r.offset > last or r.offset < batch.base_offset or (prev is not None and r.offset <= prev):
                add(
                    r.offset,
                    "record_offset",
                    f"record offset {r.offset} is out of order or outside the batch "
                    f"[{batch.base_offset}, {last}]",
                )
                break
            prev = r.offset
        if not batch.is_control and recs[-1].offset < last:
            rep.offset_gaps.append((pos, batch.end, recs[-1].offset, last))
        if not batch.is_control:
            _note_header_keys(batch, recs, rep)
        if batch.is_control:
            try:
                R.parse_control_record(recs[0])
            except FormatError as exc:
                add(last, "bad_control_record", exc.message)
        elif batch.timestamp_type == R.CREATE_TIME and not batch.has_delete_horizon:
            mx = max(r.timestamp for r in recs)
            if mx != batch.max_timestamp:
                add(
                    last,
                    "timestamp_mismatch",
                    f"batch maxTimestamp {batch.max_timestamp} but its records' largest timestamp is {mx}",
                    WARNING,
                )
        return first
    # legacy
    if batch.inner_leftover:
        # Kafka's deep iterator ends the inner set there without an error: a produce takes the
        # wrapper, a consumer never sees those bytes
        add(
            last,
            "record_corrupt",
            f"{batch.inner_leftover} bytes after the last whole inner message of the wrapper at "
            f"offset {last} are not read (Kafka ends the wrapper's message set there)",
        )
    if batch.value_leftover:
        # LegacyRecord reads a key and a value by their lengths and ignores what follows: a
        # produce takes the message, a consumer never sees those bytes
        what = "its inner messages" if batch.codec != 0 else "the message"
        add(
            last,
            "record_corrupt",
            f"{batch.value_leftover} bytes after the value of {what} at offset {last} are not read "
            "(Kafka's LegacyRecord ignores them)",
        )
    for r in recs:
        if r.magic != batch.magic:
            # LogValidator.validateRecord's hasMagic: a produce refuses it with a record error
            add(
                r.offset,
                "record_corrupt",
                f"inner message at offset {r.offset} of the wrapper at offset {last} has magic "
                f"{r.magic}, not its wrapper's {batch.magic}",
            )
            break
    for r in recs:
        if not r.is_valid:
            add(
                r.offset,
                "crc_mismatch",
                f"inner message at offset {r.offset} of the wrapper at offset {last} "
                f"fails its CRC (stored {r.crc})",
            )
            break
    if recs[-1].offset != last:
        add(
            last,
            "record_offset",
            f"wrapper offset {last} is not its last inner offset {recs[-1].offset}",
            WARNING,
        )
    return recs[0].offset


#: how many bytes of a header key a finding shows in hex
_KEY_HEX_SHOWN = 64


def _note_header_keys(batch, recs, rep: SegmentReport) -> None:
    """One ``info`` finding for a batch whose record header keys include one that is not UTF-8
    (walk_headers keeps its bytes as surrogate escapes): Kafka never refuses it, a Java client
    sees the String Kafka makes of it (java_utf8: one U+FFFD per malformed sequence).  A
    forensic note, not damage: the first such key, where the key's bytes are (the walk that
    found it is run again for its position, so the decoder keeps none), how many there are."""
    bad = []
    keys_before = 0  # header keys of the batch before the first bad one
    for r in recs:
        if r.headers:
            for i, (key, _) in enumerate(r.headers):
                if R.kafka_header_key(key) != key:
                    if not bad:
                        first = keys_before + i
                    bad.append((r, i, key))
            if not bad:
                keys_before += len(r.headers)
    if not bad:
        return
    r, i, key = bad[0]
    key_at: list[int] = []
    for _ in batch.records(key_at=key_at):
        pass
    at = key_at[first]
    raw = R.header_key_bytes(key)
    shown = raw[:_KEY_HEX_SHOWN].hex(" ") + (f" ... ({len(raw)} bytes)" if len(raw) > _KEY_HEX_SHOWN else "")
    if batch.codec == 0:
        position, end, where = at, at + len(raw), f"at byte {at}"
    else:  # a position inside the decompressed stream: the finding spans the batch
        position, end, where = batch.position, batch.end, f"at byte {at} of the decompressed records"
    more = f"; {len(bad)} header keys of this batch are not UTF-8" if len(bad) > 1 else ""
    rep.findings.append(
        Finding(
            rep.file,
            position,
            end,
            r.offset,
            "header_key_not_utf8",
            f"header {i} key of the record at offset {r.offset} ({where}) is not valid UTF-8 "
            f"(bytes {shown}): a client reads it as {R.kafka_header_key(key)!r} (Java's "
            "String(bytes, UTF_8), one U+FFFD per malformed sequence), and Kafka writes that "
            f"String's UTF-8 where it rebuilds the record (cleaner, recompressing produce){more}",
            INFO,
        )
    )


# ---------------------------------------------------------------- indexes


def _read_bytes(path: Path) -> bytes:
    return read_regular(path)


def _open_index(
    path, scanner, entry_size: int, active: bool
) -> tuple[str, I.IndexScan | None, list[Finding]]:
    """Read and scan an offset or time index; structural findings come back in the list."""
    path = Path(path)
    name = str(path)
    base = offset_from_file_name(path)
    if base is None:
        return (
            name,
            None,
            [
                Finding(
                    name, None, None, None, "bad_file_name", "index file name is not a base offset", WARNING
                )
            ],
        )
    data = _read_bytes(path)
    out: list[Finding] = []
    scan = scanner(data, base)
    if scan.count and not any(data):
        # The scanner keeps an all-zero slot 0 (DumpLogSegments prints it), but Kafka never
        # indexes byte 0 of a segment: an all-zero first slot is the start of a
        # preallocated, unwritten index (an empty active segment on a live or crashed
        # broker), one rule for both, and the same zero tail Kafka rebuilds at start-up.
        scan = dataclasses.replace(
            scan,
            stop_slot=0,
            reason=I.STOP_ZERO_TAIL,
            tail_zero=True,
            keys=scan.keys[:0],
            values=scan.values[:0],
        )
    _index_structure(name, data, scan, out, active, entry_size)
    return name, scan, out


def verify_offset_index(
    path: str | os.PathLike, seg: SegmentReport | None, *, active: bool = False
) -> list[Finding]:
    name, scan, out = _open_index(path, I.scan_offset_index, I.OFFSET_ENTRY_SIZE, active)
    if scan is None or seg is None:
        return out
    positions, last_offsets, first_offsets = seg.positions, seg.last_offsets, seg.first_offsets
    prev_pos = -1
    for i, (offset, position) in enumerate(scan.entries):
        at = i * I.OFFSET_ENTRY_SIZE
        end = at + I.OFFSET_ENTRY_SIZE
        if position <= prev_pos:
            out.append(
                Finding(
                    name,
                    at,
                    end,
                    offset,
                    "index_not_increasing",
                    f"entry {i} position {position} does not increase (previous {prev_pos})",
                )
            )
        prev_pos = position
        if position >= seg.size:
            out.append(
                Finding(
                    name,
                    at,
                    end,
                    offset,
                    "index_past_log",
                    f"entry {i} (offset {offset}) points at byte {position}, beyond the end of the log "
                    f"({seg.size} bytes)",
                )
            )
            continue
        if seg.in_damage(position=position):
            continue  # the damage itself is reported on the .log
        k = bisect_left(positions, position)
        if k >= len(positions) or positions[k] != position:
            out.append(
                Finding(
                    name,
                    at,
                    end,
                    offset,
                    "index_not_batch_boundary",
                    f"entry {i} (offset {offset}) points at byte {position}, which is not the start "
                    "of a batch",
                )
            )
            continue
        if last_offsets[k] == offset:
            continue
        # A follower or the cleaner indexes the last offset of a multi-batch chunk at the
        # chunk's start: accept when a later batch ends exactly at that offset and the
        # batch at the position starts at or below it.
        j = bisect_left(last_offsets, offset, lo=k)
        if first_offsets[k] <= offset and j < len(last_offsets) and last_offsets[j] == offset:
            continue
        out.append(
            Finding(
                name,
                at,
                end,
                offset,
                "index_offset_mismatch",
                f"entry {i}: index offset {offset}, log offset {last_offsets[k]} at byte {position}",
            )
        )
    return out


def _index_structure(
    name: str, data: bytes, scan: I.IndexScan, out: list[Finding], active: bool, esize: int
) -> None:
    size = len(data)
    if scan.reason == I.STOP_ZERO_TAIL:
        if not active:
            out.append(
                Finding(
                    name,
                    scan.stop_position,
                    size,
                    None,
                    "index_not_trimmed",
                    f"{size - scan.stop_position} zero bytes of preallocated slots after "
                    f"{len(scan.entries)} entries in a segment that is not the active one (Kafka trims "
                    "indexes on roll and clean shutdown: a sign of a crash)",
                    WARNING,
                )
            )
    elif scan.reason != I.STOP_END:
        out.append(
            Finding(
                name,
                scan.stop_position,
                size,
                None,
                f"index_{scan.reason}",
                f"index entries stop being valid at slot {scan.stop_slot} ({scan.reason.replace('_', ' ')}); "
                f"{len(scan.entries)} entries before it are usable",
                ERROR,
            )
        )
    if scan.partial_bytes:
        # Kafka's sanityCheck looks at the length alone: zero or not, the file is
        # corrupt and the loader rebuilds it (as recover and rebuild-index do)
        out.append(
            Finding(
                name,
                scan.partial_position,
                size,
                None,
                "index_partial_entry",
                f"{size} bytes is not a multiple of the {esize}-byte entry size: the last "
                f"{scan.partial_bytes} bytes are no whole entry (Kafka's sanity check fails and it "
                "rebuilds the index at start-up; recover and rebuild-index rebuild it)",
                WARNING,
            )
        )


def verify_time_index(
    path: str | os.PathLike, seg: SegmentReport | None, *, active: bool = False
) -> list[Finding]:
    name, scan, out = _open_index(path, I.scan_time_index, I.TIME_ENTRY_SIZE, active)
    if scan is None or seg is None:
        return out
    last_offsets, running = seg.last_offsets, seg.running_max_ts
    for i, (ts, offset) in enumerate(scan.entries):
        at = i * I.TIME_ENTRY_SIZE
        end = at + I.TIME_ENTRY_SIZE
        k = bisect_left(last_offsets, offset)
        if k >= len(last_offsets) or last_offsets[k] != offset:
            if seg.in_damage(offset=offset):
                continue  # in the damaged stretch reported on the .log
            out.append(
                Finding(
                    name,
                    at,
                    end,
                    offset,
                    "timeindex_offset_not_found",
                    f"entry {i} (timestamp {ts}) names offset {offset}, which is not the last offset "
                    "of any valid batch in the log",
                )
            )
            continue
        if running[k] != ts:
            out.append(
                Finding(
                    name,
                    at,
                    end,
                    offset,
                    "timeindex_timestamp_mismatch",
                    f"entry {i}: index timestamp {ts}, log timestamp {running[k]} (largest up to "
                    f"offset {offset})",
                )
            )
    return out


def verify_txn_index(path: str | os.PathLike, seg: SegmentReport | None) -> list[Finding]:
    path = Path(path)
    name = str(path)
    base = offset_from_file_name(path)
    data = _read_bytes(path)
    out: list[Finding] = []
    try:
        scan = I.scan_txn_index(data, base if base is not None else 0)
    except FormatError as exc:
        return [Finding(name, exc.position, len(data), None, "txnindex_" + exc.kind, exc.message)]
    for at, message in scan.problems:
        out.append(Finding(name, at, at + I.TXN_ENTRY_SIZE, None, "txnindex_invalid", message))
    if scan.partial_bytes:
        at = len(data) - scan.partial_bytes
        out.append(
            Finding(
                name,
                at,
                len(data),
                None,
                "index_partial_entry",
                f"{scan.partial_bytes} bytes at the end do not make a whole {I.TXN_ENTRY_SIZE}-byte entry",
            )
        )
    if seg is not None and seg.last_offset is not None:
        for i, txn in enumerate(scan.entries):
            at = i * I.TXN_ENTRY_SIZE
            if txn.last_offset > seg.last_offset or txn.last_offset < (seg.first_offset or 0):
                out.append(
                    Finding(
                        name,
                        at,
                        at + I.TXN_ENTRY_SIZE,
                        txn.last_offset,
                        "txnindex_outside_segment",
                        f"aborted transaction of producer {txn.producer_id} ends at offset "
                        f"{txn.last_offset}, outside this segment's offsets "
                        f"[{seg.first_offset}, {seg.last_offset}]",
                    )
                )
            elif txn.last_offset not in seg.control_last_offsets:
                out.append(
                    Finding(
                        name,
                        at,
                        at + I.TXN_ENTRY_SIZE,
                        txn.last_offset,
                        "txnindex_marker_missing",
                        f"no control batch ends at offset {txn.last_offset}, where the abort marker of "
                        f"producer {txn.producer_id} should be",
                        WARNING,
                    )
                )
    return out


# ---------------------------------------------------------------- other files


def verify_snapshot(path: str | os.PathLike) -> list[Finding]:
    name = str(path)
    data = _read_bytes(Path(path))
    snap = S.read_snapshot(data)
    if snap.error is None:
        return []
    return [
        Finding(
            name,
            snap.error.position if snap.error.position is not None else 0,
            len(data),
            None,
            "snapshot_" + snap.error.kind,
            f"producer snapshot unreadable by Kafka: {snap.error.message} (Kafka deletes it and rebuilds "
            "producer state from the log)",
            WARNING,
        )
    ]


def verify_checkpoint(path: str | os.PathLike) -> list[Finding]:
    path = Path(path)
    name = str(path)
    data = _read_bytes(path)
    try:
        if path.name == LEADER_EPOCH_CHECKPOINT:
            entries = C.decode_leader_epoch_checkpoint(data)
            out = []
            for (e1, s1), (e2, s2) in zip(entries, entries[1:], strict=False):
                if e2 <= e1 or s2 < s1:
                    out.append(
                        Finding(
                            name,
                            None,
                            None,
                            s2,
                            "leader_epoch_not_increasing",
                            f"epoch {e2} at offset {s2} does not follow epoch {e1} at offset {s1}",
                        )
                    )
            return out
        C.decode_offset_checkpoint(data)
    except FormatError as exc:
        return [Finding(name, exc.position, len(data), None, "checkpoint_invalid", exc.message)]
    return []


def verify_properties(path: str | os.PathLike) -> list[Finding]:
    path = Path(path)
    data = _read_bytes(path)
    try:
        if path.name == PARTITION_METADATA:
            P.decode_partition_metadata(data)
        else:
            P.decode_meta_properties(data)
    except FormatError as exc:
        return [Finding(str(path), exc.position, len(data), None, "metadata_invalid", exc.message)]
    return []


# ---------------------------------------------------------------- partitions and log dirs


def segment_files(partition_dir: Path) -> list[Path]:
    return sorted(
        (p for p in partition_dir.iterdir() if p.name.endswith(LOG_SUFFIX) and p.is_file()),
        key=lambda p: (offset_from_file_name(p) is None, offset_from_file_name(p) or 0, p.name),
    )


def verify_partition(
    partition_dir: str | os.PathLike,
    *,
    deep: bool = True,
    on_file: Callable[[FileResult], None] | None = None,
) -> Iterator[FileResult]:
    """Every file of one partition directory, segment by segment, then the partition-level checks."""
    pdir = Path(partition_dir)
    logs = segment_files(pdir)
    prev: SegmentReport | None = None
    damaged_before: str | None = None
    epoch_starts: list[tuple[int, int]] = []
    for n, log in enumerate(logs):
        active = n == len(logs) - 1
        seg = verify_segment(log, deep=deep)
        fr = FileResult(str(log), "log", seg.size, seg.findings, seg)
        if prev is not None and seg.first_offset is not None and prev.last_offset is not None:
            if seg.first_offset <= prev.last_offset:
                seg.findings.append(
                    Finding(
                        str(log),
                        0,
                        None,
                        seg.first_offset,
                        "segment_overlap",
                        f"first offset {seg.first_offset} is not above the previous segment's "
                        f"last offset {prev.last_offset} ({Path(prev.file).name})",
                    )
                )
        if (
            seg.base_offset is not None
            and prev is not None
            and prev.last_offset is not None
            and seg.base_offset <= prev.last_offset
        ):
            seg.findings.append(
                Finding(
                    str(log),
                    None,
                    None,
                    seg.base_offset,
                    "segment_overlap",
                    f"segment base offset {seg.base_offset} is not above the previous segment's "
                    f"last offset {prev.last_offset}",
                )
            )
        if prev is not None and prev.valid_end < prev.size:
            damaged_before = Path(prev.file).name
        if damaged_before is not None and seg.batches:
            # Kafka's recovery deletes EVERY segment after the first truncated one, not only
            # the next (LogLoader.recoverLog): name each, as recover --all drops each
            seg.findings.append(
                Finding(
                    str(log),
                    0,
                    seg.size,
                    seg.first_offset,
                    "after_damaged_segment",
                    f"this segment follows the damaged {damaged_before}: Kafka's recovery deletes "
                    "every segment after a truncated one",
                    WARNING,
                )
            )
        for epoch, start in seg.epoch_starts:
            if not epoch_starts or epoch_starts[-1][0] != epoch:
                epoch_starts.append((epoch, start))
        if seg.offset_gaps:
            seg.findings += _offset_gap_findings(pdir, str(log), seg.offset_gaps)
        yield fr
        yield from verify_segment_indexes(log, seg, active=active)
        # release the layout arrays once the indexes are checked
        seg.positions = seg.last_offsets = seg.running_max_ts = seg.first_offsets = array("q")
        prev = seg
    stems = {p.name[: -len(LOG_SUFFIX)] for p in logs}
    for p in sorted(pdir.iterdir()):
        res = partition_file_result(p, stems)
        if res is None:
            continue
        if p.name == LEADER_EPOCH_CHECKPOINT and not res.findings:
            res.findings = epochs_vs_log(p, epoch_starts)
        yield res


def _cleaned_up_to(pdir: Path) -> int:
    """The partition's cleaner-offset-checkpoint entry in its log dir (-1: none)."""
    from kafkatool.log.log import parse_topic_partition

    tp = parse_topic_partition(pdir.name)
    path = pdir.parent / "cleaner-offset-checkpoint"
    if tp is None or not path.is_file():
        return -1
    try:
        entries = C.decode_offset_checkpoint(_read_bytes(path))
    except (FormatError, OSError):
        return -1
    return entries.get(tp, -1)


def _offset_gap_findings(pdir: Path, name: str, gaps) -> list[Finding]:
    """A batch whose lastOffsetDelta runs past its last record: the log cleaner keeps a cleaned
    batch's offset range (MemoryRecords.filterTo), so the gap is normal up to the partition's
    cleaner-offset-checkpoint; anywhere else producers and the broker write contiguous offsets,
    and a gap means a header rewritten with a valid CRC (the next offsets would be skipped)."""
    cleaned = _cleaned_up_to(pdir)
    out = []
    for pos, end, last_record, last in gaps:
        if last < cleaned:
            continue
        out.append(
            Finding(
                name,
                pos,
                end,
                last,
                "offset_gap",
                f"batch ends at offset {last} but its last record is at {last_record}: {last - last_record} "
                "offsets skipped outside the range the log cleaner has processed",
                WARNING,
            )
        )
    return out


def verify_index_file(path: Path, kind: str, seg: SegmentReport | None, *, active: bool) -> list[Finding]:
    """An ``index``, ``timeindex`` or ``txnindex`` file against its segment's report."""
    if kind == "index":
        return verify_offset_index(path, seg, active=active)
    if kind == "timeindex":
        return verify_time_index(path, seg, active=active)
    return verify_txn_index(path, seg)


def verify_segment_indexes(
    log: Path, seg: SegmentReport | None, *, active: bool, present: set[str] | None = None
) -> Iterator[FileResult]:
    """The ``.index``, ``.timeindex`` and ``.txnindex`` of segment ``log``, checked against
    its report (``present``: the suffixes known to exist, to spare a stat per file)."""
    stem = log.name[: -len(LOG_SUFFIX)]
    for suffix, kind in (
        (INDEX_SUFFIX, "index"),
        (TIME_INDEX_SUFFIX, "timeindex"),
        (TXN_INDEX_SUFFIX, "txnindex"),
    ):
        ipath = log.with_name(stem + suffix)
        if not (suffix in present if present is not None else ipath.exists()):
            if suffix == INDEX_SUFFIX and seg is not None and seg.batches:
                missing = Finding(
                    str(ipath),
                    None,
                    None,
                    None,
                    "index_missing",
                    "the segment has no offset index (Kafka rebuilds it by recovering the segment)",
                    WARNING,
                )
                yield FileResult(str(ipath), "index", 0, [missing])
            continue
        yield FileResult(
            str(ipath), kind, ipath.stat().st_size, verify_index_file(ipath, kind, seg, active=active)
        )


def partition_file_result(p: Path, segment_stems: set[str]) -> FileResult | None:
    """The check of one non-segment file of a partition dir (orphan indexes, snapshots, the
    leader-epoch checkpoint's structure, partition.metadata, leftovers of interrupted
    operations); None for files with nothing to check (segments and their indexes)."""
    n = p.name
    if p.is_dir():
        return None
    odd = non_regular_reason(p)
    if odd is not None:
        special = Finding(
            str(p),
            None,
            None,
            offset_from_file_name(p),
            "not_regular_file",
            f"{odd}, not a regular file: not read (Kafka's loader ignores it)",
            WARNING,
        )
        return FileResult(str(p), "special", 0, [special])
    if (
        n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
        and n.split(".", 1)[0] not in segment_stems
    ):
        orphan = Finding(
            str(p),
            None,
            None,
            None,
            "orphan_index",
            "index file without its .log (Kafka deletes it)",
            WARNING,
        )
        return FileResult(str(p), "index", p.stat().st_size, [orphan])
    if n.endswith(SNAPSHOT_SUFFIX):
        return FileResult(str(p), "snapshot", p.stat().st_size, verify_snapshot(p))
    if n == LEADER_EPOCH_CHECKPOINT:
        return FileResult(str(p), "checkpoint", p.stat().st_size, verify_checkpoint(p))
    if n == PARTITION_METADATA:
        return FileResult(str(p), "properties", p.stat().st_size, verify_properties(p))
    if n.endswith(INTERRUPTED_SUFFIXES):
        leftover = Finding(
            str(p),
            None,
            None,
            offset_from_file_name(p),
            "interrupted_operation",
            f"leftover {n.rsplit('.', 1)[1]} file from an interrupted deletion, cleaning or swap "
            "(Kafka completes or rolls it back at start-up)",
            WARNING,
        )
        return FileResult(str(p), "leftover", p.stat().st_size, [leftover])
    return None


_SPECIAL_DIR_MEANING = {
    "delete": "partition directory scheduled for deletion",
    "future": "replica being moved here by alter-log-dirs (a -future copy)",
    "stray": "stray replica: not in the cluster metadata (kept, not deleted, by KRaft brokers)",
}


def log_dir_entry_result(p: Path) -> FileResult | None:
    """The finding for a subdirectory of a log dir that is not a partition dir
    (``-delete``/``-future``/``-stray`` dirs, unknown names); None for partition dirs
    and for what Kafka itself ignores."""
    if not p.is_dir() or p.name in IGNORED_DIRS:
        return None
    special = SPECIAL_DIR_RE.match(p.name)
    if special:
        kind = special.group("kind")
        note = Finding(str(p), None, None, None, f"{kind}_dir", _SPECIAL_DIR_MEANING[kind], INFO)
        return FileResult(str(p), "dir", 0, [note])
    if PARTITION_DIR_RE.match(p.name) or p.name.startswith("."):
        return None
    unknown = Finding(
        str(p), None, None, None, "unknown_dir", "directory name is not <topic>-<partition>", WARNING
    )
    return FileResult(str(p), "dir", 0, [unknown])


def epochs_vs_log(path: Path, epoch_starts: list[tuple[int, int]]) -> list[Finding]:
    """Each leader epoch seen in the batches should start where the checkpoint says."""
    entries = C.decode_leader_epoch_checkpoint(_read_bytes(path))
    if not entries or not epoch_starts:
        return []
    cached = dict(entries)
    out = []
    low = entries[0][1]
    for epoch, start in epoch_starts:
        if start < low:
            continue  # below the cache's first entry: truncated from the start, nothing to compare
        if epoch not in cached:
            out.append(
                Finding(
                    str(path),
                    None,
                    None,
                    start,
                    "leader_epoch_missing",
                    f"batches of leader epoch {epoch} start at offset {start} but the checkpoint has no "
                    "entry for that epoch",
                    WARNING,
                )
            )
        elif start < cached[epoch]:
            # Batches of an epoch before the point the checkpoint says it began. (Later is
            # normal: compaction and retention remove an epoch's first batches.)
            out.append(
                Finding(
                    str(path),
                    None,
                    None,
                    start,
                    "leader_epoch_mismatch",
                    f"epoch {epoch} starts at offset {start} in the log, at {cached[epoch]} in the "
                    "checkpoint",
                    WARNING,
                )
            )
    return out


def verify_log_dir(log_dir: str | os.PathLike, *, deep: bool = True) -> Iterator[FileResult]:
    root = Path(log_dir)
    for name in (META_PROPERTIES,):
        p = root / name
        if p.exists():
            yield FileResult(str(p), "properties", p.stat().st_size, verify_properties(p))
    checkpoints = [
        FileResult(str(root / n), "checkpoint", (root / n).stat().st_size, verify_checkpoint(root / n))
        for n in OFFSET_CHECKPOINTS
        if (root / n).exists()
    ]
    log_ends: dict[tuple[str, int], int] = {}
    for p in sorted(root.iterdir()):
        res = log_dir_entry_result(p)
        if res is not None:
            yield res
        elif p.is_dir() and p.name not in IGNORED_DIRS and PARTITION_DIR_RE.match(p.name):
            m = PARTITION_DIR_RE.match(p.name)
            tp = (m.group("topic"), int(m.group("partition")))
            for fr in verify_partition(p, deep=deep):
                seg = fr.segment
                if fr.kind == "log" and seg is not None:
                    end = seg.last_offset + 1 if seg.last_offset is not None else seg.base_offset
                    if end is not None:
                        log_ends[tp] = max(log_ends.get(tp, 0), end)
                yield fr
    # checkpoints last: their offsets are checked against the partitions' log ends
    for res in checkpoints:
        if not res.findings:
            res.findings = checkpoint_vs_log_ends(Path(res.file), log_ends)
        yield res


def checkpoint_vs_log_ends(path: Path, log_ends: dict[tuple[str, int], int]) -> list[Finding]:
    """Entries of an offset checkpoint beyond their partition's log end (after a cut by
    recovery, say): Kafka clamps them to the log end at start-up, so a warning."""
    out = []
    for tp, offset in sorted(C.decode_offset_checkpoint(_read_bytes(path)).items()):
        end = log_ends.get(tp)
        if end is not None and offset > end:
            out.append(
                Finding(
                    str(path),
                    None,
                    None,
                    offset,
                    "checkpoint_past_log_end",
                    f"{tp[0]}-{tp[1]}: {offset} is beyond the partition's log end offset {end} "
                    "(Kafka lowers it to the log end at start-up)",
                    WARNING,
                )
            )
    return out


def classify(path: Path) -> str:
    """What kind of thing a command-line path is: logdir, partition, or a file kind."""
    if path.is_dir():
        # LogManager's rule, plus one leniency of a read-only tool: a folder of
        # segments (a backup, a copied partition) is read whatever its name
        if any(p.name.endswith(LOG_SUFFIX) for p in path.iterdir()):
            return "partition"
        log_dir, parts = resolve_path(path)  # NotKafkaDataError for anything else
        return "logdir" if log_dir == path.resolve() else "partition"
    n = path.name
    if n.endswith(LOG_SUFFIX):
        return "log"
    if n.endswith(INDEX_SUFFIX):
        return "index"
    if n.endswith(TIME_INDEX_SUFFIX):
        return "timeindex"
    if n.endswith(TXN_INDEX_SUFFIX):
        return "txnindex"
    if n.endswith(SNAPSHOT_SUFFIX):
        return "snapshot"
    if n in OFFSET_CHECKPOINTS or n == LEADER_EPOCH_CHECKPOINT:
        return "checkpoint"
    if n in (META_PROPERTIES, PARTITION_METADATA):
        return "properties"
    return "unknown"


def verify_path(path: str | os.PathLike, *, deep: bool = True) -> Iterator[FileResult]:
    """A log dir, a partition dir or one file, whatever ``path`` is."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    if not p.is_dir():
        odd = non_regular_reason(p)
        if odd is not None:
            raise NotRegularFileError(errno.EINVAL, f"{odd}, not a regular file: refused", str(p))
    kind = classify(p)
    if kind == "logdir":
        yield from verify_log_dir(p, deep=deep)
    elif kind == "partition":
        yield from verify_partition(p, deep=deep)
    elif kind == "log":
        seg = verify_segment(p, deep=deep)
        yield FileResult(str(p), "log", seg.size, seg.findings, seg)
    elif kind in ("index", "timeindex", "txnindex"):
        sibling = p.with_name(p.name.split(".", 1)[0] + LOG_SUFFIX)
        seg = verify_segment(sibling, deep=False) if sibling.exists() else None
        active = seg is not None and sibling == segment_files(p.parent)[-1]
        yield FileResult(str(p), kind, p.stat().st_size, verify_index_file(p, kind, seg, active=active))
    elif kind == "snapshot":
        yield FileResult(str(p), kind, p.stat().st_size, verify_snapshot(p))
    elif kind == "checkpoint":
        yield FileResult(str(p), kind, p.stat().st_size, verify_checkpoint(p))
    elif kind == "properties":
        yield FileResult(str(p), kind, p.stat().st_size, verify_properties(p))
    else:
        raise FormatError(f"{p}: not a Kafka log file, partition directory or log directory")


def total_log_bytes(paths: list[Path]) -> int:
    """Bytes of .log data under ``paths`` (for progress bars)."""
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            for root, _dirs, files in os.walk(p):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(LOG_SUFFIX))
    return total
