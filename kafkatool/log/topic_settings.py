"""A topic's effective settings: the ONE map from broker settings to topic settings.

Kafka combines three layers for a topic: its own overrides (topic names:
``retention.ms``...; kept in ZooKeeper ``/config/topics/T``, in the KRaft
``__cluster_metadata`` log, or, for ``kafkatool serve``, in the embedded
``kafkatool-cluster.json``), the broker's ``server.properties`` (broker names:
``log.retention.hours``...) and Kafka's defaults.  The broker (``serve``,
DescribeConfigs) and the offline commands (``retention``, ``compact``) both
resolve through this module, so they cannot disagree.

:data:`TOPIC_CONFIGS` is Kafka's ``ServerTopicConfigSynonyms``: for each topic
config, its broker synonyms in Kafka's priority order (the first one set wins:
``log.retention.ms`` before ``log.retention.minutes`` before
``log.retention.hours``) with the multiplier to the topic's unit, its
DescribeConfigs type and Kafka's default.

Offline, the topic layer may come from several places at once; each is a
:class:`ConfigLayer` with a label, and :func:`resolve` records for every
setting which layer gave the value, so commands can say so.  Order: flag >
--topic-config > live cluster > ZooKeeper > embedded metadata (a topic it holds
takes its configs from it alone, as serve does) > KRaft metadata log > the
internal topics' definition > evidence in the dir (the cleaner-offset-checkpoint
lists compacted partitions) > the broker's own dynamic configs > the cluster-wide
default ones > server.properties (:func:`broker_levels`, the one order of the
broker's settings, serve's BrokerConfig's as well) > Kafka's default.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from kafkatool.errors import KafkatoolError
from kafkatool.formats import java_utf8
from kafkatool.formats.errors import FormatError
from kafkatool.formats.properties import COMMA_WITH_WHITESPACE, decode_properties, java_trim, parse_java_int
from kafkatool.log import embedded_metadata
from kafkatool.log.config import LONG_MAX, LogConfig

HOUR_MS = 3_600_000
MINUTE_MS = 60_000

# config types as DescribeConfigs v3+ reports them
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: int
    #: (broker name, multiplier to the topic's unit), Kafka's priority order
    synonyms: tuple[tuple[str, int], ...]
    #: Kafka's default when neither the topic nor the broker sets it
    default: str


def _def(name: str, type_: int, synonyms, default) -> TopicConfigDef:
    if isinstance(default, bool):
        default = "true" if default else "false"
    return TopicConfigDef(name, type_, tuple(synonyms), str(default))


_LC = LogConfig()

#: topic config -> definition (Kafka's LogConfig + ServerTopicConfigSynonyms)
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _def("cleanup.policy", LIST, [("log.cleanup.policy", 1)], "delete"),
        _def("compression.type", STRING, [("compression.type", 1)], "producer"),
        _def("delete.retention.ms", LONG, [("log.cleaner.delete.retention.ms", 1)], _LC.delete_retention_ms),
        _def("file.delete.delay.ms", LONG, [("log.segment.delete.delay.ms", 1)], _LC.file_delete_delay_ms),
        _def("flush.messages", LONG, [("log.flush.interval.messages", 1)], _LC.flush_messages),
        _def(
            "flush.ms",
            LONG,
            [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)],
            _LC.flush_ms,
        ),
        _def("follower.replication.throttled.replicas", LIST, [], ""),
        _def("index.interval.bytes", INT, [("log.index.interval.bytes", 1)], _LC.index_interval_bytes),
        _def("leader.replication.throttled.replicas", LIST, [], ""),
        # tiered storage's local share (-2: retention.bytes / retention.ms); kept and described,
        # used by nothing here: without remote storage Kafka's retention reads retention.* alone
        _def("local.retention.bytes", LONG, [("log.local.retention.bytes", 1)], -2),
        _def("local.retention.ms", LONG, [("log.local.retention.ms", 1)], -2),
        _def(
            "max.compaction.lag.ms",
            LONG,
            [("log.cleaner.max.compaction.lag.ms", 1)],
            _LC.max_compaction_lag_ms,
        ),
        _def("max.message.bytes", INT, [("message.max.bytes", 1)], _LC.max_message_bytes),
        # deprecated since Kafka 3.0 and ignored for message format v2 (IBP >= 3.0); 3.x still
        # accepts it (librdkafka's test 0092 sets it), 4.0 removed it
        _def("message.format.version", STRING, [("log.message.format.version", 1)], "3.0-IV1"),
        # deprecated (KIP-724), honoured: false refuses a client's Fetch v0-3 (UNSUPPORTED_VERSION)
        _def(
            "message.downconversion.enable",
            BOOLEAN,
            [("log.message.downconversion.enable", 1)],
            _LC.message_downconversion_enable,
        ),
        # KIP-937 (Kafka 3.6): how far before/after the broker's clock a CreateTime record may be
        _def(
            "message.timestamp.after.max.ms",
            LONG,
            [("log.message.timestamp.after.max.ms", 1)],
            _LC.message_timestamp_after_max_ms,
        ),
        _def(
            "message.timestamp.before.max.ms",
            LONG,
            [("log.message.timestamp.before.max.ms", 1)],
            _LC.message_timestamp_before_max_ms,
        ),
        # deprecated since 3.6, still honoured where before/after are at their default
        _def(
            "message.timestamp.difference.max.ms",
            LONG,
            [("log.message.timestamp.difference.max.ms", 1)],
            _LC.message_timestamp_difference_max_ms,
        ),
        _def(
            "message.timestamp.type",
            STRING,
            [("log.message.timestamp.type", 1)],
            _LC.message_timestamp_type,
        ),
        _def(
            "min.cleanable.dirty.ratio",
            DOUBLE,
            [("log.cleaner.min.cleanable.ratio", 1)],
            _LC.min_cleanable_dirty_ratio,
        ),
        _def(
            "min.compaction.lag.ms",
            LONG,
            [("log.cleaner.min.compaction.lag.ms", 1)],
            _LC.min_compaction_lag_ms,
        ),
        _def("min.insync.replicas", INT, [("min.insync.replicas", 1)], 1),
        _def("preallocate", BOOLEAN, [("log.preallocate", 1)], _LC.preallocate),
        _def("remote.storage.enable", BOOLEAN, [], False),
        _def("retention.bytes", LONG, [("log.retention.bytes", 1)], _LC.retention_bytes),
        _def(
            "retention.ms",
            LONG,
            [
                ("log.retention.ms", 1),
                ("log.retention.minutes", MINUTE_MS),
                ("log.retention.hours", HOUR_MS),
            ],
            _LC.retention_ms,
        ),
        _def("segment.bytes", INT, [("log.segment.bytes", 1)], _LC.segment_bytes),
        _def("segment.index.bytes", INT, [("log.index.size.max.bytes", 1)], _LC.segment_index_bytes),
        _def(
            "segment.jitter.ms",
            LONG,
            [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)],
            _LC.segment_jitter_ms,
        ),
        _def("segment.ms", LONG, [("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)], _LC.segment_ms),
        _def("unclean.leader.election.enable", BOOLEAN, [("unclean.leader.election.enable", 1)], False),
    )
}
#: topic configs the storage engine uses (the rest are kept and described, not applied by LogConfig)
LOG_CONFIG_NAMES = frozenset(LogConfig.NAMES)

#: Kafka creates its internal topics with these configs (GroupCoordinator.offsetTopicConfigs,
#: TransactionStateManager.transactionTopicConfigs; segment.bytes from offsets.topic.segment.bytes /
#: transaction.state.log.segment.bytes, both 104857600 by default): they are compacted by definition.
INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    },
    "__transaction_state": {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": "104857600",
        "unclean.leader.election.enable": "false",
    },
}

# broker-only settings the cleaner needs (name -> Kafka default)
CLEANER_BROKER_DEFAULTS: dict[str, float] = {
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.threads": 1,
    "producer.id.expiration.ms": 86_400_000,
}

SOURCE_FLAG = "flag"
SOURCE_TOPIC = "topic config"
SOURCE_SERVER = "server.properties"
SOURCE_DEFAULT = "default"
SOURCE_EMBEDDED = "topic config in kafkatool-cluster.json"
SOURCE_KRAFT = "topic config in __cluster_metadata"
SOURCE_ZOOKEEPER = "topic config in ZooKeeper"
SOURCE_CLUSTER = "live cluster (DescribeConfigs)"
SOURCE_INTERNAL = "internal topic (Kafka creates it compacted)"
SOURCE_CLEANER_CHECKPOINT = "cleaner-offset-checkpoint lists it (compacted by the log cleaner)"

EMBEDDED_METADATA_FILE = embedded_metadata.FILE
#: the dynamic broker configs of ``kafkatool serve`` (IncrementalAlterConfigs of a BROKER resource:
#: this broker's and the cluster-wide defaults), in its first log dir; Kafka keeps them in
#: ZooKeeper or the metadata log, so they survive restarts
DYNAMIC_CONFIGS_FILE = "kafkatool-dynamic-broker-configs.json"
CLUSTER_METADATA_DIR = "__cluster_metadata-0"
#: the kinds of ConfigLayer.origins' keys: a topic's config, a dynamic broker config
TOPIC_ORIGIN = "topic"
BROKER_ORIGIN = "broker"


#: Kafka's Topic.MAX_NAME_LENGTH and legal characters (Topic.containsValidPattern)
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None: the broker's CreateTopics/Metadata/ACL
    checks and the reassignment files alike.  The words are InvalidTopicException's message,
    Kafka 3.7's Topic.validate (detectInvalidTopic behind "Topic name is invalid: "), which the
    broker answers as the error message of CreateTopics, IncrementalAlterConfigs and
    DescribeProducers; a name's length is Java's String.length(), in UTF-16 code units."""
    if not name:
        why = "the empty string is not allowed"
    elif name in (".", ".."):
        why = f"'{name}' is not allowed"
    elif java_utf8.java_length(name) > MAX_TOPIC_NAME:
        why = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    elif not set(name) <= _LEGAL_TOPIC_CHARS:
        why = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {why}"


