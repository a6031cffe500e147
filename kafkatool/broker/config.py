"""Broker settings with Kafka's ``server.properties`` names and defaults.

The broker-level ``log.*`` names map onto the topic-level names
(``log.segment.bytes`` -> ``segment.bytes``) through the one map in
:mod:`kafkatool.log.topic_settings` (Kafka's ServerTopicConfigSynonyms), which
the offline commands use too: a topic created without overrides inherits the
broker's values and DescribeConfigs can say where each value came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import properties as props
from kafkatool.log import dynamic_log_config as dlc
from kafkatool.log import topic_settings as ts
from kafkatool.log.config import LONG_MAX, LogConfig
from kafkatool.log.topic_settings import (  # noqa: F401 (re-exported for the handlers)
    BOOLEAN,
    CLASS,
    COMPRESSION_TYPES,
    DOUBLE,
    INT,
    LIST,
    LONG,
    PASSWORD,
    SHORT,
    STRING,
)

DEFAULT_DATA_DIR = "./kafkatool-data"
DEFAULT_LISTENER = "PLAINTEXT://127.0.0.1:9092"
#: Kafka's default listener.security.protocol.map
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# source codes (DescribeConfigs v1+)
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_BROKER_LOGGER = 6  # ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
SOURCE_GROUP = 8  # ConfigSource.GROUP_CONFIG


class ConfigError(ts.SettingsError):
    """A setting with a value Kafka would reject (INVALID_CONFIG on the wire)."""


# ---------------------------------------------------------------- dynamic broker configs
# Which broker configs change at runtime, Kafka 3.7's DynamicBrokerConfig (ZooKeeper mode): the
# reconfigurable sets of the components that apply them, by Kafka's names.  DescribeConfigs says
# read_only=false exactly for AllDynamicConfigs; IncrementalAlterConfigs takes them with a broker
# id, and with "" (the cluster-wide default, /config/brokers/<default>) unless per-broker only.
#: SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs): per listener and per broker only
_SSL_RECONFIGURABLE = frozenset(
    (
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    )
)
#: DynamicListenerConfig.ReconfigurableConfigs
_LISTENER_RECONFIGURABLE = _SSL_RECONFIGURABLE | frozenset(
    (
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    )
)
#: DynamicBrokerConfig.ClusterLevelListenerConfigs: listener configs that are cluster-wide
_CLUSTER_LEVEL_LISTENER = frozenset(
    ("max.connections", "max.connection.creation.rate", "num.network.threads")
)
#: DynamicLogConfig.ReconfigurableConfigs (log/dynamic_log_config: the rule of the topic defaults)
_DYNAMIC_LOG = dlc.DYNAMIC_LOG_CONFIGS
_OTHER_RECONFIGURABLE = frozenset(
    (
        # LogCleaner.ReconfigurableConfigs
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        # DynamicThreadPool.ReconfigurableConfigs
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "metric.reporters",
        # SocketServer.ReconfigurableConfigs
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connections",
        "max.connection.creation.rate",
        # ProducerStateManagerConfig.RECONFIGURABLE_CONFIGS
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        # DynamicRemoteLogConfig.ReconfigurableConfigs
        "remote.log.index.file.cache.total.size.bytes",
    )
)
#: DynamicBrokerConfig.AllDynamicConfigs
ALL_DYNAMIC_CONFIGS = _LISTENER_RECONFIGURABLE | _DYNAMIC_LOG | _OTHER_RECONFIGURABLE
#: DynamicBrokerConfig.PerBrokerConfigs: never at the cluster-wide default
PER_BROKER_CONFIGS = _LISTENER_RECONFIGURABLE - _CLUSTER_LEVEL_LISTENER
#: DynamicConfig.Broker's own configs (the replication and log-dir move throttles): dynamic only,
#: at either level, with no KafkaConfig definition; not in AllDynamicConfigs, so described
#: read_only, and listed for a broker only where set (KafkaConfig's originals)
DYNAMIC_ONLY_CONFIGS = frozenset(
    (
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    )
)

#: the sources of BrokerConfig's layers, in their order (topic_settings.broker_levels)
_LAYER_SOURCES = ts.broker_levels(SOURCE_STATIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER, SOURCE_DYNAMIC_BROKER)
#: BrokerConfig's fields that hold the three levels
_LEVEL_FIELDS = frozenset(("explicit", "dynamic", "dynamic_default"))

#: update modes (DynamicBrokerConfig.dynamicConfigUpdateModes, and the throttles' own)
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"
DYNAMIC_ONLY = "dynamic-only"


def update_mode(name: str) -> str | None:
    """How ``name`` changes at runtime in Kafka (None: read-only, server.properties only)."""
    if name in DYNAMIC_ONLY_CONFIGS:
        return DYNAMIC_ONLY
    if name in PER_BROKER_CONFIGS:
        return PER_BROKER
    if name in ALL_DYNAMIC_CONFIGS:
        return CLUSTER_WIDE
    return None


def read_only(name: str) -> bool:
    """DescribeConfigs' read_only: !DynamicBrokerConfig.AllDynamicConfigs.contains(name) (so a
    listener override or a name Kafka does not know is read-only)."""
    return name not in ALL_DYNAMIC_CONFIGS


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: int
    default: str | None
    doc: str = ""
    #: this broker applies a dynamic value at once: IncrementalAlterConfigs may set it (at a
    #: broker id or the cluster-wide default, as its update mode allows)
    alterable: bool = False

    @property
    def dynamic(self) -> str | None:
        return update_mode(self.name)

    @property
    def read_only(self) -> bool:
        return read_only(self.name)


#: kafkatool's own: the append writer (log/append_writer.py), see BROKER_CONFIGS
APPEND_WRITER_CONFIG = "kafkatool.append.writer"
APPEND_WRITER_VALUES = ("auto", "true", "false")


def _d(name: str, type_: int, default, doc: str = "", alterable: bool = False) -> ConfigDef:
    # DynamicLogConfig: the broker's topic defaults apply to every log at once (Broker.reconfigure_logs)
    alterable = alterable or name in _DYNAMIC_LOG
    if default is None:
        value = None
    elif isinstance(default, bool):
        value = "true" if default else "false"
    else:
        value = str(default)
    return ConfigDef(name, type_, value, doc, alterable)


#: broker settings served (name -> definition), Kafka's defaults
BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _d("broker.id", INT, -1, "The broker id (node.id in KRaft mode)."),
        _d("node.id", INT, -1, "The node id."),
        # STRING in KafkaConfig, though comma-separated: DescribeConfigs types them so, and
        # IncrementalAlterConfigs' APPEND/SUBTRACT refuses them ("not allowed")
        _d("listeners", STRING, DEFAULT_LISTENER, "Listener URIs the broker binds."),
        _d("advertised.listeners", STRING, None, "Listener URIs given to clients (default: listeners)."),
        _d(
            "listener.security.protocol.map",
            STRING,
            DEFAULT_PROTOCOL_MAP,
            "Listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
        ),
        _d("inter.broker.listener.name", STRING, None, "Listener brokers use between themselves."),
        _d("security.inter.broker.protocol", STRING, "PLAINTEXT", "Protocol brokers use between themselves."),
        _d(
            "max.connections",
            INT,
            2147483647,
            "Most connections at once (broker-wide; per listener as listener.name.<name>.max.connections).",
        ),
        _d("max.connections.per.ip", INT, 2147483647, "Most connections from one address."),
        _d(
            "max.connections.per.ip.overrides",
            STRING,
            "",
            "host:count,... exceptions to max.connections.per.ip.",
        ),
        # TLS (broker/security/tls.py); each may be prefixed listener.name.<name>.
        _d("ssl.keystore.type", STRING, "JKS", "PEM or PKCS12 (JKS: convert with keytool)."),
        _d("ssl.keystore.location", STRING, None),
        _d("ssl.keystore.password", PASSWORD, None),
        _d("ssl.key.password", PASSWORD, None),
        _d("ssl.keystore.certificate.chain", PASSWORD, None, "PEM certificate chain (keystore.type=PEM)."),
        _d("ssl.keystore.key", PASSWORD, None, "PEM private key (keystore.type=PEM)."),
        _d("ssl.truststore.type", STRING, "JKS", "PEM or PKCS12."),
        _d("ssl.truststore.location", STRING, None),
        _d("ssl.truststore.password", PASSWORD, None),
        _d("ssl.truststore.certificates", PASSWORD, None, "PEM trusted certificates (truststore.type=PEM)."),
        _d("ssl.client.auth", STRING, "none", "none, requested or required."),
        _d("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3"),
        _d("ssl.protocol", STRING, "TLSv1.3", "Accepted; the versions offered are ssl.enabled.protocols'."),
        _d("ssl.cipher.suites", LIST, "", "IANA cipher suite names (TLS 1.2); empty: OpenSSL's defaults."),
        _d("ssl.principal.mapping.rules", STRING, "DEFAULT", "RULE:pattern/replacement/[LU],... on the DN."),
        _d("ssl.endpoint.identification.algorithm", STRING, "https"),
        # SASL (broker/security/sasl.py); also per listener: listener.name.<name>.*
        _d("sasl.enabled.mechanisms", LIST, "GSSAPI", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are served."),
        _d("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI"),
        _d("authorizer.class.name", STRING, "", "kafka.security.authorizer.AclAuthorizer enables ACLs."),
        _d("super.users", STRING, None, "Principals allowed everything: User:a;User:b."),
        _d("allow.everyone.if.no.acl.found", BOOLEAN, False, "Allow a resource no ACL names."),
        _d("connections.max.reauth.ms", LONG, 0, "SASL session lifetime (KIP-368); 0: no re-authentication."),
        # delegation tokens (broker/security/tokens.py)
        _d(
            "delegation.token.secret.key",
            PASSWORD,
            None,
            "Key of the tokens' HMACs, the same on every broker; tokens are off without it.",
        ),
        _d("delegation.token.master.key", PASSWORD, None, "Deprecated name of delegation.token.secret.key."),
        _d("delegation.token.max.lifetime.ms", LONG, 7 * 24 * 3600 * 1000, "Longest a token lives, renewed."),
        _d("delegation.token.expiry.time.ms", LONG, 24 * 3600 * 1000, "How long a token lives unrenewed."),
        _d(
            "delegation.token.expiry.check.interval.ms",
            LONG,
            3600 * 1000,
            "How often expired tokens are removed.",
        ),
        _d(
            "connection.failed.authentication.delay.ms",
            INT,
            100,
            "Delay before a failed authentication is answered.",
        ),
        _d("log.dirs", STRING, None, "Log directories (comma-separated)."),
        _d("log.dir", STRING, "/tmp/kafka-logs", "The log directory when log.dirs is not set."),
        _d("num.partitions", INT, 1, "Default partitions of auto-created topics."),
        _d("default.replication.factor", INT, 1, "Default replication factor of auto-created topics."),
        _d(
            "auto.create.topics.enable",
            BOOLEAN,
            True,
            "Create topics on Metadata requests for unknown names.",
        ),
        _d("delete.topic.enable", BOOLEAN, True, "Allow DeleteTopics."),
        _d("message.max.bytes", INT, 1048588, "Largest record batch size allowed (max.message.bytes)."),
        _d("socket.request.max.bytes", INT, 104857600, "Largest request frame accepted."),
        # Kafka's default for both buffers is 102400; ours is -1 (the OS's, autotuned): on
        # loopback Kafka's 100 KB receive buffer took 9 recv calls a 1 MB produce instead of 2
        # and half the throughput. Kafka's sample server.properties sets 102400: that is honoured.
        _d(
            "socket.send.buffer.bytes",
            INT,
            -1,
            "SO_SNDBUF of accepted connections; -1 (our default; Kafka's is 102400): the OS's own.",
        ),
        _d("max.incremental.fetch.session.cache.slots", INT, 1000, "Fetch sessions kept (KIP-227)."),
        _d(
            "socket.receive.buffer.bytes",
            INT,
            -1,
            "SO_RCVBUF of the listeners' sockets; -1 (our default; Kafka's is 102400): the OS's own.",
        ),
        _d("socket.listen.backlog.size", INT, 50, "Pending connections a listener queues."),
        _d("connections.max.idle.ms", LONG, 600000, "Close connections idle for longer than this."),
        _d("log.segment.bytes", INT, 1073741824, "Segment size (segment.bytes)."),
        _d("log.roll.ms", LONG, None, "Roll time in ms (segment.ms); log.roll.hours when unset."),
        _d("log.roll.hours", INT, 168),
        _d("log.roll.jitter.ms", LONG, None),
        _d("log.roll.jitter.hours", INT, 0),
        _d("log.retention.ms", LONG, None, "Retention time (retention.ms); minutes/hours when unset."),
        _d("log.retention.minutes", INT, None),
        _d("log.retention.hours", INT, 168),
        _d("log.retention.bytes", LONG, -1, "Retention size per partition (retention.bytes)."),
        _d("log.retention.check.interval.ms", LONG, 300000, "How often retention runs."),
        _d("log.cleanup.policy", LIST, "delete", "delete and/or compact (cleanup.policy)."),
        _d("log.cleaner.enable", BOOLEAN, True, "Run the log cleaner for compacted topics."),
        _d("log.cleaner.threads", INT, 1),
        _d("log.cleaner.backoff.ms", LONG, 15000, "Sleep between cleaner passes with nothing to clean."),
        _d("log.cleaner.dedupe.buffer.size", LONG, 134217728),
        _d(
            "log.cleaner.io.buffer.size",
            INT,
            524288,
            "Accepted; the cleaner reads and writes whole batches, not through fixed buffers.",
        ),
        _d("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9),
        _d(
            "log.cleaner.io.max.bytes.per.second",
            DOUBLE,
            "1.7976931348623157E308",
            "The cleaner's I/O (bytes read and written a second, all its rounds); the default: no limit. "
            "Dynamic: a change applies from the next cleaning round.",
            True,
        ),
        _d("log.cleaner.delete.retention.ms", LONG, 86400000, "(delete.retention.ms)"),
        _d("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, "(min.cleanable.dirty.ratio)"),
        _d("log.cleaner.min.compaction.lag.ms", LONG, 0, "(min.compaction.lag.ms)"),
        _d("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "(max.compaction.lag.ms)"),
        _d("log.index.interval.bytes", INT, 4096, "(index.interval.bytes)"),
        _d("log.index.size.max.bytes", INT, 10485760, "(segment.index.bytes)"),
        _d("log.preallocate", BOOLEAN, False, "(preallocate)"),
        _d("log.segment.delete.delay.ms", LONG, 60000, "(file.delete.delay.ms)"),
        _d("log.message.timestamp.type", STRING, "CreateTime", "(message.timestamp.type)"),
        _d(
            "log.message.timestamp.before.max.ms",
            LONG,
            LONG_MAX,
            "(message.timestamp.before.max.ms) How far before the broker's clock a CreateTime "
            "record may be; produce answers INVALID_TIMESTAMP beyond.",
        ),
        _d(
            "log.message.timestamp.after.max.ms",
            LONG,
            LONG_MAX,
            "(message.timestamp.after.max.ms) How far after the broker's clock a CreateTime "
            "record may be; produce answers INVALID_TIMESTAMP beyond.",
        ),
        _d(
            "log.message.timestamp.difference.max.ms",
            LONG,
            LONG_MAX,
            "(message.timestamp.difference.max.ms) Deprecated: before and after where those are "
            "at their default.",
        ),
        _d(
            "log.message.downconversion.enable",
            BOOLEAN,
            True,
            "(message.downconversion.enable) Deprecated: false refuses a client's Fetch v0-3 "
            "(UNSUPPORTED_VERSION) instead of converting the batches to message format v0/v1.",
        ),
        _d("log.local.retention.ms", LONG, -2, "(local.retention.ms) Tiered storage only (not implemented)."),
        _d(
            "log.local.retention.bytes",
            LONG,
            -2,
            "(local.retention.bytes) Tiered storage only (not implemented).",
        ),
        _d("log.flush.interval.messages", LONG, LONG_MAX, "(flush.messages)"),
        _d("log.flush.interval.ms", LONG, None, "(flush.ms); log.flush.scheduler.interval.ms when unset"),
        _d("log.flush.scheduler.interval.ms", LONG, LONG_MAX),
        _d("log.flush.offset.checkpoint.interval.ms", INT, 60000),
        _d("log.flush.start.offset.checkpoint.interval.ms", INT, 60000),
        _d("replica.high.watermark.checkpoint.interval.ms", LONG, 5000),
        _d("compression.type", STRING, "producer", "(compression.type)"),
        _d("min.insync.replicas", INT, 1),
        _d("unclean.leader.election.enable", BOOLEAN, False),
        _d("offsets.topic.num.partitions", INT, 50),
        _d("offsets.topic.replication.factor", SHORT, 3),
        _d("transaction.state.log.num.partitions", INT, 50),
        _d("transaction.state.log.segment.bytes", INT, 104857600),
        _d("transaction.state.log.replication.factor", SHORT, 3, "(a single node: one replica)"),
        _d("transaction.state.log.min.isr", INT, 2, "(a single node: the ISR is this broker)"),
        _d("group.initial.rebalance.delay.ms", INT, 3000),
        _d("group.min.session.timeout.ms", INT, 6000),
        _d("group.max.session.timeout.ms", INT, 1800000),
        _d("group.max.size", INT, 2147483647),
        _d(
            "group.consumer.session.timeout.ms",
            INT,
            45000,
            "KIP-848 consumer groups: a member without a heartbeat for this long is removed.",
        ),
        _d("group.consumer.heartbeat.interval.ms", INT, 5000, "KIP-848: the interval told to members."),
        _d(
            "group.consumer.min.session.timeout.ms",
            INT,
            45000,
            "Lower bound of a group's consumer.session.timeout.ms.",
        ),
        _d(
            "group.consumer.max.session.timeout.ms",
            INT,
            60000,
            "Upper bound of a group's consumer.session.timeout.ms.",
        ),
        _d(
            "group.consumer.min.heartbeat.interval.ms",
            INT,
            5000,
            "Lower bound of a group's consumer.heartbeat.interval.ms.",
        ),
        _d(
            "group.consumer.max.heartbeat.interval.ms",
            INT,
            15000,
            "Upper bound of a group's consumer.heartbeat.interval.ms.",
        ),
        _d(
            "group.consumer.assignors",
            LIST,
            "uniform,range",
            "KIP-848 server-side assignors; the first is the default.",
        ),
        _d("group.consumer.max.size", INT, 2147483647),
        _d(
            "offsets.retention.minutes",
            INT,
            10080,
            "Committed offsets expire this long after the group empties.",
        ),
        _d("offsets.retention.check.interval.ms", LONG, 600000),
        _d("offset.metadata.max.bytes", INT, 4096),
        _d("offsets.topic.segment.bytes", INT, 104857600),
        _d("offsets.commit.timeout.ms", INT, 5000, "Cluster mode: how long a commit waits for the ISR."),
        _d("producer.id.expiration.ms", INT, 86400000),
        _d("transaction.max.timeout.ms", INT, 900000),
        _d(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            INT,
            10000,
            "How often the transaction coordinator aborts transactions past their timeout.",
        ),
        _d(
            "transactional.id.expiration.ms",
            INT,
            604800000,
            "A transactional id idle this long is forgotten.",
        ),
        _d(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            INT,
            3600000,
            "How often expired transactional ids are removed.",
        ),
        _d("log.message.format.version", STRING, "3.0-IV1", "Deprecated; ignored for message format v2."),
        _d(
            "transaction.partition.verification.enable",
            BOOLEAN,
            True,
            "KIP-890: refuse a transactional produce to a partition not added to the transaction.",
        ),
        _d("num.network.threads", INT, 3),
        _d(
            "quota.window.num",
            INT,
            11,
            "Samples kept of each client quota's rate (ClientQuotaManagerConfig).",
        ),
        _d("quota.window.size.seconds", INT, 1, "The time span of each client quota sample."),
        _d(
            "replication.quota.window.num",
            INT,
            11,
            "Samples kept of each replication throttle's rate (ReplicationQuotaManagerConfig).",
        ),
        _d(
            "replication.quota.window.size.seconds",
            INT,
            1,
            "The time span of each replication throttle sample.",
        ),
        _d(
            "alter.log.dirs.replication.quota.window.num",
            INT,
            11,
            "Samples kept of the log-dir move throttle's rate.",
        ),
        _d(
            "alter.log.dirs.replication.quota.window.size.seconds",
            INT,
            1,
            "The time span of each log-dir move throttle sample.",
        ),
        _d(
            "num.io.threads",
            INT,
            8,
            "Accepted (Kafka's sample server.properties sets it); requests are handled on the event "
            "loop: kafkatool.processes gives request handling more cores.",
        ),
        _d("num.recovery.threads.per.data.dir", INT, 2),
        _d(
            "kafkatool.processes",
            INT,
            1,
            "kafkatool's own: processes of this standalone broker, each serving its share of the "
            "partitions as a node of its own (node.id + k, its own ports), so that request handling "
            "uses that many cores (broker/processes.py).",
        ),
        _d(
            "kafkatool.append.writer",
            STRING,
            "auto",
            "kafkatool's own: client produce appends are written to the page cache by a thread of "
            "their own that runs without the GIL (log/append_writer.py), beside the event loop, "
            "and each answer leaves once its bytes are written: true, false (written on the event "
            "loop), or auto: on when the process may run on 4 cores or more for each of "
            "kafkatool.processes (the loop, the writer, and room for the rest of the machine).",
        ),
        _d(
            "kafkatool.processes.port.step",
            INT,
            1,
            "kafkatool's own: process k of kafkatool.processes listens on each listener's port "
            "+ k x step and advertises each advertised.listeners port + k x step (a port of 0 stays "
            "ephemeral); a port that collides or leaves 1-65535 is refused at start-up.",
        ),
        _d(
            "kafkatool.processes.restarts.max",
            INT,
            3,
            "kafkatool's own: a process of kafkatool.processes that dies is restarted (its "
            "partitions recover); one more death than this within kafkatool.processes.restarts."
            "window.ms stops the broker (exit 1). 0: a dead process stops the broker.",
        ),
        _d(
            "kafkatool.processes.restarts.window.ms",
            LONG,
            300000,
            "kafkatool's own: the window kafkatool.processes.restarts.max counts deaths in.",
        ),
        _d(
            "kafkatool.metrics.prometheus.listener",
            STRING,
            None,
            "kafkatool's own: http://host:port where GET /metrics answers the broker's metrics in "
            "Prometheus text format, named as the Prometheus JMX exporter's stock Kafka rules name "
            "Kafka's MBeans (broker/metrics.py); off when unset. Process k of kafkatool.processes "
            "listens on port + k x kafkatool.processes.port.step.",
        ),
        _d("cluster.id", STRING, None, "Cluster id for a new data dir (default: random)."),
        # ZooKeeper cluster mode (broker/cluster): Kafka 3.x names and defaults
        _d(
            "zookeeper.connect",
            STRING,
            None,
            "host:port[,host:port][/chroot]: join a ZooKeeper-mode cluster.",
        ),
        _d("zookeeper.session.timeout.ms", INT, 18000),
        _d("zookeeper.connection.timeout.ms", INT, None, "Default: zookeeper.session.timeout.ms."),
        _d("zookeeper.set.acl", BOOLEAN, False),
        _d("controller.socket.timeout.ms", INT, 30000),
        _d("replica.lag.time.max.ms", LONG, 30000),
        _d("replica.fetch.wait.max.ms", INT, 500),
        _d("replica.fetch.min.bytes", INT, 1),
        _d("replica.fetch.max.bytes", INT, 1048576),
        _d("replica.fetch.response.max.bytes", INT, 10485760),
        _d("replica.fetch.backoff.ms", INT, 1000),
        _d("replica.socket.timeout.ms", INT, 30000),
        _d(
            "request.timeout.ms",
            INT,
            30000,
            "Cluster mode: how long a broker waits for another's answer (KIP-890 verification).",
        ),
        _d("num.replica.fetchers", INT, 1),
        _d("controlled.shutdown.enable", BOOLEAN, True),
        _d("controlled.shutdown.max.retries", INT, 3),
        _d("controlled.shutdown.retry.backoff.ms", LONG, 5000),
        _d("auto.leader.rebalance.enable", BOOLEAN, True),
        _d("leader.imbalance.check.interval.seconds", LONG, 300),
        _d("leader.imbalance.per.broker.percentage", INT, 10),
        _d("rack", STRING, None),
        _d("broker.rack", STRING, None),
        # the dynamic-only throttles (IncrementalAlterConfigs on a broker or the default), as
        # kafka-reassign-partitions sets them (a single node never replicates: no effect)
        _d("leader.replication.throttled.rate", LONG, LONG_MAX, "Leader throttle (B/s).", True),
        _d("follower.replication.throttled.rate", LONG, LONG_MAX, "Follower throttle (B/s).", True),
        _d("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, "Dir move throttle.", True),
    )
}
#: Kafka broker settings this broker recognises but does not implement: name -> what to do instead.
#: A setting becomes supported by adding it to BROKER_CONFIGS (which wins over this table).
UNSUPPORTED_CONFIGS: dict[str, str] = {
    "port": "removed in Kafka 3.0; use listeners=PLAINTEXT://host:port",
    "host.name": "removed in Kafka 3.0; use listeners=PLAINTEXT://host:port",
    "advertised.port": "removed in Kafka 3.0; use advertised.listeners",
    "advertised.host.name": "removed in Kafka 3.0; use advertised.listeners",
    "process.roles": "KRaft quorums are not supported: a single node keeps its metadata in the log dir",
    "controller.quorum.voters": "KRaft quorums are not supported: a single node keeps its metadata in the log dir",
    "controller.quorum.bootstrap.servers": "KRaft quorums are not supported",
    "controller.listener.names": "KRaft quorums are not supported",
}


#: KafkaConfig's LIST-type keys (read at 3.7.0) that BROKER_CONFIGS does not serve, with Kafka's
#: default (ConfigDef.convertToString; None: null).  Every LIST key of KafkaConfig is in one of
#: the two tables (tests/broker/test_broker_configs.py checks the list), so IncrementalAlterConfigs'
#: APPEND/SUBTRACT finds them as ConfigAdminManager.prepareIncrementalConfigs does in
#: KafkaConfig.configKeys, builds the value from that default and the update is then refused as
#: Kafka refuses it (not dynamic), not answered UNKNOWN_SERVER_ERROR as an unknown name is.
KAFKA_ONLY_LIST_CONFIGS: dict[str, str | None] = {
    "process.roles": "",
    "controller.quorum.voters": "",
    "group.coordinator.rebalance.protocols": "classic",
    "metric.reporters": "",
    "kafka.metrics.reporters": "",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.oauthbearer.expected.audience": None,
    "zookeeper.ssl.enabled.protocols": None,
    "zookeeper.ssl.cipher.suites": None,
}


def kafka_config_def(name: str) -> ConfigDef | None:
    """KafkaConfig.configKeys(name) as far as its type and default go: this broker's definition,
    else a LIST key it does not serve (KAFKA_ONLY_LIST_CONFIGS), else None.  The dynamic-only
    throttles (DynamicConfig.Broker's, not KafkaConfig's) are left out, as Kafka's map lacks them."""
    d = BROKER_CONFIGS.get(name)
    if d is not None:
        return None if d.dynamic == DYNAMIC_ONLY else d
    if name in KAFKA_ONLY_LIST_CONFIGS:
        return ConfigDef(name, LIST, KAFKA_ONLY_LIST_CONFIGS[name])
    return None


