"""The KRaft metadata image: the state ``__cluster_metadata``'s records add up to, and the node
tree kafka-metadata-shell.sh shows of it.

:class:`MetadataImage` is Kafka 3.7's MetadataImage, built by :meth:`MetadataImage.replay` as
its image deltas apply each record (MetadataDelta.replay and TopicsDelta, ClusterDelta,
ConfigurationsDelta, FeaturesDelta, ClientQuotasDelta, ProducerIdsDelta, AclsDelta, ScramDelta,
DelegationTokenDelta): a TopicRecord makes a topic with no partitions, a PartitionChangeRecord
merges into its partition as PartitionRegistration.merge (a new leader bumps the leader epoch,
every change the partition epoch), a RemoveTopicRecord drops the topic and its configs, a
ConfigRecord with a null value deletes the config (a resource left with none is gone), a
FeatureLevelRecord of level 0 removes the feature, Fence/Unfence/BrokerRegistrationChange clone
the registration.  A record the deltas refuse (a change of a partition or broker the image does
not hold, the removal of an unknown topic or ACL) raises :class:`ReplayError` and changes
nothing: Kafka's loader reports it as a fault and goes on with the next record.  Records are the
dicts :func:`kafkatool.formats.internal_topics.cluster_metadata_record_dict` gives.  A snapshot
replaces the image (:meth:`MetadataImage.clear`, the deltas' finishSnapshot); KIP-868's
Begin/End/AbortTransactionRecord are MetadataBatchLoader's: records between a begin and an end
are applied together, an abort drops them (:class:`Replayer`).

The node tree (:func:`root_node`) is Kafka's image/node package under shell/node's RootShellNode:
``/image/{provenance,features,cluster,topics,configs,clientQuotas,producerIds,acls,scram,
delegationToken}`` and ``/local``, names and leaf texts as Kafka writes them (the registrations'
toString).  What a printer may show is a :class:`Redaction` (MetadataNodeRedactionCriteria):
:data:`NORMAL_SECRETS` masks SCRAM credentials and delegation tokens as ``[redacted]``, and a
config the caller's rule calls sensitive.  Pure: no I/O.
"""

from __future__ import annotations

import base64
import copy
import datetime as _dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkatool.errors import KafkatoolError
from kafkatool.formats.acl_codes import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES
from kafkatool.formats.java_collections import java_collection_str
from kafkatool.formats.properties import parse_java_int
from kafkatool.formats.schema import java_double_str
from kafkatool.formats.uuid import UuidError, uuid_bytes_from_string

__all__ = [
    "CONFIG_RESOURCE_TYPES",
    "MetadataImage",
    "Node",
    "Redaction",
    "ReplayError",
    "Replayer",
    "java_sorted",
    "root_node",
]

NO_LEADER_CHANGE = -2
NO_RECOVERY_STATE_CHANGE = -1
#: DirectoryId.MIGRATING / UNASSIGNED in Kafka's string form
MIGRATING_DIR = "AAAAAAAAAAAAAAAAAAAAAA"
UNASSIGNED_DIR = "AAAAAAAAAAAAAAAAAAAAAQ"
LEADER_RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
#: ConfigResource.Type, in its declaration order (ConfigurationsImageNode.resourceFromName tries them so)
CONFIG_RESOURCE_TYPES = {16: "CLIENT_METRICS", 8: "BROKER_LOGGER", 4: "BROKER", 2: "TOPIC", 0: "UNKNOWN"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
#: ZkMigrationState ids
ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}
#: MetadataVersion feature levels (IBP_3_0_IV1 = 1 ...), MetadataVersion.toString
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2",
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
    13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
    19: "3.7-IV4", 20: "3.8-IV0",
}  # fmt: skip
METADATA_VERSION_FEATURE = "metadata.version"
#: MetadataVersion.MINIMUM_KRAFT_VERSION, FeaturesImage.EMPTY's
MINIMUM_KRAFT_LEVEL = 1
REDACTED = "[redacted]"


class ReplayError(KafkatoolError):
    """A record Kafka's image deltas refuse (the loader's fault): the image is left as it was."""


def java_sorted(names: Iterable[str]) -> list[str]:
    """Sorted as Java's String::compareTo sorts (UTF-16 code units), the shell's order."""
    return sorted(names, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


def _uuid_key(text: str) -> tuple[int, int]:
    """Uuid.compareTo: the two halves compared as signed longs."""
    try:
        raw = uuid_bytes_from_string(text)
    except UuidError:
        return (0, 0)
    hi, lo = int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)
    return (hi, lo)


def _java_bool(b: bool) -> str:
    return "true" if b else "false"


def _java_str(s: str | None) -> str:
    return "null" if s is None else s


