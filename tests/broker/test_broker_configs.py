"""DescribeConfigs / IncrementalAlterConfigs of the BROKER and BROKER_LOGGER resources against a
`kafkatool serve` process, as Kafka 3.7's ZooKeeper-mode broker answers them (ConfigHelper,
DynamicBrokerConfig, ConfigAdminManager, RuntimeLoggerManager)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.broker.conftest import BrokerProcess
from tests.broker.test_admin import describe
from tests.broker.wire import WireClient

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
BROKER, BROKER_LOGGER = 4, 8
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("bcfg") / "data",
        extra=[
            "num.partitions=3",
            "log.retention.hours=5",
            "ssl.keystore.password=s3cret",
            "listener.name.sasl_ssl.ssl.client.auth=required",
            "custom.reporter.setting=abc",
        ],
    ).start()
    yield b
    b.stop()


def inc(c, rtype, name, *ops, validate_only=False):
    req = G.IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
            )
        ],
        validate_only=validate_only,
    )
    r = c.request(44, 1, req).responses[0]
    return r.error_code, r.error_message


def syns(entry):
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_read_only_and_sources_of_a_broker(broker):
    """read_only is !AllDynamicConfigs.contains(name); the source is the first synonym's; a
    password's value is null, in the synonyms too."""
    with WireClient(broker.bootstrap) as c:
        res, b = describe(c, "1", rtype=BROKER)
        assert res.error_code == 0
        assert (b["num.partitions"].read_only, b["num.partitions"].config_source) == (True, 4)
        assert syns(b["num.partitions"]) == [("num.partitions", "3", 4), ("num.partitions", "1", 5)]
        # cluster-wide dynamic in Kafka (DynamicLogConfig, LogCleaner, SocketServer...), per-broker
        # (listener, SSL): both read_only false; log.roll.hours is no reconfigurable name
        for name in ("log.retention.ms", "message.max.bytes", "max.connections", "ssl.keystore.location"):
            assert b[name].read_only is False, name
        for name in ("log.roll.hours", "log.dirs", "broker.id", "log.message.format.version"):
            assert b[name].read_only is True, name
        # log.retention.hours from server.properties: the ms name has no value and no source of its own
        assert b["log.retention.ms"].value is None and b["log.retention.ms"].config_source == 5
        assert syns(b["log.retention.hours"]) == [
            ("log.retention.hours", "5", 4),
            ("log.retention.hours", "168", 5),
        ]
        pw = b["ssl.keystore.password"]
        assert (pw.value, pw.is_sensitive, pw.config_source, syns(pw)) == (
            None,
            True,
            4,
            [("ssl.keystore.password", None, 4)],
        )
        # the dynamic-only throttles have no KafkaConfig definition: listed only once set
        assert LEADER not in b and FOLLOWER not in b


def test_every_name_given_is_described(broker):
    """Kafka describes every original of the broker (ConfigHelper.allConfigs): a listener override
    with its base config's type and synonyms, and a name Kafka does not know as sensitive (its
    type unknown: KafkaConfig.maybeSensitive), both read-only, STATIC_BROKER_CONFIG."""
    with WireClient(broker.bootstrap) as c:
        _, b = describe(c, "1", rtype=BROKER)
        lo = b["listener.name.sasl_ssl.ssl.client.auth"]
        assert (lo.value, lo.config_source, lo.read_only, lo.is_sensitive, lo.config_type) == (
            "required",
            4,
            True,
            False,
            2,
        )
        assert syns(lo) == [
            ("listener.name.sasl_ssl.ssl.client.auth", "required", 4),
            ("ssl.client.auth", "none", 5),
        ]
        un = b["custom.reporter.setting"]
        assert (un.value, un.config_source, un.read_only, un.is_sensitive, un.config_type) == (
            None,
            4,
            True,
            True,
            0,
        )
        assert syns(un) == [("custom.reporter.setting", None, 4)]
        # not at the cluster-wide default, where only dynamic defaults are listed
        assert describe(c, "", rtype=BROKER)[1] == {}


