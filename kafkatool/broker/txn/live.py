"""Transactions of a live cluster (``kafkatool transactions --bootstrap-server``), as Kafka 3.7's
Admin calls behind kafka-transactions.sh see them, on the project's one blocking client
(:class:`~kafkatool.assign.kafka_client.KafkaAdmin`):

* listTransactions: ListTransactions at every broker (each coordinates its own ids);
* describeTransactions: FindCoordinator (key type 1, TRANSACTION; every id in one request from
  v4 on) then one DescribeTransactions at each coordinator with its ids;
* describeProducers: DescribeProducers at the partition's leader, or at the replica named by
  ``broker_id``;
* abortTransaction: WriteTxnMarkers (ABORT, the producer's id, epoch and coordinator epoch)
  at the partition's leader, refusals in AbortTransactionHandler's words;
* find-hanging's coordinator half (:func:`coordinator_view`): what the coordinators hold of a
  set of producer ids, the input of the one rule (:func:`kafkatool.broker.txn.views.hanging`),
  for ``transactions find-hanging`` and ``kafkatool health``.

Retriable answers (a moving leader or coordinator, a coordinator still loading) are asked
again as Java's admin asks, with its backoff until default.api.timeout.ms (the one rule,
kafka_client.AdminTimeouts.attempts); what is left is :class:`TxnAdminError` with Kafka's message.
"""

from __future__ import annotations

from kafkatool.assign import group_client as GC
from kafkatool.assign.kafka_client import (
    KafkaAdmin,
    KafkaAdminError,
    admin_timeouts,
    describe_error,
    error_name,
)
from kafkatool.broker.txn.views import Description, PartitionProducers, Producer, state_name
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode as E

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, WRITE_TXN_MARKERS = 61, 65, 66, 27
# a request whose answer is retriable is asked again as Kafka's admin client asks, until
# default.api.timeout.ms (kafka_client.admin_timeouts: 60 s, or --command-config's)
_RETRY_LEADER = (
    E.NOT_LEADER_OR_FOLLOWER,
    E.LEADER_NOT_AVAILABLE,
    E.REPLICA_NOT_AVAILABLE,
    E.BROKER_NOT_AVAILABLE,
    E.UNKNOWN_TOPIC_OR_PARTITION,
)
_RETRY_COORDINATOR = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)


class TxnAdminError(KafkaAdminError):
    """A transactions call the cluster refused: Kafka's exception message, ``code``."""


def _message(code: int, text: str) -> str:
    return f"{text} ({error_name(code)})" if code else text


# ----------------------------------------------------------------------------- list


def list_transactions(
    admin: KafkaAdmin, producer_ids: set[int] | None = None
) -> dict[int, list[tuple[str, int, str]]]:
    """{broker id: [(transactional id, producer id, state)]} from every broker, in broker id
    order (ListTransactionsResult.allByBrokerId's HashMap<Integer, ...>); ``producer_ids``
    filters as ListTransactionsOptions.filterProducerIds."""
    meta = admin.metadata()
    out: dict[int, list[tuple[str, int, str]]] = {}
    for node in sorted(meta.brokers):
        req = API_BY_KEY[LIST_TRANSACTIONS].request(
            state_filters=[], producer_id_filters=sorted(producer_ids or []), duration_filter=-1
        )
        for _ in admin_timeouts().attempts():
            resp = admin.request(LIST_TRANSACTIONS, req, node)
            if resp.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
        code = resp.error_code
        if code == E.COORDINATOR_NOT_AVAILABLE:
            raise TxnAdminError(
                f"ListTransactions request sent to broker {node} failed because the coordinator is shutting down",
                code,
            )
        if code:
            raise TxnAdminError(
                _message(
                    code,
                    f"ListTransactions request sent to broker {node} failed with an unexpected exception",
                ),
                code,
            )
        out[node] = [
            (t.transactional_id, t.producer_id, state_name(t.transaction_state))
            for t in resp.transaction_states
        ]
    return out


# ----------------------------------------------------------------------------- describe


def describe_transaction(admin: KafkaAdmin, transactional_id: str) -> Description | None:
    """The coordinator's state of ``transactional_id``; None when the coordinator does not
    know it (TRANSACTIONAL_ID_NOT_FOUND)."""
    return describe_transactions(admin, [transactional_id])[transactional_id]


