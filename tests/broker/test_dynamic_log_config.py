"""Kafka's DynamicLogConfig on a `kafkatool serve` process: the broker-level topic defaults
(log.retention.ms, log.segment.bytes, ...) altered at runtime, per broker and as the cluster-wide
default "" (kafka-configs --entity-type brokers --entity-default --alter), reach every log
without an override of its own at once, and the topics created later; DescribeConfigs names the
dynamic layer as the source, of the broker's configs and of what a topic inherits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkatool.log import topic_settings as ts
from kafkatool.protocol.errors import ErrorCode
from tests.broker.conftest import BrokerProcess
from tests.broker.test_broker_configs import BROKER, DELETE, SET, describe, inc, syns
from tests.broker.wire import WireClient

RET, SEG, HOURS = "log.retention.ms", "log.segment.bytes", "log.retention.hours"
#: server.properties of these brokers: retention from log.retention.hours, fast retention passes
EXTRA = ["log.retention.hours=5", "log.retention.check.interval.ms=200", "log.segment.delete.delay.ms=0"]


def create_topics(b: BrokerProcess, **topics: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = admin.create_topics([NewTopic(t, 1, 1, config=cfg) for t, cfg in topics.items()])
    for f in futures.values():
        f.result(20)


def produce(b: BrokerProcess, topic: str, count: int, age_ms: int = 0) -> None:
    """``count`` records of ~300 bytes, each its own batch, with timestamps ``age_ms`` old."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    failed: list = []
    stamp = int(time.time() * 1000) - age_ms
    for i in range(count):
        p.produce(
            topic,
            value=b"v" * 300,
            key=b"%d" % i,
            timestamp=stamp,
            on_delivery=lambda err, _m: failed.append(err) if err else None,
        )
        p.flush(10)
    assert p.flush(20) == 0 and not failed, failed[:3]


def segments(b: BrokerProcess, topic: str) -> list[Path]:
    return sorted((b.data_dir / f"{topic}-0").glob("*.log"))


def wait_until(what, timeout: float = 15.0, step: float = 0.1):
    for _ in range(int(timeout / step)):
        if what():
            return True
        time.sleep(step)
    return what()


def topic_entry(c, topic: str, key: str):
    res, entries = describe(c, topic, keys=[key])
    assert res.error_code == 0
    return entries[key]


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=EXTRA).start()
    yield b
    b.stop()


