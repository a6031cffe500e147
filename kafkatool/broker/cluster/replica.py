"""The broker side of ZooKeeper-mode replication (Kafka's ReplicaManager, Partition, ZkMetadataCache).

Everything here runs on the event loop.  The metadata cache is fed only by the
controller's UpdateMetadata; LeaderAndIsr makes this broker leader or follower of its
replicas; the leader tracks each follower's log end offset and caught-up time from its
fetches, moves the high watermark (the minimum log end offset of the maximal ISR) and
asks the controller for ISR changes with AlterPartition; followers fetch through
:mod:`kafkatool.broker.cluster.fetcher`.  The log is the one engine's ``Log``: a leader
appends with ``append_as_leader``, a follower with ``append_as_follower``; leadership
changes write the leader-epoch cache as Kafka's ``makeLeader`` does.

Facts: ../shared/notes/replication.md sections 2, 4, 5, 6 and 8.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from kafkatool.broker.cluster.client import LinkPool
from kafkatool.broker.config import ConfigError
from kafkatool.broker.replication_quota import ReplicationQuota
from kafkatool.broker.tasks import stop_tasks
from kafkatool.log.manager import LogDirOfflineError
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    AlterPartitionRequest,
    ControlledShutdownRequest,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from kafkatool.protocol.generated.alter_partition_request import PartitionData as AlterPartitionData
from kafkatool.protocol.generated.alter_partition_request import TopicData as AlterTopicData
from kafkatool.protocol.generated.leader_and_isr_response import LeaderAndIsrPartitionError
from kafkatool.protocol.generated.stop_replica_response import StopReplicaPartitionError

log = logging.getLogger("kafkatool.replication")

TP = tuple[str, int]
SECURITY_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
ALTER_PARTITION_VERSION = 1
CONTROLLED_SHUTDOWN_VERSION = 3


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LiveBroker:
    broker_id: int
    rack: str | None
    #: listener name -> (host, port, security protocol)
    endpoints: dict[str, tuple[str, int, str]]


@dataclass
class PartitionView:
    """One partition as the metadata cache knows it (UpdateMetadataPartitionState)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline: list[int]
    zk_version: int
    controller_epoch: int


@dataclass
class FollowerState:
    leo: int = -1
    log_start: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


@dataclass
class Partition:
    """A replica this broker hosts (Kafka's cluster.Partition)."""

    tp: TP
    log: object
    replicas: list[int] = field(default_factory=list)
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    #: an AlterPartition in flight: the ISR asked for (None: nothing pending)
    pending_isr: list[int] | None = None
    epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)

    @property
    def maximal_isr(self) -> set[int]:
        # a pending expansion already counts the new member; a pending shrink keeps the old ISR
        return set(self.isr) | set(self.pending_isr or ())

    @property
    def effective_min_isr(self) -> int:
        """Partition.effectiveMinIsr (3.7, KIP-966): the log's min.insync.replicas, at most
        the replication factor."""
        return min(self.log.config.min_insync_replicas, max(1, len(self.replicas)))


