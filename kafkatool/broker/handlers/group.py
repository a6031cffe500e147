"""The group coordinator's APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15),
ListGroups (16), DeleteGroups (42), OffsetDelete (47).

Each handler turns a request of any served version into a call on
:class:`~kafkatool.broker.group.coordinator.GroupCoordinator` and builds the
response for that version (what Kafka's ``KafkaApis`` does around the
coordinator).  Parked JoinGroup/SyncGroup requests return awaitables; the
futures are shielded so a closed connection does not cancel a rebalance.
"""

from __future__ import annotations

import asyncio
import time

from kafkatool.broker.error_response import error_response, no_coordinator
from kafkatool.broker.group.coordinator import GroupCoordinator, JoinResult, SyncResult
from kafkatool.broker.group.coordinator import group_coordinator as coordinator
from kafkatool.broker.group.offsets import NO_LEADER_EPOCH, NO_OFFSET, OffsetAndMetadata
from kafkatool.broker.group.persistence import OFFSETS_TOPIC
from kafkatool.broker.handlers.metadata import node_endpoint
from kafkatool.broker.security import acl
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from kafkatool.protocol.generated.consumer_group_describe_response import Assignment as CgAssignment
from kafkatool.protocol.generated.consumer_group_describe_response import DescribedGroup as CgDescribedGroup
from kafkatool.protocol.generated.consumer_group_describe_response import Member as CgMember
from kafkatool.protocol.generated.consumer_group_describe_response import (
    TopicPartitions as CgTopicPartitions,
)
from kafkatool.protocol.generated.consumer_group_heartbeat_response import Assignment as HeartbeatAssignment
from kafkatool.protocol.generated.consumer_group_heartbeat_response import (
    TopicPartitions as HeartbeatTopicPartitions,
)
from kafkatool.protocol.generated.delete_groups_response import DeletableGroupResult
from kafkatool.protocol.generated.describe_groups_response import DescribedGroup, DescribedGroupMember
from kafkatool.protocol.generated.find_coordinator_response import Coordinator
from kafkatool.protocol.generated.join_group_response import JoinGroupResponseMember
from kafkatool.protocol.generated.leave_group_response import MemberResponse
from kafkatool.protocol.generated.list_groups_response import ListedGroup
from kafkatool.protocol.generated.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkatool.protocol.generated.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kafkatool.protocol.generated.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

#: served versions (Kafka 3.0's ranges; protocol.md S3)
VERSIONS = {
    # FindCoordinator v6 allows share-group keys (KIP-932): refused as an unknown key type
    "find_coordinator": (10, 0, 6),
    # JoinGroup v8 adds a reason (logged only, as Kafka does), v9 skip_assignment for static leaders
    "join_group": (11, 0, 9),
    "heartbeat": (12, 0, 4),
    # LeaveGroup v5 adds a reason per member
    "leave_group": (13, 0, 5),
    "sync_group": (14, 0, 5),
    # v9 (KIP-848): member epochs for consumer groups
    "offset_commit": (8, 0, 9),
    "offset_fetch": (9, 0, 9),
    "describe_groups": (15, 0, 5),
    "list_groups": (16, 0, 5),
    "delete_groups": (42, 0, 2),
    "offset_delete": (47, 0, 0),
    # KIP-848; ConsumerGroupHeartbeat v1 adds SubscribedTopicRegex (stable in Kafka 4.0 with this
    # layout; the schema snapshot predates that and still marks it unstable)
    "consumer_group_heartbeat": (68, 0, 1),
    "consumer_group_describe": (69, 0, 0),
}
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
AUTHORIZED_OPS_OMITTED = -(2**31)
DEFAULT_TIMESTAMP = -1
DEFAULT_RETENTION_TIME = -1


def _client_host(ctx) -> str:
    # Kafka prints InetAddress.toString(): "/127.0.0.1"
    peer = getattr(ctx.connection, "peer", "") or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


def _client_id(ctx) -> str:
    return ctx.header.client_id or ""


async def _wait(fut: asyncio.Future):
    # shield: the connection closing must not cancel the group's future
    return await asyncio.shield(fut)


# ---------------------------------------------------------------------------- FindCoordinator


