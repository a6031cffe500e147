"""Transaction markers between brokers (Kafka's TransactionMarkerChannelManager and
KafkaApis.handleWriteTxnMarkersRequest).

The coordinator sends WriteTxnMarkers to the leader of every partition of a finished
transaction (a direct append where it leads the partition itself); the leader appends
the COMMIT/ABORT control batch with the engine's one marker writer
(``TransactionCoordinator.write_markers``) and answers once its ISR has it.
"""

from __future__ import annotations

import asyncio
import logging

from kafkatool.broker.cluster.client import BrokerLinkError
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkatool.protocol.generated.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from kafkatool.protocol.generated.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)

log = logging.getLogger("kafkatool.broker.txn")

WRITE_TXN_MARKERS_VERSION = 1
#: how long a marker's leader waits for its ISR before answering (Kafka: request.timeout.ms)
MARKER_REPLICATION_TIMEOUT_MS = 30000


_FENCED = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)


async def send_markers(
    tc,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    partitions: list,
    coordinator_epoch: int,
    done: set,
) -> bool:
    """Write the markers of ``partitions`` not yet in ``done`` (adding each written one); True
    when every one is written (or its topic is gone: Kafka drops those markers too).  Raises
    TxnError when a leader answers that this coordinator or its producer epoch is fenced."""
    from kafkatool.broker.txn.coordinator import TxnError

    broker = tc.broker
    # cluster mode: the replica manager; a broker of several processes: its process group
    rm = broker.replicas if broker.replicas is not None else broker.processes
    by_leader: dict[int, list] = {}
    complete = True
    for tp in partitions:
        if tp in done:
            continue
        if broker.topic(tp[0]) is None:
            done.add(tp)
            continue
        leader, _ = rm.leader_of(*tp)
        if leader < 0:
            complete = False
            continue
        by_leader.setdefault(leader, []).append(tp)
    for leader, tps in by_leader.items():
        if leader == rm.node_id:
            local = [tp for tp in tps if rm.is_leader(*tp)]
            tc.write_markers(producer_id, producer_epoch, commit, local, coordinator_epoch)
            for tp in local:
                if await rm.await_log_end(tp, MARKER_REPLICATION_TIMEOUT_MS):
                    done.add(tp)
            complete &= all(tp in done for tp in tps)
            continue
        ep = rm.endpoint(leader, None)
        if ep is None:
            complete = False
            continue
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        req = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=commit,
                    topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        try:
            resp = await rm.marker_links.request(leader, ep, 27, WRITE_TXN_MARKERS_VERSION, req)
        except BrokerLinkError as exc:
            log.info("WriteTxnMarkers to broker %d: %s", leader, exc)
            complete = False
            continue
        for m in resp.markers:
            for rt in m.topics:
                for rp in rt.partitions:
                    if rp.error_code == ErrorCode.NONE:
                        done.add((rt.name, rp.partition_index))
                    elif rp.error_code in _FENCED:
                        # a newer coordinator or producer epoch wrote there: this coordinator is a
                        # zombie and stops sending (TransactionMarkerRequestCompletionHandler)
                        raise TxnError(
                            rp.error_code,
                            f"{rt.name}-{rp.partition_index} on broker {leader} refused the marker",
                        )
                    else:
                        complete = False
                        log.debug(
                            "marker for %s-%d on broker %d: %s",
                            rt.name,
                            rp.partition_index,
                            leader,
                            ErrorCode(rp.error_code).name,
                        )
    return complete and all(tp in done for tp in partitions if broker.topic(tp[0]) is not None)


def handle_write_txn_markers(ctx, req):
    """The partition leader's side: append each marker where this broker leads, answer after
    the ISR has it (NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION elsewhere)."""
    from kafkatool.broker.txn.coordinator import TxnError, txn_coordinator

    broker = ctx.broker
    tc = txn_coordinator(broker)
    results = []
    appended = []
    for m in req.markers:
        topics = []
        for mt in m.topics:
            parts = []
            ok = []
            for p in mt.partition_indexes:
                err = broker.leader_error(mt.name, p) if broker.topic(mt.name) is not None else None
                if broker.topic(mt.name) is None or broker.get_log(mt.name, p) is None:
                    err = err or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                r = WritableTxnMarkerPartitionResult(partition_index=p, error_code=err or 0)
                parts.append(r)
                if err is None:
                    ok.append(((mt.name, p), r))
            for tp, r in ok:  # each partition on its own, as ReplicaManager appends them
                try:
                    tc.write_markers(
                        m.producer_id, m.producer_epoch, m.transaction_result, [tp], m.coordinator_epoch
                    )
                    appended.append((tp, r))
                except TxnError as exc:
                    r.error_code = exc.code
            topics.append(WritableTxnMarkerTopicResult(name=mt.name, partitions=parts))
        results.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    resp = WriteTxnMarkersResponse(markers=results)
    if broker.replicas is None or not appended:
        return resp

    async def replicated():
        waits = await asyncio.gather(
            *(broker.replicas.await_log_end(tp, MARKER_REPLICATION_TIMEOUT_MS) for tp, _ in appended)
        )
        for (_tp, r), ok in zip(appended, waits, strict=True):
            if not ok:
                r.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return resp

    return replicated()