def test_dynamic_default_and_per_broker_layers(broker):
    """IncrementalAlterConfigs on "" sets the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG),
    on the id this broker's own value (DYNAMIC_BROKER_CONFIG), which wins; DescribeConfigs of ""
    answers only the defaults that are set."""
    with WireClient(broker.bootstrap) as c:
        res, d = describe(c, "", rtype=BROKER)
        assert res.error_code == 0 and d == {}
        assert inc(c, BROKER, "", (LEADER, SET, "1000"), (FOLLOWER, SET, "2000")) == (0, None)
        res, d = describe(c, "", rtype=BROKER)
        assert sorted(d) == [FOLLOWER, LEADER]
        e = d[LEADER]
        assert (e.value, e.config_source, e.read_only, e.config_type) == ("1000", 3, True, 5)
        assert syns(e) == [(LEADER, "1000", 3)]
        assert list(describe(c, "", keys=[FOLLOWER], rtype=BROKER)[1]) == [FOLLOWER]
        _, b = describe(c, "1", keys=[LEADER], rtype=BROKER)
        assert (b[LEADER].value, b[LEADER].config_source) == ("1000", 3)

        assert inc(c, BROKER, "1", (LEADER, SET, "77")) == (0, None)
        _, b = describe(c, "1", keys=[LEADER, FOLLOWER], rtype=BROKER)
        assert (b[LEADER].value, b[LEADER].config_source) == ("77", 2)
        assert syns(b[LEADER]) == [(LEADER, "77", 2), (LEADER, "1000", 3)]
        assert (b[FOLLOWER].value, b[FOLLOWER].config_source) == ("2000", 3)
        # no ConfigDef in Kafka for the dynamic-only throttles: no documentation (a static one has it)
        assert b[LEADER].documentation is None
        assert describe(c, "1", keys=["num.partitions"], rtype=BROKER)[1]["num.partitions"].documentation
        # the default resource shows the default, not this broker's value, and no per-broker synonym
        _, d = describe(c, "", keys=[LEADER], rtype=BROKER)
        assert (d[LEADER].value, syns(d[LEADER])) == ("1000", [(LEADER, "1000", 3)])

        assert inc(c, BROKER, "1", (LEADER, DELETE, None)) == (0, None)
        assert describe(c, "1", keys=[LEADER], rtype=BROKER)[1][LEADER].config_source == 3
        assert inc(c, BROKER, "", (LEADER, DELETE, None), (FOLLOWER, DELETE, None)) == (0, None)
        assert describe(c, "", rtype=BROKER)[1] == {}
        assert LEADER not in describe(c, "1", rtype=BROKER)[1]


def test_alter_refusals_follow_kafka(broker):
    with WireClient(broker.bootstrap) as c:
        assert inc(c, BROKER, "1", ("num.partitions", SET, "3")) == (
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(num.partitions)",
        )
        assert inc(c, BROKER, "1", ("ssl.keystore.location", SET, "/x")) == (
            ErrorCode.INVALID_REQUEST,
            "These security configs can be dynamically updated only per-listener using the listener "
            "prefix: Set(ssl.keystore.location)",
        )
        # per-broker only (DynamicBrokerConfig.PerBrokerConfigs): not at the cluster-wide default
        code, msg = inc(c, BROKER, "", ("listener.name.plaintext.ssl.keystore.location", SET, "/x"))
        assert code == ErrorCode.INVALID_REQUEST
        assert msg.startswith(
            "Cannot update these configs at default cluster level, broker id must be specified"
        )
        # dynamic in Kafka, not applied at runtime here: said so, nothing stored
        code, msg = inc(c, BROKER, "", ("num.io.threads", SET, "4"))
        assert code == ErrorCode.INVALID_REQUEST and "on this broker: Set(num.io.threads)" in msg
        # wrong two ways at once: DynamicBrokerConfig.validateConfigs' order (values before the
        # per-broker-at-default check), and Kafka's value check before this broker's refusal
        assert inc(
            c, BROKER, "", ("listener.name.plaintext.ssl.keystore.location", SET, "/x"), (LEADER, SET, "-5")
        ) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid value -5 for configuration {LEADER}: Value must be at least 0",
        )
        assert inc(c, BROKER, "", ("num.io.threads", SET, "x")) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value x for configuration num.io.threads: Not a number of type INT",
        )
        # KafkaConfig's validators of dynamic configs that are no topic defaults (a listener
        # override is checked as its base config, validateConfigTypes)
        assert inc(c, BROKER, "", ("num.io.threads", SET, "0")) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value 0 for configuration num.io.threads: Value must be at least 1",
        )
        assert inc(c, BROKER, "1", ("listener.name.plaintext.ssl.client.auth", SET, "Required")) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value Required for configuration ssl.client.auth: String must be one of: "
            "required, requested, none",
        )
        assert inc(c, BROKER, "1", (LEADER, SET, "-5")) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid value -5 for configuration {LEADER}: Value must be at least 0",
        )
        assert inc(c, BROKER, "x", (LEADER, SET, "5")) == (
            ErrorCode.INVALID_REQUEST,
            "Node id must be an integer, but it is: x",
        )
        assert inc(c, BROKER, "9", (LEADER, SET, "5")) == (
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1, but received 9",
        )
        # ConfigAdminManager.prepareIncrementalConfigs: a LIST config only; a name KafkaConfig's
        # ConfigDef lacks (the throttles are DynamicConfig.Broker's own) throws out of the Scala
        # map lookup, unmapped: UNKNOWN_SERVER_ERROR with no message
        assert inc(c, BROKER, "1", ("log.retention.ms", APPEND, "5")) == (
            ErrorCode.INVALID_CONFIG,
            "Config value append is not allowed for config key: log.retention.ms",
        )
        for name in (LEADER, "no.such.config"):
            for op in (APPEND, 3):
                assert inc(c, BROKER, "1", (name, op, "5")) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        assert inc(c, BROKER, "", ("no.such.config", APPEND, "5")) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        # a LIST key of KafkaConfig this broker does not serve: found, the value built, then
        # refused as Kafka refuses it (DynamicBrokerConfig.validateConfigs: not dynamic)
        for op in (APPEND, 3):
            assert inc(c, BROKER, "1", ("process.roles", op, "broker")) == (
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs dynamically: Set(process.roles)",
            )
        # dynamic in Kafka (DynamicMetricsReporters), not applied here: said so
        code, msg = inc(c, BROKER, "", ("metric.reporters", APPEND, "x.Reporter"))
        assert code == ErrorCode.INVALID_REQUEST and "on this broker: Set(metric.reporters)" in msg
        # KafkaConfig types the listener settings STRING: no APPEND/SUBTRACT
        for name in ("listeners", "advertised.listeners", "listener.security.protocol.map"):
            assert inc(c, BROKER, "1", (name, APPEND, "X://:1")) == (
                ErrorCode.INVALID_CONFIG,
                f"Config value append is not allowed for config key: {name}",
            )
        assert inc(c, BROKER, "", (LEADER, SET, "5"), validate_only=True) == (0, None)
        assert describe(c, "", rtype=BROKER)[1] == {}
        res, _ = describe(c, "9", rtype=BROKER)
        assert (res.error_code, res.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1 or empty string, but received 9",
        )