def topic_name_collision(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' are one character in a topic's metric
    names, so two topics whose names differ only there collide (Topic.hasCollision)."""
    return name.replace(".", "_")


class SettingsError(KafkatoolError, ValueError):
    """A bad option or properties value (commands turn it into a one-line error, exit 2)."""


class InvalidConfigurationError(SettingsError):
    """A refusal Kafka's LogConfig raises as InvalidConfigurationException (an ApiException: an
    unknown name, conflicting compaction lags) where the others are ConfigExceptions; a
    ZooKeeper-mode broker answers the two differently (ZkAdminManager.alterConfigs)."""


# ----------------------------------------------------------------------------- values
_INT_BITS = {INT: 32, SHORT: 16, LONG: 64}
_TYPE_NAME = {INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE"}


def config_value_error(
    name: str,
    type_: int,
    value: str,
    lo: float | None = None,
    hi: float | None = None,
    allowed: Collection[str] | None = None,
) -> str | None:
    """ConfigDef.parseType of ``value`` as ``type_`` (INT, SHORT, LONG, DOUBLE, BOOLEAN, STRING,
    LIST) and its validator (Range.between(lo, hi) / atLeast(lo), ValidString.in / ValidList.in
    ``allowed``), the one rule of a config value for topic configs (:func:`validate_topic_config`),
    the broker's dynamic configs (dynamic_log_config.value_error) and the console tools' client
    configs (assign/client_config): ConfigException's message ("Invalid value V for configuration
    N: ..."), or None when Kafka takes the value."""
    raw = str(value).strip()

    def bad(shown, why: str) -> str:
        return f"Invalid value {shown} for configuration {name}: {why}"

    number: int | float | None = None
    if type_ in _INT_BITS:
        number = parse_java_int(raw, _INT_BITS[type_])
        if number is None:
            return bad(value, f"Not a number of type {_TYPE_NAME[type_]}")
    elif type_ == DOUBLE:
        try:
            number = float(raw.replace("_", "x"))  # Double.parseDouble takes no 1_000
        except ValueError:
            return bad(value, "Not a number of type DOUBLE")
    elif type_ == BOOLEAN:
        if raw.lower() not in ("true", "false"):
            return bad(value, "Expected value to be either true or false")
    if number is not None:
        if lo is not None and number < lo:
            return bad(number, f"Value must be at least {lo}")
        if hi is not None and number > hi:
            return bad(number, f"Value must be no more than {hi}")
    if allowed is not None:
        if type_ == LIST:  # "" is the empty list, nothing to check
            items = [x.strip() for x in raw.split(",")] if raw else []
        else:
            items = [raw]
        for item in items:
            if item not in allowed:
                return bad(item, f"String must be one of: {', '.join(allowed)}")
    return None