def _quoted(transactional_id: str) -> str:
    return f"DescribeTransactions request for transactionalId `{transactional_id}`"


def describe_transactions(admin: KafkaAdmin, transactional_ids) -> dict[str, Description | None]:
    """Admin.describeTransactions: each id's coordinator (FindCoordinator, one request for every
    id from v4 on), then one DescribeTransactions per coordinator with all of its ids; None for
    an id its coordinator does not know (TRANSACTIONAL_ID_NOT_FOUND). Any other refusal raises
    TxnAdminError in DescribeTransactionsHandler's words (the admin's result fails)."""
    from kafkatool.protocol.generated.describe_transactions_request import DescribeTransactionsRequest

    pending = list(dict.fromkeys(transactional_ids))
    out: dict[str, Description | None] = {}
    codes: dict[str, int] = {}
    unfound: dict[str, GC.GroupRequestError] = {}  # the last retriable FindCoordinator refusal
    for _ in admin_timeouts().attempts():
        if not pending:
            break
        by_node: dict[int, list[str]] = {}
        for tid, node in GC.find_coordinators(admin, pending, key_type=1).items():
            if isinstance(node, GC.GroupRequestError):
                if node.code in _RETRY_COORDINATOR:
                    codes[tid] = node.code
                    unfound[tid] = node
                    continue
                raise TxnAdminError(str(node), node.code)
            unfound.pop(tid, None)
            by_node.setdefault(node, []).append(tid)
        for node, ids in sorted(by_node.items()):
            resp = admin.request(
                DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=ids), node
            )
            states = {s.transactional_id: s for s in resp.transaction_states}
            for tid in ids:
                st = states.get(tid)
                if st is None:
                    raise TxnAdminError(f"{_quoted(tid)} got no answer for the id")
                code = codes[tid] = st.error_code
                if code in _RETRY_COORDINATOR:
                    continue
                if code == E.TRANSACTIONAL_ID_NOT_FOUND:
                    out[tid] = None
                elif code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise TxnAdminError(f"{_quoted(tid)} failed due to authorization failure", code)
                elif code:
                    raise TxnAdminError(
                        _message(code, f"{_quoted(tid)} failed due to unexpected error"), code
                    )
                else:
                    out[tid] = Description(
                        tid,
                        node,
                        st.producer_id,
                        st.producer_epoch,
                        state_name(st.transaction_state),
                        st.transaction_timeout_ms,
                        st.transaction_start_time_ms,
                        {(t.topic, p) for t in st.topics for p in t.partitions},
                    )
        pending = [tid for tid in pending if tid not in out]
    if pending:
        if pending[0] in unfound:
            raise TxnAdminError(str(unfound[pending[0]]), unfound[pending[0]].code)
        code = codes.get(pending[0], 0)
        raise TxnAdminError(
            _message(code, f"{_quoted(pending[0])} failed: the coordinator did not answer"), code
        )
    return out


def not_found_message(transactional_id: str) -> str:
    """TransactionalIdNotFoundException's message (DescribeTransactionsHandler)."""
    return (
        f"DescribeTransactions request for transactionalId `{transactional_id}` failed because the ID "
        "could not be found"
    )


# ----------------------------------------------------------------------------- producers


def _leader(admin: KafkaAdmin, tp: tuple[str, int], refresh: bool) -> tuple[int, int]:
    """(leader id or -1, error code) of a partition from the metadata."""
    meta = admin.metadata([tp[0]]) if refresh else admin.metadata_cached()
    if tp[0] not in meta.topics and not refresh:
        return _leader(admin, tp, True)
    if tp[0] not in meta.topics:
        return -1, meta.topic_errors.get(tp[0], E.UNKNOWN_TOPIC_OR_PARTITION)
    info = meta.topics[tp[0]].get(tp[1])
    if info is None:
        return -1, E.UNKNOWN_TOPIC_OR_PARTITION
    return info.leader, (E.LEADER_NOT_AVAILABLE if info.leader < 0 else 0)