class _Delayed:
    """One acks=all request (or coordinator write) in the purgatory: answered when
    ``remaining`` partitions are done."""

    __slots__ = ("fut", "remaining")

    def __init__(self, fut: asyncio.Future):
        self.fut = fut
        self.remaining = 0


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        self.node_id = broker.node_id
        self.config = broker.config
        #: the czxid of our /brokers/ids/N (KIP-380 broker epoch)
        self.broker_epoch = -1
        self.controller_epoch = -1
        self.controller_id = -1
        self.live_brokers: dict[int, LiveBroker] = {}
        self.cache: dict[TP, PartitionView] = {}
        self.local: dict[TP, Partition] = {}
        self.lag_ms = self.config.int("replica.lag.time.max.ms")
        self._alter_queue: dict[TP, tuple] = {}
        #: acks=all produces and coordinator writes waiting for the high watermark
        self._purgatory: dict[TP, list[tuple[int, _Delayed]]] = {}
        #: DeleteRecords waiting for the low watermark (woken to look again)
        self._low_watermark_waiters: dict[TP, list[asyncio.Future]] = {}
        self._alter_wakeup: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self.fetchers = None  # FetcherManager, made in start()
        self._inter_broker = self.config.inter_broker_listener.name
        from kafkatool.broker.security.client import inter_broker_security

        #: the transaction coordinator's links to partition leaders (broker id -> BrokerLink)
        self.marker_links = LinkPool(lambda host, port: self.link(host, port, "txn-markers", 40.0))
        #: the transaction coordinators this leader asks (KIP-890 verification)
        self.verify_links = LinkPool(
            lambda host, port: self.link(
                host, port, "txn-verify", self.config.int("request.timeout.ms") / 1000.0
            )
        )
        #: replication throttles, one per side (broker/replication_quota.py)
        self.leader_quota = self._replication_quota("leader")
        self.follower_quota = self._replication_quota("follower")
        #: TLS/SASL of the inter-broker listener for every link this broker opens
        self.security = inter_broker_security(self.config)
        self.shutting_down = False

    def _replication_quota(self, side: str) -> ReplicationQuota:
        """QuotaFactory's ``leader`` / ``follower``: ReplicationQuotaManager over the broker's
        replication.quota.window.* and its topics' <side>.replication.throttled.replicas."""
        name = f"{side}.replication.throttled.replicas"

        def replicas_of(topic: str) -> str | None:
            t = self.broker.topic(topic)
            return t.configs.get(name) if t is not None else None

        return ReplicationQuota(
            self.config,
            f"{side}.replication.throttled.rate",
            self.config.int("replication.quota.window.num"),
            self.config.int("replication.quota.window.size.seconds"),
            replicas_of,
            self.node_id,
        )

    def link(self, host: str, port: int, purpose: str, timeout: float):
        """A connection to another broker on the inter-broker listener (its TLS and SASL)."""
        from kafkatool.broker.cluster.client import BrokerLink

        return BrokerLink(
            host, port, client_id=f"broker-{self.node_id}-{purpose}", timeout=timeout, security=self.security
        )

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        from kafkatool.broker.cluster.fetcher import FetcherManager

        self.fetchers = FetcherManager(self)
        self._alter_wakeup = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._isr_expiration_loop()))
        self._tasks.append(loop.create_task(self._alter_partition_loop()))

    async def stop(self) -> None:
        if self.fetchers is not None:
            await self.fetchers.stop()
        await stop_tasks(self._tasks, "replica manager")
        self.marker_links.close()
        self.verify_links.close()

    # ------------------------------------------------------------------ questions the handlers ask
    def is_leader(self, topic: str, partition: int) -> bool:
        p = self.local.get((topic, partition))
        return p is not None and p.leader == self.node_id

    def should_leader_throttle(self, topic: str, partition: int, replica_id: int) -> bool:
        """shouldLeaderThrottle: ``replica_id`` fetches a throttled partition of this leader
        while out of its ISR and the leader's replication quota is exceeded (the partition's
        answer then carries no records)."""
        p = self.local.get((topic, partition))
        if p is None or replica_id in p.isr:
            return False
        q = self.leader_quota
        return q.is_throttled(topic, partition) and q.exceeded()

    def leader_error(self, topic: str, partition: int) -> int | None:
        """None when this broker leads the partition; else Kafka's answer
        (ReplicaManager.getPartitionOrError)."""
        p = self.local.get((topic, partition))
        if p is not None and p.leader == self.node_id:
            return None
        if (topic, partition) in self.cache or p is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def leader_of(self, topic: str, partition: int) -> tuple[int, int]:
        v = self.cache.get((topic, partition))
        if v is None or v.leader not in self.live_brokers:
            return -1, v.leader_epoch if v is not None else -1
        return v.leader, v.leader_epoch

    def endpoint(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        b = self.live_brokers.get(broker_id)
        if b is None:
            return None
        ep = b.endpoints.get(listener or self._inter_broker)
        return None if ep is None else (ep[0], ep[1])

    def lagging_epoch_start(self, tp: TP) -> int | None:
        """Partition.fetchOffsetForTimestamp's lagging state: while this leader's high watermark
        is below the offset its epoch began at (after an election it waits for the followers'
        next fetches), that offset, else None."""
        part = self.local.get(tp)
        if part is None or part.leader != self.node_id:
            return None
        start = part.epoch_start_offset
        return start if start > part.log.high_watermark else None

    def enough_replicas(self, topic: str, partition: int) -> tuple[bool, int, int]:
        """Partition.appendRecordsToLeader's check for acks=all: (ok, ISR size, min ISR)."""
        p = self.local[(topic, partition)]
        need = p.effective_min_isr
        return len(p.isr) >= need, len(p.isr), need

    # ------------------------------------------------------------------ control requests
    def _stale(self, controller_epoch: int, broker_epoch: int) -> int | None:
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        return None

    def handle_leader_and_isr(self, req) -> LeaderAndIsrResponse:
        err = self._stale(req.controller_epoch, req.broker_epoch)
        if err is not None:
            log.info("LeaderAndIsr from controller %d refused: %s", req.controller_id, ErrorCode(err).name)
            return LeaderAndIsrResponse(error_code=err, partition_errors=[])
        errors = []
        leaders, followers = [], []
        for ts in req.topic_states:
            for ps in ts.partition_states:
                tp = (ts.topic_name, ps.partition_index)
                code = self._apply_partition_state(tp, ts.topic_id, ps, leaders, followers)
                errors.append(
                    LeaderAndIsrPartitionError(topic_name=tp[0], partition_index=tp[1], error_code=code)
                )
        for part, grew in followers:
            if grew:
                self.fetchers.add(part)
        for part in leaders:
            self.fetchers.remove(part.tp)
            self.maybe_increment_hw(part)
        # ReplicaManager.updateLeaderAndFollowerMetrics (KAFKA-8392): a topic this request made
        # this broker a follower of, with no partition of it led here, loses its leader meters
        led = {tp[0] for tp, p in self.local.items() if p.leader == self.node_id}
        for topic in {p.tp[0] for p, _ in followers} - led:
            self.broker.metrics.topics.remove_leader_metrics(topic)
        self._notify_coordinators(leaders, [p for p, _ in followers])
        return LeaderAndIsrResponse(error_code=0, partition_errors=errors)

    def _ensure_topic(self, topic: str, topic_id, partition: int):
        """The broker's TopicMeta for a topic the controller told us about (configs from
        /config/topics/T, the one place ZooKeeper mode keeps them).  Kafka's metadata cache holds
        no configs, so a topic is registered whatever its overrides: ones the log engine refuses
        (written to ZooKeeper behind the brokers' back: a change notification carrying them was
        logged and not applied) are kept as stored with no LogConfig, and the creation of a log
        of it is refused (:meth:`_log_config`) until a change notification or ZooKeeper brings
        ones it takes; a topic whose logs this broker loaded at start-up keeps the overrides
        they run with, as Kafka's existing logs do."""
        from kafkatool.broker.metadata import TopicMeta
        from kafkatool.formats.uuid import Uuid

        broker = self.broker
        t = broker.metadata.topics.get(topic)
        tid = Uuid(topic_id.bytes) if topic_id is not None and topic_id.int != 0 else None
        if t is None:
            configs = broker.cluster.topic_configs(topic)
            try:
                cfg = broker.config.log_config(configs)
            except ConfigError:
                cfg = None
                if any(name == topic for name, _p in broker.manager.logs):
                    configs = broker.unnamed_topic_configs.get(topic, {})
                    cfg = broker.config.log_config(configs)
            if tid is None:
                lg = broker.get_log(topic, partition)
                tid = lg.topic_id if lg is not None and lg.topic_id is not None else None
            if tid is None:
                import os

                from kafkatool.formats.uuid import random_uuid

                tid = random_uuid(os.urandom)
            t = TopicMeta(topic, tid, partition + 1, configs)
            broker.metadata.topics[topic] = t
            broker.unnamed_topic_configs.pop(topic, None)  # the metadata's configs from now on
            if cfg is not None:
                broker.manager.topic_configs[topic] = cfg
        elif tid is not None and t.topic_id != tid:
            t.topic_id = tid
        if partition + 1 > t.partitions:
            t.partitions = partition + 1
        return t

    def _log_config(self, t):
        """LogManager.getOrCreateLog's fetchLogConfig for a log about to be created: the LogConfig
        of the topic's overrides; if the engine refused them, they are read again from
        /config/topics/T (Kafka reads them at each log's creation) and taken if they now pass.
        ConfigError: still refused."""
        broker = self.broker
        cfg = broker.manager.topic_configs.get(t.name)
        if cfg is None:
            configs = broker.cluster.topic_configs(t.name)
            cfg = broker.config.log_config(configs)
            t.configs = dict(configs)
            broker.manager.topic_configs[t.name] = cfg
        return cfg

    def _apply_partition_state(self, tp: TP, topic_id, ps, leaders: list, followers: list) -> int:
        broker = self.broker
        if tp in broker.manager.offline_partitions:
            # HostedPartition.Offline: the controller takes the replica offline on this answer
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.node_id not in ps.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        part = self.local.get(tp)
        if part is not None and ps.leader_epoch <= part.leader_epoch:
            # a re-sent state: the leader epoch did not grow (Kafka ignores it and says so)
            if ps.partition_epoch > part.partition_epoch and part.leader == ps.leader == self.node_id:
                part.isr, part.partition_epoch, part.pending_isr = list(ps.isr), ps.partition_epoch, None
            return ErrorCode.STALE_CONTROLLER_EPOCH
        t = self._ensure_topic(tp[0], topic_id, tp[1])
        lg = broker.get_log(*tp)
        if lg is None:
            try:
                self._log_config(t)
            except ConfigError as exc:
                # Kafka's makeLeader/makeFollower: LogConfig.fromProps throws a ConfigException
                # creating the log, answered UNKNOWN_SERVER_ERROR (Errors.forException) and logged
                # by the state-change logger.  (Kafka 3.7 rethrows it: the whole request answers
                # UNKNOWN_SERVER_ERROR; here only the partition does and the rest is served.)
                # Nothing retries it but the controller's next LeaderAndIsr naming the partition:
                # a config change notification only updates the logs there are
                # (TopicConfigHandler -> LogManager.updateTopicConfig).
                log.error(
                    "Error while processing LeaderAndIsr request received from controller epoch %d "
                    "for partition %s-%d: /config/topics/%s: %s",
                    self.controller_epoch,  # the request's (_stale took it)
                    tp[0],
                    tp[1],
                    tp[0],
                    exc,
                )
                return ErrorCode.UNKNOWN_SERVER_ERROR
            try:
                lg = broker.manager.create_log(tp[0], tp[1], topic_id=t.topic_id, is_new=ps.is_new)
            except OSError as exc:
                # getOrCreateLog: not new while a dir is offline, or the dir failing now
                if not isinstance(exc, LogDirOfflineError) and exc.filename:
                    broker.report_io_error(exc.filename, f"Error while creating log for {tp[0]}-{tp[1]}", exc)
                log.warning("%s-%d: %s", tp[0], tp[1], exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
        elif lg.topic_id is None:
            lg.assign_topic_id(t.topic_id)
        lg.config = broker.manager.topic_configs.get(tp[0], lg.config)
        broker._attach(lg)
        if part is None:
            part = self.local[tp] = Partition(tp, lg)
        part.log = lg
        grew = ps.leader_epoch > part.leader_epoch
        part.replicas = list(ps.replicas)
        part.controller_epoch = ps.controller_epoch
        part.partition_epoch = ps.partition_epoch
        part.pending_isr = None
        t.leader_epochs[tp[1]] = ps.leader_epoch
        if ps.leader == self.node_id:
            part.isr = list(ps.isr)
            if grew:
                part.epoch_start_offset = lg.become_leader(ps.leader_epoch)
                now = now_ms()
                part.followers = {
                    r: FollowerState(last_caught_up_ms=now if r in ps.isr else 0)
                    for r in ps.replicas
                    if r != self.node_id
                }
            part.leader, part.leader_epoch = self.node_id, ps.leader_epoch
            leaders.append(part)
            log.info(
                "%s-%d: leader at epoch %d from offset %d, ISR %s",
                tp[0],
                tp[1],
                ps.leader_epoch,
                part.epoch_start_offset,
                part.isr,
            )
        else:
            part.isr = []
            part.followers = {}
            part.leader, part.leader_epoch = ps.leader, ps.leader_epoch
            followers.append((part, grew))
            broker.wake(tp)  # parked fetches see they are not leader any more
            self._complete_purgatory(tp, all_of_it=True)  # and parked acks=all produces
            log.info("%s-%d: follower of %d at epoch %d", tp[0], tp[1], ps.leader, ps.leader_epoch)
        return ErrorCode.NONE

    def handle_update_metadata(self, req) -> UpdateMetadataResponse:
        err = self._stale(req.controller_epoch, req.broker_epoch)
        if err is not None:
            return UpdateMetadataResponse(error_code=err)
        self.controller_id = req.controller_id
        self.live_brokers = {
            b.id_: LiveBroker(
                b.id_,
                b.rack,
                {
                    e.listener: (
                        e.host,
                        e.port,
                        SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"),
                    )
                    for e in b.endpoints
                },
            )
            for b in req.live_brokers
        }
        for tp in list(self._low_watermark_waiters):
            self._wake_low_watermark(tp)  # a replica on a broker gone no longer holds it back
        from kafkatool.broker.cluster.controller import LEADER_DURING_DELETE

        touched = set()
        for ts in req.topic_states:
            for ps in ts.partition_states:
                tp = (ts.topic_name, ps.partition_index)
                if ps.leader == LEADER_DURING_DELETE:
                    self.cache.pop(tp, None)
                    touched.add(ts.topic_name)
                    continue
                self.cache[tp] = PartitionView(
                    ps.leader,
                    ps.leader_epoch,
                    list(ps.isr),
                    list(ps.replicas),
                    list(ps.offline_replicas),
                    ps.zk_version,
                    ps.controller_epoch,
                )
                # Kafka's metadata cache reads no topic configs: a topic whose overrides the
                # engine refuses is in Metadata all the same (_ensure_topic)
                t = self._ensure_topic(ts.topic_name, ts.topic_id, ps.partition_index)
                t.leader_epochs[ps.partition_index] = max(
                    t.leader_epochs.get(ps.partition_index, 0), ps.leader_epoch
                )
        for topic in touched:
            if not any(tp[0] == topic for tp in self.cache) and not any(tp[0] == topic for tp in self.local):
                self.broker.metadata.topics.pop(topic, None)
        self.broker.cluster.metadata_updated()
        return UpdateMetadataResponse(error_code=0)

    def on_log_dir_failure(self, d, gone: list[TP]) -> None:
        """ReplicaManager.handleLogDirFailure's replica part (the log manager already dropped the
        logs): the fetchers of the dir's partitions stop, they leave the hosted partitions
        (HostedPartition.Offline: LeaderAndIsr and StopReplica answer KAFKA_STORAGE_ERROR),
        acks=all produces waiting on them are answered, and the controller is told through a
        /log_dir_event_notification znode (ZkClient.propagateLogDirEvent)."""
        for tp in gone:
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            self.local.pop(tp, None)
            self._complete_purgatory(tp, all_of_it=True)
        log.warning(
            "Broker %d stopped fetcher for partitions %s because they are in the failed log directory %s.",
            self.node_id,
            ",".join(f"{t}-{p}" for t, p in gone),
            d,
        )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._propagate_log_dir_event()
        else:
            loop.run_in_executor(None, self._propagate_log_dir_event)

    def _propagate_log_dir_event(self) -> None:
        from kafkatool.zk import codecs, paths

        path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{paths.LOG_DIR_EVENT_PREFIX}"
        try:
            made = self.broker.cluster.zk.create(
                path, codecs.encode_log_dir_event(self.node_id), sequence=True, makepath=True
            )
        except Exception as exc:  # noqa: BLE001 (a lost session: the controller learns at re-registration)
            log.error("could not write the log dir event notification: %s", exc)
            return
        log.info("log dir event notification %s written for broker %d", made, self.node_id)

    def handle_stop_replica(self, req) -> StopReplicaResponse:
        err = self._stale(req.controller_epoch, req.broker_epoch)
        if err is not None:
            return StopReplicaResponse(error_code=err, partition_errors=[])
        errors = []
        doomed = []
        resigned = []
        for ts in req.topic_states:
            for ps in ts.partition_states:
                tp = (ts.topic_name, ps.partition_index)
                part = self.local.get(tp)
                if tp in self.broker.manager.offline_partitions:
                    # stopReplicas: an offline partition answers KAFKA_STORAGE_ERROR
                    errors.append(
                        StopReplicaPartitionError(
                            topic_name=tp[0], partition_index=tp[1], error_code=ErrorCode.KAFKA_STORAGE_ERROR
                        )
                    )
                    continue
                if part is not None and ps.leader_epoch >= 0 and ps.leader_epoch < part.leader_epoch:
                    errors.append(
                        StopReplicaPartitionError(
                            topic_name=tp[0], partition_index=tp[1], error_code=ErrorCode.FENCED_LEADER_EPOCH
                        )
                    )
                    continue
                self.fetchers.remove(tp)
                if part is not None and part.leader == self.node_id:
                    resigned.append(part)
                if ps.delete_partition:
                    # the replica goes (deletion or reassignment); the cache is UpdateMetadata's
                    self.local.pop(tp, None)
                    target = self.broker.manager.delete_log(*tp)
                    if target is not None:
                        doomed.append(target)
                elif part is not None:
                    part.leader = -1
                self.broker.wake(tp)
                self._complete_purgatory(tp, all_of_it=True)
                errors.append(
                    StopReplicaPartitionError(topic_name=tp[0], partition_index=tp[1], error_code=0)
                )
        if doomed:
            self.broker.manager.remove_deleted(doomed)
        for ts in req.topic_states:
            if any(tp[0] == ts.topic_name for tp in self.local):
                continue
            # ReplicaManager.maybeRemoveTopicMetrics: no partition of the topic hosted here (the
            # topic may live on elsewhere: a reassignment moved its replicas away)
            self.broker.metrics.topics.remove(ts.topic_name)
            if not any(tp[0] == ts.topic_name for tp in self.cache):
                self.broker.metadata.topics.pop(ts.topic_name, None)
                self.broker.manager.topic_configs.pop(ts.topic_name, None)
        self._notify_coordinators([], resigned)
        return StopReplicaResponse(error_code=0, partition_errors=errors)

    def _notify_coordinators(self, leaders: list[Partition], followers: list[Partition]) -> None:
        """RequestHandlerHelper.onLeadershipChange: the group and transaction coordinators load
        the partitions of their internal topic this broker now leads and unload the others."""
        hook = getattr(self.broker, "on_leadership_change", None)
        if hook is not None:
            hook([p.tp for p in leaders], [p.tp for p in followers])

    # ------------------------------------------------------------------ leader side
    def record_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int, log_start: int
    ) -> None:
        """Replica.updateFetchStateOrThrow, then maybeExpandIsr and the HW rule."""
        part = self.local.get((topic, partition))
        if part is None or part.leader != self.node_id:
            return
        fs = part.followers.get(replica_id)
        if fs is None:
            if replica_id not in part.replicas:
                return
            fs = part.followers[replica_id] = FollowerState()
        now = now_ms()
        leo = part.log.log_end_offset
        if fetch_offset >= leo:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, now)
        elif fetch_offset >= fs.last_fetch_leader_leo >= 0:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, fs.last_fetch_ms)
        moved = fs.log_start != log_start
        fs.leo, fs.log_start = fetch_offset, log_start
        fs.last_fetch_leader_leo, fs.last_fetch_ms = leo, now
        if moved:
            self._wake_low_watermark(part.tp)
        self._maybe_expand_isr(part, replica_id, fs)
        self.maybe_increment_hw(part)

    def _caught_up(self, part: Partition, fs: FollowerState, now: int) -> bool:
        return fs.leo == part.log.log_end_offset or now - fs.last_caught_up_ms <= self.lag_ms

    def _maybe_expand_isr(self, part: Partition, rid: int, fs: FollowerState) -> None:
        if rid in part.isr or part.pending_isr is not None or rid not in self.live_brokers:
            return
        lg = part.log
        if fs.leo >= lg.high_watermark and fs.leo >= part.epoch_start_offset:
            new = sorted(set(part.isr) | {rid}, key=part.replicas.index)
            self._submit_isr(part, new)
            log.info("%s-%d: expanding the ISR %s -> %s", part.tp[0], part.tp[1], part.isr, new)

    def maybe_increment_hw(self, part: Partition) -> bool:
        """Partition.maybeIncrementLeaderHW (3.7+: frozen while the ISR is below min ISR)."""
        if part.leader != self.node_id:
            return False
        lg = part.log
        if len(part.isr) < part.effective_min_isr:
            return False
        new = lg.log_end_offset
        now = now_ms()
        maximal = part.maximal_isr
        for rid, fs in part.followers.items():
            if rid in maximal or (rid in self.live_brokers and self._caught_up(part, fs, now)):
                new = min(new, max(fs.leo, 0))
        if new > lg.high_watermark:
            lg.update_high_watermark(new)
            self.broker.wake(part.tp)
            self._complete_purgatory(part.tp)
            return True
        return False

    def on_leader_append(self, lg) -> None:
        part = self.local.get(lg.topic_partition)
        if part is not None and part.leader == self.node_id:
            self.maybe_increment_hw(part)

    async def _isr_expiration_loop(self) -> None:
        interval = max(self.lag_ms / 2000.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for part in list(self.local.values()):
                if part.leader != self.node_id or part.pending_isr is not None:
                    continue
                out = [
                    r
                    for r in part.isr
                    if r != self.node_id
                    and not self._caught_up(part, part.followers.get(r) or FollowerState(), now)
                ]
                if out:
                    new = [r for r in part.isr if r not in out]
                    log.info(
                        "%s-%d: shrinking the ISR %s -> %s (out of sync: %s)",
                        part.tp[0],
                        part.tp[1],
                        part.isr,
                        new,
                        out,
                    )
                    self._submit_isr(part, new)

    # ------------------------------------------------------------------ AlterPartition
    def _submit_isr(self, part: Partition, new_isr: list[int]) -> None:
        part.pending_isr = list(new_isr)
        self._alter_queue[part.tp] = (part.leader_epoch, list(new_isr), part.partition_epoch)
        if self._alter_wakeup is not None:
            self._alter_wakeup.set()

    async def _alter_partition_loop(self) -> None:
        """DefaultAlterPartitionManager: one request in flight carrying every queued change,
        retried until the controller answers."""
        from kafkatool.broker.cluster.client import BrokerLink, BrokerLinkError

        link: BrokerLink | None = None
        link_to = None
        while True:
            await self._alter_wakeup.wait()
            self._alter_wakeup.clear()
            if not self._alter_queue:
                continue
            items = dict(self._alter_queue)
            ep = self.endpoint(self.controller_id, None)
            if ep is None:
                await asyncio.sleep(0.2)
                self._alter_wakeup.set()
                continue
            if link is None or link_to != (self.controller_id, ep):
                if link is not None:
                    link.close()
                link = self.link(*ep, "alter-partition", 10.0)
                link_to = (self.controller_id, ep)
            topics: dict[str, list] = {}
            for (t, p), (epoch, isr, pepoch) in items.items():
                topics.setdefault(t, []).append(
                    AlterPartitionData(
                        partition_index=p, leader_epoch=epoch, new_isr=isr, partition_epoch=pepoch
                    )
                )
            req = AlterPartitionRequest(
                broker_id=self.node_id,
                broker_epoch=self.broker_epoch,
                topics=[AlterTopicData(topic_name=t, partitions=ps) for t, ps in topics.items()],
            )
            try:
                resp = await link.request(56, ALTER_PARTITION_VERSION, req)
            except BrokerLinkError as exc:
                log.info("AlterPartition to controller %d failed: %s; retrying", self.controller_id, exc)
                link.close()
                link = None
                await asyncio.sleep(0.5)
                self._alter_wakeup.set()
                continue
            if resp.error_code:
                await asyncio.sleep(0.05 if resp.error_code != ErrorCode.NOT_CONTROLLER else 0.5)
                self._alter_wakeup.set()
                continue
            for td in resp.topics:
                for pd in td.partitions:
                    tp = (td.topic_name, pd.partition_index)
                    sent = items.get(tp)
                    if self._alter_queue.get(tp) == sent:
                        del self._alter_queue[tp]
                    self._alter_done(tp, sent, pd)

    def _alter_done(self, tp: TP, sent, pd) -> None:
        part = self.local.get(tp)
        if part is None or sent is None or part.leader != self.node_id or part.leader_epoch != sent[0]:
            return  # local state changed meanwhile: ignore (Partition.handleAlterPartitionUpdate)
        if pd.error_code == ErrorCode.NONE:
            if pd.leader_epoch == part.leader_epoch and pd.partition_epoch >= part.partition_epoch:
                # Partition.handleAlterPartitionUpdate: IsrShrinksPerSec / IsrExpandsPerSec
                m = self.broker.metrics
                if len(pd.isr) < len(part.isr):
                    m.isr_shrinks += 1
                elif len(pd.isr) > len(part.isr):
                    m.isr_expands += 1
                part.isr = list(pd.isr)
                part.partition_epoch = pd.partition_epoch
                part.pending_isr = None
                log.info(
                    "%s-%d: ISR is now %s (partition epoch %d)", tp[0], tp[1], part.isr, part.partition_epoch
                )
                self.maybe_increment_hw(part)
        elif pd.error_code in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
            part.pending_isr = None
        else:
            log.info(
                "%s-%d: AlterPartition answered %s; waiting for the next LeaderAndIsr",
                tp[0],
                tp[1],
                ErrorCode(pd.error_code).name,
            )

    # ------------------------------------------------------------------ the produce purgatory
    def _complete_purgatory(self, tp: TP, *, all_of_it: bool = False) -> None:
        """DelayedProduce.tryComplete for the requests waiting on ``tp``: each whose required
        offset the high watermark reached, or all of them (``all_of_it``, or this broker no
        longer leads ``tp``), counts the partition as done; a request is answered once every
        partition it waits on is."""
        self._wake_low_watermark(tp)  # DeleteRecords waiting on it look again too
        waiting = self._purgatory.get(tp)
        if not waiting:
            return
        part = self.local.get(tp)
        hw = (
            part.log.high_watermark
            if part is not None and part.leader == self.node_id and not all_of_it
            else None
        )
        keep = []
        for offset, delayed in waiting:
            if delayed.fut.done():
                continue  # expired
            if hw is None or hw >= offset:
                delayed.remaining -= 1
                if not delayed.remaining:
                    delayed.fut.set_result(None)
            else:
                keep.append((offset, delayed))
        if keep:
            self._purgatory[tp] = keep
        else:
            del self._purgatory[tp]

    async def _await_hw(self, items: list[tuple[TP, int]], timeout_ms: int) -> None:
        """Until the high watermark of each (partition, offset) reaches the offset, this broker
        stops leading it, or ``timeout_ms`` passes: one waiter for the whole request, keyed
        under each partition it still waits on (DelayedProduce's watch keys)."""
        delayed = None
        for tp, offset in items:
            part = self.local.get(tp)
            if part is None or part.leader != self.node_id or part.log.high_watermark >= offset:
                continue
            if delayed is None:
                delayed = _Delayed(asyncio.get_running_loop().create_future())
            delayed.remaining += 1
            self._purgatory.setdefault(tp, []).append((offset, delayed))
        if delayed is None:
            return
        timer = asyncio.get_running_loop().call_later(max(timeout_ms, 0) / 1000.0, _expire, delayed.fut)
        try:
            await delayed.fut
        finally:
            timer.cancel()
            if not delayed.fut.done():
                delayed.fut.cancel()  # cancelled: the purgatory drops it at its next pass

    async def await_replication(self, waits: list[tuple], timeout_ms: int) -> None:
        """DelayedProduce: each (response, topic, partition, required offset) completes when the
        high watermark reaches it (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR
        fell below min ISR), on leadership loss (NOT_LEADER_OR_FOLLOWER), or at the timeout
        (REQUEST_TIMED_OUT)."""
        await self._await_hw([((t, p), required) for _, t, p, required in waits], timeout_ms)
        for resp, t, p, required in waits:
            part = self.local.get((t, p))
            if part is None and (t, p) in self.broker.manager.offline_partitions:
                resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR  # its log dir failed meanwhile
                resp.base_offset = -1
            elif part is None or part.leader != self.node_id:
                resp.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                resp.base_offset = -1
            elif part.log.high_watermark >= required:
                if len(part.maximal_isr) < part.effective_min_isr:
                    resp.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                resp.error_code = ErrorCode.REQUEST_TIMED_OUT
                resp.base_offset = -1

    def low_watermark(self, tp: TP) -> int | None:
        """Partition.lowWatermarkIfLeader: the smallest log start offset of this leader's log and
        of every other replica on a live broker, as each last fetched (-1 for one that has not
        fetched since this broker leads); None when this broker does not lead ``tp``."""
        part = self.local.get(tp)
        if part is None or part.leader != self.node_id:
            return None
        low = part.log.log_start_offset
        for rid in part.replicas:
            if rid != self.node_id and rid in self.live_brokers:
                fs = part.followers.get(rid)
                low = min(low, fs.log_start if fs is not None else -1)
        return low

    async def await_low_watermark(self, waits: list[tuple], timeout_ms: int) -> None:
        """DelayedDeleteRecords: each (response, partition, requested offset) is answered with
        the low watermark once it reaches the offset (the followers moved their log start
        offsets, told by the leader's fetch answers), NOT_LEADER_OR_FOLLOWER when this broker
        stops leading the partition, or REQUEST_TIMED_OUT at ``timeout_ms`` (the response keeps
        the low watermark it had)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        pending = list(waits)
        while pending:
            still = []
            for resp, tp, offset in pending:
                low = self.low_watermark(tp)
                if low is None:
                    resp.error_code, resp.low_watermark = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
                elif low >= offset:
                    resp.error_code, resp.low_watermark = ErrorCode.NONE, low
                else:
                    still.append((resp, tp, offset))
            pending = still
            left = deadline - loop.time()
            if not pending or left <= 0:
                break
            fut = loop.create_future()
            for _, tp, _ in pending:
                self._low_watermark_waiters.setdefault(tp, []).append(fut)
            try:
                await asyncio.wait_for(fut, left)
            except TimeoutError:
                pass
            finally:
                for _, tp, _ in pending:
                    waiters = self._low_watermark_waiters.get(tp, [])
                    if fut in waiters:
                        waiters.remove(fut)
                    if not waiters:
                        self._low_watermark_waiters.pop(tp, None)
        for resp, _tp, _offset in pending:
            resp.error_code = ErrorCode.REQUEST_TIMED_OUT

    def _wake_low_watermark(self, tp: TP) -> None:
        for fut in self._low_watermark_waiters.pop(tp, ()):
            if not fut.done():
                fut.set_result(None)

    async def await_log_end(self, tp: TP, timeout_ms: int) -> bool:
        """Wait until the high watermark reaches the log end offset as it is now (what this
        broker just appended as leader); False on timeout or lost leadership."""
        part = self.local.get(tp)
        if part is None or part.leader != self.node_id:
            return False
        target = part.log.log_end_offset
        await self._await_hw([(tp, target)], timeout_ms)
        part = self.local.get(tp)
        return part is not None and part.leader == self.node_id and part.log.high_watermark >= target

    # ------------------------------------------------------------------ controlled shutdown
    async def controlled_shutdown(self) -> bool:
        """KafkaServer.controlledShutdown: ask the controller to move leadership away, up to
        controlled.shutdown.max.retries times."""
        from kafkatool.broker.cluster.client import BrokerLinkError

        self.shutting_down = True
        tries = self.config.int("controlled.shutdown.max.retries")
        backoff = self.config.int("controlled.shutdown.retry.backoff.ms") / 1000.0
        for attempt in range(max(tries, 1)):
            ep = self.endpoint(self.controller_id, None)
            if ep is None:
                log.info("controlled shutdown: no controller known")
                return False
            link = self.link(*ep, "shutdown", 30.0)
            try:
                resp = await link.request(
                    7,
                    CONTROLLED_SHUTDOWN_VERSION,
                    ControlledShutdownRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch),
                )
            except BrokerLinkError as exc:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                resp = None
            finally:
                link.close()
            if resp is not None and resp.error_code == 0 and not resp.remaining_partitions:
                log.info("controlled shutdown succeeded")
                return True
            if resp is not None:
                log.info(
                    "controlled shutdown attempt %d: %s, %d partitions still led",
                    attempt + 1,
                    ErrorCode(resp.error_code).name,
                    len(resp.remaining_partitions),
                )
                if resp.error_code == 0:
                    return True  # what remains has no other replica to move to
            await asyncio.sleep(min(backoff, 1.0))
        return False
