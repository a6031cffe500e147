"""Issue 12, "never destroy what Kafka would keep": every command sees a topic's settings as Kafka does.

Cases from the issue, reproduced through a real ``kafkatool serve`` and real clients:
a topic created with cleanup.policy=compact, retention.bytes=1000000 and
segment.bytes=1048576; ``__consumer_offsets``.  The class: every place Kafka keeps
topic configs (embedded metadata, KRaft __cluster_metadata, ZooKeeper, a live
cluster) is read, internal topics are compacted by definition, and retention only
deletes data of a topic without delete in its policy when the operator overrides it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.formats.properties import encode_properties
from kafkatool.log import topic_settings as ts
from tests.segments import make_partition

REPO = Path(__file__).resolve().parents[2]
NOW_FAR = "2100-01-01T00:00:00Z"


def kafkatool(*args) -> tuple[int, list[dict], str]:
    p = subprocess.run(
        [sys.executable, "-m", "kafkatool", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return p.returncode, lines, p.stderr + p.stdout


def partition_records(lines, name):
    return [x for x in lines if x.get("type") == "partition" and x["partition"] == name]


@pytest.fixture(scope="module")
def served_dir(tmp_path_factory):
    """Topics created through a real serve with the issue's configs, data produced, clean stop."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.conftest import BrokerProcess

    data = tmp_path_factory.mktemp("issue12") / "data"
    # no initial rebalance delay: the consumer's group join below is not held 3 s for members
    # that are not coming
    extra = [
        "log.segment.bytes=200000",
        "offsets.topic.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
    ]
    b = BrokerProcess(data, extra=extra).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        futures = admin.create_topics(
            [
                NewTopic("cmp", 1, 1, config={"cleanup.policy": "compact"}),
                NewTopic("t3", 1, 1, config={"retention.bytes": "1000000"}),
                NewTopic("seg", 1, 1, config={"segment.bytes": "1048576"}),
            ]
        )
        for f in futures.values():
            f.result(20)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 50000})
        failed = []
        for i in range(2500):
            for t in ("cmp", "t3", "seg"):
                p.produce(
                    t,
                    key=b"k%d" % (i % 40),
                    value=b"x" * 1000,
                    on_delivery=lambda err, _m: failed.append(err) if err else None,
                )
        assert p.flush(30) == 0 and not failed, failed[:3]
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "g-issue12",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe(["cmp"])
        got = 0
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
                if got >= 10:
                    break
        c.commit(asynchronous=False)
        c.close()
        assert got >= 10
    finally:
        assert b.stop() == 0
    return data


def test_issue12_retention_keeps_compacted_topic(served_dir):
    """Case: retention --retention-ms 1000 on cmp-0 planned to delete every closed segment."""
    assert len(list((served_dir / "cmp-0").glob("*.log"))) > 3
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1000", served_dir / "cmp-0", "--json"
    )
    assert code == 0, out
    (part,) = partition_records(lines, "cmp-0")
    assert part["settings"]["cleanup.policy"] == {"value": "compact", "source": ts.SOURCE_EMBEDDED}
    assert not [x for x in lines if x.get("type") == "segment"]
    assert any("has no delete" in n and "--retention-ms ignored" in n for n in part["notes"])
    # the human view says the same
    code, _, text = kafkatool("retention", "--dry-run", "--retention-ms", "1000", served_dir / "cmp-0")
    assert "cleanup.policy=compact (topic config in kafkatool-cluster.json)" in text
    assert "would delete 0 segment(s)" in text


def test_issue12_retention_keeps_consumer_offsets(served_dir):
    code, lines, out = kafkatool("retention", "--dry-run", "--retention-ms", "1000", served_dir, "--json")
    assert code == 1, out  # t3 and seg have segments past 1000 ms
    offsets = [
        x for x in lines if x.get("type") == "partition" and x["partition"].startswith("__consumer_offsets")
    ]
    assert len(offsets) == 2
    for part in offsets:
        assert part["settings"]["cleanup.policy"]["value"] == "compact"
    deleted = {x["partition"] for x in lines if x.get("type") == "segment"}
    assert deleted and not any(p.startswith(("__consumer_offsets", "cmp")) for p in deleted)


