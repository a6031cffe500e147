"""Reassignment through the broker admin API (KIP-455), as kafka-reassign-partitions does it.

- execute: ListPartitionReassignments (refuse while anything reassigns, unless
  ``additional``), validate the plan against Metadata, SET the throttles with
  IncrementalAlterConfigs (topic lists on any broker, rates on each broker
  itself), then AlterPartitionReassignments to the controller and, for
  ``log_dirs`` pins, AlterReplicaLogDirs to each broker, retried every 100 ms
  while the replica is not there yet (REPLICA_NOT_AVAILABLE) until the timeout.
- verify: per partition in progress / completed / different; once nothing
  reassigns anywhere in the cluster, DELETE the throttle keys where Kafka's
  tool deletes them (every live broker plus the file's brokers; the file's
  topics) plus wherever the record of ``execute`` says they were set.
- cancel: a null target for the file's partitions in progress, then the throttles.
- list: ListPartitionReassignments of the whole cluster.

The record of what ``execute`` set is a small JSON file per cluster id in the
state dir (``$KAFKATOOL_STATE_DIR``, else ``$XDG_STATE_HOME/kafkatool``, else
``~/.local/state/kafkatool``): the admin API has no place for it.  Only keys
that hold a value are deleted, so the report says what was really cleared.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.assign.errors import AssignError
from kafkatool.assign.formats import PartitionTarget
from kafkatool.assign.kafka_client import (
    ClusterMetadata,
    KafkaAdmin,
    KafkaAdminError,
    config_source,
    describe_error,
)
from kafkatool.assign.model import Broker, TopicPartition, tp_str
from kafkatool.assign.throttle import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    InFlight,
    ThrottleSettings,
    clear_targets,
    compute_throttles,
)
from kafkatool.assign.zk_reassign import (
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
    CancelResult,
    ClearResult,
    ExecuteResult,
    ListedReassignment,
    PartitionStatus,
    VerifyResult,
    check_targets,
    classify_partitions,
)
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 34, 35, 32, 44
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
#: config sources that mean "set on this entity" (topic override, dynamic per-broker)
_SET_HERE = (1, 2)
LOG_DIR_RETRY_S = 0.1


# -- reading the cluster ---------------------------------------------------------------------------


def read_brokers(meta: ClusterMetadata) -> dict[int, Broker]:
    return {bid: Broker(bid, rack) for bid, (_h, _p, rack) in meta.brokers.items()}


def read_current(admin: KafkaAdmin, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    """Current replicas of every partition of ``topics``; an unknown topic is an error."""
    return read_current_isr_and_leaders(admin, topics)[0]


def read_current_isr_and_leaders(
    admin: KafkaAdmin, topics: Iterable[str]
) -> tuple[dict[TopicPartition, list[int]], dict[TopicPartition, list[int]], dict[TopicPartition, int]]:
    """read_current, and each partition's ISR and leader (-1: none) from the same Metadata answer."""
    topics = sorted(set(topics))
    meta = admin.metadata(topics)
    missing = [t for t in topics if t not in meta.topics]
    if missing:
        reasons = {t: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in missing} | meta.topic_errors
        detail = ", ".join(f"{t} ({describe_error(reasons[t])})" for t in missing)
        raise AssignError(f"topic{'s' if len(missing) > 1 else ''} not found: {detail}")
    isr = {(t, p): list(i.isr) for t, parts in meta.topics.items() for p, i in parts.items()}
    leaders = {(t, p): i.leader for t, parts in meta.topics.items() for p, i in parts.items()}
    return meta.assignment(), isr, leaders


