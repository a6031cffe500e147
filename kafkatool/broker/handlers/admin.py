"""Admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DescribeConfigs (32),
AlterConfigs (33), IncrementalAlterConfigs (44), DescribeCluster (60)."""

from __future__ import annotations

import collections
import itertools
import json
import logging

from kafkatool.assign.kafka_placement import replication_factor_error
from kafkatool.broker import config as C
from kafkatool.broker import loggers
from kafkatool.broker.group.consumer import GROUP_CONFIGS, ConsumerGroupError, validate_group_configs
from kafkatool.broker.handlers.metadata import AUTHORIZED_OPS_OMITTED, from_wire_uuid, wire_uuid
from kafkatool.broker.read_only import READ_ONLY_MSG
from kafkatool.broker.security import acl
from kafkatool.errors import KafkatoolError
from kafkatool.formats.java_collections import hash_map_order, java_string_hash
from kafkatool.formats.properties import parse_java_int
from kafkatool.formats.schema import ZERO_UUID
from kafkatool.log import topic_settings as ts
from kafkatool.log.topic_settings import topic_name_error
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    AlterConfigsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from kafkatool.protocol.generated.alter_configs_response import AlterConfigsResourceResponse
from kafkatool.protocol.generated.create_partitions_response import CreatePartitionsTopicResult
from kafkatool.protocol.generated.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from kafkatool.protocol.generated.delete_topics_response import DeletableTopicResult
from kafkatool.protocol.generated.describe_cluster_response import DescribeClusterBroker
from kafkatool.protocol.generated.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kafkatool.protocol.generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncAlterConfigsResourceResponse,
)
from kafkatool.zk.client import ZkNodeExistsError

log = logging.getLogger("kafkatool.broker")

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _topic_configs_view(broker, t) -> list[tuple[str, str | None, int, int]]:
    """(name, value, source, type) of every topic config."""
    out = []
    for name, (_syn, kind) in sorted(C.TOPIC_CONFIGS.items()):
        if name in t.configs:
            out.append((name, t.configs[name], C.SOURCE_TOPIC, kind))
        else:
            value, source = broker.config.broker_value_for_topic(name)
            out.append((name, value, source, kind))
    return out


# ---------------------------------------------------------------- CreateTopics
#: ThrottlingQuotaExceededException's words (Errors.THROTTLING_QUOTA_EXCEEDED)
THROTTLED_MSG = "The throttling quota has been exceeded."


def _mutation_quota(ctx, strict_since: int):
    """KIP-599's controller mutation quota of this request (None: none applies)."""
    if ctx.quota is None:
        return None
    return ctx.broker.quotas.new_mutation_quota(ctx, strict_since)


def _colliding_topics(broker, name: str) -> list[str]:
    """The existing topics whose names differ from ``name`` only by '.' against '_' (Kafka's
    Topic.hasCollision), in name order: Kafka refuses to create such a topic (their metric
    names would be one).  Of several, KRaft names the first of its TimelineHashSet and ZooKeeper
    mode lists a Scala Set, orders this does not reproduce."""
    spots = [i for i, ch in enumerate(name) if ch in "._"]
    if not spots:
        return []
    topics = broker.metadata.topics
    if len(spots) <= 8:  # the names it could collide with, looked up (no walk over every topic)
        chars = list(name)
        found = []
        for combo in itertools.product("._", repeat=len(spots)):
            for i, ch in zip(spots, combo, strict=True):
                chars[i] = ch
            other = "".join(chars)
            if other != name and other in topics:
                found.append(other)
    else:
        unified = ts.topic_name_collision(name)
        found = [t for t in topics if t != name and ts.topic_name_collision(t) == unified]
    return sorted(found)