def _int(name: str, raw: str, lo: int | None = None) -> int:
    """A LONG config's value (config_value_error's rule: Long.parseLong of the trimmed text,
    Range.atLeast(lo)); SettingsError with Kafka's message."""
    err = config_value_error(name, LONG, raw, lo)
    if err is not None:
        raise SettingsError(err)
    return int(str(raw).strip())


_MINIMUM = {
    "segment.bytes": 14,
    "max.message.bytes": 0,
    "segment.index.bytes": 4,
    "index.interval.bytes": 0,
    "min.insync.replicas": 1,
    "segment.ms": 1,
    "flush.messages": 1,
    "flush.ms": 0,
    "delete.retention.ms": 0,
    "file.delete.delay.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "segment.jitter.ms": 0,
    "retention.ms": -1,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
    "message.timestamp.difference.max.ms": 0,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
}
#: compression.type's values, BrokerCompressionType's names in its order (ValidString: exactly)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: message.timestamp.type's values (TimestampType names), cleanup.policy's items, in LogConfig's order
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
#: LogConfig's Range.between and ValidString/ValidList.in validators (_MINIMUM: its atLeast);
#: KafkaConfig defines the topic defaults (the first broker synonyms) with the same ones
#: (log/dynamic_log_config takes them from here)
VALUE_BETWEEN = {"min.cleanable.dirty.ratio": (0, 1)}
VALUE_ONE_OF = {
    "compression.type": COMPRESSION_TYPES,
    "message.timestamp.type": TIMESTAMP_TYPES,
    "cleanup.policy": CLEANUP_POLICIES,
}


#: the two topic configs naming throttled replicas (LogConfig's LEADER_/FOLLOWER_REPLICATION_
#: THROTTLED_REPLICAS_CONFIG), checked by :func:`throttled_replicas`
THROTTLED_REPLICAS_CONFIGS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
#: a throttled-replicas value naming every replica (ReplicationQuotaManager's AllReplicas)
ALL_REPLICAS = "*"
_REPLICA_ENTRY = re.compile(r"(?:([0-9]+):([0-9]+))?")


def throttled_replicas(name: str, value: str) -> str | frozenset[tuple[int, int]]:
    """A ``*.replication.throttled.replicas`` value as Kafka 3.7 takes it: :data:`ALL_REPLICAS`,
    or the (partition, broker) pairs it names (empty: none).  The one rule of the value, for the
    broker's checks of a topic config (:func:`validate_topic_config`) and its replication quotas.

    ConfigDef parses the LIST (the value trimmed, "" the empty list, else split at commas with
    the whitespace around them) and ThrottledReplicaListValidator takes it when every item,
    trimmed, is empty or ``partition:broker`` in ASCII digits, or when the items joined are
    ``*``; else SettingsError with its ConfigException's message (the list as Java prints it).
    Kafka's ConfigHandler.parseThrottledPartitions then fails on some values the validator
    takes (``1:2,,3:4``, ``0:1, 1:2``, ``,*``): here they mean what they say."""
    trimmed = java_trim(str(value))
    items = COMMA_WITH_WHITESPACE.split(trimmed) if trimmed else []
    proposed = [java_trim(x) for x in items]
    if "".join(proposed) == ALL_REPLICAS:
        return ALL_REPLICAS
    matches = [_REPLICA_ENTRY.fullmatch(x) for x in proposed]
    if not all(matches):
        raise SettingsError(
            f"Invalid value [{', '.join(items)}] for configuration {name}: {name} must be the literal "
            "'*' or a list of replicas in the following format: [partitionId]:[brokerId],"
            "[partitionId]:[brokerId],..."
        )
    return frozenset((int(m.group(1)), int(m.group(2))) for m in matches if m.group(1) is not None)


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise SettingsError for an unknown topic config or a value Kafka would reject."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise InvalidConfigurationError(f"Unknown topic config name: {name}")  # LogConfig.validateNames
    if value is None:
        return
    # LogConfig's ConfigDef: parseType (of the trimmed text), then the definition's validator,
    # in Kafka's words (config_value_error)
    if name in THROTTLED_REPLICAS_CONFIGS:
        throttled_replicas(name, value)
        return
    if name == "message.format.version":  # MetadataVersionValidator: fromVersionString's message
        text = str(value)
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?(-IV\d+)?", text.strip()):
            raise SettingsError(
                f"Invalid value {text} for configuration {name}: Version {text} is not a valid version"
            )
        return
    lo, hi = VALUE_BETWEEN.get(name, (_MINIMUM.get(name), None))
    err = config_value_error(name, d.type, value, lo, hi, VALUE_ONE_OF.get(name))
    if err is not None:
        raise SettingsError(err)


