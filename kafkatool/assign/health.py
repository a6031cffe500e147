"""Cluster health (``kafkatool health``): the problems an operator looks for every morning, each
found by one rule over a :class:`ClusterView` that is loaded from a live cluster (the admin API)
or from ZooKeeper, each naming the partition, broker, topic or group and the command that fixes it.

The partition rules (offline, under-replicated, under/at min ISR, replicas or leaders on brokers
that are not live) and the leftover-throttle rule are ``kafkatool zk check``'s own
(:func:`kafkatool.zk.check.partition_findings`, :func:`~kafkatool.zk.check.throttle_findings`),
source-neutral functions it runs over its ZooKeeper snapshot.

Transactions (a live cluster only): hanging transactions by Kafka 3.7's find-hanging rule
(:func:`kafkatool.broker.txn.views.hanging`, fed by :mod:`kafkatool.broker.txn.live`'s
DescribeProducers and coordinator view), and last stable offsets that trail their high
watermarks (ListOffsets READ_COMMITTED against READ_UNCOMMITTED, :mod:`kafkatool.assign.offsets`)
for longer than the same threshold. Every request is batched per broker: DescribeProducers and
two ListOffsets per leader, ListTransactions per broker, FindCoordinator once and
DescribeTransactions per coordinator.
"""

from __future__ import annotations

import re
import shlex
import statistics
import time
from dataclasses import dataclass, field

from kafkatool.zk.check import ERROR, INFO, WARNING, PartitionView, partition_findings, throttle_findings

#: leader.imbalance.per.broker.percentage's default: the controller rebalances past it
DEFAULT_IMBALANCE_PERCENT = 10


@dataclass
class Finding:
    kind: str
    severity: str
    #: what it is about: "topic-partition", "broker N", "topic T", "group G", "cluster"
    subject: str
    message: str
    #: the command that fixes it (empty when an operator has to look first)
    fix: str = ""
    #: the topic it is about (None: a broker, group or the cluster); --topic filters on it
    topic: str | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        return {
            "type": "finding",
            "kind": self.kind,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "fix": self.fix or None,
        }


@dataclass
class ClusterView:
    #: brokers that are live (registered in ZooKeeper, or in the cluster's metadata)
    brokers: set[int]
    controller: int | None
    partitions: list[PartitionView]
    #: per-topic config overrides, and dynamic broker configs ("<default>" or the id as text)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the brokers' min.insync.replicas and default.replication.factor (None: not known)
    min_isr_default: int = 1
    default_replication_factor: int | None = None
    #: partitions a reassignment is moving
    reassigning: set[tuple[str, int]] = field(default_factory=set)
    #: (topic, partition) -> size in bytes of the leader's (or largest) replica; None: not known
    sizes: dict[tuple[str, int], int] | None = None
    #: group -> total lag; None: not known
    group_lag: dict[str, int] | None = None
    #: brokers the cluster lists that could not be reached
    unreachable: dict[int, str] = field(default_factory=dict)
    #: where the view came from, for the messages
    source: str = ""
    #: the transactions check's data (None: not run: ZooKeeper only, or not asked for)
    transactions: TransactionView | None = None
    #: the connection options a fix command needs (``--bootstrap-server H:P ...``)
    connect: str = ""


@dataclass
class TransactionView:
    """What the transactions findings are judged on, read from a live cluster."""

    #: when the producers were described (epoch ms): ages are measured from it
    now_ms: int
    #: each partition checked: its leader's active producers (DescribeProducers)
    producers: dict[tuple[str, int], object] = field(default_factory=dict)
    #: (last stable offset, high watermark) of each partition ListOffsets answered for
    offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    #: the coordinators' view of the producers asked about (live.coordinator_view); None:
    #: it could not be read (``unchecked`` says why)
    transactional_ids: dict[int, str] | None = field(default_factory=dict)
    descriptions: dict[str, object] = field(default_factory=dict)
    #: why partitions could not be checked: reason -> partitions
    unchecked: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- health