def _listener_prefixed_known(name: str) -> bool:
    """``listener.name.<listener>.<setting>`` for a setting a listener may override."""
    if not name.startswith("listener.name."):
        return False
    parts = name.split(".", 3)
    return len(parts) == 4 and (parts[3] in BROKER_CONFIGS or parts[3].startswith(LISTENER_PREFIXED))


def _zookeeper_client_configs() -> frozenset[str]:
    """The broker's own ZooKeeper TLS/SASL settings: the names broker/security/zk reads."""
    from kafkatool.broker.security.zk import SASL_KEYS, TLS_KEYS

    return frozenset(TLS_KEYS) | frozenset(SASL_KEYS)


#: setting families a listener prefix may carry beyond BROKER_CONFIGS (SASL's per-mechanism names)
LISTENER_PREFIXED = ("ssl.", "sasl.", "connections.max.", "max.connections", "plain.", "scram-sha-")


def unknown_configs(names) -> list[tuple[str, str]]:
    """(name, one-line explanation) for every setting that is not in BROKER_CONFIGS, the way Kafka
    logs "The configuration 'x' was supplied but isn't a known config." (with a suggestion for a
    misspelt name)."""
    import difflib

    out = []
    for name in names:
        if name in BROKER_CONFIGS or _listener_prefixed_known(name) or name in _zookeeper_client_configs():
            continue
        reason = UNSUPPORTED_CONFIGS.get(name)
        if reason is not None:
            out.append((name, f"the configuration '{name}' is not supported: {reason}"))
            continue
        close = difflib.get_close_matches(name, list(BROKER_CONFIGS), n=1, cutoff=0.8)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        out.append((name, f"the configuration '{name}' was supplied but isn't a known config{hint}"))
    return out