def _create_one(broker, ct, version: int, validate_only: bool, mutation=None) -> CreatableTopicResult:
    r = CreatableTopicResult(
        name=ct.name,
        topic_id=ZERO_UUID,
        error_code=0,
        error_message=None,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
    if broker.topic(ct.name) is not None:
        r.error_code, r.error_message = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{ct.name}' already exists."
        return r
    # KRaft's ReplicationControlManager.validateNewTopicNames: Topic.validate's error, which a
    # collision of '.' and '_' with an existing topic replaces (and an existing topic of the
    # very name both)
    err = topic_name_error(ct.name)
    colliding = _colliding_topics(broker, ct.name) if broker.cluster is None else []
    if colliding:
        err = f"Topic '{ct.name}' collides with existing topic: {colliding[0]}"
    if err is not None:
        r.error_code, r.error_message = ErrorCode.INVALID_TOPIC_EXCEPTION, err
        return r
    if broker.read_only:
        r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, READ_ONLY_MSG
        return r
    cluster = broker.cluster
    live = set(broker.replicas.live_brokers) if cluster is not None else {broker.node_id}
    assignment = None
    if ct.assignments:
        parts = len(ct.assignments)
        assignment = {a.partition_index: list(a.broker_ids) for a in ct.assignments}
        for a in ct.assignments:
            if cluster is not None:
                ids = list(a.broker_ids)
                if not ids or len(set(ids)) != len(ids) or any(b not in live for b in ids):
                    r.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                    r.error_message = (
                        f"replica assignment {ids} is empty, repeats or names a broker not alive"
                    )
                    return r
                continue
            if list(a.broker_ids) != [broker.node_id]:
                r.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                r.error_message = (
                    f"replica assignment {list(a.broker_ids)} names brokers other than {broker.node_id}"
                )
                return r
        if sorted(a.partition_index for a in ct.assignments) != list(range(parts)):
            r.error_code, r.error_message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1"
            return r
    else:
        parts = broker.config.int("num.partitions") if ct.num_partitions == -1 else ct.num_partitions
    if parts <= 0:
        r.error_code, r.error_message = (
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions must be larger than 0.",
        )
        return r
    if ct.replication_factor == -1:
        rf = broker.config.int("default.replication.factor") if cluster is not None else 1
    else:
        rf = ct.replication_factor
    if assignment is not None:
        rf = len(next(iter(assignment.values())))
    rf_error = replication_factor_error(rf, len(live))
    if rf_error is not None and (rf > 0 or not ct.assignments):
        r.error_code, r.error_message = ErrorCode.INVALID_REPLICATION_FACTOR, rf_error
        return r
    if cluster is not None:
        # ZooKeeper mode: AdminZkClient.validateTopicCreate, after the placement's checks
        colliding = _colliding_topics(broker, ct.name)
        if colliding:
            r.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            r.error_message = f"Topic '{ct.name}' collides with existing topics: {', '.join(colliding)}"
            return r
    configs = {}
    for c in ct.configs:
        try:
            C.validate_topic_config(c.name, c.value)
        except C.ConfigError as exc:
            r.error_code, r.error_message = ErrorCode.INVALID_CONFIG, str(exc)
            return r
        if c.value is not None:
            configs[c.name] = c.value
    try:
        ts.validate_topic_change(configs, broker.config.topic_defaults())
        broker.config.log_config(configs)
    except ts.SettingsError as exc:  # BrokerConfig's ConfigError is one
        r.error_code, r.error_message = ErrorCode.INVALID_CONFIG, str(exc)
        return r
    r.num_partitions = parts
    r.replication_factor = rf
    if validate_only:
        return r
    if mutation is not None and not mutation.record(parts):
        r.error_code, r.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MSG
        r.num_partitions = r.replication_factor = -1
        return r
    try:
        t = broker.create_topic(ct.name, parts, configs, replication_factor=rf, assignment=assignment)
    except ZkNodeExistsError:
        r.error_code, r.error_message = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{ct.name}' already exists."
        return r
    r.topic_id = wire_uuid(t.topic_id)
    if version >= 5:
        r.configs = [
            CreatableTopicConfigs(name=n, value=v, read_only=False, config_source=src, is_sensitive=False)
            for n, v, src, _k in _topic_configs_view(broker, t)
        ]
    return r


#: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: one request may not create more
#: partitions than this (a CreateTopics or CreatePartitions asking for millions would stall the
#: broker creating directories)
MAX_PARTITIONS_PER_BATCH = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


def _requested_partitions(broker, topics) -> int:
    total = 0
    for ct in topics:
        if ct.assignments:
            total += len(ct.assignments)
        elif ct.num_partitions == -1:
            total += broker.config.int("num.partitions")
        elif ct.num_partitions > 0:
            total += ct.num_partitions
    return total


def _not_controller(names: list[str]) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[
            CreatableTopicResult(
                name=n, error_code=ErrorCode.NOT_CONTROLLER, num_partitions=-1, replication_factor=-1
            )
            for n in names
        ],
    )


async def _await_leaders(broker, resp, results: list, counts: dict[str, int], timeout_ms: int):
    """DelayedCreatePartitions, for CreateTopics and CreatePartitions: answer ``resp`` once this
    broker's metadata shows a live leader for the first ``counts[name]`` partitions of each
    topic; a topic whose partitions still miss one at the timeout gets REQUEST_TIMED_OUT in
    its entry of ``results`` (the partitions exist anyway). A broker of several processes:
    once every process has made its logs."""
    await _await_metadata(broker, lambda: all(_led(broker, n, c) for n, c in counts.items()), timeout_ms)
    for r in results:
        if not _led(broker, r.name, counts[r.name]):
            r.error_code, r.error_message = ErrorCode.REQUEST_TIMED_OUT, "leaders were not elected in time"
    return resp


def _led(broker, topic: str, partitions: int) -> bool:
    """Every one of the topic's first ``partitions`` partitions has a live leader in this
    broker's metadata (DelayedCreatePartitions' missingLeaderCount is 0)."""
    rm = broker.replicas
    if rm is None:
        return all(broker.partition_leader(topic, p) >= 0 for p in range(partitions))
    return all(
        (v := rm.cache.get((topic, p))) is not None and v.leader in rm.live_brokers for p in range(partitions)
    )


def _duplicate_topic(name: str, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        error_code=ErrorCode.INVALID_REQUEST,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
    )