def handle_find_coordinator(ctx, req):
    broker = ctx.broker
    gc = coordinator(broker)
    v = ctx.version
    key_type = req.key_type if v >= 1 else KEY_TYPE_GROUP
    keys = list(req.coordinator_keys) if v >= 4 else [req.key]
    answers = []
    for key in keys:
        node = broker.node_id
        if key_type == KEY_TYPE_GROUP:
            err = gc.ensure_offsets_topic()
            if err is None and not gc.started:
                gc.start()
            if err is None and broker.replicas is not None:
                # cluster mode: the leader of the group's __consumer_offsets partition
                node, _ = broker.replicas.leader_of(OFFSETS_TOPIC, gc.partition_for(key))
                if node < 0:
                    err = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif err is None and (OFFSETS_TOPIC, gc.partition_for(key)) in broker.manager.offline_partitions:
                # its partition's log dir failed: the partition has no leader (Kafka's metadata
                # cache then has none either)
                err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif key_type == KEY_TYPE_TRANSACTION:
            err = None  # the transaction coordinator is this broker too
            if broker.replicas is None and broker.manager.offline_partitions:
                from kafkatool.broker.txn.coordinator import txn_coordinator
                from kafkatool.broker.txn.state_log import TRANSACTION_STATE_TOPIC

                tp = (TRANSACTION_STATE_TOPIC, txn_coordinator(broker).partition_for(key))
                if tp in broker.manager.offline_partitions:
                    err = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if broker.replicas is not None:
                from kafkatool.broker.txn.coordinator import TxnError, txn_coordinator
                from kafkatool.broker.txn.state_log import TRANSACTION_STATE_TOPIC

                tc = txn_coordinator(broker)
                try:
                    tc.ensure_topic()
                    node, _ = broker.replicas.leader_of(TRANSACTION_STATE_TOPIC, tc.partition_for(key))
                    if node < 0:
                        err = ErrorCode.COORDINATOR_NOT_AVAILABLE
                except TxnError as exc:
                    err = exc.code
        else:
            err = ErrorCode.INVALID_REQUEST
        answers.append((key, err, node))
    if v >= 4:
        out = []
        for k, err, node in answers:
            if err is None:
                host, port = node_endpoint(broker, node, ctx.connection)
                out.append(
                    Coordinator(key=k, node_id=node, host=host, port=port, error_code=0, error_message=None)
                )
            else:
                out.append(no_coordinator(k, err))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    _, err, node = answers[0]
    if err is None:
        host, port = node_endpoint(broker, node, ctx.connection)
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=0, error_message=None, node_id=node, host=host, port=port
        )
    return error_response(ctx.header, req, err)  # Node.noNode() with the error (prepareOldResponse)


# ---------------------------------------------------------------------------- JoinGroup


def _join_response(v: int, r: JoinResult) -> JoinGroupResponse:
    kw = dict(
        throttle_time_ms=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_name=r.protocol_name if (r.protocol_name is not None or v >= 7) else "",
        leader=r.leader,
        member_id=r.member_id,
        members=[
            JoinGroupResponseMember(member_id=mid, group_instance_id=iid if v >= 5 else None, metadata=meta)
            for mid, iid, meta in r.members
        ],
    )
    if v >= 7:
        kw["protocol_type"] = r.protocol_type
    if v >= 9:
        kw["skip_assignment"] = r.skip_assignment
    return JoinGroupResponse(**kw)


def handle_join_group(ctx, req):
    v = ctx.version
    gc = coordinator(ctx.broker)
    result = gc.handle_join_group(
        group_id=req.group_id,
        member_id=req.member_id or "",
        group_instance_id=req.group_instance_id if v >= 5 else None,
        require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
        client_id=_client_id(ctx),
        client_host=_client_host(ctx),
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
    )
    if isinstance(result, asyncio.Future):
        return _parked_join(v, result)
    return _join_response(v, result)


async def _parked_join(v: int, fut: asyncio.Future):
    return _join_response(v, await _wait(fut))


# ---------------------------------------------------------------------------- SyncGroup


def _sync_response(v: int, r: SyncResult) -> SyncGroupResponse:
    kw = dict(throttle_time_ms=0, error_code=r.error, assignment=r.assignment if r.error == 0 else b"")
    if v >= 5:
        kw["protocol_type"] = r.protocol_type if r.error == 0 else None
        kw["protocol_name"] = r.protocol_name if r.error == 0 else None
    return SyncGroupResponse(**kw)


