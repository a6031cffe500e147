"""Dumping Kafka files: what ``kafka-dump-log.sh`` prints, as structured events.

Every function yields dict events (``{"type": "batch", ...}`` with Kafka's
field names); :func:`kafka_line` renders an event exactly as Kafka's
DumpLogSegments prints it, so scripts that grep its output keep working.
Problems found on the way (index mismatches, non-consecutive offsets, invalid
trailing bytes) are events too, of type ``problem``.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkatool.forensics import DEFAULT_MAX_MESSAGE_SIZE, INT32_MAX
from kafkatool.formats import checkpoint as C
from kafkatool.formats import index as I
from kafkatool.formats import java_utf8
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as S
from kafkatool.formats.errors import FormatError
from kafkatool.log.file_records import (
    FileRecords,
    NotRegularFileError,
    non_regular_reason,
    offset_from_file_name,
    read_regular,
)

DECODERS = ("utf8", "hex", "base64", "json")
_KRAFT_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
TEXT_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "leader-epoch-checkpoint",
)


def decode_bytes(data: bytes | None, decoder: str) -> str | None:
    """Render key/value bytes; None stays None."""
    if data is None:
        return None
    if decoder == "utf8":
        return java_utf8.decode(data)  # DumpLogSegments' StringDecoder: new String(bytes, UTF_8)
    if decoder == "hex":
        return data.hex()
    if decoder == "base64":
        return base64.b64encode(data).decode("ascii")
    if decoder == "json":
        try:
            return json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            return java_utf8.decode(data)
    raise ValueError(f"unknown decoder {decoder!r} (choose from {', '.join(DECODERS)})")


@dataclass
class DumpOptions:
    deep_iteration: bool = False
    print_data_log: bool = False
    key_decoder: str = "utf8"
    value_decoder: str = "utf8"
    data_decoder: str | None = None  # "offsets", "transaction-log", "cluster-metadata"
    skip_record_metadata: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    index_sanity_check: bool = False
    verify_index_only: bool = False
    # forensic filters
    offset_min: int | None = None
    offset_max: int | None = None
    key: bytes | None = None
    producer_id: int | None = None
    structured: bool = False  # --json: decoded internal-topic records as objects, not Kafka's strings

    @property
    def filtering_records(self) -> bool:
        return self.key is not None


def dump_file(path: str | os.PathLike, opts: DumpOptions) -> Iterator[dict]:
    """Events for one file, dispatched on its suffix as Kafka's tool does."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    if p.is_dir():
        raise FormatError(f"{p} is a directory: name the files to dump (e.g. {p}/*.log)")
    odd = non_regular_reason(p)
    if odd is not None:
        raise NotRegularFileError(errno.EINVAL, f"{odd}, not a regular file: refused", str(p))
    name = p.name
    yield {"type": "file", "file": str(p)}
    if name in TEXT_CHECKPOINTS:
        yield from _dump_text_checkpoint(p)
        return
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in (".log", ".checkpoint"):
        yield from dump_log(p, opts)
    elif suffix == ".index":
        yield from dump_index(p, opts)
    elif suffix == ".timeindex":
        yield from dump_time_index(p, opts)
    elif suffix == ".snapshot":
        yield from dump_snapshot(p)
    elif suffix == ".txnindex":
        yield from dump_txn_index(p)
    else:
        yield {"type": "ignored", "file": str(p), "message": f"Ignoring unknown file {p}"}


# ---------------------------------------------------------------- .log


def batch_event(batch: R.Batch, file: str) -> dict:
    if batch.magic < 2:
        try:  # a compressed wrapper reveals its first offset and count only when decompressed
            base, count = batch.base_offset, batch.count
        except FormatError:
            base = count = None
    else:
        base, count = batch.base_offset, batch.records_count
    ev = {
        "type": "batch",
        "file": file,
        "baseOffset": base,
        "lastOffset": batch.last_offset,
        "count": count,
        "position": batch.position,
        "size": batch.size,
        "magic": batch.magic,
        "compresscodec": batch.codec_name,
        "crc": batch.crc,
        "isvalid": batch.is_valid(),
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "timestampType": R.TIMESTAMP_TYPE_NAMES[batch.timestamp_type],
        "maxTimestamp": batch.max_timestamp,
    }
    return ev