def handle_create_topics(ctx, req):
    broker = ctx.broker
    v = ctx.version
    validate_only = v >= 1 and req.validate_only
    if broker.cluster is not None and not broker.cluster.is_controller():
        return _not_controller([ct.name for ct in req.topics])
    results = []
    names = [ct.name for ct in req.topics]
    mutation = _mutation_quota(ctx, 6)
    if _requested_partitions(broker, req.topics) > MAX_PARTITIONS_PER_BATCH:
        # every topic of the request fails, as Kafka's validateTotalNumberOfPartitions does
        for ct in req.topics:
            results.append(
                CreatableTopicResult(
                    name=ct.name,
                    error_code=ErrorCode.POLICY_VIOLATION,
                    error_message=EXCESSIVE_PARTITIONS,
                    num_partitions=-1,
                    replication_factor=-1,
                )
            )
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)
    # a name the request holds twice: ZooKeeper mode (KafkaApis) refuses each of its entries in
    # place; KRaft (ControllerApis) leaves them out and adds one result per such name after the
    # others, in its HashSet's order
    counts = collections.Counter(names)
    duplicates = [n for n in dict.fromkeys(names) if counts[n] > 1]
    for ct in req.topics:
        if counts[ct.name] > 1:
            if broker.cluster is not None:
                results.append(_duplicate_topic(ct.name, "Found multiple entries for this topic."))
            continue
        results.append(_create_one(broker, ct, v, validate_only, mutation))
    if broker.cluster is None:
        for n in hash_map_order(duplicates, java_string_hash):
            results.append(_duplicate_topic(n, "Duplicate topic name."))
    resp = CreateTopicsResponse(throttle_time_ms=0, topics=results)
    if _propagates(broker) and not validate_only and req.timeout_ms > 0:
        made = [r for r in results if r.error_code == 0]
        return _await_leaders(broker, resp, made, {r.name: r.num_partitions for r in made}, req.timeout_ms)
    return resp


# ---------------------------------------------------------------- DeleteTopics
def handle_delete_topics(ctx, req):
    broker = ctx.broker
    v = ctx.version
    if v >= 6:
        wanted = [(s.name, s.topic_id) for s in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    if broker.cluster is not None and not broker.cluster.is_controller():
        return DeleteTopicsResponse(
            throttle_time_ms=0,
            responses=[
                DeletableTopicResult(
                    name=n, topic_id=tid or ZERO_UUID, error_code=ErrorCode.NOT_CONTROLLER, error_message=None
                )
                for n, tid in wanted
            ],
        )
    out = []
    mutation = _mutation_quota(ctx, 5)
    for name, tid in wanted:
        r = DeletableTopicResult(name=name, topic_id=ZERO_UUID, error_code=0, error_message=None)
        out.append(r)
        if name is None and tid is not None and tid != ZERO_UUID:
            t = broker.metadata.topic_by_id(from_wire_uuid(tid))
            if t is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
        else:
            t = broker.topic(name or "")
            if t is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
        r.name = t.name
        r.topic_id = wire_uuid(t.topic_id)
        if broker.read_only:
            r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, READ_ONLY_MSG
            continue
        if not broker.config.bool("delete.topic.enable"):
            r.error_code, r.error_message = ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false"
            continue
        if mutation is not None and not mutation.record(t.partitions):
            r.error_code, r.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MSG
            continue
        broker.delete_topic(t.name)
    resp = DeleteTopicsResponse(throttle_time_ms=0, responses=out)
    if _propagates(broker) and req.timeout_ms > 0:
        return _await_deleted(broker, resp, req.timeout_ms)
    return resp


async def _await_metadata(broker, done, timeout_ms: int) -> bool:
    """Kafka's delayed admin operations: True once a metadata change has reached the other
    brokers (cluster mode: ``done()`` holds for this broker's metadata cache) or the other
    processes of this broker (each has applied it: made or deleted its logs); False at the
    timeout."""
    if broker.cluster is not None:
        return await broker.cluster.await_metadata(done, timeout_ms)
    return await broker.processes.settled(timeout_ms / 1000)


def _propagates(broker) -> bool:
    """Metadata changes reach other brokers (cluster mode) or processes (kafkatool.processes)
    after the change: the answer waits for them, as Kafka's delayed admin operations do."""
    return broker.cluster is not None or (broker.processes is not None and broker.processes.is_primary)


async def _await_deleted(broker, resp: DeleteTopicsResponse, timeout_ms: int) -> DeleteTopicsResponse:
    """DelayedDeleteTopics: answer once this broker's metadata cache no longer has the topics."""
    asked = [r for r in resp.responses if r.error_code == 0]

    def gone(r) -> bool:  # cluster mode
        return not any(tp[0] == r.name for tp in broker.replicas.cache)

    done = await _await_metadata(broker, lambda: all(gone(r) for r in asked), timeout_ms)
    for r in asked:
        # a broker of several processes: each has deleted its logs once it has the metadata
        if not done and (broker.cluster is None or not gone(r)):
            r.error_code, r.error_message = ErrorCode.REQUEST_TIMED_OUT, "the deletion is still in progress"
    return resp


# ---------------------------------------------------------------- CreatePartitions
def handle_create_partitions(ctx, req):
    broker = ctx.broker
    cluster = broker.cluster
    if cluster is not None and not cluster.is_controller():
        return CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                CreatePartitionsTopicResult(
                    name=rt.name, error_code=ErrorCode.NOT_CONTROLLER, error_message=None
                )
                for rt in req.topics
            ],
        )
    live = set(broker.replicas.live_brokers) if cluster is not None else {broker.node_id}
    out = []
    mutation = _mutation_quota(ctx, 3)
    # a name the request holds twice is refused once, its entries left out: KRaft's
    # ControllerApis.createPartitions answers those first, then the others, each list in its
    # HashSet's order; ZooKeeper mode (KafkaApis) adds them to its other results
    counts = collections.Counter(rt.name for rt in req.topics)
    seen: set[str] = set()
    duplicates = []  # in the order their second entries come (the HashSet's insertions)
    for rt in req.topics:
        if rt.name in seen and rt.name not in duplicates:
            duplicates.append(rt.name)
        seen.add(rt.name)
    duplicated = [
        CreatePartitionsTopicResult(
            name=n,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message="Duplicate topic name." if cluster is None else "Duplicate topic in request.",
        )
        for n in (hash_map_order(duplicates, java_string_hash) if cluster is None else duplicates)
    ]
    topics = [rt for rt in req.topics if counts[rt.name] == 1]
    if cluster is None:
        out.extend(duplicated)
        order = {n: i for i, n in enumerate(hash_map_order(dict.fromkeys(counts), java_string_hash))}
        topics.sort(key=lambda rt: order[rt.name])
    done = []
    for rt in topics:
        r = CreatePartitionsTopicResult(name=rt.name, error_code=0, error_message=None)
        out.append(r)
        done.append((rt, r))
        t = broker.topic(rt.name)
        if t is None:
            # KRaft: UnknownTopicOrPartitionException(), no message (ApiError.fromThrowable)
            r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            r.error_message = None if cluster is None else f"The topic '{rt.name}' does not exist."
            continue
        if rt.count <= t.partitions:
            r.error_code = ErrorCode.INVALID_PARTITIONS
            if cluster is not None:  # ZkAdminManager.createPartitions
                r.error_message = (
                    f"Topic already has {t.partitions} partitions."
                    if rt.count == t.partitions
                    else f"Topic currently has {t.partitions} partitions, which is higher than the requested "
                    f"{rt.count}."
                )
            else:  # ReplicationControlManager.createPartitions
                r.error_message = (
                    f"Topic already has {t.partitions} partition(s)."
                    if rt.count == t.partitions
                    else f"The topic {rt.name} currently has {t.partitions} partition(s); {rt.count} would not "
                    "be an increase."
                )
            continue
        if rt.count - t.partitions > MAX_PARTITIONS_PER_BATCH:
            r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS
            continue
        if rt.assignments is not None:
            additional = rt.count - t.partitions
            if cluster is None and len(rt.assignments) != additional:
                r.error_code, r.error_message = (
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {additional} additional partition(s), but only {len(rt.assignments)} "
                    "assignment(s) were specified.",
                )
                continue
            if len(rt.assignments) != additional or any(
                (list(a.broker_ids) != [broker.node_id] if cluster is None else not set(a.broker_ids) <= live)
                for a in rt.assignments
            ):
                r.error_code, r.error_message = (
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "invalid replica assignment",
                )
                continue
        if broker.read_only:
            r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, READ_ONLY_MSG
            continue
        if not req.validate_only:
            if mutation is not None and not mutation.record(rt.count - t.partitions):
                r.error_code, r.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MSG
                continue
            broker.add_partitions(rt.name, rt.count)
    if cluster is not None:
        out.extend(duplicated)
    resp = CreatePartitionsResponse(throttle_time_ms=0, results=out)
    # as Kafka, a timeout <= 0 answers at once
    grown = [(rt, r) for rt, r in done if r.error_code == 0]
    if _propagates(broker) and not req.validate_only and req.timeout_ms > 0 and grown:
        counts = {rt.name: rt.count for rt, _ in grown}
        return _await_leaders(broker, resp, [r for _, r in grown], counts, req.timeout_ms)
    return resp