def list_in_flight(
    admin: KafkaAdmin, tps: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, InFlight]:
    """ListPartitionReassignments (of the whole cluster when ``tps`` is None) at the controller."""
    from kafkatool.protocol.generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsTopics,
    )

    topics = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(set(tps)):
            by_topic.setdefault(t, []).append(p)
        topics = [
            ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()
        ]
    req = API_BY_KEY[LIST_REASSIGNMENTS].request(timeout_ms=int(admin.timeout * 1000), topics=topics)
    resp = admin.controller().request(LIST_REASSIGNMENTS, req)
    if resp.error_code:
        raise KafkaAdminError(
            f"ListPartitionReassignments failed: {describe_error(resp.error_code, resp.error_message)}",
            resp.error_code,
        )
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            out[(t.name, p.partition_index)] = InFlight(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
    return out


# -- configs ---------------------------------------------------------------------------------------


def _describe(
    admin: KafkaAdmin, rtype: int, name: str, keys: Iterable[str], node: int | None
) -> dict[str, str]:
    """The keys set on the entity itself (topic override / dynamic per-broker value)."""
    from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

    req = API_BY_KEY[DESCRIBE_CONFIGS].request(
        resources=[
            DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=list(keys))
        ]
    )
    conn = admin.node(node) if node is not None else admin.controller()
    version = conn.version_for(DESCRIBE_CONFIGS)
    resp = conn.request(DESCRIBE_CONFIGS, req, version)
    res = resp.results[0]
    if res.error_code:
        raise KafkaAdminError(
            f"DescribeConfigs {'topic' if rtype == TOPIC_RESOURCE else 'broker'} {name}: "
            f"{describe_error(res.error_code, res.error_message)}",
            res.error_code,
        )
    out = {}
    for c in res.configs:
        source = config_source(c, version, res.resource_type)
        if source in _SET_HERE and c.value is not None:
            out[c.name] = c.value
    return out


def _alter(admin: KafkaAdmin, rtype: int, name: str, ops: Mapping[str, str | None], node: int | None) -> None:
    """IncrementalAlterConfigs: SET key=value, DELETE key (value None)."""
    from kafkatool.protocol.generated.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    configs = [
        AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
        for k, v in ops.items()
    ]
    req = API_BY_KEY[INCREMENTAL_ALTER_CONFIGS].request(
        resources=[AlterConfigsResource(resource_type=rtype, resource_name=name, configs=configs)],
        validate_only=False,
    )
    conn = admin.node(node) if node is not None else admin.controller()
    resp = conn.request(INCREMENTAL_ALTER_CONFIGS, req)
    res = resp.responses[0]
    if res.error_code:
        what = f"topic {name}" if rtype == TOPIC_RESOURCE else f"broker {name}"
        raise KafkaAdminError(
            f"setting throttle configs on {what} failed: {describe_error(res.error_code, res.error_message)}",
            res.error_code,
        )


def apply_throttles(admin: KafkaAdmin, settings: ThrottleSettings) -> None:
    for topic, cfg in settings.topics.items():
        _alter(admin, TOPIC_RESOURCE, topic, cfg, None)
    for broker, cfg in settings.brokers.items():
        _alter(admin, BROKER_RESOURCE, str(broker), cfg, broker)


# -- the record of what execute set ----------------------------------------------------------------


def state_dir() -> Path:
    explicit = os.environ.get("KAFKATOOL_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "kafkatool"


def record_path(cluster_id: str | None) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in (cluster_id or "unknown-cluster"))
    return state_dir() / f"reassign-throttles-{safe}.json"