def test_issue12_retention_bytes_from_the_topic(served_dir):
    """Case: retention.bytes=1000000 was reported as -1 (default)."""
    code, lines, out = kafkatool("retention", "--dry-run", served_dir / "t3-0", "--json")
    (part,) = partition_records(lines, "t3-0")
    assert part["settings"]["retention.bytes"] == {"value": 1000000, "source": ts.SOURCE_EMBEDDED}
    segs = [x for x in lines if x.get("type") == "segment"]
    assert code == 1 and segs and all(s["reason"] == "retention.bytes" for s in segs), out
    assert part["bytes_before"] - sum(s["bytes"] for s in segs) <= 1000000 + 200000


def test_issue12_compact_segment_bytes_from_the_topic(served_dir):
    """Case: compact showed segment.bytes default for a topic created with 1048576; and compact
    never cleans a topic whose own policy is delete (Kafka keeps every record of it)."""
    code, lines, out = kafkatool("compact", "--dry-run", served_dir / "seg-0", "--json")
    (part,) = partition_records(lines, "seg-0")
    assert part["settings"]["segment.bytes"] == {"value": 1048576, "source": ts.SOURCE_EMBEDDED}
    assert part["action"] == "nothing_to_do" and code == 0
    assert any(n.startswith("skipped: cleanup.policy=delete") for n in part["notes"])
    code, lines, out = kafkatool(
        "compact", "--dry-run", "--cleanup-policy", "compact", served_dir / "seg-0", "--json"
    )
    (part,) = partition_records(lines, "seg-0")
    assert code == 1 and part["action"] == "would_compact", out
    assert part["overrode"] == [
        {"config": "cleanup.policy", "from": "delete", "source": "default", "to": "compact"}
    ]


def test_retention_override_is_explicit_and_reported(served_dir, tmp_path):
    work = tmp_path / "data"
    shutil.copytree(served_dir, work)
    before = sorted(p.name for p in (work / "cmp-0").glob("*.log"))
    code, lines, out = kafkatool(
        "retention", "--retention-ms", "1000", "--cleanup-policy", "delete", work / "cmp-0", "--json"
    )
    assert code == 0, out
    (part,) = partition_records(lines, "cmp-0")
    assert part["overrode"] == [
        {"config": "cleanup.policy", "from": "compact", "source": ts.SOURCE_EMBEDDED, "to": "delete"}
    ]
    assert any(n.startswith("OVERRIDE: cleanup.policy=compact") for n in part["notes"])
    after = sorted(p.name for p in (work / "cmp-0").glob("*.log"))
    assert len(after) == 1 < len(before)


def test_live_cluster_source(served_dir, tmp_path, make_broker):
    """--bootstrap-server: DescribeConfigs of the running cluster names the policy when the dir does not."""
    work = tmp_path / "offline"
    shutil.copytree(served_dir / "cmp-0", work / "cmp-0")
    b = make_broker(tmp_path / "live").start()
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics(
        [NewTopic("cmp", 1, 1, config={"cleanup.policy": "compact,delete", "retention.ms": "5000"})]
    )["cmp"].result(20)
    code, lines, out = kafkatool(
        "retention",
        "--dry-run",
        "--bootstrap-server",
        b.bootstrap,
        work / "cmp-0",
        "--json",
        "--now",
        NOW_FAR,
    )
    (part,) = partition_records(lines, "cmp-0")
    label = f"{ts.SOURCE_CLUSTER}: topic config"
    assert part["settings"]["cleanup.policy"] == {"value": "compact,delete", "source": label}
    assert part["settings"]["retention.ms"] == {"value": 5000, "source": label}
    assert code == 1 and [x for x in lines if x.get("type") == "segment"], out


# ------------------------------------------------------------------------- a Kafka-written KRaft dir
def _metadata_value(record, api_key: int, version: int = 0) -> bytes:
    return bytes([1, api_key, version]) + record.encode(version)


