"""The executor side of the fleet scan: list a log dir, verify one segment.

Pure Python on top of :mod:`kafkatool.forensics.verify` (no pyspark here), so each
step is testable without Spark and runs the very checks ``kafkatool verify``
runs.  Work items and results are plain tuples/dicts that pickle small.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.forensics import verify as V
from kafkatool.formats import checkpoint as C
from kafkatool.formats import properties as P
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.log import dynamic_log_config as dlc
from kafkatool.log import topic_settings as ts
from kafkatool.log.file_records import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileRecords,
)

# One batch of a replica, as compared across replicas: base offset, last offset,
# partition leader epoch, CRC (v2: CRC-32C of attributes..end; v0/v1: the wrapper's CRC-32).
BATCH_DIGEST = struct.Struct(">qqiI")
# Batches are grouped into windows of this many offsets so that replica comparison
# of one huge partition is spread over many tasks.
DEFAULT_WINDOW = 1_000_000


def finding_dict(f: V.Finding) -> dict:
    return {
        "file": f.file,
        "position": f.position,
        "end": f.end,
        "offset": f.offset,
        "kind": f.kind,
        "severity": f.severity,
        "message": f.message,
    }


@dataclass
class Replica:
    """Where a partition copy lives."""

    broker: int | None
    log_dir: str
    topic: str
    partition: int

    @property
    def key(self) -> tuple:
        return (self.topic, self.partition, self.broker, self.log_dir)


@dataclass
class SegmentTask:
    replica: Replica
    path: str
    size: int
    active: bool
    indexes: tuple[str, ...]  # which of index/timeindex/txnindex exist


@dataclass
class PartitionInfo:
    """Per partition dir facts found while listing (small; travels to the aggregation)."""

    replica: Replica
    findings: list[dict] = field(default_factory=list)
    epoch_checkpoint: list[tuple[int, int]] | None = None  # entries, if readable
    epoch_checkpoint_file: str | None = None
    cleaner_offset: int | None = None  # from the log dir's cleaner-offset-checkpoint (compacted topics)
    #: the topic is compacted: listed by the cleaner-offset-checkpoint, or its cleanup.policy (from the
    #: log dir's metadata: embedded or KRaft; the internal topics by definition) contains compact
    compacted: bool = False


@dataclass
class LogDirListing:
    log_dir: str
    broker: int | None
    meta_broker: int | None
    findings: list[dict]  # log-dir-level findings (meta.properties, checkpoints, stray/unknown dirs)
    partitions: list[PartitionInfo]
    segments: list[SegmentTask]


def read_broker_id(log_dir: Path) -> int | None:
    """``broker.id`` (ZooKeeper mode) or ``node.id`` (KRaft) from the log dir's meta.properties."""
    p = log_dir / V.META_PROPERTIES
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return P.decode_meta_properties(data).node_id
    except FormatError:
        return None


def list_log_dir(log_dir: str, broker_override: int | None = None) -> LogDirListing:
    """Walk one log dir: its own files and every partition dir, without reading segments."""
    root = Path(log_dir)
    if not root.is_dir():
        raise FileNotFoundError(2, "No such log directory", str(root))
    meta_broker = read_broker_id(root)
    broker = broker_override if broker_override is not None else meta_broker
    findings: list[dict] = []
    for name in (V.META_PROPERTIES,):
        p = root / name
        if p.exists():
            findings += [finding_dict(f) for f in V.verify_properties(p)]
    if broker_override is not None and meta_broker is not None and meta_broker != broker_override:
        findings.append(
            finding_dict(
                V.Finding(
                    str(root / V.META_PROPERTIES),
                    None,
                    None,
                    None,
                    "broker_id_overridden",
                    f"meta.properties says broker {meta_broker}, the inventory says {broker_override} "
                    "(the inventory wins)",
                    V.INFO,
                )
            )
        )
    cleaner: dict[tuple[str, int], int] = {}
    for name in V.OFFSET_CHECKPOINTS:
        p = root / name
        if p.exists():
            found = V.verify_checkpoint(p)
            findings += [finding_dict(f) for f in found]
            if name == C.CLEANER_OFFSET_CHECKPOINT and not found:
                cleaner = C.decode_offset_checkpoint(p.read_bytes())
    partitions: list[PartitionInfo] = []
    segments: list[SegmentTask] = []
    layers = dir_config_layers(root, broker)
    findings += stored_config_findings(root, layers)
    compacts = _policy_compacts(root, layers, findings)
    for p in sorted(root.iterdir()):
        res = V.log_dir_entry_result(p)
        if res is not None:
            # the same findings verify reports for stray, -delete, -future and unknown dirs
            findings += [finding_dict(f) for f in res.findings]
            continue
        m = V.PARTITION_DIR_RE.match(p.name)
        if not p.is_dir() or p.name in V.IGNORED_DIRS or m is None:
            continue
        rep = Replica(broker, str(root), m.group("topic"), int(m.group("partition")))
        info, segs = list_partition(p, rep)
        info.cleaner_offset = cleaner.get((rep.topic, rep.partition))
        info.compacted = info.cleaner_offset is not None or compacts(rep.topic)
        partitions.append(info)
        segments += segs
    return LogDirListing(str(root), broker, meta_broker, findings, partitions, segments)