def handle_sync_group(ctx, req):
    v = ctx.version
    gc = coordinator(ctx.broker)
    result = gc.handle_sync_group(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments or []},
    )
    if isinstance(result, asyncio.Future):
        return _parked_sync(v, result)
    return _sync_response(v, result)


async def _parked_sync(v: int, fut: asyncio.Future):
    return _sync_response(v, await _wait(fut))


# ---------------------------------------------------------------------------- Heartbeat / LeaveGroup


def handle_heartbeat(ctx, req):
    v = ctx.version
    err = coordinator(ctx.broker).handle_heartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 3 else None,
        generation_id=req.generation_id,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=err)


def handle_leave_group(ctx, req):
    v = ctx.version
    if v >= 3:
        leaving = [(m.member_id or "", m.group_instance_id) for m in req.members or []]
    else:
        leaving = [(req.member_id or "", None)]
    top, errors = coordinator(ctx.broker).handle_leave_group(req.group_id, leaving)
    if v >= 3:
        members = (
            [
                MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
                for (mid, iid), e in zip(leaving, errors, strict=True)
            ]
            if top == 0
            else []
        )
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=members)
    # v0-2 carry one member: its error is the response's
    err = top if top != 0 else next((e for e in errors if e != 0), 0)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=err)


# ---------------------------------------------------------------------------- OffsetCommit / OffsetFetch


def handle_offset_commit(ctx, req):
    v = ctx.version
    broker = ctx.broker
    now = int(time.time() * 1000)
    retention = req.retention_time_ms if 2 <= v <= 4 else DEFAULT_RETENTION_TIME
    # GroupCoordinatorAdapter.commitOffsets: the expire timestamp is currentTimeMs +
    # retentionTimeMs in a Java long, which wraps (a retention near Long.MAX_VALUE expires at
    # a negative time, i.e. at the next expiration check); the sum must fit OffsetCommitValue v1
    expire = None if retention == DEFAULT_RETENTION_TIME else (now + retention + 2**63) % 2**64 - 2**63
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    unknown: dict[tuple[str, int], int] = {}
    order: list[tuple[str, int]] = []
    for t in req.topics or []:
        meta_topic = broker.topic(t.name)
        for p in t.partitions or []:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if meta_topic is None or not (0 <= p.partition_index < meta_topic.partitions):
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ts = p.commit_timestamp if v == 1 else DEFAULT_TIMESTAMP
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else NO_LEADER_EPOCH,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now if ts == DEFAULT_TIMESTAMP else ts,
                expire_timestamp=expire,
            )
    errors = dict(unknown)
    if offsets:
        errors.update(
            coordinator(broker).handle_offset_commit(
                group_id=req.group_id,
                member_id=req.member_id or "" if v >= 1 else "",
                group_instance_id=req.group_instance_id if v >= 7 else None,
                generation_id=req.generation_id_or_member_epoch if v >= 1 else -1,
                offsets=offsets,
                api_version=v,
            )
        )
    topics: dict[str, list] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(
            OffsetCommitResponsePartition(partition_index=tp[1], error_code=errors[tp])
        )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[OffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in topics.items()],
    )


def _fetch_one(
    gc: GroupCoordinator, group_id: str, topics, require_stable: bool, member_id=None, member_epoch=-1
):
    """(error, {topic: [(partition, om|None, error)]}) in request order (or sorted for 'all')."""
    if topics is None:
        wanted = None
    else:
        wanted = [(t.name, p) for t in topics for p in (t.partition_indexes or [])]
    err, rows = gc.handle_offset_fetch(group_id, wanted, require_stable, member_id, member_epoch)
    if wanted is None:
        rows.sort(key=lambda r: r[0])
    by_topic: dict[str, list] = {}
    for (topic, part), om, e in rows:
        by_topic.setdefault(topic, []).append((part, om, e))
    return err, wanted, by_topic