def write_kraft_dir(log_dir: Path, topic: str, configs: dict[str, str | None], extra=()) -> None:
    """A log dir as a KRaft broker leaves it: meta.properties, __cluster_metadata-0, topic-0."""
    from kafkatool.formats import records as R
    from kafkatool.formats.generated.config_record import ConfigRecord
    from kafkatool.formats.generated.topic_record import TopicRecord
    from tests.segments import write_segment

    topic_id = uuid.uuid4()
    values = [_metadata_value(TopicRecord(name=topic, topic_id=topic_id), 2)]
    for k, v in configs.items():
        values.append(_metadata_value(ConfigRecord(resource_type=2, resource_name=topic, name=k, value=v), 4))
    values += list(extra)
    batch = R.build_record_batch([R.SimpleRecord(v, None, (), 1_700_000_000_000) for v in values])
    write_segment(log_dir / "__cluster_metadata-0", [batch])
    (log_dir / "meta.properties").write_bytes(
        encode_properties(
            {"version": "1", "node.id": "1", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"},
            "Tue Nov 24 00:00:00 UTC 2026",
        )
    )
    make_partition(log_dir, f"{topic}-0", segments=4, batches_per_segment=10)


def test_kraft_dynamic_broker_configs(tmp_path):
    """A cluster-wide dynamic config in the KRaft log (kafka-configs --entity-default) applies to
    every topic without an override, over server.properties."""
    from kafkatool.formats.generated.config_record import ConfigRecord

    d = tmp_path / "kraft"
    extra = _metadata_value(
        ConfigRecord(resource_type=4, resource_name="", name="log.cleanup.policy", value="compact"), 4
    )
    write_kraft_dir(d, "events", {}, extra=[extra])
    props = tmp_path / "server.properties"
    props.write_text("log.cleanup.policy=delete\n")
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1", "--config", props, d, "--json", "--now", NOW_FAR
    )
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": f"{ts.SOURCE_KRAFT}: dynamic broker config (log.cleanup.policy)",
    }
    assert code == 0 and not [x for x in lines if x.get("type") == "segment"], out


