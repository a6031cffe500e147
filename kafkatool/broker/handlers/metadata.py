"""Metadata (3) with topic auto-creation, and FindCoordinator (10) answering "this broker"."""

from __future__ import annotations

import logging

from kafkatool.broker import read_only
from kafkatool.broker.metadata import INTERNAL_TOPICS
from kafkatool.broker.security import acl
from kafkatool.errors import KafkatoolError
from kafkatool.formats.schema import ZERO_UUID
from kafkatool.formats.uuid import Uuid
from kafkatool.log.topic_settings import topic_name_error
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    DescribeTopicPartitionsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)
from kafkatool.protocol.generated.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kafkatool.protocol.generated.find_coordinator_response import Coordinator
from kafkatool.protocol.generated.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

log = logging.getLogger("kafkatool.broker")
AUTHORIZED_OPS_OMITTED = -(2**31)


def wire_uuid(u: Uuid | None):
    import uuid

    return ZERO_UUID if u is None else uuid.UUID(bytes=u.raw)


def from_wire_uuid(u) -> Uuid:
    return Uuid(u.bytes)


def _listener_name(broker, conn) -> str | None:
    lst = getattr(conn, "listener", None)
    return getattr(lst, "name", None) or broker.config.advertised_listeners[0].name


def brokers(broker, conn=None) -> list[MetadataResponseBroker]:
    rm = broker.replicas
    if rm is not None:
        # cluster mode: the live brokers that have the listener this client came in on
        name = _listener_name(broker, conn)
        out = []
        for b in sorted(rm.live_brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoints.get(name)
            if ep is not None:
                out.append(MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack))
        return out
    group = broker.processes
    if group is not None:
        # the processes of one broker, each a node of its own
        name = _listener_name(broker, conn)
        out = []
        for node in group.nodes():
            ep = broker.advertised_for(conn) if node == broker.node_id else group.endpoint(node, name)
            if ep is not None:
                out.append(MetadataResponseBroker(node_id=node, host=ep[0], port=ep[1], rack=None))
        return out
    host, port = broker.advertised_for(conn)
    return [MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)]


def node_endpoint(broker, node_id: int, conn=None) -> tuple[str, int]:
    """The (host, port) a client on ``conn`` reaches broker ``node_id`` at."""
    routes = broker.replicas if broker.replicas is not None else broker.processes
    if routes is not None and node_id != broker.node_id:
        ep = routes.endpoint(node_id, _listener_name(broker, conn))
        if ep is not None:
            return ep
    return broker.advertised_for(conn)


def controller_id(broker) -> int:
    if broker.replicas is not None:
        return broker.replicas.controller_id
    return broker.processes.base_node if broker.processes is not None else broker.node_id


