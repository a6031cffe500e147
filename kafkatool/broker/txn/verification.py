"""KIP-890 part 1: a partition leader verifies that a transactional batch's partition is in
its producer's ongoing transaction before it appends the batch
(ReplicaManager.maybeStartTransactionVerificationForPartitions, AddPartitionsToTxnManager).

A partition whose log already holds an open transaction of the producer needs no check
(UnifiedLog.hasOngoingTransaction).  For the others the leader asks the coordinator of the
request's transactional id: itself in standalone mode or when it leads the id's
``__transaction_state`` partition, else that broker, with one AddPartitionsToTxn v5
``VerifyOnly`` request per produce request over the inter-broker listener.  Coordinator
answers become the produce errors Kafka gives (``for_produce``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.txn")

#: the AddPartitionsToTxn version brokers send each other (VerifyOnly from v4, v5 answers
#: TRANSACTION_ABORTABLE)
VERIFY_VERSION = 5

#: coordinator answers a client may retry: Kafka answers NOT_ENOUGH_REPLICAS for them, which
#: every client retries without a metadata refresh (ReplicaManager.appendRecords)
_RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


@dataclass
class Pending:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list = field(default_factory=list)


def pending(broker, req) -> Pending | None:
    """The partitions of a produce request that need verification, or None."""
    tid = getattr(req, "transactional_id", None)
    if not tid or broker.read_only or not broker.config.bool("transaction.partition.verification.enable"):
        return None
    out: Pending | None = None
    for td in req.topic_data:
        for p in td.partition_data:
            if not p.records:
                continue
            try:
                b0 = next(iter(R.iter_batches(memoryview(p.records))), None)
            except FormatError:
                continue  # the append path answers it
            if b0 is None or b0.magic < 2 or not b0.is_transactional or b0.producer_id < 0:
                continue
            lg = broker.get_log(td.name, p.index)
            if lg is None or broker.leader_error(td.name, p.index) is not None:
                continue
            entry = lg.producer_state.producers.get(b0.producer_id)
            if entry is not None and entry.current_txn_first_offset >= 0:
                continue  # the producer's transaction is open in this log already
            if out is None:
                out = Pending(tid, b0.producer_id, b0.producer_epoch)
            elif (b0.producer_id, b0.producer_epoch) != (out.producer_id, out.producer_epoch):
                continue  # one producer per request; the log's producer state fences the other
            out.partitions.append((td.name, p.index))
    return out


def for_produce(code: int, version: int) -> tuple[int, str | None] | None:
    """A coordinator's verification answer as the produce error Kafka gives (code, and the
    answer's message where ReplicaManager has a custom one, else None), or None."""
    if code == 0:
        return None
    if code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH  # producers expect it here
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        code = ErrorCode.INVALID_TXN_STATE  # Produce v11 introduced TRANSACTION_ABORTABLE
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {ErrorCode(code).name}"
        )
    return code, None  # the others carry no message (ReplicaManager: no custom exception)


def verify(broker, todo: Pending, version: int):
    """tp -> (error code, message) for the partitions that failed; a dict, or a coroutine
    giving one when the coordinator is another broker."""
    from kafkatool.broker.txn.coordinator import txn_coordinator
    from kafkatool.broker.txn.state_log import TRANSACTION_STATE_TOPIC

    rm = broker.replicas if broker.replicas is not None else broker.processes
    if broker.is_member:
        node = rm.base_node  # the primary process coordinates every transaction
    else:
        tc = txn_coordinator(broker)
        node = None
        if rm is not None:
            leader, _epoch = rm.leader_of(TRANSACTION_STATE_TOPIC, tc.partition_for(todo.transactional_id))
            if leader != rm.node_id:
                node = leader
    if node is None:
        codes = tc.verify_partitions(
            todo.transactional_id, todo.producer_id, todo.producer_epoch, todo.partitions
        )
        return _failures(codes, version)

    async def remote():
        return _failures(await _ask(broker, node, todo), version)

    return remote()


def _failures(codes: dict, version: int) -> dict:
    out = {}
    for tp, code in codes.items():
        err = for_produce(code, version)
        if err is not None:
            out[tp] = err
    return out


async def _ask(broker, node: int, todo: Pending) -> dict:
    """AddPartitionsToTxnManager: AddPartitionsToTxn VerifyOnly to the coordinator's broker."""
    from kafkatool.broker.cluster.client import BrokerLinkError
    from kafkatool.protocol.generated import AddPartitionsToTxnRequest
    from kafkatool.protocol.generated.add_partitions_to_txn_request import (
        AddPartitionsToTxnTopic,
        AddPartitionsToTxnTransaction,
    )

    rm = broker.replicas if broker.replicas is not None else broker.processes
    ep = rm.endpoint(node, None) if node >= 0 else None
    if ep is None:
        return dict.fromkeys(todo.partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    by_topic: dict[str, list[int]] = {}
    for t, p in todo.partitions:
        by_topic.setdefault(t, []).append(p)
    req = AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnTransaction(
                transactional_id=todo.transactional_id,
                producer_id=todo.producer_id,
                producer_epoch=todo.producer_epoch,
                verify_only=True,
                topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )
        ]
    )
    try:
        resp = await rm.verify_links.request(node, ep, 24, VERIFY_VERSION, req)
    except BrokerLinkError as exc:
        log.info("transaction verification with broker %d failed: %s", node, exc)
        return dict.fromkeys(todo.partitions, ErrorCode.NETWORK_EXCEPTION)
    if resp.error_code:
        # a client is never shown CLUSTER_AUTHORIZATION_FAILED for the broker's own request
        code = (
            ErrorCode.INVALID_TXN_STATE
            if resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            else resp.error_code
        )
        return dict.fromkeys(todo.partitions, code)
    codes = dict.fromkeys(todo.partitions, ErrorCode.INVALID_TXN_STATE)  # unanswered: not verified
    for result in resp.results_by_transaction:
        if result.transactional_id != todo.transactional_id:
            continue
        for tr in result.topic_results:
            for pr in tr.results_by_partition:
                tp = (tr.name, pr.partition_index)
                if tp in codes:
                    codes[tp] = pr.partition_error_code
    return codes
