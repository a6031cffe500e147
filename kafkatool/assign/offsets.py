"""Partition offsets as kafka-get-offsets.sh (GetOffsetShell) asks for them and records deleted
as kafka-delete-records.sh (DeleteRecordsCommand) deletes them, on the one admin client; and
the same offsets of a log dir or a backup of one, read-only, by the storage engine's own
ListOffsets rule (:meth:`kafkatool.log.log.Log.list_offset`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, admin_timeouts, describe_error
from kafkatool.assign.topics import topic_regex
from kafkatool.formats.properties import parse_java_int
from kafkatool.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode, is_retriable

LIST_OFFSETS, DELETE_RECORDS = 2, 21
#: ListOffsets v7 is the first with MAX_TIMESTAMP (ListOffsetsRequest.Builder.forConsumer)
MAX_TIMESTAMP_VERSION = 7
#: the admin client's isolation level (ListOffsetsOptions' default): READ_UNCOMMITTED, the high
#: watermark for LATEST; READ_COMMITTED: the last stable offset
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
#: DeleteRecords' timeout_ms (the brokers' wait for the followers' low watermarks)
DELETE_RECORDS_TIMEOUT_MS = 30000
#: Kafka's admin client asks again, a metadata refresh and a pause apart, a partition answered
#: with a retriable error (a leader moving, a lagging new leader) or whose leader cannot be
#: reached (a broker just killed that the metadata names until its ZooKeeper session expires):
#: until default.api.timeout.ms, retry.backoff.ms doubling up to retry.backoff.max.ms
#: (kafka_client.admin_timeouts: --command-config's, else the admin client's defaults)
#: a partition the metadata gives no leader (every replica down) is asked about this many
#: times, then reported with the metadata's error; Kafka's PartitionLeaderStrategy waits for
#: a leader until default.api.timeout.ms and reports a TimeoutException
NO_LEADER_RETRIES = 5

TopicPartition = tuple[str, int]


class OffsetsInputError(KafkaAdminError):
    """An option or file GetOffsetShell or DeleteRecordsCommand refuses: one line, exit 2."""


# ----------------------------------------------------------------------------- --time
TIME_NAMES = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}


def parse_time(text: str) -> int:
    """GetOffsetShell.parseOffsetSpec: a name, or any Java long (-1, -2, -3 are the names; other
    values go to the broker as they are, e.g. -4 for the earliest local offset)."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    value = parse_java_int(text, 64)
    if value is None:
        raise OffsetsInputError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
            "max-timestamp, or a specified long format timestamp"
        )
    return value


# ----------------------------------------------------------------------------- partition filters
#: GetOffsetShell's --topic-partitions rule: [TOPIC-REGEX][:N | :N- | :-N | :N-M]
TOPIC_PARTITION_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
JAVA_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class PartitionRule:
    topic: re.Pattern
    allowed: Callable[[int], bool]


class TopicPartitionFilter:
    """GetOffsetShell's filter: a topic is asked about when a rule takes it, a partition when a
    rule takes both (CompositeTopicPartitionFilter; --topic/--partitions is one rule)."""

    def __init__(self, rules: list[PartitionRule]):
        self.rules = rules

    def topic_allowed(self, topic: str) -> bool:
        return any(r.topic.fullmatch(topic) for r in self.rules)

    def partition_allowed(self, topic: str, partition: int) -> bool:
        return any(r.topic.fullmatch(topic) and r.allowed(partition) for r in self.rules)


def _java_int(text: str, spec: str) -> int:
    value = int(text)
    if value > JAVA_INT_MAX:  # Integer.parseInt's NumberFormatException
        raise OffsetsInputError(f"Invalid rule specification: {spec}")
    return value