def handle_offset_fetch(ctx, req):
    v = ctx.version
    gc = coordinator(ctx.broker)
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req.groups or []:
            if v >= 9:
                err, _, by_topic = _fetch_one(
                    gc, g.group_id, g.topics, require_stable, g.member_id, g.member_epoch
                )
            else:
                err, _, by_topic = _fetch_one(gc, g.group_id, g.topics, require_stable)
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=err,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=name,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=om.offset if om else NO_OFFSET,
                                    committed_leader_epoch=om.leader_epoch if om else NO_LEADER_EPOCH,
                                    metadata=om.metadata if om else "",
                                    error_code=e,
                                )
                                for p, om, e in parts
                            ],
                        )
                        for name, parts in by_topic.items()
                    ]
                    if err == 0
                    else [],
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics = req.topics if v >= 2 else (req.topics or [])
    err, wanted, by_topic = _fetch_one(gc, req.group_id, topics, require_stable)
    if err != 0:
        if v < 2:
            # no top-level error before v2: every requested partition carries it
            by_topic = {}
            for topic, part in wanted or []:
                by_topic.setdefault(topic, []).append((part, None, err))
        else:
            by_topic = {}

    def part(p, om, e):
        return OffsetFetchResponsePartition(
            partition_index=p,
            committed_offset=om.offset if om else NO_OFFSET,
            committed_leader_epoch=(om.leader_epoch if om else NO_LEADER_EPOCH)
            if v >= 5
            else NO_LEADER_EPOCH,
            metadata=om.metadata if om else "",
            error_code=e,
        )

    kw = dict(
        throttle_time_ms=0,
        topics=[
            OffsetFetchResponseTopic(name=name, partitions=[part(*r) for r in parts])
            for name, parts in by_topic.items()
        ],
    )
    if v >= 2:
        kw["error_code"] = err
    return OffsetFetchResponse(**kw)


# ---------------------------------------------------------------------------- admin


def handle_describe_groups(ctx, req):
    v = ctx.version
    gc = coordinator(ctx.broker)
    include_ops = v >= 3 and bool(req.include_authorized_operations)
    out = []
    for gid in req.groups or []:
        err, s = gc.handle_describe_group(gid)
        out.append(
            DescribedGroup(
                error_code=err,
                group_id=gid,
                group_state=s.state,
                protocol_type=s.protocol_type,
                protocol_data=s.protocol,
                members=[
                    DescribedGroupMember(
                        member_id=mid,
                        group_instance_id=iid if v >= 4 else None,
                        client_id=cid,
                        client_host=host,
                        member_metadata=meta,
                        member_assignment=assignment,
                    )
                    for mid, iid, cid, host, meta, assignment in s.members
                ],
                authorized_operations=acl.authorized_operations(ctx, acl.GROUP, gid)
                if include_ops and err == 0
                else AUTHORIZED_OPS_OMITTED,
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)


def handle_list_groups(ctx, req):
    v = ctx.version
    states = list(req.states_filter or []) if v >= 4 else None
    # v5 (KIP-848): the type filter is case-insensitive, as Kafka's Group.GroupType.parse
    types = {t.lower() for t in req.types_filter or []} if v >= 5 else set()
    err, groups = coordinator(ctx.broker).handle_list_groups(states)
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=err,
        groups=[
            ListedGroup(
                group_id=gid,
                protocol_type=ptype,
                group_state=state if v >= 4 else "",
                group_type=gtype if v >= 5 else "",
            )
            for gid, ptype, state, gtype in groups
            if not types or gtype in types
        ],
    )


def handle_delete_groups(ctx, req):
    names = list(req.groups_names or [])
    results = coordinator(ctx.broker).handle_delete_groups(names)
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeletableGroupResult(group_id=g, error_code=results[g]) for g in dict.fromkeys(names)],
    )


def handle_offset_delete(ctx, req):
    wanted = [(t.name, p.partition_index) for t in req.topics or [] for p in t.partitions or []]
    err, result = coordinator(ctx.broker).handle_offset_delete(req.group_id, wanted)
    topics: dict[str, list] = {}
    if err == 0:
        for tp in wanted:
            topics.setdefault(tp[0], []).append(
                OffsetDeleteResponsePartition(partition_index=tp[1], error_code=result.get(tp, 0))
            )
    return OffsetDeleteResponse(
        error_code=err,
        throttle_time_ms=0,
        topics=[OffsetDeleteResponseTopic(name=n, partitions=ps) for n, ps in topics.items()],
    )


# ---------------------------------------------------------------------------- KIP-848