def test_serve_applies_kraft_dynamic_broker_configs(tmp_path, make_broker):
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    from kafkatool.formats.generated.config_record import ConfigRecord

    d = tmp_path / "kraft"
    extra = [
        _metadata_value(
            ConfigRecord(resource_type=4, resource_name="", name="log.cleanup.policy", value="compact"), 4
        ),
        # this node's own value (kafka-configs --entity-name 1) is the other layer
        _metadata_value(
            ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value="5000"), 4
        ),
    ]
    write_kraft_dir(d, "events", {}, extra=extra)
    b = make_broker(d, read_only=True).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("topic", "events")
    got = admin.describe_configs([res])[res].result(20)
    entry = got["cleanup.policy"]
    assert entry.value == "compact"
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert got["retention.ms"].value == "5000"
    assert got["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    from tests.broker.test_admin import describe
    from tests.broker.wire import WireClient

    with WireClient(b.bootstrap) as c:  # the cluster-wide default (confluent_kafka refuses "")
        assert {n: e.config_source for n, e in describe(c, "", rtype=4)[1].items()} == {
            "log.cleanup.policy": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        }


def _broker_config_record(resource: str, name: str, value: str) -> bytes:
    from kafkatool.formats.generated.config_record import ConfigRecord

    return _metadata_value(ConfigRecord(resource_type=4, resource_name=resource, name=name, value=value), 4)


def test_serve_takes_kraft_dynamic_broker_configs_by_the_value_rule(tmp_path, caplog):
    """A KRaft dir's dynamic broker configs go through the one rule before the logs open
    (DynamicBrokerConfig.fromPersistentProps / removeInvalidConfigs): an invalid value, a
    read-only config and a value this broker does not apply are logged and left out, the rest
    applies and is in the partition's LogConfig from its load."""
    import logging

    from kafkatool.broker.server import Broker

    d = tmp_path / "kraft"
    extra = [
        _broker_config_record("", "log.retention.ms", "5000"),
        _broker_config_record("", "log.cleanup.policy", "bogus"),
        _broker_config_record("", "log.retention.hours", "1"),  # read-only in Kafka
        _broker_config_record("1", "log.segment.bytes", "5"),
        _broker_config_record("1", "message.max.bytes", "2048"),
        _broker_config_record("1", "num.io.threads", "4"),  # dynamic in Kafka, not applied here
    ]
    write_kraft_dir(d, "events", {}, extra=extra)
    caplog.set_level(logging.WARNING, logger="kafkatool")
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    try:
        b.open_storage()
        assert b.config.dynamic_default == {"log.retention.ms": "5000"}
        assert b.config.dynamic == {"message.max.bytes": "2048"}
        lg = b.manager.logs[("events", 0)]
        assert (lg.config.retention_ms, lg.config.cleanup_policy) == (5000, ("delete",))
        assert lg.config.segment_bytes == 1073741824 and lg.config.max_message_bytes == 2048
    finally:
        b.close_storage()
    meta = d / "__cluster_metadata-0"
    said = sorted(r.getMessage() for r in caplog.records if "ignored" in r.getMessage())
    assert said == [
        f"dynamic broker config log.cleanup.policy in {meta} (cluster default) ignored: Invalid value "
        "bogus for configuration log.cleanup.policy: String must be one of: compact, delete",
        f"dynamic broker config log.retention.hours in {meta} (cluster default) ignored: Cannot update "
        "these configs dynamically: Set(log.retention.hours)",
        f"dynamic broker config log.segment.bytes in {meta} (broker 1) ignored: Invalid value 5 for "
        "configuration log.segment.bytes: Value must be at least 14",
        f"dynamic broker config num.io.threads in {meta} (broker 1) ignored: this broker does not apply it",
    ]


def test_kraft_dynamic_broker_configs_the_broker_cannot_run_with_are_not_applied(tmp_path, caplog):
    """Values each valid alone but breaking one of KafkaConfig's requirements together
    (log.retention.ms 0) are not applied at all, by serve or by an offline command; what serve's
    own file says (changed through this broker since) is taken over the metadata log."""
    import logging

    from kafkatool.broker.server import Broker

    d = tmp_path / "kraft"
    extra = [
        _broker_config_record("", "log.retention.ms", "0"),
        _broker_config_record("", "log.cleanup.policy", "compact"),
    ]
    write_kraft_dir(d, "events", {}, extra=extra)
    caplog.set_level(logging.WARNING, logger="kafkatool")
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    try:
        b.open_storage()
        assert b.config.dynamic_default == {}
        assert b.manager.logs[("events", 0)].config.cleanup_policy == ("delete",)
    finally:
        b.close_storage()
    assert [r.getMessage() for r in caplog.records if "not applied" in r.getMessage()] == [
        f"dynamic broker configs in {d / '__cluster_metadata-0'} (cluster default) not applied: "
        "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    ]
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1", d, "--json", "--now", NOW_FAR
    )
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"]["value"] == "delete", out
    # serve's file (a later change through this broker) wins over the metadata log
    (d / ts.DYNAMIC_CONFIGS_FILE).write_text(
        json.dumps(
            {"version": 1, "broker": 1, "configs": {}, "default_configs": {"log.retention.ms": "60000"}}
        )
    )
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    try:
        b.open_storage()
        assert b.config.dynamic_default == {"log.retention.ms": "60000", "log.cleanup.policy": "compact"}
        assert b.manager.logs[("events", 0)].config.cleanup_policy == ("compact",)
    finally:
        b.close_storage()


def test_offline_commands_skip_an_invalid_kraft_dynamic_broker_config(tmp_path):
    """An offline command takes a KRaft dir's dynamic broker configs as the broker does: the
    invalid one is a warning and left out, the valid one applies (before: exit 2 for the dir)."""
    d = tmp_path / "kraft"
    extra = [
        _broker_config_record("", "log.cleanup.policy", "compact"),
        _broker_config_record("1", "log.segment.bytes", "5"),
    ]
    write_kraft_dir(d, "events", {}, extra=extra)
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1", d, "--json", "--now", NOW_FAR
    )
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": f"{ts.SOURCE_KRAFT}: dynamic broker config (log.cleanup.policy)",
    }
    warnings = [x["message"] for x in lines if x.get("type") == "warning"]
    assert warnings == [
        f"dynamic broker config log.segment.bytes in {d / '__cluster_metadata-0'} (broker 1) ignored: "
        "Invalid value 5 for configuration log.segment.bytes: Value must be at least 14"
    ]
    assert code == 0 and not [x for x in lines if x.get("type") == "segment"], out


