"""Reassignment through ZooKeeper, as ZK-mode Kafka controllers read it.

Reads go through ``kafkatool.zk.client.KafkaZk``.  Every change is one
ZooKeeper multi-op (all or nothing) with the znode versions it read, so a
concurrent writer makes it fail cleanly instead of being overwritten:

- execute: throttle configs (+ their ``config_change_`` notifications), the
  ``/admin/reassign_partitions`` znode, and a record of the throttles set;
- verify: once nothing is reassigning, the throttle keys deleted (+ notifications);
- cancel: topic znodes reverted, znode entries dropped.  A running ZK-mode
  controller keeps in-flight reassignments in memory and takes no cancel
  through ZooKeeper, so with a controller registered this refuses unless the
  caller forces a controller election (``/controller`` deleted: every
  partition leadership that controller manages moves).

In-flight reassignments are the entries of ``/admin/reassign_partitions`` and
the partitions whose topic znode (v2+) lists adding or removing replicas.

The record of what ``execute`` set lives in ``/kafkatool/reassign_throttles``
(JSON, under the cluster's chroot), so that ``verify``/``cancel`` run from any
host clear exactly those keys, including topics that were only in flight.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkatool.assign.errors import AssignError
from kafkatool.assign.formats import PartitionTarget
from kafkatool.assign.model import Broker, TopicPartition, tp_str
from kafkatool.assign.throttle import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    InFlight,
    ThrottleSettings,
    clear_targets,
    compute_throttles,
)
from kafkatool.zk import codecs, paths
from kafkatool.zk.client import KafkaZk, ZkBadVersionError, ZkError, ZkNodeExistsError, ZkNoNodeError

THROTTLE_RECORD = "/kafkatool/reassign_throttles"

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "cannot execute because there is an existing partition reassignment ({what}); use --additional to "
    "submit in addition to it, or to change the throttle by resubmitting the same file"
)


# -- reading the cluster ---------------------------------------------------------------------------


def read_brokers(zk: KafkaZk) -> dict[int, Broker]:
    """Registered brokers (``/brokers/ids``) with their racks."""
    out: dict[int, Broker] = {}
    for bid, typed in zk.brokers().items():
        rack = typed.value.rack if typed.value is not None else None
        out[bid] = Broker(bid, rack)
    return out


@dataclass
class TopicNode:
    value: codecs.TopicAssignment
    version: int  # zkVersion, for conditional writes


def read_topics(
    zk: KafkaZk, topics: Iterable[str] | None = None, *, undecodable: dict[str, str] | None = None
) -> dict[str, TopicNode]:
    """Topic znodes by name (all topics when ``topics`` is None).  An undecodable one is an
    error, unless ``undecodable`` collects it (name -> reason) so that one bad topic does not
    stop work on the others."""
    names = sorted(set(topics)) if topics is not None else zk.topics()
    out: dict[str, TopicNode] = {}
    for name in names:
        typed = zk.topic_assignment(name)
        if typed is None:
            continue
        if typed.value is None:
            if undecodable is None:
                raise AssignError(f"{zk.display(paths.topic(name))}: {typed.error}")
            undecodable[name] = typed.error or "undecodable"
            continue
        out[name] = TopicNode(typed.value, typed.stat.version)
    return out


def assignment_of(topics: Mapping[str, TopicNode]) -> dict[TopicPartition, list[int]]:
    return {(t, p): list(r) for t, node in topics.items() for p, r in node.value.partitions.items()}


def read_current(zk: KafkaZk, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    """Current replicas of every partition of ``topics``; an unknown topic is an error."""
    topics = sorted(set(topics))
    nodes = read_topics(zk, topics)
    missing = [t for t in topics if t not in nodes]
    if missing:
        raise AssignError(f"topic{'s' if len(missing) > 1 else ''} not found: {', '.join(missing)}")
    return assignment_of(nodes)


def read_isr_and_leaders(
    zk: KafkaZk, topics: Iterable[str]
) -> tuple[dict[TopicPartition, list[int] | None], dict[TopicPartition, int | None]]:
    """Each partition's ISR and leader (-1: none) from its state znode (``.../partitions/P/state``,
    the controller's LeaderAndIsr); None for a partition whose state is missing or does not
    decode."""
    isr: dict[TopicPartition, list[int] | None] = {}
    leaders: dict[TopicPartition, int | None] = {}
    for t, ts in zk.topic_states(sorted(set(topics))).items():
        pids = set(ts.partition_dirs)
        if ts.assignment is not None and ts.assignment.value is not None:
            pids |= set(ts.assignment.value.partitions)
        for p in sorted(pids):
            typed = ts.states.get(p)
            state = typed.value if typed is not None else None
            isr[(t, p)] = list(state.isr) if state is not None else None
            leaders[(t, p)] = state.leader if state is not None else None
    return isr, leaders


@dataclass
class ReassignmentState:
    """What is in flight in the cluster."""

    znode: dict[TopicPartition, list[int]] = field(default_factory=dict)  # /admin/reassign_partitions
    znode_version: int | None = None  # None: no znode
    topics: dict[str, TopicNode] = field(default_factory=dict)  # every topic
    undecodable: dict[str, str] = field(default_factory=dict)  # topic -> why its znode did not decode
    in_flight: dict[TopicPartition, InFlight] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.znode_version is not None or bool(self.in_flight)

    def is_active(self, tp: TopicPartition) -> bool:
        return tp in self.in_flight or tp in self.znode

    def current(self) -> dict[TopicPartition, list[int]]:
        return assignment_of(self.topics)


def read_state(zk: KafkaZk) -> ReassignmentState:
    state = ReassignmentState()
    node = zk.get_or_none(paths.REASSIGN_PARTITIONS)
    if node is not None:
        state.znode_version = node.stat.version
        if node.data.strip():
            decoded = codecs.decode_reassign_partitions(node.data)
            state.znode = {(e.topic, e.partition): list(e.replicas) for e in decoded.partitions}
    state.topics = read_topics(zk, undecodable=state.undecodable)
    for t, tn in state.topics.items():
        for p, adding in tn.value.adding_replicas.items():
            state.in_flight[(t, p)] = InFlight(list(tn.value.partitions.get(p, [])), list(adding))
        for p, removing in tn.value.removing_replicas.items():
            entry = state.in_flight.setdefault((t, p), InFlight(list(tn.value.partitions.get(p, []))))
            entry.removing = list(removing)
    current = state.current()
    for tp, target in state.znode.items():
        if tp not in state.in_flight and tp in current and current[tp] != target:
            # Submitted, not (yet) visible in the topic znode: the targets not held are the adding ones.
            cur = current[tp]
            state.in_flight[tp] = InFlight(
                target + [b for b in cur if b not in target],
                [b for b in target if b not in cur],
                [b for b in cur if b not in target],
            )
    return state


def read_record(zk: KafkaZk) -> tuple[dict, int | None]:
    node = zk.get_or_none(THROTTLE_RECORD)
    if node is None:
        return {}, None
    try:
        doc = json.loads(node.data or b"{}")
    except json.JSONDecodeError:
        doc = {}
    return (doc if isinstance(doc, dict) else {}), node.stat.version


# -- validation ------------------------------------------------------------------------------------


def check_targets(
    targets: list[PartitionTarget],
    brokers: Mapping[int, Broker],
    current: Mapping[TopicPartition, list[int]],
    undecodable: Mapping[str, str] | None = None,
    *,
    brokers_are: str = "registered",
) -> None:
    """Unknown brokers and unknown (or unreadable) partitions, for ZooKeeper and the Admin API
    alike; ``brokers_are`` names where the known brokers come from in the message."""
    known = sorted(brokers)
    for t in targets:
        if undecodable and t.topic in undecodable:
            raise AssignError(f"/brokers/topics/{t.topic}: {undecodable[t.topic]}")
        unknown = [b for b in t.replicas if b not in brokers]
        if unknown:
            raise AssignError(
                f"{tp_str(t.tp)}: unknown broker id{'s' if len(unknown) > 1 else ''} "
                f"{','.join(map(str, unknown))} ({brokers_are} brokers: {','.join(map(str, known)) or 'none'})"
            )
        if t.tp not in current:
            raise AssignError(f"unable to find partition {tp_str(t.tp)} (topic or partition does not exist)")


def _check_readable(state: ReassignmentState, targets: list[PartitionTarget]) -> None:
    for t in targets:
        if t.topic in state.undecodable:
            raise AssignError(f"/brokers/topics/{t.topic}: {state.undecodable[t.topic]}")


# -- the multi-op ----------------------------------------------------------------------------------


def _commit(zk: KafkaZk, ops: list[tuple]) -> list:
    """ZooKeeper multi with versions: ("create", path, data[, sequence]) | ("set", path, data, version)
    | ("delete", path, version) | ("check", path, version)."""
    from kazoo import exceptions as ke

    if not ops:
        return []
    tx = zk.kazoo.transaction()
    for op in ops:
        kind, path = op[0], paths.normalize(op[1])
        if kind == "create":
            tx.create(path, op[2], sequence=len(op) > 3 and op[3])
        elif kind == "set":
            tx.set_data(path, op[2], version=op[3])
        elif kind == "delete":
            tx.delete(path, version=op[2])
        elif kind == "check":
            tx.check(path, op[2])
        else:  # pragma: no cover - programming error
            raise ValueError(kind)
    try:
        results = tx.commit()
    except ke.KazooException as exc:
        raise ZkError(f"{zk.hosts}: transaction failed ({type(exc).__name__})") from None
    for op, result in zip(ops, results, strict=False):
        if isinstance(result, Exception) and not isinstance(result, ke.RolledBackError):
            where = zk.display(op[1])
            if isinstance(result, ke.BadVersionError):
                raise ZkBadVersionError(op[1])
            if isinstance(result, ke.NodeExistsError):
                raise ZkNodeExistsError(op[1])
            if isinstance(result, ke.NoNodeError):
                raise ZkNoNodeError(op[1])
            raise ZkError(f"{where}: {type(result).__name__}")
    return results


def _config_ops(
    zk: KafkaZk, entity_type: str, name: str, set_keys: Mapping[str, str], delete_keys: Iterable[str]
):
    """Ops altering /config/<type>/<name> (conditional on its version) plus the change notification;
    None when nothing would change."""
    path = paths.config_entity(entity_type, name)
    node = zk.get_or_none(path)
    current = codecs.decode_entity_config(node.data if node else None, zk.display(path)).config
    new = {k: v for k, v in current.items() if k not in set(delete_keys)}
    new.update(set_keys)
    if node is not None and new == current:
        return None, current, new
    if node is None and not set_keys:
        return None, current, new
    data = codecs.encode_entity_config(new)
    ops: list[tuple] = [("create", path, data) if node is None else ("set", path, data, node.stat.version)]
    ops.append(
        (
            "create",
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            codecs.encode_config_change(paths.entity_path(entity_type, name)),
            True,
        )
    )
    return ops, current, new


def _ensure_parents(zk: KafkaZk, ops: list[tuple]) -> None:
    for op in ops:
        if op[0] == "create":
            parent = paths.parent(op[1])
            if zk.exists(parent) is None:
                zk.ensure_path(parent)


# -- execute ---------------------------------------------------------------------------------------


@dataclass
class ExecuteResult:
    current: dict[TopicPartition, list[int]]  # rollback
    submitted: dict[TopicPartition, list[int]]
    throttles: ThrottleSettings
    throttles_only: bool = False  # --additional while a znode was in flight: only throttles changed
    #: the broker registered in /controller (None: no controller, nothing moves until one is elected)
    controller: int | None = None


def execute(
    zk: KafkaZk,
    targets: list[PartitionTarget],
    *,
    additional: bool = False,
    throttle: int | None = None,
    dry_run: bool = False,
) -> ExecuteResult:
    pinned = [t for t in targets if t.pinned_dirs()]
    if pinned:
        raise AssignError(
            f"{tp_str(pinned[0].tp)}: log_dirs pins need the AlterReplicaLogDirs API of a broker; "
            '/admin/reassign_partitions carries replicas only (use --bootstrap-server, or "any")'
        )
    brokers = read_brokers(zk)
    state = read_state(zk)
    current_all = state.current()
    check_targets(targets, brokers, current_all, state.undecodable)
    controller = registered_controller(zk)
    proposed = {t.tp: list(t.replicas) for t in targets}
    current = {tp: current_all[tp] for tp in proposed}
    throttles_only = False
    if state.active and not additional:
        what = (
            "/admin/reassign_partitions exists"
            if state.znode_version is not None
            else f"{len(state.in_flight)} partition(s) reassigning"
        )
        raise AssignError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING.format(what=what))
    if state.znode_version is not None:
        # The controller only reacts to the creation of the znode: nothing new can be added to it.
        new = [tp for tp, r in proposed.items() if state.znode.get(tp) != r]
        if new:
            raise AssignError(
                f"{tp_str(new[0])}: /admin/reassign_partitions is in flight and ZooKeeper-mode controllers "
                "only read it when it is created; wait until it is gone (or resubmit the in-flight "
                "partitions unchanged with --additional to change the throttle)"
            )
        throttles_only = True
    settings = compute_throttles(proposed, current, rate=throttle, in_flight=state.in_flight)
    ops: list[tuple] = []
    for topic, cfg in settings.topics.items():
        topic_ops, _, _ = _config_ops(zk, "topics", topic, cfg, ())
        ops += topic_ops or []
    for broker, cfg in settings.brokers.items():
        broker_ops, _, _ = _config_ops(zk, "brokers", str(broker), cfg, ())
        ops += broker_ops or []
    if settings.topics or settings.brokers:
        record, version = read_record(zk)
        merged = _merge_record(record, settings, throttle)
        data = json.dumps(merged, separators=(",", ":"), sort_keys=True).encode()
        ops.append(
            ("create", THROTTLE_RECORD, data) if version is None else ("set", THROTTLE_RECORD, data, version)
        )
    if not throttles_only:
        ops.append(
            ("create", paths.REASSIGN_PARTITIONS, codecs.encode_reassign_partitions(sorted(proposed.items())))
        )
    else:
        ops.append(("check", paths.REASSIGN_PARTITIONS, state.znode_version))
    if not dry_run:
        _ensure_parents(zk, ops)
        try:
            _commit(zk, ops)
        except ZkNodeExistsError as exc:
            raise AssignError(
                CANNOT_EXECUTE_BECAUSE_OF_EXISTING.format(what=f"{zk.display(exc.path)} appeared")
            ) from None
    return ExecuteResult(current, {} if throttles_only else proposed, settings, throttles_only, controller)


def registered_controller(zk: KafkaZk) -> int | None:
    """The broker id in /controller, or None when no controller is registered (or it is unreadable)."""
    node = zk.controller()
    if node is None or node.value is None:
        return None
    return node.value.broker_id


def _merge_record(record: dict, settings: ThrottleSettings, rate: int | None) -> dict:
    topics = set(record.get("topics") or []) | set(settings.topics)
    brokers = {int(b) for b in record.get("brokers") or []} | set(settings.brokers)
    return {
        "version": 1,
        "rate": rate,
        "updated_ms": int(time.time() * 1000),
        "topics": sorted(topics),
        "brokers": sorted(brokers),
    }


# -- verify ----------------------------------------------------------------------------------------

COMPLETED = "completed"
IN_PROGRESS = "in_progress"
DIFFERENT = "no_active_reassignment_but_different"
MISSING = "missing"


@dataclass
class PartitionStatus:
    tp: TopicPartition
    status: str
    current: list[int]
    target: list[int]

    def message(self) -> str:
        """Kafka's wording."""
        name = tp_str(self.tp)
        if self.status == IN_PROGRESS:
            return f"Reassignment of partition {name} is still in progress."
        if self.status == COMPLETED:
            return f"Reassignment of partition {name} is completed."
        if self.status == MISSING:
            return f"Partition {name} does not exist."
        return (
            f"There is no active reassignment of partition {name}, but replica set is "
            f"{','.join(map(str, self.current))} rather than {','.join(map(str, self.target))}."
        )