@dataclass
class Thresholds:
    imbalance_percent: float = DEFAULT_IMBALANCE_PERCENT
    min_replication_factor: int | None = None
    #: a partition this many times its topic's median size (and at least skew_min_bytes) is skewed
    skew_ratio: float = 2.0
    skew_min_bytes: int = 64 * 1024 * 1024
    max_lag: int = 10_000
    #: find-hanging's --max-transaction-timeout (Kafka's default: 15 minutes), also how long a
    #: last stable offset may trail its high watermark
    max_transaction_timeout_ms: int = 15 * 60_000
    #: only findings about these topics' partitions and these topics (brokers, groups and the
    #: cluster are always checked); Kafka's TopicFilter regex
    topics: re.Pattern | None = None


def check(view: ClusterView, t: Thresholds) -> list[Finding]:
    f = _check(view, t)
    f += transaction_findings(view.transactions, t, view.connect)
    if t.topics is not None:
        f = [x for x in f if x.topic is None or t.topics.fullmatch(x.topic)]
    return f


def _check(view: ClusterView, t: Thresholds) -> list[Finding]:
    f: list[Finding] = []
    if view.controller is None or view.controller < 0:
        f.append(Finding("controller_missing", ERROR, "cluster", "no broker is acting as controller", ""))
    for b, why in sorted(view.unreachable.items()):
        f.append(
            Finding(
                "broker_unreachable",
                ERROR,
                f"broker {b}",
                f"broker {b} is registered but cannot be reached: {why}",
                "",
            )
        )
    live = view.brokers
    rfs: dict[str, set[int]] = {}
    for p in view.partitions:
        rfs.setdefault(p.topic, set()).add(len(p.replicas))
        min_isr = int(view.topic_configs.get(p.topic, {}).get("min.insync.replicas", view.min_isr_default))
        for kind, sev, msg in partition_findings(p, live, min_isr=min_isr):
            fix = {
                "offline_partition": f"kafkatool leader-election --election-type unclean --topic {p.topic} --partition {p.partition} (loses data; first bring back a broker of ISR {p.isr})",
                "leader_not_live": "",
                "under_replicated": f"kafkatool reassign ... (move {p.name} off the lagging broker) once the broker is checked",
                "replica_on_missing_broker": f"kafkatool reassign ... (move {p.name} onto live brokers)",
                "under_min_isr": "",
                "at_min_isr": "",
            }[kind]
            f.append(Finding(kind, sev, p.name, msg, fix, p.topic))
    # preferred leaders: per broker, the share of the partitions it should lead that it does not
    should: dict[int, int] = {}
    not_led: dict[int, int] = {}
    for p in view.partitions:
        if not p.replicas or p.leader < 0:
            continue
        pref = p.replicas[0]
        should[pref] = should.get(pref, 0) + 1
        if p.leader != pref:
            not_led[pref] = not_led.get(pref, 0) + 1
    for b in sorted(should):
        ratio = 100.0 * not_led.get(b, 0) / should[b]
        if ratio > t.imbalance_percent:
            f.append(
                Finding(
                    "leader_imbalance",
                    WARNING,
                    f"broker {b}",
                    f"broker {b} leads {should[b] - not_led.get(b, 0)} of the {should[b]} partitions it is the "
                    f"preferred leader of ({ratio:.0f}% not led; leader.imbalance.per.broker.percentage "
                    f"{t.imbalance_percent:g}%)",
                    "kafkatool leader-election --election-type preferred --all-topic-partitions",
                )
            )
    for topic, sizes in sorted(rfs.items()):
        rf = max(sizes)
        if len(sizes) > 1:
            f.append(
                Finding(
                    "replication_factor_mixed",
                    WARNING,
                    f"topic {topic}",
                    f"topic {topic}'s partitions have replication factors {sorted(sizes)}",
                    "kafkatool reassign ...",
                    topic,
                )
            )
        if t.min_replication_factor is not None and rf < t.min_replication_factor:
            f.append(
                Finding(
                    "replication_factor_below_minimum",
                    WARNING,
                    f"topic {topic}",
                    f"topic {topic} has replication factor {rf}, below the stated minimum {t.min_replication_factor}",
                    "kafkatool reassign ... (add replicas)",
                    topic,
                )
            )
        elif (
            t.min_replication_factor is None
            and view.default_replication_factor is not None
            and rf != view.default_replication_factor
            and not topic.startswith("__")
        ):
            f.append(
                Finding(
                    "replication_factor_not_default",
                    WARNING,
                    f"topic {topic}",
                    f"topic {topic} has replication factor {rf}; the cluster's default.replication.factor is "
                    f"{view.default_replication_factor}",
                    "kafkatool reassign ... (or state the intended minimum with --min-replication-factor)",
                    topic,
                )
            )
    if view.sizes:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, part), size in view.sizes.items():
            by_topic.setdefault(topic, []).append((part, size))
        for topic, parts in sorted(by_topic.items()):
            if len(parts) < 2:
                continue
            median = statistics.median(s for _, s in parts)
            for part, size in sorted(parts):
                if size >= t.skew_min_bytes and size > t.skew_ratio * max(median, 1):
                    f.append(
                        Finding(
                            "partition_skew",
                            WARNING,
                            f"{topic}-{part}",
                            f"{topic}-{part} holds {size} bytes, {size / max(median, 1):.1f}x its topic's median "
                            f"of {int(median)} (keys hash unevenly, or a producer pins one partition)",
                            "",
                            topic,
                        )
                    )
    for group, lag in sorted((view.group_lag or {}).items()):
        if lag > t.max_lag:
            f.append(
                Finding(
                    "consumer_lag",
                    WARNING,
                    f"group {group}",
                    f"group {group} is {lag} records behind (threshold {t.max_lag})",
                    f"kafkatool groups describe --group {group} (and reset-offsets if it should skip)",
                )
            )
    for topic, part in sorted(view.reassigning):
        f.append(
            Finding(
                "reassignment_in_progress",
                WARNING,
                f"{topic}-{part}",
                f"{topic}-{part} is being reassigned",
                "kafkatool reassign verify",
                topic,
            )
        )
    moving = {t_ for t_, _ in view.reassigning}
    for kind, subject, msg in throttle_findings(view.topic_configs, view.broker_configs, moving):
        f.append(
            Finding(
                kind,
                WARNING,
                subject,
                msg,
                "kafkatool reassign verify (clears throttles), or kafkatool configs alter --delete-config",
                subject.removeprefix("topic ") if subject.startswith("topic ") else None,
            )
        )
    return f


