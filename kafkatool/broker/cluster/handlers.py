"""The control-plane APIs of a ZooKeeper-mode broker.

Broker side: LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), served by the replica
manager.  Controller side: ControlledShutdown (7) and AlterPartition (56), answered by the
active controller (NOT_CONTROLLER / STALE_CONTROLLER_EPOCH elsewhere), whose event thread
does the work while the request waits on the event loop.
"""

from __future__ import annotations

import asyncio

from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import AlterPartitionResponse, ControlledShutdownResponse
from kafkatool.protocol.generated.alter_partition_response import PartitionData, TopicData
from kafkatool.protocol.generated.controlled_shutdown_response import RemainingPartition


def handle_leader_and_isr(ctx, req):
    return ctx.broker.replicas.handle_leader_and_isr(req)


def handle_update_metadata(ctx, req):
    return ctx.broker.replicas.handle_update_metadata(req)


def handle_stop_replica(ctx, req):
    return ctx.broker.replicas.handle_stop_replica(req)


def handle_controlled_shutdown(ctx, req):
    cluster = ctx.broker.cluster
    if not cluster.is_controller():
        return ControlledShutdownResponse(
            error_code=ErrorCode.STALE_CONTROLLER_EPOCH, remaining_partitions=[]
        )

    async def run():
        fut = cluster.controller.submit("controlled_shutdown", req.broker_id, req.broker_epoch)
        code, remaining = await asyncio.wrap_future(fut)
        return ControlledShutdownResponse(
            error_code=code,
            remaining_partitions=[RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining],
        )

    return run()


def handle_alter_partition(ctx, req):
    cluster = ctx.broker.cluster
    if not cluster.is_controller():
        return AlterPartitionResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[])
    items = [
        (td.topic_name, pd.partition_index, pd.leader_epoch, list(pd.new_isr), pd.partition_epoch)
        for td in req.topics
        for pd in td.partitions
    ]

    async def run():
        fut = cluster.controller.submit("alter_partition", req.broker_id, req.broker_epoch, items)
        code, results = await asyncio.wrap_future(fut)
        topics: dict[str, list] = {}
        for topic, p, err, st in results:
            topics.setdefault(topic, []).append(
                PartitionData(
                    partition_index=p,
                    error_code=err,
                    leader_id=st.leader if st is not None else -1,
                    leader_epoch=st.leader_epoch if st is not None else -1,
                    isr=list(st.isr) if st is not None else [],
                    partition_epoch=st.zk_version if st is not None else -1,
                )
            )
        return AlterPartitionResponse(
            throttle_time_ms=0,
            error_code=code,
            topics=[TopicData(topic_name=t, partitions=ps) for t, ps in topics.items()],
        )

    return run()


def register(router) -> None:
    # the versions whose partitions are grouped by topic (what this controller sends)
    router.register(4, 2, 4, handle_leader_and_isr)
    router.register(5, 3, 3, handle_stop_replica)
    router.register(6, 5, 6, handle_update_metadata)
    router.register(7, 0, 3, handle_controlled_shutdown)
    router.register(56, 0, 1, handle_alter_partition)
    # WriteTxnMarkers (27): every writable broker registers it (broker/server.py)