def test_broker_logger_describe_and_alter(broker):
    """BROKER_LOGGER (8): every logger with its level (DYNAMIC_BROKER_LOGGER_CONFIG, read_only
    false); SET and DELETE change the level the running broker logs at."""
    with WireClient(broker.bootstrap) as c:
        res, lg = describe(c, "1", rtype=BROKER_LOGGER)
        assert res.error_code == 0
        assert lg["root"].value == "WARN" and lg["kafkatool"].value == "INFO"  # serve's --log-level
        assert lg["kafkatool.broker"].value == "INFO"
        # the broker's own loggers (the names its log lines carry) and the root, not the Python
        # libraries' the process loaded (asyncio's exists in every serve): not listed, not alterable
        assert {"kafkatool.broker.requests", "kafkatool.replication"} <= set(lg)
        assert all(n == "root" or n == "kafkatool" or n.startswith("kafkatool.") for n in lg), sorted(lg)
        assert inc(c, BROKER_LOGGER, "1", ("asyncio", SET, "DEBUG")) == (
            ErrorCode.INVALID_CONFIG,
            "Logger asyncio does not exist!",
        )
        assert inc(c, BROKER_LOGGER, "1", ("kafkatoolx", SET, "DEBUG"))[0] == ErrorCode.INVALID_CONFIG
        assert {(e.config_source, e.read_only, e.is_sensitive, e.config_type) for e in lg.values()} == {
            (6, False, False, 0)
        }
        assert all(e.synonyms == [] and e.documentation is None for e in lg.values())
        assert list(describe(c, "1", keys=["root"], rtype=BROKER_LOGGER)[1]) == ["root"]
        for name, message in (
            ("", "Broker id must not be empty"),
            ("x", "Broker id must be an integer, but it is: x"),
            ("9", "Unexpected broker id, expected 1 but received 9"),
        ):
            res, _ = describe(c, name, rtype=BROKER_LOGGER)
            assert (res.error_code, res.error_message) == (ErrorCode.INVALID_REQUEST, message)

        # the level is real: an INFO line of kafkatool.broker stops once the logger is at ERROR
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool.broker", SET, "ERROR")) == (0, None)
        assert describe(c, "1", rtype=BROKER_LOGGER)[1]["kafkatool.broker"].value == "ERROR"
        mark = len(broker.log_text())
        assert inc(c, BROKER, "1", (LEADER, SET, "11")) == (0, None)
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool.broker", DELETE, None)) == (0, None)
        assert inc(c, BROKER, "1", (LEADER, DELETE, None)) == (0, None)
        lines = broker.log_text()[mark:]
        assert "dynamic broker configs altered" in lines and '"' + LEADER + '": "11"' not in lines
        assert describe(c, "1", rtype=BROKER_LOGGER)[1]["kafkatool.broker"].value == "INFO"

        assert inc(c, BROKER_LOGGER, "1", ("no.such.logger", SET, "DEBUG")) == (
            ErrorCode.INVALID_CONFIG,
            "Logger no.such.logger does not exist!",
        )
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool", SET, "debug")) == (
            ErrorCode.INVALID_CONFIG,
            "Cannot set the log level of kafkatool to debug as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
        )
        assert inc(c, BROKER_LOGGER, "1", ("root", DELETE, None)) == (
            ErrorCode.INVALID_REQUEST,
            "Removing the log level of the root logger is not allowed",
        )
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool", APPEND, "DEBUG")) == (
            ErrorCode.INVALID_REQUEST,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        )
        assert inc(c, BROKER_LOGGER, "9", ("kafkatool", SET, "DEBUG"))[0] == ErrorCode.INVALID_REQUEST
        # validate-only and a refused operation change nothing
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool", SET, "TRACE"), validate_only=True) == (0, None)
        assert inc(c, BROKER_LOGGER, "1", ("kafkatool", SET, "TRACE"), ("nope", SET, "DEBUG"))[0] != 0
        assert describe(c, "1", rtype=BROKER_LOGGER)[1]["kafkatool"].value == "INFO"