def _record_event(batch: R.Batch, rec: R.Record, opts: DumpOptions, file: str) -> dict:
    ev = {
        "type": "record",
        "file": file,
        "offset": rec.offset,
        "timestampType": R.TIMESTAMP_TYPE_NAMES[batch.timestamp_type],
        "timestamp": rec.timestamp,
        "keySize": rec.key_size,
        "valueSize": rec.value_size,
    }
    if batch.magic >= 2:
        ev["sequence"] = rec.sequence
        # Kafka prints RecordHeader.key, Java's String of the bytes (U+FFFD for what is not
        # UTF-8); a key that is not UTF-8 also gets its bytes (hex), which the String loses
        keys = [k for k, _ in rec.headers]
        ev["headerKeys"] = [R.kafka_header_key(k) for k in keys]
        if ev["headerKeys"] != keys:
            ev["headerKeysHex"] = [R.header_key_bytes(k).hex() for k in keys]
    else:
        ev["isValid"] = rec.is_valid
        ev["crc"] = rec.crc
    if batch.is_control:
        try:
            marker = R.parse_control_record(rec)
            ev["controlType"] = marker.type_name
            ev["controlTypeId"] = marker.type
            if marker.coordinator_epoch is not None:
                ev["coordinatorEpoch"] = marker.coordinator_epoch
            elif marker.type in (R.SNAPSHOT_HEADER, R.SNAPSHOT_FOOTER, R.KRAFT_VERSION, R.KRAFT_VOTERS):
                from kafkatool.formats import internal_topics as T

                ev["controlRecord"] = T.decode_kraft_control_record(marker.type, rec.value)
        except FormatError as exc:
            ev["controlError"] = exc.message
        return ev
    if opts.print_data_log:
        if opts.data_decoder:
            _decode_internal(ev, rec, opts)
        else:
            ev["key"] = decode_bytes(rec.key, opts.key_decoder)
            ev["value"] = decode_bytes(rec.value, opts.value_decoder)
            ev["headers"] = [
                [R.kafka_header_key(k), decode_bytes(v, opts.value_decoder)] for k, v in rec.headers
            ]
    return ev


def _decode_internal(ev: dict, rec: R.Record, opts: DumpOptions) -> None:
    """Decode an internal topic's record: Kafka's strings for the text view (keyText /
    valueText), structured objects under --json (key / value)."""
    from kafkatool.formats import internal_topics as T

    kind = opts.data_decoder
    try:
        if kind == "offsets":
            if opts.structured:
                d = T.offsets_record_dict(rec.key, rec.value)
                if d["key"] is None:
                    ev["keyText"] = f"Unknown record type {d['type']} at offset {rec.offset}, skipping."
                ev["key"], ev["value"] = d["key"], d["value"]
            else:
                ev["keyText"], ev["valueText"] = T.decode_offsets_record(
                    rec.key, rec.value, offset=rec.offset
                )
        elif kind == "transaction-log":
            if opts.structured:
                d = T.transaction_log_record_dict(rec.key, rec.value)
                ev["key"] = {"transactionalId": d["transactional_id"], "version": d["key_version"]}
                ev["value"] = d["value"]
            else:
                ev["keyText"], ev["valueText"] = T.decode_transaction_log_record(rec.key, rec.value)
        elif kind == "cluster-metadata":
            ev["key"] = None
            if opts.structured:
                ev["value"] = T.cluster_metadata_record_dict(rec.value)
            else:
                ev["valueText"] = T.decode_cluster_metadata_record(rec.value)
    except FormatError as exc:
        # Kafka's decoders print the error in place of the record and go on.
        where = f"offset {rec.offset}" if kind != "cluster-metadata" else str(rec.offset)
        text = f"Error at {where}, skipping. {exc.message}"
        ev["decodeError"] = text
        if kind == "cluster-metadata":
            ev["valueText"] = text
        else:
            ev["keyText"], ev["valueText"] = text, None
        ev.setdefault("key", None)
        ev.setdefault("value", None)


def _in_range(opts: DumpOptions, first: int | None, last: int) -> bool:
    if opts.offset_max is not None and first is not None and first > opts.offset_max:
        return False
    return not (opts.offset_min is not None and last < opts.offset_min)