# ----------------------------------------------------------------------------- transactions


def _minutes(ms: int) -> str:
    """A duration for the messages: seconds under a minute, else minutes (one decimal)."""
    if ms < 60_000:
        return f"{max(ms, 0) // 1000} s"
    return f"{ms // 60_000} min" if ms % 60_000 == 0 else f"{ms / 60_000:.1f} min"


def _listed(tps: list[tuple[str, int]], most: int = 5) -> str:
    names = [f"{t}-{p}" for t, p in sorted(tps)]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def transaction_findings(tv: TransactionView | None, t: Thresholds, connect: str = "") -> list[Finding]:
    """Hanging transactions (Kafka 3.7's find-hanging rule, views.hanging, with
    ``max_transaction_timeout_ms``), then last stable offsets trailing their high watermarks
    for longer than that, pinned by a transaction that is not hanging (its coordinator still
    holds it: a long transaction, or one whose markers are not written)."""
    from kafkatool.broker.txn import views as V

    if tv is None:
        return []
    f: list[Finding] = []
    for reason, tps in sorted(tv.unchecked.items()):
        f.append(
            Finding(
                "transactions_not_checked",
                INFO,
                f"{tps[0][0]}-{tps[0][1]}" if len(tps) == 1 else "cluster",
                f"transactions not checked on {len(tps)} partition{'s' * (len(tps) != 1)} "
                f"({_listed(tps)}): {reason}",
                "",
                tps[0][0] if len({tp[0] for tp in tps}) == 1 else None,
            )
        )
    if tv.transactional_ids is None:
        return f
    pre = f"kafkatool transactions {{}} {connect} " if connect else "kafkatool transactions {} "
    producers = [pp for pp in tv.producers.values()]
    max_ms = t.max_transaction_timeout_ms
    groups = V.by_producer(V.candidates(producers, tv.now_ms, max_ms))
    hanging = V.hanging(groups, tv.transactional_ids, tv.descriptions)
    pinned = {(o.topic, o.partition, o.producer.producer_id) for o in hanging}
    for o in hanging:
        pr = o.producer
        if o.transactional_id is None:
            why = "no transactional id at any coordinator holds the producer id"
        elif o.coordinator_state is None:
            why = f"its transactional id {o.transactional_id} is unknown to its coordinator"
        else:
            why = (
                f"the {o.coordinator_state} transaction of its transactional id {o.transactional_id} "
                f"does not include {o.topic}-{o.partition}"
            )
        offsets = tv.offsets.get((o.topic, o.partition))
        where = f" (high watermark {offsets[1]})" if offsets else ""
        f.append(
            Finding(
                "hanging_transaction",
                ERROR,
                f"{o.topic}-{o.partition}",
                f"{o.topic}-{o.partition} has a hanging transaction: producer id {pr.producer_id}, epoch "
                f"{pr.producer_epoch}, open since offset {pr.current_txn_start_offset}{where}, last written "
                f"{_minutes(tv.now_ms - pr.last_timestamp)} ago (threshold {_minutes(max_ms)}); {why}, so "
                "no marker will end it: the last stable offset stays there, read_committed consumers stall "
                "and the cleaner cannot compact past it",
                pre.format("abort") + f"--topic {shlex.quote(o.topic)} --partition {o.partition} "
                f"--start-offset {pr.current_txn_start_offset}",
                o.topic,
            )
        )
    for (topic, part), (lso, hw) in sorted(tv.offsets.items()):
        pp = tv.producers.get((topic, part))
        if lso >= hw or pp is None:
            continue
        pr = next((x for x in pp.producers if x.current_txn_start_offset == lso), None)
        if pr is None or (topic, part, pr.producer_id) in pinned:
            continue  # ended since it was asked, or the hanging finding above
        tid = tv.transactional_ids.get(pr.producer_id)
        desc = tv.descriptions.get(tid) if tid is not None else None
        if desc is not None and (topic, part) in desc.partitions and desc.start_ms >= 0:
            age = tv.now_ms - desc.start_ms
            what = (
                f"the transaction of transactional id {tid} (producer id {pr.producer_id}, epoch "
                f"{pr.producer_epoch}), {desc.state} at its coordinator (broker {desc.coordinator}) for "
                f"{_minutes(age)}, transaction.timeout.ms {desc.timeout_ms}"
            )
            fix = pre.format("describe") + f"--transactional-id {shlex.quote(tid)}"
        else:
            age = tv.now_ms - pr.last_timestamp
            what = (
                f"the open transaction of producer id {pr.producer_id} (epoch {pr.producer_epoch}), last "
                f"written {_minutes(age)} ago"
            )
            fix = pre.format("describe-producers") + f"--topic {shlex.quote(topic)} --partition {part}"
        if age <= max_ms:
            continue
        f.append(
            Finding(
                "last_stable_offset_stuck",
                WARNING,
                f"{topic}-{part}",
                f"{topic}-{part}'s last stable offset {lso} trails its high watermark {hw} by {hw - lso} "
                f"offsets (threshold {_minutes(max_ms)}): {what}; read_committed consumers wait at {lso} "
                "until it ends",
                fix,
                topic,
            )
        )
    return f