def test_serve_takes_the_kraft_configs_of_the_node_id_it_runs_as(tmp_path):
    """serve picks the metadata log's per-broker ConfigRecords by the id it runs as: its
    configured node.id (before: the dir's meta.properties, so a dir without one took none), after
    checking every log dir's meta.properties against it as Kafka does
    (MetaPropertiesEnsemble.verify): a dir of another node is refused before anything is taken."""
    from kafkatool.broker.server import Broker

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {}, extra=[_broker_config_record("3", "log.retention.ms", "5000")])
    (d / "meta.properties").unlink()  # the metadata log copied without it
    listen = "listeners=PLAINTEXT://127.0.0.1:0"
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", listen, "node.id=3"]), read_only=True)
    try:
        b.open_storage()
        assert b.config.dynamic == {"log.retention.ms": "5000"}
        assert b.manager.logs[("events", 0)].config.retention_ms == 5000
    finally:
        b.close_storage()
    # a second log dir of another node: Kafka refuses to start, and so does serve
    other = tmp_path / "other"
    other.mkdir()
    (other / "meta.properties").write_bytes(
        encode_properties(
            {"version": "1", "node.id": "4", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"},
            "Tue Nov 24 00:00:00 UTC 2026",
        )
    )
    for extra in (["node.id=3"], []):
        (d / "meta.properties").write_bytes((other / "meta.properties").read_bytes().replace(b"=4", b"=3"))
        b = Broker(BrokerConfig.load(None, [f"log.dirs={d},{other}", listen, *extra]), read_only=True)
        with pytest.raises(OSError) as e:
            b.open_storage()
        assert b.config.dynamic == {}
        want = (
            f"configured node id 3 does not match the id 4 stored in {other / 'meta.properties'}"
            if extra
            else f"stored node id 4 in {other / 'meta.properties'} does not match node id 3 in "
            f"{d / 'meta.properties'}"
        )
        assert str(e.value) == f"{want} (Kafka refuses this too)"


def test_offline_commands_take_the_kraft_configs_of_the_configs_node_id(tmp_path):
    """An offline command picks the per-broker ConfigRecords by meta.properties' node id, or by
    the node.id of its --config when given (the id a broker started with it would run as), and
    says when the two differ."""
    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {}, extra=[_broker_config_record("7", "log.cleanup.policy", "compact")])
    args = ("retention", "--dry-run", "--retention-ms", "1", d, "--json", "--now", NOW_FAR)
    code, lines, out = kafkatool(*args)
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"]["value"] == "delete", out
    props = tmp_path / "server.properties"
    props.write_text("node.id=7\n")
    code, lines, out = kafkatool(*args, "--config", props)
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": f"{ts.SOURCE_KRAFT}: dynamic broker config (log.cleanup.policy)",
    }
    assert [x["message"] for x in lines if x.get("type") == "warning"] == [
        f"{d / 'meta.properties'} says node 1, --config node 7 (a broker refuses to start with both); "
        "the dynamic broker configs of node 7 are used"
    ]
    assert code == 0 and not [x for x in lines if x.get("type") == "segment"], out


def test_kraft_metadata_log_source(tmp_path):
    d = tmp_path / "kraft"
    write_kraft_dir(
        d, "events", {"cleanup.policy": "compact", "segment.bytes": "99999", "retention.ms": None}
    )
    layer = ts.read_kraft(d)
    assert layer.topics == {"events": {"cleanup.policy": "compact", "segment.bytes": "99999"}}
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1", d, "--json", "--now", NOW_FAR
    )
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["cleanup.policy"] == {"value": "compact", "source": ts.SOURCE_KRAFT}
    assert code == 0 and not [x for x in lines if x.get("type") == "segment"], out