# ---------------------------------------------------------------- DescribeConfigs
def _entry(
    name,
    value,
    source,
    kind,
    version,
    include_synonyms,
    include_doc,
    doc="",
    read_only=False,
    synonyms=(),
    sensitive=None,
):
    # is_default (v0 only) stays false for every entry, defaults too: Kafka's broker never sets
    # it since DescribeConfigs moved to the generated message (KAFKA-9432, 2.7; ConfigHelper in
    # 3.x), so a v0 answer reads "not default" throughout, as from Kafka.
    if sensitive is None:
        sensitive = kind == C.PASSWORD
    return DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=list(synonyms) if include_synonyms else [],
        config_type=kind,
        documentation=doc if include_doc else None,
    )


def _describe_topic(broker, t, keys, version, include_synonyms, include_doc):
    out = []
    for name, value, source, kind in _topic_configs_view(broker, t):
        if keys is not None and name not in keys:
            continue
        syns = []
        if include_synonyms:
            # ConfigHelper.createTopicConfigEntry: the topic's own value, then every layer of the
            # broker setting it inherits (dynamic broker, dynamic default, static, Kafka's default)
            if source == C.SOURCE_TOPIC:
                syns.append(DescribeConfigsSynonym(name=name, value=value, source=C.SOURCE_TOPIC))
            syns += [
                DescribeConfigsSynonym(name=n, value=v, source=src)
                for n, v, src in broker.config.topic_synonyms(name)
            ]
        out.append(_entry(name, value, source, kind, version, include_synonyms, include_doc, synonyms=syns))
    return out


