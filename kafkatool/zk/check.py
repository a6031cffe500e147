"""Invariants a forensic user checks in a Kafka cluster's ZooKeeper data.

``load_snapshot`` reads everything once; ``run_checks`` is a pure function of
that snapshot (and a clock), so each rule can be tested on a real layout.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from kafkatool.zk import codecs, paths
from kafkatool.zk.client import ConfigEntity, KafkaZk, TopicState, Typed, ZNodeStat

ERROR = "error"
WARNING = "warning"
#: a note that changes no exit status (health: a check that could not run on some partitions)
INFO = "info"


@dataclass
class Finding:
    kind: str
    path: str
    message: str
    severity: str = ERROR

    def to_json(self) -> dict:
        return {
            "type": "finding",
            "kind": self.kind,
            "severity": self.severity,
            "path": self.path,
            "message": self.message,
        }


@dataclass
class PartitionView:
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    #: replicas being added by a reassignment (not expected in the ISR yet)
    adding: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


# ---- rules shared with `kafkatool health` (source-neutral: a snapshot or a live cluster)


def partition_findings(
    p: PartitionView, live: set[int] | None, *, min_isr: int | None = None
) -> list[tuple[str, str, str]]:
    """(kind, severity, message) of one partition's state.  ``live`` None skips the liveness
    rules (a stopped cluster: said once, not per partition); ``min_isr`` None skips min ISR."""
    out = []
    if p.leader < 0:
        out.append(("offline_partition", ERROR, f"{p.name} has no leader (ISR {p.isr})"))
    elif live is not None and p.leader not in live:
        out.append(("leader_not_live", ERROR, f"{p.name}: leader {p.leader} is not a registered broker"))
    expected = [r for r in p.replicas if r not in p.adding]
    missing = [r for r in expected if r not in p.isr]
    if p.leader >= 0 and missing:
        out.append(
            (
                "under_replicated",
                WARNING,
                f"{p.name}: replicas {missing} out of ISR {p.isr} (replicas {p.replicas})",
            )
        )
    if live is not None:
        gone = [r for r in p.replicas if r not in live]
        if gone:
            out.append(
                (
                    "replica_on_missing_broker",
                    ERROR,
                    f"{p.name}: replicas {gone} are on brokers that are not live (replicas {p.replicas})",
                )
            )
    if min_isr is not None and p.leader >= 0 and len(p.replicas) >= min_isr:
        if len(p.isr) < min_isr:
            out.append(
                (
                    "under_min_isr",
                    ERROR,
                    f"{p.name}: ISR {p.isr} is below min.insync.replicas={min_isr}: acks=all produce fails",
                )
            )
        elif len(p.isr) == min_isr and len(p.replicas) > min_isr:
            out.append(
                (
                    "at_min_isr",
                    WARNING,
                    f"{p.name}: ISR {p.isr} is at min.insync.replicas={min_isr}: one more loss stops acks=all",
                )
            )
    return out


def throttle_findings(
    topic_configs: dict[str, dict[str, str]],
    broker_configs: dict[str, dict[str, str]],
    moving_topics: set[str],
) -> list[tuple[str, str, str]]:
    """(kind = "leftover_throttle", subject, message): replication throttles nobody cleared
    (kafka-reassign-partitions --verify clears them once the reassignment is done)."""
    out = []
    for topic, cfg in sorted(topic_configs.items()):
        keys = [k for k in paths.TOPIC_THROTTLE_KEYS if cfg.get(k)]
        if keys and topic not in moving_topics:
            out.append(
                (
                    "leftover_throttle",
                    f"topic {topic}",
                    f"topic {topic} has {', '.join(keys)} but no reassignment is moving it",
                )
            )
    for broker, cfg in sorted(broker_configs.items()):
        keys = [k for k in paths.BROKER_THROTTLE_KEYS if cfg.get(k)]
        if keys and not moving_topics:
            out.append(
                (
                    "leftover_throttle",
                    f"broker {broker}",
                    f"broker {broker} has {', '.join(keys)} but no reassignment is active",
                )
            )
    return out


@dataclass
class Snapshot:
    cluster_id: Typed | None
    controller: Typed | None
    controller_epoch: Typed | None
    brokers: dict[int, Typed]
    topics: dict[str, TopicState]
    reassign: Typed | None
    preferred_election: Typed | None
    delete_topics: dict[str, ZNodeStat] = field(default_factory=dict)
    notifications: dict[str, ZNodeStat] = field(
        default_factory=dict
    )  # isr_change_* and log_dir_event_* paths
    topic_configs: list[ConfigEntity] = field(default_factory=list)
    broker_configs: list[ConfigEntity] = field(default_factory=list)


def load_snapshot(zk: KafkaZk) -> Snapshot:
    snap = Snapshot(
        cluster_id=zk.cluster_id(),
        controller=zk.controller(),
        controller_epoch=zk.controller_epoch(),
        brokers=zk.brokers(),
        topics=zk.topic_states(),
        reassign=zk.reassign_partitions(),
        preferred_election=zk.preferred_replica_election(),
    )
    for t in zk.children_or_empty(paths.DELETE_TOPICS):
        s = zk.exists(paths.delete_topic(t))
        if s is not None:
            snap.delete_topics[t] = s
    for root in (paths.ISR_CHANGE_NOTIFICATION, paths.LOG_DIR_EVENT_NOTIFICATION):
        for name in zk.children_or_empty(root):
            s = zk.exists(f"{root}/{name}")
            if s is not None:
                snap.notifications[f"{root}/{name}"] = s
    snap.topic_configs = zk.entity_configs("topics")
    snap.broker_configs = zk.entity_configs("brokers")
    return snap


def _age(stat: ZNodeStat, now_ms: int) -> str:
    secs = max(0, now_ms - stat.mtime_ms) // 1000
    if secs < 120:
        return f"{secs} s"
    if secs < 7200:
        return f"{secs // 60} min"
    return f"{secs // 3600} h"


def reassigning_topics(snap: Snapshot) -> set[str]:
    """Topics with an active reassignment (adding/removing replicas, or in the legacy znode)."""
    out = {
        t
        for t, ts in snap.topics.items()
        if ts.assignment and ts.assignment.value and ts.assignment.value.reassigning
    }
    if snap.reassign is not None and snap.reassign.value is not None:
        out |= {p.topic for p in snap.reassign.value.partitions}
    return out


def run_checks(snap: Snapshot, *, now_ms: int | None = None, stale_after_s: float = 300.0) -> list[Finding]:
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stale_ms = int(stale_after_s * 1000)
    f: list[Finding] = []
    live = set(snap.brokers)

    def undecodable(t: Typed | None) -> bool:
        if t is not None and t.error is not None:
            f.append(Finding("undecodable_payload", t.path, t.error))
            return True
        return False

    # ---- cluster id, controller, epochs
    if snap.cluster_id is None:
        f.append(Finding("missing_cluster_id", paths.CLUSTER_ID, "no /cluster/id", WARNING))
    else:
        undecodable(snap.cluster_id)
    controller_epoch = None
    if snap.controller_epoch is not None and not undecodable(snap.controller_epoch):
        controller_epoch = snap.controller_epoch.value
    # No broker registered and no controller: the cluster is stopped (or a restored tree whose
    # brokers have not started). Said once, instead of a dead leader per partition.
    stopped = not live and snap.controller is None
    if stopped:
        f.append(
            Finding(
                "cluster_stopped",
                paths.BROKER_IDS,
                "no broker is registered and no /controller: the cluster is stopped (or restored and not "
                "started yet); leaders and the controller are checked once brokers register",
                WARNING,
            )
        )
    elif snap.controller is None:
        f.append(
            Finding(
                "no_controller",
                paths.CONTROLLER,
                "no /controller: no broker is acting as controller",
                WARNING,
            )
        )
    elif not undecodable(snap.controller):
        c: codecs.ControllerInfo = snap.controller.value
        if c.is_kraft:
            pass  # ZK->KRaft migration: a KRaft controller id, persistent node
        elif c.broker_id not in live:
            f.append(
                Finding(
                    "controller_not_live",
                    paths.CONTROLLER,
                    f"controller is broker {c.broker_id}, which is not registered",
                )
            )
        else:
            reg = snap.brokers[c.broker_id].stat
            if snap.controller.stat.ephemeral_owner != reg.ephemeral_owner:
                f.append(
                    Finding(
                        "controller_session_mismatch",
                        paths.CONTROLLER,
                        f"/controller is owned by session 0x{snap.controller.stat.ephemeral_owner:x} but broker "
                        f"{c.broker_id} registered with session 0x{reg.ephemeral_owner:x}",
                    )
                )
        if snap.controller_epoch is None:
            f.append(
                Finding(
                    "epoch_inconsistent",
                    paths.CONTROLLER_EPOCH,
                    "/controller exists but /controller_epoch does not",
                )
            )

    # ---- broker registrations
    by_endpoint: dict[str, list[int]] = defaultdict(list)
    by_session: dict[int, list[int]] = defaultdict(list)
    for b, t in sorted(snap.brokers.items()):
        if not t.stat.ephemeral:
            f.append(
                Finding(
                    "broker_registration_not_ephemeral",
                    t.path,
                    f"broker {b}'s registration is persistent: no live session owns it (restored or faked?)",
                )
            )
        else:
            by_session[t.stat.ephemeral_owner].append(b)
        if undecodable(t):
            continue
        for e in t.value.endpoints:
            if e.host:
                by_endpoint[f"{e.host}:{e.port}"].append(b)
    for ep, ids in sorted(by_endpoint.items()):
        if len(ids) > 1:
            f.append(
                Finding(
                    "duplicate_broker_registration",
                    paths.BROKER_IDS,
                    f"brokers {', '.join(map(str, ids))} all advertise {ep}",
                )
            )
    for session, ids in sorted(by_session.items()):
        if len(ids) > 1:
            f.append(
                Finding(
                    "duplicate_broker_registration",
                    paths.BROKER_IDS,
                    f"brokers {', '.join(map(str, ids))} are registered by the same session 0x{session:x}",
                )
            )

    # ---- topics and partitions
    for topic, ts in sorted(snap.topics.items()):
        tpath = paths.topic(topic)
        if ts.assignment is None or undecodable(ts.assignment):
            continue
        a: codecs.TopicAssignment = ts.assignment.value
        if not a.partitions:
            f.append(Finding("empty_assignment", tpath, f"topic {topic} has no partitions in its assignment"))
        for pid, replicas in a.partitions.items():
            spath = paths.partition_state(topic, pid)
            if len(set(replicas)) != len(replicas):
                f.append(
                    Finding("duplicate_replica", tpath, f"{topic}-{pid}: replicas {replicas} repeat a broker")
                )
            st = ts.states.get(pid)
            if st is None:
                f.append(
                    Finding(
                        "missing_partition_state",
                        spath,
                        f"{topic}-{pid} is assigned to {replicas} but has no state znode",
                    )
                )
                continue
            if undecodable(st):
                continue
            s: codecs.PartitionState = st.value
            extra_isr = [b for b in s.isr if b not in replicas]
            if extra_isr:
                f.append(
                    Finding(
                        "isr_not_subset_of_replicas",
                        spath,
                        f"{topic}-{pid}: ISR {s.isr} has {extra_isr} not in replicas {replicas}",
                    )
                )
            for kind, severity, message in partition_findings(
                PartitionView(
                    topic, pid, list(replicas), list(s.isr), s.leader, list(a.adding_replicas.get(pid, ()))
                ),
                None if stopped else live,
            ):
                if kind in ("offline_partition", "leader_not_live", "under_replicated"):
                    f.append(Finding(kind, spath, message, severity))
            if s.leader >= 0:
                if s.leader not in replicas:
                    f.append(
                        Finding(
                            "leader_not_in_replicas",
                            spath,
                            f"{topic}-{pid}: leader {s.leader} is not in replicas {replicas}",
                        )
                    )
                if s.leader not in s.isr:
                    f.append(
                        Finding(
                            "leader_not_in_isr",
                            spath,
                            f"{topic}-{pid}: leader {s.leader} is not in ISR {s.isr}",
                        )
                    )
            if controller_epoch is not None and s.controller_epoch > controller_epoch:
                f.append(
                    Finding(
                        "epoch_inconsistent",
                        spath,
                        f"{topic}-{pid}: written by controller epoch {s.controller_epoch}, newer than /controller_epoch {controller_epoch}",
                    )
                )
            if s.leader_epoch > st.stat.version:
                f.append(
                    Finding(
                        "epoch_inconsistent",
                        spath,
                        f"{topic}-{pid}: leader epoch {s.leader_epoch} exceeds the znode's version {st.stat.version}; "
                        "every leader change rewrites the state, so the node was recreated",
                    )
                )
        for pid in sorted(set(ts.states) - set(a.partitions)):
            f.append(
                Finding(
                    "orphan_partition_state",
                    paths.partition_state(topic, pid),
                    f"{topic}-{pid} has state but is not in the assignment",
                )
            )

    # ---- /admin
    if snap.reassign is not None and not undecodable(snap.reassign):
        r: codecs.ReassignPartitions = snap.reassign.value
        for p in r.partitions:
            ts = snap.topics.get(p.topic)
            a = ts.assignment.value if ts and ts.assignment else None
            if a is None or p.partition not in a.partitions:
                f.append(
                    Finding(
                        "invalid_reassignment_entry",
                        paths.REASSIGN_PARTITIONS,
                        f"{p.topic}-{p.partition} does not exist; the controller drops this entry",
                    )
                )
            else:
                unknown = [b for b in p.replicas if b not in live]
                if unknown:
                    f.append(
                        Finding(
                            "reassignment_to_dead_broker",
                            paths.REASSIGN_PARTITIONS,
                            f"{p.topic}-{p.partition}: target replicas {unknown} are not registered; the move cannot finish",
                        )
                    )
    for t in (snap.reassign, snap.preferred_election):
        if t is not None and now_ms - t.stat.mtime_ms > stale_ms:
            f.append(
                Finding(
                    "stuck_admin_node",
                    t.path,
                    f"{t.path} unchanged for {_age(t.stat, now_ms)}; the controller should have consumed it",
                )
            )
    for topic, stat in sorted(snap.delete_topics.items()):
        p = paths.delete_topic(topic)
        if topic not in snap.topics:
            f.append(
                Finding("stuck_admin_node", p, f"deletion marker for {topic}, but the topic is already gone")
            )
        elif now_ms - stat.mtime_ms > stale_ms:
            f.append(
                Finding(
                    "stuck_admin_node",
                    p,
                    f"topic {topic} marked for deletion {_age(stat, now_ms)} ago and still present",
                )
            )
    for p, stat in sorted(snap.notifications.items()):
        if now_ms - stat.mtime_ms > stale_ms:
            f.append(Finding("stuck_notification", p, f"{p} not consumed for {_age(stat, now_ms)}"))

    # ---- throttles (the rule `kafkatool health` runs too)
    topic_configs, broker_configs = {}, {}
    for e in snap.topic_configs:
        if e.error:
            f.append(Finding("undecodable_payload", e.path, e.error))
        elif e.config:
            topic_configs[e.name] = e.config.config
    for e in snap.broker_configs:
        if e.error:
            f.append(Finding("undecodable_payload", e.path, e.error))
        elif e.config:
            broker_configs[e.name] = e.config.config
    for kind, subject, message in throttle_findings(topic_configs, broker_configs, reassigning_topics(snap)):
        kind_of, name = subject.split(" ", 1)
        path = paths.config_entity("topics" if kind_of == "topic" else "brokers", name)
        f.append(Finding(kind, path, message, WARNING))
    return f