def test_serve_describes_kafka_dir_policies(tmp_path, make_broker):
    """serve on a Kafka-written dir answers DescribeConfigs with the policy the dir holds."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {"cleanup.policy": "compact"})
    make_partition(d, "__consumer_offsets-0", segments=1, batches_per_segment=1)
    b = make_broker(d, read_only=True).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for topic in ("events", "__consumer_offsets"):
        res = ConfigResource("topic", topic)
        entries = admin.describe_configs([res])[res].result(20)
        assert entries["cleanup.policy"].value == "compact"
        assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "configs from topic config in __cluster_metadata" in b.log_text()


def test_internal_topics_and_cleaner_checkpoint_without_metadata(tmp_path):
    """A ZooKeeper-mode Kafka dir (no metadata in it): internal topics are compacted by definition,
    a partition in cleaner-offset-checkpoint is treated as compacted."""
    from kafkatool.formats.checkpoint import encode_offset_checkpoint

    d = tmp_path / "zkmode"
    make_partition(d, "__transaction_state-3", segments=3, batches_per_segment=5)
    make_partition(d, "legacy-0", segments=3, batches_per_segment=5)
    make_partition(d, "plain-0", segments=3, batches_per_segment=5)
    (d / "cleaner-offset-checkpoint").write_bytes(encode_offset_checkpoint({("legacy", 0): 10}))
    code, lines, out = kafkatool(
        "retention", "--dry-run", "--retention-ms", "1", d, "--json", "--now", NOW_FAR
    )
    got = {x["partition"]: x for x in lines if x.get("type") == "partition"}
    assert got["__transaction_state-3"]["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": ts.SOURCE_INTERNAL,
    }
    assert got["legacy-0"]["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": ts.SOURCE_CLEANER_CHECKPOINT,
    }
    assert got["plain-0"]["settings"]["cleanup.policy"]["source"] == "default"
    assert any("no source holds topic plain" in n for n in got["plain-0"]["notes"])
    deleted = {x["partition"] for x in lines if x.get("type") == "segment"}
    assert deleted == {"plain-0"} and code == 1, out


# ------------------------------------------------------------------------- one mapping
@pytest.mark.parametrize(
    "props",
    [
        {},
        {"log.retention.hours": "1", "log.segment.bytes": "4096", "log.cleanup.policy": "compact"},
        {"log.retention.minutes": "5", "log.retention.hours": "1", "log.roll.hours": "2"},
        {"log.retention.ms": "-5", "log.flush.scheduler.interval.ms": "77", "log.preallocate": "true"},
        {"log.retention.hours": "-1", "log.cleaner.min.cleanable.ratio": "0.25"},
    ],
)
def test_broker_and_offline_commands_share_one_mapping(props):
    """The broker (serve, DescribeConfigs) and the offline commands resolve a topic identically."""
    broker = BrokerConfig(dict(props))
    offline = ts.resolve("t", server_props=props)
    assert broker.log_config() == offline.config
    overrides = {"retention.ms": "1234", "cleanup.policy": "compact,delete"}
    assert (
        broker.log_config(overrides)
        == ts.resolve("t", server_props=props, layers=[ts.ConfigLayer("x", {"t": overrides})]).config
    )
    for name in ts.TOPIC_CONFIGS:
        value, source = broker.broker_value_for_topic(name)
        assert value == ts.broker_value(name, props)[0]


def test_rebuild_index_and_recover_use_the_topics_index_settings(tmp_path):
    """The class reaches every offline command that needs a topic's config: rebuild-index and
    recover rebuild indexes with the topic's own index.interval.bytes (not Kafka's 4096), so a
    healthy partition written by serve with index.interval.bytes=128 shows no difference."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.conftest import BrokerProcess

    data = tmp_path / "data"
    b = BrokerProcess(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("dense", 1, 1, config={"index.interval.bytes": "128"})])[
            "dense"
        ].result(20)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.size": 1000})
        for i in range(300):
            p.produce("dense", key=b"%d" % i, value=b"v" * 200)
            p.poll(0)
        assert p.flush(30) == 0
    finally:
        assert b.stop() == 0
    code, lines, out = kafkatool("rebuild-index", "--dry-run", data / "dense-0", "--json")
    summary = lines[-1]
    assert summary["different"] == 0 and code == 0, out
    # the same dir with Kafka's default interval: the offset index differs (the flag still wins)
    code, lines, out = kafkatool(
        "rebuild-index", "--dry-run", "--index-interval-bytes", "4096", data / "dense-0", "--json"
    )
    assert lines[-1]["different"] > 0
    # recover --all rebuilds the indexes with the topic's interval too: verify stays clean after it
    code, lines, out = kafkatool("recover", "--all", data / "dense-0", "--json")
    assert code in (0, 1), out
    code, lines, out = kafkatool("rebuild-index", "--dry-run", data / "dense-0", "--json")
    assert lines[-1]["different"] == 0, out