@dataclass
class ClearResult:
    brokers: list[int] = field(default_factory=list)  # brokers whose keys were deleted
    topics: list[str] = field(default_factory=list)
    skipped_reason: str | None = None


@dataclass
class VerifyResult:
    statuses: list[PartitionStatus]
    cluster_active: bool
    cleared: ClearResult | None

    @property
    def done(self) -> bool:
        return all(s.status == COMPLETED for s in self.statuses)


def classify_partitions(
    targets: list[PartitionTarget],
    current: Mapping[TopicPartition, list[int]],
    in_progress: Mapping[TopicPartition, list[int]],
) -> list[PartitionStatus]:
    """Each target's status, as Kafka's --verify words it; ``in_progress`` maps the partitions
    still moving to the replica list to show for them.  Shared by the ZooKeeper and API paths."""
    out = []
    for t in sorted(targets, key=lambda t: t.tp):
        cur = current.get(t.tp)
        if t.tp in in_progress:
            out.append(PartitionStatus(t.tp, IN_PROGRESS, in_progress[t.tp], list(t.replicas)))
        elif cur is None:
            out.append(PartitionStatus(t.tp, MISSING, [], list(t.replicas)))
        elif cur == list(t.replicas):
            out.append(PartitionStatus(t.tp, COMPLETED, cur, list(t.replicas)))
        else:
            out.append(PartitionStatus(t.tp, DIFFERENT, cur, list(t.replicas)))
    return out