def _describe_broker(broker, keys, version, include_synonyms, include_doc, per_broker: bool = True):
    """ConfigHelper.createBrokerConfigEntry over this broker's configs (``per_broker``) or the
    dynamic cluster-wide defaults that are set (the resource ""): the source is the first
    synonym's (for the defaults, only DYNAMIC_DEFAULT_BROKER_CONFIG ones count), read_only is
    !AllDynamicConfigs.contains(name), a sensitive value is null."""
    cfg = broker.config
    if per_broker:
        # a dynamic-only throttle has no KafkaConfig definition: listed where set, as Kafka's
        # originals; so is every other name given (listener.name.*, names Kafka does not know)
        names = {n for n, d in C.BROKER_CONFIGS.items() if d.dynamic != C.DYNAMIC_ONLY or cfg.is_set(n)}
        names |= {n for layer in (cfg.explicit, cfg.dynamic_default, cfg.dynamic) for n in layer}
    else:
        names = set(cfg.dynamic_default)
    out = []
    for name in sorted(names):
        if keys is not None and name not in keys:
            continue
        d = C.BROKER_CONFIGS.get(name)
        kind = C.config_type(name)
        # KafkaConfig.maybeSensitive: a password, or a config whose type is not known
        sensitive = kind is None or kind == C.PASSWORD
        syns = [
            (n, None if sensitive else v, src)
            for n, v, src in cfg.synonyms(name)
            if per_broker or src == C.SOURCE_DYNAMIC_DEFAULT_BROKER
        ]
        source = syns[0][2] if syns else C.SOURCE_DEFAULT
        value = cfg.get(name) if per_broker else cfg.dynamic_default[name]
        out.append(
            _entry(
                name,
                value,
                source,
                kind or 0,  # ConfigType.UNKNOWN
                version,
                include_synonyms,
                include_doc,
                # a dynamic-only throttle has no ConfigDef in Kafka: no documentation
                d.doc if d is not None and d.dynamic != C.DYNAMIC_ONLY else None,
                read_only=C.read_only(name),
                synonyms=[DescribeConfigsSynonym(name=n, value=v, source=src) for n, v, src in syns],
                sensitive=sensitive,
            )
        )
    return out


def _describe_loggers(keys):
    """ConfigHelper's BROKER_LOGGER answer: every logger with its level, DYNAMIC_BROKER_LOGGER_CONFIG,
    read_only false, no synonyms, no type (v3+: UNKNOWN) and no documentation."""
    return [
        DescribeConfigsResourceResult(
            name=name,
            value=level,
            read_only=False,
            config_source=C.SOURCE_BROKER_LOGGER,
            is_sensitive=False,
            synonyms=[],
            config_type=0,
            documentation=None,
        )
        for name, level in sorted(loggers.loggers().items())
        if keys is None or name in keys
    ]


def broker_resource_error(broker, name: str, *, logger: bool, alter: bool = False) -> str | None:
    """Why a BROKER (or BROKER_LOGGER) resource does not name this broker (None: it does), in
    the words of Kafka 3.7's ConfigHelper (DescribeConfigs) or ConfigAdminManager /
    RuntimeLoggerManager (``alter``): each broker answers for itself, a BROKER resource "" is
    the cluster-wide default; a broker of several processes answers for each of its nodes."""
    if not name and not logger:
        return None
    if not name and not alter:
        return "Broker id must not be empty"
    if parse_java_int(name) is None:
        return f"{'Node' if alter else 'Broker'} id must be an integer, but it is: {name}"
    local = set(broker.processes.nodes()) if broker.processes is not None else set()
    if int(name) == broker.node_id or int(name) in local:
        return None
    if alter and logger:
        return f"Unexpected node id. Expected {broker.node_id}, but received {name}"
    if alter:
        return f"Unexpected broker id, expected {broker.node_id}, but received {name}"
    if logger:
        return f"Unexpected broker id, expected {broker.node_id} but received {name}"
    return f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}"


def _group_configs_error(broker, name: str) -> tuple[int, str] | None:
    """Why a GROUP config resource cannot be served (None: it can)."""
    if not name:
        return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
    if broker.cluster is not None:
        # Kafka keeps group configs in the KRaft metadata log; a ZooKeeper-mode broker has none
        return ErrorCode.INVALID_REQUEST, "group configs need a KRaft-mode broker (this is ZooKeeper mode)"
    return None


def _describe_group(broker, name, keys, version, include_synonyms, include_doc):
    """ConfigHelper.describeConfigs for a GROUP resource (Kafka 4.0): every group config, the
    group's own value (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG); any group name, existing
    or not."""
    own = broker.metadata.group_configs.get(name, {})
    out = []
    for cname, broker_name in sorted(GROUP_CONFIGS.items()):
        if keys is not None and cname not in keys:
            continue
        if cname in own:
            value, source = own[cname], C.SOURCE_GROUP
        else:
            value, source = broker.config.get(broker_name), C.SOURCE_DEFAULT
        value = None if value is None else str(value)
        d = C.BROKER_CONFIGS[broker_name]
        syns = [DescribeConfigsSynonym(name=cname, value=value, source=source)]
        out.append(
            _entry(cname, value, source, d.type, version, include_synonyms, include_doc, d.doc, synonyms=syns)
        )
    return out