def test_serve_keeps_compacted_topics_of_a_zookeeper_mode_dir(tmp_path, make_broker):
    """A ZooKeeper-mode Kafka dir holds no topic configs (they are in ZooKeeper): serve takes the
    cleaner-offset-checkpoint as the sign of a compacted topic, so its own retention (here 1 s)
    deletes old segments of a plain topic but none of the compacted one."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from kafkatool.formats.checkpoint import encode_offset_checkpoint

    d = tmp_path / "zkmode"
    make_partition(d, "legacy-0", segments=4, batches_per_segment=5)
    make_partition(d, "plain-0", segments=4, batches_per_segment=5)
    (d / "cleaner-offset-checkpoint").write_bytes(encode_offset_checkpoint({("legacy", 0): 5}))
    before = sorted(p.name for p in (d / "legacy-0").glob("*.log"))
    extra = ["log.retention.ms=1000", "log.retention.check.interval.ms=200", "log.cleaner.enable=false"]
    b = make_broker(d, extra=extra).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("topic", "legacy")
    assert admin.describe_configs([res])[res].result(20)["cleanup.policy"].value == "compact"
    deadline = time.monotonic() + 20
    while len(list((d / "plain-0").glob("*.log"))) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(list((d / "plain-0").glob("*.log"))) == 1, "the plain topic's retention did not run"
    assert sorted(p.name for p in (d / "legacy-0").glob("*.log")) == before
    assert "configs from cleaner-offset-checkpoint lists it" in b.log_text()


def _remote_storage_faults(b) -> list[str]:
    return [
        line
        for line in b.log_text().splitlines()
        if "error updating topic=" in line and ts.REMOTE_STORAGE_STORED in line
    ]


def test_serve_logs_a_stored_remote_storage_topic_and_serves_it_as_a_local_log(tmp_path, make_broker):
    """A KRaft dir's topic with remote.storage.enable=true on a broker without tiered storage
    (Kafka 3.7: DynamicConfigPublisher -> LogManager.updateTopicConfig's "from the store" check,
    a non-fatal metadata publishing fault): one error naming the topic, the topic served with its
    other stored configs; a change is refused (the controller's LogConfig.validate) unless it
    drops remote.storage.enable."""
    from kafkatool.protocol.errors import ErrorCode
    from tests.broker.test_admin import describe
    from tests.broker.test_protocol import batches_of, fetch
    from tests.broker.test_topic_configs_kafka37 import alter_topic
    from tests.broker.wire import WireClient

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {"remote.storage.enable": "true", "retention.ms": "86400000"})
    b = make_broker(d).start()
    (fault,) = _remote_storage_faults(b)
    assert "topic=events" in fault and ts.SOURCE_KRAFT in fault
    with WireClient(b.bootstrap) as c:
        _, entries = describe(c, "events")
        assert entries["retention.ms"].value == "86400000"
        assert entries["remote.storage.enable"].value == "true"
        assert batches_of(fetch(c, "events", 0).responses[0].partitions[0].records)
        assert alter_topic(c, "events", retention_ms="1000") == (
            ErrorCode.INVALID_CONFIG,
            ts.REMOTE_STORAGE_DISABLED,
        )
        assert alter_topic(c, "events", remote_storage_enable="false") == (0, None)
    b.stop()
    b = make_broker(d).start()
    assert not _remote_storage_faults(b)


def test_serve_logs_a_remote_storage_topic_of_its_embedded_metadata(tmp_path, make_broker):
    """The embedded metadata is this broker's KRaft metadata: the same fault, the same serving."""
    from tests.broker.test_protocol import batch, create_topic, fetch, produce
    from tests.broker.wire import WireClient

    d = tmp_path / "data"
    b = make_broker(d).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "tiered", configs={"segment.bytes": "1048576"})
        assert produce(c, "tiered", batch(2)).error_code == 0
    b.stop()
    path = d / "kafkatool-cluster.json"
    meta = json.loads(path.read_text())
    meta["topics"]["tiered"]["configs"]["remote.storage.enable"] = "TRUE"
    path.write_text(json.dumps(meta))
    b = make_broker(d).start()
    (fault,) = _remote_storage_faults(b)
    assert "topic=tiered" in fault and str(path) in fault
    with WireClient(b.bootstrap) as c:
        pd = fetch(c, "tiered", 0).responses[0].partitions[0]
        assert pd.error_code == 0 and pd.high_watermark == 2


