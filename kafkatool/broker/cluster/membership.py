"""A broker in a ZooKeeper-mode cluster: the session, the cluster id, the registration, and
the admin writes every broker makes (KafkaServer.startup, KafkaZkClient, AdminZkClient).

Start-up order is Kafka's: ZooKeeper session -> ``/cluster/id`` (a log dir whose
meta.properties names another cluster is refused) -> persistent paths -> the dynamic broker
configs of ``/config/brokers`` (before the logs open) -> listeners ->
``/brokers/ids/N`` (ephemeral; its czxid is the broker epoch) -> the controller
election.  A session that expires re-registers (a new broker epoch) and re-elects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time

from kafkatool.broker.cluster.controller import Controller
from kafkatool.broker.cluster.replica import ReplicaManager
from kafkatool.errors import KafkatoolError
from kafkatool.zk import codecs, paths
from kafkatool.zk.client import KafkaZk, ZkError, ZkNodeExistsError, ZkNoNodeError

log = logging.getLogger("kafkatool.cluster")

#: ZkProducerIdManager.PidBlockSize
PRODUCER_ID_BLOCK_SIZE = 1000
#: features a 3.x ZK-mode broker registers (v5 JSON); none are finalized in ZK mode
BROKER_FEATURES: dict[str, dict[str, int]] = {}


class ClusterError(KafkatoolError):
    """The broker cannot join the cluster (one line for the operator)."""


class Cluster:
    def __init__(self, broker):
        self.broker = broker
        self.config = broker.config
        self.node_id = broker.node_id
        connect = self.config.get("zookeeper.connect")
        session_ms = self.config.int("zookeeper.session.timeout.ms")
        conn_ms = self.config.get("zookeeper.connection.timeout.ms")
        self.session_timeout = session_ms / 1000.0
        self.connection_timeout = int(conn_ms) / 1000.0 if conn_ms else self.session_timeout
        self.zk = KafkaZk(
            connect,
            timeout=self.connection_timeout,
            security=_zk_security(self.config),
            session_timeout=self.session_timeout,
        )
        self.replicas = ReplicaManager(broker)
        self.controller: Controller | None = None
        self.scram = None  # ZkScramStore, once connected
        self.broker_epoch = -1
        self._registration: bytes | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._metadata_changed: asyncio.Event | None = None
        self._lost = False
        self._stopping = False
        self._pid_next: int | None = None
        self._pid_end = -1

    # ------------------------------------------------------------------ start-up
    def connect(self) -> None:
        """The session, /cluster/id, the persistent paths and the dynamic broker configs (before
        the log dirs are trusted)."""
        if self.node_id < 0 or self.config.explicit_node_id is None:
            raise ClusterError(
                "zookeeper.connect needs broker.id (or node.id) set: each broker of a cluster has its own"
            )
        try:
            if self.zk.chroot not in ("", "/"):
                # Kafka creates a missing chroot (KafkaZkClient.createChrootIfNecessary)
                with KafkaZk(
                    self.zk.hosts, timeout=self.connection_timeout, security=self.zk.security
                ) as root:
                    root.ensure_path(self.zk.chroot)
            self.zk.start()
        except ZkError as exc:
            raise ClusterError(f"zookeeper.connect {self.config.get('zookeeper.connect')}: {exc}") from None
        existing = self.zk.cluster_id()
        if existing is not None and existing.value is not None:
            cid = existing.value.id
        else:
            # KafkaZkClient.getOrCreateClusterId: a new random id, never the log dir's
            from kafkatool.broker.metadata import new_cluster_id

            cid = new_cluster_id()
            try:
                self.zk.create(paths.CLUSTER_ID, codecs.encode_cluster_id(cid), makepath=True)
                log.info("cluster id %s written to %s", cid, paths.CLUSTER_ID)
            except ZkNodeExistsError:
                cid = self.zk.cluster_id().value.id
        meta_cid = self.broker.metadata._cluster_id_from_meta_properties()
        if meta_cid is not None and meta_cid != cid:
            raise ClusterError(
                f"The Cluster ID {cid} doesn't match stored clusterId Some({meta_cid}) in meta.properties. "
                "The broker is trying to join the wrong cluster. Configured zookeeper.connect may be wrong."
            )
        self.broker.metadata.cluster_id = cid
        for p in (*paths.PERSISTENT_PATHS, *(f"{paths.CONFIG}/{t}" for t in paths.CONFIG_ENTITY_TYPES)):
            with contextlib.suppress(ZkNodeExistsError):
                self.zk.ensure_path(p)
        from kafkatool.broker.cluster.scram_store import ZkScramStore

        #: SCRAM credentials: /config/users/<user>, as Kafka keeps them in ZooKeeper mode
        self.scram = ZkScramStore(self.zk)
        from kafkatool.broker.cluster.token_store import ZkTokenStore
        from kafkatool.broker.security.tokens import secret_key

        #: delegation tokens: /delegation_token (DelegationTokenManagerZk.startup, only with a key)
        self.tokens = ZkTokenStore(self.zk, enabled=secret_key(self.config) is not None)
        # KafkaServer.startup initializes DynamicBrokerConfig from ZooKeeper before it creates
        # the LogManager: a dynamic topic default governs the logs from their load on
        self._load_broker_configs()

    def start(self) -> None:
        """After the listeners are bound: register, start replication and the controller."""
        self._loop = asyncio.get_running_loop()
        self._metadata_changed = asyncio.Event()
        self.replicas.start()
        self._register()
        self.zk.kazoo.add_listener(self._session_state)
        self.controller = Controller(
            self.node_id,
            self.zk,
            self.config,
            inter_broker_listener=self.config.inter_broker_listener.name,
            security=self.replicas.security,
        )
        self.controller.start()
        self._load_broker_configs()
        from kazoo.recipe.watchers import ChildrenWatch

        ChildrenWatch(self.zk.kazoo, paths.CONFIG_CHANGES, self._config_changes)
        self.tokens.watch()

    def _endpoints(self) -> tuple[list[str], dict[str, str]]:
        out, proto = [], {}
        for lst in self.config.advertised_listeners:
            host, port = self.broker._endpoint(lst)
            out.append(f"{lst.name}://{host}:{port}")
            proto[lst.name] = lst.security_protocol
        return out, proto

    def _register(self) -> None:
        """KafkaZkClient.registerBroker: create the ephemeral and set its data in one multi."""
        from kazoo import exceptions as ke

        endpoints, proto = self._endpoints()
        rack = self.config.get("broker.rack") or self.config.get("rack")
        data = codecs.encode_broker(
            endpoints,
            version=5,
            timestamp_ms=int(time.time() * 1000),
            rack=rack,
            protocol_map=proto,
            features=BROKER_FEATURES,
        )
        path = paths.broker(self.node_id)
        deadline = time.monotonic() + self.session_timeout * 1.5 + 5
        waited = False
        while True:
            k = self.zk.kazoo
            tx = k.transaction()
            tx.create(path, b"", ephemeral=True)
            tx.set_data(path, data, version=0)
            try:
                results = tx.commit()
            except ke.KazooException as exc:
                raise ClusterError(f"cannot register {path}: {type(exc).__name__}") from None
            if not isinstance(results[0], Exception):
                break
            stat = k.exists(path)
            if stat is not None and stat.ephemeralOwner == k.client_id[0]:
                break  # ours already (a retried create after a connection loss)
            if stat is None:
                continue
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"broker id {self.node_id} is already registered at {path} by another session "
                    f"(0x{stat.ephemeralOwner:x}): is another broker running with broker.id={self.node_id}?"
                )
            if not waited:
                log.info(
                    "%s is held by an earlier session (0x%x); waiting up to %.0f s for it to expire",
                    path,
                    stat.ephemeralOwner,
                    self.session_timeout * 1.5,
                )
                waited = True
            time.sleep(0.5)
        stat = self.zk.kazoo.exists(path)
        self.broker_epoch = stat.czxid
        self.replicas.broker_epoch = stat.czxid
        log.info("registered %s: endpoints %s, broker epoch %d", path, endpoints, stat.czxid)

    def _session_state(self, state) -> None:
        from kazoo.client import KazooState

        if self._stopping:
            return
        if state == KazooState.LOST:
            self._lost = True
            log.warning("ZooKeeper session expired: re-registering when reconnected")
        elif state == KazooState.CONNECTED and self._lost and not self._stopping:
            self._lost = False
            threading.Thread(target=self._reregister, name="zk-reregister", daemon=True).start()

    def _reregister(self) -> None:
        try:
            self._register()
        except Exception as exc:  # noqa: BLE001 (one line; the next state change retries)
            log.error("re-registration failed: %s", exc)
            return
        if self.controller is not None:
            self.controller.session_renewed()

    # ------------------------------------------------------------------ shutdown
    async def shutdown(self) -> None:
        self._stopping = True
        if self.config.bool("controlled.shutdown.enable") and self.broker_epoch >= 0:
            try:
                await asyncio.wait_for(self.replicas.controlled_shutdown(), 60)
            except TimeoutError:
                log.warning("controlled shutdown timed out")
        await self.replicas.stop()
        if self.controller is not None:
            await asyncio.to_thread(self.controller.stop)
        await asyncio.to_thread(self.zk.close)

    # ------------------------------------------------------------------ what handlers ask
    def is_controller(self) -> bool:
        return self.controller is not None and self.controller.active

    def metadata_updated(self) -> None:
        if self._metadata_changed is not None:
            self._metadata_changed.set()
            self._metadata_changed = asyncio.Event()

    async def await_metadata(self, done, timeout_ms: int) -> bool:
        """Wait until ``done()`` holds for this broker's metadata cache (re-checked at every
        UpdateMetadata): Kafka's DelayedCreatePartitions / DelayedDeleteTopics."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        while not done():
            left = deadline - loop.time()
            if left <= 0 or self._metadata_changed is None:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._metadata_changed.wait(), min(left, 0.5))
        return True

    def topic_configs(self, topic: str) -> dict[str, str]:
        try:
            ent = self.zk.entity_config("topics", topic)
        except ZkError as exc:
            log.warning("cannot read the configs of %s: %s", topic, exc)
            return {}
        if ent is None or ent.config is None:
            return {}
        return dict(ent.config.config)

    def live_brokers(self) -> list:
        from kafkatool.assign.model import Broker as PlacementBroker

        return [
            PlacementBroker(b.broker_id, b.rack)
            for b in sorted(self.replicas.live_brokers.values(), key=lambda b: b.broker_id)
        ]

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ):
        """AdminZkClient.createTopicWithAssignment: /config/topics/T, then /brokers/topics/T (v3
        with a topic id); the controller's TopicChange watch does the rest."""
        from kafkatool.assign import kafka_placement
        from kafkatool.broker.metadata import TopicMeta
        from kafkatool.formats.uuid import random_uuid

        if assignment is None:
            brokers = self.live_brokers()
            assignment = kafka_placement.assign_replicas(
                brokers,
                partitions,
                replication_factor,
                rng=kafka_placement.JavaRandom(int.from_bytes(os.urandom(6), "big")),
            )
        if self.zk.exists(paths.topic(name)) is not None:
            # AdminZkClient.validateTopicCreate's TopicExistsException, before anything is written:
            # a topic this broker does not know yet (its UpdateMetadata is still to come) keeps
            # its configs when a client's Metadata would auto-create it or CreateTopics names it
            raise ZkNodeExistsError(paths.topic(name))
        topic_id = random_uuid(os.urandom)
        # the whole config first (a stale one of a deleted topic is replaced), then the topic
        self.write_topic_configs(name, configs, notify=False)
        self.zk.create(paths.topic(name), codecs.encode_topic(assignment, topic_id=str(topic_id)))
        log.info(
            "topic created in ZooKeeper topic=%s partitions=%d replication_factor=%d topic_id=%s",
            name,
            partitions,
            replication_factor,
            topic_id,
        )
        return TopicMeta(name, topic_id, partitions, dict(configs))

    def allocate_producer_id(self) -> int:
        """The next id of this broker's block; a new block of 1000 from
        /latest_producer_id_block (ZkProducerIdManager: a conditional update, retried)."""
        if self._pid_next is None or self._pid_next > self._pid_end:
            self._pid_next, self._pid_end = self._new_producer_id_block()
        pid = self._pid_next
        self._pid_next += 1
        return pid

    def _new_producer_id_block(self) -> tuple[int, int]:
        from kafkatool.zk.client import ZkBadVersionError

        for _ in range(50):
            node = self.zk.get_or_none(paths.LATEST_PRODUCER_ID_BLOCK)
            block = codecs.decode_producer_id_block(node.data) if node is not None else None
            start = block.block_end + 1 if block is not None else 0
            end = start + PRODUCER_ID_BLOCK_SIZE - 1
            data = codecs.encode_producer_id_block(self.node_id, start, end)
            try:
                if node is None:
                    self.zk.create(paths.LATEST_PRODUCER_ID_BLOCK, data)
                else:
                    self.zk.set(paths.LATEST_PRODUCER_ID_BLOCK, data, version=node.stat.version)
            except (ZkBadVersionError, ZkNodeExistsError):
                continue
            log.info("producer id block [%d, %d] taken", start, end)
            return start, end
        raise ClusterError("could not take a producer id block: /latest_producer_id_block kept changing")

    # ------------------------------------------------------------------ configs in ZooKeeper
    def write_topic_configs(self, name: str, configs: dict[str, str], *, notify: bool = True) -> None:
        """AdminZkClient.changeTopicConfig: the whole config, then (unless the topic is being
        created) a change notification."""
        self.zk.change_entity_config(
            "topics",
            name,
            set_keys=configs,
            delete_keys=self._stale_keys("topics", name, configs),
            notify=notify,
        )

    def _stale_keys(self, entity_type: str, name: str, configs: dict[str, str]) -> list[str]:
        ent = self.zk.entity_config(entity_type, name)
        current = ent.config.config if ent is not None and ent.config is not None else {}
        return [k for k in current if k not in configs]

    def alter_broker_configs(self, name: str, changes: dict[str, str | None]) -> None:
        """/config/brokers/<id> or /config/brokers/<default>, with a change notification."""
        entity = name or paths.DEFAULT_ENTITY
        self.zk.change_entity_config(
            "brokers",
            entity,
            set_keys={k: v for k, v in changes.items() if v is not None},
            delete_keys=[k for k, v in changes.items() if v is None],
        )

    def _load_broker_configs(self, entity: str | None = None) -> None:
        """Dynamic broker configs (DynamicBrokerConfig): the cluster-wide default and this broker's
        own, each its own layer (the configs this broker applies at runtime), taken by the one
        rule (BrokerConfig.take_dynamic); the logs follow a change of the topic defaults. Called
        before the logs open (connect), after registering (both layers), and at a change
        notification of ``entity`` (that layer only: BrokerConfigHandler's updateDefaultConfig
        or updateBrokerConfig)."""
        unclean = self.config.bool("unclean.leader.election.enable")
        found = {}
        for name, per_broker in ((paths.DEFAULT_ENTITY, False), (str(self.node_id), True)):
            if entity is not None and name != entity:
                continue
            try:
                ent = self.zk.entity_config("brokers", name)
            except ZkError:
                continue  # the layer stays as it is
            configs = ent.config.config if ent is not None and ent.config is not None else {}
            found[per_broker] = (f"/config/brokers/{name}", configs)
        changed, notes = self.config.take_dynamic(found, running=self.broker.manager is not None)
        for note in notes:
            log.warning("%s", note)
        if changed:
            log.info(
                "dynamic broker configs reloaded from ZooKeeper: %s",
                {where: configs for where, configs in found.values()},
            )
            self.broker.reconfigure_logs()
            if not unclean and self.config.bool("unclean.leader.election.enable") and self.controller:
                self.controller.unclean_leader_election_enabled()

    def _config_changes(self, children) -> bool:
        """ZkConfigManager: every new /config/changes/config_change_N names an entity to reload."""
        if self._stopping:
            return False
        seqs = sorted(c for c in children if c.startswith(paths.CONFIG_CHANGE_PREFIX))
        last = getattr(self, "_last_config_change", None)
        if last is None:
            self._last_config_change = seqs[-1] if seqs else ""
            return True
        for child in [c for c in seqs if c > last]:
            self._last_config_change = child
            node = self.zk.get_or_none(paths.join(paths.CONFIG_CHANGES, child))
            if node is None:
                continue
            try:
                entity = codecs.decode_config_change(node.data).entity_path
                # user principals and client ids sanitized (ConfigHandler desanitizes them)
                kind, name, client = paths.parse_entity_path(entity)
            except Exception as exc:  # noqa: BLE001 (ZkNodeChangeNotificationListener logs and skips)
                log.error("config change notification %s not applied: %s", child, exc)
                continue
            if kind == "topics":
                configs = self.topic_configs(name)
                self._loop.call_soon_threadsafe(self._apply_topic_configs, name, configs)
            elif kind == "brokers" and name in (paths.DEFAULT_ENTITY, str(self.node_id)):
                # BrokerConfigHandler: the default and this broker's own; another broker's is its own
                self._loop.call_soon_threadsafe(self._load_broker_configs, name)
            elif kind in ("users", "clients"):
                if kind == "users" and client is None:
                    self.scram.reload_user(name)
                self._quota_change(kind, name, client)
        return True

    def _quota_change(self, kind: str, name: str, client: str | None) -> None:
        """QuotaConfigHandler (UserConfigHandler, ClientIdConfigHandler): the entity's quota
        configs as ZooKeeper has them now, applied on the event loop."""
        from kafkatool.broker import quotas

        entity = quotas.zk_entity(kind, name, client)
        try:
            configs = quotas.ZkQuotaStore(self.zk).entry(entity)
        except ZkError as exc:
            log.warning("client quotas of %s not reloaded: %s", quotas.describe_entity(entity), exc)
            return
        self._loop.call_soon_threadsafe(self.broker.quotas.update_entity, entity, configs)

    def _apply_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """TopicConfigHandler: the topic's logs on this broker take the new overrides, also
        those loaded before the controller named the topic (LogManager.updateTopicConfig)."""
        from kafkatool.broker.config import ConfigError
        from kafkatool.log import topic_settings as ts

        err = ts.stored_topic_config_error(configs)
        if err is not None:  # ZkNodeChangeNotificationListener logs it; nothing of it applies
            log.error("topic configs of %s in ZooKeeper not applied: %s", name, err)
            return
        try:
            if self.broker.topic(name) is not None:
                self.broker.alter_topic_configs(name, configs, from_zookeeper=True)
            elif self.broker.set_unnamed_topic_configs(name, configs) == 0:
                return
        except ConfigError as exc:  # Kafka's ZkConfigManager logs the failed change and goes on
            log.error("topic configs of %s in ZooKeeper not applied: %s", name, exc)
            t = self.broker.metadata.topics.get(name)
            if t is not None:
                # the logs keep theirs (updateTopicConfig threw before any); a log made later
                # reads /config/topics/T again (getOrCreateLog -> fetchLogConfig) and is refused:
                # the stored overrides with no LogConfig, as ReplicaManager._ensure_topic keeps them
                t.configs = dict(configs)
                self.broker.manager.topic_configs.pop(name, None)
            return
        log.info("topic configs of %s reloaded from ZooKeeper: %s", name, configs)

    def topic_config_overrides(self, topics=()) -> dict[str, dict[str, str]]:
        """LogManager.fetchTopicConfigOverrides: the /config/topics/T overrides of every topic
        of the cluster (KafkaServer.startup passes zkClient.getAllTopicsInCluster) and of
        ``topics`` (those with a log on this broker, named or not), read pipelined
        (zk/client.get_many: one round trip per window of reads, not per topic) before the logs
        load; topics without any left out. A payload that does not parse refuses the start, as
        Kafka's LogManager.startup does."""
        try:
            wanted = sorted(set(topics) | set(self.zk.topics()))
            nodes = self.zk.get_many([paths.config_entity("topics", t) for t in wanted])
        except ZkError as exc:
            raise ClusterError(f"cannot read the topic configs in {paths.CONFIG}/topics: {exc}") from None
        out = {}
        for t in wanted:
            path = paths.config_entity("topics", t)
            node = nodes.get(path)
            if node is None:
                continue
            try:
                configs = codecs.decode_entity_config(node.data, path).config
            except codecs.ZkPayloadError as exc:
                raise ClusterError(str(exc)) from None
            if configs:
                out[t] = dict(configs)
        return out

    def delete_topic(self, name: str) -> None:
        with contextlib.suppress(ZkNodeExistsError):
            self.zk.create(paths.delete_topic(name), b"", makepath=True)

    def add_partitions(self, name: str, count: int) -> None:
        from kafkatool.assign import kafka_placement

        typed = self.zk.topic_assignment(name)
        if typed is None or typed.value is None:
            raise ZkNoNodeError(paths.topic(name))
        a = typed.value
        existing = a.partitions
        rf = len(existing[0]) if existing else 1
        brokers = self.live_brokers()
        start = kafka_placement.add_partitions_start_index([b.id for b in brokers], existing.get(0, []))
        new = kafka_placement.assign_replicas(
            brokers, count - len(existing), rf, start_index=start, first_partition=len(existing)
        )
        merged = {**existing, **new}
        self.zk.set(
            paths.topic(name),
            codecs.encode_topic(
                merged, adding=a.adding_replicas, removing=a.removing_replicas, topic_id=a.topic_id
            ),
            version=typed.stat.version,
        )


def _zk_security(config):
    """serve's own ZooKeeper TLS/SASL: Kafka's zookeeper.ssl.* / zookeeper.set.acl settings and
    the JAAS Client section named by KAFKA_OPTS, as the tools read them (broker/security/zk)."""
    from kafkatool.broker.security.zk import ZkSecurity, ZkSecurityError

    try:
        return ZkSecurity.from_settings(dict(config.explicit), source="server.properties")
    except ZkSecurityError as exc:
        raise ClusterError(str(exc)) from None