def dump_log(path: Path, opts: DumpOptions) -> Iterator[dict]:
    name = path.name
    file = str(path)
    kraft = _KRAFT_SNAPSHOT.match(name)
    if name.endswith(".log"):
        yield {"type": "log_start", "file": file, "startOffset": offset_from_file_name(path)}
    elif kraft:
        yield {
            "type": "snapshot_start",
            "file": file,
            "endOffset": int(kraft.group(1)),
            "epoch": int(kraft.group(2)),
        }
    deep = opts.deep_iteration or opts.print_data_log or opts.filtering_records
    with FileRecords(path, max_bytes=opts.max_bytes) as fr:
        valid_bytes = 0
        last_offset = -1
        nonconsecutive: list[tuple[int, int]] = []
        try:
            for batch in fr.batches():
                first = batch.base_offset if batch.magic >= 2 else (batch.offset if not batch.codec else None)
                selected = _in_range(opts, first, batch.last_offset) and (
                    opts.producer_id is None or batch.producer_id == opts.producer_id
                )
                if selected and not opts.filtering_records:
                    yield batch_event(batch, file)
                if deep and selected:
                    # with --key, a batch's header line (position, CRC) comes before its first
                    # matching record, so every printed record keeps its batch's facts
                    header_sent = not opts.filtering_records
                    for ev in _dump_records(batch, opts, file, nonconsecutive, last_offset):
                        if not header_sent:
                            yield batch_event(batch, file)
                            header_sent = True
                        yield ev
                    last_offset = _last_record_offset(batch, last_offset)
                valid_bytes += batch.size
        except FormatError as exc:
            yield {
                "type": "problem",
                "kind": exc.kind,
                "file": file,
                "position": exc.position,
                "message": f"{file}: {exc.message} at byte {exc.position}; stopped reading this file",
            }
        trailing = fr.size - valid_bytes
        if nonconsecutive:
            yield {
                "type": "problem",
                "kind": "non_consecutive_offsets",
                "file": file,
                "pairs": nonconsecutive,
            }
        if trailing > 0 and opts.max_bytes == INT32_MAX:
            yield {
                "type": "invalid_bytes",
                "file": file,
                "position": valid_bytes,
                "bytes": trailing,
                "message": f"Found {trailing} invalid bytes at the end of {name}",
            }


def _last_record_offset(batch, last_offset):
    return batch.last_offset if batch.magic >= 2 and batch.records_count else last_offset


def _dump_records(batch, opts, file, nonconsecutive, last_offset) -> Iterator[dict]:
    try:
        recs = batch.records()
        prev = last_offset
        for rec in recs:
            if prev != -1 and rec.offset != prev + 1:
                nonconsecutive.append((prev, rec.offset))
            prev = rec.offset
            if opts.offset_min is not None and rec.offset < opts.offset_min:
                continue
            if opts.offset_max is not None and rec.offset > opts.offset_max:
                continue
            if opts.key is not None and rec.key != opts.key:
                continue
            yield _record_event(batch, rec, opts, file)
    except FormatError as exc:
        first = batch.base_offset if batch.magic >= 2 else batch.last_offset
        # inside a compressed batch a position is one in the decompressed records, never a
        # file position: say which it is
        where = (
            exc.message
            if exc.position is None
            else f"{exc.message} (at byte {exc.position} of the decompressed records)"
            if batch.codec
            else f"{exc.message} (at file byte {exc.position})"
        )
        yield {
            "type": "problem",
            "kind": exc.kind,
            "file": file,
            "position": batch.position,
            "message": f"{file}: records of the batch at byte {batch.position} (base offset {first}) "
            f"cannot be decoded: {where}",
        }


# ---------------------------------------------------------------- indexes


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name.split(".", 1)[0] + suffix)


def _sanity_error(path: Path, message: str) -> dict:
    return {"type": "problem", "kind": "corrupt_index", "file": str(path), "message": message}