def partition_filter(
    topic: str | None, partitions: str | None, topic_partitions: str | None
) -> TopicPartitionFilter:
    """The filter of --topic and --partitions, or of --topic-partitions (not both)."""
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            raise OffsetsInputError("--topic-partitions cannot be used with --topic or --partitions")
        rules = []
        for spec in topic_partitions.split(","):
            m = TOPIC_PARTITION_PATTERN.fullmatch(spec)
            if m is None:
                raise OffsetsInputError(f"Invalid rule specification: {spec}")
            g = [x or None for x in m.groups()]
            rx = topic_regex(g[0] if g[0] is not None else ".*")
            if g[1] is not None:
                only = _java_int(g[1], spec)
                rules.append(PartitionRule(rx, lambda p, only=only: p == only))
            else:
                lo = _java_int(g[2], spec) if g[2] is not None else 0
                hi = _java_int(g[3], spec) if g[3] is not None else JAVA_INT_MAX
                rules.append(PartitionRule(rx, lambda p, lo=lo, hi=hi: lo <= p < hi))
        return TopicPartitionFilter(rules)
    ids: set[int] = set()
    if partitions:
        for item in partitions.split(","):
            if parse_java_int(item) is None:
                raise OffsetsInputError(
                    "--partitions expects a comma separated list of numeric partition ids, but "
                    f"received: {partitions}"
                )
            ids.add(int(item))
    rx = topic_regex(topic if topic is not None else ".*")
    return TopicPartitionFilter([PartitionRule(rx, lambda p: not ids or p in ids)])


def output_order(tp: TopicPartition) -> str:
    """GetOffsetShell prints in TopicPartition.toString() order: "t-10" before "t-2"."""
    return f"{tp[0]}-{tp[1]}"


# ----------------------------------------------------------------------------- answers
@dataclass
class PartitionAnswer:
    """One partition's answer: an offset (-1: none), its timestamp, or an error."""

    offset: int = -1
    timestamp: int = -1
    error_code: int = 0
    message: str | None = None

    @property
    def error(self) -> str | None:
        return describe_error(self.error_code, self.message) if self.error_code else None


def _by_leader(admin: KafkaAdmin, tps, answers: dict, final: set) -> dict[int, list[TopicPartition]]:
    """The pending partitions grouped by their leader now; the others get their metadata error
    (a topic or partition the metadata does not have is ``final``: not asked again, as the admin
    client's PartitionLeaderStrategy fails an unknown topic at once)."""
    meta = admin.metadata(sorted({t for t, _ in tps}))
    out: dict[int, list[TopicPartition]] = {}
    for t, p in tps:
        if t in meta.topic_errors or t not in meta.topics:
            code = meta.topic_errors.get(t, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            msg = None
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                msg = f"Failed to fetch metadata for partition {t}-{p} because metadata for topic `{t}` could not be found"
            answers[(t, p)] = PartitionAnswer(error_code=code, message=msg)
            final.add((t, p))
            continue
        info = meta.topics[t].get(p)
        if info is None:
            answers[(t, p)] = PartitionAnswer(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=f"topic {t} has no partition {p}"
            )
            final.add((t, p))
        elif info.leader < 0:
            answers[(t, p)] = PartitionAnswer(
                error_code=info.error or ErrorCode.LEADER_NOT_AVAILABLE,
                message="the partition has no leader (offline replicas: "
                + (",".join(map(str, info.offline)) or "none")
                + ")",
            )
        else:
            out.setdefault(info.leader, []).append((t, p))
    return out


def _ask_leaders(admin: KafkaAdmin, tps: list[TopicPartition], send) -> dict[TopicPartition, PartitionAnswer]:
    """Each partition's request at its leader, a retriable error or an unreachable leader asked
    again (bounded in time, and in tries for a partition without a leader)."""
    answers: dict[TopicPartition, PartitionAnswer] = {}
    final: set[TopicPartition] = set()
    leaderless: dict[TopicPartition, int] = {}
    pending = list(dict.fromkeys(tps))
    timeouts = admin_timeouts()
    deadline = time.monotonic() + timeouts.api_timeout_ms / 1000
    tries = 0
    answers_seen = False
    while True:
        for tp in pending:
            answers.pop(tp, None)
        try:
            groups = _by_leader(admin, pending, answers, final)
            answers_seen = True
        except KafkaAdminError as exc:
            if exc.code is not None or not answers_seen or time.monotonic() >= deadline:
                raise  # an unreachable cluster at the start: one line, at once
            admin.forget(None)  # the bootstrap connection failed: another server next time
            groups = {}
            for tp in pending:
                answers[tp] = PartitionAnswer(error_code=ErrorCode.NETWORK_EXCEPTION, message=str(exc))
        for leader, group in sorted(groups.items()):
            try:
                send(admin.node(leader), group, answers)
            except KafkaAdminError as exc:
                if exc.code is not None:
                    raise
                admin.forget(leader)  # asked again at the leader the metadata names then
                for tp in group:
                    answers[tp] = PartitionAnswer(
                        error_code=ErrorCode.NETWORK_EXCEPTION, message=f"leader {leader}: {exc}"
                    )
        for tp in pending:
            if answers[tp].error_code == ErrorCode.LEADER_NOT_AVAILABLE:
                leaderless[tp] = leaderless.get(tp, 0) + 1
                if leaderless[tp] > NO_LEADER_RETRIES:
                    final.add(tp)
        pending = [tp for tp in pending if tp not in final and is_retriable(answers[tp].error_code)]
        if not pending or timeouts.wait(tries, deadline):
            break
        tries += 1
    return {tp: answers[tp] for tp in dict.fromkeys(tps)}  # in the order asked


def list_offsets(
    admin: KafkaAdmin, tps: list[TopicPartition], spec: int, isolation: int = READ_UNCOMMITTED
) -> dict[TopicPartition, PartitionAnswer]:
    """ListOffsets at ``spec`` (a timestamp or one of ListOffsets' special ones) for each
    partition, at its leader, as the admin client asks (ListOffsetsHandler): v1 at least, v2 at
    least for READ_COMMITTED, v7 at least for MAX_TIMESTAMP (an older broker:
    UNSUPPORTED_VERSION for that partition)."""
    from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    def send(conn, group, answers):
        version = conn.version_for(LIST_OFFSETS)
        # v2 is the first with an isolation level (READ_COMMITTED: the last stable offset)
        if version < (MAX_TIMESTAMP_VERSION if spec == MAX_TIMESTAMP else 2 if isolation else 1):
            for tp in group:
                answers[tp] = PartitionAnswer(
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    message=f"broker {conn.address} serves ListOffsets up to v{version}",
                )
            return
        asked = set(group)
        by_topic: dict[str, list[int]] = {}
        for t, p in group:
            by_topic.setdefault(t, []).append(p)
        req = API_BY_KEY[LIST_OFFSETS].request(
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                ListOffsetsTopic(
                    name=t,
                    partitions=[
                        ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=spec)
                        for p in sorted(ps)
                    ],
                )
                for t, ps in sorted(by_topic.items())
            ],
        )
        resp = conn.request(LIST_OFFSETS, req, version)
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in asked:
                    answers[tp] = PartitionAnswer(p.offset, p.timestamp, p.error_code)
        for tp in group:
            answers.setdefault(
                tp,
                PartitionAnswer(
                    error_code=-1, message=f"the response from {conn.address} has no result for it"
                ),
            )

    return _ask_leaders(admin, tps, send)