def partition_statuses(state: ReassignmentState, targets: list[PartitionTarget]) -> list[PartitionStatus]:
    current = state.current()
    moving = {
        t.tp: state.in_flight[t.tp].replicas if t.tp in state.in_flight else current[t.tp]
        for t in targets
        if state.is_active(t.tp) and current.get(t.tp) is not None
    }
    return classify_partitions(targets, current, moving)


def verify(
    zk: KafkaZk, targets: list[PartitionTarget], *, preserve_throttles: bool = False, dry_run: bool = False
) -> VerifyResult:
    state = read_state(zk)
    _check_readable(state, targets)
    statuses = partition_statuses(state, targets)
    cleared = None
    if not preserve_throttles:
        if state.active:
            cleared = ClearResult(skipped_reason="reassignments are still in progress in the cluster")
        else:
            cleared = clear_throttles(zk, targets, dry_run=dry_run)
    return VerifyResult(statuses, state.active, cleared)


def clear_throttles(zk: KafkaZk, targets: list[PartitionTarget], *, dry_run: bool = False) -> ClearResult:
    """Delete the throttle keys where Kafka's tool deletes them, plus wherever our record says we
    set them; only entities that hold a key are rewritten.  One multi-op, then the record is gone."""
    live = read_brokers(zk)
    brokers, topics = clear_targets(live, {t.tp: t.replicas for t in targets})
    record, record_version = read_record(zk)
    brokers = sorted(set(brokers) | {int(b) for b in record.get("brokers") or []})
    topics = sorted(set(topics) | set(record.get("topics") or []))
    result = ClearResult()
    ops: list[tuple] = []
    for b in brokers:
        entity_ops, _, _ = _config_ops(zk, "brokers", str(b), {}, BROKER_THROTTLE_KEYS)
        if entity_ops:
            ops += entity_ops
            result.brokers.append(b)
    for t in topics:
        if zk.exists(paths.topic(t)) is None and zk.exists(paths.config_entity("topics", t)) is None:
            continue
        entity_ops, _, _ = _config_ops(zk, "topics", t, {}, TOPIC_THROTTLE_KEYS)
        if entity_ops:
            ops += entity_ops
            result.topics.append(t)
    if record_version is not None:
        ops.append(("delete", THROTTLE_RECORD, record_version))
    if not dry_run:
        _commit(zk, ops)
    return result