#: broker configs IncrementalAlterConfigs may set here (BrokerConfig.dynamic, .dynamic_default)
ALTERABLE = frozenset(n for n, d in BROKER_CONFIGS.items() if d.alterable)


def dynamic_update_error(changes: Mapping[str, str], per_broker: bool) -> str | None:
    """Why a dynamic broker config update setting ``changes`` (name -> value) is refused (None:
    it is not): Kafka's DynamicBrokerConfig.validateConfigs in its order
    (:func:`validate_configs_error`; INVALID_REQUEST on the wire, KAFKA-13609), then the
    Kafka-dynamic configs this broker does not apply at runtime."""
    err = validate_configs_error(changes, per_broker)
    if err is not None:
        return err
    unapplied = set(changes) - ALTERABLE
    if unapplied:
        return (
            f"Cannot update these configs dynamically on this broker: {dlc.scala_set(unapplied)} "
            f"(it applies {', '.join(sorted(ALTERABLE))} at runtime; set the others in "
            "server.properties)"
        )
    return None


def _kafka_dynamic_error(names: set[str], per_broker: bool) -> str | None:
    """Kafka's part of :func:`dynamic_update_error`: the names it never takes as a dynamic config
    of that level (a request refuses them, DynamicBrokerConfig.fromPersistentProps leaves them out
    of a stored layer)."""
    static = {n for n in names if kafka_config_def(n) is not None and update_mode(n) is None}
    if static:
        return dlc.read_only_error(static)
    bare_security = names & _SSL_RECONFIGURABLE
    if bare_security:
        return (
            "These security configs can be dynamically updated only per-listener using the listener "
            f"prefix: {dlc.scala_set(bare_security)}"
        )
    if not per_broker:
        only = {n for n in names if n in PER_BROKER_CONFIGS or _per_broker_listener_config(n)}
        if only:
            return (
                "Cannot update these configs at default cluster level, broker id must be specified: "
                f"{dlc.scala_set(only)}"
            )
    return None