def current_leader(broker, t, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as Metadata reports it: the KIP-951 hint that
    Produce v10+ and Fetch v16+ put beside NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH."""
    if broker.replicas is not None:
        return broker.replicas.leader_of(t.name, partition)
    return broker.partition_leader(t.name, partition), t.leader_epoch(partition)


def _cached_partitions(broker, t) -> list[int]:
    """The partitions of ``t`` a cluster member's Metadata answers with: those the controller's
    UpdateMetadata told of (ZkMetadataCache.getTopicMetadata lists its partitionStates alone).
    A LeaderAndIsr registers a topic here earlier, to make its logs (the controller sends it
    before the UpdateMetadata); a topic none of whose partitions is cached is not in Metadata."""
    cache = broker.replicas.cache
    return [p for p in range(t.partitions) if (t.name, p) in cache]


def _in_metadata(broker, t):
    """``t`` if Metadata knows the topic, else None (a cluster member's: see _cached_partitions)."""
    if t is None or broker.replicas is None or _cached_partitions(broker, t):
        return t
    return None


def _cluster_partition(broker, t, p: int) -> MetadataResponsePartition:
    """ZkMetadataCache.getPartitionMetadata: from the controller's UpdateMetadata only."""
    rm = broker.replicas
    v = rm.cache[(t.name, p)]
    alive = v.leader in rm.live_brokers
    return MetadataResponsePartition(
        error_code=0 if alive else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=p,
        leader_id=v.leader if alive else -1,
        leader_epoch=v.leader_epoch,
        replica_nodes=list(v.replicas),
        isr_nodes=list(v.isr),
        # the controller's offline replicas (on failed log dirs too) and those of dead brokers
        offline_replicas=[r for r in v.replicas if r not in rm.live_brokers or r in v.offline],
    )


def topic_entry(broker, t) -> MetadataResponseTopic:
    node = broker.node_id
    if broker.replicas is not None:
        return MetadataResponseTopic(
            error_code=0,
            name=t.name,
            topic_id=wire_uuid(t.topic_id),
            is_internal=t.is_internal,
            partitions=[_cluster_partition(broker, t, p) for p in _cached_partitions(broker, t)],
            topic_authorized_operations=AUTHORIZED_OPS_OMITTED,
        )
    # positional arguments and one replica list per topic (the encoder only reads them): a
    # Metadata answer for every topic builds 10,000 of these at the scale; a partition
    # leads here when this broker holds its log (Broker.get_log's dict, looked up in place)
    name = t.name
    epoch = t.leader_epoch
    nodes: list[int] = [node]
    none: list[int] = []
    group = broker.processes
    if group is None:
        logs = broker.manager.logs
        parts = [
            MetadataResponsePartition(0, p, node, epoch(p), nodes, nodes, none)
            if (name, p) in logs
            else MetadataResponsePartition(
                ErrorCode.LEADER_NOT_AVAILABLE, p, -1, epoch(p), nodes, none, nodes
            )
            for p in range(t.partitions)
        ]
    else:
        # a broker of several processes: each partition is its owner's, replication factor 1
        parts = []
        for p in range(t.partitions):
            owner = group.owner_node(name, p)
            leader = group.leader_node(name, p)
            ns = [owner]
            if leader >= 0:
                parts.append(MetadataResponsePartition(0, p, leader, epoch(p), ns, ns, none))
            else:
                parts.append(
                    MetadataResponsePartition(ErrorCode.LEADER_NOT_AVAILABLE, p, -1, epoch(p), ns, none, ns)
                )
    return MetadataResponseTopic(
        error_code=0,
        name=t.name,
        topic_id=wire_uuid(t.topic_id),
        is_internal=t.is_internal,
        partitions=parts,
        topic_authorized_operations=AUTHORIZED_OPS_OMITTED,
    )


def ids_before_v12(req, v: int) -> bool:
    """KafkaApis.handleTopicMetadataRequest's first check, made before any authorization: v10
    and v11 carry a topic id and a nullable name, but a null name or a topic id before v12 is
    refused ("Topic name can not be null" / "Topic IDs are not supported in requests for
    version N", InvalidRequestException), and handleError answers
    MetadataRequest.getErrorResponse with INVALID_REQUEST (broker/error_response)."""
    if v >= 12 or not req.topics:
        return False
    return not all(t.name is not None and t.topic_id in (None, ZERO_UUID) for t in req.topics)


def handle_metadata(ctx, req):
    broker = ctx.broker
    v = ctx.version
    if ids_before_v12(req, v):
        from kafkatool.broker.error_response import error_response

        return error_response(ctx.header, req, ErrorCode.INVALID_REQUEST)
    topics_out = []
    if req.topics is None or (v == 0 and not req.topics):
        for t in sorted(broker.metadata.topics.values(), key=lambda t: t.name):
            if _in_metadata(broker, t) is not None:
                topics_out.append(topic_entry(broker, t))
    else:
        allow_auto = req.allow_auto_topic_creation if v >= 4 else True
        for rt in req.topics:
            name = rt.name
            if name is None and rt.topic_id is not None and rt.topic_id != ZERO_UUID:
                t = _in_metadata(broker, broker.metadata.topic_by_id(from_wire_uuid(rt.topic_id)))
                if t is None:
                    topics_out.append(
                        MetadataResponseTopic(
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=rt.topic_id,
                            partitions=[],
                        )
                    )
                else:
                    topics_out.append(topic_entry(broker, t))
                continue
            t = _in_metadata(broker, broker.topic(name or ""))
            if t is None and name == "__consumer_offsets" and getattr(broker, "group_coordinator", None):
                # an internal topic is created with its own settings (compacted, offsets.topic.num.partitions)
                if broker.group_coordinator.ensure_offsets_topic() is None:
                    t = _in_metadata(broker, broker.topic(name))
            if t is None:
                err = topic_name_error(name or "")
                if err is not None:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto and broker.config.bool("auto.create.topics.enable") and not broker.read_only:
                    try:
                        t = broker.create_topic(name, broker.config.int("num.partitions"), {})
                    except KafkatoolError as exc:  # another broker created it a moment ago
                        log.info("auto-creation of %s: %s", name, exc)
                    if broker.replicas is not None:
                        # AutoTopicCreationManager.createTopicsInZk: written; leaders come later
                        code = ErrorCode.LEADER_NOT_AVAILABLE
                    else:
                        topics_out.append(topic_entry(broker, t))
                        continue
                elif (
                    allow_auto
                    and broker.config.bool("auto.create.topics.enable")
                    and name not in INTERNAL_TOPICS
                ):
                    # read-only: a producer would wait for the topic forever; this code is final for clients
                    read_only.log_refusal("auto-creation of", name, ctx.header.client_id)
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics_out.append(
                    MetadataResponseTopic(
                        error_code=code,
                        name=name,
                        topic_id=ZERO_UUID,
                        partitions=[],
                        topic_authorized_operations=AUTHORIZED_OPS_OMITTED,
                    )
                )
                continue
            topics_out.append(topic_entry(broker, t))
    if v >= 8 and req.include_topic_authorized_operations:  # not an unknown id's nor a refused one's
        for t in topics_out:
            if t.name is not None and t.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                t.topic_authorized_operations = acl.authorized_operations(ctx, acl.TOPIC, t.name)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers(broker, ctx.connection),
        cluster_id=broker.metadata.cluster_id,
        controller_id=controller_id(broker),
        topics=topics_out,
        cluster_authorized_operations=acl.authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME)
        if 8 <= v <= 10 and req.include_cluster_authorized_operations
        else AUTHORIZED_OPS_OMITTED,
    )