def broker_value(name: str, broker: Mapping[str, str]) -> tuple[str, str | None]:
    """(value, broker setting that gave it) a topic without an override has for ``name``.

    ``broker`` holds the broker settings that are explicitly set (server.properties,
    overrides, dynamic configs); the first synonym set wins, else Kafka's default
    (broker setting None).  A negative retention in minutes or hours means unlimited (-1),
    as Kafka's ``logRetentionTimeMillis`` says.  The broker's before/after timestamp limits
    may come from log.message.timestamp.difference.max.ms (:func:`_timestamp_window`), which
    is then the setting named.
    """
    d = TOPIC_CONFIGS[name]
    for broker_name, mult in d.synonyms:
        raw = broker.get(broker_name)
        if raw is None:
            continue
        if mult != 1 or name == "retention.ms":
            n = _int(broker_name, raw)
            if n < 0 and name == "retention.ms":
                return "-1", broker_name
            return str(n * mult), broker_name
        value = str(raw).strip()
        if name in _TIMESTAMP_WINDOW:
            return _timestamp_window(broker_name, value, broker)
        return value, broker_name
    if name in _TIMESTAMP_WINDOW:
        return _timestamp_window(None, d.default, broker)
    return d.default, None


_TIMESTAMP_WINDOW = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms")
_TIMESTAMP_DIFFERENCE = "log.message.timestamp.difference.max.ms"


def _timestamp_window(
    broker_name: str | None, value: str, broker: Mapping[str, str]
) -> tuple[str, str | None]:
    """KafkaConfig.logMessageTimestampBeforeMaxMs / AfterMaxMs, the topic default
    (extractLogConfigMap): the broker's before/after (``broker_name``: set, or None: Kafka's
    default) while it is at its default (Long.MAX_VALUE), else the deprecated
    log.message.timestamp.difference.max.ms.

    That default is a value of the topic's before/after, not of its difference, so (KIP-937's
    compatibility rule, LogConfig.getMessageTimestampBeforeMaxMs) a broker-level difference
    outranks a topic's own message.timestamp.difference.max.ms: the topic's difference is
    consulted only while its before/after is at Long.MAX_VALUE, and the broker's difference
    has just made it something else.  The broker (``BrokerConfig.log_config``: these defaults
    under the topic's overrides) and the offline :func:`resolve` both take it from here."""
    raw = broker.get(_TIMESTAMP_DIFFERENCE)
    if raw is None or _int(broker_name or _TIMESTAMP_DIFFERENCE, value) != LONG_MAX:
        return value, broker_name
    return str(_int(_TIMESTAMP_DIFFERENCE, raw)), _TIMESTAMP_DIFFERENCE


#: LogConfig.validateRemoteStorageOnlyIfSystemEnabled's refusal (this broker is one with
#: remote.log.storage.system.enable=false: tiered storage is not implemented) of a change
REMOTE_STORAGE_DISABLED = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
#: the same check's message for a config the broker receives from its store
#: (isReceivingConfigFromStore: LogManager.updateTopicConfig)
REMOTE_STORAGE_STORED = (
    "You have to delete all topics with the property remote.storage.enable=true "
    "before disabling tiered storage cluster-wide"
)


def remote_storage_enabled(configs: Mapping[str, str | None]) -> bool:
    """Whether a topic's configs set remote.storage.enable=true (ConfigDef's BOOLEAN parse)."""
    value = configs.get("remote.storage.enable")
    return value is not None and str(value).strip().lower() == "true"


def stored_topic_config_error(configs: Mapping[str, str | None]) -> str | None:
    """Kafka 3.7's check of a topic's configs as a broker takes them from where they are stored
    (LogManager.updateTopicConfig -> LogConfig.validateRemoteStorageOnlyIfSystemEnabled with
    isReceivingConfigFromStore; remote storage is never on here): the error, or None.

    What a broker does with it depends on where they are stored, as in Kafka:
    - KRaft (DynamicConfigPublisher; the embedded metadata is this broker's KRaft metadata):
      a metadata publishing fault, logged as an error and not fatal; the logs loaded at
      start-up have the stored configs all the same (LogManager.loadLogs checks nothing) and
      are local logs (UnifiedLog.remoteLogEnabled needs the system on); a later change of the
      topic's configs is refused by the controller (validate_topic_change) unless it drops
      remote.storage.enable.
    - ZooKeeper: at start-up ZkConfigManager.startup applies every /config/topics entry, so
      one such topic stops the broker (KafkaServer.startup's fatal error); a change
      notification carrying one is logged as an error and nothing of it is applied
      (ZkNodeChangeNotificationListener.processNotification).
    The message does not name the topic; callers add it and the place it was read from."""
    return REMOTE_STORAGE_STORED if remote_storage_enabled(configs) else None