def test_default_log_configs_reach_every_log_and_an_override_still_wins(broker):
    create_topics(broker, plain={}, own={"retention.ms": "86400000"})
    with WireClient(broker.bootstrap) as c:
        # retention.ms from log.retention.hours alone: Kafka's ConfigHelper lists no synonym
        # (configSynonyms drops what precedes the first log.retention.ms) and says DEFAULT_CONFIG
        e = topic_entry(c, "plain", "retention.ms")
        assert (e.value, e.config_source, syns(e)) == ("18000000", 5, [])
        # the engine takes a new segment size at once: the logs roll at 1024 bytes
        assert inc(c, BROKER, "", (SEG, SET, "1024")) == (0, None)
    produce(broker, "plain", 12, age_ms=2 * 3_600_000)
    produce(broker, "own", 12, age_ms=2 * 3_600_000)
    assert len(segments(broker, "plain")) >= 5 and len(segments(broker, "own")) >= 5
    own_before = segments(broker, "own")
    with WireClient(broker.bootstrap) as c:
        e = topic_entry(c, "plain", "segment.bytes")
        assert (e.value, e.config_source, syns(e)) == (
            "1024",
            3,
            [(SEG, "1024", 3), (SEG, "1073741824", 5)],
        )
        # a one-hour default: retention deletes the two-hour-old segments of plain, not of own
        assert inc(c, BROKER, "", (RET, SET, "3600000")) == (0, None)
        assert wait_until(lambda: len(segments(broker, "plain")) == 1), segments(broker, "plain")
        assert segments(broker, "own") == own_before
        e = topic_entry(c, "plain", "retention.ms")
        assert (e.value, e.config_source) == ("3600000", 3)
        assert syns(e) == [(RET, "3600000", 3), (HOURS, "5", 4), (HOURS, "168", 5)]
        e = topic_entry(c, "own", "retention.ms")
        assert (e.value, e.config_source) == ("86400000", 1)
        assert syns(e)[:2] == [("retention.ms", "86400000", 1), (RET, "3600000", 3)]
        # the broker's own view: the dynamic default, its synonyms, and the resource ""
        _, one = describe(c, "1", keys=[RET, SEG], rtype=BROKER)
        assert {n: (x.value, x.config_source) for n, x in one.items()} == {
            RET: ("3600000", 3),
            SEG: ("1024", 3),
        }
        _, d = describe(c, "", rtype=BROKER)
        assert sorted(d) == [RET, SEG] and syns(d[RET]) == [(RET, "3600000", 3)]
        # this broker's own value wins over the default
        assert inc(c, BROKER, "1", (RET, SET, "7200000")) == (0, None)
        e = topic_entry(c, "plain", "retention.ms")
        assert (e.value, e.config_source) == ("7200000", 2)
        assert syns(e)[:2] == [(RET, "7200000", 2), (RET, "3600000", 3)]
        # a topic created later inherits the defaults: its log rolls at 1024 bytes too
        create_topics(broker, later={})
        assert topic_entry(c, "later", "segment.bytes").config_source == 3
    produce(broker, "later", 8)
    assert len(segments(broker, "later")) >= 3
    with WireClient(broker.bootstrap) as c:
        # DELETE falls back layer by layer: default, then server.properties, then Kafka's default
        assert inc(c, BROKER, "1", (RET, DELETE, None)) == (0, None)
        assert topic_entry(c, "plain", "retention.ms").value == "3600000"
        assert inc(c, BROKER, "", (RET, DELETE, None), (SEG, DELETE, None)) == (0, None)
        e = topic_entry(c, "plain", "retention.ms")
        assert (e.value, e.config_source) == ("18000000", 5)
        e = topic_entry(c, "later", "segment.bytes")
        assert (e.value, e.config_source) == ("1073741824", 5)
        assert describe(c, "", rtype=BROKER)[1] == {}
    # the live log took the fallback: a batch no longer rolls a segment
    n = len(segments(broker, "later"))
    produce(broker, "later", 4)
    assert len(segments(broker, "later")) == n


