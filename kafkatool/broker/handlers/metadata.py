"""Metadata (3) with topic auto-creation, and FindCoordinator (10) answering "this broker"."""

from __future__ import annotations

import logging

from kafkatool.broker import read_only
from kafkatool.broker.metadata import INTERNAL_TOPICS, topic_name_error
from kafkatool.formats.schema import ZERO_UUID
from kafkatool.formats.uuid import Uuid
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import FindCoordinatorResponse, MetadataResponse
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


def brokers(broker, conn=None) -> list[MetadataResponseBroker]:
    host, port = broker.advertised_for(conn)
    return [MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)]


def topic_entry(broker, t) -> MetadataResponseTopic:
    node = broker.node_id
    parts = []
    for p in range(t.partitions):
        lg = broker.get_log(t.name, p)
        parts.append(
            MetadataResponsePartition(
                error_code=0 if lg is not None else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p,
                leader_id=node if lg is not None else -1,
                leader_epoch=t.leader_epoch(p),
                replica_nodes=[node],
                isr_nodes=[node] if lg is not None else [],
                offline_replicas=[] if lg is not None else [node],
            )
        )
    return MetadataResponseTopic(
        error_code=0,
        name=t.name,
        topic_id=wire_uuid(t.topic_id),
        is_internal=t.is_internal,
        partitions=parts,
        topic_authorized_operations=AUTHORIZED_OPS_OMITTED,
    )


def handle_metadata(ctx, req):
    broker = ctx.broker
    v = ctx.version
    topics_out = []
    if req.topics is None or (v == 0 and not req.topics):
        for t in sorted(broker.metadata.topics.values(), key=lambda t: t.name):
            topics_out.append(topic_entry(broker, t))
    else:
        allow_auto = req.allow_auto_topic_creation if v >= 4 else True
        for rt in req.topics:
            name = rt.name
            if name is None and rt.topic_id is not None and rt.topic_id != ZERO_UUID:
                t = broker.metadata.topic_by_id(from_wire_uuid(rt.topic_id))
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
            t = broker.topic(name or "")
            if t is None and name == "__consumer_offsets" and getattr(broker, "group_coordinator", None):
                # an internal topic is created with its own settings (compacted, offsets.topic.num.partitions)
                if broker.group_coordinator.ensure_offsets_topic() is None:
                    t = broker.topic(name)
            if t is None:
                err = topic_name_error(name or "")
                if err is not None:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto and broker.config.bool("auto.create.topics.enable") and not broker.read_only:
                    t = broker.create_topic(name, broker.config.int("num.partitions"), {})
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
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers(broker, ctx.connection),
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id,
        topics=topics_out,
        cluster_authorized_operations=AUTHORIZED_OPS_OMITTED,
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
