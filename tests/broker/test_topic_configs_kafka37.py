"""Kafka 3.7's topic configs beyond the storage engine's own: message.downconversion.enable,
local.retention.ms/bytes, remote.storage.enable (refused: a broker with tiered storage off), and
LogConfig.validate's rules between values, through CreateTopics, IncrementalAlterConfigs,
DescribeConfigs and Fetch against a `kafkatool serve` process; and the one KIP-937 rule by
which a broker-level timestamp difference outranks a topic's own, in the broker and offline."""

from __future__ import annotations

import time

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.log import topic_settings as ts
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.broker.conftest import BrokerProcess
from tests.broker.test_admin import create, describe
from tests.broker.test_protocol import batch, fetch, produce
from tests.broker.wire import WireClient

TOPIC, SET = 2, 0
STATIC, DEFAULT, TOPIC_SOURCE = 4, 5, 1
BOOLEAN, LONG = 1, 5
BROKER_PROPS = ["log.local.retention.ms=5000", "log.message.timestamp.difference.max.ms=60000"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cfg37") / "data", extra=BROKER_PROPS).start()
    yield b
    b.stop()


def alter_topic(c, name, **configs):
    req = G.IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=TOPIC,
                resource_name=name,
                configs=[
                    AlterableConfig(name=k.replace("_", "."), config_operation=SET, value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        validate_only=False,
    )
    r = c.request(44, 1, req).responses[0]
    return r.error_code, r.error_message


def test_the_new_configs_are_described_with_their_defaults_and_broker_synonyms(broker):
    with WireClient(broker.bootstrap) as c:
        assert create(c, "c37-describe").error_code == 0
        _, e = describe(c, "c37-describe")
        down = e["message.downconversion.enable"]
        assert (down.value, down.config_source, down.config_type) == ("true", DEFAULT, BOOLEAN)
        local_ms = e["local.retention.ms"]
        assert (local_ms.value, local_ms.config_source, local_ms.config_type) == ("5000", STATIC, LONG)
        assert [(s.name, s.value, s.source) for s in local_ms.synonyms] == [
            ("log.local.retention.ms", "5000", STATIC),
            ("log.local.retention.ms", "-2", DEFAULT),
        ]
        assert (e["local.retention.bytes"].value, e["local.retention.bytes"].config_source) == ("-2", DEFAULT)
        assert (e["remote.storage.enable"].value, e["remote.storage.enable"].config_source) == (
            "false",
            DEFAULT,
        )
        # the broker names are Kafka's dynamic log configs (DynamicLogConfig.ReconfigurableConfigs)
        _, b = describe(
            c, "1", keys=["log.message.downconversion.enable", "log.local.retention.bytes"], rtype=4
        )
        assert {n: (x.value, x.read_only) for n, x in b.items()} == {
            "log.message.downconversion.enable": ("true", False),
            "log.local.retention.bytes": ("-2", False),
        }


def test_remote_storage_is_refused_as_a_broker_without_tiered_storage_refuses_it(broker):
    """LogConfig.validateRemoteStorageOnlyIfSystemEnabled: INVALID_CONFIG with its message, at
    creation and at a change; remote.storage.enable=false is taken."""
    with WireClient(broker.bootstrap) as c:
        r = create(c, "c37-remote", configs={"remote.storage.enable": "true"})
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, ts.REMOTE_STORAGE_DISABLED)
        assert create(c, "c37-remote", configs={"remote.storage.enable": "false"}).error_code == 0
        assert alter_topic(c, "c37-remote", remote_storage_enable="true") == (
            ErrorCode.INVALID_CONFIG,
            ts.REMOTE_STORAGE_DISABLED,
        )
        assert describe(c, "c37-remote")[1]["remote.storage.enable"].value == "false"


def test_local_retention_and_the_rules_between_values(broker):
    """local.retention.* take -2 and up; their bounds against retention.* apply only with
    remote storage on (validateTopicLogConfigValues), so here a larger one is taken;
    validateValues' compaction lags apply always, over the broker's defaults too."""
    with WireClient(broker.bootstrap) as c:
        bad = create(c, "c37-local", configs={"local.retention.ms": "-3"})
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        r = create(
            c,
            "c37-local",
            configs={"retention.ms": "1000", "local.retention.ms": "2000", "local.retention.bytes": "-1"},
        )
        assert r.error_code == 0
        _, e = describe(c, "c37-local")
        assert (e["local.retention.ms"].value, e["local.retention.ms"].config_source) == (
            "2000",
            TOPIC_SOURCE,
        )
        lag = create(c, "c37-lag", configs={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
        assert (lag.error_code, lag.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        )
        assert create(c, "c37-lag", configs={"max.compaction.lag.ms": "5"}).error_code == 0
        assert alter_topic(c, "c37-lag", min_compaction_lag_ms="6")[0] == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize(
    ("config", "value", "message"),
    [
        (
            "retention.ms",
            "abc",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "retention.ms",
            "1_000",
            "Invalid value 1_000 for configuration retention.ms: Not a number of type LONG",
        ),
        # an INT past Integer.MAX_VALUE is no number of its type
        (
            "max.message.bytes",
            "3000000000",
            "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT",
        ),
        ("segment.bytes", " 5", "Invalid value 5 for configuration segment.bytes: Value must be at least 14"),
        (
            "min.cleanable.dirty.ratio",
            "2",
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            "preallocate",
            "yes",
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            "cleanup.policy",
            "compact,shred",
            "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        # ValidString is exact: no other case, no "none" (a producer's word, not a topic's)
        (
            "compression.type",
            "GZIP",
            "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, "
            "zstd, lz4, snappy, gzip, producer",
        ),
        (
            "compression.type",
            "none",
            "Invalid value none for configuration compression.type: String must be one of: uncompressed, "
            "zstd, lz4, snappy, gzip, producer",
        ),
        (
            "message.timestamp.type",
            "create",
            "Invalid value create for configuration message.timestamp.type: String must be one of: "
            "CreateTime, LogAppendTime",
        ),
    ],
)
def test_a_refused_value_is_answered_in_configdefs_words(broker, config, value, message):
    """LogConfig's ConfigDef (parseType of the trimmed text, then its validator): INVALID_CONFIG
    with ConfigException's message, at creation and at a change, the topic's value untouched."""
    name = f"c37-words-{config.replace('.', '-')}-{abs(hash(value)) % 10_000}"
    with WireClient(broker.bootstrap) as c:
        r = create(c, name, configs={config: value})
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, message)
        assert create(c, name).error_code == 0
        assert alter_topic(c, name, **{config.replace(".", "_"): value}) == (
            ErrorCode.INVALID_CONFIG,
            message,
        )
        assert describe(c, name)[1][config].config_source != TOPIC_SOURCE


def test_values_kafka_takes_are_taken(broker):
    """retention.bytes has no lower bound in LogConfig (any negative is unlimited); the list and
    strings are trimmed and split with the whitespace around commas; an empty cleanup.policy is
    a topic whose segments neither retention nor the cleaner touch (LogConfig.delete and
    .compact both false, as Kafka 3.7's LogManager and LogCleaner read them)."""
    with WireClient(broker.bootstrap) as c:
        r = create(
            c,
            "c37-taken",
            configs={
                "retention.bytes": "-5",
                "cleanup.policy": "compact , delete",
                "compression.type": " zstd ",
                "min.cleanable.dirty.ratio": "0.25",
            },
        )
        assert r.error_code == 0, r.error_message
        assert describe(c, "c37-taken")[1]["retention.bytes"].value == "-5"
        # an empty cleanup.policy is the empty LIST, which ValidList takes: neither delete nor compact
        r = create(c, "c37-keep", configs={"cleanup.policy": ""})
        assert r.error_code == 0, r.error_message
        policy = describe(c, "c37-keep")[1]["cleanup.policy"]
        assert (policy.value, policy.config_source) == ("", TOPIC_SOURCE)
    config = ts.log_config_from({"cleanup.policy": ""})
    assert (config.cleanup_policy, config.delete, config.compact) == ((), False, False)


def test_downconversion_disabled_refuses_a_clients_old_fetch(broker):
    """KafkaApis.maybeConvertFetchedData: Fetch v0-3 needs message format v0/v1; with
    message.downconversion.enable=false the partition answers UNSUPPORTED_VERSION."""
    with WireClient(broker.bootstrap) as c:
        assert create(c, "c37-down").error_code == 0
        assert produce(c, "c37-down", batch(2)).error_code == 0
        old = fetch(c, "c37-down", 0, version=3).responses[0].partitions[0]
        assert old.error_code == 0 and old.records
        assert alter_topic(c, "c37-down", message_downconversion_enable="false") == (0, None)
        old = fetch(c, "c37-down", 0, version=3).responses[0].partitions[0]
        assert (old.error_code, old.high_watermark, old.records or b"") == (
            ErrorCode.UNSUPPORTED_VERSION,
            -1,
            b"",
        )
        new = fetch(c, "c37-down", 0, version=4).responses[0].partitions[0]
        assert new.error_code == 0 and new.records


def test_a_broker_difference_outranks_the_topics_own_in_the_broker(broker):
    """KIP-937: the broker's log.message.timestamp.difference.max.ms (60 s) becomes every topic's
    default message.timestamp.before/after.max.ms, which LogConfig consults before the topic's
    own difference (here 1 h): a record 10 min old is refused."""
    with WireClient(broker.bootstrap) as c:
        assert (
            create(c, "c37-diff", configs={"message.timestamp.difference.max.ms": "3600000"}).error_code == 0
        )
        _, e = describe(c, "c37-diff")
        assert e["message.timestamp.before.max.ms"].value == "60000"
        r = produce(c, "c37-diff", batch(1, ts=int(time.time() * 1000) - 600_000))
        assert r.error_code == ErrorCode.INVALID_TIMESTAMP


def test_offline_resolve_uses_the_same_rule():
    server = dict(p.split("=", 1) for p in BROKER_PROPS)
    overrides = {"message.timestamp.difference.max.ms": "3600000"}
    resolved = ts.resolve("t", server_props=server, topic_overrides={"t": overrides})
    live = BrokerConfig.load(None, BROKER_PROPS).log_config(overrides)
    assert resolved.config.timestamp_before_max_ms == live.timestamp_before_max_ms == 60_000
    assert resolved.config.timestamp_after_max_ms == live.timestamp_after_max_ms == 60_000
    assert resolved.source_of("message.timestamp.before.max.ms") == (
        "server.properties (log.message.timestamp.difference.max.ms)"
    )