_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")  # DynamicBrokerConfig.ListenerConfigRegex


def validate_configs_error(props: Mapping[str, str], per_broker: bool) -> str | None:
    """DynamicBrokerConfig.validateConfigs (what kafka-configs --zookeeper checks of a broker's
    dynamic configs before it writes them), its checks in its order: configs never dynamic,
    security configs without a listener prefix, the values (validateConfigTypes: a listener
    override as its base config, DynamicConfig.Broker's definitions; a name it lacks passes), then
    per-broker configs at the default.  Its ConfigException's message, or None."""
    names = set(props)
    err = _kafka_dynamic_error(names, True)
    if err is not None:
        return err
    for name, value in props.items():
        m = _LISTENER_CONFIG.fullmatch(name)
        base = m.group(1) if m else name
        if base in BROKER_CONFIGS and update_mode(base) is not None:
            err = dynamic_value_error(base, value)
            if err is not None:
                return err
    return _kafka_dynamic_error(names, per_broker)


#: DynamicBrokerConfig.DynamicPasswordConfigs: the dynamic configs of type PASSWORD (and
#: sasl.jaas.config, a PASSWORD of KafkaConfig and per broker, which BROKER_CONFIGS does not hold)
DYNAMIC_PASSWORD_CONFIGS = frozenset(
    n for n, d in BROKER_CONFIGS.items() if d.type == ts.PASSWORD and update_mode(n) is not None
) | {"sasl.jaas.config"}


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig: ``name`` ends with a dynamic password config's name
    (a listener override of one too)."""
    return any(name.endswith(p) for p in DYNAMIC_PASSWORD_CONFIGS)


#: validators of the dynamic configs that are not topic defaults (those are
#: log/dynamic_log_config's): the dynamic-only throttles (DynamicConfig.Broker: LONG atLeast(0)),
#: then KafkaConfig's atLeast and ValidString.in
_DYNAMIC_AT_LEAST = dict.fromkeys(DYNAMIC_ONLY_CONFIGS, 0) | {
    "num.network.threads": 1,
    "num.io.threads": 1,
    "num.recovery.threads.per.data.dir": 1,
    "max.connections": 0,
    "max.connections.per.ip": 0,
    "log.cleaner.threads": 0,
    "log.cleaner.io.buffer.size": 0,
    "log.cleaner.backoff.ms": 0,
    "producer.id.expiration.ms": 1,
}
_DYNAMIC_ONE_OF = {"ssl.client.auth": ("required", "requested", "none")}


def dynamic_value_error(name: str, value: str) -> str | None:
    """ConfigDef.parse's message for a dynamic value of ``name`` (one this broker applies at
    runtime) that Kafka's definition of it refuses; None when it takes it."""
    err = dlc.value_error(
        name, BROKER_CONFIGS[name].type, value, _DYNAMIC_AT_LEAST.get(name), _DYNAMIC_ONE_OF.get(name)
    )
    if err is None and name == "log.cleaner.io.max.bytes.per.second":
        try:  # ours: above 0, as at start-up (Kafka's DOUBLE has no bound)
            cleaner_io_rate(str(value).strip())
        except ConfigError as exc:
            return str(exc)
    return err