def matching_partitions(
    admin: KafkaAdmin, flt: TopicPartitionFilter, exclude_internal: bool
) -> list[TopicPartition]:
    """GetOffsetShell.listPartitionInfos: the topics listed (internal ones unless excluded) that
    the filter takes, and their partitions it takes."""
    meta = admin.metadata()
    out = []
    for t, parts in meta.topics.items():
        internal = meta.topic_info.get(t, (None, t.startswith("__")))[1]
        if (exclude_internal and internal) or not flt.topic_allowed(t):
            continue
        out.extend((t, p) for p in sorted(parts) if flt.partition_allowed(t, p))
    return out


def get_offsets_live(
    admin: KafkaAdmin, flt: TopicPartitionFilter, exclude_internal: bool, spec: int
) -> dict[TopicPartition, PartitionAnswer]:
    tps = matching_partitions(admin, flt, exclude_internal)
    return list_offsets(admin, tps, spec) if tps else {}


def get_offsets_offline(
    log_dirs: list[Path], flt: TopicPartitionFilter, exclude_internal: bool, spec: int
) -> dict[TopicPartition, PartitionAnswer]:
    """The same answers from a log dir or a backup, read-only (no lock: a running broker's dir is
    read as it stands). The last fetchable offset is the log end offset, as ListOffsets answers
    a request without an isolation level (a replica's): the dir holds no live high watermark,
    its checkpoint lags the broker's by up to replica.high.watermark.checkpoint.interval.ms."""
    from kafkatool.broker.handlers.offsets import offset_by_spec
    from kafkatool.log.manager import LogManager
    from kafkatool.log.topic_settings import INTERNAL_TOPIC_CONFIGS

    out: dict[TopicPartition, PartitionAnswer] = {}
    with LogManager(log_dirs, writable=False) as mgr:
        for (t, p), lg in sorted(mgr.logs.items()):
            if (exclude_internal and t in INTERNAL_TOPIC_CONFIGS) or not flt.partition_allowed(t, p):
                continue
            found, code, damage = offset_by_spec(lg, spec, lg.log_end_offset)
            if code:  # damaged data: the codec's error names the file and the byte
                out[(t, p)] = PartitionAnswer(
                    error_code=code, message=None if damage is None else str(damage)
                )
                continue
            out[(t, p)] = PartitionAnswer(found[1], found[0]) if found is not None else PartitionAnswer()
    return out