# ----------------------------------------------------------------------------- loaders


def load_from_api(
    admin,
    *,
    with_lag: bool = True,
    with_sizes: bool = True,
    max_transaction_timeout_ms: int | None = None,
    topics: re.Pattern | None = None,
) -> ClusterView:
    """Metadata, configs, reassignments, log dir sizes and group lag of a live cluster; with
    ``max_transaction_timeout_ms``, the transactions of the partitions ``topics`` takes too."""
    from kafkatool.assign.kafka_client import KafkaAdminError, describe_configs, describe_topic_configs
    from kafkatool.protocol.apis import API_BY_KEY

    meta = admin.metadata()
    view = ClusterView(
        brokers=set(meta.brokers),
        controller=meta.controller_id,
        partitions=[],
        source="the cluster's metadata",
    )
    for topic, parts in sorted(meta.topics.items()):
        for pid, info in sorted(parts.items()):
            view.partitions.append(
                PartitionView(topic, pid, list(info.replicas), list(info.isr), info.leader)
            )
    for b in sorted(meta.brokers):
        try:
            admin.node(b)
        except KafkaAdminError as exc:
            view.unreachable[b] = str(exc)
    reachable = [b for b in sorted(meta.brokers) if b not in view.unreachable]
    tc = describe_topic_configs(admin, sorted(meta.topics))
    view.topic_configs = {t: {k: v for k, (v, src) in cfg.items() if src == 1} for t, cfg in tc.items()}
    if reachable:
        bc = describe_configs(admin, 4, [str(b) for b in reachable])
        for b, cfg in bc.items():
            # dynamic per-broker (DYNAMIC_BROKER_CONFIG, 2) and cluster-default (DYNAMIC_DEFAULT_BROKER_CONFIG, 3)
            view.broker_configs[b] = {k: v for k, (v, src) in cfg.items() if src in (2, 3)}
        first = bc[str(reachable[0])]
        if "min.insync.replicas" in first:
            view.min_isr_default = int(first["min.insync.replicas"][0])
        if "default.replication.factor" in first:
            view.default_replication_factor = int(first["default.replication.factor"][0])
        else:
            view.default_replication_factor = 1
    try:
        resp = admin.controller().request(46, API_BY_KEY[46].request(timeout_ms=30000, topics=None))
        for t in resp.topics or []:
            for p in t.partitions:
                view.reassigning.add((t.name, p.partition_index))
    except KafkaAdminError:
        pass  # a cluster without ListPartitionReassignments (Kafka < 2.4): ZooKeeper says
    if with_sizes and reachable:
        view.sizes = _sizes(admin, reachable, {(p.topic, p.partition): p.leader for p in view.partitions})
    if with_lag:
        from kafkatool.broker.group import live

        view.group_lag = {}
        for gid in sorted(live.list_groups(admin)):
            g = live.describe(admin, gid)
            view.group_lag[gid] = sum(r.lag for r in g.rows if r.lag is not None)
    if max_transaction_timeout_ms is not None:
        checked = [p for p in view.partitions if topics is None or topics.fullmatch(p.topic)]
        view.transactions = _transactions(admin, checked, view.unreachable, max_transaction_timeout_ms)
    return view


