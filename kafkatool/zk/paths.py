"""Kafka's ZooKeeper layout (ZK mode, 2.x/3.x): every path the brokers and tools use.

Paths here are relative to the cluster's chroot; :func:`split_connect` separates
the chroot from a ``zookeeper.connect`` string.  ``classify`` maps a path back to
what Kafka stores there, so generic tools (``zk get``, ``zk dump``) can pick the
right payload codec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkatool.zk.sanitizer import desanitize, sanitize

CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
MIGRATION = "/migration"
DELEGATION_TOKEN = "/delegation_token"
DELEGATION_TOKENS = "/delegation_token/tokens"
DELEGATION_TOKEN_CHANGES = "/delegation_token/token_changes"
CONSUMERS = "/consumers"

# Sequential-node prefixes (ZooKeeper appends a 10-digit counter).
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
ACL_CHANGE_PREFIX = "acl_changes_"
TOKEN_CHANGE_PREFIX = "token_change_"

# Entity types under /config.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
DEFAULT_ENTITY = "<default>"


class _DefaultEntity:
    """ConfigEntityName.Default as a name of a user or client id: the default entity (a null name
    in the protocol), kept at the znode ``<default>``. A user or client id literally named
    ``<default>`` is a name like any other, sanitized as Kafka sanitizes it (``%3Cdefault%3E``:
    ConfigCommand.sanitizeName, ZkAdminManager.sanitizeEntityName), so the two never meet."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"

    def __str__(self) -> str:
        return DEFAULT_ENTITY


#: the default user or client id at the zk client's real-name boundary (entity_segment/entity_name)
DEFAULT = _DefaultEntity()
#: the entity types whose names Kafka keeps sanitized (Sanitizer: ConfigCommand.sanitizeName,
#: ZkAdminManager, ConfigHandler's desanitize): user principals and client ids
SANITIZED_ENTITY_TYPES = ("users", "clients")

# Top-level Kafka nodes: a dump of "the Kafka subtree" covers these.
KAFKA_TOP_LEVEL = (
    "admin",
    "brokers",
    "cluster",
    "config",
    "consumers",
    "controller",
    "controller_epoch",
    "delegation_token",
    "feature",
    "isr_change_notification",
    "kafka-acl",
    "kafka-acl-changes",
    "kafka-acl-extended",
    "kafka-acl-extended-changes",
    "latest_producer_id_block",
    "log_dir_event_notification",
    "migration",
)

# Persistent paths a ZK-mode broker creates at start-up (KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_CHANGES,
    *(f"{CONFIG}/{t}" for t in CONFIG_ENTITY_TYPES),
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
)

# Topic-level and broker-level replication throttle keys (kafka-reassign-partitions).
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
BROKER_THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition(name: str, partition_id: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition_id}"


def partition_state(name: str, partition_id: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition_id}/state"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def entity_segment(entity_type: str, name) -> str:
    """The znode name of an entity: :data:`DEFAULT` is ``<default>``, a user principal or client id
    sanitized (``alice@EXAMPLE.COM`` -> ``alice%40EXAMPLE.COM``, a user named ``<default>`` ->
    ``%3Cdefault%3E``), any other name as it is (topics, broker ids and ips, whose ``<default>``
    is the default)."""
    if name is DEFAULT:
        return DEFAULT_ENTITY
    if entity_type in SANITIZED_ENTITY_TYPES:
        return sanitize(name)
    return name


def entity_name(entity_type: str, segment: str):
    """The entity a znode name stands for (the inverse of :func:`entity_segment`): a user's or
    client's ``<default>`` is :data:`DEFAULT`; ValueError with URLDecoder's words for a user or
    client znode that is not a sanitized name."""
    if entity_type in SANITIZED_ENTITY_TYPES:
        return DEFAULT if segment == DEFAULT_ENTITY else desanitize(segment)
    return segment


def entity_path(entity_type: str, name: str, client: str | None = None) -> str:
    """AdminZkClient's entity path of a config change notification and of ``/config/...``:
    ``topics/T``, ``users/<user>``, ``users/<user>/clients/<client id>``, ``clients/<client id>``,
    names sanitized by :func:`entity_segment` (``name`` and ``client`` are the real names or
    :data:`DEFAULT`)."""
    path = f"{entity_type}/{entity_segment(entity_type, name)}"
    if client is not None:
        if entity_type != "users":
            raise ValueError(f"a client id under {entity_type}: only users have clients")
        path += f"/clients/{entity_segment('clients', client)}"
    return path


def parse_entity_path(path: str) -> tuple[str, str, str | None]:
    """(entity type, real name, real client id or None) of an entity path as Kafka writes it in a
    config change notification (ZkConfigManager: ``<type>/<name>``, for users also
    ``users/<user>/clients/<client>``, UserConfigHandler's split); ValueError for anything else."""
    entity_type, sep, rest = path.partition("/")
    if not sep or not rest:
        raise ValueError(f"Invalid entity path: {path}")
    if entity_type == "users":
        parts = rest.split("/")
        if len(parts) == 3 and parts[1] == "clients":
            return entity_type, entity_name("users", parts[0]), entity_name("clients", parts[2])
        if len(parts) != 1:
            raise ValueError(f"Invalid quota entity path: {rest}")
    return entity_type, entity_name(entity_type, rest), None


def config_entity(entity_type: str, name: str, client: str | None = None) -> str:
    """``/config/<entity path>`` of an entity by its real name (see :func:`entity_path`)."""
    return f"{CONFIG}/{entity_path(entity_type, name, client)}"


