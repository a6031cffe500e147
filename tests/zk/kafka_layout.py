"""Seed a ZooKeeper chroot with a Kafka cluster's layout exactly as ZK-mode Kafka 2.x/3.x writes it.

Every broker registration (and /controller) is an ephemeral node owned by that
broker's own ZooKeeper session, as in Kafka; sequential notification nodes are
created with ZooKeeper's sequence flag; partition state znodes are rewritten once
per leader epoch so their zkVersion (the partition epoch) is what a controller
would have left.

``seed_cluster(hosts, chroot)`` writes the default healthy three-broker cluster;
pass a ``ClusterSpec`` to change it.  Close the returned ``SeededCluster`` to
end the broker sessions (their registrations vanish, as when brokers stop).
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from kafkatool.zk import codecs, paths
from kafkatool.zk.codecs import Acl


def kafka_uuid() -> str:
    """A Kafka Uuid as it prints (URL-safe base64 of 16 bytes, no padding: 22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class BrokerSpec:
    endpoints: list[str]
    rack: str | None = None
    version: int = 5  # v5 for IBP >= 2.7, v4 for >= 0.10.0, v2 before
    protocol_map: dict[str, str] | None = None
    features: dict = field(default_factory=dict)


@dataclass
class PartitionSpec:
    replicas: list[int]
    leader: int | None = None  # default: first replica
    leader_epoch: int = 0
    isr: list[int] | None = None  # default: all replicas
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass
class TopicSpec:
    partitions: dict[int, PartitionSpec]
    version: int = 3  # v3 (2.8+) has topic_id
    config: dict[str, str] = field(default_factory=dict)


@dataclass
class ClusterSpec:
    cluster_id: str = field(default_factory=kafka_uuid)
    controller: int | None = 1
    controller_epoch: int = 3
    brokers: dict[int, BrokerSpec] = field(default_factory=dict)
    topics: dict[str, TopicSpec] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # "1" or "<default>"
    acls: list[tuple[str, str, str, list[Acl]]] = field(default_factory=list)  # pattern, type, name, acls
    reassignment: dict[tuple[str, int], list[int]] | None = None  # /admin/reassign_partitions
    feature_version: int = 2


def default_spec(*, reassigning: bool = False) -> ClusterSpec:
    """Three brokers on two racks, three topics (v3, v2 and v1 assignments), ACLs and quotas.

    With ``reassigning`` the cluster is in the middle of a legacy (ZK) reassignment of
    events-0 from [1, 2] to [2, 3], throttled the way kafka-reassign-partitions throttles.
    """
    spec = ClusterSpec(
        brokers={
            1: BrokerSpec(["PLAINTEXT://127.0.0.1:19091", "SSL://127.0.0.1:19191"], rack="r1"),
            2: BrokerSpec(["PLAINTEXT://127.0.0.1:19092"], rack="r2"),
            3: BrokerSpec(
                ["INTERNAL://127.0.0.1:19093", "EXTERNAL://[::1]:29093"],
                rack="r1",
                protocol_map={"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"},
            ),
        },
        topics={
            "orders": TopicSpec(
                {
                    0: PartitionSpec([1, 2, 3], leader_epoch=2),
                    1: PartitionSpec([2, 3, 1], leader_epoch=0),
                    2: PartitionSpec([3, 1, 2], leader_epoch=5, isr=[3, 1, 2]),
                },
                config={"retention.ms": "86400000", "min.insync.replicas": "2"},
            ),
            "events": TopicSpec(
                {0: PartitionSpec([1, 2]), 1: PartitionSpec([2, 3], leader_epoch=1)}, version=2
            ),
            "legacy": TopicSpec({0: PartitionSpec([3], leader_epoch=7)}, version=1),
        },
        broker_configs={"<default>": {"log.cleaner.threads": "2"}},
        acls=[
            (
                "LITERAL",
                "Topic",
                "orders",
                [Acl("User:alice", "Allow", "Read", "*"), Acl("User:bob", "Deny", "Write", "10.0.0.1")],
            ),
            ("LITERAL", "Cluster", "kafka-cluster", [Acl("User:admin", "Allow", "All", "*")]),
            ("PREFIXED", "Group", "app-", [Acl("User:alice", "Allow", "Read", "*")]),
        ],
    )
    if reassigning:
        # RS = TRS + (ORS - TRS) = [2, 3, 1]; AR = [3]; RR = [1]  (KafkaController step 1)
        spec.topics["events"].partitions[0] = PartitionSpec(
            [2, 3, 1], leader=1, isr=[1, 2], adding=[3], removing=[1]
        )
        spec.reassignment = {("events", 0): [2, 3]}
        spec.topics["events"].config.update(
            {
                "leader.replication.throttled.replicas": "0:1,0:2",
                "follower.replication.throttled.replicas": "0:3",
            }
        )
        for b in ("1", "2", "3"):
            spec.broker_configs[b] = {
                "leader.replication.throttled.rate": "10485760",
                "follower.replication.throttled.rate": "10485760",
            }
    return spec


@dataclass
class SeededCluster:
    hosts: str
    chroot: str
    spec: ClusterSpec
    admin: KazooClient  # a session with the chroot, for tests that tamper with the layout
    sessions: dict[int, KazooClient] = field(default_factory=dict)  # broker id -> its session

    @property
    def connect(self) -> str:
        return self.hosts + self.chroot

    @property
    def cluster_id(self) -> str:
        return self.spec.cluster_id

    def session_id(self, broker_id: int) -> int:
        return self.sessions[broker_id].client_id[0]

    def stop_broker(self, broker_id: int) -> None:
        """End a broker's session: its registration (and /controller if it held it) disappear."""
        client = self.sessions.pop(broker_id)
        client.stop()
        client.close()

    def close(self) -> None:
        for b in list(self.sessions):
            self.stop_broker(b)
        self.admin.stop()
        self.admin.close()


def _client(hosts: str, chroot: str) -> KazooClient:
    c = KazooClient(hosts=hosts + chroot, timeout=10.0)
    c.start(timeout=10)
    return c


def seed_cluster(hosts: str, chroot: str, spec: ClusterSpec | None = None) -> SeededCluster:
    spec = spec or default_spec()
    if chroot:
        root = _client(hosts, "")
        root.ensure_path(chroot)  # the broker creates a missing chroot itself
        root.stop()
        root.close()
    admin = _client(hosts, chroot)
    cluster = SeededCluster(hosts, chroot, spec, admin)
    now = int(time.time() * 1000)

    # KafkaZkClient.createTopLevelPaths, then the cluster id (first broker to start).
    for p in paths.PERSISTENT_PATHS:
        admin.ensure_path(p)
    admin.create(paths.CLUSTER_ID, codecs.encode_cluster_id(spec.cluster_id), makepath=True)

    # Each broker registers with its own session (KafkaZkClient.registerBroker).
    for b, bs in sorted(spec.brokers.items()):
        session = _client(hosts, chroot)
        cluster.sessions[b] = session
        data = codecs.encode_broker(
            bs.endpoints,
            version=bs.version,
            timestamp_ms=now,
            rack=bs.rack,
            protocol_map=bs.protocol_map,
            features=bs.features,
        )
        session.create(paths.broker(b), data, ephemeral=True)

    # Controller election: /controller (ephemeral, the winner's session) with the epoch bump.
    admin.create(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(spec.controller_epoch))
    if spec.controller is not None and spec.controller in cluster.sessions:
        cluster.sessions[spec.controller].create(
            paths.CONTROLLER, codecs.encode_controller(spec.controller, now), ephemeral=True
        )
    # The first producer id block taken by the controller-elected broker.
    admin.set(paths.LATEST_PRODUCER_ID_BLOCK, codecs.encode_producer_id_block(1, 0, 999))
    admin.create(paths.FEATURE, codecs.encode_feature({}, version=spec.feature_version))

    for topic, ts in sorted(spec.topics.items()):
        assignment = {p: ps.replicas for p, ps in ts.partitions.items()}
        adding = {p: ps.adding for p, ps in ts.partitions.items() if ps.adding}
        removing = {p: ps.removing for p, ps in ts.partitions.items() if ps.removing}
        topic_id = kafka_uuid() if ts.version >= 3 else None
        admin.create(
            paths.topic(topic),
            codecs.encode_topic(
                assignment, adding=adding, removing=removing, topic_id=topic_id, version=ts.version
            ),
        )
        # Topic config node comes with the topic (AdminZkClient.createTopicWithAssignment).
        admin.create(paths.config_entity("topics", topic), codecs.encode_entity_config(ts.config))
        for p, ps in sorted(ts.partitions.items()):
            leader = ps.replicas[0] if ps.leader is None else ps.leader
            isr = list(ps.replicas) if ps.isr is None else ps.isr
            state_path = paths.partition_state(topic, p)
            # First state at leader epoch 0, then one rewrite per later leader election.
            admin.create(
                state_path,
                codecs.encode_partition_state(leader, 0, spec.controller_epoch, isr),
                makepath=True,
            )
            for epoch in range(1, ps.leader_epoch + 1):
                admin.set(
                    state_path, codecs.encode_partition_state(leader, epoch, spec.controller_epoch, isr)
                )

    for name, cfg in sorted(spec.broker_configs.items()):
        admin.create(paths.config_entity("brokers", name), codecs.encode_entity_config(cfg))
        admin.create(
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            codecs.encode_config_change(f"brokers/{name}"),
            sequence=True,
        )
    # Quotas: a user/client pair and the client default.
    admin.create(
        paths.config_entity("users", "alice", "app"),
        codecs.encode_entity_config({"producer_byte_rate": "1048576"}),
        makepath=True,
    )
    admin.create(
        paths.config_entity("clients", paths.DEFAULT),
        codecs.encode_entity_config({"consumer_byte_rate": "2097152"}),
    )
    admin.create(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        codecs.encode_config_change("users/alice/clients/app"),
        sequence=True,
    )

    for pattern, rtype, name, acls in spec.acls:
        admin.create(paths.acl_resource(rtype, name, pattern), codecs.encode_acls(acls), makepath=True)
        change_root = paths.KAFKA_ACL_CHANGES if pattern == "LITERAL" else paths.KAFKA_ACL_EXTENDED_CHANGES
        admin.create(
            f"{change_root}/{paths.ACL_CHANGE_PREFIX}",
            codecs.encode_acl_change(rtype, name, pattern),
            sequence=True,
            makepath=True,
        )

    if spec.reassignment:
        admin.create(
            paths.REASSIGN_PARTITIONS,
            codecs.encode_reassign_partitions([(t, p, r) for (t, p), r in sorted(spec.reassignment.items())]),
        )
    return cluster