def describe_producers(
    admin: KafkaAdmin, tps: list[tuple[str, int]], broker_id: int | None = None
) -> dict[tuple[str, int], PartitionProducers | TxnAdminError]:
    """Each partition's active producers (DescribeProducers at its leader, or at ``broker_id``),
    or the error Kafka's admin fails that partition with (DescribeProducersHandler's words)."""
    from kafkatool.protocol.generated.describe_producers_request import DescribeProducersRequest, TopicRequest

    out: dict[tuple[str, int], PartitionProducers | TxnAdminError] = {}
    pending = list(dict.fromkeys(tps))
    last: dict[tuple[str, int], int] = {}
    timeouts = admin_timeouts()
    for attempt in timeouts.attempts():
        if not pending:
            break
        by_node: dict[int, list[tuple[str, int]]] = {}
        for tp in pending:
            if broker_id is not None:
                by_node.setdefault(broker_id, []).append(tp)
                continue
            leader, code = _leader(admin, tp, refresh=attempt > 0)
            if leader < 0:
                last[tp] = code
                if code not in _RETRY_LEADER:
                    out[tp] = TxnAdminError(
                        _message(code, f"Failed to fetch metadata for partition {tp[0]}-{tp[1]}"), code
                    )
                continue
            by_node.setdefault(leader, []).append(tp)
        for node, group in by_node.items():
            topics: dict[str, list[int]] = {}
            for t, p in group:
                topics.setdefault(t, []).append(p)
            req = DescribeProducersRequest(
                topics=[TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()]
            )
            resp = admin.request(DESCRIBE_PRODUCERS, req, node)
            for rt in resp.topics:
                for rp in rt.partitions:
                    tp = (rt.name, rp.partition_index)
                    code = rp.error_code
                    name = f"{tp[0]}-{tp[1]}"
                    if code == 0:
                        out[tp] = PartitionProducers(
                            tp[0],
                            tp[1],
                            [
                                Producer(
                                    s.producer_id,
                                    s.producer_epoch,
                                    s.last_sequence,
                                    s.last_timestamp,
                                    s.coordinator_epoch,
                                    s.current_txn_start_offset,
                                )
                                for s in rp.active_producers
                            ],
                        )
                    elif code == E.NOT_LEADER_OR_FOLLOWER and broker_id is not None:
                        out[tp] = TxnAdminError(
                            _message(
                                code,
                                f"Failed to describe active producers for partition {name} on brokerId {broker_id}",
                            ),
                            code,
                        )
                    elif code in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION):
                        last[tp] = code  # asked again (a new leader from the metadata)
                    elif code == E.INVALID_TOPIC_EXCEPTION:
                        out[tp] = TxnAdminError(
                            f"Failed to fetch metadata for partition {name} due to invalid topic error: "
                            f"{rp.error_message or describe_error(code)}",
                            code,
                        )
                    elif code == E.TOPIC_AUTHORIZATION_FAILED:
                        out[tp] = TxnAdminError(
                            f"Failed to describe active producers for partition {name} due to authorization "
                            f"failure on topic `{tp[0]}`",
                            code,
                        )
                    else:
                        out[tp] = TxnAdminError(
                            _message(
                                code,
                                f"Failed to describe active producers for partition {name} due to unexpected error",
                            ),
                            code,
                        )
        pending = [tp for tp in pending if tp not in out]
    for tp in pending:
        code = last.get(tp, E.UNKNOWN_TOPIC_OR_PARTITION)
        out[tp] = TxnAdminError(
            f"{error_name(code)}: timed out after default.api.timeout.ms {timeouts.api_timeout_ms}", code
        )
    return out


# ----------------------------------------------------------------------------- abort


def abort_spec_text(
    tp: tuple[str, int], producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> str:
    """AbortTransactionSpec.toString."""
    return (
        f"AbortTransactionSpec(topicPartition={tp[0]}-{tp[1]}, producerId={producer_id}, "
        f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})"
    )