def test_stored_topic_config_error_is_kafkas_boolean():
    assert ts.stored_topic_config_error({"remote.storage.enable": " True"}) == ts.REMOTE_STORAGE_STORED
    assert ts.stored_topic_config_error({"remote.storage.enable": "false"}) is None
    assert ts.stored_topic_config_error({}) is None


def test_a_dir_serve_took_over_from_kraft_gives_the_offline_commands_serves_topic_configs(
    tmp_path, make_broker
):
    """A dir a KRaft broker wrote and serve then ran on holds both stores: serve's first start
    takes the KRaft log's topics into kafkatool-cluster.json, later changes through serve go to
    that file only, and serve never reads the log again for a topic the file holds.  An offline
    command runs with what serve runs with: the file's configs, over the log's (a value changed
    through serve), and without the log's (a config deleted through serve: Kafka's default)."""
    from tests.broker.test_admin import describe
    from tests.broker.wire import WireClient

    d = tmp_path / "kraft"
    write_kraft_dir(
        d, "events", {"cleanup.policy": "compact", "retention.ms": "1000", "retention.bytes": "4096"}
    )
    b = make_broker(d).start()
    try:
        code, _lines, out = kafkatool(
            "configs", "alter", "--bootstrap-server", b.bootstrap, "--entity-type", "topics",
            "--entity-name", "events", "--add-config", "retention.ms=5000,cleanup.policy=delete",
            "--delete-config", "retention.bytes",
        )  # fmt: skip
        assert code == 0, out
        with WireClient(b.bootstrap) as c:
            served = describe(c, "events", keys=["retention.ms", "cleanup.policy", "retention.bytes"])[1]
    finally:
        assert b.stop() == 0
    assert (d / ts.EMBEDDED_METADATA_FILE).exists() and (d / ts.CLUSTER_METADATA_DIR).is_dir()
    assert ts.read_kraft(d).topics["events"]["retention.ms"] == "1000"  # the log as Kafka left it
    assert {n: served[n].value for n in served} == {
        "retention.ms": "5000",
        "cleanup.policy": "delete",
        "retention.bytes": "-1",
    }
    code, lines, out = kafkatool("retention", "--dry-run", d, "--json", "--now", NOW_FAR)
    assert code in (0, 1), out
    (part,) = partition_records(lines, "events-0")
    assert part["settings"]["retention.ms"] == {"value": 5000, "source": ts.SOURCE_EMBEDDED}
    assert part["settings"]["cleanup.policy"] == {"value": "delete", "source": ts.SOURCE_EMBEDDED}
    assert part["settings"]["retention.bytes"] == {"value": -1, "source": ts.SOURCE_DEFAULT}
    # the topic listing of the dir says the same (assign/topics: the first store that holds it)
    code, lines, out = kafkatool("topics", "describe", "--log-dir", d, "--json")
    assert code == 0, out
    (row,) = [x for x in lines if x["type"] == "topic"]
    assert (row["configs"], row["config_source"]) == (
        {"retention.ms": "5000", "cleanup.policy": "delete"},
        ts.SOURCE_EMBEDDED,
    )