# ----------------------------------------------------------------------------- image parts
@dataclass
class Partition:
    """PartitionRegistration."""

    replicas: list[int]
    directories: list[str]
    isr: list[int]
    removing_replicas: list[int]
    adding_replicas: list[int]
    elr: list[int]
    last_known_elr: list[int]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int

    @classmethod
    def from_record(cls, d: dict) -> Partition:
        replicas = list(d.get("replicas") or [])
        dirs = list(d.get("directories") or [])
        if dirs and len(dirs) != len(replicas):
            raise ReplayError(f"The lengths for replicas and directories do not match: {d}")
        state = d.get("leaderRecoveryState", 0)
        if state not in LEADER_RECOVERY_STATES:
            raise ReplayError(f"Value {state} is not a valid leader recovery state")
        return cls(
            replicas,
            dirs or [MIGRATING_DIR] * len(replicas),
            list(d.get("isr") or []),
            list(d.get("removingReplicas") or []),
            list(d.get("addingReplicas") or []),
            list(d.get("eligibleLeaderReplicas") or []),
            list(d.get("lastKnownELR") or []),
            d.get("leader", -1),
            state,
            d.get("leaderEpoch", -1),
            d.get("partitionEpoch", -1),
        )

    def merge(self, d: dict) -> Partition:
        """PartitionRegistration.merge(PartitionChangeRecord)."""
        replicas = d.get("replicas")
        dirs = d.get("directories")
        if replicas is not None and dirs and len(replicas) != len(dirs):
            raise ReplayError(f"The lengths for replicas and directories do not match: {d}")
        if dirs:
            new_dirs = list(dirs)
        elif replicas is not None:
            # DirectoryId.createDirectoriesFrom: each kept replica keeps its directory
            where = dict(zip(self.replicas, self.directories, strict=False))
            new_dirs = [where.get(r, UNASSIGNED_DIR) for r in replicas]
        else:
            new_dirs = list(self.directories)
        if not new_dirs:
            # defaultToMigrating(newDirectories, replicas.length): the old replica count, as Kafka
            new_dirs = [MIGRATING_DIR] * len(self.replicas)
        leader = d.get("leader", NO_LEADER_CHANGE)
        state = d.get("leaderRecoveryState", NO_RECOVERY_STATE_CHANGE)
        if state != NO_RECOVERY_STATE_CHANGE and state not in LEADER_RECOVERY_STATES:
            raise ReplayError(f"Value {state} is not a valid leader recovery state")

        def pick(key: str, old: list[int]) -> list[int]:
            value = d.get(key)
            return list(old) if value is None else list(value)

        return Partition(
            self.replicas if replicas is None else list(replicas),
            new_dirs,
            pick("isr", self.isr),
            pick("removingReplicas", self.removing_replicas),
            pick("addingReplicas", self.adding_replicas),
            pick("eligibleLeaderReplicas", self.elr),
            pick("lastKnownELR", self.last_known_elr),
            self.leader if leader == NO_LEADER_CHANGE else leader,
            self.leader_recovery_state if state == NO_RECOVERY_STATE_CHANGE else state,
            self.leader_epoch if leader == NO_LEADER_CHANGE else self.leader_epoch + 1,
            self.partition_epoch + 1,
        )

    def __str__(self) -> str:
        return (
            f"PartitionRegistration(replicas={java_collection_str(self.replicas)}, "
            f"directories={java_collection_str(self.directories)}, isr={java_collection_str(self.isr)}, "
            f"removingReplicas={java_collection_str(self.removing_replicas)}, "
            f"addingReplicas={java_collection_str(self.adding_replicas)}, elr={java_collection_str(self.elr)}, "
            f"lastKnownElr={java_collection_str(self.last_known_elr)}, leader={self.leader}, "
            f"leaderRecoveryState={LEADER_RECOVERY_STATES[self.leader_recovery_state]}, "
            f"leaderEpoch={self.leader_epoch}, partitionEpoch={self.partition_epoch})"
        )

    def to_json(self) -> dict:
        return {
            "replicas": self.replicas,
            "directories": self.directories,
            "isr": self.isr,
            "removingReplicas": self.removing_replicas,
            "addingReplicas": self.adding_replicas,
            "elr": self.elr,
            "lastKnownElr": self.last_known_elr,
            "leader": self.leader,
            "leaderRecoveryState": LEADER_RECOVERY_STATES[self.leader_recovery_state],
            "leaderEpoch": self.leader_epoch,
            "partitionEpoch": self.partition_epoch,
        }


@dataclass
class Topic:
    name: str
    id: str
    partitions: dict[int, Partition] = field(default_factory=dict)


def _endpoints(items: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in items}


def _features(items: list[dict]) -> dict[str, tuple[int, int]]:
    return {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in items}


def _version_range(r: tuple[int, int]) -> str:
    """VersionRange.toString."""
    lo, hi = r
    if lo == hi:
        return str(lo)
    return f"{lo}+" if hi == 32767 else f"{lo}-{hi}"