def dir_config_layers(root: Path, broker: int | None) -> list[ts.ConfigLayer]:
    """The log dir's topic-config layers with their dynamic broker configs taken as a broker
    takes them at start-up (log/dynamic_log_config: the rule serve and the offline commands
    follow; an invalid value is left out, a set a broker could not run with is not used):
    ``broker``'s own (the inventory's id, else meta.properties') and the cluster-wide default."""
    layers = ts.dir_layers([root], broker)
    dlc.take_dir_layers(root, layers, broker)
    return layers


def _config_finding(
    where: tuple[str, int | None, int | None], kind: str, severity: str, message: str, topic: str | None
) -> dict:
    """A finding of the log dir's stored configs (``topic``: the one it is about, on the row)."""
    file, offset, position = where
    return {
        "file": file,
        "position": position,
        "end": None,
        "offset": offset,
        "kind": kind,
        "severity": severity,
        "message": message,
        "topic": topic,
    }


def stored_config_findings(root: Path, layers: list[ts.ConfigLayer]) -> list[dict]:
    """What a broker says of the configs the log dir keeps, as findings, each naming the record
    (or file) that stored it as serve's start-up does (ts.StoredRefusal): a topic config value
    it refuses (ts.stored_refusals: it does not start with one; an error), left out of
    ``layers`` so that the topic's other configs still decide whether it is compacted; a topic
    stored with remote.storage.enable=true (ts.stored_remote_storage: an error; serve and a
    KRaft broker log it and serve the topic as a local log, a ZooKeeper-mode broker does not
    start); and the notes of its dynamic broker configs (log/dynamic_log_config: a value left
    out, a set not applied; what serve logs as a warning and runs without)."""
    out = []
    for layer in layers:
        kept_in = layer.kept_in or str(root)
        refused: dict[str, set[str]] = {}
        for r in ts.stored_refusals(layer):
            refused.setdefault(r.topic, set()).add(r.name)
            message = (
                f"{r}; a broker does not start with it (LogManager's topic LogConfig); the scan leaves it out"
            )
            out.append(_refusal_finding(r, "topic_config_refused", message))
        for r in ts.stored_remote_storage(layer):
            message = (
                f"{r}; tiered storage is off: a KRaft broker (and serve) logs it as an error and "
                "serves the topic as a local log, a ZooKeeper-mode broker does not start"
            )
            out.append(_refusal_finding(r, "topic_remote_storage_enabled", message))
        for topic, names in refused.items():
            layer.topics[topic] = {k: v for k, v in layer.topics[topic].items() if k not in names}
        for note in layer.notes:
            config = getattr(note, "config", None)
            per_broker = getattr(note, "per_broker", None)
            where = layer.origins.get((ts.BROKER_ORIGIN, per_broker, config), (kept_in, None, None))
            if not isinstance(note, dlc.StoredNote):
                kind = "stored_configs_unreadable"
            elif config is None:
                kind = "dynamic_configs_not_applied"
            else:
                kind = "dynamic_config_ignored"
            out.append(_config_finding(where, kind, V.WARNING, str(note), None))
    return out


def _refusal_finding(r: ts.StoredRefusal, kind: str, message: str) -> dict:
    return _config_finding((r.file, r.offset, r.position), kind, V.ERROR, message, r.topic)


def _policy_compacts(root: Path, layers, findings: list[dict]):
    """topic -> whether its cleanup.policy, resolved from ``layers``, contains compact (once per
    topic); a set of values that resolves to no LogConfig is a finding, and counts as not
    compacted (the cleaner-offset-checkpoint alone decides)."""
    memo: dict[str, bool] = {}

    def compacts(topic: str) -> bool:
        if topic not in memo:
            try:
                memo[topic] = ts.resolve(topic, layers=layers).config.compact
            except ts.SettingsError as exc:
                memo[topic] = False
                message = f"topic {topic}: stored configs refused: {exc}; a broker does not start with them"
                findings.append(
                    _config_finding((str(root), None, None), "topic_config_refused", V.ERROR, message, topic)
                )
        return memo[topic]

    return compacts