def handle_describe_configs(ctx, req):
    broker = ctx.broker
    v = ctx.version
    include_synonyms = v >= 1 and req.include_synonyms
    include_doc = v >= 3 and req.include_documentation
    results = []
    for res in req.resources:
        r = DescribeConfigsResult(
            error_code=0,
            error_message=None,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[],
        )
        results.append(r)
        # null or empty: every config (ConfigHelper.createResponseConfig)
        keys = set(res.configuration_keys) if res.configuration_keys else None
        if res.resource_type == TOPIC:
            t = broker.topic(res.resource_name)
            if t is None:
                # ConfigHelper.describeConfigs: the error code alone, no message (read at 3.7.0)
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                broker.config.log_config(t.configs)
            except C.ConfigError as exc:
                # ConfigHelper.describeConfigs builds LogConfig.fromProps of the stored overrides
                # (ZooKeeper mode: /config/topics/T as the engine refused it); its ConfigException
                # answers UNKNOWN_SERVER_ERROR (Errors.forException) with no message, logged
                keys_text = (
                    "null" if res.configuration_keys is None else f"[{', '.join(res.configuration_keys)}]"
                )
                log.error(
                    "Error processing describe configs request for resource DescribeConfigsResource("
                    "resourceType=%d, resourceName='%s', configurationKeys=%s): %s",
                    res.resource_type,
                    res.resource_name,
                    keys_text,
                    exc,
                )
                r.error_code, r.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, None
                continue
            r.configs = _describe_topic(broker, t, keys, v, include_synonyms, include_doc)
        elif res.resource_type in (BROKER, BROKER_LOGGER):
            name = res.resource_name or ""
            err = broker_resource_error(broker, name, logger=res.resource_type == BROKER_LOGGER)
            if err is not None:
                r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, err
            elif res.resource_type == BROKER_LOGGER:
                r.configs = _describe_loggers(keys)
            else:
                r.configs = _describe_broker(
                    broker, keys, v, include_synonyms, include_doc, per_broker=name != ""
                )
        elif res.resource_type == GROUP:
            err = _group_configs_error(broker, res.resource_name)
            if err is not None:
                r.error_code, r.error_message = err
                continue
            r.configs = _describe_group(broker, res.resource_name, keys, v, include_synonyms, include_doc)
        else:
            r.error_code, r.error_message = (
                ErrorCode.INVALID_REQUEST,
                f"unsupported resource type {res.resource_type}",
            )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


# ---------------------------------------------------------------- AlterConfigs / IncrementalAlterConfigs
def preprocess_error(configs, incremental: bool) -> str | None:
    """Kafka 3.7's ConfigAdminManager.preprocess checks of one resource's configs, made in both
    metadata modes before anything else, whatever the resource type: the message of the
    INVALID_REQUEST it answers, else None.  A null value is refused but for an incremental DELETE."""
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        return "Error due to duplicate config keys"
    nulls = [
        c.name for c in configs if c.value is None and not (incremental and c.config_operation == DELETE)
    ]
    if nulls:
        return "Null value not supported for : " + ", ".join(nulls)
    return None


def preprocess_errors(resources, incremental: bool) -> list[str | None]:
    """ConfigAdminManager.preprocess for a request's resources, in order: a resource named twice
    (type and name) is refused wherever it appears, then each one's own checks
    (:func:`preprocess_error`); the INVALID_REQUEST message per resource, else None."""
    named = collections.Counter((r.resource_type, r.resource_name) for r in resources)
    return [
        "Each resource must appear at most once."
        if named[(r.resource_type, r.resource_name)] > 1
        else preprocess_error(r.configs, incremental)
        for r in resources
    ]


def _topic_missing(broker, name: str) -> tuple[int, str] | None:
    if broker.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    return None


_DEFAULT_TOPIC = ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."


def _topic_refusal(broker, name: str, exc: ts.SettingsError) -> tuple[int, str]:
    """A refused topic config, INVALID_CONFIG either way.  Standalone as KRaft's
    ConfigurationControlManager: the message as it is.  Cluster (ZooKeeper) mode as
    ZkAdminManager.alterConfigs / incrementalAlterConfigs: a ConfigException's message behind the
    resource, an InvalidConfigurationException's (ts.InvalidConfigurationError) as it is."""
    message = str(exc)
    if broker.cluster is not None and not isinstance(exc, ts.InvalidConfigurationError):
        message = f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {message}"
    return ErrorCode.INVALID_CONFIG, message


def _apply_topic(broker, name: str, new: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    """Check and store a topic's overrides after an alter, each mode's checks in its order.
    ZooKeeper mode as ZkAdminManager.alterTopicConfigs: the default resource, the topic's
    existence (metadataCache.contains), then the values.  Standalone as KRaft's
    ConfigurationControlManager.validateAlterConfig: ControllerConfigurationValidator (the default
    resource, Topic.validate's name rules, the values) before the existence checker, so a refused
    value or an illegal name on a missing topic answers its own error, not UNKNOWN_TOPIC_OR_PARTITION."""
    kraft = broker.cluster is None
    if not name:
        return _DEFAULT_TOPIC
    if kraft:
        bad = topic_name_error(name)
        if bad is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, bad
    elif (err := _topic_missing(broker, name)) is not None:
        return err
    try:
        ts.validate_topic_change(new, broker.config.topic_defaults())
        broker.config.log_config(new)
    except ts.SettingsError as exc:  # BrokerConfig's ConfigError is one
        return _topic_refusal(broker, name, exc)
    if kraft and (err := _topic_missing(broker, name)) is not None:
        return err
    if broker.read_only:
        return ErrorCode.POLICY_VIOLATION, READ_ONLY_MSG
    if not validate_only:
        broker.alter_topic_configs(name, new)
        log.info("topic configs altered topic=%s configs=%s", name, json.dumps(new, sort_keys=True))
    return 0, None


def handle_alter_configs(ctx, req):
    broker = ctx.broker
    out = []
    for res, err in zip(req.resources, preprocess_errors(req.resources, False), strict=True):
        r = AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        if err is not None:
            r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, err
        elif res.resource_type == TOPIC:
            new = {c.name: c.value for c in res.configs}
            r.error_code, r.error_message = _apply_topic(broker, res.resource_name, new, req.validate_only)
        elif res.resource_type == BROKER:
            from kafkatool.broker.handlers.reassignments import replace_broker_configs

            r.error_code, r.error_message = replace_broker_configs(broker, res, req.validate_only)
        else:
            r.error_code, r.error_message = (
                ErrorCode.INVALID_REQUEST,
                "only topic configs can be altered (broker configs are static)",
            )
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)


