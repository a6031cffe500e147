"""Kafka's reassignment JSON formats, read strictly and written byte-identically.

- topics-to-move: ``{"version":1,"topics":[{"topic":"a"}]}``
- reassignment / current / proposed:
  ``{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}``
- the legacy ``/admin/reassign_partitions`` znode: the same without ``log_dirs``
- partition sizes for ``--strategy size`` (see ``parse_sizes``)

Errors name the source, the entry (``partitions[3].replicas``) and, for JSON
syntax errors, the byte position.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkatool.assign.model import TopicPartition, tp_str
from kafkatool.formats.errors import FormatError
from kafkatool.log.topic_settings import topic_name_error

ANY_LOG_DIR = "any"


class ReassignmentFormatError(FormatError):
    kind = "reassignment_json"


@dataclass
class PartitionTarget:
    topic: str
    partition: int
    replicas: list[int]
    log_dirs: list[str] = field(default_factory=list)  # same length as replicas

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def pinned_dirs(self) -> dict[int, str]:
        """broker -> absolute log dir, for the replicas that are not ``any``."""
        return {b: d for b, d in zip(self.replicas, self.log_dirs, strict=True) if d != ANY_LOG_DIR}


def _load(text: str | bytes, source: str) -> object:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReassignmentFormatError(f"{source}: not UTF-8", exc.start) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReassignmentFormatError(
            f"{source}: not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})",
            len(text[: exc.pos].encode("utf-8")),  # a byte position, like every FormatError
        ) from None


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_version(doc: Mapping, source: str) -> None:
    version = doc.get("version", 1)
    if not _is_int(version) or version != 1:
        raise ReassignmentFormatError(f"{source}: not supported version field value {json.dumps(version)}")


def _check_keys(obj: Mapping, allowed: set[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ReassignmentFormatError(
            f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"(expected {', '.join(sorted(allowed))})"
        )


def check_topic_name(topic: object, where: str) -> str:
    if not isinstance(topic, str) or not topic:
        raise ReassignmentFormatError(f"{where}: topic must be a non-empty string, got {json.dumps(topic)}")
    if topic_name_error(topic) is not None:
        raise ReassignmentFormatError(f"{where}: {topic!r} is not a legal Kafka topic name")
    return topic


def parse_topics_to_move(text: str | bytes, source: str = "topics-to-move JSON") -> list[str]:
    doc = _load(text, source)
    if not isinstance(doc, dict):
        raise ReassignmentFormatError(f"{source}: expected a JSON object with a 'topics' list")
    _check_version(doc, source)
    _check_keys(doc, {"version", "topics"}, source)
    topics = doc.get("topics")
    if not isinstance(topics, list) or not topics:
        raise ReassignmentFormatError(f"{source}: 'topics' must be a non-empty list")
    result: list[str] = []
    for i, entry in enumerate(topics):
        where = f"{source}: topics[{i}]"
        if not isinstance(entry, dict):
            raise ReassignmentFormatError(f'{where}: expected an object like {{"topic": "name"}}')
        _check_keys(entry, {"topic"}, where)
        result.append(check_topic_name(entry.get("topic"), where))
    dups = sorted({t for t in result if result.count(t) > 1})
    if dups:
        raise ReassignmentFormatError(
            f"{source}: list of topics to reassign contains duplicate entries: {', '.join(dups)}"
        )
    return result


def parse_reassignment(
    text: str | bytes, source: str = "reassignment JSON", *, allow_log_dirs: bool = True
) -> list[PartitionTarget]:
    """The ``--reassignment-json-file`` format, with every check Kafka makes and a few more."""
    doc = _load(text, source)
    if not isinstance(doc, dict):
        raise ReassignmentFormatError(f"{source}: expected a JSON object with a 'partitions' list")
    _check_version(doc, source)
    _check_keys(doc, {"version", "partitions"}, source)
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise ReassignmentFormatError(f"{source}: 'partitions' must be a list")
    if not parts:
        raise ReassignmentFormatError(f"{source}: partition reassignment list cannot be empty")
    allowed = (
        {"topic", "partition", "replicas", "log_dirs"}
        if allow_log_dirs
        else {"topic", "partition", "replicas"}
    )
    result: list[PartitionTarget] = []
    seen: dict[TopicPartition, int] = {}
    for i, entry in enumerate(parts):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise ReassignmentFormatError(f"{where}: expected an object with topic, partition, replicas")
        _check_keys(entry, allowed, where)
        for key in ("topic", "partition", "replicas"):
            if key not in entry:
                raise ReassignmentFormatError(f"{where}: missing '{key}'")
        topic = check_topic_name(entry["topic"], where)
        partition = entry["partition"]
        if not _is_int(partition) or not 0 <= partition < 1 << 31:
            raise ReassignmentFormatError(
                f"{where}: partition must be an integer >= 0, got {json.dumps(partition)}"
            )
        where = f"{where} ({topic}-{partition})"
        replicas = entry["replicas"]
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise ReassignmentFormatError(f"{where}: replicas must be a list of broker ids")
        if not replicas:
            raise ReassignmentFormatError(f"{where}: partition replica list cannot be empty")
        bad = [r for r in replicas if not 0 <= r < 1 << 31]
        if bad:
            raise ReassignmentFormatError(f"{where}: broker id {bad[0]} out of range")
        dups = sorted({r for r in replicas if replicas.count(r) > 1})
        if dups:
            raise ReassignmentFormatError(
                f"{where}: replica list may not contain duplicate entries: broker "
                f"{','.join(map(str, dups))} appears more than once in {replicas}"
            )
        if "log_dirs" in entry:
            log_dirs = entry["log_dirs"]
            if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
                raise ReassignmentFormatError(f"{where}: log_dirs must be a list of strings")
            if len(log_dirs) != len(replicas):
                raise ReassignmentFormatError(
                    f"{where}: size of replicas list {replicas} is different from size of log dirs list "
                    f"{json.dumps(log_dirs)}"
                )
            for b, d in zip(replicas, log_dirs, strict=True):
                if d != ANY_LOG_DIR and not d.startswith("/"):
                    raise ReassignmentFormatError(
                        f'{where}: log dir {d!r} for broker {b} must be "any" or an absolute path'
                    )
        else:
            log_dirs = [ANY_LOG_DIR] * len(replicas)
        tp = (topic, partition)
        if tp in seen:
            raise ReassignmentFormatError(
                f"{where}: partition reassignment contains duplicate topic partitions: {tp_str(tp)} "
                f"(also at partitions[{seen[tp]}])"
            )
        seen[tp] = i
        result.append(PartitionTarget(topic, partition, list(replicas), list(log_dirs)))
    return result


def format_reassignment(
    assignment: Mapping[TopicPartition, list[int]],
    log_dirs: Mapping[TopicPartition, list[str]] | None = None,
) -> str:
    """Kafka's formatAsReassignmentJson: compact, sorted by topic then partition,
    ``log_dirs`` always present (``any`` where not pinned)."""
    log_dirs = log_dirs or {}
    parts = []
    for tp in sorted(assignment):
        replicas = list(assignment[tp])
        dirs = list(log_dirs.get(tp) or [ANY_LOG_DIR] * len(replicas))
        parts.append({"topic": tp[0], "partition": tp[1], "replicas": replicas, "log_dirs": dirs})
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"), ensure_ascii=False)


def targets_to_assignment(targets: list[PartitionTarget]) -> dict[TopicPartition, list[int]]:
    return {t.tp: list(t.replicas) for t in targets}


# -- the legacy /admin/reassign_partitions znode ---------------------------------------------------


def format_legacy_znode(assignment: Mapping[TopicPartition, list[int]]) -> bytes:
    """``{"version":1,"partitions":[{"topic","partition","replicas"}]}`` as ZK-mode Kafka writes it."""
    parts = [
        {"topic": tp[0], "partition": tp[1], "replicas": list(assignment[tp])} for tp in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":")).encode()


def parse_legacy_znode(
    data: bytes | None, source: str = "/admin/reassign_partitions"
) -> dict[TopicPartition, list[int]]:
    """Tolerant read of the znode (controllers drop invalid entries; so do we, keeping the rest)."""
    if not data:
        return {}
    doc = _load(data, source)
    result: dict[TopicPartition, list[int]] = {}
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ReassignmentFormatError(f"{source}: expected an object with a 'partitions' list")
    for entry in doc["partitions"]:
        if not isinstance(entry, dict):
            continue
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if isinstance(topic, str) and _is_int(partition) and isinstance(replicas, list):
            result[(topic, partition)] = [r for r in replicas if _is_int(r)]
    return result


# -- partition sizes -------------------------------------------------------------------------------


def parse_sizes(text: str | bytes, source: str = "sizes file") -> dict[TopicPartition, int]:
    """Partition sizes in bytes, from either

    - one JSON object ``{"partitions":[{"topic":"a","partition":0,"size":123}]}``, or
    - JSON lines as ``fleet scan`` writes them, one object per line; the lines
      ``{"type":"partition_size","topic":"a","partition":0,"broker":1,"size":123}``
      are used (other types are skipped).  A partition seen on several brokers
      takes the largest size (the most caught-up replica).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    stripped = text.strip()
    sizes: dict[TopicPartition, int] = {}
    if not stripped:
        raise ReassignmentFormatError(f"{source}: empty")
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and "partitions" in doc:
        if not isinstance(doc["partitions"], list):
            raise ReassignmentFormatError(f"{source}: 'partitions' must be a list")
        for i, entry in enumerate(doc["partitions"]):
            _add_size(sizes, entry, f"{source}: partitions[{i}]")
        return sizes
    offset = 0
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        start = offset
        offset += len(line.encode())
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReassignmentFormatError(
                f"{source}: line {lineno}: not valid JSON: {exc.msg}", start
            ) from None
        if not isinstance(entry, dict):
            raise ReassignmentFormatError(f"{source}: line {lineno}: expected a JSON object", start)
        if entry.get("type") != "partition_size":
            continue
        _add_size(sizes, entry, f"{source}: line {lineno}")
    if not sizes:
        raise ReassignmentFormatError(
            f'{source}: no partition sizes found (expected {{"partitions":[...]}} or '
            "JSON lines of type partition_size)"
        )
    return sizes


def _add_size(sizes: dict[TopicPartition, int], entry: object, where: str) -> None:
    if not isinstance(entry, dict):
        raise ReassignmentFormatError(f"{where}: expected an object with topic, partition, size")
    topic = check_topic_name(entry.get("topic"), where)
    partition, size = entry.get("partition"), entry.get("size")
    if not _is_int(partition) or partition < 0:
        raise ReassignmentFormatError(f"{where}: partition must be an integer >= 0")
    if not _is_int(size) or size < 0:
        raise ReassignmentFormatError(f"{where}: size must be an integer >= 0 (bytes)")
    tp = (topic, partition)
    sizes[tp] = max(sizes.get(tp, 0), size)