def _per_broker_listener_config(name: str) -> bool:
    """listener.name.<listener>.<config>: per broker unless <config> is cluster-level."""
    if not name.startswith("listener.name."):
        return False
    parts = name.split(".", 3)
    return len(parts) == 4 and parts[3] not in _CLUSTER_LEVEL_LISTENER


#: DynamicBrokerConfig.ListenerMechanismConfigs: per listener as listener.name.<l>.<mechanism>.<config>
_LISTENER_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)


def listener_base_name(name: str) -> str | None:
    """The config a ``listener.name.<listener>.<config>`` overrides (DynamicBrokerConfig
    .ListenerConfigRegex; a mechanism's config by its own name), None for another name."""
    m = re.fullmatch(r"listener\.name\.[^.]*\.(.*)", name)
    if m is None:
        return None
    base = m.group(1)
    return next((c for c in _LISTENER_MECHANISM_CONFIGS if base.endswith(c)), base)


def config_type(name: str) -> int | None:
    """KafkaConfig.configType as far as this broker knows its settings: a listener override has
    its base config's type; None: unknown (DescribeConfigs then hides the value, as Kafka's
    maybeSensitive does)."""
    d = BROKER_CONFIGS.get(name) or BROKER_CONFIGS.get(listener_base_name(name) or "")
    return d.type if d is not None else None


