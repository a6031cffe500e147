"""A blocking producer on the one admin client (kafka_client) and the project's batch encoder
(formats/records.build_record_batch): what kafka-console-producer.sh's KafkaProducer does for it.

- Partitioner: Kafka 3.7's default (BuiltInPartitioner): a record with a key goes to
  ``toPositive(murmur2(key)) % partitions`` over all partitions (Utils.murmur2, the one
  implementation here; librdkafka's murmur2 partitioners agree); a record without a key to the
  sticky partition, a random partition with a leader that is kept until batch.size bytes were
  produced to it (KIP-794's uniform sticky partitioning; Java's adaptive weighting by queue sizes
  is left out: one client thread has no queues to weigh).
- Batches: one open batch per partition, sent when it reaches batch.size, when linger.ms passed
  since its first record, or at the end of the input; each request carries at most one batch per
  partition of its leader, up to max.request.size. Up to max.in.flight.requests.per.connection
  requests (5) are written to a leader back to back before their answers are read, the n-th with
  each partition's n-th batch, and every answer is handled before the next round; a batch sent
  before goes alone until it is answered (RecordAccumulator.shouldStopDrainBatchesForPartition),
  so with idempotence a partition's records are appended in input order even across retries
  (without it, as in Kafka, a retried batch may land after a later one).
- Retries: a retriable partition error (NOT_LEADER_OR_FOLLOWER, a leader moving ...) or a lost
  connection refreshes the metadata and sends the batch again to the partition's leader then,
  retry.backoff.ms apart (doubling up to retry.backoff.max.ms, as Kafka 3.7's producer), at most
  ``retries`` times for error answers; a broker that cannot be reached is waited for up to
  delivery.timeout.ms. MESSAGE_TOO_LARGE for a batch of several records splits it (Sender's
  splitAndReenqueue).
- Memory, metadata, waits: batches not answered yet hold buffer.memory (each at least batch.size,
  as BufferPool allocates; a record larger than buffer.memory is refused, as KafkaProducer
  refuses it); a new batch that would pass it first sends and answers what waits (Kafka's send()
  blocks until memory frees, every batch sendable meanwhile). Metadata older than
  metadata.max.age.ms is asked for again before a record is placed; the start waits up to
  max.block.ms for the topic (and --partition); no answer within request.timeout.ms drops the
  connection and retries the batch (REQUEST_TIMED_OUT, counted against retries).
- Idempotence: InitProducerId, then sequence numbers per partition; a batch sent again keeps its
  bytes and sequence, so the broker's producer state answers a retry of an appended batch with the
  original offsets (never a second copy). KIP-360's recovery as TransactionManager runs it for an
  idempotent producer: OUT_OF_ORDER_SEQUENCE_NUMBER for the batch after the last acknowledged one
  (the broker lost acknowledged batches: a truncated log, an unclean election) or
  UNKNOWN_PRODUCER_ID (a broker before 2.5 lost the producer) bumps the epoch (by the producer
  itself, a new producer id at epoch 32767), the partition's batch starts again at sequence 0
  and is sent again; a batch that fails or is given up on bumps it too, so the next batch is
  never out of order; every other partition starts at sequence 0 of the new epoch with its next
  batch. PRODUCER_FENCED and CLUSTER_AUTHORIZATION_FAILED are fatal (every later record fails),
  INVALID_PRODUCER_EPOCH fails the batch (Kafka's InvalidProducerEpochException) and bumps.
- Transactions (a ``transactional.id``: TransactionManager's transactional half, Kafka 3.7's client
  versions): :meth:`Producer.start` finds the id's coordinator (FindCoordinator key type 1) and
  asks it for the producer id (InitProducerId with the id and transaction.timeout.ms), waiting up
  to max.block.ms; :meth:`begin_transaction`, then before a round's first batch to a partition
  not yet in the transaction AddPartitionsToTxn v3 (the client form; v4+ is KIP-890's broker-to-
  broker verification) with every such partition, then transactional batches (the producer id,
  epoch and sequences of the idempotent path, the isTransactional bit, Produce's
  transactional_id); :meth:`commit_transaction` answers every batch, then EndTxn(commit);
  :meth:`abort_transaction` fails the batches not sent ("Failing batch since transaction was
  aborted", or the error that made it abortable) and sends EndTxn(abort), then, after a failed
  batch, InitProducerId with the current id and epoch (KIP-360's bump: the sequences start again
  at 0). No EndTxn for a transaction no partition was added to. NOT_COORDINATOR and
  COORDINATOR_NOT_AVAILABLE find the coordinator again, a lost connection too; CONCURRENT_TRANSACTIONS,
  COORDINATOR_LOAD_IN_PROGRESS and other retriable answers are asked again retry.backoff.ms apart
  (AddPartitionsToTxn's first CONCURRENT_TRANSACTIONS of a transaction 20 ms, as Kafka's), up to
  max.block.ms (InitProducerId, EndTxn: "Timeout expired after N ms while awaiting ...") or
  delivery.timeout.ms (AddPartitionsToTxn, whose batches expire then). PRODUCER_FENCED and
  INVALID_PRODUCER_EPOCH of a coordinator, TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
  INVALID_TXN_STATE are fatal (:attr:`Producer.fatal`); a failed batch, an unauthorized topic or
  an unknown producer id make the transaction abortable only (:attr:`Producer.abortable`: nothing
  more is sent until it is aborted), as in Kafka.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkatool.assign.kafka_client import (
    KafkaAdmin,
    KafkaAdminError,
    RequestTimeout,
    backoff_s,
    describe_error,
    error_name,
)
from kafkatool.assign.producer_config import INT_MAX, ProducerSettings
from kafkatool.formats import compression
from kafkatool.formats.records import (
    RECORD_BATCH_OVERHEAD,
    SimpleRecord,
    build_record_batch,
    increment_sequence,
    record_v2_size,
)
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode, default_message, is_retriable

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 22, 24, 26
#: TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction
#: answered CONCURRENT_TRANSACTIONS (the last one still completing) is asked again this soon
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20


class ProducerError(KafkaAdminError):
    """The producer cannot go on (no cluster, unknown topic, a fatal idempotence error)."""


def kafka_error(code: int, message: str | None = None) -> str:
    """An error code with the broker's message, else Kafka's default one (Errors.message())."""
    return describe_error(code, message or default_message(code))


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (a signed 32-bit result), the hash of its default partitioner."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass
class Outcome:
    """What became of one record: acknowledged (offset, -1 for acks=0) or failed (error)."""

    number: int
    partition: int
    offset: int = -1
    timestamp: int = -1
    error: str | None = None
    #: failed for a reason of the producer, not of the record: it failed (fenced ...), or the
    #: transaction became abortable or was aborted before the record was sent (``error`` is
    #: that reason, the same for every such record: a caller says it once)
    shared: bool = False


@dataclass
class _Record:
    number: int
    record: SimpleRecord
    size: int


@dataclass
class _Batch:
    partition: int
    records: list[_Record] = field(default_factory=list)
    size: int = RECORD_BATCH_OVERHEAD
    created: float = 0.0
    attempts: int = 0
    base_sequence: int = -1
    data: bytes | None = None
    not_before: float = 0.0
    #: its sequence was given again from 0 by an epoch bump (ProducerBatch.sequenceHasBeenReset)
    sequence_reset: bool = False
    #: the producer id and epoch it was encoded with
    producer: tuple[int, int] = (-1, -1)
    #: the bytes of buffer.memory it holds until it is answered (BufferPool: at least batch.size)
    alloc: int = 0


@dataclass
class _Sequences:
    """TxnPartitionEntry: the producer id and epoch a partition's sequences belong to, the next
    one and the last acknowledged."""

    producer_id: int = -1
    producer_epoch: int = -1
    next_sequence: int = 0
    last_acked_sequence: int = -1
    #: the last offset acknowledged (TxnPartitionEntry.lastAckedOffset)
    last_acked_offset: int = -1


def idempotent_retry(
    code: int,
    *,
    log_start_offset: int,
    sequence_reset: bool,
    base_sequence: int,
    last_acked_sequence: int,
    transactional: bool = False,
    last_acked_offset: int = -1,
) -> tuple[bool, bool]:
    """TransactionManager.canRetry (no unresolved sequences here: every answer of a round is
    handled before the next is sent): (retry the batch, the partition's sequences start again
    from 0 first: for an idempotent producer by a bump of its own epoch, for a transactional one
    at the same epoch, startSequencesAtBeginning).

    UNKNOWN_PRODUCER_ID (the broker lost the producer's state): retried as it is without a log
    start offset in the answer or when the batch's sequence was already reset; from sequence 0
    when the last acknowledged offset is below the log start offset (retention removed the
    producer's records) or the producer is idempotent; a transactional producer's batch fails
    otherwise (the transaction becomes abortable). OUT_OF_ORDER_SEQUENCE_NUMBER for the batch
    right after the last acknowledged one (a gap in the broker's log: data lost by truncation or
    an unclean election): an idempotent producer bumps and retries from sequence 0, a
    transactional one's batch fails; for any other batch retried as it is. Anything else:
    retried if retriable."""
    if code == ErrorCode.UNKNOWN_PRODUCER_ID:
        if log_start_offset == -1 or sequence_reset:
            return True, False
        if last_acked_offset < log_start_offset or not transactional:
            return True, True
        return False, False
    if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
        if sequence_reset or base_sequence - last_acked_sequence != 1:
            return True, False
        return (False, False) if transactional else (True, True)
    return is_retriable(code), False


#: errors after which Kafka's idempotent producer refuses every further send
#: (TransactionManager.maybeTransitionToErrorState)
FATAL = {
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.UNSUPPORTED_VERSION,
}


class Producer:
    """Records in, outcomes out (``on_outcome`` in the order records complete per partition)."""

    def __init__(
        self,
        admin: KafkaAdmin,
        topic: str,
        settings: ProducerSettings,
        *,
        partition: int | None,
        on_outcome: Callable[[Outcome], None],
        sync: bool = False,
    ):
        self.admin = admin
        self.topic = topic
        self.settings = settings
        self.acks = settings.acks
        self.codec = settings.codec
        self.batch_size = max(1, settings.batch_size)
        self.linger = 0.0 if sync else settings.linger_ms / 1000
        self.retries = settings.retries
        self.delivery_timeout = settings.delivery_timeout_ms / 1000
        self.max_request_size = settings.max_request_size
        self.max_in_flight = max(1, settings.max_in_flight)
        self.idempotence = settings.idempotence
        #: transactional.id (None: not transactional; idempotence is then on, producer_config's check)
        self.transactional_id = settings.transactional_id
        self.fixed_partition = partition
        self.on_outcome = on_outcome
        self.producer_id, self.producer_epoch = -1, -1
        self.leaders: dict[int, int] = {}
        self.partitions = 0
        self.open: dict[int, _Batch] = {}
        self.ready: dict[int, list[_Batch]] = {}  # closed batches per partition, in order
        self.sequences: dict[int, _Sequences] = {}
        self._bump_partitions: set[int] = set()
        #: epoch bumps made (KIP-360), for the summary and the tests
        self.epoch_bumps = 0
        #: the error after which nothing more is sent (a fenced producer ...), None while fine
        self.fatal: str | None = None
        #: a transactional producer's ABORTABLE_ERROR: the error after which nothing more is sent
        #: until the transaction is aborted, None while fine
        self.abortable: str | None = None
        #: the transaction coordinator's node id (None: to be found)
        self.coordinator: int | None = None
        #: a transaction begun and not yet committed or aborted
        self.in_transaction = False
        #: the partitions added to the transaction (partitionsInTransaction), and whether any was
        #: (transactionStarted: without it EndTxn is not sent)
        self.txn_partitions: set[int] = set()
        self._txn_started = False
        #: an abort is followed by InitProducerId's epoch bump (epochBumpRequired after a failed batch)
        self._txn_bump = False
        #: transactions committed and aborted (for the tests and a summary)
        self.committed = 0
        self.aborted = 0
        self._sticky: int | None = None
        self._sticky_bytes = 0
        self.sent_bytes = 0
        #: buffer.memory held by the batches not answered yet
        self.allocated = 0
        self._metadata_at = 0.0

    def _backoff(self, attempts: int) -> float:
        """ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms) without its jitter."""
        return backoff_s(attempts, self.settings.retry_backoff_ms, max(self.settings.retry_backoff_max_ms, 0))

    # -- set-up ------------------------------------------------------------------------------

    def start(self) -> None:
        """The topic's partitions and leaders, waited for up to max.block.ms as
        KafkaProducer.waitOnMetadata waits (a topic being created; a --partition the topic does
        not have yet), and a producer id when idempotent."""
        self.refresh(self.settings.max_block_ms / 1000, first=True)
        if self.transactional_id is not None:
            self._init_transactions()
        elif self.idempotence:
            self._init_producer_id()

    def refresh(self, wait_s: float = 0.0, first: bool = False) -> None:
        max_block = self.settings.max_block_ms
        deadline = time.monotonic() + wait_s
        attempts = 0
        while True:
            try:
                meta = self.admin.metadata([self.topic], auto_create=True)
            except KafkaAdminError as exc:
                self.admin.close()
                if (first and not isinstance(exc, RequestTimeout)) or time.monotonic() >= deadline:
                    raise  # an unreachable cluster at the start: one line, at once
                time.sleep(min(self._backoff(attempts), max(0.0, deadline - time.monotonic())))
                attempts += 1
                continue
            self._metadata_at = time.monotonic()
            code = meta.topic_errors.get(self.topic)
            parts = meta.topics.get(self.topic)
            wanted = self.fixed_partition
            if parts and (not first or wanted is None or wanted < len(parts)):
                self.partitions = len(parts)
                self.leaders = {p: i.leader for p, i in parts.items()}
                if all(leader >= 0 for leader in self.leaders.values()) or time.monotonic() >= deadline:
                    return
            elif code and not is_retriable(code):
                if first:
                    raise ProducerError(
                        f"Topic {self.topic} not present in metadata ({describe_error(code)})", code
                    )
                return
            elif time.monotonic() >= deadline:
                if first:
                    # KafkaProducer.waitOnMetadata's TimeoutException
                    raise ProducerError(
                        f"Topic {self.topic} not present in metadata after {max_block} ms."
                        if not parts
                        else f"Partition {wanted} of topic {self.topic} with partition count {len(parts)} is "
                        f"not present in metadata after {max_block} ms.",
                        code,
                    )
                return
            time.sleep(min(self._backoff(attempts), max(0.0, deadline - time.monotonic())))
            attempts += 1

    def _init_producer_id(self) -> None:
        """InitProducerId for an idempotent producer (no transactional id; Kafka's transaction
        timeout Integer.MAX_VALUE, which the broker ignores without one)."""
        info = API_BY_KEY[INIT_PRODUCER_ID]
        deadline = time.monotonic() + self.delivery_timeout
        attempts = 0
        while True:
            req = info.request(
                transactional_id=None,
                transaction_timeout_ms=INT_MAX,
                producer_id=-1,
                producer_epoch=-1,
            )
            try:
                resp = self.admin.request(INIT_PRODUCER_ID, req)
            except RequestTimeout:
                # no answer within request.timeout.ms: the connection is dropped, asked again
                self.admin.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(self._backoff(attempts))
                attempts += 1
                continue
            if resp.error_code == 0:
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                return
            code = resp.error_code
            if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                code = ErrorCode.PRODUCER_FENCED  # InitProducerIdHandler: both are a fence
            if not is_retriable(code) or time.monotonic() >= deadline:
                raise ProducerError(f"InitProducerId: {describe_error(code)}", code)
            time.sleep(self._backoff(attempts))
            attempts += 1

    # -- transactions (TransactionManager's transactional half) ---------------------------------

    def _coordinator_call(self, api_key: int, make: Callable[[], object], code_of, deadline: float):
        """One request to the transaction coordinator as TxnRequestHandler runs it: the
        coordinator found first (FindCoordinator key type 1, at any broker); NOT_COORDINATOR,
        COORDINATOR_NOT_AVAILABLE or a lost connection find it again, other retriable answers
        (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS) are asked again retry.backoff.ms
        apart (``code_of(resp)`` may set ``self._retry_backoff_ms``), until ``deadline``
        (time.monotonic()). The answer and its code (0 or one that is not retried); the deadline
        passed: (None, None)."""
        from kafkatool.assign.group_client import find_coordinators

        backoff_ms = self.settings.retry_backoff_ms
        while True:
            code, resp = None, None
            if self.coordinator is None:
                try:
                    found = find_coordinators(self.admin, [self.transactional_id], key_type=1)[
                        self.transactional_id
                    ]
                except KafkaAdminError:
                    self.admin.close()  # no broker answered: every connection again
                    found = None
                if isinstance(found, KafkaAdminError):
                    if found.code is not None and not is_retriable(found.code):
                        if found.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                            return None, found.code
                        raise ProducerError(
                            f"Could not find a coordinator with type TRANSACTION with key "
                            f"{self.transactional_id} due to unexpected error: {found}",
                            found.code,
                        )
                elif found is not None:
                    self.coordinator = found
            if self.coordinator is not None:
                try:
                    resp = self.admin.request(api_key, make(), node_id=self.coordinator)
                except KafkaAdminError:
                    # disconnected (or no answer within request.timeout.ms): Kafka looks the
                    # coordinator up again and sends the request again
                    self.admin.forget(self.coordinator)
                    self.coordinator = None
                else:
                    code, backoff_ms = code_of(resp)
                    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        self.admin.forget(self.coordinator)
                        self.coordinator = None
                    elif code == 0 or not is_retriable(code):
                        return resp, code
            if time.monotonic() >= deadline:
                return None, None
            time.sleep(min(backoff_ms / 1000, max(0.0, deadline - time.monotonic())))
            backoff_ms = self.settings.retry_backoff_ms

    def _init_transactions(self, bump: bool = False) -> None:
        """initTransactions (or, ``bump``, the epoch bump after an aborted transaction that lost a
        batch): InitProducerId with the transactional id and transaction.timeout.ms at the
        coordinator, within max.block.ms; the sequences start again at 0 in the new epoch. A
        failure is :class:`ProducerError` at the start, fatal after it."""
        info = API_BY_KEY[INIT_PRODUCER_ID]
        max_block = self.settings.max_block_ms
        pid, epoch = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        resp, code = self._coordinator_call(
            INIT_PRODUCER_ID,
            lambda: info.request(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.settings.transaction_timeout_ms,
                producer_id=pid,
                producer_epoch=epoch,
            ),
            lambda r: (r.error_code, self.settings.retry_backoff_ms),
            time.monotonic() + max_block / 1000,
        )
        if code == 0:
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            self.sequences.clear()  # resetSequenceNumbers
            return
        if code is None:
            why = f"TimeoutException: Timeout expired after {max_block}ms while awaiting InitProducerId"
        elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
            code = ErrorCode.PRODUCER_FENCED  # InitProducerIdHandler: both are a fence
            why = kafka_error(code)
        elif code in (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ):
            why = kafka_error(code)
        else:
            why = f"Unexpected error in InitProducerIdResponse; {kafka_error(code)}"
        if not bump:
            raise ProducerError(f"InitProducerId for transactional id '{self.transactional_id}': {why}", code)
        self.fatal = why

    def begin_transaction(self) -> None:
        """beginTransaction: the records appended from now on are this transaction's."""
        if self.transactional_id is None or self.in_transaction:
            raise ProducerError("beginTransaction: not a transactional producer, or a transaction is open")
        self.in_transaction = True
        self.txn_partitions.clear()
        self._txn_started = False

    def _add_partitions(self, partitions: list[int]) -> bool:
        """AddPartitionsToTxn v3 (the client's) for the partitions about to get their first batch
        of the transaction, asked again while retriable up to delivery.timeout.ms; False if the
        transaction cannot go on (``abortable`` or ``fatal`` says why)."""
        from kafkatool.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic

        info = API_BY_KEY[ADD_PARTITIONS_TO_TXN]
        errors: dict[int, int] = {}

        def code_of(resp) -> tuple[int, int]:
            errors.clear()
            for t in resp.results_by_topic_v3_and_below:
                for r in t.results_by_partition:
                    if t.name == self.topic and r.partition_error_code:
                        errors[r.partition_index] = r.partition_error_code
            codes = set(errors.values())
            backoff = self.settings.retry_backoff_ms
            for first in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                if first in codes:
                    return first, backoff
            if ErrorCode.CONCURRENT_TRANSACTIONS in codes:
                # maybeOverrideRetryBackoffMs: the previous transaction is still completing
                return ErrorCode.CONCURRENT_TRANSACTIONS, (
                    min(backoff, ADD_PARTITIONS_RETRY_BACKOFF_MS) if not self.txn_partitions else backoff
                )
            for c in sorted(codes):
                if is_retriable(c):
                    return c, backoff
            for c in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                if c in codes:
                    return c, backoff
            return (
                min(codes - {ErrorCode.OPERATION_NOT_ATTEMPTED}, default=0) or min(codes, default=0)
            ), backoff

        timeout = self.settings.delivery_timeout_ms
        resp, code = self._coordinator_call(
            ADD_PARTITIONS_TO_TXN,
            lambda: info.request(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=self.topic, partitions=sorted(partitions))],
            ),
            code_of,
            time.monotonic() + timeout / 1000,
        )
        if code == 0:
            self.txn_partitions.update(partitions)
            self._txn_started = True
            return True
        if code is None:
            # the batches waiting for their partitions expire (delivery.timeout.ms), which makes
            # the transaction abortable
            self.abortable = (
                f"TimeoutException: partitions {sorted(partitions)} of {self.topic} not added to the transaction "
                f"within delivery.timeout.ms ({timeout} ms)"
            )
            self._txn_bump = True
        elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
            self.fatal = kafka_error(ErrorCode.PRODUCER_FENCED)
        elif code in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE):
            self.fatal = kafka_error(code)
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            self.abortable = f"TopicAuthorizationException: Not authorized to access topics: [{self.topic}]"
        elif code in (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
            self.abortable = kafka_error(code)  # abortableErrorIfPossible: the abort bumps the epoch
            self._txn_bump = True
        else:
            named = ", ".join(f"{self.topic}-{p}={error_name(c)}" for p, c in sorted(errors.items()))
            self.abortable = f"Could not add partitions to transaction due to errors: {{{named}}}"
        return False

    def _end_txn(self, commit: bool) -> bool:
        """EndTxn at the coordinator (none if no partition was added: Kafka completes such a
        transaction without it), within max.block.ms; True when it is complete."""
        if self._txn_started:
            info = API_BY_KEY[END_TXN]
            max_block = self.settings.max_block_ms
            resp, code = self._coordinator_call(
                END_TXN,
                lambda: info.request(
                    transactional_id=self.transactional_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    committed=commit,
                ),
                lambda r: (r.error_code, self.settings.retry_backoff_ms),
                time.monotonic() + max_block / 1000,
            )
            if code != 0:
                if code is None:
                    self.fatal = (
                        f"TimeoutException: Timeout expired after {max_block}ms while awaiting "
                        f"EndTxn({str(commit).lower()})"
                    )
                elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                    self.fatal = kafka_error(ErrorCode.PRODUCER_FENCED)
                elif code in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE):
                    self.fatal = kafka_error(code)
                elif code in (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
                    # abortableErrorIfPossible: a commit becomes an abort; an abort goes on with
                    # InitProducerId's bump, which ends the transaction at the coordinator
                    self._txn_bump = True
                    if commit:
                        self.abortable = kafka_error(code)
                        return False
                else:
                    self.fatal = f"Unhandled error in EndTxnResponse: {kafka_error(code)}"
                if self.fatal is not None or self.abortable is not None:
                    return False
        self.in_transaction = False
        self.txn_partitions.clear()
        self._txn_started = False
        return True

    def commit_transaction(self) -> bool:
        """commitTransaction: every batch of the transaction sent and answered, then
        EndTxn(commit). False if it was not committed: ``abortable`` (abort it) or ``fatal``."""
        self.send_ready(flush=True)
        if self.fatal is not None or self.abortable is not None:
            return False
        if not self._end_txn(commit=True):
            return False
        self.committed += 1
        return True

    def abort_transaction(self) -> bool:
        """abortTransaction: the batches not sent fail (with the error that made the transaction
        abortable, else TransactionAbortedException's words), EndTxn(abort), then, after a failed
        batch, InitProducerId's epoch bump; the producer is ready for the next transaction. False
        after a fatal error (Kafka's abortTransaction throws it)."""
        self._fail_all(
            self.fatal
            or self.abortable
            or "TransactionAbortedException: Failing batch since transaction was aborted"
        )
        if self.fatal is not None or not self.in_transaction:
            return False
        if not self._end_txn(commit=False):
            return False
        if self._txn_bump:
            self._init_transactions(bump=True)
            if self.fatal is not None:
                return False
        self._txn_bump = False
        self.abortable = None
        self.aborted += 1
        return True

    # -- accumulate ----------------------------------------------------------------------------

    def _choose(self, key: bytes | None, size: int) -> int:
        if self.fixed_partition is not None:
            return self.fixed_partition
        if key is not None and not self.settings.ignore_keys:
            return partition_for_key(key, self.partitions)
        if self._sticky is None or self._sticky_bytes >= self.batch_size:
            available = [p for p, leader in self.leaders.items() if leader >= 0] or list(self.leaders)
            if len(available) > 1 and self._sticky in available:
                available.remove(self._sticky)
            self._sticky = random.choice(available)
            self._sticky_bytes = 0
        self._sticky_bytes += size
        return self._sticky

    def append(self, number: int, record: SimpleRecord) -> int:
        """Queue one record (its timestamp set now, as KafkaProducer.send does); its partition.
        Metadata older than metadata.max.age.ms is asked for again first (new partitions)."""
        if time.monotonic() - self._metadata_at >= self.settings.metadata_max_age_ms / 1000:
            self._metadata_at = time.monotonic()  # a failed refresh is not tried again per record
            self._refresh_quietly()
        record.timestamp = int(time.time() * 1000)
        size = record_v2_size(0, 0, record.key, record.value, record.headers)
        partition = self._choose(record.key, size)
        if self.fatal is not None or self.abortable is not None:
            # KafkaProducer.send after a fatal error, or in a transaction that must be aborted:
            # refused at once
            self.on_outcome(Outcome(number, partition, error=self.fatal or self.abortable, shared=True))
            return partition
        if self.transactional_id is not None and not self.in_transaction:
            # TransactionManager.maybeAddPartition's IllegalStateException
            raise ProducerError(
                f"Cannot add partition {self.topic}-{partition} to transaction while in state READY"
            )
        if size + RECORD_BATCH_OVERHEAD > self.max_request_size:
            self.on_outcome(
                Outcome(
                    number,
                    partition,
                    error=f"RecordTooLargeException: The message is {size + RECORD_BATCH_OVERHEAD} bytes when "
                    f"serialized which is larger than {self.max_request_size}, which is the value of the "
                    "max.request.size configuration.",
                )
            )
            return partition
        memory = self.settings.buffer_memory
        if size + RECORD_BATCH_OVERHEAD > memory:
            self.on_outcome(
                Outcome(
                    number,
                    partition,
                    error=f"RecordTooLargeException: The message is {size + RECORD_BATCH_OVERHEAD} bytes when "
                    "serialized which is larger than the total memory buffer you have configured with the "
                    "buffer.memory configuration.",
                )
            )
            return partition
        batch = self.open.get(partition)
        if batch is not None and batch.size + size > self.batch_size and batch.records:
            self._close(partition)
            batch = None
        if batch is None:
            alloc = max(self.batch_size, size + RECORD_BATCH_OVERHEAD)
            if alloc > memory:
                # BufferPool.allocate's IllegalArgumentException: KafkaProducer.send throws it and
                # kafka-console-producer.sh ends; here the record fails and the run ends
                self.fatal = (
                    f"IllegalArgumentException: Attempt to allocate {alloc} bytes, but there is a hard limit "
                    f"of {memory} on memory allocations."
                )
                self.on_outcome(Outcome(number, partition, error=self.fatal))
                return partition
            if self.allocated + alloc > memory:
                # BufferPool exhausted: Kafka's send() blocks until answered batches free memory,
                # and every batch is sendable meanwhile (RecordAccumulator.ready's "exhausted")
                self.send_ready(flush=True)
            batch = self.open[partition] = _Batch(partition, created=time.monotonic(), alloc=alloc)
            self.allocated += alloc
        batch.records.append(_Record(number, record, size))
        batch.size += size
        if batch.size >= self.batch_size:
            self._close(partition)
        return partition

    def _close(self, partition: int) -> None:
        batch = self.open.pop(partition, None)
        if batch is not None and batch.records:
            self.ready.setdefault(partition, []).append(batch)

    def next_deadline(self) -> float | None:
        """When something is due: the oldest open batch's linger.ms running out, or a batch
        waiting for its retry's backoff, sent then with no input coming (None: nothing)."""
        due = [b.created + self.linger for b in self.open.values()]
        due += [q[0].not_before for q in self.ready.values() if q]
        return min(due) if due else None

    def pending(self) -> bool:
        return bool(self.open) or any(self.ready.values())

    # -- send ----------------------------------------------------------------------------------

    def send_ready(self, *, flush: bool) -> None:
        """Send what is due: closed batches, open ones whose linger.ms ran out (all with
        ``flush``), until none is due. Each batch is answered or failed before this returns
        when ``flush``."""
        now = time.monotonic()
        for p, b in list(self.open.items()):
            if flush or now >= b.created + self.linger:
                self._close(p)
        while any(self.ready.values()):
            if self.fatal is not None or self.abortable is not None:
                # Sender: a fatal error fails every batch; an abortable transaction its undrained
                # ones (abortUndrainedBatches with the last error)
                self._fail_all(self.fatal or self.abortable)
                return
            self._send_round()
            if not flush:
                # what is left is waiting for a retry's backoff or a leader: sent on the next call
                now = time.monotonic()
                if all(q[0].not_before > now for q in self.ready.values() if q):
                    return

    def _send_round(self) -> None:
        """One round: to each leader up to max.in.flight.requests.per.connection Produce requests
        written back to back, the n-th carrying the n-th sendable batch of each of its partitions,
        then their answers read in order; every answer is handled before the next round."""
        self._maybe_bump_epoch()
        now = time.monotonic()
        wait = [q[0].not_before for q in self.ready.values() if q]
        if wait and min(wait) > now:
            time.sleep(min(wait) - now)
        if self.transactional_id is not None:
            # AddPartitionsToTxn before a partition's first batch of the transaction (the Sender
            # drains no batch of a partition not in it yet)
            new = sorted(p for p, q in self.ready.items() if q and p not in self.txn_partitions)
            if new and not self._add_partitions(new):
                return
        layers: dict[int, list[list[_Batch]]] = {}
        no_leader = False
        for p, queue in sorted(self.ready.items()):
            if not queue or queue[0].not_before > time.monotonic():
                continue
            leader = self.leaders.get(p, -1)
            if leader < 0:
                self._retry(queue[0], describe_error(ErrorCode.LEADER_NOT_AVAILABLE), counts=False)
                no_leader = True
                continue
            if queue[0].data is not None:
                # a batch sent before goes alone until it is answered
                # (RecordAccumulator.shouldStopDrainBatchesForPartition): no batch after it can
                # be appended before it
                take = queue[:1]
            else:
                take = []
                for b in queue[: self.max_in_flight]:
                    if b.data is not None:
                        break
                    take.append(b)
            rows = layers.setdefault(leader, [])
            for n, b in enumerate(take):
                if len(rows) <= n:
                    rows.append([])
                rows[n].append(b)
        if no_leader:
            self._refresh_quietly()
        for leader, rows in sorted(layers.items()):
            requests, deferred = [], set()
            for row in rows:
                request, size = [], 0
                for b in row:
                    if b.partition in deferred:
                        continue
                    data = self._encode(b)
                    if request and size + len(data) > self.max_request_size:
                        deferred.add(b.partition)  # this one and the partition's later ones: next round
                        continue
                    request.append(b)
                    size += len(data)
                if request:
                    requests.append(request)
            self._send(leader, requests)

    # -- producer id, epoch and sequences (TransactionManager's part for an idempotent producer) --

    def _sequences(self, partition: int) -> _Sequences:
        st = self.sequences.get(partition)
        if st is None or (st.producer_id, st.producer_epoch) != (self.producer_id, self.producer_epoch):
            # maybeUpdateProducerIdAndEpoch: a partition's first batch after a new id or epoch
            # starts at sequence 0 (called for a batch to encode, when the partition has no
            # batch sent and unanswered: those go first, alone)
            st = self.sequences[partition] = _Sequences(self.producer_id, self.producer_epoch)
        return st

    def _batch_sequences(self, b: _Batch) -> _Sequences | None:
        """The sequences of a sent batch's partition, if they still belong to the batch's producer
        id and epoch (a batch sent before an epoch bump keeps its own: it may have been appended)."""
        st = self.sequences.get(b.partition)
        if st is None or (st.producer_id, st.producer_epoch) != b.producer:
            return None
        return st

    def _maybe_bump_epoch(self) -> None:
        """bumpIdempotentEpochAndResetIdIfNeeded: the epoch of an idempotent producer is bumped by
        the producer itself (the broker takes a higher epoch starting at sequence 0); at 32767 a new
        producer id is asked for. The partitions that asked for it have the sequences of their
        batch in flight started again from 0 (startSequencesAtBeginning)."""
        if not self._bump_partitions:
            return
        if self.transactional_id is not None:
            # a transactional producer never bumps its own epoch: the partition's sequences start
            # again from 0 at the same one (TransactionManager.canRetry's startSequencesAtBeginning)
            for p in self._bump_partitions:
                self.sequences[p] = _Sequences(self.producer_id, self.producer_epoch)
        elif self.producer_epoch >= 32767:
            self.producer_id, self.producer_epoch = -1, -1
            self._init_producer_id()
            self.epoch_bumps += 1
        else:
            self.producer_epoch += 1
            self.epoch_bumps += 1
        for p in sorted(self._bump_partitions):
            self._sequences(p)  # the new epoch: from sequence 0
            for b in self.ready.get(p) or []:
                if b.data is None:
                    break  # the rest get their sequences when they are sent
                b.data = None
                self._encode(b)
                b.sequence_reset = True
        self._bump_partitions.clear()

    def _encode(self, b: _Batch) -> bytes:
        """The batch's bytes; a batch encoded the first time takes the partition's next sequence
        (RecordAccumulator.drain's setProducerState)."""
        if b.data is None:
            if self.idempotence:
                st = self._sequences(b.partition)
                b.base_sequence = st.next_sequence
                st.next_sequence = increment_sequence(st.next_sequence, len(b.records))
            self._build(b, (self.producer_id, self.producer_epoch))
        return b.data

    def _build(self, b: _Batch, producer: tuple[int, int]) -> None:
        b.producer = producer
        b.data = build_record_batch(
            [r.record for r in b.records],
            codec=self.codec,
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=b.base_sequence,
            is_transactional=self.transactional_id is not None,
        )

    def _request(self, batches: list[_Batch]):
        from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

        return API_BY_KEY[PRODUCE].request(
            transactional_id=self.transactional_id,
            acks=self.acks,
            timeout_ms=self.settings.request_timeout_ms,
            topic_data=[
                TopicProduceData(
                    name=self.topic,
                    partition_data=[PartitionProduceData(index=b.partition, records=b.data) for b in batches],
                )
            ],
        )

    def _send(self, leader: int, requests: list[list[_Batch]]) -> None:
        """Write ``requests`` to the leader back to back, then read and handle their answers."""
        answered = 0
        try:
            conn = self.admin.node(leader)
            if self.acks == 0:
                for batches in requests:
                    conn.send_only(PRODUCE, self._request(batches))
                pending = [None] * len(requests)
            else:
                pending = [conn.send_request(PRODUCE, self._request(batches)) for batches in requests]
            refresh = False
            for batches, sent in zip(requests, pending, strict=True):
                resp = conn.receive(sent) if sent is not None else None
                answered += 1
                refresh |= self._answers(leader, batches, resp)
        except KafkaAdminError as exc:
            # lost or no connection: the answers not read are unknown; those batches are sent
            # again with their bytes and sequences (idempotence keeps a batch that was appended
            # from being appended twice: the broker remembers a producer's last 5 batches). No
            # answer within request.timeout.ms is Sender's REQUEST_TIMED_OUT ("Disconnected from
            # node N due to timeout"), a retry that counts against retries
            self.admin.close()
            timed_out = isinstance(exc, RequestTimeout)
            why = f"{describe_error(ErrorCode.REQUEST_TIMED_OUT)}: {exc}" if timed_out else str(exc)
            for batches in requests[answered:]:
                for b in batches:
                    self._retry(b, why, counts=timed_out)
            refresh = True
        if refresh:
            self._refresh_quietly()

    def _answers(self, leader: int, batches: list[_Batch], resp) -> bool:
        """One request's answer for each of its batches; True if the metadata should be refreshed."""
        if resp is None:  # acks=0
            for b in batches:
                self._done(b, -1, -1)
            return False
        answers = {}
        for t in resp.responses:
            for p in t.partition_responses:
                if t.name == self.topic:
                    answers[p.index] = p
        refresh = False
        for b in batches:
            p = answers.get(b.partition)
            if p is None:
                self._fail(b, f"the response from broker {leader} has no result for partition {b.partition}")
            else:
                refresh |= self._answer(b, p)
        return refresh

    def _answer(self, b: _Batch, p) -> bool:
        """Sender.completeBatch for one partition's answer; True if the metadata should be
        refreshed."""
        code = p.error_code
        if code == 0:
            self._done(b, p.base_offset, p.log_append_time_ms)
            return False
        if code == ErrorCode.MESSAGE_TOO_LARGE and len(b.records) > 1:
            self._split(b)
            return False
        why = kafka_error(code, p.error_message)
        retry, bump = False, False
        if time.monotonic() - b.created <= self.delivery_timeout and b.attempts < self.retries:
            if self.idempotence:
                st = self._batch_sequences(b)
                retry, bump = idempotent_retry(
                    code,
                    log_start_offset=p.log_start_offset,
                    sequence_reset=b.sequence_reset,
                    base_sequence=b.base_sequence,
                    last_acked_sequence=st.last_acked_sequence if st is not None else -1,
                    transactional=self.transactional_id is not None,
                    last_acked_offset=st.last_acked_offset if st is not None else -1,
                )
            else:
                retry = is_retriable(code)
        if retry:
            if bump:
                self._bump_partitions.add(b.partition)
            self._retry(b, why, counts=True)
            return is_retriable(code)
        if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            self._done(b, -1, -1)  # Kafka's producer: appended before, offset unknown
            return False
        self._fail(b, why, p.record_errors or [], code)
        return False

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
        except KafkaAdminError:
            self.admin.close()

    def _retry(self, b: _Batch, why: str, *, counts: bool) -> None:
        now = time.monotonic()
        if counts:
            b.attempts += 1
        if (counts and b.attempts > self.retries) or now - b.created > self.delivery_timeout:
            self._fail(b, why)
            return
        b.not_before = now + self._backoff(b.attempts)

    def _pop(self, b: _Batch) -> None:
        queue = self.ready.get(b.partition, [])
        for i, x in enumerate(queue):
            if x is b:
                del queue[i]
                self.allocated -= b.alloc
                return

    def _done(self, b: _Batch, base_offset: int, log_append_time: int) -> None:
        self._pop(b)
        self.sent_bytes += len(b.data)
        if self.idempotence and b.base_sequence >= 0:
            # handleCompletedBatch: the partition's last acknowledged sequence
            st = self._batch_sequences(b)
            if st is not None:
                last = increment_sequence(b.base_sequence, len(b.records) - 1)
                st.last_acked_sequence = (
                    last if st.last_acked_sequence < 0 else max(st.last_acked_sequence, last)
                )
                if base_offset >= 0:
                    st.last_acked_offset = max(st.last_acked_offset, base_offset + len(b.records) - 1)
        for i, r in enumerate(b.records):
            offset = base_offset + i if base_offset >= 0 else -1
            ts = log_append_time if log_append_time >= 0 else r.record.timestamp
            self.on_outcome(Outcome(r.number, b.partition, offset, ts))

    def _fail(self, b: _Batch, why: str, record_errors=(), code: int | None = None) -> None:
        self._pop(b)
        named = {e.batch_index: e.batch_index_error_message for e in record_errors}
        # a transactional producer's batch refused for its epoch: the producer was fenced (the
        # abort that follows says so), not a fault of these records
        shared = self.transactional_id is not None and code in (
            ErrorCode.INVALID_PRODUCER_EPOCH,
            ErrorCode.PRODUCER_FENCED,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        )
        if code in FATAL and self.idempotence:
            self.fatal = why
        elif self.transactional_id is not None:
            # maybeTransitionToErrorState: the transaction can only be aborted now, and the abort
            # bumps the epoch (so the sequences start again at 0, whatever this batch left)
            if self.abortable is None:
                self.abortable = why
            self._txn_bump = True
        elif self.idempotence and b.base_sequence >= 0:
            if code == ErrorCode.UNKNOWN_PRODUCER_ID:
                # handleFailedBatch: the broker has no state for the producer and takes sequence
                # 0 next (resetSequenceForPartition)
                self.sequences.pop(b.partition, None)
            else:
                # the batch was not appended or its fate is unknown: the partition's sequences
                # go on from 0 in a new epoch, so a later batch is never out of order
                # (handleFailedBatch's epoch bump, maybeResolveSequences' for a batch given up on)
                self._bump_partitions.add(b.partition)
        for i, r in enumerate(b.records):
            text = why
            if named:
                # Sender.failBatch: a record named by the answer gets its own message, the others
                # Kafka's words for having been in the same batch
                text = f"{error_name(code)}: " + (
                    named.get(i) or why
                    if i in named
                    else "Failed to append record because it was part of a batch which had one more "
                    "more invalid records"
                )
            self.on_outcome(Outcome(r.number, b.partition, error=text, shared=shared))

    def _fail_all(self, why: str) -> None:
        """After a fatal error, or in a transaction that is aborted: every queued record fails
        with ``why``, unsent (``shared``)."""
        for p in list(self.open):
            self._close(p)
        for queue in self.ready.values():
            while queue:
                b = queue[0]
                self._pop(b)
                for r in b.records:
                    self.on_outcome(Outcome(r.number, b.partition, error=why, shared=True))

    def _split(self, b: _Batch) -> None:
        """MESSAGE_TOO_LARGE for several records: the batch in halves, in its place, again
        (Sender's splitAndReenqueue). With idempotence the halves share the batch's sequences
        and producer epoch (RecordAccumulator.splitAndReenqueue), so the partition's later batches
        keep theirs."""
        queue = self.ready[b.partition]
        half = len(b.records) // 2
        new = []
        for rs in (b.records[:half], b.records[half:]):
            part = _Batch(
                b.partition, rs, RECORD_BATCH_OVERHEAD + sum(r.size for r in rs), b.created, b.attempts
            )
            part.alloc = max(self.batch_size, part.size)
            self.allocated += part.alloc
            if self.idempotence and b.base_sequence >= 0:
                part.base_sequence = increment_sequence(b.base_sequence, len(new[0].records) if new else 0)
                part.sequence_reset = b.sequence_reset
                self._build(part, b.producer)
            new.append(part)
        at = next(i for i, x in enumerate(queue) if x is b)
        queue[at : at + 1] = new
        self.allocated -= b.alloc


CODECS = {name: codec for codec, name in compression.CODEC_NAMES.items()}