def dump_index(path: Path, opts: DumpOptions) -> Iterator[dict]:
    base = offset_from_file_name(path)
    if base is None:
        raise FormatError(f"{path}: index file name does not start with a base offset")
    data = read_regular(path)
    n = len(data) // I.OFFSET_ENTRY_SIZE
    file = str(path)
    if n == 0:
        yield {"type": "empty", "file": file, "message": f"{path} is empty."}
        return
    raw = I.decode_offset_entries(data)
    if opts.index_sanity_check:
        last = base + raw[-1][0]
        if last < base:
            yield _sanity_error(
                path,
                f"Corrupt index found, index file ({path.resolve()}) has non-zero size but the "
                f"last offset is {last} which is less than the base offset {base}.",
            )
        elif len(data) % I.OFFSET_ENTRY_SIZE:
            yield _sanity_error(
                path,
                f"Index file {path.resolve()} is corrupt, found {len(data)} bytes which is "
                f"neither positive nor a multiple of {I.OFFSET_ENTRY_SIZE}.",
            )
        else:
            yield {"type": "sanity", "file": file, "message": f"{path} passed sanity check."}
        return
    log = _sibling(path, ".log")
    fr = FileRecords(log) if log.exists() else None
    mismatches = []
    try:
        for i, (rel, position) in enumerate(raw):
            offset = base + rel
            if offset == base and i > 0:
                break
            if fr is not None:
                log_offset = -1
                try:
                    batch = R.read_batch(fr.buf[: min(fr.size, position + opts.max_message_size)], position)
                    if batch is not None:
                        log_offset = batch.last_offset
                except FormatError:
                    pass
                if log_offset != offset:
                    mismatches.append((offset, log_offset))
            if not opts.verify_index_only:
                yield {"type": "index_entry", "file": file, "offset": offset, "position": position}
    finally:
        if fr is not None:
            fr.close()
    if fr is None:
        yield {
            "type": "problem",
            "kind": "log_missing",
            "file": file,
            "message": f"{log} not found: index entries not checked against the log",
        }
    if mismatches:
        yield {
            "type": "problem",
            "kind": "index_mismatch",
            "file": str(path.resolve()),
            "mismatches": mismatches,
        }


def dump_time_index(path: Path, opts: DumpOptions) -> Iterator[dict]:
    base = offset_from_file_name(path)
    if base is None:
        raise FormatError(f"{path}: time index file name does not start with a base offset")
    data = read_regular(path)
    file = str(path)
    raw = I.decode_time_entries(data)
    if opts.index_sanity_check:
        if raw and raw[-1][0] < raw[0][0]:
            yield _sanity_error(
                path,
                f"Corrupt time index found, time index file ({path.resolve()}) has non-zero "
                f"size but the last timestamp is {raw[-1][0]} which is less than the first "
                f"timestamp {raw[0][0]}",
            )
        elif raw and base + raw[-1][1] < base:
            yield _sanity_error(
                path,
                f"Corrupt time index found, time index file ({path.resolve()}) has non-zero "
                f"size but the last offset is {base + raw[-1][1]} which is less than the first "
                f"offset {base}",
            )
        elif len(data) % I.TIME_ENTRY_SIZE:
            yield _sanity_error(
                path,
                f"Time index file {path.resolve()} is corrupt, found {len(data)} bytes which "
                f"is neither positive nor a multiple of {I.TIME_ENTRY_SIZE}.",
            )
        else:
            yield {"type": "sanity", "file": file, "message": f"{path} passed sanity check."}
        return
    log = _sibling(path, ".log")
    idx = _sibling(path, ".index")
    fr = FileRecords(log) if log.exists() else None
    offset_entries = I.scan_offset_index(read_regular(idx), base).entries if idx.exists() else []
    mismatch, out_of_order, not_found = [], [], []
    prev_ts = R.NO_TIMESTAMP
    try:
        for i, (ts, rel) in enumerate(raw):
            offset = base + rel
            if offset == base and i > 0:
                break
            if fr is not None:
                start = I.lookup_offset(offset_entries, offset, base).position
                found = None
                try:
                    for batch in R.iter_batches(fr.buf, start):
                        if batch.last_offset >= offset:
                            found = batch
                            break
                except FormatError:
                    found = None
                if found is None:
                    not_found.append((offset, -1))
                elif found.last_offset != offset:
                    not_found.append((offset, found.last_offset))
                else:
                    try:
                        mx = max((r.timestamp for r in found.records()), default=R.NO_TIMESTAMP)
                    except FormatError:
                        mx = R.NO_TIMESTAMP
                    if mx != ts:
                        mismatch.append((ts, mx))
                    if prev_ts >= ts:
                        out_of_order.append((ts, prev_ts))
            if not opts.verify_index_only:
                yield {"type": "timeindex_entry", "file": file, "timestamp": ts, "offset": offset}
            prev_ts = ts
    finally:
        if fr is not None:
            fr.close()
    resolved = str(path.resolve())
    if mismatch:
        yield {"type": "problem", "kind": "timeindex_mismatch", "file": resolved, "mismatches": mismatch}
    if out_of_order:
        yield {"type": "problem", "kind": "timeindex_out_of_order", "file": resolved, "pairs": out_of_order}
    if not_found:
        yield {"type": "problem", "kind": "timeindex_offset_not_found", "file": resolved, "pairs": not_found}