def test_values_kafka_refuses_are_refused_and_nothing_is_kept(broker):
    refusals = [
        (SEG, "5", "Invalid value 5 for configuration log.segment.bytes: Value must be at least 14"),
        (RET, "0", "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
        ("log.roll.ms", "0", "requirement failed: log.roll.ms must be greater than or equal to 1"),
        (
            "log.cleanup.policy",
            "compact,shred",
            "Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete",
        ),
        ("log.retention.bytes", "x", "Invalid value x for configuration log.retention.bytes: Not a number of type LONG"),
        (
            "log.cleaner.min.cleanable.ratio",
            "1.5",
            "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1",
        ),
        ("message.max.bytes", "3000000000", "Invalid value 3000000000 for configuration message.max.bytes: Not a number of type INT"),
        ("log.preallocate", "yes", "Invalid value yes for configuration log.preallocate: Expected value to be either true or false"),
        ("log.roll.hours", "1", "Cannot update these configs dynamically: Set(log.roll.hours)"),
    ]  # fmt: skip
    with WireClient(broker.bootstrap) as c:
        for name, value, message in refusals:
            for node in ("", "1"):
                assert inc(c, BROKER, node, (name, SET, value)) == (ErrorCode.INVALID_REQUEST, message)
        # negative retention is unlimited (-1), as KafkaConfig.logRetentionTimeMillis reads it
        assert inc(c, BROKER, "", (RET, SET, "-5"), validate_only=True) == (0, None)
        assert inc(
            c, BROKER, "", ("log.message.timestamp.type", SET, "LogAppendTime"), validate_only=True
        ) == (0, None)
        assert describe(c, "", rtype=BROKER)[1] == {}
        assert describe(c, "1", keys=[RET], rtype=BROKER)[1][RET].config_source == 5


def test_dynamic_log_configs_survive_a_restart_and_offline_commands_see_them(broker):
    create_topics(broker, plain={})
    with WireClient(broker.bootstrap) as c:
        assert inc(c, BROKER, "", (RET, SET, "3600000")) == (0, None)
        assert inc(c, BROKER, "1", (SEG, SET, "2048")) == (0, None)
    assert broker.stop() == 0
    # the offline commands resolve through the same map, with the dir's dynamic configs as a layer
    resolved = ts.resolve("plain", server_props={HOURS: "5"}, layers=ts.dir_layers([broker.data_dir]))
    assert (resolved.config.retention_ms, resolved.config.segment_bytes) == (3600000, 2048)
    assert resolved.source_of("retention.ms") == f"{ts.DYNAMIC_CONFIGS_FILE}: dynamic broker config ({RET})"
    broker.start()
    with WireClient(broker.bootstrap) as c:
        assert topic_entry(c, "plain", "retention.ms").config_source == 3
        e = topic_entry(c, "plain", "segment.bytes")
        assert (e.value, e.config_source) == ("2048", 2)
    produce(broker, "plain", 14)
    assert len(segments(broker, "plain")) >= 2  # the reloaded log rolls at 2048 bytes


def test_append_and_subtract_on_the_list_config(broker):
    """APPEND and SUBTRACT work on log.cleanup.policy (a LIST) from the value the resource stores,
    else Kafka's default (ConfigAdminManager.prepareIncrementalConfigs)."""
    from tests.broker.test_broker_configs import APPEND

    create_topics(broker, plain={})
    with WireClient(broker.bootstrap) as c:
        assert inc(c, BROKER, "", ("log.cleanup.policy", APPEND, "compact")) == (0, None)
        assert describe(c, "", rtype=BROKER)[1]["log.cleanup.policy"].value == "delete,compact"
        assert inc(c, BROKER, "", ("log.cleanup.policy", 3, "delete")) == (0, None)
        e = topic_entry(c, "plain", "cleanup.policy")
        assert (e.value, e.config_source) == ("compact", 3)
        assert inc(c, BROKER, "", (RET, APPEND, "5"))[0] == ErrorCode.INVALID_CONFIG
        assert inc(c, BROKER, "", ("log.cleanup.policy", DELETE, None)) == (0, None)
        assert topic_entry(c, "plain", "cleanup.policy").config_source == 5


def test_local_retention_above_retention_is_refused_as_dynamic_log_config_does(broker):
    """DynamicLogConfig.validateReconfiguration (Kafka 3.7): with a bounded log.retention.ms
    (here log.retention.hours=5) or log.retention.bytes, a dynamic change that leaves
    log.local.retention.ms (.bytes) above it, or at -1, is refused with Kafka's ConfigException
    message, by IncrementalAlterConfigs and AlterConfigs alike; -2 (as the retention) and a value
    within it are taken."""
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated import alter_configs_request as AC

    LOCAL_MS, LOCAL_BYTES = "log.local.retention.ms", "log.local.retention.bytes"
    five_hours = 5 * 3600 * 1000

    def legacy(c, name, configs):
        res = AC.AlterConfigsResource(
            resource_type=BROKER,
            resource_name=name,
            configs=[AC.AlterableConfig(name=n, value=v) for n, v in configs],
        )
        r = c.request(33, 2, G.AlterConfigsRequest(resources=[res], validate_only=False)).responses[0]
        return r.error_code, r.error_message

    above = (
        f"Invalid value {five_hours + 1} for configuration {LOCAL_MS}: "
        f"Value must not be more than log.retention.ms property value: {five_hours}"
    )
    with WireClient(broker.bootstrap) as c:
        for node in ("", "1"):
            assert inc(c, BROKER, node, (LOCAL_MS, SET, str(five_hours + 1))) == (
                ErrorCode.INVALID_REQUEST,
                above,
            )
            assert inc(c, BROKER, node, (LOCAL_MS, SET, "-1")) == (
                ErrorCode.INVALID_REQUEST,
                f"Invalid value -1 for configuration {LOCAL_MS}: "
                f"Value must not be -1 as log.retention.ms value is set as {five_hours}.",
            )
        assert legacy(c, "1", [(LOCAL_MS, str(five_hours + 1))]) == (ErrorCode.INVALID_REQUEST, above)
        # unbounded log.retention.bytes (-1): any local size; bounded, no more than it
        assert inc(c, BROKER, "", (LOCAL_BYTES, SET, "5000"), validate_only=True) == (0, None)
        assert inc(c, BROKER, "1", ("log.retention.bytes", SET, "1000"), (LOCAL_BYTES, SET, "2000")) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid value 2000 for configuration {LOCAL_BYTES}: "
            "Value must not be more than log.retention.bytes property value: 1000",
        )
        # within the retention: taken; then the retention cannot drop below it
        assert inc(c, BROKER, "", (LOCAL_MS, SET, "3600000")) == (0, None)
        assert inc(c, BROKER, "1", (RET, SET, "1000")) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid value 3600000 for configuration {LOCAL_MS}: "
            "Value must not be more than log.retention.ms property value: 1000",
        )
        assert inc(c, BROKER, "1", (RET, SET, "1000"), (LOCAL_MS, SET, "-2")) == (0, None)
        assert inc(c, BROKER, "1", (RET, DELETE, None), (LOCAL_MS, DELETE, None)) == (0, None)
        assert inc(c, BROKER, "", (LOCAL_MS, DELETE, None)) == (0, None)
        assert describe(c, "", rtype=BROKER)[1] == {}