# -- cancel ----------------------------------------------------------------------------------------


@dataclass
class CancelResult:
    cancelled: dict[TopicPartition, list[int]] = field(default_factory=dict)  # tp -> replicas after revert
    stray: dict[TopicPartition, list[int]] = field(default_factory=dict)  # replicas left on adding brokers
    controller_moved: bool = False
    cleared: ClearResult | None = None


def cancel(
    zk: KafkaZk,
    targets: list[PartitionTarget],
    *,
    preserve_throttles: bool = False,
    dry_run: bool = False,
    force_controller_election: bool = False,
) -> CancelResult:
    """Revert the file's in-flight partitions to their original replicas.

    ZK-mode controllers take no cancel through ZooKeeper, so this does what a
    cancel leaves behind, in one multi-op: each topic znode gets the original
    replicas (RS minus adding; Kafka loses their order too when the sets overlap)
    with its adding/removing entries dropped, the partitions leave
    ``/admin/reassign_partitions`` (deleted when empty), and ``/controller`` is
    deleted so that the next controller loads the reverted state instead of
    resuming the moves.  Deleting ``/controller`` forces an election, which moves
    every partition leadership in a real cluster: it is only done with
    ``force_controller_election``; without it, a registered controller makes
    this raise AssignError (use the admin API: ``--bootstrap-server``).  With no
    controller registered nothing needs deleting: the next one loads the
    reverted state.
    """
    state = read_state(zk)
    _check_readable(state, targets)
    wanted = {t.tp for t in targets}
    active = sorted(tp for tp in wanted if state.is_active(tp))
    result = CancelResult()
    ops: list[tuple] = []
    by_topic: dict[str, list[int]] = {}
    for topic, p in active:
        by_topic.setdefault(topic, []).append(p)
    for topic, pids in sorted(by_topic.items()):
        node = state.topics.get(topic)
        if node is None:
            continue
        value = node.value
        partitions = {p: list(r) for p, r in value.partitions.items()}
        adding = {p: list(r) for p, r in value.adding_replicas.items()}
        removing = {p: list(r) for p, r in value.removing_replicas.items()}
        touched = False
        for p in pids:
            if p in adding or p in removing:
                add = adding.pop(p, [])
                removing.pop(p, None)
                partitions[p] = [b for b in partitions[p] if b not in add]
                if add:
                    result.stray[(topic, p)] = add
                touched = True
            result.cancelled[(topic, p)] = partitions.get(p, [])
        if touched:
            data = codecs.encode_topic(
                partitions, adding=adding, removing=removing, topic_id=value.topic_id, version=value.version
            )
            ops.append(("set", paths.topic(topic), data, node.version))
    if state.znode_version is not None and any(tp in state.znode for tp in active):
        remaining = {tp: r for tp, r in state.znode.items() if tp not in wanted}
        if remaining:
            data = codecs.encode_reassign_partitions(sorted(remaining.items()))
            ops.append(("set", paths.REASSIGN_PARTITIONS, data, state.znode_version))
        else:
            ops.append(("delete", paths.REASSIGN_PARTITIONS, state.znode_version))
    if ops:
        controller = zk.get_or_none(paths.CONTROLLER)
        if controller is not None and not force_controller_election:
            who = registered_controller(zk)
            raise AssignError(
                f"a controller (broker {who if who is not None else '?'}) is registered: ZooKeeper-mode "
                "controllers keep in-flight reassignments in memory and take no cancel through ZooKeeper, "
                "so reverting the znodes alone would not stop the moves. Cancel with --bootstrap-server "
                "(Kafka 2.4+), or pass --force-controller-election to revert the znodes AND delete "
                "/controller, which forces a controller election and moves partition leadership "
                "across the whole cluster"
            )
        if controller is not None:
            ops.append(("delete", paths.CONTROLLER, controller.stat.version))
            result.controller_moved = True
        if not dry_run:
            _commit(zk, ops)
    if not preserve_throttles:
        after = read_state(zk) if not dry_run else state
        if after.active and not dry_run:
            result.cleared = ClearResult(
                skipped_reason="other reassignments are still in progress in the cluster"
            )
        else:
            result.cleared = clear_throttles(zk, targets, dry_run=dry_run)
    return result