def broker_synonym_names(name: str) -> list[str]:
    """DynamicBrokerConfig.brokerConfigSynonyms: the names one broker setting may be given by, in
    priority order: a topic config's first broker synonym and its unit variants (log.roll.ms /
    log.roll.hours, log.retention.ms / .minutes / .hours) share the list; the first also lists
    its fallback (log.flush.interval.ms: log.flush.scheduler.interval.ms), the fallback only itself;
    a listener override lists itself, then the config it overrides."""
    base = listener_base_name(name)
    if base is not None:
        return [name, base]
    for d in ts.TOPIC_CONFIGS.values():
        names = [n for n, _ in d.synonyms]
        if name in names and (name == names[0] or dict(d.synonyms)[name] != 1):
            return names
    return [name]


#: topic config -> (primary broker synonym, type): a view of the one map in log/topic_settings
TOPIC_CONFIGS: dict[str, tuple[str | None, int]] = {
    name: (d.synonyms[0][0] if d.synonyms else None, d.type) for name, d in ts.TOPIC_CONFIGS.items()
}


def _parse_int(name: str, value: str, lo: int | None = None) -> int:
    try:
        v = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"invalid value {value!r} for {name}: not a number") from None
    if lo is not None and v < lo:
        raise ConfigError(f"invalid value {value!r} for {name}: must be at least {lo}")
    return v