def _endpoint_str(e: dict) -> str:
    """org.apache.kafka.common.Endpoint.toString."""
    proto = SECURITY_PROTOCOLS.get(e["securityProtocol"], "null")
    return f"Endpoint(listenerName='{e['name']}', securityProtocol={proto}, host='{e['host']}', port={e['port']})"


def _listeners_str(listeners: dict[str, dict]) -> str:
    return ", ".join(_endpoint_str(listeners[n]) for n in java_sorted(listeners))


def _features_str(features: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{k}: {_version_range(features[k])}" for k in java_sorted(features))


def _endpoints_json(listeners: dict[str, dict]) -> list[dict]:
    return [
        {
            "name": e["name"],
            "securityProtocol": SECURITY_PROTOCOLS.get(e["securityProtocol"]),
            "host": e["host"],
            "port": e["port"],
        }
        for e in (listeners[n] for n in java_sorted(listeners))
    ]


@dataclass
class Broker:
    """BrokerRegistration."""

    id: int
    epoch: int
    incarnation_id: str
    listeners: dict[str, dict]
    supported_features: dict[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool
    directories: list[str]

    @classmethod
    def from_record(cls, d: dict) -> Broker:
        return cls(
            d["brokerId"],
            d["brokerEpoch"],
            d["incarnationId"],
            _endpoints(d.get("endPoints") or []),
            _features(d.get("features") or []),
            d.get("rack"),
            d.get("fenced", True),
            d.get("inControlledShutdown", False),
            d.get("isMigratingZkBroker", False),
            sorted(d.get("logDirs") or [], key=_uuid_key),
        )

    def __str__(self) -> str:
        rack = "Optional.empty" if self.rack is None else f"Optional[{self.rack}]"
        return (
            f"BrokerRegistration(id={self.id}, epoch={self.epoch}, incarnationId={self.incarnation_id}, "
            f"listeners=[{_listeners_str(self.listeners)}], "
            f"supportedFeatures={{{_features_str(self.supported_features)}}}, rack={rack}, "
            f"fenced={_java_bool(self.fenced)}, inControlledShutdown={_java_bool(self.in_controlled_shutdown)}, "
            f"isMigratingZkBroker={_java_bool(self.is_migrating_zk_broker)}, "
            f"directories={java_collection_str(self.directories)})"
        )

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "epoch": self.epoch,
            "incarnationId": self.incarnation_id,
            "listeners": _endpoints_json(self.listeners),
            "supportedFeatures": {
                k: list(self.supported_features[k]) for k in java_sorted(self.supported_features)
            },
            "rack": self.rack,
            "fenced": self.fenced,
            "inControlledShutdown": self.in_controlled_shutdown,
            "isMigratingZkBroker": self.is_migrating_zk_broker,
            "directories": self.directories,
        }


@dataclass
class Controller:
    """ControllerRegistration."""

    id: int
    incarnation_id: str
    zk_migration_ready: bool
    listeners: dict[str, dict]
    supported_features: dict[str, tuple[int, int]]

    @classmethod
    def from_record(cls, d: dict) -> Controller:
        return cls(
            d["controllerId"],
            d["incarnationId"],
            d.get("zkMigrationReady", False),
            _endpoints(d.get("endPoints") or []),
            _features(d.get("features") or []),
        )

    def __str__(self) -> str:
        return (
            f"ControllerRegistration(id={self.id}, incarnationId={self.incarnation_id}, "
            f"zkMigrationReady={_java_bool(self.zk_migration_ready)}, "
            f"listeners=[{_listeners_str(self.listeners)}], "
            f"supportedFeatures={{{_features_str(self.supported_features)}}})"
        )

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "incarnationId": self.incarnation_id,
            "zkMigrationReady": self.zk_migration_ready,
            "listeners": _endpoints_json(self.listeners),
            "supportedFeatures": {
                k: list(self.supported_features[k]) for k in java_sorted(self.supported_features)
            },
        }


def _acl_str(a: dict) -> str:
    """StandardAcl.toString."""
    return (
        f"StandardAcl(resourceType={RESOURCE_TYPES.get(a['resourceType'], 'UNKNOWN')}, "
        f"resourceName={a['resourceName']}, patternType={PATTERN_TYPES.get(a['patternType'], 'UNKNOWN')}, "
        f"principal={a['principal']}, host={a['host']}, "
        f"operation={OPERATIONS.get(a['operation'], 'UNKNOWN')}, "
        f"permissionType={PERMISSIONS.get(a['permissionType'], 'UNKNOWN')})"
    )


def _acl_json(a: dict) -> dict:
    return {
        "resourceType": RESOURCE_TYPES.get(a["resourceType"], "UNKNOWN"),
        "resourceName": a["resourceName"],
        "patternType": PATTERN_TYPES.get(a["patternType"], "UNKNOWN"),
        "principal": a["principal"],
        "host": a["host"],
        "operation": OPERATIONS.get(a["operation"], "UNKNOWN"),
        "permissionType": PERMISSIONS.get(a["permissionType"], "UNKNOWN"),
    }