# -- list ------------------------------------------------------------------------------------------


@dataclass
class ListedReassignment:
    tp: TopicPartition
    replicas: list[int]
    adding: list[int]
    removing: list[int]
    source: str  # "topic" (controller has started it) or "znode" (submitted, not visible yet)
    target: list[int] | None = None

    def message(self) -> str:
        text = f"{tp_str(self.tp)}: replicas: {','.join(map(str, self.replicas))}."
        if self.adding:
            text += f" adding: {','.join(map(str, self.adding))}."
        if self.removing:
            text += f" removing: {','.join(map(str, self.removing))}."
        return text


def list_reassignments(zk: KafkaZk) -> tuple[list[ListedReassignment], ReassignmentState]:
    state = read_state(zk)
    out = []
    for tp in sorted(set(state.in_flight) | set(state.znode)):
        f = state.in_flight.get(tp)
        node = state.topics.get(tp[0])
        started = node is not None and (
            tp[1] in node.value.adding_replicas or tp[1] in node.value.removing_replicas
        )
        if f is None:
            cur = state.current().get(tp, [])
            f = InFlight(cur)
        out.append(
            ListedReassignment(
                tp, f.replicas, f.adding, f.removing, "topic" if started else "znode", state.znode.get(tp)
            )
        )
    return out, state