def list_partition(pdir: Path, rep: Replica) -> tuple[PartitionInfo, list[SegmentTask]]:
    """Segment work items of one partition dir, and the checks of its other (small) files,
    as verify_partition does them."""
    info = PartitionInfo(rep)
    logs = V.segment_files(pdir)
    names = {p.name for p in pdir.iterdir()}
    tasks = []
    for n, log in enumerate(logs):
        stem = log.name[: -len(LOG_SUFFIX)]
        idx = tuple(s for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) if stem + s in names)
        tasks.append(SegmentTask(rep, str(log), log.stat().st_size, n == len(logs) - 1, idx))
    stems = {p.name[: -len(LOG_SUFFIX)] for p in logs}
    for p in sorted(pdir.iterdir()):
        res = V.partition_file_result(p, stems)
        if res is None:
            continue
        info.findings.extend(finding_dict(f) for f in res.findings)
        if p.name == V.LEADER_EPOCH_CHECKPOINT and not res.findings:
            # compared with the log's epochs in the aggregation, once every segment is scanned
            info.epoch_checkpoint = C.decode_leader_epoch_checkpoint(p.read_bytes())
            info.epoch_checkpoint_file = str(p)
    return info, tasks


def verify_segment_with_indexes(
    path: str | os.PathLike, *, active: bool, indexes: tuple[str, ...] | None = None, deep: bool = True
) -> tuple[V.SegmentReport, list[V.Finding]]:
    """One segment and its .index/.timeindex/.txnindex, checked exactly as verify_partition
    checks them; returns the report (layout arrays kept) and the index findings."""
    log = Path(path)
    seg = V.verify_segment(log, deep=deep)
    present = set(indexes) if indexes is not None else None
    out = [
        f for res in V.verify_segment_indexes(log, seg, active=active, present=present) for f in res.findings
    ]
    return seg, out


def batch_digests(path: str, seg: V.SegmentReport) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, crc) of every valid batch verify found."""
    out = []
    with FileRecords(path) as fr:
        buf = fr.buf
        for k, pos in enumerate(seg.positions):
            b = R.read_batch(buf, pos)
            epoch = b.partition_leader_epoch if b.magic == 2 else -1
            out.append((seg.first_offsets[k], seg.last_offsets[k], epoch, b.crc & 0xFFFFFFFF))
    return out


def pack_digests(digests) -> bytes:
    return b"".join(BATCH_DIGEST.pack(*d) for d in digests)


def unpack_digests(blob: bytes) -> list[tuple[int, int, int, int]]:
    return list(BATCH_DIGEST.iter_unpack(blob))


def scan_segment(task: SegmentTask, *, deep: bool = True, window: int = DEFAULT_WINDOW) -> tuple[dict, list]:
    """Verify one segment with its indexes: the segment's table row, and its batch digests
    grouped by offset window ``[(window, blob), ...]`` for the replica comparison."""
    try:
        seg, index_findings = verify_segment_with_indexes(
            task.path, active=task.active, indexes=task.indexes, deep=deep
        )
    except OSError as exc:
        row = _row(task, V.SegmentReport(task.path, V.offset_from_file_name(task.path)), [])
        row["findings"] = [
            {
                "file": task.path,
                "position": None,
                "end": None,
                "offset": None,
                "kind": "unreadable",
                "severity": V.ERROR,
                "message": f"cannot read the segment on this executor: {exc.strerror or exc}",
            }
        ]
        row["errors"] = 1
        return row, []
    row = _row(task, seg, index_findings)
    windows: dict[int, list] = {}
    for d in batch_digests(task.path, seg):
        windows.setdefault(d[0] // window, []).append(d)
    return row, [(w, pack_digests(ds)) for w, ds in sorted(windows.items())]


def _row(task: SegmentTask, seg: V.SegmentReport, index_findings: list[V.Finding]) -> dict:
    rep = task.replica
    findings = [finding_dict(f) for f in seg.findings + index_findings]
    st = seg.stats()
    return {
        "broker": rep.broker,
        "log_dir": rep.log_dir,
        "topic": rep.topic,
        "partition": rep.partition,
        "file": task.path,
        "active": task.active,
        "base_offset": st["base_offset"],
        "first_offset": st["first_offset"],
        "last_offset": st["last_offset"],
        "batches": st["batches"],
        "records": st["records"],
        "bytes": st["size"],
        "valid_end": st["valid_end"],
        "codecs": st["codecs"],
        "magics": st["magics"],
        "min_timestamp": st["min_timestamp"],
        "max_timestamp": st["max_timestamp"],
        "producer_ids": st["producer_ids"],
        "leader_epochs": st["leader_epochs"],
        "epoch_starts": [list(e) for e in seg.epoch_starts],
        # offset stretches this copy cannot vouch for: (last good offset, first offset after)
        "damaged": [[before, after] for _s, _e, before, after in seg.damaged],
        "findings": findings,
        "errors": sum(f["severity"] == V.ERROR for f in findings),
        "warnings": sum(f["severity"] == V.WARNING for f in findings),
    }