def refused_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The values of a topic's stored configs a broker refuses (name -> why): the check a
    broker's topic LogConfig makes of every topic config it holds (:func:`log_config_from`,
    :func:`validate_topic_config`; Kafka's LogConfig.fromProps, which stops a broker's start-up,
    LogManager.fetchTopicConfigOverrides).  Names that are no topic config are not looked at,
    as a LogConfig keeps them without a look."""
    out = {}
    for name, value in configs.items():
        if name in TOPIC_CONFIGS:
            try:
                validate_topic_config(name, value)
            except SettingsError as exc:
                out[name] = str(exc)
    return out


@dataclass(frozen=True)
class StoredRefusal:
    """What a broker says of one config a topic has stored (:func:`stored_refusals`), and where
    it is stored: the file, and for a place with records (a KRaft log) the record's offset and
    its batch's byte position.  serve's start-up refusal and the fleet scan's findings say it
    the same way (its ``str``)."""

    topic: str
    name: str
    #: the check's message (it names the value)
    why: str
    #: the label of the layer that keeps it
    store: str
    file: str
    offset: int | None = None
    position: int | None = None

    @property
    def where(self) -> str:
        if self.offset is None:
            return self.file
        return f"{self.file}, record at offset {self.offset}, batch at byte {self.position}"

    def __str__(self) -> str:
        return f"topic {self.topic}: stored config refused: {self.why} (in {self.store}: {self.where})"


def _stored_at(layer: ConfigLayer, topic: str, name: str, why: str) -> StoredRefusal:
    file, offset, position = layer.origins.get(
        (TOPIC_ORIGIN, topic, name), (layer.kept_in or layer.label, None, None)
    )
    return StoredRefusal(topic, name, why, layer.label, file, offset, position)


def stored_refusals(layer: ConfigLayer, topic: str | None = None) -> list[StoredRefusal]:
    """The topic config values kept in ``layer`` (``topic``: that topic's only) that a broker's
    topic LogConfig refuses (:func:`refused_topic_configs`: Kafka does not start with one), each
    with where it is stored."""
    out = []
    for t, configs in layer.topics.items():
        if t is not None and (topic is None or t == topic):
            out += [_stored_at(layer, t, name, why) for name, why in refused_topic_configs(configs).items()]
    return out


def stored_remote_storage(layer: ConfigLayer) -> list[StoredRefusal]:
    """The topics ``layer`` keeps with remote.storage.enable=true, which a broker without tiered
    storage (every one here) refuses as it takes them from the store
    (:func:`stored_topic_config_error`), each with where the value is stored."""
    return [
        _stored_at(layer, t, "remote.storage.enable", err)
        for t, configs in layer.topics.items()
        if t is not None and (err := stored_topic_config_error(configs)) is not None
    ]


def validate_topic_change(overrides: Mapping[str, str | None], defaults: Mapping[str, str]) -> None:
    """Kafka's LogConfig.validate(props, the broker's topic defaults, remote storage off) for a
    topic's overrides as CreateTopics or AlterConfigs would leave them: every name and value,
    then the rules between values on the overrides over ``defaults`` (validateValues: the
    compaction lags; validateTopicLogConfigValues: remote.storage.enable only where the broker's
    tiered storage is on, which here it never is).  The local.retention.* bounds against
    retention.* (validateRemoteStorageRetentionSize/Time) apply only with remote.storage.enable,
    so they never do here.  SettingsError with Kafka's message."""
    for name, value in overrides.items():
        validate_topic_config(name, value)
    values = {**defaults, **{k: v for k, v in overrides.items() if v is not None}}
    min_lag = _int("min.compaction.lag.ms", values.get("min.compaction.lag.ms", "0"))
    max_lag = _int("max.compaction.lag.ms", values.get("max.compaction.lag.ms", str(LONG_MAX)))
    if min_lag > max_lag:
        raise InvalidConfigurationError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )
    if remote_storage_enabled(values):
        raise SettingsError(REMOTE_STORAGE_DISABLED)


def topic_defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """Every topic config with the value a topic without overrides has on this broker."""
    return {name: broker_value(name, broker)[0] for name in TOPIC_CONFIGS}


def log_config_from(values: Mapping[str, str]) -> LogConfig:
    """The LogConfig for topic-named values (names LogConfig does not hold are ignored)."""
    for k, v in values.items():
        if k in TOPIC_CONFIGS:
            validate_topic_config(k, v)
    # an empty value is no value, but for a LIST ("" is the empty list: Kafka 3.7 takes an empty
    # cleanup.policy, a topic that neither deletes nor compacts)
    chosen = {
        k: v
        for k, v in values.items()
        if k in LOG_CONFIG_NAMES and (v != "" or (k in TOPIC_CONFIGS and TOPIC_CONFIGS[k].type == LIST))
    }
    try:
        return LogConfig().with_overrides(chosen)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