#: a client quota entity: ((entity type, entity name or None), ...) sorted by type
QuotaEntity = tuple[tuple[str, str | None], ...]


# ----------------------------------------------------------------------------- the image
@dataclass
class MetadataImage:
    """Kafka's MetadataImage; MetadataImage.EMPTY when new."""

    topics: dict[str, Topic] = field(default_factory=dict)  # by topic id
    topic_ids: dict[str, str] = field(default_factory=dict)  # name -> id
    #: (ConfigResource.Type id, resource name) -> {config: value}
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    #: (type id, resource name, config) -> where the record that set it was (the reader's tuple)
    config_origins: dict[tuple[int, str, str], tuple] = field(default_factory=dict)
    brokers: dict[int, Broker] = field(default_factory=dict)
    controllers: dict[int, Controller] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    metadata_version: int = MINIMUM_KRAFT_LEVEL
    zk_migration_state: int = 0
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    next_producer_id: int = -1
    acls: dict[str, dict] = field(default_factory=dict)
    #: mechanism id -> user -> UserScramCredentialRecord data
    scram: dict[int, dict[str, dict]] = field(default_factory=dict)
    #: token id -> DelegationTokenRecord data
    tokens: dict[str, dict] = field(default_factory=dict)
    #: MetadataProvenance: last contained offset, epoch, log time (ms)
    provenance: tuple[int, int, int] = (-1, -1, -1)

    def clear(self) -> None:
        """A snapshot's start: what it does not hold is gone (the deltas' finishSnapshot)."""
        fresh = MetadataImage()
        self.__dict__.update(fresh.__dict__)

    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    def topic_by_name(self, name: str) -> Topic | None:
        tid = self.topic_ids.get(name)
        return None if tid is None else self.topics.get(tid)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        return {name: dict(c) for (t, name), c in self.configs.items() if t == 2}

    # ------------------------------------------------------------------ replay
    def replay(self, rec: dict, where: tuple | None = None) -> None:
        """Apply one record as MetadataDelta.replay does; ReplayError where Kafka's delta throws."""
        handler = _HANDLERS.get(rec["type"])
        if handler is not None:
            handler(self, rec["data"], where)

    def _topic(self, d: dict, _w) -> None:
        old = self.topics.get(d["topicId"])
        if old is not None and self.topic_ids.get(old.name) == old.id:
            del self.topic_ids[old.name]
        prev = self.topic_ids.get(d["name"])
        if prev is not None and prev != d["topicId"]:
            self.topics.pop(prev, None)
        self.topics[d["topicId"]] = Topic(d["name"], d["topicId"])
        self.topic_ids[d["name"]] = d["topicId"]

    def _get_topic(self, topic_id: str) -> Topic:
        topic = self.topics.get(topic_id)
        if topic is None:
            # TopicsDelta.getOrCreateTopicDelta
            raise ReplayError(f"Unable to find topic with id {topic_id}")
        return topic

    def _partition(self, d: dict, _w) -> None:
        self._get_topic(d["topicId"]).partitions[d["partitionId"]] = Partition.from_record(d)

    def _partition_change(self, d: dict, _w) -> None:
        topic = self._get_topic(d["topicId"])
        current = topic.partitions.get(d["partitionId"])
        if current is None:
            raise ReplayError(f"Unable to find partition {d['topicId']}:{d['partitionId']}")
        topic.partitions[d["partitionId"]] = current.merge(d)

    def _remove_topic(self, d: dict, _w) -> None:
        topic = self.topics.pop(d["topicId"], None)
        if topic is None:
            raise ReplayError(f"Unable to delete topic with id {d['topicId']}: no such topic found.")
        if self.topic_ids.get(topic.name) == topic.id:
            del self.topic_ids[topic.name]
        # ConfigurationsDelta.replay(RemoveTopicRecord): every config of the topic
        self.configs.pop((2, topic.name), None)
        for key in [k for k in self.config_origins if k[:2] == (2, topic.name)]:
            del self.config_origins[key]

    def _config(self, d: dict, where) -> None:
        resource = (d["resourceType"], d["resourceName"])
        key = (*resource, d["name"])
        if d.get("value") is None:
            data = self.configs.get(resource)
            if data is not None:
                data.pop(d["name"], None)
                if not data:
                    del self.configs[resource]
            self.config_origins.pop(key, None)
        else:
            self.configs.setdefault(resource, {})[d["name"]] = d["value"]
            if where is not None:
                self.config_origins[key] = where

    def _register_broker(self, d: dict, _w) -> None:
        self.brokers[d["brokerId"]] = Broker.from_record(d)

    def _unregister_broker(self, d: dict, _w) -> None:
        self.brokers.pop(d["brokerId"], None)

    def _broker_or_fail(self, broker_id: int, epoch: int, what: str) -> Broker:
        """ClusterDelta.getBrokerOrThrow."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise ReplayError(f"Tried to {what} broker {broker_id}, but that broker was not registered.")
        if broker.epoch != epoch:
            raise ReplayError(
                f"Tried to {what} broker {broker_id}, but the given epoch, {epoch}, did not "
                f"match the current broker epoch, {broker.epoch}"
            )
        return broker

    def _fence(self, d: dict, _w) -> None:
        self._broker_or_fail(d["id"], d["epoch"], "fence").fenced = True

    def _unfence(self, d: dict, _w) -> None:
        self._broker_or_fail(d["id"], d["epoch"], "unfence").fenced = False

    def _broker_change(self, d: dict, _w) -> None:
        broker = self._broker_or_fail(d["brokerId"], d["brokerEpoch"], "change")
        fenced = d.get("fenced", 0)
        shutdown = d.get("inControlledShutdown", 0)
        if fenced not in (-1, 0, 1):
            raise ReplayError(f"Unable to replay {d}: unknown value for fenced field: {fenced}")
        if shutdown not in (0, 1):
            raise ReplayError(
                f"Unable to replay {d}: unknown value for inControlledShutdown field: {shutdown}"
            )
        if fenced:
            broker.fenced = fenced == 1
        if shutdown:
            broker.in_controlled_shutdown = True
        if d.get("logDirs"):
            broker.directories = sorted(d["logDirs"], key=_uuid_key)

    def _register_controller(self, d: dict, _w) -> None:
        self.controllers[d["controllerId"]] = Controller.from_record(d)

    def _feature_level(self, d: dict, _w) -> None:
        if d["name"] == METADATA_VERSION_FEATURE:
            if d["featureLevel"] not in METADATA_VERSIONS:
                raise ReplayError(f"No MetadataVersion with metadata version {d['featureLevel']}")
            self.metadata_version = d["featureLevel"]
        elif d["featureLevel"] == 0:
            self.features.pop(d["name"], None)
        else:
            self.features[d["name"]] = d["featureLevel"]

    def _zk_migration(self, d: dict, _w) -> None:
        if d["zkMigrationState"] not in ZK_MIGRATION_STATES:
            raise ReplayError(f"Unsupported ZkMigrationState value {d['zkMigrationState']}")
        self.zk_migration_state = d["zkMigrationState"]

    def _client_quota(self, d: dict, _w) -> None:
        entity: QuotaEntity = tuple(
            sorted({e["entityType"]: e.get("entityName") for e in d["entity"]}.items())
        )
        quotas = self.client_quotas.setdefault(entity, {})
        if d.get("remove"):
            quotas.pop(d["key"], None)
        else:
            quotas[d["key"]] = float(d["value"])
        if not quotas:
            del self.client_quotas[entity]

    def _producer_ids(self, d: dict, _w) -> None:
        self.next_producer_id = d["nextProducerId"]

    def _acl(self, d: dict, _w) -> None:
        self.acls[d["id"]] = {k: v for k, v in d.items() if k != "id"}

    def _remove_acl(self, d: dict, _w) -> None:
        if self.acls.pop(d["id"], None) is None:
            raise ReplayError(f"Failed to find existing ACL with ID {d['id']} in either image or changes")

    def _scram(self, d: dict, _w) -> None:
        self.scram.setdefault(d["mechanism"], {})[d["name"]] = dict(d)

    def _remove_scram(self, d: dict, _w) -> None:
        users = self.scram.get(d["mechanism"], {})
        users.pop(d["name"], None)
        if not users:
            self.scram.pop(d["mechanism"], None)

    def _token(self, d: dict, _w) -> None:
        self.tokens[d["tokenId"]] = dict(d)

    def _remove_token(self, d: dict, _w) -> None:
        self.tokens.pop(d["tokenId"], None)


_HANDLERS: dict[str, Callable] = {
    "TOPIC_RECORD": MetadataImage._topic,
    "PARTITION_RECORD": MetadataImage._partition,
    "PARTITION_CHANGE_RECORD": MetadataImage._partition_change,
    "REMOVE_TOPIC_RECORD": MetadataImage._remove_topic,
    "CONFIG_RECORD": MetadataImage._config,
    "REGISTER_BROKER_RECORD": MetadataImage._register_broker,
    "UNREGISTER_BROKER_RECORD": MetadataImage._unregister_broker,
    "FENCE_BROKER_RECORD": MetadataImage._fence,
    "UNFENCE_BROKER_RECORD": MetadataImage._unfence,
    "BROKER_REGISTRATION_CHANGE_RECORD": MetadataImage._broker_change,
    "REGISTER_CONTROLLER_RECORD": MetadataImage._register_controller,
    "FEATURE_LEVEL_RECORD": MetadataImage._feature_level,
    "ZK_MIGRATION_STATE_RECORD": MetadataImage._zk_migration,
    "CLIENT_QUOTA_RECORD": MetadataImage._client_quota,
    "PRODUCER_IDS_RECORD": MetadataImage._producer_ids,
    "ACCESS_CONTROL_ENTRY_RECORD": MetadataImage._acl,
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": MetadataImage._remove_acl,
    "USER_SCRAM_CREDENTIAL_RECORD": MetadataImage._scram,
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": MetadataImage._remove_scram,
    "DELEGATION_TOKEN_RECORD": MetadataImage._token,
    "REMOVE_DELEGATION_TOKEN_RECORD": MetadataImage._remove_token,
}

_TXN_RECORDS = ("BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD")


class Replayer:
    """Feeds records to an image as MetadataBatchLoader does: a record outside a KIP-868
    transaction applies at once; inside one (BeginTransactionRecord ... End) the records apply
    when it ends, an AbortTransactionRecord drops them, and one still open at the end of the
    data is not in the image (:attr:`pending`).  :meth:`apply` returns the errors of the
    records the image refused (Kafka's loader faults), each with its ``where``."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.pending: list[tuple[dict, tuple | None]] | None = None

    def apply(self, rec: dict, where: tuple | None = None) -> list[tuple[tuple | None, str]]:
        kind = rec["type"]
        if kind in _TXN_RECORDS:
            if kind == "BEGIN_TRANSACTION_RECORD":
                if self.pending is not None:
                    return [(where, "Encountered BeginTransactionRecord while already in a transaction")]
                self.pending = []
                return []
            if self.pending is None:
                name = (
                    "EndTransactionRecord" if kind == "END_TRANSACTION_RECORD" else "AbortTransactionRecord"
                )
                return [(where, f"Encountered {name} without having seen a BeginTransactionRecord")]
            held, self.pending = self.pending, None
            if kind == "ABORT_TRANSACTION_RECORD":
                return []
            out = []
            for r, w in held:
                out += self._one(r, w)
            return out
        if self.pending is not None:
            self.pending.append((rec, where))
            return []
        return self._one(rec, where)

    def _one(self, rec: dict, where) -> list[tuple[tuple | None, str]]:
        try:
            self.image.replay(rec, where)
        except ReplayError as exc:
            return [(where, str(exc))]
        except (KeyError, TypeError) as exc:
            return [(where, f"{rec['type']} cannot be applied: {exc!r}")]
        return []


# ----------------------------------------------------------------------------- redaction
@dataclass(frozen=True)
class Redaction:
    """MetadataNodeRedactionCriteria: what a printer masks as ``[redacted]``."""

    scram: bool = True
    delegation_token: bool = True
    #: (ConfigResource.Type id, config name) -> True when the value is sensitive
    config: Callable[[int, str], bool] = lambda _t, _k: True

    def redact_config(self, resource_type: int, name: str) -> bool:
        return self.config(resource_type, name)


#: Kafka's Strict criteria: everything masked
STRICT = Redaction()


# ----------------------------------------------------------------------------- nodes
class Node:
    """MetadataNode: a directory (child names, children) or a leaf (printed lines)."""

    directory = True

    def names(self) -> list[str]:
        return []

    def child(self, name: str) -> Node | None:
        return None

    def lines(self, redaction: Redaction) -> list[str]:
        """A leaf's printer.output calls."""
        return []

    def leaf_json(self, redaction: Redaction):
        return None

    def to_json(self, redaction: Redaction):
        """A leaf's value, or a directory as {child: child's JSON} in the shell's order."""
        if not self.directory:
            return self.leaf_json(redaction)
        out = {}
        for name in java_sorted(self.names()):
            child = self.child(name)
            if child is not None:
                out[name] = child.to_json(redaction)
        return out


class Leaf(Node):
    """MetadataLeafNode: one string; ``data`` is its JSON form (the string when None)."""

    directory = False

    def __init__(self, text: str, data=None):
        self.text = text
        self.data = text if data is None else data

    def lines(self, redaction: Redaction) -> list[str]:
        return [self.text]

    def leaf_json(self, redaction: Redaction):
        return self.data


class Dir(Node):
    """A directory whose children are made when asked for."""

    def __init__(
        self, children: dict[str, Callable[[], Node | None]], lookup: Callable[[str], Node | None] = None
    ):
        self._children = children
        self._lookup = lookup

    def names(self) -> list[str]:
        return list(self._children)

    def child(self, name: str) -> Node | None:
        if self._lookup is not None:
            return self._lookup(name)
        make = self._children.get(name)
        return None if make is None else make()


class _ConfigLeaf(Node):
    directory = False

    def __init__(self, resource_type: int, name: str, value: str):
        self.resource_type, self.name, self.value = resource_type, name, value

    def lines(self, redaction: Redaction) -> list[str]:
        return [self.leaf_json(redaction)]

    def leaf_json(self, redaction: Redaction):
        return REDACTED if redaction.redact_config(self.resource_type, self.name) else self.value


class _ScramLeaf(Node):
    """ScramCredentialDataNode."""

    directory = False

    def __init__(self, data: dict):
        self.data = data

    def _fields(self, redaction: Redaction) -> dict:
        if redaction.scram:
            return {k: REDACTED for k in ("salt", "storedKey", "serverKey", "iterations")}
        return {
            **{k: base64.b64decode(self.data[k]).hex() for k in ("salt", "storedKey", "serverKey")},
            "iterations": self.data["iterations"],
        }

    def lines(self, redaction: Redaction) -> list[str]:
        f = self._fields(redaction)
        return [
            f"ScramCredentialData(salt={f['salt']}, storedKey={f['storedKey']}, "
            f"serverKey={f['serverKey']}, iterations={f['iterations']})"
        ]

    def leaf_json(self, redaction: Redaction):
        return self._fields(redaction)


class _TokenLeaf(Node):
    """DelegationTokenDataNode (its odd parentheses included)."""

    directory = False

    def __init__(self, data: dict):
        self.data = data

    def _fields(self, redaction: Redaction) -> dict:
        keys = (
            "tokenId",
            "owner",
            "tokenRequester",
            "renewers",
            "issueTimestamp",
            "maxTimestamp",
            "expiryTimestamp",
        )
        if redaction.delegation_token:
            return dict.fromkeys(keys, REDACTED)
        d = self.data
        return {
            "tokenId": d["tokenId"],
            "owner": d["owner"],
            "tokenRequester": d["requester"],
            "renewers": " ".join(d.get("renewers") or []),
            "issueTimestamp": d["issueTimestamp"],
            "maxTimestamp": d["maxTimestamp"],
            "expiryTimestamp": d["expirationTimestamp"],
        }

    def lines(self, redaction: Redaction) -> list[str]:
        f = self._fields(redaction)
        return [
            f"DelegationTokenDatatokenId={f['tokenId']}(owner={f['owner']}"
            f"(tokenRequester={f['tokenRequester']}(renewers={f['renewers']}, "
            f"issueTimestamp={f['issueTimestamp']}, maxTimestamp={f['maxTimestamp']}), "
            f"expiryTimestamp={f['expiryTimestamp']}"
        ]

    def leaf_json(self, redaction: Redaction):
        return self._fields(redaction)


def iso_zoned_utc(ms: int) -> str:
    """DateTimeFormatter.ISO_ZONED_DATE_TIME of Instant.ofEpochMilli(ms) at ZoneId.of("UTC")."""
    t = _dt.datetime(1970, 1, 1) + _dt.timedelta(milliseconds=ms)
    frac = ""
    if t.microsecond:
        frac = "." + f"{t.microsecond * 1000:09d}".rstrip("0")
    return f"{t:%Y-%m-%dT%H:%M:%S}{frac}Z[UTC]"


class _ProvenanceLeaf(Node):
    directory = False

    def __init__(self, provenance: tuple[int, int, int]):
        self.provenance = provenance

    def lines(self, redaction: Redaction) -> list[str]:
        offset, epoch, ms = self.provenance
        return [f"offset {offset}, epoch {epoch}, time {iso_zoned_utc(ms)}"]

    def leaf_json(self, redaction: Redaction):
        offset, epoch, ms = self.provenance
        return {"offset": offset, "epoch": epoch, "timeMs": ms, "time": iso_zoned_utc(ms)}


def _topic_node(topic: Topic) -> Node:
    """TopicImageNode."""

    def lookup(name: str) -> Node | None:
        if name == "name":
            return Leaf(topic.name)
        if name == "id":
            return Leaf(topic.id)
        pid = parse_java_int(name)
        part = None if pid is None else topic.partitions.get(pid)
        return None if part is None else Leaf(str(part), part.to_json())

    children = {"name": None, "id": None, **{str(p): None for p in topic.partitions}}
    return Dir(children, lookup)


def _config_resource(name: str) -> tuple[int, str] | None:
    """ConfigurationsImageNode.resourceFromName."""
    for type_id, type_name in CONFIG_RESOURCE_TYPES.items():
        if name.startswith(type_name):
            key = name[len(type_name) :]
            if not key:
                return (type_id, "")
            return (type_id, key[1:]) if key.startswith(":") else None
    return None


def _config_resource_name(resource: tuple[int, str]) -> str:
    type_name = CONFIG_RESOURCE_TYPES.get(resource[0], "UNKNOWN")
    return type_name if not resource[1] else f"{type_name}:{resource[1]}"


def _quota_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def quota_entity_name(entity: QuotaEntity) -> str:
    """ClientQuotasImageNode.clientQuotaEntityToString (a default entity's null name is left out)."""
    values = dict(entity)
    parts = []
    for key, label in (("client-id", "clientId"), ("ip", "ip"), ("user", "user")):
        if values.get(key) is not None:
            parts.append(f"{label}({_quota_escape(values[key])})")
    return "_".join(parts)


def _decode_quota_entity(text: str) -> dict[str, str] | None:
    """ClientQuotasImageNode.decodeEntity."""
    labels = (("clientId(", "client-id"), ("ip(", "ip"), ("user(", "user"))
    entries: dict[str, str] = {}
    i, kind, value, escaping = 0, None, "", False
    while True:
        if i >= len(text):
            return None
        if kind is None:
            for label, key in labels:
                if text.startswith(label, i):
                    kind, i = key, i + len(label)
                    break
            else:
                return None
            continue
        c = text[i]
        i += 1
        if escaping:
            value += c
            escaping = False
        elif c == ")":
            entries[kind] = value
            kind, value = None, ""
        elif c == "\\":
            escaping = True
        else:
            value += c
        if kind is None:
            if i >= len(text):
                return entries
            if text[i] != "_":
                return None
            i += 1


def root_node(image: MetadataImage, local: dict[str, str]) -> Node:
    """RootShellNode: ``local`` (the shell's version and commitId) and ``image``."""
    im = image

    def topics_by_name() -> Node:
        return Dir(
            dict.fromkeys(im.topic_ids),
            lambda n: None if (t := im.topic_by_name(n)) is None else _topic_node(t),
        )

    def topics_by_id() -> Node:
        return Dir(
            dict.fromkeys(im.topics), lambda n: None if (t := im.topics.get(n)) is None else _topic_node(t)
        )

    def configs() -> Node:
        def lookup(name: str) -> Node | None:
            resource = _config_resource(name)
            data = None if resource is None else im.configs.get(resource)
            if data is None:
                return None
            return Dir(
                dict.fromkeys(data),
                lambda k: None if k not in data else _ConfigLeaf(resource[0], k, data[k]),
            )

        return Dir({_config_resource_name(r): None for r in im.configs}, lookup)

    def features() -> Node:
        def lookup(name: str) -> Node | None:
            if name == "metadataVersion":
                return Leaf(METADATA_VERSIONS[im.metadata_version])
            if name == "zkMigrationState":
                return Leaf(ZK_MIGRATION_STATES[im.zk_migration_state])
            if name.startswith("finalized_"):
                level = im.features.get(name[len("finalized_") :], 0)
                return Leaf(str(level), level)
            return None

        names = ["metadataVersion", "zkMigrationState", *(f"finalized_{f}" for f in im.features)]
        return Dir(dict.fromkeys(names), lookup)

    def registrations(table: dict) -> Node:
        def lookup(name: str) -> Node | None:
            n = parse_java_int(name)
            reg = None if n is None else table.get(n)
            return None if reg is None else Leaf(str(reg), reg.to_json())

        return Dir({str(k): None for k in table}, lookup)

    def client_quotas() -> Node:
        by_values = {tuple(sorted((k, v) for k, v in e if v is not None)): e for e in im.client_quotas}

        def lookup(name: str) -> Node | None:
            entries = _decode_quota_entity(name)
            entity = None if entries is None else by_values.get(tuple(sorted(entries.items())))
            if entity is None:
                return None
            quotas = im.client_quotas[entity]
            return Dir(
                dict.fromkeys(quotas),
                lambda k: None if k not in quotas else Leaf(java_double_str(quotas[k]), quotas[k]),
            )

        return Dir({quota_entity_name(e): None for e in im.client_quotas}, lookup)

    def acls() -> Node:
        return Dir(
            dict.fromkeys(im.acls),
            lambda n: None if (a := im.acls.get(n)) is None else Leaf(_acl_str(a), _acl_json(a)),
        )

    def scram() -> Node:
        by_name = {v: k for k, v in SCRAM_MECHANISMS.items()}

        def lookup(name: str) -> Node | None:
            mech = by_name.get(name)
            if mech is None:
                return None
            users = im.scram.get(mech, {})
            return Dir(dict.fromkeys(users), lambda u: None if u not in users else _ScramLeaf(users[u]))

        return Dir(dict.fromkeys(SCRAM_MECHANISMS.values()), lookup)

    image_children = {
        "provenance": lambda: _ProvenanceLeaf(im.provenance),
        "features": features,
        "cluster": lambda: Dir(
            {
                "brokers": lambda: registrations(im.brokers),
                "controllers": lambda: registrations(im.controllers),
            }
        ),
        "topics": lambda: Dir({"byName": topics_by_name, "byId": topics_by_id}),
        "configs": configs,
        "clientQuotas": client_quotas,
        "producerIds": lambda: Dir(
            {"nextProducerId": lambda: Leaf(str(im.next_producer_id), im.next_producer_id)}
        ),
        "acls": acls,
        "scram": scram,
        "delegationToken": lambda: Dir(
            dict.fromkeys(im.tokens),
            lambda n: None if (t := im.tokens.get(n)) is None else _TokenLeaf(t),
        ),
    }
    local_children = {k: (lambda v=v: Leaf(v)) for k, v in local.items()}
    return Dir({"local": lambda: Dir(local_children), "image": lambda: Dir(image_children)})
