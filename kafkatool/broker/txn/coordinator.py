"""The transaction coordinator of the single-node broker (Kafka's TransactionCoordinator, TV0/TV1).

Each transactional id maps to a producer id and epoch and a state (Empty,
Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
PrepareEpochFence), persisted in ``__transaction_state`` (partition = Kafka's
hash of the id, records as Kafka writes them, reloaded at start-up).

EndTxn persists Prepare*, then writes the COMMIT/ABORT control batch into every
partition of the transaction (on one broker WriteTxnMarkers is a direct append:
the log updates the LSO and, on abort, the ``.txnindex``), completes the
transactional offsets of the groups in ``__consumer_offsets`` partitions of the
transaction, and persists Complete*.  Appends are synchronous, so the whole
sequence happens before the reply; a retried EndTxn then finds Complete* and
gets 0, as in Kafka.  Ongoing transactions past their timeout are aborted with
an epoch bump (fencing the zombie), every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from kafkatool.broker.group.hashing import partition_for
from kafkatool.broker.tasks import stop_tasks
from kafkatool.broker.txn import state_log as S
from kafkatool.errors import KafkatoolError
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.log.log import ORIGIN_COORDINATOR
from kafkatool.log.producer_state import ProducerStateError
from kafkatool.log.validator import RecordValidationError
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.broker.txn")


OFFSETS_TOPIC = "__consumer_offsets"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Short.MaxValue - 1: an epoch this high is exhausted (a new producer id follows)
EPOCH_EXHAUSTED = 0x7FFF - 1

DEFAULTS = {
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.max.timeout.ms": 900000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
}


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = S.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    #: producer id/epoch before the last bump (a retried InitProducerId)
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def record(self) -> S.TxnRecord:
        return S.TxnRecord(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            sorted(self.partitions),
            self.last_update_ms,
            self.start_ms,
        )

    @property
    def state_name(self) -> str:
        return S.STATE_NAMES.get(self.state, str(self.state))


class TxnError(KafkatoolError):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message or ErrorCode(code).name)
        self.code = code


class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, TxnMetadata] = {}
        self.loaded = False
        self._tasks: list[asyncio.Task] = []
        #: cluster mode: transactional ids whose markers are being written (async)
        self._completing: set[str] = set()

    @property
    def clustered(self) -> bool:
        return self.broker.replicas is not None

    def _owns(self, transactional_id: str) -> None:
        """Cluster mode: only the leader of the id's ``__transaction_state`` partition serves it."""
        if not self.clustered:
            return
        if self.broker.topic(S.TRANSACTION_STATE_TOPIC) is None:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self.broker.replicas.is_leader(
            S.TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)
        ):
            raise TxnError(ErrorCode.NOT_COORDINATOR)

    # ------------------------------------------------------------------ configuration
    def cfg(self, name: str) -> int:
        return self.broker.config.int_or(name, DEFAULTS)

    @property
    def num_partitions(self) -> int:
        t = self.broker.topic(S.TRANSACTION_STATE_TOPIC)
        if t is not None:
            return t.partitions
        return max(1, self.cfg("transaction.state.log.num.partitions"))

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # ------------------------------------------------------------------ life cycle
    def load(self) -> None:
        """Replay ``__transaction_state`` (once) and finish transactions left in Prepare*."""
        if self.loaded:
            return
        self.loaded = True
        t = self.broker.topic(S.TRANSACTION_STATE_TOPIC)
        if t is None or self.clustered or self.broker.is_member:
            # cluster mode: partitions load when this broker becomes their leader; a member
            # process of a broker of several has none (the primary coordinates)
            return
        self._load_partitions(list(range(t.partitions)))

    def on_leadership_change(self, leaders: list[int], followers: list[int]) -> None:
        """TransactionCoordinator.onElection / onResignation for ``__transaction_state``."""
        lost = set(followers)
        for md in list(self.txns.values()):
            if self.partition_for(md.transactional_id) in lost:
                del self.txns[md.transactional_id]
                if self.by_producer.get(md.producer_id) is md:
                    del self.by_producer[md.producer_id]
        if leaders:
            self._load_partitions(leaders)

    def _load_partitions(self, partitions: list[int]) -> None:
        t0 = time.monotonic()
        loader = S.StateLoader()
        for p in partitions:
            lg = self.broker.get_log(S.TRANSACTION_STATE_TOPIC, p)
            if lg is None:
                continue
            # a new cluster leader reads to its log end (its high watermark may lag)
            upper = lg.log_end_offset if self.clustered else lg.high_watermark
            try:
                for batch in lg.batches():
                    if batch.base_offset >= upper:
                        break
                    loader.feed(batch)
            except FormatError as exc:
                # bad data (a corrupt batch a clean-shutdown marker kept from recovery):
                # TransactionStateManager.loadTransactionMetadata logs "Error loading
                # transactions from transaction log" and keeps the ids read before it
                log.error("failed to load %s-%d: %s", S.TRANSACTION_STATE_TOPIC, p, exc)
        for msg in loader.skipped:
            log.warning("%s: skipped an undecodable record at %s", S.TRANSACTION_STATE_TOPIC, msg)
        for tid, rec in loader.current().items():
            md = TxnMetadata(
                tid,
                rec.producer_id,
                rec.producer_epoch,
                rec.timeout_ms,
                rec.state,
                set(rec.partitions),
                rec.last_update_ms,
                rec.start_ms,
            )
            self._install(md)
        if loader.records:
            log.info(
                "loaded %s: %d transactional ids from %d records in %.3f s",
                S.TRANSACTION_STATE_TOPIC,
                len(self.txns),
                loader.records,
                time.monotonic() - t0,
            )
        if self.broker.read_only:
            return
        # Kafka's coordinator resends the markers of transactions loaded in Prepare*
        for md in [self.txns[tid] for tid in loader.txns if tid in self.txns]:
            try:
                if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    self._complete(md, md.state == S.PREPARE_COMMIT)
                elif md.state == S.PREPARE_EPOCH_FENCE:
                    self._end(md, commit=False, from_client=False)
            except TxnError as exc:
                log.warning("could not complete the transaction of %s: %s", md.transactional_id, exc)

    def start(self) -> None:
        """Load and start the timeout checker (needs a running loop)."""
        self.load()
        if self._tasks or self.broker.read_only:
            return
        self._tasks.append(asyncio.get_running_loop().create_task(self._timeout_loop()))

    async def stop(self) -> None:
        await stop_tasks(self._tasks, "transaction coordinator")
        self._tasks.clear()

    async def _timeout_loop(self) -> None:
        interval = max(10, self.cfg("transaction.abort.timed.out.transaction.cleanup.interval.ms")) / 1000
        expire_every = max(10, self.cfg("transaction.remove.expired.transaction.cleanup.interval.ms")) / 1000
        next_expiry = time.monotonic() + expire_every
        while True:
            await asyncio.sleep(min(interval, expire_every))
            try:
                self.abort_timed_out()
                if time.monotonic() >= next_expiry:
                    next_expiry = time.monotonic() + expire_every
                    self.expire_transactional_ids()
            except Exception:
                log.exception("transaction coordinator housekeeping failed")

    def expire_transactional_ids(self, now: int | None = None) -> int:
        """Ids idle past ``transactional.id.expiration.ms`` (Empty or Complete*) go Dead: a
        tombstone in ``__transaction_state``, as Kafka writes it."""
        now = now_ms() if now is None else now
        ttl = self.cfg("transactional.id.expiration.ms")
        n = 0
        for md in list(self.txns.values()):
            if (
                md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                or now - md.last_update_ms < ttl
            ):
                continue
            p = self.partition_for(md.transactional_id)
            lg = self.broker.get_log(S.TRANSACTION_STATE_TOPIC, p)
            t = self.broker.topic(S.TRANSACTION_STATE_TOPIC)
            if lg is None or t is None:
                continue
            batch = S.build_batch(md.transactional_id, None, now)
            try:
                info = lg.append_as_leader(batch, t.leader_epoch(p), origin=ORIGIN_COORDINATOR)
                self.broker.metrics.topics.coordinator_append(S.TRANSACTION_STATE_TOPIC, info, len(batch))
            except (OSError, RecordValidationError) as exc:
                if isinstance(exc, OSError):
                    self.broker.report_log_error(lg, "appending records to", exc)
                log.error("failed to expire %s: %s", md.transactional_id, exc)
                continue
            del self.txns[md.transactional_id]
            if self.by_producer.get(md.producer_id) is md:
                del self.by_producer[md.producer_id]
            log.info("transactional id %s expired (idle %d ms)", md.transactional_id, now - md.last_update_ms)
            n += 1
        return n

    def _install(self, md: TxnMetadata) -> None:
        old = self.txns.get(md.transactional_id)
        if old is not None and self.by_producer.get(old.producer_id) is old:
            del self.by_producer[old.producer_id]
        self.txns[md.transactional_id] = md
        self.by_producer[md.producer_id] = md

    # ------------------------------------------------------------------ persistence
    def ensure_topic(self) -> None:
        if self.broker.topic(S.TRANSACTION_STATE_TOPIC) is not None:
            return
        if self.broker.read_only:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "read-only broker")
        n = self.num_partitions
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.cfg("transaction.state.log.segment.bytes")),
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": "1",
        }
        if self.clustered:
            # replication factor capped by the live brokers at first creation; the leaders come
            # from the controller, so the client is told to come back
            live = len(self.broker.replicas.live_brokers)
            rf = max(1, min(self.broker.config.int("transaction.state.log.replication.factor"), live))
            configs["min.insync.replicas"] = str(
                min(self.broker.config.int("transaction.state.log.min.isr"), rf)
            )
            try:
                self.broker.create_topic(S.TRANSACTION_STATE_TOPIC, n, configs, replication_factor=rf)
                log.info(
                    "created %s with %d partitions, replication factor %d", S.TRANSACTION_STATE_TOPIC, n, rf
                )
            except KafkatoolError as exc:
                log.debug("creating %s: %s", S.TRANSACTION_STATE_TOPIC, exc)
            raise TxnError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction state topic is being created"
            )
        self.broker.create_topic(S.TRANSACTION_STATE_TOPIC, n, configs)
        log.info("created %s with %d partitions", S.TRANSACTION_STATE_TOPIC, n)

    def _persist(self, md: TxnMetadata) -> None:
        self.ensure_topic()
        p = self.partition_for(md.transactional_id)
        lg = self.broker.get_log(S.TRANSACTION_STATE_TOPIC, p)
        if lg is None and (S.TRANSACTION_STATE_TOPIC, p) in self.broker.manager.offline_partitions:
            # an offline partition's append is a KafkaStorageException: NOT_COORDINATOR
            raise TxnError(
                ErrorCode.NOT_COORDINATOR, f"{S.TRANSACTION_STATE_TOPIC}-{p} is on an offline log dir"
            )
        if lg is None or self.broker.read_only:
            raise TxnError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{S.TRANSACTION_STATE_TOPIC}-{p} unavailable"
            )
        t = self.broker.topic(S.TRANSACTION_STATE_TOPIC)
        batch = S.build_batch(md.transactional_id, md.record(), now_ms())
        try:
            info = lg.append_as_leader(batch, t.leader_epoch(p), origin=ORIGIN_COORDINATOR)
            self.broker.metrics.topics.coordinator_append(S.TRANSACTION_STATE_TOPIC, info, len(batch))
        except OSError as exc:
            self.broker.report_log_error(lg, "appending records to", exc)
            raise TxnError(ErrorCode.NOT_COORDINATOR, str(exc)) from None
        except RecordValidationError as exc:
            # appendTransactionToLog passes LogValidator's error on as it is ("case other")
            log.error("failed to write the state of %s: %s", md.transactional_id, exc.message)
            raise TxnError(ErrorCode[exc.error_name], exc.message) from None

    def _transit(self, md: TxnMetadata, **changes) -> None:
        """Persist the new state first; only a successful write changes the cached metadata."""
        new = TxnMetadata(**{**md.__dict__, "partitions": set(md.partitions)})
        for k, v in changes.items():
            setattr(new, k, v)
        new.last_update_ms = now_ms()
        self._persist(new)
        old_pid = md.producer_id
        md.__dict__.update(new.__dict__)
        if old_pid != md.producer_id and self.by_producer.get(old_pid) is md:
            del self.by_producer[old_pid]
        self.by_producer[md.producer_id] = md

    def coordinator_epoch(self, md: TxnMetadata) -> int:
        t = self.broker.topic(S.TRANSACTION_STATE_TOPIC)
        return t.leader_epoch(self.partition_for(md.transactional_id)) if t is not None else 0

    # ------------------------------------------------------------------ InitProducerId
    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """(producer id, epoch), or raises TxnError (PRODUCER_FENCED is mapped by the caller)."""
        self.load()
        self._owns(transactional_id)
        if timeout_ms <= 0 or timeout_ms > self.cfg("transaction.max.timeout.ms"):
            raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if self.broker.read_only:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker serves its log dirs read-only")
        md = self.txns.get(transactional_id)
        if md is None:
            self.ensure_topic()
            md = TxnMetadata(
                transactional_id, self.broker.allocate_producer_id(), NO_PRODUCER_EPOCH, timeout_ms
            )
            md.state = S.EMPTY
            # not installed until the first write succeeds
            self._bump_to_empty(md, timeout_ms, new=True)
            return md.producer_id, md.producer_epoch
        if producer_id >= 0 and md.producer_epoch != NO_PRODUCER_EPOCH and producer_id != md.producer_id:
            # KIP-360: the producer's current id must be this one
            raise TxnError(ErrorCode.PRODUCER_FENCED, "the producer id does not match")
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == S.ONGOING:
            # fence the current producer (epoch bump) and abort its transaction; the client retries
            self._fence_and_abort(md)
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, "aborting the ongoing transaction")
        if producer_id >= 0 and producer_epoch not in (NO_PRODUCER_EPOCH, md.producer_epoch):
            if producer_epoch == md.last_producer_epoch and md.state == S.EMPTY:
                return md.producer_id, md.producer_epoch  # a retry of a bump that succeeded
            raise TxnError(ErrorCode.PRODUCER_FENCED, f"producer epoch {producer_epoch} is fenced")
        self._bump_to_empty(md, timeout_ms, new=False)
        return md.producer_id, md.producer_epoch

    def _bump_to_empty(self, md: TxnMetadata, timeout_ms: int, *, new: bool) -> None:
        if md.producer_epoch >= EPOCH_EXHAUSTED:
            pid, epoch = self.broker.allocate_producer_id(), 0
        else:
            pid, epoch = md.producer_id, md.producer_epoch + 1
        if new:
            md.producer_id, md.producer_epoch = pid, epoch
            md.timeout_ms, md.partitions, md.start_ms = timeout_ms, set(), -1
            md.last_update_ms = now_ms()
            self._persist(md)
            self._install(md)
            return
        self._transit(
            md,
            producer_id=pid,
            producer_epoch=epoch,
            last_producer_epoch=md.producer_epoch if pid == md.producer_id else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            state=S.EMPTY,
            partitions=set(),
            start_ms=-1,
        )

    def _fence_and_abort(self, md: TxnMetadata) -> None:
        if md.producer_epoch >= EPOCH_EXHAUSTED:
            # Kafka aborts without a bump here; the next InitProducerId takes a new producer id
            self._end(md, commit=False, from_client=False)
            return
        # Kafka's prepareFenceProducerEpoch: the bump is in memory only (PrepareEpochFence is a
        # pending state); the PrepareAbort written next carries the bumped epoch
        md.last_producer_epoch = md.producer_epoch
        md.producer_epoch += 1
        self._end(md, commit=False, from_client=False)

    # ------------------------------------------------------------------ AddPartitions / AddOffsets
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        self.load()
        self._owns(transactional_id)
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != md.producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        return md

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> None:
        md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == S.DEAD:
            raise TxnError(ErrorCode.INVALID_TXN_STATE)
        if md.state == S.ONGOING and all(tp in md.partitions for tp in partitions):
            return
        start = md.start_ms if md.state == S.ONGOING else now_ms()
        self._transit(md, state=S.ONGOING, partitions=md.partitions | set(partitions), start_ms=start)

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        gc = self.group_coordinator()
        return (OFFSETS_TOPIC, gc.partition_for(group_id))

    def group_coordinator(self):
        from kafkatool.broker.group.coordinator import group_coordinator

        return group_coordinator(self.broker)

    # ------------------------------------------------------------------ EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        md = self._check_producer(transactional_id, producer_id, producer_epoch)
        self._end(md, commit=commit, from_client=True)

    def _end(self, md: TxnMetadata, *, commit: bool, from_client: bool) -> None:
        st = md.state
        if st == S.ONGOING or (st == S.PREPARE_EPOCH_FENCE and not commit):
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            self._transit(md, state=target)
            self._complete(md, commit)
            return
        if st == S.COMPLETE_COMMIT:
            if commit:
                return  # a retry
            raise TxnError(ErrorCode.INVALID_TXN_STATE)
        if st == S.COMPLETE_ABORT:
            if not commit:
                return
            raise TxnError(ErrorCode.INVALID_TXN_STATE)
        if st == S.PREPARE_COMMIT:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if st == S.PREPARE_ABORT:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE)
        raise TxnError(ErrorCode.INVALID_TXN_STATE, f"transaction is {md.state_name}")

    def _complete(self, md: TxnMetadata, commit: bool) -> None:
        """WriteTxnMarkers to every partition, then persist Complete*."""
        if self.clustered or self.broker.processes is not None:
            if md.transactional_id not in self._completing:
                self._completing.add(md.transactional_id)
                task = asyncio.get_running_loop().create_task(self._complete_in_cluster(md, commit))
                self._tasks.append(task)
                task.add_done_callback(lambda t: t in self._tasks and self._tasks.remove(t))
            return
        self.write_markers(
            md.producer_id, md.producer_epoch, commit, sorted(md.partitions), self.coordinator_epoch(md)
        )
        self._transit(md, state=S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, partitions=set())
        log.info(
            "transaction %s %s producer_id=%d epoch=%d",
            md.transactional_id,
            "committed" if commit else "aborted",
            md.producer_id,
            md.producer_epoch,
        )

    async def _complete_in_cluster(self, md: TxnMetadata, commit: bool) -> None:
        """TransactionMarkerChannelManager: the markers go to each partition's leader
        (WriteTxnMarkers; a direct append where this broker leads), retried until every leader
        has them in its ISR; then Complete* is written.  EndTxn was answered after Prepare*."""
        from kafkatool.broker.cluster import txn_markers

        tid = md.transactional_id
        written: set = set()  # the partitions whose leaders have the marker in their ISR
        try:
            for attempt in range(600):
                if self.txns.get(tid) is not md or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    return  # unloaded (leadership moved) or finished meanwhile
                complete = await txn_markers.send_markers(
                    self,
                    md.producer_id,
                    md.producer_epoch,
                    commit,
                    sorted(md.partitions),
                    self.coordinator_epoch(md),
                    written,
                )
                if complete:
                    break
                await asyncio.sleep(min(0.1 * (attempt + 1), 1.0))
            else:
                log.warning("markers of %s not written after 600 attempts; retried by the timeout task", tid)
                return
            self._transit(md, state=S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, partitions=set())
            log.info(
                "transaction %s %s producer_id=%d epoch=%d",
                tid,
                "committed" if commit else "aborted",
                md.producer_id,
                md.producer_epoch,
            )
        except TxnError as exc:
            log.warning("could not complete the transaction of %s: %s", tid, exc)
        finally:
            self._completing.discard(tid)

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: list[tuple[str, int]],
        coord_epoch: int,
    ) -> None:
        broker = self.broker
        ts = now_ms()
        offsets_partitions = {}
        for topic, p in partitions:
            lg = broker.get_log(topic, p)
            t = broker.topic(topic)
            if lg is None or t is None:
                continue  # deleted since: Kafka drops the marker too
            batch = R.build_control_batch(
                R.COMMIT if commit else R.ABORT,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coord_epoch,
                timestamp=ts,
            )
            entry = lg.producer_state.producers.get(producer_id)
            first = entry.current_txn_first_offset if entry is not None else -1
            try:
                info = lg.append_as_leader(batch, t.leader_epoch(p), origin=ORIGIN_COORDINATOR)
                self.broker.metrics.topics.coordinator_append(topic, info, len(batch))
            except ProducerStateError as exc:
                log.info("marker refused by %s-%d: %s", topic, p, exc.message)
                code = (
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED
                    if exc.kind == "coordinator_fenced"
                    else ErrorCode.INVALID_PRODUCER_EPOCH
                )
                raise TxnError(code, exc.message) from None
            except OSError as exc:
                broker.report_log_error(lg, "appending records to", exc)
                raise TxnError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
            except RecordValidationError as exc:
                # LogValidator refused the marker (a topic's timestamp limit narrower than the
                # time the marker took): Kafka's marker handler takes any such error as fatal
                # (IllegalStateException); here the transaction stays as it is, not completed
                log.error("marker refused by %s-%d: %s", topic, p, exc.message)
                raise TxnError(ErrorCode[exc.error_name], exc.message) from None
            if topic == OFFSETS_TOPIC:
                offsets_partitions[p] = (lg, first, info.first_offset)
        gc = getattr(broker, "group_coordinator", None)
        if offsets_partitions and gc is not None:
            from kafkatool.broker.txn.offsets import complete_txn_offsets

            for p, (lg, first, marker) in offsets_partitions.items():
                complete_txn_offsets(gc, lg, p, producer_id, first, marker, commit)

    # ------------------------------------------------------------------ timeouts
    def abort_timed_out(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        n = 0
        for md in list(self.txns.values()):
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                # a completion that failed earlier (a marker or state write): retry it
                try:
                    self._complete(md, md.state == S.PREPARE_COMMIT)
                except TxnError as exc:
                    log.warning("could not complete the transaction of %s: %s", md.transactional_id, exc)
                continue
            if md.state == S.ONGOING and md.start_ms >= 0 and now > md.start_ms + md.timeout_ms:
                log.info(
                    "aborting transaction %s (producer_id=%d epoch=%d): timed out after %d ms",
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                    md.timeout_ms,
                )
                try:
                    self._fence_and_abort(md)
                    n += 1
                except TxnError as exc:
                    log.warning("could not abort %s: %s", md.transactional_id, exc)
        return n

    # ------------------------------------------------------------------ produce path
    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions
    ) -> dict[tuple[str, int], int]:
        """KIP-890 verification (TransactionCoordinator.handleVerifyPartitionsInTransaction):
        each partition's error, 0 when it is in the producer's ongoing transaction."""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        try:
            md = self._check_producer(transactional_id, producer_id, producer_epoch)
        except TxnError as exc:
            return dict.fromkeys(partitions, exc.code)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: 0 if tp in md.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    # ------------------------------------------------------------------ describe / list
    def describe(self, transactional_id: str) -> TxnMetadata | None:
        self.load()
        return self.txns.get(transactional_id)

    def list(self) -> list[TxnMetadata]:
        self.load()
        return list(self.txns.values())


def txn_coordinator(broker) -> TransactionCoordinator:
    tc = getattr(broker, "txn_coordinator", None)
    if tc is None:
        tc = broker.txn_coordinator = TransactionCoordinator(broker)
    if not tc._tasks:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            tc.load()
        else:
            tc.start()
    return tc