# ----------------------------------------------------------------------------- layers
@dataclass
class ConfigLayer:
    """Topic configs found in one place: ``topics[name] = {config: value}``; ``None`` = every topic."""

    label: str
    topics: dict[str | None, dict[str, str]] = field(default_factory=dict)
    #: what the reader noticed (unreadable records, conflicting values...)
    notes: list[str] = field(default_factory=list)
    #: dynamic broker settings kept here, at their two levels: cluster-wide defaults (a KRaft
    #: ConfigRecord for the broker resource "") and this node's own (:func:`broker_values` says
    #: how they override server.properties)
    broker_default: dict[str, str] = field(default_factory=dict)
    broker_node: dict[str, str] = field(default_factory=dict)
    #: where each config was stored, when the place has records (a KRaft log): (TOPIC_ORIGIN,
    #: topic, name) or (BROKER_ORIGIN, per_broker, name) -> (file, offset of the record, byte
    #: position of its batch)
    origins: dict[tuple, tuple[str, int, int]] = field(default_factory=dict)
    #: a topic held here takes its topic configs from here alone: the layers below are not read
    #: for it (serve's embedded metadata, which serve reads that way: :func:`topic_layers`)
    whole: bool = False
    #: the file or dir that keeps these configs, when the layer was read from one
    kept_in: str | None = None

    @property
    def broker(self) -> dict[str, str]:
        """The dynamic broker settings kept here, per-broker over cluster default."""
        return merge_broker_levels({}, self.broker_default, self.broker_node)

    def get(self, topic: str) -> dict[str, str]:
        out = dict(self.topics.get(None, {}))
        out.update(self.topics.get(topic, {}))
        return out

    def holds(self, topic: str) -> bool:
        return topic in self.topics or None in self.topics


def internal_layer() -> ConfigLayer:
    return ConfigLayer(SOURCE_INTERNAL, {n: dict(c) for n, c in INTERNAL_TOPIC_CONFIGS.items()})


def read_embedded(log_dir: Path) -> ConfigLayer | None:
    """Topic configs of ``kafkatool serve``'s embedded metadata in ``log_dir`` (None: no file),
    checked as the broker checks it (log/embedded_metadata: a file it refuses gives no configs
    and a note saying why)."""
    path = Path(log_dir) / EMBEDDED_METADATA_FILE
    try:
        checked = embedded_metadata.read(path)
    except embedded_metadata.EmbeddedMetadataError as exc:
        return ConfigLayer(SOURCE_EMBEDDED, {}, [f"{exc}; its topic configs are not used"], kept_in=str(path))
    if checked is None:
        return None
    topics = {
        str(name): {str(k): str(v) for k, v in t.get("configs", {}).items()}
        for name, t in checked.data.get("topics", {}).items()
    }
    return ConfigLayer(SOURCE_EMBEDDED, topics, whole=True, kept_in=str(path))


def read_dynamic_broker_configs(log_dir: Path) -> ConfigLayer | None:
    """The dynamic broker configs ``kafkatool serve`` keeps in ``log_dir`` (None: no file): the
    cluster-wide defaults and the broker's own (``broker_default``, ``broker_node``), the broker's
    reading at start-up and the offline commands' (a log.retention.ms set at runtime is the
    broker's value for every topic without an override)."""
    path = Path(log_dir) / DYNAMIC_CONFIGS_FILE
    layer = ConfigLayer(DYNAMIC_CONFIGS_FILE, kept_in=str(path))
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        layer.notes.append(f"{path}: unreadable ({exc}); its dynamic broker configs are not used")
        return layer
    if not isinstance(doc, dict):
        layer.notes.append(f"{path}: not a JSON object; its dynamic broker configs are not used")
        return layer
    for key, target in (("default_configs", layer.broker_default), ("configs", layer.broker_node)):
        configs = doc.get(key)
        for name, value in (configs if isinstance(configs, dict) else {}).items():
            if isinstance(value, str):
                target[str(name)] = value
    return layer


def read_kraft(log_dir: Path, node_id: int | None = None) -> ConfigLayer | None:
    """The configs of ``__cluster_metadata-0`` in ``log_dir`` (latest snapshot, then the log), as
    the broker's image holds them after a load (log/metadata_log.load_directory, the one replay:
    a ConfigRecord with a null value deletes the config, a RemoveTopicRecord drops the topic and
    its configs).  Every topic of the image is in the layer, with or without configs.  None when
    the dir has no metadata log.  The dynamic broker configs (resource type 4) are the
    cluster-wide default ("") and those of ``node_id``, the broker reading the dir (Kafka's
    configured node.id, which must match meta.properties; None: the dir's meta.properties says).
    """
    from kafkatool.log.metadata_log import load_directory

    mdir = Path(log_dir) / CLUSTER_METADATA_DIR
    if not mdir.is_dir():
        return None
    layer = ConfigLayer(SOURCE_KRAFT, kept_in=str(mdir))
    if node_id is None:
        node_id = node_id_of(Path(log_dir))
    try:
        load = load_directory(mdir)
    except OSError as exc:
        layer.notes.append(f"{exc.filename or mdir}: {exc.strerror or exc}")
        return layer
    if load.damage is not None:
        layer.notes.append(f"metadata log damaged: {load.damage.line()}")
    layer.notes += load.gaps
    image = load.image
    topics: dict[str | None, dict[str, str]] = {name: {} for name in image.topic_ids}
    for name, configs in image.topic_configs().items():
        topics.setdefault(name, {}).update(configs)
    layer.topics = topics
    layer.broker_default = dict(image.configs.get((4, ""), {}))
    layer.broker_node = dict(image.configs.get((4, str(node_id)), {})) if node_id is not None else {}
    for (kind, name, config), where in image.config_origins.items():
        if kind == 2 and config in topics.get(name, ()):
            layer.origins[(TOPIC_ORIGIN, name, config)] = where
        elif kind == 4 and name in ("", str(node_id)):
            layer.origins[(BROKER_ORIGIN, name != "", config)] = where
    return layer