# ----------------------------------------------------------------------------- delete-records
DELETE_RECORDS_JSON_VERSION = 1


def _field(obj: dict, name: str, kind: type, where: str):
    if name not in obj:
        raise OffsetsInputError(f"{where}: No such field exists: `{name}`")
    value = obj[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        expected = {int: "an integer", str: "a string"}[kind]
        raise OffsetsInputError(f"{where}: `{name}` is {json.dumps(value)}, expected {expected}")
    return value


def parse_offset_json(text: str, source: str) -> dict[TopicPartition, int]:
    """DeleteRecordsCommand's offset JSON file: {"partitions": [{"topic", "partition", "offset"}],
    "version": 1} (version defaults to 1), each partition once. ``source`` names the file."""
    try:
        js = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = (
            f" (line {exc.lineno} column {exc.colno}, byte {exc.pos})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise OffsetsInputError(f"{source}: The input string is not a valid JSON{where}") from None
    if not isinstance(js, dict):
        raise OffsetsInputError(f"{source}: expected a JSON object, got {type(js).__name__}")
    version = js.get("version", DELETE_RECORDS_JSON_VERSION)
    if version != DELETE_RECORDS_JSON_VERSION or isinstance(version, bool):
        raise OffsetsInputError(f"{source}: Not supported version field value {json.dumps(version)}")
    if "partitions" not in js:
        raise OffsetsInputError(f"{source}: Missing partitions field")
    parts = js["partitions"]
    if not isinstance(parts, list):
        raise OffsetsInputError(f"{source}: `partitions` is {json.dumps(parts)}, expected an array")
    seen: dict[TopicPartition, list[int]] = {}
    for i, entry in enumerate(parts):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise OffsetsInputError(f"{where}: expected an object, got {json.dumps(entry)}")
        topic = _field(entry, "topic", str, where)
        partition = _field(entry, "partition", int, where)
        offset = _field(entry, "offset", int, where)
        if not -(2**31) <= partition <= JAVA_INT_MAX or not -(2**63) <= offset < 2**63:
            raise OffsetsInputError(f"{where}: a number out of range")
        seen.setdefault((topic, partition), []).append(offset)
    dups = [tp for tp, offs in seen.items() if len(offs) > 1]
    if dups:
        raise OffsetsInputError(
            "Offset json file contains duplicate topic partitions: " + ",".join(f"{t}-{p}" for t, p in dups)
        )
    return {tp: offs[0] for tp, offs in seen.items()}


def delete_records(
    admin: KafkaAdmin, offsets: dict[TopicPartition, int], timeout_ms: int = DELETE_RECORDS_TIMEOUT_MS
) -> dict[TopicPartition, PartitionAnswer]:
    """DeleteRecords at each partition's leader: the answer's ``offset`` is the new low
    watermark (the log start offset)."""
    from kafkatool.protocol.generated.delete_records_request import (
        DeleteRecordsPartition,
        DeleteRecordsTopic,
    )

    def send(conn, group, answers):
        by_topic: dict[str, list[int]] = {}
        for t, p in group:
            by_topic.setdefault(t, []).append(p)
        req = API_BY_KEY[DELETE_RECORDS].request(
            topics=[
                DeleteRecordsTopic(
                    name=t,
                    partitions=[
                        DeleteRecordsPartition(partition_index=p, offset=offsets[(t, p)]) for p in sorted(ps)
                    ],
                )
                for t, ps in sorted(by_topic.items())
            ],
            timeout_ms=timeout_ms,
        )
        resp = conn.request(DELETE_RECORDS, req)
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in offsets:
                    answers[tp] = PartitionAnswer(p.low_watermark, -1, p.error_code)
        for tp in group:
            answers.setdefault(
                tp,
                PartitionAnswer(
                    error_code=-1, message=f"the response from {conn.address} has no result for it"
                ),
            )

    return _ask_leaders(admin, sorted(offsets), send)