def _transactions(
    admin, partitions: list[PartitionView], unreachable: dict[int, str], max_ms: int
) -> TransactionView:
    """DescribeProducers and the last stable offset and high watermark (ListOffsets LATEST,
    READ_COMMITTED and READ_UNCOMMITTED) of each partition at its leader, then what the
    coordinators hold of the producers that matter: find-hanging's candidates and each producer
    whose open transaction pins a last stable offset. A partition without a reachable leader is
    left out (the offline or unreachable finding names it)."""
    from kafkatool.assign import offsets as OF
    from kafkatool.assign.kafka_client import KafkaAdminError
    from kafkatool.broker.txn import live
    from kafkatool.broker.txn import views as V
    from kafkatool.log.log import LATEST_TIMESTAMP

    tps = [(p.topic, p.partition) for p in partitions if p.leader >= 0 and p.leader not in unreachable]
    tv = TransactionView(now_ms=int(time.time() * 1000))
    if not tps:
        return tv
    try:
        answers = live.describe_producers(admin, tps)
    except KafkaAdminError as exc:
        answers = {tp: exc for tp in tps}
    for tp, a in answers.items():
        if isinstance(a, Exception):
            tv.unchecked.setdefault(f"DescribeProducers: {a}", []).append(tp)
        else:
            tv.producers[tp] = a
    tv.now_ms = int(time.time() * 1000)
    asked = sorted(tv.producers)
    if asked:
        try:
            committed = OF.list_offsets(admin, asked, LATEST_TIMESTAMP, isolation=OF.READ_COMMITTED)
            high = OF.list_offsets(admin, asked, LATEST_TIMESTAMP, isolation=OF.READ_UNCOMMITTED)
        except KafkaAdminError as exc:
            committed, high = {}, {}
            tv.unchecked.setdefault(f"ListOffsets: {exc}", []).extend(asked)
        for tp in asked if committed else ():
            c, h = committed[tp], high[tp]
            if c.error or h.error:
                tv.unchecked.setdefault(f"ListOffsets: {c.error or h.error}", []).append(tp)
            else:
                tv.offsets[tp] = (c.offset, h.offset)
    pids = {o.producer.producer_id for o in V.candidates(list(tv.producers.values()), tv.now_ms, max_ms)}
    for tp, (lso, hw) in tv.offsets.items():
        if lso < hw:
            pids |= {
                pr.producer_id for pr in tv.producers[tp].producers if pr.current_txn_start_offset == lso
            }
    try:
        tv.transactional_ids, tv.descriptions = live.coordinator_view(admin, pids)
    except KafkaAdminError as exc:
        tv.transactional_ids = None
        tv.unchecked.setdefault(str(exc), []).extend(asked)
    return tv