def node_id_of(log_dir: Path) -> int | None:
    """broker.id / node.id from the log dir's meta.properties (None when unreadable)."""
    from kafkatool.formats.properties import META_PROPERTIES_FILE, decode_meta_properties

    try:
        return decode_meta_properties((log_dir / META_PROPERTIES_FILE).read_bytes()).node_id
    except (OSError, ValueError, FormatError):
        return None


def dir_layers(log_dirs: list[Path], node_id: int | None = None) -> list[ConfigLayer]:
    """The topic-config layers a set of log dirs holds, highest first, in the order serve takes
    them: ``kafkatool serve``'s dynamic broker configs (changes made through serve, which takes
    them over the KRaft log's: Broker._take_kraft_configs), serve's embedded metadata, then the
    KRaft metadata log; ``node_id``: the broker whose own dynamic configs the KRaft log holds
    (None: each dir's meta.properties says).

    A dir holds both metadata stores once serve has run on a dir a KRaft broker wrote (serve's
    first writable start takes the KRaft log's topics into kafkatool-cluster.json; serve never
    writes the KRaft log, and never reads it again for a topic the file holds): the file's
    configs are the topic's, changes made through serve included, the log's the state before
    them (:attr:`ConfigLayer.whole`)."""
    dynamic, embedded, kraft = [], [], []
    for d in log_dirs:
        for found, into in (
            (read_dynamic_broker_configs(d), dynamic),
            (read_embedded(d), embedded),
            (read_kraft(d, node_id), kraft),
        ):
            if found is not None:
                into.append(found)
    return dynamic + embedded + kraft


def topic_layers(topic: str, layers: Sequence[ConfigLayer]) -> list[ConfigLayer]:
    """The layers (highest first) whose topic configs count for ``topic``: every one down to the
    first :attr:`ConfigLayer.whole` layer that holds it (serve's embedded metadata: serve runs a
    topic it holds with the file's configs alone, a config deleted through serve included)."""
    out = []
    for layer in layers:
        out.append(layer)
        if layer.whole and layer.holds(topic):
            break
    return out


# ----------------------------------------------------------------------------- resolution
@dataclass
class ResolvedConfig:
    topic: str
    config: LogConfig
    # topic config name -> (value as given, where it came from, e.g. "server.properties (log.retention.hours)")
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: what lower layers said that a higher one overrode: name -> [(value, source)]
    shadowed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: the sources that hold this topic (an entry, even with no overrides): empty = nobody describes it
    found_in: list[str] = field(default_factory=list)

    def source_of(self, name: str) -> str:
        return self.sources.get(name, ("", SOURCE_DEFAULT))[1]

    def describe(self, names: list[str]) -> dict[str, dict]:
        out = {}
        for name in names:
            attr = LogConfig.NAMES[name]
            value = getattr(self.config, attr)
            if isinstance(value, tuple):
                value = ",".join(value)
            out[name] = {"value": value, "source": self.source_of(name)}
        return out

    def below_flag(self, name: str) -> tuple[str, str] | None:
        """(value, source) ``name`` would have without the command-line flag (None: not a flag)."""
        if self.source_of(name) != SOURCE_FLAG:
            return None
        lower = self.shadowed.get(name) or []
        if lower:
            return lower[0]
        return TOPIC_CONFIGS[name].default, SOURCE_DEFAULT


def load_server_properties(path: str | os.PathLike) -> dict[str, str]:
    """Parse a broker's ``server.properties`` (Java properties syntax)."""
    return decode_properties(Path(path).read_bytes())


def parse_topic_overrides(items: list[str]) -> dict[str | None, dict[str, str]]:
    """``key=value`` (every topic) or ``TOPIC:key=value`` (one topic; topic names cannot contain ':')."""
    out: dict[str | None, dict[str, str]] = {}
    for item in items:
        if "=" not in item:
            raise SettingsError(f"--topic-config {item!r}: expected key=value or TOPIC:key=value")
        left, value = item.split("=", 1)
        topic, _, key = left.rpartition(":")
        key = key.strip()
        if key not in LogConfig.NAMES:
            raise SettingsError(f"--topic-config {item!r}: unknown topic config {key!r}")
        out.setdefault(topic or None, {})[key] = value.strip()
    return out


def _checked(name: str, raw: str, where: str) -> str:
    try:
        validate_topic_config(name, raw)
    except SettingsError as exc:
        raise SettingsError(f"{exc} ({where})") from None
    return str(raw).strip()