def dump_txn_index(path: Path) -> Iterator[dict]:
    try:
        entries = I.decode_txn_entries(read_regular(path))
    except FormatError as exc:
        raise exc.shifted(0).__class__(f"{path}: {exc.message}", exc.position) from None
    for e in entries:
        yield {
            "type": "txn_entry",
            "file": str(path),
            "version": e.version,
            "producerId": e.producer_id,
            "firstOffset": e.first_offset,
            "lastOffset": e.last_offset,
            "lastStableOffset": e.last_stable_offset,
        }


def dump_snapshot(path: Path) -> Iterator[dict]:
    snap = S.read_snapshot(read_regular(path))
    if snap.error is not None:
        # Kafka prints the CorruptSnapshotException message and no entries.
        yield {
            "type": "problem",
            "kind": "snapshot_" + snap.error.kind,
            "file": str(path),
            "position": snap.error.position,
            "message": f"{path}: {snap.error}",
        }
    for e in snap.entries:
        ev = {
            "type": "snapshot_entry",
            "file": str(path),
            "producerId": e.producer_id,
            "producerEpoch": e.producer_epoch,
            "coordinatorEpoch": e.coordinator_epoch,
            "currentTxnFirstOffset": None if e.current_txn_first_offset < 0 else e.current_txn_first_offset,
            "lastTimestamp": e.timestamp,
        }
        if e.has_batch_metadata:
            ev.update(
                firstSequence=e.first_sequence,
                lastSequence=e.last_sequence,
                lastOffset=e.last_offset,
                offsetDelta=e.offset_delta,
                timestamp=e.timestamp,
            )
        ev["crcValid"] = snap.crc_ok
        yield ev


def _dump_text_checkpoint(path: Path) -> Iterator[dict]:
    data = read_regular(path)
    try:
        if path.name == "leader-epoch-checkpoint":
            for epoch, start in C.decode_leader_epoch_checkpoint(data):
                yield {"type": "epoch_entry", "file": str(path), "epoch": epoch, "startOffset": start}
        else:
            for topic, partition, offset in C.decode_offset_checkpoint_entries(data):
                yield {
                    "type": "checkpoint_entry",
                    "file": str(path),
                    "topic": topic,
                    "partition": partition,
                    "offset": offset,
                }
    except FormatError as exc:
        yield {
            "type": "problem",
            "kind": "checkpoint_invalid",
            "file": str(path),
            "position": exc.position,
            "message": f"{path}: {exc}",
        }


# ---------------------------------------------------------------- Kafka's text lines


def _optional_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def kafka_line(ev: dict, opts: DumpOptions) -> str | None:
    """The stdout line kafka-dump-log.sh prints for an event (None: nothing on stdout)."""
    t = ev["type"]
    if t == "file":
        return f"Dumping {ev['file']}"
    if t == "log_start":
        return f"Log starting offset: {ev['startOffset']}"
    if t == "snapshot_start":
        return f"Snapshot end offset: {ev['endOffset']}, epoch: {ev['epoch']}"
    if t == "batch":
        tail = (
            f" position: {ev['position']} {ev['timestampType']}: {ev['maxTimestamp']} size: {ev['size']} "
            f"magic: {ev['magic']} compresscodec: {ev['compresscodec']} crc: {ev['crc']} "
            f"isvalid: {'true' if ev['isvalid'] else 'false'}"
        )
        if ev["magic"] >= 2:
            return (
                f"baseOffset: {ev['baseOffset']} lastOffset: {ev['lastOffset']} count: {ev['count']} "
                f"baseSequence: {ev['baseSequence']} lastSequence: {ev['lastSequence']} "
                f"producerId: {ev['producerId']} producerEpoch: {ev['producerEpoch']} "
                f"partitionLeaderEpoch: {ev['partitionLeaderEpoch']} "
                f"isTransactional: {_b(ev['isTransactional'])} isControl: {_b(ev['isControl'])} "
                f"deleteHorizonMs: {_optional_long(ev['deleteHorizonMs'])}" + tail
            )
        return f"offset: {ev['lastOffset']}" + tail
    if t == "record":
        return _record_line(ev, opts)
    if t == "index_entry":
        return f"offset: {ev['offset']} position: {ev['position']}"
    if t == "timeindex_entry":
        return f"timestamp: {ev['timestamp']} offset: {ev['offset']}"
    if t == "txn_entry":
        return (
            f"version: {ev['version']} producerId: {ev['producerId']} firstOffset: {ev['firstOffset']} "
            f"lastOffset: {ev['lastOffset']} lastStableOffset: {ev['lastStableOffset']}"
        )
    if t == "snapshot_entry":
        line = (
            f"producerId: {ev['producerId']} producerEpoch: {ev['producerEpoch']} "
            f"coordinatorEpoch: {ev['coordinatorEpoch']} "
            f"currentTxnFirstOffset: {_optional_long(ev['currentTxnFirstOffset'])} "
            f"lastTimestamp: {ev['lastTimestamp']} "
        )
        if "firstSequence" in ev:
            line += (
                f"firstSequence: {ev['firstSequence']} lastSequence: {ev['lastSequence']} "
                f"lastOffset: {ev['lastOffset']} offsetDelta: {ev['offsetDelta']} timestamp: {ev['timestamp']}"
            )
        return line
    if t == "checkpoint_entry":
        return f"topic: {ev['topic']} partition: {ev['partition']} offset: {ev['offset']}"
    if t == "epoch_entry":
        return f"epoch: {ev['epoch']} startOffset: {ev['startOffset']}"
    if t in ("empty", "sanity", "invalid_bytes"):
        return ev["message"]
    return None