def _sizes(admin, brokers: list[int], leaders: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """DescribeLogDirs on every broker: the leader's replica size (the largest where leaderless)."""
    from kafkatool.assign.kafka_client import KafkaAdminError
    from kafkatool.protocol.apis import API_BY_KEY

    by_broker: dict[tuple[str, int], dict[int, int]] = {}
    for b in brokers:
        try:
            resp = admin.request(35, API_BY_KEY[35].request(topics=None), b)
        except KafkaAdminError:
            continue
        for d in resp.results:
            if d.error_code:
                continue
            for t in d.topics:
                for p in t.partitions:
                    by_broker.setdefault((t.name, p.partition_index), {})[b] = p.partition_size
    out = {}
    for tp, sizes in by_broker.items():
        leader = leaders.get(tp, -1)
        out[tp] = sizes.get(leader, max(sizes.values()))
    return out


def load_from_zk(snap) -> ClusterView:
    """The same view from a ZooKeeper snapshot (``zk.check.load_snapshot``)."""
    view = ClusterView(brokers=set(snap.brokers), controller=None, partitions=[], source="ZooKeeper")
    if snap.controller is not None and snap.controller.value is not None:
        view.controller = snap.controller.value.broker_id
    for topic, ts in sorted(snap.topics.items()):
        if ts.assignment is None or ts.assignment.value is None:
            continue
        a = ts.assignment.value
        for pid, replicas in sorted(a.partitions.items()):
            st = ts.states.get(pid)
            if st is None or st.value is None:
                continue
            view.partitions.append(
                PartitionView(
                    topic,
                    pid,
                    list(replicas),
                    list(st.value.isr),
                    st.value.leader,
                    list(a.adding_replicas.get(pid, ())),
                )
            )
            if a.adding_replicas.get(pid) or a.removing_replicas.get(pid):
                view.reassigning.add((topic, pid))
    if snap.reassign is not None and snap.reassign.value is not None:
        view.reassigning |= {(p.topic, p.partition) for p in snap.reassign.value.partitions}
    for e in snap.topic_configs:
        if e.config is not None:
            view.topic_configs[e.name] = dict(e.config.config)
    for e in snap.broker_configs:
        if e.config is not None:
            view.broker_configs[e.name] = dict(e.config.config)
    default = view.broker_configs.get("<default>", {})
    if "min.insync.replicas" in default:
        view.min_isr_default = int(default["min.insync.replicas"])
    return view