def resolve(
    topic: str,
    *,
    server_props: dict[str, str] | None = None,
    topic_overrides: dict[str | None, dict[str, str]] | None = None,
    layers: list[ConfigLayer] | None = None,
    flags: dict[str, object] | None = None,
) -> ResolvedConfig:
    """The topic's LogConfig: flag > --topic-config > ``layers`` in order (down to the first
    whole one that holds the topic: :func:`topic_layers`) > internal-topic definition (always:
    what Kafka keeps by definition) > the layers' dynamic broker configs and server.properties
    (:func:`broker_values`) > Kafka's default."""
    server_props = server_props or {}
    stack: list[ConfigLayer] = []
    if topic_overrides:
        stack.append(ConfigLayer(SOURCE_TOPIC, dict(topic_overrides)))
    stack += layers or []
    topic_stack = topic_layers(topic, stack)
    if topic in INTERNAL_TOPIC_CONFIGS:
        stack.append(internal_layer())
        topic_stack.append(stack[-1])
    # lowest first, so that a higher layer overwrites and the lower value is kept as shadowed
    chosen: dict[str, str] = {}
    sources: dict[str, tuple[str, str]] = {}
    shadowed: dict[str, list[tuple[str, str]]] = {}

    def put(name: str, value: str, source: str) -> None:
        if name in sources:
            shadowed.setdefault(name, []).insert(0, sources[name])
        chosen[name] = value
        sources[name] = (value, source)

    # broker settings: dynamic ones (from the layers) override server.properties name by name,
    # then Kafka's synonym order applies to the merged set (DynamicBrokerConfig, KafkaConfig)
    merged, broker_src = broker_values(server_props, stack)
    for name in LOG_CONFIG_NAMES:
        value, broker_name = broker_value(name, merged)
        if broker_name is not None:
            _checked(name, value, broker_src[broker_name])
            put(name, value, broker_src[broker_name])
    for layer in reversed(topic_stack):
        for name, raw in layer.get(topic).items():
            if name not in LOG_CONFIG_NAMES:
                continue
            put(name, _checked(name, raw, layer.label), layer.label)
    for name, value in (flags or {}).items():
        if value is None:
            continue
        put(name, _checked(name, str(value), f"--{name.replace('.', '-')}"), SOURCE_FLAG)
    found_in = [layer.label for layer in stack if layer.holds(topic)]
    config = log_config_from(chosen)
    if "producer.id.expiration.ms" in merged:
        pid_ms = _int("producer.id.expiration.ms", merged["producer.id.expiration.ms"])
        config = replace(config, producer_id_expiration_ms=pid_ms)
    return ResolvedConfig(topic, config, sources, shadowed, found_in)


_Level = TypeVar("_Level")


def broker_levels(static: _Level, default: _Level, node: _Level) -> tuple[_Level, _Level, _Level]:
    """Kafka's order of the levels a broker setting is set at, highest first
    (DynamicBrokerConfig: ``node``, the broker's own dynamic configs, over ``default``, the
    cluster-wide default ones, over ``static``, server.properties; Kafka's defaults, below them,
    are the caller's), of whatever stands for each level (their values, their sources).  The
    one order: serve's BrokerConfig keeps its layers in it (resolved when a layer is replaced,
    not per lookup), :func:`merge_broker_levels` and :func:`broker_values` (the offline
    commands, the fleet scan) merge by it."""
    return node, default, static


def merge_broker_levels(
    static: Mapping[str, str], default: Mapping[str, str], node: Mapping[str, str]
) -> dict[str, str]:
    """The values set at the three levels merged, a higher level's over a lower one's
    (:func:`broker_levels`)."""
    out: dict[str, str] = {}
    for level in reversed(broker_levels(static, default, node)):
        out.update(level)
    return out


def broker_values(
    server_props: Mapping[str, str] | None, layers: Sequence[ConfigLayer] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """The broker settings set for a broker with ``server_props`` (server.properties) and the
    dynamic broker configs kept in ``layers`` (highest first), and where each value comes from:
    :func:`broker_levels`' order, a higher layer's over a lower one's at the same level.  The
    order of the offline commands and the fleet scan, for a topic's defaults (:func:`resolve`)
    and the broker-only settings alike (:func:`broker_setting`)."""

    def level(attr: str) -> tuple[dict[str, str], dict[str, str]]:
        values: dict[str, str] = {}
        sources: dict[str, str] = {}
        for layer in reversed(layers):
            for k, v in getattr(layer, attr).items():
                values[k] = v
                sources[k] = f"{layer.label}: dynamic broker config ({k})"
        return values, sources

    static = dict(server_props or {})
    levels = broker_levels(
        (static, {k: f"{SOURCE_SERVER} ({k})" for k in static}),
        level("broker_default"),
        level("broker_node"),
    )
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for level_values, level_sources in reversed(levels):
        values.update(level_values)
        sources.update(level_sources)
    return values, sources


def broker_set_value(
    name: str, server_props: Mapping[str, str] | None, layers: Sequence[ConfigLayer] = ()
) -> tuple[str, str] | None:
    """(value, source) of a broker setting as :func:`broker_values` sets it, None: unset (Kafka's
    default applies)."""
    values, sources = broker_values(server_props, layers)
    return (values[name], sources[name]) if name in values else None


def broker_setting(
    server_props: Mapping[str, str] | None, name: str, layers: Sequence[ConfigLayer] = ()
) -> tuple[float, str]:
    """A broker-only cleaner setting and its source (:func:`broker_set_value`, else Kafka's
    default)."""
    found = broker_set_value(name, server_props, layers)
    if found is None:
        return CLEANER_BROKER_DEFAULTS[name], SOURCE_DEFAULT
    value, source = found
    try:
        return float(value), source
    except ValueError:
        raise SettingsError(f"invalid value {value!r} for {name} ({source})") from None