class _UnknownServerError(KafkatoolError):
    """Where Kafka answers UNKNOWN_SERVER_ERROR from an exception it does not map (no message)."""


def unknown_config_key(resource: str, name: str, *, preprocess: bool) -> _UnknownServerError:
    """APPEND/SUBTRACT of a config name the resource's ConfigDef lacks, as Kafka 3.7's
    ConfigAdminManager.prepareIncrementalConfigs meets it: ``configKeys(name)`` on a Scala view of
    the Java map throws NoSuchElementException before its own "Unknown config name" check can run,
    and neither ZkAdminManager.incrementalAlterConfigs (a TOPIC in ZooKeeper mode) nor
    ConfigAdminManager.preprocess (a BROKER, both modes) maps it: UNKNOWN_SERVER_ERROR with no
    message (ApiError.fromThrowable), logged at ERROR by the first, INFO by the second."""
    if preprocess:
        log.info(
            "Error preprocessing incrementalAlterConfigs request on %s: key not found: %s", resource, name
        )
    else:
        log.error("Error processing alter configs request for resource %s: key not found: %s", resource, name)
    return _UnknownServerError(name)


def _java_split(value: str) -> list[str]:
    """Java's ``value.split(",")``: trailing empty strings dropped, but "" is [""]."""
    parts = value.split(",")
    if value == "":
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def incremental_list_value(op: int, old: str | None, value: str, *, kraft: bool) -> str:
    """A LIST config's value after an IncrementalAlterConfigs APPEND or SUBTRACT of ``value``
    (comma-separated, kept as given: no trimming) to ``old`` (the stored value, else the
    ConfigDef's default), for a topic and a broker resource alike.  ZooKeeper mode as
    ConfigAdminManager.prepareIncrementalConfigs: APPEND adds the given items the old list
    lacks (a repeated one twice), SUBTRACT is Scala's multiset ``diff``.  KRaft (standalone) as
    ConfigurationControlManager: the old list without empty items, APPEND adds each item it
    does not hold yet, SUBTRACT removes each item's first occurrence."""
    given = _java_split(value)
    if kraft:
        parts = [x for x in _java_split(old or "") if x]
        for x in given:
            if op == APPEND and x not in parts:
                parts.append(x)
            elif op == SUBTRACT and x in parts:
                parts.remove(x)
        return ",".join(parts)
    if op == APPEND:
        parts = _java_split(old) if old else []
        return ",".join(parts + [x for x in given if x not in parts])
    parts = _java_split(old or "")
    for x in given:
        if x in parts:
            parts.remove(x)
    return ",".join(parts)


def _incremental_topic_configs(broker, name: str, configs) -> dict[str, str]:
    """A topic's overrides after an IncrementalAlterConfigs resource's operations, in order.
    SET and DELETE take any name: a name LogConfig does not know is refused by the validation of
    the result ("Unknown topic config name"), and a DELETE of one is a no-op, as both Kafka 3.7
    paths do (ZkAdminManager: prepareIncrementalConfigs removes it from the stored properties;
    KRaft's ConfigurationControlManager: no record for an unchanged value).  APPEND/SUBTRACT work
    on a LIST config, from the stored value else LogConfig's own default (never the broker's).
    An unknown name there: KRaft (standalone) answers INVALID_CONFIG ("its type is not LIST":
    KafkaConfigSchema.isSplittable is false for it), ZooKeeper mode UNKNOWN_SERVER_ERROR
    (:func:`unknown_config_key`)."""
    topic = broker.topic(name)
    new = dict(topic.configs) if topic is not None else {}  # a missing topic: no stored overrides
    for c in configs:
        if c.config_operation == SET:
            new[c.name] = c.value
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            d = ts.TOPIC_CONFIGS.get(c.name)
            if d is None and broker.cluster is not None:
                raise unknown_config_key(
                    f"ConfigResource(type=TOPIC, name='{name}')", c.name, preprocess=False
                )
            if d is None or d.type != ts.LIST:
                # ZkAdminManager (prepareIncrementalConfigs) / KRaft's ConfigurationControlManager
                what, op = ("append", "APPEND") if c.config_operation == APPEND else ("subtract", "SUBTRACT")
                raise ts.InvalidConfigurationError(
                    f"Config value {what} is not allowed for config key: {c.name}"
                    if broker.cluster is not None
                    else f"Can't {op} to key {c.name} because its type is not LIST."
                )
            new[c.name] = incremental_list_value(
                c.config_operation, new.get(c.name, d.default), c.value, kraft=broker.cluster is None
            )
        else:
            raise ts.InvalidConfigurationError(f"unknown config operation {c.config_operation}")
    return new


