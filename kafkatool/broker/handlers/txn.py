"""Transaction APIs: InitProducerId (22), AddPartitionsToTxn (24, client v0-3),
AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28), DescribeTransactions (65)
and ListTransactions (66).

InitProducerId without a transactional id stays the idempotent path of
``handlers/produce.py``; with one it goes to the transaction coordinator
(``kafkatool.broker.txn``).  PRODUCER_FENCED (90) only exists for InitProducerId
v4+ and AddPartitions/AddOffsets/EndTxn/TxnOffsetCommit v2+; older versions get
INVALID_PRODUCER_EPOCH (47), as KafkaApis maps it.
"""

from __future__ import annotations

import time

from kafkatool.broker.group.offsets import NO_LEADER_EPOCH, OffsetAndMetadata
from kafkatool.broker.txn import state_log as S
from kafkatool.broker.txn.coordinator import TxnError, txn_coordinator
from kafkatool.broker.txn.offsets import txn_commit_offsets
from kafkatool.broker.txn.views import active_producers
from kafkatool.log.topic_settings import topic_name_error
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
)
from kafkatool.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from kafkatool.protocol.generated.describe_producers_response import (
    PartitionResponse as ProducersPartition,
)
from kafkatool.protocol.generated.describe_producers_response import ProducerState
from kafkatool.protocol.generated.describe_producers_response import (
    TopicResponse as ProducersTopic,
)
from kafkatool.protocol.generated.describe_transactions_response import TopicData
from kafkatool.protocol.generated.describe_transactions_response import (
    TransactionState as DescribedTxn,
)
from kafkatool.protocol.generated.list_transactions_response import TransactionState as ListedTxn
from kafkatool.protocol.generated.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

#: the versions fully implemented.  InitProducerId v5, AddOffsetsToTxn/EndTxn/TxnOffsetCommit v4
#: only let the broker answer TRANSACTION_ABORTABLE (KIP-890 part 1), which this broker never
#: needs to; AddPartitionsToTxn v4+ is the broker-to-broker batched form (KIP-890 verification,
#: txn/verification.py); EndTxn v5 (the epoch bump per transaction) is unstable in the schemas
#: and so not advertised.
VERSIONS = {
    22: (0, 5),
    24: (0, 5),
    25: (0, 4),
    26: (0, 4),
    28: (0, 4),
    61: (0, 0),
    65: (0, 0),
    66: (0, 1),
}


def _fenced(code: int, version: int, first_version: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


# ---------------------------------------------------------------------------- InitProducerId


def handle_init_producer_id(ctx, req):
    if req.transactional_id is None:
        from kafkatool.broker.handlers.produce import handle_init_producer_id as idempotent

        return idempotent(ctx, req)
    if req.transactional_id == "":
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1
        )
    tc = txn_coordinator(ctx.broker)
    pid, epoch = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
    try:
        pid, epoch = tc.init_producer_id(req.transactional_id, req.transaction_timeout_ms, pid, epoch)
    except TxnError as exc:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=_fenced(exc.code, ctx.version, 4),
            producer_id=-1,
            producer_epoch=-1,
        )
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


# ---------------------------------------------------------------------------- AddPartitionsToTxn