def acl_resource(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    """Literal ACLs live under /kafka-acl; other patterns under /kafka-acl-extended/<pattern lower>."""
    if pattern_type.upper() == "LITERAL":
        return f"{KAFKA_ACL}/{resource_type}/{name}"
    return f"{KAFKA_ACL_EXTENDED}/{pattern_type.lower()}/{resource_type}/{name}"


def join(*parts: str) -> str:
    """Join path pieces into a normalized absolute ZooKeeper path."""
    segments: list[str] = []
    for part in parts:
        segments.extend(s for s in part.split("/") if s)
    return "/" + "/".join(segments)


def normalize(path: str) -> str:
    """An absolute path without a trailing slash ('/' stays '/')."""
    if not path.startswith("/"):
        path = "/" + path
    return join(path)


def parent(path: str) -> str:
    path = normalize(path)
    if path == "/":
        return "/"
    return path.rsplit("/", 1)[0] or "/"


def basename(path: str) -> str:
    return normalize(path).rsplit("/", 1)[1]


def split_connect(connect: str) -> tuple[str, str]:
    """Split ``h1:2181,h2:2181/kafka/prod`` into (hosts, chroot); chroot '' when absent.

    As in Kafka, the chroot is everything from the first '/'.
    """
    connect = connect.strip()
    i = connect.find("/")
    if i < 0:
        return connect, ""
    hosts, chroot = connect[:i], connect[i:]
    chroot = normalize(chroot)
    return hosts, "" if chroot == "/" else chroot


_SEQ = r"\d{10}"


@dataclass(frozen=True)
class PathKind:
    """What Kafka stores at a path: ``kind`` names the codec, ``params`` the path's variables."""

    kind: str
    params: dict = field(default_factory=dict)


_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^/cluster/id$"), "cluster_id"),
    (re.compile(r"^/controller$"), "controller"),
    (re.compile(r"^/controller_epoch$"), "controller_epoch"),
    (re.compile(r"^/brokers/ids/(?P<broker>-?\d+)$"), "broker"),
    (re.compile(r"^/brokers/seqid$"), "empty"),
    (re.compile(r"^/brokers/topics/(?P<topic>[^/]+)$"), "topic"),
    (re.compile(r"^/brokers/topics/(?P<topic>[^/]+)/partitions(/(?P<partition>\d+))?$"), "empty"),
    (
        re.compile(r"^/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>\d+)/state$"),
        "partition_state",
    ),
    (re.compile(r"^/admin/delete_topics/(?P<topic>[^/]+)$"), "empty"),
    (re.compile(r"^/admin/reassign_partitions$"), "reassign_partitions"),
    (re.compile(r"^/admin/preferred_replica_election$"), "preferred_replica_election"),
    (re.compile(rf"^/isr_change_notification/isr_change_(?P<seq>{_SEQ})$"), "isr_change"),
    (re.compile(rf"^/log_dir_event_notification/log_dir_event_(?P<seq>{_SEQ})$"), "log_dir_event"),
    (re.compile(rf"^/config/changes/config_change_(?P<seq>{_SEQ})$"), "config_change"),
    (re.compile(r"^/config/(?P<entity_type>topics|clients|brokers|ips)/(?P<entity>[^/]+)$"), "entity_config"),
    (re.compile(r"^/config/users/(?P<entity>[^/]+)$"), "entity_config"),
    (re.compile(r"^/config/users/(?P<user>[^/]+)/clients/(?P<client>[^/]+)$"), "entity_config"),
    (re.compile(r"^/kafka-acl/(?P<resource_type>[^/]+)/(?P<resource>[^/]+)$"), "acls"),
    (
        re.compile(
            r"^/kafka-acl-extended/(?P<pattern_type>[^/]+)/(?P<resource_type>[^/]+)/(?P<resource>[^/]+)$"
        ),
        "acls",
    ),
    (re.compile(rf"^/kafka-acl-changes/acl_changes_(?P<seq>{_SEQ})$"), "acl_change"),
    (re.compile(rf"^/kafka-acl-extended-changes/acl_changes_(?P<seq>{_SEQ})$"), "extended_acl_change"),
    (re.compile(r"^/latest_producer_id_block$"), "producer_id_block"),
    (re.compile(r"^/feature$"), "feature"),
    (re.compile(r"^/migration$"), "migration"),
    (re.compile(r"^/delegation_token/tokens/(?P<token>[^/]+)$"), "delegation_token"),
    (re.compile(rf"^/delegation_token/token_changes/token_change_(?P<seq>{_SEQ})$"), "token_change"),
    (
        re.compile(r"^/consumers/(?P<group>[^/]+)/offsets/(?P<topic>[^/]+)/(?P<partition>\d+)$"),
        "consumer_offset",
    ),
]


def classify(path: str) -> PathKind | None:
    """The Kafka payload kind stored at ``path`` (relative to the chroot), or None if unknown."""
    path = normalize(path)
    for pattern, kind in _PATTERNS:
        m = pattern.match(path)
        if m:
            params = {k: v for k, v in m.groupdict().items() if v is not None}
            if kind == "entity_config":
                if "entity_type" not in params:
                    if "client" in params:
                        params = {
                            "entity_type": "users",
                            "entity": f"{params['user']}/clients/{params['client']}",
                        }
                    else:
                        params = {"entity_type": "users", "entity": params["entity"]}
            return PathKind(kind, params)
    return None