def cleaner_io_rate(value: str | None) -> float:
    """log.cleaner.io.max.bytes.per.second (a DOUBLE) as the cleaner uses it; ConfigError unless
    above 0, for the static value and a dynamic one alike."""
    try:
        rate = float(str(value).strip())
    except ValueError:
        rate = 0.0
    if not rate > 0:
        raise ConfigError(f"invalid value {value!r} for log.cleaner.io.max.bytes.per.second: must be above 0")
    return rate


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise ConfigError for an unknown topic config or a value Kafka would reject."""
    try:
        ts.validate_topic_config(name, value)
    except ts.SettingsError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    #: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (listener.security.protocol.map)
    security_protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """listener.security.protocol.map as Kafka parses it (names are case-insensitive, upper-cased)."""
    out: dict[str, str] = {}
    try:
        pairs = props.parse_csv_map(value or "")
    except ValueError as exc:
        raise ConfigError(f"listener.security.protocol.map: {exc}, not NAME:PROTOCOL") from None
    for name, proto in pairs:
        name, proto = name.upper(), proto.upper()
        if not name:
            raise ConfigError(f"listener.security.protocol.map entry {':' + proto!r} is not NAME:PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {proto!r} is not a security protocol "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in out:
            raise ConfigError(f"listener.security.protocol.map names {name} twice")
        out[name] = proto
    return out


def parse_listeners(
    value: str, protocol_map: dict[str, str] | None = None, what: str = "listeners"
) -> list[Listener]:
    pmap = parse_protocol_map(DEFAULT_PROTOCOL_MAP) if protocol_map is None else protocol_map
    out: list[Listener] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" not in item:
            raise ConfigError(f"{what}: {item!r} is not NAME://host:port")
        name, rest = item.split("://", 1)
        host, sep, port = rest.rpartition(":")
        if not sep:
            raise ConfigError(f"{what}: {item!r} has no port")
        host = host.strip("[]")
        name = name.strip().upper()
        proto = pmap.get(name)
        if proto is None:
            raise ConfigError(
                f"{what}: listener {name} has no security protocol in listener.security.protocol.map"
            )
        lst = Listener(name, host, _parse_int(what, port, 0), proto)
        if any(o.name == name for o in out):
            raise ConfigError(f"{what}: each listener must have a different name, {name} is given twice")
        if what == "listeners" and lst.port and any(o.port == lst.port and o.host == lst.host for o in out):
            raise ConfigError(f"{what}: each listener must have a different port, {lst.port} is given twice")
        out.append(lst)
    if not out:
        raise ConfigError(f"no {what} configured")
    return out


@dataclass
class BrokerConfig:
    """Static broker settings: explicit values (server.properties + overrides) over Kafka's defaults."""

    explicit: dict[str, str] = field(default_factory=dict)
    #: dynamic settings of this broker (IncrementalAlterConfigs on its id: DYNAMIC_BROKER_CONFIG)
    dynamic: dict[str, str] = field(default_factory=dict)
    #: dynamic cluster-wide defaults (on "", /config/brokers/<default>: DYNAMIC_DEFAULT_BROKER_CONFIG)
    dynamic_default: dict[str, str] = field(default_factory=dict)
    #: the notes take_dynamic made at its last call (not made again)
    _said: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    #: the three levels in Kafka's order, highest first (topic_settings.broker_levels), and with
    #: the source each reports: resolved when a level is replaced (they change in place
    #: otherwise), not at every lookup (every produce request looks settings up)
    _levels: tuple[dict[str, str], ...] = field(init=False, repr=False, compare=False)
    _sourced: tuple[tuple[dict[str, str], int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._order_levels()

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name in _LEVEL_FIELDS and "_levels" in self.__dict__:
            self._order_levels()

    def _order_levels(self) -> None:
        levels = ts.broker_levels(self.explicit, self.dynamic_default, self.dynamic)
        object.__setattr__(self, "_levels", levels)
        object.__setattr__(self, "_sourced", tuple(zip(levels, _LAYER_SOURCES, strict=True)))

    @classmethod
    def load(
        cls, config_file: str | os.PathLike | None = None, overrides: list[str] | None = None
    ) -> BrokerConfig:
        explicit: dict[str, str] = {}
        if config_file is not None:
            text = Path(config_file).read_text(encoding="latin-1")
            explicit.update(props.parse_properties_text(text))
        for item in overrides or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r} is not key=value")
            explicit[key.strip()] = value.strip()
        cfg = cls(explicit)
        cfg.validate()
        return cfg

    def unknown(self) -> list[tuple[str, str]]:
        """Settings given (file or overrides) that this broker does not know or implement."""
        return unknown_configs(self.explicit)

    # ------------------------------------------------------------------ raw values
    def get(self, name: str) -> str | None:
        for layer in self._levels:  # every produce request asks: no source pairs built
            if name in layer:
                return layer[name]
        d = BROKER_CONFIGS.get(name)
        return d.default if d is not None else None

    def source(self, name: str) -> int:
        for layer, source in self._sourced:
            if name in layer:
                return source
        return SOURCE_DEFAULT

    def is_set(self, name: str) -> bool:
        """Given somewhere (a dynamic layer or server.properties), not only Kafka's default."""
        return any(name in layer for layer, _source in self._sourced)

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every layer that gives ``name`` or a synonym of it, Kafka's
        ConfigHelper.configSynonyms: layer by layer (dynamic broker, dynamic default, static,
        Kafka's default), from the first entry of ``name`` itself on.  The head is the
        value's source; none: DEFAULT_CONFIG."""
        names = broker_synonym_names(name)
        defaults = {
            n: d.default
            for n in names
            if (d := BROKER_CONFIGS.get(n)) is not None
            and d.default is not None
            and d.dynamic != DYNAMIC_ONLY
        }
        out = []
        for layer, source in (*self._sourced, (defaults, SOURCE_DEFAULT)):
            out += [(n, layer[n], source) for n in names if n in layer]
        while out and out[0][0] != name:
            out.pop(0)
        return out

    def int(self, name: str) -> int:
        return _parse_int(name, self.get(name))

    def int_or(self, name: str, defaults: Mapping[str, int]) -> int:
        """An int setting, ``defaults[name]`` when it is unset or empty: the coordinators'
        reading of their settings (each coordinator keeps Kafka's defaults of its own names;
        a name set here, or with a default of its own here, needs no entry there)."""
        raw = self.get(name)
        if raw is None or str(raw).strip() == "":
            return defaults[name]
        return int(str(raw).strip())

    def bool(self, name: str) -> bool:
        return str(self.get(name)).strip().lower() == "true"

    def requirement_error(self) -> str | None:
        """KafkaConfig.validateValues' requirements on the topic defaults (Scala's ``require``):
        the broker refuses to start with them, and a dynamic config that breaks one
        (log/dynamic_log_config)."""
        return dlc.requirement_error(self._set_values())

    def with_dynamic(self, per_broker: bool, changes: Mapping[str, str | None]) -> BrokerConfig:
        """A copy with ``changes`` (None: deleted) made to this broker's dynamic layer
        (``per_broker``) or the cluster-wide default one."""
        dynamic, default = dict(self.dynamic), dict(self.dynamic_default)
        layer = dynamic if per_broker else default
        for k, v in changes.items():
            if v is None:
                layer.pop(k, None)
            else:
                layer[k] = v
        return BrokerConfig(self.explicit, dynamic, default)

    def dynamic_error(self, changed: Collection[str] = ()) -> str | None:
        """Why these settings, with their dynamic layers, cannot run (None: they can): Kafka's
        checks of a new KafkaConfig (DynamicBrokerConfig.processReconfiguration), the checks of
        the reconfigurables whose configs a change touches (``changed``: the names set or
        deleted; DynamicLogConfig.validateReconfiguration), then the topic defaults the log
        engine takes (the validation a topic config gets): log/dynamic_log_config's one rule."""
        return dlc.defaults_error(self._set_values(), changed)

    def take_dynamic(
        self,
        found: Mapping[bool, tuple[str, Mapping[str, object]]],
        applies: Collection[str] = ALTERABLE,
        *,
        running: bool = False,
    ) -> tuple[bool, list[str]]:
        """Take the dynamic layers kept somewhere (``found``: per_broker -> (where, the configs
        kept there); ZooKeeper /config/brokers, the log dir's file, a KRaft __cluster_metadata
        log, the primary's push to a member; a layer not given stays as it is) as Kafka's
        DynamicBrokerConfig takes persisted configs: log/dynamic_log_config.take_stored, the one
        rule, with this broker's configs (:func:`stored_rule`): the configs ``applies`` names
        (this broker's: those it applies at runtime) are replaced by the ones found, leaving out
        a config Kafka never takes from there (a read-only one, a bare security config, a
        per-broker one at the default level: fromPersistentProps), one ``applies`` lacks, and a
        value its definition refuses (removeInvalidConfigs); the two layers are checked
        together, and a set the broker cannot run with is not applied at all
        (processReconfiguration), never half.  Each is said in a note; a note the previous call
        made is not made again (a reload of unchanged configs says nothing new).  ``running``:
        the logs are open, so the change is also checked as Kafka's reconfigurables check one
        (DynamicLogConfig.validateReconfiguration); at start-up, before the LogManager exists,
        Kafka has none registered.  Returns whether a layer changed, and the notes."""
        took, notes = dlc.take_stored(
            {True: self.dynamic, False: self.dynamic_default},
            self.explicit,
            found,
            stored_rule(applies),
            running=running,
        )
        said, self._said = self._said, frozenset(notes)
        return took, [n for n in notes if n not in said]

    # ------------------------------------------------------------------ derived
    def validate(self) -> None:
        self.listeners  # noqa: B018 (parses)
        self.advertised_listeners  # noqa: B018
        self.inter_broker_listener  # noqa: B018
        for name in (
            "num.partitions",
            "message.max.bytes",
            "socket.request.max.bytes",
            "log.segment.bytes",
            "num.network.threads",
            "quota.window.num",
            "quota.window.size.seconds",
            "replication.quota.window.num",
            "replication.quota.window.size.seconds",
            "alter.log.dirs.replication.quota.window.num",
            "alter.log.dirs.replication.quota.window.size.seconds",
            "delegation.token.max.lifetime.ms",
            "delegation.token.expiry.time.ms",
            "delegation.token.expiry.check.interval.ms",
        ):
            _parse_int(name, self.get(name), 1)
        cleaner_io_rate(self.get("log.cleaner.io.max.bytes.per.second"))
        self.append_writer  # noqa: B018 (parses)
        from kafkatool.broker.metrics import LISTENER_CONFIG, parse_listener

        if self.get(LISTENER_CONFIG):
            parse_listener(self.get(LISTENER_CONFIG))
        err = self.requirement_error()
        if err is not None:
            raise ConfigError(err)
        self.log_config()

    @property
    def append_writer(self) -> str:
        """kafkatool.append.writer as auto, true or false (ConfigError for any other value)."""
        raw = self.get(APPEND_WRITER_CONFIG)
        value = (raw or "").strip().lower()
        if value not in APPEND_WRITER_VALUES:
            raise ConfigError(
                f"invalid value {raw!r} for {APPEND_WRITER_CONFIG}: must be one of {', '.join(APPEND_WRITER_VALUES)}"
            )
        return value

    @property
    def node_id(self) -> int:
        explicit = self.explicit_node_id
        return 1 if explicit is None else explicit

    @property
    def explicit_node_id(self) -> int | None:
        for name in ("node.id", "broker.id"):
            if name in self.explicit:
                return self.int(name)
        return None

    @property
    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self.get("listener.security.protocol.map"))

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners") or DEFAULT_LISTENER, self.protocol_map)

    @property
    def advertised_listeners(self) -> list[Listener]:
        """advertised.listeners by name, in the order of ``listeners`` (Kafka falls back to
        ``listeners`` for the whole list when unset)."""
        adv = self.get("advertised.listeners")
        if not adv:
            return self.listeners
        out = parse_listeners(adv, self.protocol_map, "advertised.listeners")
        bound = {lst.name for lst in self.listeners}
        for lst in out:
            if lst.name not in bound:
                raise ConfigError(f"advertised.listeners: {lst.name} is not one of the listeners")
        return out

    @property
    def inter_broker_listener(self) -> Listener:
        """The listener brokers talk to each other on (inter.broker.listener.name, else the first
        advertised listener with security.inter.broker.protocol), Kafka's rules."""
        name = self.get("inter.broker.listener.name")
        if name and "security.inter.broker.protocol" in self.explicit:
            raise ConfigError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
            )
        adv = self.advertised_listeners
        if name:
            name = name.strip().upper()
            for lst in adv:
                if lst.name == name:
                    return lst
            raise ConfigError(
                f"inter.broker.listener.name must be a listener name defined in advertised.listeners: {name}"
            )
        proto = (self.get("security.inter.broker.protocol") or "PLAINTEXT").strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.inter.broker.protocol: {proto!r} is not a security protocol")
        for lst in adv:
            if lst.name == proto:
                return lst
        if len(adv) == 1 and "security.inter.broker.protocol" not in self.explicit:
            return adv[0]
        raise ConfigError(
            f"security.inter.broker.protocol {proto}: no listener named {proto} in advertised.listeners "
            "(set inter.broker.listener.name)"
        )

    def listener_setting(self, listener: Listener | str, name: str) -> str | None:
        """A setting as a listener sees it: ``listener.name.<name>.<setting>`` over the plain name."""
        prefixed = self.listener_prefixed(listener, name)
        return prefixed if prefixed is not None else self.get(name)

    def listener_prefixed(self, listener: Listener | str, name: str) -> str | None:
        """Only ``listener.name.<name>.<setting>``, None when the listener does not set it itself."""
        lname = listener if isinstance(listener, str) else listener.name
        key = f"listener.name.{lname.lower()}.{name}"
        for layer, _source in self._sourced:
            if key in layer:
                return layer[key]
        return None

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.explicit.get("log.dirs") or self.explicit.get("log.dir") or DEFAULT_DATA_DIR
        return [Path(p.strip()) for p in raw.split(",") if p.strip()]

    def _set_values(self) -> dict[str, str]:
        return ts.merge_broker_levels(self.explicit, self.dynamic_default, self.dynamic)

    def broker_value_for_topic(self, topic_name: str) -> tuple[str | None, int]:
        """(value, source) a topic inherits for ``topic_name`` from the broker: the value of the
        one map, the source of the first of :meth:`topic_synonyms` (none: DEFAULT_CONFIG)."""
        try:
            value, _broker_name = ts.broker_value(topic_name, self._set_values())
        except ts.SettingsError as exc:
            raise ConfigError(str(exc)) from None
        syns = self.topic_synonyms(topic_name)
        return value, syns[0][2] if syns else SOURCE_DEFAULT

    def topic_synonyms(self, topic_name: str) -> list[tuple[str, str | None, int]]:
        """The broker synonyms Kafka's ConfigHelper.createTopicConfigEntry lists for a topic
        config: configSynonyms of its first broker name (ServerTopicConfigSynonyms), layer by
        layer from the first entry of that name on; so retention.ms inherited from
        log.retention.hours alone has none (DEFAULT_CONFIG), as Kafka says."""
        d = ts.TOPIC_CONFIGS[topic_name]
        return self.synonyms(d.synonyms[0][0]) if d.synonyms else []

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config with the value a topic without overrides has."""
        try:
            return ts.topic_defaults(self._set_values())
        except ts.SettingsError as exc:
            raise ConfigError(str(exc)) from None

    def log_config(self, overrides: dict[str, str] | None = None) -> LogConfig:
        values = self.topic_defaults()
        values.update(overrides or {})
        try:
            return ts.log_config_from(values)
        except ts.SettingsError as exc:
            raise ConfigError(str(exc)) from None


def stored_rule(applies: Collection[str]) -> dlc.StoredRule:
    """Which stored dynamic configs a broker takes (log/dynamic_log_config.take_stored): every
    name it knows; left out: a config Kafka never takes at that level, one ``applies`` lacks,
    and a value Kafka's definition refuses."""

    def refuses(k: str, v: object, per_broker: bool) -> str | None:
        err = _kafka_dynamic_error({k}, per_broker)
        if err is None and k not in applies:
            err = "this broker does not apply it"
        if err is None:
            err = dynamic_value_error(k, v) if isinstance(v, str) else f"{k} is not a string"
        return err

    # a name Kafka keeps among its originals and nothing here reads is left out silently
    return dlc.StoredRule(
        lambda k: k in BROKER_CONFIGS or listener_base_name(k) is not None, refuses, applies
    )


#: what the offline commands take: every config Kafka takes dynamically
OFFLINE_RULE = stored_rule(frozenset(n for n in BROKER_CONFIGS if update_mode(n) is not None))


def take_layer_dynamic(
    layer: ts.ConfigLayer, server_props: Mapping[str, str], wheres: tuple[str, str]
) -> None:
    """The dynamic broker configs an offline command found in one place (a KRaft
    __cluster_metadata log, ZooKeeper /config/brokers, serve's file; ``wheres``: where the
    cluster-wide default and the broker's own are kept) as a broker with ``server_props`` takes
    them at start-up (log/dynamic_log_config.take_layer with :data:`OFFLINE_RULE`): the layer
    keeps what it takes, and says what it leaves out in its notes."""
    dlc.take_layer(layer, wheres, server_props, OFFLINE_RULE)