#: Kafka's max.request.partition.size.limit default: the most partitions one answer holds
DESCRIBE_PARTITIONS_LIMIT = 2000


def handle_describe_topic_partitions(ctx, req):
    """DescribeTopicPartitions (75, KIP-966): topics sorted by name, paginated by partitions.

    Kafka's DescribeTopicPartitionsRequestHandler: no names means every topic from the
    cursor's on; listed names must include the cursor's topic; an answer holds at most
    min(ResponsePartitionLimit, 2000) partitions and names where the next one starts."""
    broker = ctx.broker
    cursor = req.cursor
    if cursor is not None and cursor.partition_index < 0:
        return _describe_partitions_refused(req, "the cursor's partition index is negative")
    if req.topics:
        names = sorted({t.name for t in req.topics})
        if cursor is not None and cursor.topic_name not in names:
            return _describe_partitions_refused(req, "the topic list must contain the cursor topic")
    else:
        names = sorted(broker.metadata.topics)
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    remaining = max(0, min(req.response_partition_limit, DESCRIBE_PARTITIONS_LIMIT))
    node = broker.node_id
    topics, next_cursor = [], None
    for name in names:
        if remaining <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        t = broker.topic(name)
        if t is None:
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=False,
                    partitions=[],
                )
            )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(t.partitions, start + remaining)
        parts = []
        for p in range(start, end):
            leader = broker.partition_leader(name, p)
            if broker.processes is not None:
                node = broker.processes.owner_node(name, p)
            parts.append(
                DescribeTopicPartitionsResponsePartition(
                    error_code=0 if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=p,
                    leader_id=leader,
                    leader_epoch=t.leader_epoch(p),
                    replica_nodes=[node],
                    isr_nodes=[node] if leader >= 0 else [],
                    eligible_leader_replicas=[],
                    last_known_elr=[],
                    offline_replicas=[] if leader >= 0 else [node],
                )
            )
        remaining -= max(0, end - start)
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=0,
                name=name,
                topic_id=wire_uuid(t.topic_id),
                is_internal=t.is_internal,
                partitions=parts,
                topic_authorized_operations=acl.authorized_operations(ctx, acl.TOPIC, name),
            )
        )
        if end < t.partitions:
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _describe_partitions_refused(req, why: str):
    log.info("DescribeTopicPartitions refused: %s", why)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0,
        topics=[
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=ZERO_UUID, partitions=[]
            )
            for t in req.topics
        ],
        next_cursor=None,
    )


def handle_find_coordinator(ctx, req):
    broker = ctx.broker
    host, port = broker.advertised_for(ctx.connection)
    v = ctx.version
    if v >= 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[
                Coordinator(
                    key=k, node_id=broker.node_id, host=host, port=port, error_code=0, error_message=None
                )
                for k in req.coordinator_keys
            ],
        )
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=0, error_message=None, node_id=broker.node_id, host=host, port=port
    )


def register(router) -> None:
    router.register(3, 0, 12, handle_metadata)
    router.register(10, 0, 4, handle_find_coordinator)
    router.register(75, 0, 0, handle_describe_topic_partitions)