def read_record(cluster_id: str | None) -> dict:
    try:
        doc = json.loads(record_path(cluster_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_record(cluster_id: str | None, settings: ThrottleSettings, rates: dict) -> None:
    old = read_record(cluster_id)
    doc = {
        "version": 1,
        "cluster_id": cluster_id,
        **rates,
        "updated_ms": int(time.time() * 1000),
        "topics": sorted(set(old.get("topics") or []) | set(settings.topics)),
        "brokers": sorted({int(b) for b in old.get("brokers") or []} | set(settings.brokers)),
    }
    path = record_path(cluster_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def drop_record(cluster_id: str | None) -> None:
    try:
        record_path(cluster_id).unlink()
    except FileNotFoundError:
        pass


# -- execute ---------------------------------------------------------------------------------------


@dataclass
class ApiCancelResult(CancelResult):
    #: (tp, broker, current dir) of the log dir moves stopped by pinning the replica where it is
    cancelled_moves: list[tuple[TopicPartition, int, str]] = field(default_factory=list)


@dataclass
class ApiExecuteResult(ExecuteResult):
    log_dirs: dict[TopicPartition, dict[int, str]] = field(default_factory=dict)  # pins started
    record: str | None = None  # where the record of the throttles was written


def execute(
    admin: KafkaAdmin,
    targets: list[PartitionTarget],
    *,
    additional: bool = False,
    throttle: int | None = None,
    log_dir_throttle: int | None = None,
    timeout: float = 10.0,
    dry_run: bool = False,
) -> ApiExecuteResult:
    current_all = read_current(admin, {t.topic for t in targets})
    meta = admin.metadata_cached()
    brokers = read_brokers(meta)
    check_targets(targets, brokers, current_all, brokers_are="live")
    in_flight = list_in_flight(admin)
    if in_flight and not additional:
        raise AssignError(
            CANNOT_EXECUTE_BECAUSE_OF_EXISTING.format(what=f"{len(in_flight)} partition(s) reassigning")
        )
    proposed = {t.tp: list(t.replicas) for t in targets}
    current = {tp: current_all[tp] for tp in proposed}
    pins = {t.tp: t.pinned_dirs() for t in targets if t.pinned_dirs()}
    pinned_brokers = sorted({b for p in pins.values() for b in p})
    settings = compute_throttles(
        proposed,
        current,
        rate=throttle,
        in_flight=in_flight,
        log_dir_rate=log_dir_throttle if pins else None,
        log_dir_brokers=pinned_brokers,
    )
    for b in pinned_brokers:  # fail before anything is written
        admin.node(b).version_for(ALTER_REPLICA_LOG_DIRS)
        dirs = broker_log_dirs(admin, b)
        for tp, by_broker in sorted(pins.items()):
            if b in by_broker and by_broker[b] not in dirs:
                raise AssignError(
                    f"{tp_str(tp)}: {by_broker[b]} is not a live log dir of broker {b} "
                    f"(its log dirs: {', '.join(sorted(dirs)) or 'none'})"
                )
    result = ApiExecuteResult(current, proposed, settings, log_dirs=pins)
    if dry_run:
        return result
    if settings.topics or settings.brokers:
        apply_throttles(admin, settings)
        rates = {"rate": throttle, "log_dir_rate": log_dir_throttle}
        write_record(meta.cluster_id, settings, rates)
        result.record = str(record_path(meta.cluster_id))
    _alter_reassignments(admin, proposed, cancel=False)
    if pins:
        _alter_log_dirs(admin, pins, timeout)
    return result


def _alter_reassignments(
    admin: KafkaAdmin, targets: Mapping[TopicPartition, list[int] | None], *, cancel: bool
) -> dict[TopicPartition, tuple[int, str | None]]:
    """AlterPartitionReassignments at the controller; raises on any error except, when
    cancelling, NO_REASSIGNMENT_IN_PROGRESS (the move finished meanwhile), which is returned."""
    from kafkatool.protocol.generated.alter_partition_reassignments_request import (
        ReassignablePartition,
        ReassignableTopic,
    )

    by_topic: dict[str, list] = {}
    for (t, p), replicas in sorted(targets.items()):
        by_topic.setdefault(t, []).append(ReassignablePartition(partition_index=p, replicas=replicas))
    req = API_BY_KEY[ALTER_REASSIGNMENTS].request(
        timeout_ms=int(admin.timeout * 1000),
        topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    resp = admin.controller().request(ALTER_REASSIGNMENTS, req)
    verb = "cancelling" if cancel else "reassigning"
    if resp.error_code:
        raise KafkaAdminError(
            f"error {verb} partitions: {describe_error(resp.error_code, resp.error_message)}", resp.error_code
        )
    errors, tolerated = [], {}
    for t in resp.responses:
        for p in t.partitions:
            if not p.error_code:
                continue
            if cancel and p.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS:
                tolerated[(t.name, p.partition_index)] = (p.error_code, p.error_message)
                continue
            errors.append(f"{t.name}-{p.partition_index}: {describe_error(p.error_code, p.error_message)}")
    if errors:
        raise KafkaAdminError(f"error {verb} partition(s): " + "; ".join(errors), None)
    return tolerated


def _alter_log_dirs(
    admin: KafkaAdmin, pins: Mapping[TopicPartition, Mapping[int, str]], timeout: float
) -> None:
    """AlterReplicaLogDirs per broker; REPLICA_NOT_AVAILABLE is retried every 100 ms until ``timeout``
    (the replica may not exist on its new broker yet), as Kafka's tool does."""
    from kafkatool.protocol.generated.alter_replica_log_dirs_request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirTopic,
    )

    pending: dict[int, dict[TopicPartition, str]] = {}
    for tp, by_broker in pins.items():
        for b, d in by_broker.items():
            pending.setdefault(b, {})[tp] = d
    deadline = time.monotonic() + timeout
    while True:
        failures: list[str] = []
        for b in sorted(pending):
            dirs: dict[str, dict[str, list[int]]] = {}
            for (t, p), d in sorted(pending[b].items()):
                dirs.setdefault(d, {}).setdefault(t, []).append(p)
            req = API_BY_KEY[ALTER_REPLICA_LOG_DIRS].request(
                dirs=[
                    AlterReplicaLogDir(
                        path=d,
                        topics=[AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()],
                    )
                    for d, topics in dirs.items()
                ]
            )
            resp = admin.node(b).request(ALTER_REPLICA_LOG_DIRS, req)
            for tr in resp.results:
                for pr in tr.partitions:
                    tp = (tr.topic_name, pr.partition_index)
                    if pr.error_code == ErrorCode.NONE:
                        pending[b].pop(tp, None)
                    elif pr.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                        failures.append(
                            f"{tp_str(tp)} on broker {b} to {pending[b].get(tp)}: {describe_error(pr.error_code)}"
                        )
                        pending[b].pop(tp, None)
            if not pending[b]:
                del pending[b]
        if failures:
            raise KafkaAdminError("error moving replicas between log dirs: " + "; ".join(failures))
        if not pending:
            return
        if time.monotonic() >= deadline:
            left = ", ".join(
                f"{tp_str(tp)} on broker {b}" for b, tps in sorted(pending.items()) for tp in sorted(tps)
            )
            raise KafkaAdminError(
                f"timed out starting log dir moves (replica not available within {timeout:g}s): {left}",
                ErrorCode.REPLICA_NOT_AVAILABLE,
            )
        time.sleep(LOG_DIR_RETRY_S)


# -- verify ----------------------------------------------------------------------------------------


def partition_statuses(
    in_flight: Mapping[TopicPartition, InFlight],
    current: Mapping[TopicPartition, list[int]],
    targets: list[PartitionTarget],
) -> list[PartitionStatus]:
    return classify_partitions(targets, current, {tp: f.replicas for tp, f in in_flight.items()})


def _current_of(
    admin: KafkaAdmin, topics: Iterable[str]
) -> tuple[dict[TopicPartition, list[int]], ClusterMetadata]:
    meta = admin.metadata(sorted(set(topics)))
    return meta.assignment(), meta


MOVE_COMPLETED = "completed"
MOVE_IN_PROGRESS = "in_progress"
MOVE_ELSEWHERE = "moving_elsewhere"
MOVE_CANCELLED = "not_moving"
MOVE_MISSING = "missing"


@dataclass
class LogDirStatus:
    """Where one pinned replica is (Kafka's verify states of a log dir move)."""

    tp: TopicPartition
    broker: int
    target: str
    status: str
    current: str | None = None
    future: str | None = None

    def message(self) -> str:
        replica = f"{self.tp[0]}-{self.tp[1]}-{self.broker}"
        where = f"Partition {tp_str(self.tp)} on broker {self.broker}"
        if self.status == MOVE_COMPLETED:
            return f"Reassignment of replica {replica} completed successfully."
        if self.status == MOVE_IN_PROGRESS:
            return f"Reassignment of replica {replica} is still in progress."
        if self.status == MOVE_ELSEWHERE:
            return f"{where} is being moved to log dir {self.future} instead of {self.target}."
        if self.status == MOVE_CANCELLED:
            return f"{where} is not being moved from log dir {self.current} to {self.target}."
        return f"{where} cannot be found in any live log directory on broker {self.broker}."


@dataclass
class ApiVerifyResult(VerifyResult):
    moves: list[LogDirStatus] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(s.status == "completed" for s in self.statuses) and all(
            m.status == MOVE_COMPLETED for m in self.moves
        )


def replica_dirs(admin: KafkaAdmin, broker: int, tps: Iterable[TopicPartition]) -> dict[TopicPartition, list]:
    """DescribeLogDirs at ``broker``: tp -> [current dir, future dir] (None where absent)."""
    from kafkatool.protocol.generated.describe_log_dirs_request import DescribableLogDirTopic

    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(set(tps)):
        by_topic.setdefault(t, []).append(p)
    req = API_BY_KEY[DESCRIBE_LOG_DIRS].request(
        topics=[DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
    )
    resp = admin.node(broker).request(DESCRIBE_LOG_DIRS, req)
    if resp.error_code:
        raise KafkaAdminError(f"DescribeLogDirs at broker {broker}: {describe_error(resp.error_code)}")
    out: dict[TopicPartition, list] = {}
    for r in resp.results:
        if r.error_code:
            continue  # an offline dir: its replicas show as missing
        for t in r.topics:
            for p in t.partitions:
                out.setdefault((t.name, p.partition_index), [None, None])[1 if p.is_future_key else 0] = (
                    r.log_dir
                )
    return out


def broker_log_dirs(admin: KafkaAdmin, broker: int) -> set[str]:
    """The live log dirs of ``broker`` (DescribeLogDirs for no topic lists every dir)."""
    resp = admin.node(broker).request(DESCRIBE_LOG_DIRS, API_BY_KEY[DESCRIBE_LOG_DIRS].request(topics=[]))
    return {r.log_dir for r in resp.results if not r.error_code}


def log_dir_statuses(admin: KafkaAdmin, targets: list[PartitionTarget]) -> list[LogDirStatus]:
    pins: dict[int, dict[TopicPartition, str]] = {}
    for t in targets:
        for b, d in t.pinned_dirs().items():
            pins.setdefault(b, {})[t.tp] = d
    out = []
    live = admin.metadata_cached().brokers if pins else {}
    for b in sorted(pins):
        where = replica_dirs(admin, b, pins[b]) if b in live else {}
        for tp, target in sorted(pins[b].items()):
            current, future = where.get(tp, [None, None])
            if current is None and future is None:
                status = MOVE_MISSING
            elif current == target:
                status = MOVE_COMPLETED
            elif future == target:
                status = MOVE_IN_PROGRESS
            elif future is not None:
                status = MOVE_ELSEWHERE
            else:
                status = MOVE_CANCELLED
            out.append(LogDirStatus(tp, b, target, status, current, future))
    return out


def verify(
    admin: KafkaAdmin,
    targets: list[PartitionTarget],
    *,
    preserve_throttles: bool = False,
    dry_run: bool = False,
) -> ApiVerifyResult:
    current, _ = _current_of(admin, {t.topic for t in targets})
    in_flight = list_in_flight(admin)
    statuses = partition_statuses(in_flight, current, targets)
    moves = log_dir_statuses(admin, targets)
    cleared = None
    if not preserve_throttles:
        if in_flight:
            cleared = ClearResult(skipped_reason="reassignments are still in progress in the cluster")
        elif any(m.status == MOVE_IN_PROGRESS for m in moves):
            cleared = ClearResult(skipped_reason="log dir moves are still in progress")
        else:
            cleared = clear_throttles(admin, targets, dry_run=dry_run)
    return ApiVerifyResult(statuses, bool(in_flight), cleared, moves=moves)


def clear_throttles(
    admin: KafkaAdmin, targets: list[PartitionTarget], *, dry_run: bool = False
) -> ClearResult:
    meta = admin.metadata()
    live = sorted(meta.brokers)
    brokers, topics = clear_targets(live, {t.tp: t.replicas for t in targets})
    record = read_record(meta.cluster_id)
    brokers = sorted((set(brokers) | {int(b) for b in record.get("brokers") or []}) & set(live))
    topics = sorted((set(topics) | set(record.get("topics") or [])) & set(meta.topics))
    result = ClearResult()
    for b in brokers:
        held = _describe(admin, BROKER_RESOURCE, str(b), BROKER_THROTTLE_KEYS, b)
        if held:
            if not dry_run:
                _alter(admin, BROKER_RESOURCE, str(b), dict.fromkeys(held), b)
            result.brokers.append(b)
    for t in topics:
        held = _describe(admin, TOPIC_RESOURCE, t, TOPIC_THROTTLE_KEYS, None)
        if held:
            if not dry_run:
                _alter(admin, TOPIC_RESOURCE, t, dict.fromkeys(held), None)
            result.topics.append(t)
    if not dry_run:
        drop_record(meta.cluster_id)
    return result


# -- cancel ----------------------------------------------------------------------------------------


def cancel(
    admin: KafkaAdmin,
    targets: list[PartitionTarget],
    *,
    preserve_throttles: bool = False,
    dry_run: bool = False,
) -> CancelResult:
    """A null target for every partition of the file that is reassigning (the controller
    reverts it to its original replicas and deletes the adding ones), then the throttles."""
    wanted = {t.tp for t in targets}
    in_flight = list_in_flight(admin)
    active = {tp: f for tp, f in in_flight.items() if tp in wanted}
    result = ApiCancelResult()
    # log dir moves: pin each moving replica to the dir it is in now, as Kafka's tool does
    repin: dict[TopicPartition, dict[int, str]] = {}
    for m in log_dir_statuses(admin, targets):
        if m.future is not None and m.current is not None:
            repin.setdefault(m.tp, {})[m.broker] = m.current
            result.cancelled_moves.append((m.tp, m.broker, m.current))
    if repin and not dry_run:
        _alter_log_dirs(admin, repin, admin.timeout)
    if active and not dry_run:
        finished = _alter_reassignments(admin, dict.fromkeys(active), cancel=True)
        for tp in finished:
            active.pop(tp, None)
    for tp, f in sorted(active.items()):
        result.cancelled[tp] = [b for b in f.replicas if b not in f.adding]
    if not preserve_throttles:
        others = (
            list_in_flight(admin)
            if not dry_run
            else {tp: f for tp, f in in_flight.items() if tp not in wanted}
        )
        if others:
            result.cleared = ClearResult(
                skipped_reason="other reassignments are still in progress in the cluster"
            )
        else:
            result.cleared = clear_throttles(admin, targets, dry_run=dry_run)
    return result


# -- list ------------------------------------------------------------------------------------------


def list_reassignments(admin: KafkaAdmin) -> list[ListedReassignment]:
    return [
        ListedReassignment(tp, f.replicas, f.adding, f.removing, "api")
        for tp, f in sorted(list_in_flight(admin).items())
    ]
