"""The ZooKeeper-mode controller (Kafka's KafkaController, one active per cluster).

Every broker runs one :class:`Controller`; the one that wins ``/controller`` (with
``/controller_epoch`` bumped in the same multi) is active.  The active controller keeps a
context loaded from ZooKeeper, reacts to watch events on its single event thread (Kafka's
ControllerEventManager), writes partition state znodes fenced by the epoch znode's
zkVersion, and sends LeaderAndIsr, UpdateMetadata and StopReplica to the brokers, one
sender thread per broker with one request in flight (ControllerChannelManager).

Facts: ../shared/notes/replication.md sections 1-3 and 7, each with the Kafka class named.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass

from kafkatool.formats.uuid import Uuid
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from kafkatool.protocol.generated.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from kafkatool.protocol.generated.stop_replica_request import StopReplicaPartitionState, StopReplicaTopicState
from kafkatool.protocol.generated.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)
from kafkatool.zk import codecs, paths
from kafkatool.zk.client import KafkaZk, ZkBadVersionError, ZkError, ZkNodeExistsError, ZkNoNodeError

log = logging.getLogger("kafkatool.controller")

#: versions a 3.x ZK controller sends at IBP 2.8 (LeaderAndIsr 5 adds topic ids; we send names)
LEADER_AND_ISR_VERSION = 4
UPDATE_METADATA_VERSION = 6
STOP_REPLICA_VERSION = 3
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: LeaderDuringDelete: UpdateMetadata tells brokers to drop the partition
LEADER_DURING_DELETE = -2
NO_LEADER = -1

TP = tuple[str, int]


class ControllerMovedError(Exception):
    """A fenced write failed: another controller has a newer epoch."""


@dataclass
class PartitionStateZ:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int


def _wire_uuid(text: str | None):
    if not text:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=Uuid.from_string(text).raw)


class _Sender(threading.Thread):
    """One queue and one thread per broker; a failed send is retried on a new connection
    until it succeeds or the broker is removed (ControllerChannelManager.RequestSendThread)."""

    def __init__(self, controller: Controller, broker_id: int, host: str, port: int):
        super().__init__(name=f"controller-sender-{broker_id}", daemon=True)
        self.controller = controller
        self.broker_id = broker_id
        self.host, self.port = host, port
        self.q: queue.Queue = queue.Queue()
        self.stopped = threading.Event()
        self._conn = None

    def send(self, api_key: int, version: int, body, done: cf.Future | None = None) -> None:
        self.q.put((api_key, version, body, done))

    def stop(self) -> None:
        self.stopped.set()
        self.q.put(None)

    def run(self) -> None:
        from kafkatool.assign.kafka_client import Connection, KafkaAdminError

        failures = 0
        while not self.stopped.is_set():
            item = self.q.get()
            if item is None:
                break
            api_key, version, body, done = item
            while not self.stopped.is_set():
                try:
                    if self._conn is None:
                        self._conn = Connection(
                            self.host,
                            self.port,
                            timeout=self.controller.socket_timeout,
                            client_id=f"controller-{self.controller.broker_id}",
                            security=self.controller.security,
                        )
                    resp = self._conn.request(api_key, body, version=version)
                except KafkaAdminError as exc:
                    if self._conn is not None:
                        self._conn.close()
                        self._conn = None
                    failures += 1
                    if failures == 1 or failures % 100 == 0:
                        # one line when a broker stops answering, then one every ~10 s
                        log.info(
                            "controller -> broker %d: %s; retrying (attempt %d)",
                            self.broker_id,
                            exc,
                            failures,
                        )
                    self.stopped.wait(0.1)
                    continue
                if failures:
                    log.info(
                        "controller -> broker %d: reachable again after %d attempts", self.broker_id, failures
                    )
                    failures = 0
                if done is not None and not done.done():
                    done.set_result(resp)
                break
            else:
                if done is not None and not done.done():
                    done.set_exception(ConnectionError(f"broker {self.broker_id} removed"))
        if self._conn is not None:
            self._conn.close()


class Controller:
    """One broker's controller: an election participant, and the cluster's brain when active."""

    def __init__(self, broker_id: int, zk: KafkaZk, config, *, inter_broker_listener: str, security=None):
        self.broker_id = broker_id
        #: the inter-broker listener's TLS/SASL (security/client.ClientSecurity), None: PLAINTEXT
        self.security = security
        self.zk = zk
        self.config = config
        self.listener = inter_broker_listener
        self.socket_timeout = config.int("controller.socket.timeout.ms") / 1000.0
        self.events: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="controller-event-thread", daemon=True)
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        # context (valid while active)
        self.live: dict[int, tuple[int, codecs.BrokerRegistration]] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.topic_ids: dict[str, str] = {}
        self.states: dict[TP, PartitionStateZ] = {}
        self.senders: dict[int, _Sender] = {}
        #: topics being deleted -> their (broker, partition) replicas not yet deleted
        #: (TopicDeletionManager: deletion waits while a replica's broker is offline)
        self.deleting: dict[str, set[tuple[int, int]]] = {}
        #: ongoing reassignments: tp -> (original replicas ORS, target replicas TRS); the
        #: assignment holds RS = TRS ++ (ORS - TRS) while moving (KIP-455)
        self.reassigning: dict[TP, tuple[list[int], list[int]]] = {}
        #: partitions the /admin/reassign_partitions znode asked for (deleted when all are done)
        self._znode_reassignments: set[TP] = set()
        self._watched_topics: set[str] = set()
        #: replicas on failed log dirs, by broker (ControllerContext.replicasOnOfflineDirs): what
        #: LeaderAndIsr answered KAFKA_STORAGE_ERROR for; forgotten when the broker restarts
        self.offline_dir_replicas: dict[int, set[TP]] = {}
        self._stopping = False
        #: after a clean election, seconds from watch to controller (for logs/tests)
        self.last_failover_s: float | None = None

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        k = self.zk.kazoo
        self.thread.start()
        DataWatch(k, paths.CONTROLLER, lambda data, stat, event=None: self._put(("controller_change",)))
        ChildrenWatch(k, paths.BROKER_IDS, lambda kids: self._put(("brokers",)))
        ChildrenWatch(k, paths.BROKER_TOPICS, lambda kids: self._put(("topics",)))
        ChildrenWatch(k, paths.DELETE_TOPICS, lambda kids: self._put(("delete_topics",)))
        ChildrenWatch(k, paths.ISR_CHANGE_NOTIFICATION, lambda kids: self._put(("isr_change",)))
        ChildrenWatch(k, paths.LOG_DIR_EVENT_NOTIFICATION, lambda kids: self._put(("log_dir_event",)))
        DataWatch(
            k, paths.PREFERRED_REPLICA_ELECTION, lambda data, stat, event=None: self._put(("preferred",))
        )
        DataWatch(k, paths.REASSIGN_PARTITIONS, lambda data, stat, event=None: self._put(("reassign_znode",)))

    def stop(self) -> None:
        self._stopping = True
        self.events.put(("stop",))
        self.thread.join(timeout=10)

    def _put(self, event: tuple) -> bool:
        if not self._stopping:
            self.events.put(event)
        return not self._stopping

    def submit(self, name: str, *args) -> cf.Future:
        """Run ``name`` on the event thread; the future carries its result (the request
        handlers on the event loop await it)."""
        fut: cf.Future = cf.Future()
        self.events.put(("call", name, args, fut))
        return fut

    def unclean_leader_election_enabled(self) -> None:
        """The broker's unclean.leader.election.enable turned on at runtime (a dynamic broker
        config): the controller elects the partitions without a leader again, now allowed to
        pick an out-of-sync replica (KafkaController.enableDefaultUncleanLeaderElection)."""
        self._put(("unclean_enabled",))

    def _on_unclean_enabled(self) -> None:
        self._elect_partitions(self._partitions_needing_leader())

    def metric_counts(self) -> tuple[int, int, int] | None:
        """KafkaController's GlobalTopicCount, GlobalPartitionCount and OfflinePartitionsCount
        (partitions whose leader is none or not live, a topic being deleted left out), or None
        when this broker is not the active controller.  Read from another thread: every
        structure is copied first (a copy of a dict is one step under the GIL)."""
        if not self.active:
            return None
        assignments = dict(self.assignments)
        states = dict(self.states)
        live = set(self.live)
        deleting = set(self.deleting)
        partitions = sum(len(a) for a in assignments.values())
        offline = sum(
            1
            for tp, st in states.items()
            if tp[0] not in deleting and (st.leader == NO_LEADER or st.leader not in live)
        )
        return len(assignments), partitions, offline

    def session_renewed(self) -> None:
        """After a ZooKeeper session expiry the broker re-registered: resign and re-elect."""
        self._put(("reelect",))

    # ------------------------------------------------------------------ event thread
    def _run(self) -> None:
        while True:
            ev = self.events.get()
            kind = ev[0]
            if kind == "stop":
                self._resign(delete_znode=self.active)
                return
            try:
                if kind == "call":
                    _, name, args, fut = ev
                    try:
                        fut.set_result(getattr(self, name)(*args))
                    except Exception as exc:
                        fut.set_exception(exc)
                    continue
                if kind in ("controller_change", "reelect"):
                    self._maybe_elect(force_resign=kind == "reelect")
                    continue
                if not self.active:
                    continue
                getattr(self, f"_on_{kind}")(*ev[1:])
            except ControllerMovedError:
                log.info("controller %d: a newer controller took over; resigning", self.broker_id)
                self._resign()
            except ZkError as exc:
                log.warning("controller %d: ZooKeeper error handling %s: %s", self.broker_id, kind, exc)
                if self.active and "connection" in str(exc).lower():
                    self._resign()
            except Exception:
                log.exception("controller %d: failed handling %s", self.broker_id, kind)

    # ------------------------------------------------------------------ election
    def _maybe_elect(self, force_resign: bool = False) -> None:
        cur = self.zk.get_or_none(paths.CONTROLLER)
        owner = None
        if cur is not None:
            with contextlib.suppress(Exception):
                owner = codecs.decode_controller(cur.data).broker_id
        if force_resign and self.active:
            self._resign()
        if owner is not None:
            if owner != self.broker_id and self.active:
                self._resign()
            if owner == self.broker_id and not self.active:
                # our ephemeral from a previous session of this process: delete, re-elect
                with contextlib.suppress(ZkError):
                    self.zk.delete(paths.CONTROLLER, version=cur.stat.version)
                self._maybe_elect()
            return
        self._elect()

    def _elect(self) -> None:
        from kazoo import exceptions as ke

        k = self.zk.kazoo
        t0 = time.monotonic()
        try:
            node = self.zk.get_or_none(paths.CONTROLLER_EPOCH)
            if node is None:
                with contextlib.suppress(ZkNodeExistsError):
                    self.zk.create(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(0))
                node = self.zk.get(paths.CONTROLLER_EPOCH)
            epoch = codecs.decode_controller_epoch(node.data)
            tx = k.transaction()
            tx.create(
                paths.CONTROLLER,
                codecs.encode_controller(self.broker_id, int(time.time() * 1000)),
                ephemeral=True,
            )
            tx.set_data(
                paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(epoch + 1), version=node.stat.version
            )
            results = tx.commit()
        except ke.KazooException as exc:
            log.info("controller %d: election attempt failed (%s)", self.broker_id, type(exc).__name__)
            return
        if any(isinstance(r, Exception) for r in results):
            return  # someone else won (NODEEXISTS / BADVERSION): their watch event follows
        self.epoch = epoch + 1
        self.epoch_zk_version = results[1].version
        self.active = True
        log.info("controller %d: elected, controller epoch %d", self.broker_id, self.epoch)
        try:
            self._on_failover()
        except ControllerMovedError:
            self._resign()
            return
        self.last_failover_s = time.monotonic() - t0

    def _schedule_rebalance(self, delay: float) -> None:
        timer = threading.Timer(delay, lambda: self._put(("auto_rebalance",)))
        timer.daemon = True
        self._rebalance_timer = timer
        timer.start()

    def _on_auto_rebalance(self) -> None:
        """checkAndTriggerAutoLeaderRebalance: for each preferred broker (the assignment head),
        if more than leader.imbalance.per.broker.percentage of its partitions are led by
        another broker, preferred elections where it is alive and in the ISR."""
        try:
            limit = self.config.int("leader.imbalance.per.broker.percentage") / 100.0
            by_head: dict[int, list[TP]] = {}
            for topic, parts in self.assignments.items():
                if topic in self.deleting:
                    continue
                for p, replicas in parts.items():
                    if replicas and (topic, p) not in self.reassigning:
                        by_head.setdefault(replicas[0], []).append((topic, p))
            todo = []
            for head, tps in by_head.items():
                if not self.online(head):
                    continue
                off = [tp for tp in tps if (st := self.states.get(tp)) is not None and st.leader != head]
                if tps and len(off) / len(tps) > limit:
                    todo += [tp for tp in off if head in self.states[tp].isr]
            if todo:
                done = self.elect_preferred(todo)
                moved = sorted(tp for tp, code in done.items() if code == ErrorCode.NONE)
                if moved:
                    log.info(
                        "controller %d: auto leader rebalance moved %d leaders", self.broker_id, len(moved)
                    )
        finally:
            if self.active:
                self._schedule_rebalance(float(self.config.int("leader.imbalance.check.interval.seconds")))

    def _resign(self, delete_znode: bool = False) -> None:
        if not self.active:
            return
        self.active = False
        timer = getattr(self, "_rebalance_timer", None)
        if timer is not None:
            timer.cancel()
        for s in self.senders.values():
            s.stop()
        self.senders.clear()
        self.live.clear()
        self.states.clear()
        self.assignments.clear()
        self.shutting_down.clear()
        self.reassigning.clear()
        self._znode_reassignments.clear()
        if delete_znode:
            with contextlib.suppress(Exception):
                cur = self.zk.get_or_none(paths.CONTROLLER)
                if cur is not None and codecs.decode_controller(cur.data).broker_id == self.broker_id:
                    self.zk.delete(paths.CONTROLLER, version=cur.stat.version)
        log.info("controller %d: resigned", self.broker_id)

    # ------------------------------------------------------------------ fenced writes
    def _fenced(self, ops: list[tuple]) -> list:
        """One multi: check(/controller_epoch, our zkVersion) + ``ops``
        (KafkaZkClient.wrapRequestWithControllerEpochCheck)."""
        from kazoo import exceptions as ke

        tx = self.zk.kazoo.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        for op in ops:
            if op[0] == "create":
                tx.create(op[1], op[2])
            elif op[0] == "set":
                tx.set_data(op[1], op[2], version=op[3])
            elif op[0] == "delete":
                tx.delete(op[1], version=op[2] if len(op) > 2 else -1)
        try:
            results = tx.commit()
        except ke.KazooException as exc:
            raise ZkError(f"controller write failed: {type(exc).__name__}") from None
        if isinstance(results[0], Exception) and not isinstance(results[0], ke.RolledBackError):
            raise ControllerMovedError()
        for op, r in zip(ops, results[1:], strict=False):
            if isinstance(r, ke.BadVersionError):
                raise ZkBadVersionError(op[1])
            if isinstance(r, ke.NodeExistsError):
                raise ZkNodeExistsError(op[1])
            if isinstance(r, ke.NoNodeError):
                raise ZkNoNodeError(op[1])
            if isinstance(r, Exception) and not isinstance(r, ke.RolledBackError):
                raise ZkError(f"{op[1]}: {type(r).__name__}")
        return results[1:]

    def _write_state(self, tp: TP, leader: int, leader_epoch: int, isr: list[int]) -> PartitionStateZ:
        data = codecs.encode_partition_state(leader, leader_epoch, self.epoch, isr)
        path = paths.partition_state(*tp)
        cur = self.states.get(tp)
        if cur is None:
            self.zk.ensure_path(paths.partition(*tp))
            self._fenced([("create", path, data)])
            version = 0
        else:
            res = self._fenced([("set", path, data, cur.zk_version)])
            version = res[0].version
        st = PartitionStateZ(leader, leader_epoch, list(isr), self.epoch, version)
        self.states[tp] = st
        return st

    # ------------------------------------------------------------------ context
    def online(self, broker_id: int) -> bool:
        return broker_id in self.live and broker_id not in self.shutting_down

    def replica_online(self, broker_id: int, tp: TP) -> bool:
        """ControllerContext.isReplicaOnline: its broker is live and its log dir is not offline."""
        return self.online(broker_id) and tp not in self.offline_dir_replicas.get(broker_id, ())

    def _load_brokers(self) -> dict[int, tuple[int, codecs.BrokerRegistration]]:
        out = {}
        for bid in self.zk.broker_ids():
            node = self.zk.get_or_none(paths.broker(bid))
            if node is None:
                continue
            try:
                out[bid] = (node.stat.czxid, codecs.decode_broker(node.data, bid))
            except codecs.ZkPayloadError as exc:
                log.warning("controller: %s", exc)
        return out

    def _load_topic(self, topic: str) -> None:
        typed = self.zk.topic_assignment(topic)
        if typed is None or typed.value is None:
            return
        a = typed.value
        if a.topic_id is None:
            # IBP >= 2.8: the controller gives a topic without an id one
            a.topic_id = str(Uuid(uuid.uuid4().bytes))
            with contextlib.suppress(ZkError):
                self._fenced(
                    [
                        (
                            "set",
                            paths.topic(topic),
                            codecs.encode_topic(
                                a.partitions,
                                adding=a.adding_replicas,
                                removing=a.removing_replicas,
                                topic_id=a.topic_id,
                            ),
                            typed.stat.version,
                        )
                    ]
                )
        self.assignments[topic] = dict(a.partitions)
        self.topic_ids[topic] = a.topic_id
        for p in set(a.adding_replicas) | set(a.removing_replicas):
            # an ongoing reassignment (the znode is its only durable record):
            # TRS = RS - RR, ORS = RS - AR
            rs = a.partitions.get(p, [])
            adding, removing = a.adding_replicas.get(p, []), a.removing_replicas.get(p, [])
            self.reassigning[(topic, p)] = (
                [r for r in rs if r not in adding],
                [r for r in rs if r not in removing],
            )
        ts = self.zk.topic_state(topic)
        for p, st in ts.states.items():
            if st.value is not None and p in a.partitions:
                v = st.value
                self.states[(topic, p)] = PartitionStateZ(
                    v.leader, v.leader_epoch, list(v.isr), v.controller_epoch, st.stat.version
                )
        self._watch_topic(topic)

    def _watch_topic(self, topic: str) -> None:
        from kazoo.recipe.watchers import DataWatch

        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def changed(data, stat, event=None, topic=topic):
            if stat is None:
                self._watched_topics.discard(topic)
                return False
            self._put(("call", "_on_partition_modification", (topic,), cf.Future()))
            return not self._stopping

        DataWatch(self.zk.kazoo, paths.topic(topic), changed)

    def _on_failover(self) -> None:
        self.live = self._load_brokers()
        self.assignments.clear()
        self.states.clear()
        self.topic_ids.clear()
        self.deleting.clear()  # restarted from /admin/delete_topics below
        for topic in self.zk.topics():
            self._load_topic(topic)
        for bid in self.live:
            self._add_sender(bid)
        # stale ISR notifications are consumed by the failover itself, and so are log dir
        # events: every replica gets a LeaderAndIsr below, whose answers say which are offline
        self.offline_dir_replicas.clear()
        for root in (paths.ISR_CHANGE_NOTIFICATION, paths.LOG_DIR_EVENT_NOTIFICATION):
            for child in self.zk.children_or_empty(root):
                with contextlib.suppress(ZkError):
                    self.zk.delete(paths.join(root, child))
        batch = _Batch(self)
        batch.metadata_to(list(self.live), [])  # brokers and controller id before any LeaderAndIsr
        for tp, st in self.states.items():
            replicas = self.assignments[tp[0]][tp[1]]
            batch.leader_and_isr([r for r in replicas if self.online(r)], tp, st, replicas)
        batch.send()
        # ReplicaStateMachine.startup: replicas on brokers that are not live go offline (out of
        # the ISR, a new leader where they led) -- a controller that died with them never did it
        offline = {r for st in self.states.values() for r in st.isr if r not in self.live}
        if offline:
            self._on_brokers_failed(frozenset(offline))
        self._elect_partitions(self._partitions_needing_leader())
        self._on_delete_topics()
        self._on_preferred()
        self._on_reassign_znode()
        for tp in list(self.reassigning):
            self._maybe_complete_reassignment(tp)
        if self.config.bool("auto.leader.rebalance.enable"):
            self._schedule_rebalance(5.0)  # Kafka's first check comes 5 s after the failover
        log.info(
            "controller %d: failover done: %d brokers, %d topics, %d partitions",
            self.broker_id,
            len(self.live),
            len(self.assignments),
            len(self.states),
        )

    def _add_sender(self, bid: int) -> None:
        if bid in self.senders:
            return
        reg = self.live[bid][1]
        ep = next((e for e in reg.endpoints if e.listener == self.listener), None) or (
            reg.endpoints[0] if reg.endpoints else None
        )
        if ep is None:
            log.warning("controller: broker %d registered no endpoint", bid)
            return
        s = _Sender(self, bid, ep.host or "127.0.0.1", ep.port)
        self.senders[bid] = s
        s.start()

    def _remove_sender(self, bid: int) -> None:
        s = self.senders.pop(bid, None)
        if s is not None:
            s.stop()

    # ------------------------------------------------------------------ elections
    def _partitions_needing_leader(self) -> list[TP]:
        out = []
        for topic, parts in self.assignments.items():
            if topic in self.deleting:
                continue
            for p in parts:
                st = self.states.get((topic, p))
                if st is None or not self.replica_online(st.leader, (topic, p)):
                    out.append((topic, p))
        return out

    def _unclean_allowed(self, topic: str) -> bool:
        cfg = self.zk.entity_config("topics", topic)
        value = None
        if cfg is not None and cfg.config is not None:
            value = cfg.config.config.get("unclean.leader.election.enable")
        if value is None:
            return self.config.bool("unclean.leader.election.enable")
        return str(value).strip().lower() == "true"

    def _elect_partitions(self, tps: list[TP], *, dead: frozenset[int] = frozenset()) -> None:
        """New -> Online and Offline -> Online (PartitionStateMachine, OfflinePartitionLeaderElection)."""
        batch = _Batch(self)
        for tp in tps:
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if not replicas:
                continue
            st = self.states.get(tp)
            if st is None:
                live = [r for r in replicas if self.online(r)]
                if not live:
                    continue  # stays New until a replica's broker starts
                new = self._write_state(tp, live[0], 0, live)
                batch.leader_and_isr(live, tp, new, replicas, is_new=True)
                continue
            if self.replica_online(st.leader, tp):
                continue
            isr_live = [r for r in st.isr if self.replica_online(r, tp)]
            leader = next((r for r in replicas if r in isr_live), None)
            isr = isr_live
            if leader is None and self._unclean_allowed(tp[0]):
                leader = next((r for r in replicas if self.replica_online(r, tp)), None)
                isr = [leader] if leader is not None else []
                if leader is not None:
                    log.warning("controller: unclean election of %s-%d: leader %d", tp[0], tp[1], leader)
            if leader is None:
                # no eligible leader: leader -1; the ISR keeps its last member ("last replica standing")
                remaining = [r for r in st.isr if r not in dead and self.replica_online(r, tp)]
                isr = remaining or ([st.leader] if st.leader in st.isr else st.isr[:1])
                if st.leader == NO_LEADER and isr == st.isr:
                    continue
                new = self._write_state(tp, NO_LEADER, st.leader_epoch + 1, isr)
            else:
                new = self._write_state(tp, leader, st.leader_epoch + 1, isr)
            batch.leader_and_isr([r for r in replicas if self.replica_online(r, tp)], tp, new, replicas)
        batch.send()

    # ------------------------------------------------------------------ watch events
    def _on_brokers(self) -> None:
        current = self._load_brokers()
        old = self.live
        dead = {b for b in old if b not in current or current[b][0] != old[b][0]}
        new = {b for b in current if b not in old or current[b][0] != old[b][0]}
        if not dead and not new:
            return
        log.info(
            "controller %d: brokers changed: new %s, failed %s, live %s",
            self.broker_id,
            sorted(new),
            sorted(dead),
            sorted(current),
        )
        if dead:
            for b in dead:
                self.live.pop(b, None)
                self.shutting_down.discard(b)
                self.offline_dir_replicas.pop(b, None)  # a restart brings its dirs back
                self._remove_sender(b)
            self._on_brokers_failed(frozenset(dead))
        if new:
            for b in new:
                self.live[b] = current[b]
                self.offline_dir_replicas.pop(b, None)  # onBrokerStartup: replicasOnOfflineDirs --= new
                self._add_sender(b)
            self._on_brokers_started(sorted(new))

    def _on_brokers_failed(self, dead: frozenset[int]) -> None:
        """onReplicasBecomeOffline: elect where the leader died; drop the dead from ISRs."""
        leaderless = []
        batch = _Batch(self)
        for tp, st in list(self.states.items()):
            if tp[0] in self.deleting:
                continue
            replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
            if st.leader in dead or (st.leader == NO_LEADER and any(r in dead for r in st.isr)):
                leaderless.append(tp)
            elif any(r in dead for r in st.isr):
                isr = [r for r in st.isr if r not in dead]
                new = self._write_state(tp, st.leader, st.leader_epoch + 1, isr)
                batch.leader_and_isr([r for r in replicas if self.online(r)], tp, new, replicas)
        batch.send()
        self._elect_partitions(leaderless, dead=dead)
        # brokers learn who is gone even when no partition changed
        _Batch(self).metadata_to(list(self.live), []).send()

    def _on_brokers_started(self, new: list[int]) -> None:
        batch = _Batch(self)
        others = [b for b in self.live if b not in new]
        batch.metadata_to(others, [])
        batch.metadata_to(new, [tp for tp, st in self.states.items() if tp[0] not in self.deleting])
        for tp, st in self.states.items():
            replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
            here = [b for b in new if b in replicas]
            if here and tp[0] not in self.deleting:
                batch.leader_and_isr(here, tp, st, replicas)
        batch.send()
        self._elect_partitions(self._partitions_needing_leader())
        for topic in list(self.deleting):
            if any(b in new for b, _ in self.deleting[topic]):
                self._resume_deletion(topic)  # TopicDeletionManager.resumeDeletionForTopics

    def _on_topics(self) -> None:
        names = set(self.zk.topics())
        for gone in [t for t in self.assignments if t not in names]:
            self._forget_topic(gone)
        added = sorted(names - set(self.assignments))
        for t in added:
            self._load_topic(t)
        if added:
            log.info("controller %d: new topics %s", self.broker_id, added)
            self._elect_partitions([(t, p) for t in added for p in self.assignments.get(t, {})])

    def _on_partition_modification(self, topic: str) -> None:
        if not self.active or topic not in self.assignments:
            return
        typed = self.zk.topic_assignment(topic)
        if typed is None or typed.value is None:
            return
        added = [p for p in typed.value.partitions if p not in self.assignments[topic]]
        self.assignments[topic] = dict(typed.value.partitions)
        if added:
            log.info("controller %d: %s gained partitions %s", self.broker_id, topic, added)
            self._elect_partitions([(topic, p) for p in added])

    def _forget_topic(self, topic: str) -> None:
        parts = self.assignments.pop(topic, {})
        for p in parts:
            self.states.pop((topic, p), None)
            self.reassigning.pop((topic, p), None)
        self.topic_ids.pop(topic, None)
        self.deleting.pop(topic, None)

    def _on_isr_change(self) -> None:
        """Older brokers' ISR notifications: re-read the states and tell every broker."""
        kids = self.zk.children_or_empty(paths.ISR_CHANGE_NOTIFICATION)
        if not kids:
            return
        tps = set()
        for child in kids:
            path = paths.join(paths.ISR_CHANGE_NOTIFICATION, child)
            node = self.zk.get_or_none(path)
            if node is not None:
                with contextlib.suppress(Exception):
                    tps.update(
                        (tp.topic, tp.partition)
                        for tp in codecs.decode_partition_list(node.data, path).partitions
                    )
            with contextlib.suppress(ZkError):
                self.zk.delete(path)
        for t in {t for t, _ in tps}:
            self._load_topic(t)
        _Batch(self).metadata_to(list(self.live), sorted(tps)).send()

    # ------------------------------------------------------------------ failed log dirs
    def _on_log_dir_event(self) -> None:
        """LogDirEventNotificationHandler (processLogDirEventNotification): the brokers named
        by the notifications get a LeaderAndIsr for every replica they host
        (onBrokerLogDirFailure: OnlineReplica); the ones answered KAFKA_STORAGE_ERROR go
        offline (:meth:`_on_lair_response`).  The notifications are deleted either way."""
        kids = self.zk.children_or_empty(paths.LOG_DIR_EVENT_NOTIFICATION)
        if not kids:
            return
        brokers = set()
        for child in sorted(kids):
            path = paths.join(paths.LOG_DIR_EVENT_NOTIFICATION, child)
            node = self.zk.get_or_none(path)
            if node is not None:
                try:
                    brokers.add(codecs.decode_log_dir_event(node.data).broker)
                except codecs.ZkPayloadError as exc:
                    log.warning("controller: %s: %s", path, exc)
            with contextlib.suppress(ZkError):
                self.zk.delete(path)
        log.info(
            "controller %d: handling log directory failure for brokers %s", self.broker_id, sorted(brokers)
        )
        batch = _Batch(self)
        for b in sorted(brokers):
            if b not in self.live:
                continue
            for tp, st in self.states.items():
                replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
                if b in replicas and tp[0] not in self.deleting:
                    batch.leader_and_isr([b], tp, st, replicas)
        batch.send()

    def _on_lair_response(self, broker_id: int, resp) -> None:
        """KafkaController.processLeaderAndIsrResponseReceived: the replicas a broker answered
        KAFKA_STORAGE_ERROR for are on an offline dir, the ones answered NONE are not; new
        offline replicas go offline (onReplicasBecomeOffline)."""
        if broker_id not in self.live or resp is None or resp.error_code:
            return
        offline, online = set(), set()
        for pe in resp.partition_errors:
            tp = (pe.topic_name, pe.partition_index)
            if pe.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add(tp)
            elif pe.error_code == ErrorCode.NONE:
                online.add(tp)
        before = self.offline_dir_replicas.get(broker_id, set())
        now = (before - online) | offline
        self.offline_dir_replicas[broker_id] = now
        new = sorted(now - before)
        if new:
            log.info(
                "controller %d: mark replicas %s on broker %d as offline",
                self.broker_id,
                ",".join(f"{t}-{p}" for t, p in new),
                broker_id,
            )
            self._on_replicas_offline(broker_id, new)

    def _on_replicas_offline(self, broker_id: int, tps: list[TP]) -> None:
        """onReplicasBecomeOffline for one broker's replicas on a failed dir: the partitions it
        led elect a new leader from the rest of the ISR (OfflinePartitionLeaderElection); the
        others drop it from the ISR (OfflineReplica: leader epoch + 1, LeaderAndIsr to the
        other replicas); the broker gets StopReplica (no delete) and every broker the new
        metadata, with the replica among the partition's offline replicas."""
        leaderless = []
        batch = _Batch(self)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            st = self.states.get(tp)
            if st is None or tp[0] in self.deleting:
                continue
            by_topic.setdefault(tp[0], []).append(tp[1])
            replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
            if st.leader == broker_id:
                leaderless.append(tp)
            elif broker_id in st.isr:
                isr = [r for r in st.isr if r != broker_id]
                new = self._write_state(tp, st.leader, st.leader_epoch + 1, isr)
                batch.leader_and_isr([r for r in replicas if self.replica_online(r, tp)], tp, new, replicas)
            else:
                batch.metadata_to(list(self.live), [tp])
        for topic, parts in by_topic.items():
            batch.stop_replica(broker_id, topic, sorted(parts), delete=False)
        batch.send()
        self._elect_partitions(leaderless, dead=frozenset({broker_id}))

    def _on_delete_topics(self) -> None:
        """TopicDeletionManager: UpdateMetadata with leader -2, StopReplica(delete) to every
        replica; the znodes go (epoch-checked) once every replica is deleted.  A replica on an
        offline broker halts the deletion until that broker is back."""
        kids = self.zk.children_or_empty(paths.DELETE_TOPICS)
        for topic in kids:
            marker = paths.delete_topic(topic)
            if not self.config.bool("delete.topic.enable"):
                with contextlib.suppress(ZkError):
                    self._fenced([("delete", marker)])
                continue
            if topic not in self.assignments:
                with contextlib.suppress(ZkError):
                    self._fenced([("delete", marker)])
                continue
            if topic in self.deleting:
                continue  # in progress
            parts = self.assignments[topic]
            self.deleting[topic] = {(b, p) for p, replicas in parts.items() for b in replicas}
            _Batch(self).metadata_to(list(self.live), [(topic, p) for p in parts], deleting=True).send()
            self._resume_deletion(topic)

    def _resume_deletion(self, topic: str) -> None:
        """StopReplica(delete) for the topic's replicas not yet deleted on live brokers."""
        pending = self.deleting.get(topic)
        if pending is None:
            return
        if not pending:
            self._complete_deletion(topic)
            return
        offline = sorted({b for b, _ in pending if not self.online(b)})
        if offline:
            log.info(
                "controller %d: deletion of topic %s waits for brokers %s (offline) to delete their replicas",
                self.broker_id,
                topic,
                offline,
            )
        batch = _Batch(self)
        by_broker: dict[int, list[int]] = {}
        for b, p in pending:
            if self.online(b):
                by_broker.setdefault(b, []).append(p)
        for b, ps in by_broker.items():
            fut = batch.stop_replica(b, topic, sorted(ps), delete=True)
            fut.add_done_callback(
                lambda f, b=b: self._put(("call", "_replicas_deleted", (topic, b, f), cf.Future()))
            )
        batch.send()

    def _replicas_deleted(self, topic: str, broker_id: int, fut: cf.Future) -> None:
        """A StopReplica(delete) answer: its replicas are deleted (ReplicaDeletionSuccessful), or
        stay pending (retried when the broker is back, or on the next controller)."""
        pending = self.deleting.get(topic)
        if pending is None or not self.active or fut.exception() is not None:
            return
        resp = fut.result()
        if resp.error_code:
            log.info(
                "controller %d: broker %d did not delete %s: %s",
                self.broker_id,
                broker_id,
                topic,
                ErrorCode(resp.error_code).name,
            )
            return
        failed = {
            pe.partition_index for pe in resp.partition_errors if pe.topic_name == topic and pe.error_code
        }
        for b, p in list(pending):
            if b == broker_id and p not in failed:
                pending.discard((b, p))
        if not pending:
            self._complete_deletion(topic)

    def _complete_deletion(self, topic: str) -> None:
        with contextlib.suppress(ZkError):
            self.zk.delete(paths.topic(topic), recursive=True)
        with contextlib.suppress(ZkError):
            self.zk.delete(paths.config_entity("topics", topic))
        with contextlib.suppress(ZkError):
            self._fenced([("delete", paths.delete_topic(topic))])
        self._forget_topic(topic)
        log.info("controller %d: deleted topic %s", self.broker_id, topic)

    def _on_preferred(self) -> None:
        node = self.zk.get_or_none(paths.PREFERRED_REPLICA_ELECTION)
        if node is None:
            return
        try:
            tps = [
                (tp.topic, tp.partition)
                for tp in codecs.decode_partition_list(node.data, "election").partitions
            ]
        except Exception:
            tps = []
        self.elect_preferred(tps or list(self.states))
        with contextlib.suppress(ZkError):
            self._fenced([("delete", paths.PREFERRED_REPLICA_ELECTION)])

    # ------------------------------------------------------------------ requests from brokers
    def elect_preferred(self, tps: list[TP]) -> dict[TP, int]:
        """PreferredReplicaPartitionLeaderElection: the assignment head leads if online and in the ISR."""
        out = {}
        batch = _Batch(self)
        for tp in tps:
            st = self.states.get(tp)
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if st is None or not replicas:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            head = replicas[0]
            if st.leader == head:
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED
                continue
            if not (self.replica_online(head, tp) and head in st.isr):
                out[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                continue
            new = self._write_state(tp, head, st.leader_epoch + 1, st.isr)
            batch.leader_and_isr([r for r in replicas if self.replica_online(r, tp)], tp, new, replicas)
            out[tp] = ErrorCode.NONE
        batch.send()
        return out

    def elect_unclean(self, tps: list[TP]) -> dict[TP, int]:
        """An admin UNCLEAN election: only partitions without a live leader, from any live replica."""
        out = {}
        batch = _Batch(self)
        for tp in tps:
            st = self.states.get(tp)
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if st is None or not replicas:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if self.replica_online(st.leader, tp):
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED
                continue
            leader = next((r for r in replicas if r in st.isr and self.replica_online(r, tp)), None)
            isr = [r for r in st.isr if self.replica_online(r, tp)]
            if leader is None:
                leader = next((r for r in replicas if self.replica_online(r, tp)), None)
                isr = [leader]
            if leader is None:
                out[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            new = self._write_state(tp, leader, st.leader_epoch + 1, isr)
            batch.leader_and_isr([r for r in replicas if self.replica_online(r, tp)], tp, new, replicas)
            out[tp] = ErrorCode.NONE
        batch.send()
        return out

    def alter_partition(self, broker_id: int, broker_epoch: int, items: list[tuple]) -> tuple[int, list]:
        """AlterPartition (KafkaController.tryProcessAlterPartition): items are
        (topic, partition, leader_epoch, new_isr, partition_epoch); answers per item
        (topic, partition, error, PartitionStateZ | None)."""
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        known = self.live.get(broker_id)
        if known is None or (broker_epoch >= 0 and broker_epoch != known[0]):
            return ErrorCode.STALE_BROKER_EPOCH, []
        out = []
        changed = []
        for topic, p, leader_epoch, new_isr, partition_epoch in items:
            tp = (topic, p)
            st = self.states.get(tp)
            if st is None or topic in self.deleting:
                out.append((topic, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
                continue
            if leader_epoch > st.leader_epoch or partition_epoch > st.zk_version:
                out.append((topic, p, ErrorCode.NOT_CONTROLLER, None))
                continue
            if leader_epoch < st.leader_epoch or st.leader != broker_id:
                out.append((topic, p, ErrorCode.FENCED_LEADER_EPOCH, None))
                continue
            if sorted(new_isr) == sorted(st.isr) and partition_epoch == st.zk_version:
                out.append((topic, p, ErrorCode.NONE, st))
                continue
            if partition_epoch < st.zk_version:
                out.append((topic, p, ErrorCode.INVALID_UPDATE_VERSION, None))
                continue
            if any(not self.online(r) for r in new_isr) or broker_id not in new_isr:
                out.append((topic, p, ErrorCode.INELIGIBLE_REPLICA, None))
                continue
            try:
                new = self._write_state(tp, st.leader, st.leader_epoch, list(new_isr))
            except ZkBadVersionError:
                out.append((topic, p, ErrorCode.INVALID_UPDATE_VERSION, None))
                continue
            changed.append(tp)
            out.append((topic, p, ErrorCode.NONE, new))
            log.info(
                "controller %d: ISR of %s-%d is now %s (partition epoch %d)",
                self.broker_id,
                topic,
                p,
                new.isr,
                new.zk_version,
            )
        if changed:
            _Batch(self).metadata_to(list(self.live), changed).send()
            for tp in changed:
                self._maybe_complete_reassignment(tp)
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ reassignment (KIP-455)
    def _on_reassign_znode(self) -> None:
        """/admin/reassign_partitions (kafka-reassign-partitions --zookeeper, kafkatool reassign)."""
        typed = self.zk.reassign_partitions()
        if typed is None or typed.value is None:
            return
        wanted = {(e.topic, e.partition): list(e.replicas) for e in typed.value.partitions}
        for tp, target in wanted.items():
            if tp in self._znode_reassignments:
                continue
            code = self.reassign(tp, target)
            if code == ErrorCode.NONE:
                self._znode_reassignments.add(tp)
            else:
                log.warning(
                    "controller %d: reassignment of %s-%d to %s refused: %s",
                    self.broker_id,
                    tp[0],
                    tp[1],
                    target,
                    ErrorCode(code).name,
                )
        self._maybe_delete_reassign_znode()

    def _maybe_delete_reassign_znode(self) -> None:
        if self._znode_reassignments and not any(tp in self.reassigning for tp in self._znode_reassignments):
            with contextlib.suppress(ZkError):
                self._fenced([("delete", paths.REASSIGN_PARTITIONS)])
            log.info("controller %d: reassignments of %s done", self.broker_id, paths.REASSIGN_PARTITIONS)
            self._znode_reassignments.clear()
        elif not self._znode_reassignments and self.zk.exists(paths.REASSIGN_PARTITIONS) is not None:
            # every entry was refused or already in place
            with contextlib.suppress(ZkError):
                self._fenced([("delete", paths.REASSIGN_PARTITIONS)])

    def reassign(self, tp: TP, target: list[int] | None) -> int:
        """Start, replace or cancel (``target`` None) the reassignment of one partition
        (KafkaController.onPartitionReassignment, phase A: RS = TRS ++ (ORS - TRS) is written to
        the topic znode first, the leader epoch is bumped, and the adding replicas start
        fetching; phase B follows once TRS is in the ISR)."""
        current = self.assignments.get(tp[0], {}).get(tp[1])
        st = self.states.get(tp)
        if current is None or st is None or tp[0] in self.deleting:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ongoing = self.reassigning.get(tp)
        origin = list(ongoing[0]) if ongoing is not None else list(current)
        if target is None:
            if ongoing is None:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            target = origin  # cancel: back to the original replicas
        if not target or len(set(target)) != len(target) or any(b < 0 for b in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if any(b not in self.live for b in target if b not in current):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if ongoing is None and target == current:
            return ErrorCode.NONE
        rs = list(target) + [r for r in origin if r not in target]
        dropped = [r for r in current if r not in rs]  # a replaced reassignment's extra replicas
        self.reassigning[tp] = (origin, list(target))
        self._write_assignment(tp[0], {tp[1]: rs})
        isr = [r for r in st.isr if r in rs] or st.isr
        new = self._write_state(tp, st.leader, st.leader_epoch + 1, isr)
        batch = _Batch(self)
        adding = [r for r in target if r not in origin]
        online = [r for r in rs if self.online(r)]
        batch.leader_and_isr([r for r in online if r not in adding], tp, new, rs)
        batch.leader_and_isr([r for r in online if r in adding], tp, new, rs, is_new=True)
        for b in dropped:
            if b in self.live:
                batch.stop_replica(b, tp[0], [tp[1]], delete=True)
        batch.send()
        log.info(
            "controller %d: reassigning %s-%d from %s to %s (adding %s)",
            self.broker_id,
            tp[0],
            tp[1],
            origin,
            target,
            adding,
        )
        self._maybe_complete_reassignment(tp)
        return ErrorCode.NONE

    def _maybe_complete_reassignment(self, tp: TP) -> None:
        """Phase B, once every target replica is in the ISR: a Reassign election if the leader
        is not a target (or is dead), else an epoch bump; the removed replicas leave the ISR and
        delete their logs; RS = TRS is written last."""
        ongoing = self.reassigning.get(tp)
        st = self.states.get(tp)
        if ongoing is None or st is None:
            return
        origin, target = ongoing
        if not set(target) <= set(st.isr):
            return
        leader = st.leader
        if leader not in target or not self.online(leader):
            leader = next((r for r in target if r in st.isr and self.online(r)), None)
            if leader is None:
                return
        removing = [r for r in self.assignments[tp[0]][tp[1]] if r not in target]
        isr = [r for r in st.isr if r in target]
        new = self._write_state(tp, leader, st.leader_epoch + 1, isr)
        del self.reassigning[tp]
        self._write_assignment(tp[0], {tp[1]: list(target)})
        batch = _Batch(self)
        batch.leader_and_isr([r for r in target if self.online(r)], tp, new, list(target))
        for b in removing:
            if b in self.live:
                batch.stop_replica(b, tp[0], [tp[1]], delete=True)
        batch.metadata_to(list(self.live), [tp])
        batch.send()
        log.info(
            "controller %d: reassignment of %s-%d to %s complete (leader %d, epoch %d)",
            self.broker_id,
            tp[0],
            tp[1],
            target,
            leader,
            new.leader_epoch,
        )
        self._maybe_delete_reassign_znode()

    def list_reassignments(self, tps: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: tp -> (replicas, adding, removing)."""
        out = {}
        for tp, (origin, target) in self.reassigning.items():
            if tps is not None and tp not in tps:
                continue
            rs = self.assignments.get(tp[0], {}).get(tp[1], [])
            out[tp] = (
                list(rs),
                [r for r in target if r not in origin],
                [r for r in origin if r not in target],
            )
        return out

    def alter_reassignments(self, items: list[tuple[TP, list[int] | None]]) -> dict[TP, int]:
        return {tp: self.reassign(tp, target) for tp, target in items}

    def _write_assignment(self, topic: str, changed: dict[int, list[int]]) -> None:
        """The topic znode with RS and the adding/removing sets of every partition being
        reassigned (written first, so a controller failover resumes the move)."""
        parts = dict(self.assignments[topic])
        parts.update(changed)
        adding, removing = {}, {}
        for p in parts:
            ongoing = self.reassigning.get((topic, p))
            if ongoing is None:
                continue
            origin, target = ongoing
            adding[p] = [r for r in target if r not in origin]
            removing[p] = [r for r in origin if r not in target]
        node = self.zk.get(paths.topic(topic))
        data = codecs.encode_topic(
            parts, adding=adding, removing=removing, topic_id=self.topic_ids.get(topic)
        )
        self._fenced([("set", paths.topic(topic), data, node.stat.version)])
        self.assignments[topic] = parts

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TP]]:
        """KafkaController.doControlledShutdown: move leadership away, leave the ISRs; answer the
        partitions the broker still leads."""
        if not self.active:
            return ErrorCode.STALE_CONTROLLER_EPOCH, []
        known = self.live.get(broker_id)
        if known is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch >= 0 and broker_epoch < known[0]:
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down.add(broker_id)
        batch = _Batch(self)
        for tp, st in list(self.states.items()):
            replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
            if broker_id not in replicas or len(replicas) <= 1 or tp[0] in self.deleting:
                continue
            recipients = [r for r in replicas if r in self.live]
            if st.leader == broker_id:
                leader = next((r for r in replicas if r in st.isr and self.replica_online(r, tp)), None)
                if leader is None:
                    continue
                isr = [r for r in st.isr if r != broker_id]
                new = self._write_state(tp, leader, st.leader_epoch + 1, isr)
                batch.leader_and_isr(recipients, tp, new, replicas)
            elif broker_id in st.isr and len(st.isr) > 1:
                isr = [r for r in st.isr if r != broker_id]
                new = self._write_state(tp, st.leader, st.leader_epoch + 1, isr)
                batch.leader_and_isr([r for r in recipients if r != broker_id], tp, new, replicas)
                batch.stop_replica(broker_id, tp[0], [tp[1]], delete=False)
        batch.send()
        remaining = [
            tp
            for tp, st in self.states.items()
            if st.leader == broker_id and len(self.assignments.get(tp[0], {}).get(tp[1], [])) > 1
        ]
        log.info(
            "controller %d: controlled shutdown of broker %d: %d partitions still led",
            self.broker_id,
            broker_id,
            len(remaining),
        )
        return ErrorCode.NONE, remaining


class _Batch:
    """ControllerBrokerRequestBatch: per broker LeaderAndIsr, then UpdateMetadata, then StopReplica;
    every LeaderAndIsr partition is also in the UpdateMetadata to all live brokers."""

    def __init__(self, c: Controller):
        self.c = c
        self.lair: dict[int, dict[TP, tuple]] = {}
        self.um: dict[int, dict[TP, bool]] = {}
        self.um_brokers: set[int] = set()
        self.stops: list[tuple[int, str, list[int], bool, cf.Future]] = []

    def leader_and_isr(
        self, brokers: list[int], tp: TP, st: PartitionStateZ, replicas: list[int], *, is_new: bool = False
    ):
        for b in brokers:
            if b in self.c.live:
                self.lair.setdefault(b, {})[tp] = (st, list(replicas), is_new)
        self.metadata_to(list(self.c.live), [tp])
        return self

    def metadata_to(self, brokers: list[int], tps: list[TP], *, deleting: bool = False):
        for b in brokers:
            self.um_brokers.add(b)
            d = self.um.setdefault(b, {})
            for tp in tps:
                d[tp] = deleting
        return self

    def stop_replica(self, broker_id: int, topic: str, partitions: list[int], *, delete: bool) -> cf.Future:
        fut: cf.Future = cf.Future()
        self.stops.append((broker_id, topic, partitions, delete, fut))
        return fut

    def _brokers(self) -> list[UpdateMetadataBroker]:
        out = []
        for bid, (_, reg) in sorted(self.c.live.items()):
            out.append(
                UpdateMetadataBroker(
                    id_=bid,
                    endpoints=[
                        UpdateMetadataEndpoint(
                            port=e.port,
                            host=e.host or "",
                            listener=e.listener,
                            security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                        )
                        for e in reg.endpoints
                    ],
                    rack=reg.rack,
                )
            )
        return out

    def send(self) -> None:
        c = self.c
        for bid, parts in self.lair.items():
            sender = c.senders.get(bid)
            if sender is None:
                continue
            topics: dict[str, list] = {}
            for (t, p), (st, replicas, is_new) in parts.items():
                topics.setdefault(t, []).append(
                    LeaderAndIsrPartitionState(
                        topic_name=t,
                        partition_index=p,
                        controller_epoch=st.controller_epoch,
                        leader=st.leader,
                        leader_epoch=st.leader_epoch,
                        isr=list(st.isr),
                        partition_epoch=st.zk_version,
                        replicas=replicas,
                        adding_replicas=[],
                        removing_replicas=[],
                        is_new=is_new,
                    )
                )
            leaders = {st.leader for (st, _, _) in parts.values() if st.leader >= 0}
            live_leaders = []
            for lid in sorted(leaders):
                reg = c.live.get(lid)
                if reg is None:
                    continue
                ep = next((e for e in reg[1].endpoints if e.listener == c.listener), None)
                if ep is not None:
                    from kafkatool.protocol.generated.leader_and_isr_request import LeaderAndIsrLiveLeader

                    live_leaders.append(
                        LeaderAndIsrLiveLeader(broker_id=lid, host_name=ep.host or "", port=ep.port)
                    )
            req = LeaderAndIsrRequest(
                controller_id=c.broker_id,
                controller_epoch=c.epoch,
                broker_epoch=c.live[bid][0],
                topic_states=[
                    LeaderAndIsrTopicState(
                        topic_name=t, topic_id=_wire_uuid(c.topic_ids.get(t)), partition_states=ps
                    )
                    for t, ps in topics.items()
                ],
                live_leaders=live_leaders,
            )
            done: cf.Future = cf.Future()
            # processLeaderAndIsrResponseReceived runs on the event thread
            done.add_done_callback(
                lambda f, bid=bid: f.exception() is None and c._put(("lair_response", bid, f.result()))
            )
            sender.send(4, LEADER_AND_ISR_VERSION, req, done)
        brokers = self._brokers()
        for bid in self.um_brokers:
            sender = c.senders.get(bid)
            if sender is None:
                continue
            topics = {}
            for (t, p), deleting in self.um.get(bid, {}).items():
                st = c.states.get((t, p))
                replicas = c.assignments.get(t, {}).get(p, [])
                if st is None and not deleting:
                    continue
                topics.setdefault(t, []).append(
                    UpdateMetadataPartitionState(
                        topic_name=t,
                        partition_index=p,
                        controller_epoch=st.controller_epoch if st else c.epoch,
                        leader=LEADER_DURING_DELETE if deleting else st.leader,
                        leader_epoch=st.leader_epoch if st else 0,
                        isr=list(st.isr) if st else [],
                        zk_version=st.zk_version if st else 0,
                        replicas=list(replicas),
                        offline_replicas=[
                            r
                            for r in replicas
                            if r not in c.live or (t, p) in c.offline_dir_replicas.get(r, ())
                        ],
                    )
                )
            req = UpdateMetadataRequest(
                controller_id=c.broker_id,
                controller_epoch=c.epoch,
                broker_epoch=c.live[bid][0],
                topic_states=[
                    UpdateMetadataTopicState(
                        topic_name=t, topic_id=_wire_uuid(c.topic_ids.get(t)), partition_states=ps
                    )
                    for t, ps in topics.items()
                ],
                live_brokers=brokers,
            )
            sender.send(6, UPDATE_METADATA_VERSION, req)
        for bid, topic, partitions, delete, fut in self.stops:
            sender = c.senders.get(bid)
            if sender is None:
                fut.set_result(None)
                continue
            req = StopReplicaRequest(
                controller_id=c.broker_id,
                controller_epoch=c.epoch,
                broker_epoch=c.live[bid][0] if bid in c.live else -1,
                topic_states=[
                    StopReplicaTopicState(
                        topic_name=topic,
                        partition_states=[
                            StopReplicaPartitionState(
                                partition_index=p, leader_epoch=-2 if delete else -1, delete_partition=delete
                            )
                            for p in partitions
                        ],
                    )
                ],
            )
            sender.send(5, STOP_REPLICA_VERSION, req, fut)