def abort_transaction(
    admin: KafkaAdmin, tp: tuple[str, int], producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> None:
    """Admin.abortTransaction: an ABORT marker for the producer's transaction, written by the
    partition's leader (WriteTxnMarkers); a refusal raises TxnAdminError in
    AbortTransactionHandler's words."""
    from kafkatool.protocol.generated.write_txn_markers_request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    spec = abort_spec_text(tp, producer_id, producer_epoch, coordinator_epoch)
    req = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=False,
                topics=[WritableTxnMarkerTopic(name=tp[0], partition_indexes=[tp[1]])],
                coordinator_epoch=coordinator_epoch,
            )
        ]
    )
    code = E.UNKNOWN_TOPIC_OR_PARTITION
    timeouts = admin_timeouts()
    for attempt in timeouts.attempts():
        leader, code = _leader(admin, tp, refresh=attempt > 0)
        if leader < 0:
            if code in _RETRY_LEADER:
                continue
            raise TxnAdminError(
                _message(code, f"Failed to fetch metadata for partition {tp[0]}-{tp[1]}"), code
            )
        resp = admin.request(WRITE_TXN_MARKERS, req, leader)
        codes = [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]
        if len(codes) != 1:
            raise TxnAdminError(
                f"WriteTxnMarkers response included unexpected entries (expected to find exactly one entry "
                f"with producerId {producer_id} and topic partition {tp[0]}-{tp[1]})"
            )
        code = codes[0]
        if code == 0:
            return
        if code == E.CLUSTER_AUTHORIZATION_FAILED:
            raise TxnAdminError(
                f"WriteTxnMarkers request with {spec} failed due to cluster authorization error", code
            )
        if code == E.INVALID_PRODUCER_EPOCH:
            raise TxnAdminError(
                f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch", code
            )
        if code == E.TRANSACTION_COORDINATOR_FENCED:
            raise TxnAdminError(
                f"WriteTxnMarkers request with {spec} failed since the provided coordinator epoch "
                f"{coordinator_epoch} has been fenced by the active coordinator",
                code,
            )
        if code in _RETRY_LEADER:
            continue
        raise TxnAdminError(
            f"WriteTxnMarkers request with {spec} failed due to unexpected error: {describe_error(code)}",
            code,
        )
    raise TxnAdminError(
        f"WriteTxnMarkers request with {spec} failed: still {error_name(code)} after default.api.timeout.ms "
        f"{timeouts.api_timeout_ms}",
        code,
    )


# ----------------------------------------------------------------------------- find-hanging


def partitions_to_search(
    admin: KafkaAdmin, topic: str | None, partition: int | None, broker_id: int | None
) -> list[tuple[str, int]]:
    """collectTopicPartitionsToSearch: the named partition; else every partition of the topic
    (or of every topic, internal ones included) with a replica on ``broker_id`` when given."""
    if topic is not None and partition is not None:
        return [(topic, partition)]
    meta = admin.metadata([topic] if topic is not None else None)
    if topic is not None and topic not in meta.topics:
        code = meta.topic_errors.get(topic, E.UNKNOWN_TOPIC_OR_PARTITION)
        raise TxnAdminError(f"{describe_error(code)} (topic '{topic}')", code)
    out = []
    for t in sorted(meta.topics):
        for p, info in sorted(meta.topics[t].items()):
            if broker_id is None or broker_id in info.replicas:
                out.append((t, p))
    return out


def lookup_transactional_ids(admin: KafkaAdmin, producer_ids: set[int]) -> dict[int, str]:
    """ListTransactions filtered by producer id, at every broker: {producer id: transactional id}."""
    out: dict[int, str] = {}
    for listings in list_transactions(admin, producer_ids).values():
        for tid, pid, _state in listings:
            if pid in producer_ids:
                out[pid] = tid
    return out


class SearchError(TxnAdminError):
    """A step of find-hanging that failed: ``what`` in TransactionsCommand's words, then the
    admin's error (``cause``)."""

    def __init__(self, what: str, cause: KafkaAdminError):
        super().__init__(f"{what}: {cause}", getattr(cause, "code", None))
        self.what = what
        self.cause = cause


def coordinator_view(
    admin: KafkaAdmin, producer_ids: set[int]
) -> tuple[dict[int, str], dict[str, Description | None]]:
    """What the coordinators hold of these producers, the input of
    :func:`kafkatool.broker.txn.views.hanging`: {producer id: transactional id} (ListTransactions
    filtered by producer id at every broker, one request each) and each of those ids'
    description (DescribeTransactions, one request per coordinator)."""
    if not producer_ids:
        return {}, {}
    try:
        tids = lookup_transactional_ids(admin, producer_ids)
    except KafkaAdminError as exc:
        raise SearchError(f"Failed to list transactions for {len(producer_ids)} producers", exc) from None
    try:
        descriptions = describe_transactions(admin, tids.values())
    except KafkaAdminError as exc:
        raise SearchError(f"Failed to describe {len(set(tids.values()))} transactions", exc) from None
    return tids, descriptions