def _partition_errors(broker, requested) -> dict[tuple[str, int], int]:
    """UNKNOWN_TOPIC_OR_PARTITION for what the metadata lacks and, when anything failed,
    OPERATION_NOT_ATTEMPTED for the rest (the whole transaction's request fails)."""
    errors: dict[tuple[str, int], int] = {}
    for t, p in requested:
        meta = broker.topic(t)
        # cluster mode and a broker of several processes: the metadata, not the local logs
        by_metadata = broker.replicas is not None or broker.processes is not None
        exists = 0 <= p < meta.partitions if by_metadata and meta else None
        if meta is None or not (exists if exists is not None else broker.get_log(t, p) is not None):
            errors[(t, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if errors:
        for tp in requested:
            errors.setdefault(tp, ErrorCode.OPERATION_NOT_ATTEMPTED)
    return errors


def _add_or_verify(broker, tid, pid, epoch, requested, *, verify: bool, version: int) -> dict:
    """One transaction's partitions, added or (v4+ VerifyOnly, KIP-890) checked."""
    errors = _partition_errors(broker, requested)
    if errors:
        return errors
    tc = txn_coordinator(broker)
    if verify:
        return tc.verify_partitions(tid, pid, epoch, requested)
    code = 0
    try:
        tc.add_partitions(tid, pid, epoch, requested)
    except TxnError as exc:
        code = _fenced(exc.code, version, 2)
    return dict.fromkeys(requested, code)


def _topic_results(errors: dict) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
        )
    return [
        AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
        for name, parts in by_topic.items()
    ]


def handle_add_partitions_to_txn(ctx, req):
    """KafkaApis.handleAddPartitionsToTxnRequest: v0-3 from clients (one transaction), v4+ from
    brokers (a batch of transactions, each added or only verified)."""
    broker = ctx.broker
    v = ctx.version
    if v < 4:
        requested = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        errors = _add_or_verify(
            broker,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            requested,
            verify=False,
            version=v,
        )
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors)
        )
    results = []
    written = set()
    for txn in req.transactions:
        requested = [(t.name, p) for t in txn.topics for p in t.partitions]
        if not txn.transactional_id:
            errors = dict.fromkeys(requested, ErrorCode.INVALID_REQUEST)
        else:
            errors = _add_or_verify(
                broker,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                requested,
                verify=txn.verify_only,
                version=v,
            )
            if not txn.verify_only and broker.replicas is not None:
                written.add(_txn_partition(broker, txn))
        results.append(
            AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_topic_results(errors)
            )
        )
    resp = AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
    written.discard(None)
    if not written:
        return resp

    async def replicated():
        for tp in sorted(written):
            await broker.replicas.await_log_end(tp, broker.config.int("offsets.commit.timeout.ms"))
        return resp

    return replicated()


# ---------------------------------------------------------------------------- AddOffsetsToTxn


def handle_add_offsets_to_txn(ctx, req):
    tc = txn_coordinator(ctx.broker)
    gc = tc.group_coordinator()
    code = 0
    err = gc.ensure_offsets_topic()
    if err is not None:
        code = err
    else:
        try:
            tc.add_partitions(
                req.transactional_id,
                req.producer_id,
                req.producer_epoch,
                [tc.offsets_partition(req.group_id)],
            )
        except TxnError as exc:
            code = _fenced(exc.code, ctx.version, 2)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


# ---------------------------------------------------------------------------- EndTxn


def handle_end_txn(ctx, req):
    code = 0
    try:
        txn_coordinator(ctx.broker).end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed
        )
    except TxnError as exc:
        code = _fenced(exc.code, ctx.version, 2)
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


# ---------------------------------------------------------------------------- TxnOffsetCommit


def handle_txn_offset_commit(ctx, req):
    v = ctx.version
    tc = txn_coordinator(ctx.broker)
    gc = tc.group_coordinator()
    now = int(time.time() * 1000)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for t in req.topics:
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 2 else NO_LEADER_EPOCH,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now,
            )
    md = tc.by_producer.get(req.producer_id)
    fenced = None
    if (
        md is not None
        and md.transactional_id == req.transactional_id
        and req.producer_epoch < md.producer_epoch
    ):
        fenced = _fenced(ErrorCode.PRODUCER_FENCED, v, 2)
    if fenced is not None:
        results = dict.fromkeys(offsets, fenced)
    else:
        results = txn_commit_offsets(
            gc,
            group_id=req.group_id,
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            member_id=req.member_id if v >= 3 else "",
            instance_id=req.group_instance_id if v >= 3 else None,
            generation_id=req.generation_id if v >= 3 else -1,
            offsets=offsets,
        )
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (topic, p), code in results.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitResponsePartition(partition_index=p, error_code=code)
        )
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[TxnOffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )


# ---------------------------------------------------------------------------- Describe / List