def test_serve_and_the_offline_commands_rank_the_levels_by_one_rule(tmp_path):
    """The broker's own dynamic config > the cluster-wide default one > server.properties >
    Kafka's default, by one rule (topic_settings.broker_levels) for serve's BrokerConfig and the
    offline commands: for a config set at every level, at the two lower ones and at
    server.properties alone, the value (and level) a real serve describes is the one the offline
    resolution of its dir gives; and serve's lookup follows a level that is replaced, not only one
    changed in place."""
    from kafkatool.broker import config as C

    clean = "log.cleaner.min.compaction.lag.ms"
    b = BrokerProcess(tmp_path / "data", extra=[f"{RET}=1000", f"{SEG}=1048576", f"{clean}=7"]).start()
    try:
        with WireClient(b.bootstrap) as c:
            assert inc(c, BROKER, "", (RET, SET, "2000"), (SEG, SET, "2097152")) == (0, None)
            assert inc(c, BROKER, "1", (RET, SET, "3000")) == (0, None)
            served = describe(c, "1", keys=[RET, SEG, clean], rtype=BROKER)[1]
    finally:
        assert b.stop() == 0
    levels = {
        C.SOURCE_DYNAMIC_BROKER: f"{ts.DYNAMIC_CONFIGS_FILE}: dynamic broker config",
        C.SOURCE_DYNAMIC_DEFAULT_BROKER: f"{ts.DYNAMIC_CONFIGS_FILE}: dynamic broker config",
        C.SOURCE_STATIC_BROKER: ts.SOURCE_SERVER,
    }
    assert {n: (e.value, e.config_source) for n, e in served.items()} == {
        RET: ("3000", C.SOURCE_DYNAMIC_BROKER),
        SEG: ("2097152", C.SOURCE_DYNAMIC_DEFAULT_BROKER),
        clean: ("7", C.SOURCE_STATIC_BROKER),
    }
    static = {RET: "1000", SEG: "1048576", clean: "7"}
    values, sources = ts.broker_values(static, ts.dir_layers([b.data_dir]))
    for name, e in served.items():
        assert (values[name], sources[name]) == (e.value, f"{levels[e.config_source]} ({name})")

    cfg = C.BrokerConfig(dict(static))
    layer = ts.dir_layers([b.data_dir])[0]
    cfg.dynamic.update(layer.broker_node)  # changed in place, as take_dynamic does
    cfg.dynamic_default = dict(layer.broker_default)  # replaced
    assert {n: (cfg.get(n), cfg.source(n)) for n in served} == {
        n: (e.value, e.config_source) for n, e in served.items()
    }
    assert {n: cfg._set_values()[n] for n in served} == {n: values[n] for n in served}
    cfg.dynamic = {}
    assert (cfg.get(RET), cfg.source(RET)) == ("2000", C.SOURCE_DYNAMIC_DEFAULT_BROKER)