def handle_incremental_alter_configs(ctx, req):
    broker = ctx.broker
    out = []
    for res, err in zip(req.resources, preprocess_errors(req.resources, True), strict=True):
        r = IncAlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        if err is not None:
            r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, err
            continue
        if res.resource_type == BROKER:
            from kafkatool.broker.handlers.reassignments import alter_broker_configs

            r.error_code, r.error_message = alter_broker_configs(broker, res, req.validate_only)
            continue
        if res.resource_type == GROUP:
            r.error_code, r.error_message = _alter_group(broker, res, req.validate_only)
            continue
        if res.resource_type == BROKER_LOGGER:
            r.error_code, r.error_message = _alter_loggers(broker, res, req.validate_only)
            continue
        if res.resource_type != TOPIC:
            r.error_code, r.error_message = (
                ErrorCode.INVALID_REQUEST,
                "only topic configs can be altered (broker configs are static)",
            )
            continue
        # ZooKeeper mode (ZkAdminManager.incrementalAlterConfigs): the default resource is refused,
        # then prepareIncrementalConfigs runs on the stored overrides (none for a missing topic),
        # then alterTopicConfigs checks existence and values; standalone (KRaft) runs the
        # operations first, then its validator and existence checker (_apply_topic).  So APPEND of
        # an unknown name on a missing topic answers UNKNOWN_SERVER_ERROR (ZooKeeper mode) or
        # INVALID_CONFIG (KRaft), as Kafka 3.7 does, not UNKNOWN_TOPIC_OR_PARTITION.
        if broker.cluster is not None and not res.resource_name:
            r.error_code, r.error_message = _DEFAULT_TOPIC
            continue
        try:
            new = _incremental_topic_configs(broker, res.resource_name, res.configs)
        except ts.SettingsError as exc:
            r.error_code, r.error_message = _topic_refusal(broker, res.resource_name, exc)
            continue
        except _UnknownServerError:
            r.error_code, r.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, None
            continue
        r.error_code, r.error_message = _apply_topic(broker, res.resource_name, new, req.validate_only)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


def _alter_loggers(broker, res, validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of a BROKER_LOGGER resource (ConfigAdminManager.preprocess and
    RuntimeLoggerManager): SET a logger's level, DELETE it; every operation is checked before
    any is applied. A broker of several processes: every process takes the change."""
    err = broker_resource_error(broker, res.resource_name or "", logger=True, alter=True)
    if err is not None:
        return ErrorCode.INVALID_REQUEST, err
    for c in res.configs:
        err = loggers.validate(c.name, c.config_operation, c.value)
        if err is not None:
            kind, message = err
            return (ErrorCode.INVALID_CONFIG if kind == "config" else ErrorCode.INVALID_REQUEST), message
    if validate_only:
        return 0, None
    for c in res.configs:
        level = c.value if c.config_operation == SET else None
        loggers.set_level(c.name, level)
        if level is None:
            log.warning("Unset the log level of %s", c.name)
        else:
            log.warning("Updated the log level of %s to %s", c.name, level)
    if res.configs and broker.processes is not None and broker.processes.is_primary:
        broker.processes.push_metadata()  # the other processes take the levels too
    return 0, None


def _alter_group(broker, res, validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of a GROUP resource (Kafka 4.0): SET and DELETE on the group's
    configs, the result validated as GroupConfig.validate does, kept in the cluster metadata."""
    err = _group_configs_error(broker, res.resource_name)
    if err is not None:
        return err
    new = dict(broker.metadata.group_configs.get(res.resource_name, {}))
    for c in res.configs:
        if c.config_operation == SET:
            new[c.name] = c.value
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            return ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {c.name}"
        else:
            return ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}"
    try:
        validate_group_configs(new, broker.config.int)
    except ConsumerGroupError as exc:
        return exc.code, exc.message
    if broker.read_only:
        return ErrorCode.POLICY_VIOLATION, READ_ONLY_MSG
    if not validate_only:
        if new:
            broker.metadata.group_configs[res.resource_name] = new
        else:
            broker.metadata.group_configs.pop(res.resource_name, None)
        broker.metadata.save()
        log.info(
            "group configs altered group=%s configs=%s", res.resource_name, json.dumps(new, sort_keys=True)
        )
    return 0, None


# ---------------------------------------------------------------- DescribeCluster
def handle_describe_cluster(ctx, req):
    from kafkatool.broker.handlers.metadata import brokers, controller_id

    broker = ctx.broker
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.metadata.cluster_id,
        controller_id=controller_id(broker),
        brokers=[
            DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in brokers(broker, ctx.connection)
        ],
        cluster_authorized_operations=acl.authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME)
        if req.include_cluster_authorized_operations
        else AUTHORIZED_OPS_OMITTED,
    )


def register(router) -> None:
    router.register(19, 0, 7, handle_create_topics)
    router.register(20, 0, 6, handle_delete_topics)
    router.register(37, 0, 3, handle_create_partitions)
    router.register(32, 0, 4, handle_describe_configs)
    router.register(33, 0, 2, handle_alter_configs)
    router.register(44, 0, 1, handle_incremental_alter_configs)
    router.register(60, 0, 1, handle_describe_cluster)