def handle_describe_transactions(ctx, req):
    tc = txn_coordinator(ctx.broker)
    out = []
    for tid in req.transactional_ids:
        md = tc.describe(tid)
        if md is None:
            out.append(DescribedTxn(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid))
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(md.partitions):
            by_topic.setdefault(t, []).append(p)
        out.append(
            DescribedTxn(
                error_code=0,
                transactional_id=tid,
                transaction_state=md.state_name,
                transaction_timeout_ms=md.timeout_ms,
                transaction_start_time_ms=md.start_ms,
                producer_id=md.producer_id,
                producer_epoch=md.producer_epoch,
                topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


def handle_list_transactions(ctx, req):
    tc = txn_coordinator(ctx.broker)
    known = set(S.STATE_NAMES.values())
    states = set(req.state_filters or [])
    unknown = sorted(s for s in states if s not in known)
    pids = set(req.producer_id_filters or [])
    duration = req.duration_filter if ctx.version >= 1 else -1
    now = int(time.time() * 1000)
    out = []
    for md in tc.list():
        if states and md.state_name not in states:
            continue
        if pids and md.producer_id not in pids:
            continue
        if duration is not None and duration >= 0 and now - md.start_ms <= duration:
            continue  # KIP-994: only transactions running longer than the filter (as Kafka computes it)
        out.append(
            ListedTxn(
                transactional_id=md.transactional_id,
                producer_id=md.producer_id,
                transaction_state=md.state_name,
            )
        )
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=out
    )


# ---------------------------------------------------------------------------- DescribeProducers


def handle_describe_producers(ctx, req):
    """DescribeProducers (61, KIP-664): the active producers of each partition's log."""
    broker = ctx.broker
    topics = []
    for rt in req.topics:
        parts = []
        invalid = topic_name_error(rt.name or "")
        for p in rt.partition_indexes:
            if invalid is not None:  # Kafka's checkValidTopic, before the topic is looked up
                parts.append(
                    ProducersPartition(
                        partition_index=p,
                        error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                        error_message=invalid,  # ApiError.fromThrowable: the exception's message
                        active_producers=[],
                    )
                )
                continue
            lg = broker.get_log(rt.name, p) if broker.topic(rt.name) is not None else None
            if lg is None:
                parts.append(
                    ProducersPartition(
                        partition_index=p,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        active_producers=[],
                    )
                )
                continue
            active = [
                ProducerState(
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_sequence,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_start_offset,
                )
                for e in active_producers(lg)
            ]
            parts.append(ProducersPartition(partition_index=p, error_code=0, active_producers=active))
        topics.append(ProducersTopic(name=rt.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _replicated(handler, partition_of):
    """Cluster mode: a coordinator's write to its internal topic is answered once the ISR has
    it (Kafka appends them with acks=-1)."""
    import asyncio

    def run(ctx, req):
        result = handler(ctx, req)
        broker = ctx.broker
        tp = partition_of(broker, req) if broker.replicas is not None else None
        if tp is None:
            return result

        async def after():
            resp = await result if asyncio.iscoroutine(result) else result
            await broker.replicas.await_log_end(tp, broker.config.int("offsets.commit.timeout.ms"))
            return resp

        return after()

    return run


def _txn_partition(broker, req):
    from kafkatool.broker.txn.state_log import TRANSACTION_STATE_TOPIC

    # a request (v0-3: one transaction) or one AddPartitionsToTxnTransaction of a v4+ batch
    tid = getattr(req, "transactional_id", None) or getattr(req, "v3_and_below_transactional_id", None)
    if not tid:
        return None
    return (TRANSACTION_STATE_TOPIC, txn_coordinator(broker).partition_for(tid))


def _group_partition(broker, req):
    from kafkatool.broker.group.persistence import OFFSETS_TOPIC

    if not req.group_id:
        return None
    return (OFFSETS_TOPIC, txn_coordinator(broker).group_coordinator().partition_for(req.group_id))


def register(router) -> None:
    handlers = {
        61: handle_describe_producers,
        22: _replicated(handle_init_producer_id, _txn_partition),
        24: _replicated(handle_add_partitions_to_txn, _txn_partition),
        25: _replicated(handle_add_offsets_to_txn, _txn_partition),
        26: _replicated(handle_end_txn, _txn_partition),
        28: _replicated(handle_txn_offset_commit, _group_partition),
        65: handle_describe_transactions,
        66: handle_list_transactions,
    }
    for key, (lo, hi) in VERSIONS.items():
        router.register(key, lo, hi, handlers[key])