def test_configs_command_shows_defaults_and_loggers(broker):
    """kafkatool configs (kafka-configs.sh): --entity-default lists the set defaults;
    --entity-type broker-loggers lists and alters the loggers."""
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["configs", *args, "--bootstrap-server", broker.bootstrap])

    res = run("alter", "--entity-type", "brokers", "--entity-default", "--add-config", f"{LEADER}=500")
    assert res.exit_code == 0, res.output
    try:
        res = run("describe", "--entity-type", "brokers", "--entity-default")
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines()[1:] == [
            f"  {LEADER}=500 sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{LEADER}=500}}"
        ]
    finally:
        assert (
            run("alter", "--entity-type", "brokers", "--entity-default", "--delete-config", LEADER).exit_code
            == 0
        )
    res = run(
        "alter",
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "1",
        "--add-config",
        "kafkatool.broker=DEBUG",
    )
    assert res.exit_code == 0, res.output
    res = run("describe", "--entity-type", "broker-loggers", "--entity-name", "1", "--json")
    rows = {r["name"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert (
        rows["kafkatool.broker"]["value"] == "DEBUG"
        and rows["kafkatool.broker"]["source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    )
    assert (
        run(
            "alter",
            "--entity-type",
            "broker-loggers",
            "--entity-name",
            "1",
            "--delete-config",
            "kafkatool.broker",
        ).exit_code
        == 0
    )


def test_dynamic_default_survives_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with WireClient(b.bootstrap) as c:
            assert inc(c, BROKER, "", (FOLLOWER, SET, "3000")) == (0, None)
            assert inc(c, BROKER, "1", (LEADER, SET, "4000")) == (0, None)
        assert b.stop() == 0
        b.start()
        with WireClient(b.bootstrap) as c:
            d = describe(c, "", rtype=BROKER)[1]
            assert {n: (e.value, e.config_source) for n, e in d.items()} == {FOLLOWER: ("3000", 3)}
            _, one = describe(c, "1", keys=[LEADER, FOLLOWER], rtype=BROKER)
            assert {n: (e.value, e.config_source) for n, e in one.items()} == {
                LEADER: ("4000", 2),
                FOLLOWER: ("3000", 3),
            }
    finally:
        b.stop()


#: every LIST-type key of Kafka 3.7.0's KafkaConfig.configDef (KafkaConfig.scala's define(..., LIST, ...)
#: calls, RemoteLogManagerConfig's keys included: none of them is a LIST)
KAFKA_37_LIST_CONFIGS = {
    "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.cipher.suites",
    "process.roles",
    "log.cleanup.policy",
    "group.coordinator.rebalance.protocols",
    "group.consumer.assignors",
    "metric.reporters",
    "kafka.metrics.reporters",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "sasl.enabled.mechanisms",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.oauthbearer.expected.audience",
    "controller.quorum.voters",
}


def test_every_list_config_of_kafka_is_known_with_its_type():
    """IncrementalAlterConfigs' APPEND/SUBTRACT on a broker finds exactly KafkaConfig's LIST keys
    (ConfigAdminManager.prepareIncrementalConfigs), so no Kafka LIST key answers
    UNKNOWN_SERVER_ERROR and no key Kafka types otherwise is taken as a list."""
    from kafkatool.broker import config as C

    lists = {
        n
        for n in (*C.BROKER_CONFIGS, *C.KAFKA_ONLY_LIST_CONFIGS)
        if (d := C.kafka_config_def(n)) and d.type == C.LIST
    }
    assert lists == KAFKA_37_LIST_CONFIGS
    assert C.kafka_config_def("leader.replication.throttled.rate") is None  # DynamicConfig.Broker's
    assert C.kafka_config_def("no.such.config") is None