def handle_consumer_group_heartbeat(ctx, req):
    gc = coordinator(ctx.broker)
    err = gc._validate_status(req.group_id or None, allow_empty=False) if req.group_id else None
    if err is not None:
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=err, error_message=None)
    if not gc.started:
        gc.start()
    r = gc.consumer.handle_heartbeat(req, ctx.version, _client_id(ctx), _client_host(ctx))
    if r["error_code"]:
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=r["error_code"],
            error_message=r.get("error_message"),
            member_id=None,
        )
    a = r.get("assignment")
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id=r["member_id"],
        member_epoch=r["member_epoch"],
        heartbeat_interval_ms=r.get("heartbeat_interval_ms", 0),
        assignment=None
        if a is None
        else HeartbeatAssignment(
            topic_partitions=[
                HeartbeatTopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items())
            ]
        ),
    )


def handle_consumer_group_describe(ctx, req):
    gc = coordinator(ctx.broker)
    include_ops = bool(req.include_authorized_operations)
    out = []
    for gid in req.group_ids or []:
        err = gc._validate_status(gid, allow_empty=True)
        if err is not None:
            out.append(CgDescribedGroup(group_id=gid, error_code=err, error_message=None))
            continue
        d = gc.consumer.describe(gid)
        if d["error_code"]:
            out.append(
                CgDescribedGroup(
                    group_id=gid,
                    error_code=d["error_code"],
                    error_message=f"Group {gid} not found."
                    if gid not in gc.groups
                    else f"Group {gid} is not a consumer group.",
                )
            )
            continue

        def assignment(parts):
            return CgAssignment(
                topic_partitions=[
                    CgTopicPartitions(topic_id=t, topic_name=n, partitions=ps) for t, n, ps in parts
                ]
            )

        out.append(
            CgDescribedGroup(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=d["group_state"],
                group_epoch=d["group_epoch"],
                assignment_epoch=d["assignment_epoch"],
                assignor_name=d["assignor_name"],
                members=[
                    CgMember(
                        member_id=m["member_id"],
                        instance_id=m["instance_id"],
                        rack_id=m["rack_id"],
                        member_epoch=m["member_epoch"],
                        client_id=m["client_id"],
                        client_host=m["client_host"],
                        subscribed_topic_names=m["subscribed_topic_names"],
                        subscribed_topic_regex=m["subscribed_topic_regex"],
                        assignment=assignment(m["assignment"]),
                        target_assignment=assignment(m["target_assignment"]),
                    )
                    for m in d["members"]
                ],
                authorized_operations=acl.authorized_operations(ctx, acl.GROUP, gid)
                if include_ops
                else AUTHORIZED_OPS_OMITTED,
            )
        )
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)


_HANDLERS = {
    "consumer_group_heartbeat": handle_consumer_group_heartbeat,
    "consumer_group_describe": handle_consumer_group_describe,
    "find_coordinator": handle_find_coordinator,
    "join_group": handle_join_group,
    "heartbeat": handle_heartbeat,
    "leave_group": handle_leave_group,
    "sync_group": handle_sync_group,
    "offset_commit": handle_offset_commit,
    "offset_fetch": handle_offset_fetch,
    "describe_groups": handle_describe_groups,
    "list_groups": handle_list_groups,
    "delete_groups": handle_delete_groups,
    "offset_delete": handle_offset_delete,
}


def _replicated(handler):
    """Cluster mode: a write to ``__consumer_offsets`` is answered once the partition's ISR has
    it (Kafka appends group records with acks=-1), so a coordinator that dies right after the
    answer loses nothing."""

    def run(ctx, req):
        result = handler(ctx, req)
        broker = ctx.broker
        if broker.replicas is None or req.group_id is None:
            return result
        tp = (OFFSETS_TOPIC, coordinator(broker).partition_for(req.group_id))

        async def after():
            resp = (
                await result if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future) else result
            )
            timeout = broker.config.int("offsets.commit.timeout.ms")
            await broker.replicas.await_log_end(tp, timeout)
            return resp

        return after()

    return run


_HANDLERS["offset_commit"] = _replicated(handle_offset_commit)
_HANDLERS["sync_group"] = _replicated(handle_sync_group)


def register(router) -> None:
    coordinator(router.broker)
    for name, (key, lo, hi) in VERSIONS.items():
        router.register(key, lo, hi, _HANDLERS[name])