def _b(v: bool) -> str:
    return "true" if v else "false"


def _record_line(ev: dict, opts: DumpOptions) -> str:
    parts = []
    prefix = "| "
    if not opts.skip_record_metadata:
        parts.append(
            f"{prefix}offset: {ev['offset']} {ev['timestampType']}: {ev['timestamp']} "
            f"keySize: {ev['keySize']} valueSize: {ev['valueSize']}"
        )
        prefix = " "
        if "sequence" in ev:
            parts.append(f" sequence: {ev['sequence']} headerKeys: [{','.join(ev['headerKeys'])}]")
        if "isValid" in ev:
            parts.append(f" isValid: {_b(ev['isValid'])} crc: {ev['crc']}}}")
        if "controlType" in ev:
            if "coordinatorEpoch" in ev:
                parts.append(f" endTxnMarker: {ev['controlType']} coordinatorEpoch: {ev['coordinatorEpoch']}")
            elif ev.get("controlRecord"):
                parts.append(f" {ev['controlRecord']}")
            else:
                parts.append(f" controlType: {ev['controlType']}({ev['controlTypeId']})")
    if opts.print_data_log and "controlType" not in ev and "controlError" not in ev:
        key = ev.get("keyText") if opts.data_decoder else ev.get("key")
        value = ev.get("valueText") if opts.data_decoder else ev.get("value")
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if value is not None:
            parts.append(f" payload: {value}")
    return "".join(parts)


def kafka_stderr_lines(ev: dict) -> list[str]:
    """What Kafka's tool prints on stderr for a problem event."""
    t = ev["type"]
    if t == "ignored":
        return [ev["message"]]
    if t != "problem":
        return []
    kind = ev["kind"]
    if kind == "index_mismatch":
        return [f"Mismatches in :{ev['file']}"] + [
            f"  Index offset: {a}, log offset: {b}" for a, b in reversed(ev["mismatches"])
        ]
    if kind == "timeindex_mismatch":
        return [f"Found timestamp mismatch in :{ev['file']}"] + [
            f"  Index timestamp: {a}, log timestamp: {b}" for a, b in ev["mismatches"]
        ]
    if kind == "timeindex_out_of_order":
        return [f"Found out of order timestamp in :{ev['file']}"] + [
            f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in ev["pairs"]
        ]
    if kind == "timeindex_offset_not_found":
        return ["The following indexed offsets are not found in the log."] + [
            f"Indexed offset: {a}, found log offset: {b}" for a, b in ev["pairs"]
        ]
    if kind == "non_consecutive_offsets":
        return [f"Non-consecutive offsets in {Path(ev['file']).resolve()}"] + [
            f"  {a} is followed by {b}" for a, b in reversed(ev["pairs"])
        ]
    return [ev["message"]]


def iter_dump(
    paths: list[Path], opts: DumpOptions, on_error: Callable[[Exception, Path], None]
) -> Iterator[dict]:
    for p in paths:
        try:
            yield from dump_file(p, opts)
        except (FormatError, OSError) as exc:
            on_error(exc, p)
