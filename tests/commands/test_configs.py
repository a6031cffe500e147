"""kafkatool configs (issue 15): kafka-configs.sh's describe/alter through a real `kafkatool serve`
(topics, broker dynamic configs) and `configs diff --desired` with --apply; the ZooKeeper path is
in tests/zk/test_configs_zk.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["configs", *map(str, args)])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    b = BrokerProcess(
        tmp_path_factory.mktemp("configs") / "data", port=free_port(), extra=["num.partitions=1"]
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "3600000"})]).values():
            f.result(15)
        yield b, admin
    finally:
        b.stop()


def test_describe_and_alter_a_topic(broker):
    b, admin = broker
    boot = ["--bootstrap-server", b.bootstrap]
    res = run("describe", "--entity-type", "topics", "--entity-name", "orders", *boot)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic orders are:"
    assert lines[1].startswith(
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
    )
    res = run("alter", "--entity-type", "topics", "--entity-name", "orders",
              "--add-config", "cleanup.policy=[compact,delete],max.message.bytes=2000000", "--delete-config", "retention.ms", *boot)  # fmt: skip
    assert res.exit_code == 0 and res.stdout.strip() == "Completed updating config for topic orders.", (
        res.output
    )
    from confluent_kafka.admin import ConfigResource, ResourceType

    got = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
    cfg = next(iter(got.values())).result(15)
    assert cfg["cleanup.policy"].value == "compact,delete" and cfg["max.message.bytes"].value == "2000000"
    assert cfg["retention.ms"].value == "604800000"  # back to the default
    js = [
        json.loads(x)
        for x in run(
            "describe", "--entity-type", "topics", "--entity-name", "orders", "--all", "--json", *boot
        ).stdout.splitlines()
    ]
    assert {"segment.bytes", "cleanup.policy"} <= {j["name"] for j in js}
    bad = run(
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--add-config",
        "retention.ms=soon",
        *boot,
    )
    assert bad.exit_code == 2 and "retention.ms" in bad.output and "Traceback" not in bad.output


def test_broker_dynamic_configs(broker):
    b, admin = broker
    boot = ["--bootstrap-server", b.bootstrap]
    node = str(next(iter(admin.list_topics(timeout=10).brokers)))
    res = run(
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        node,
        "--add-config",
        "leader.replication.throttled.rate=5000",
        *boot,
    )
    assert res.exit_code == 0 and f"Completed updating config for broker {node}." in res.stdout, res.output
    res = run("describe", "--entity-type", "brokers", "--entity-name", node, *boot)
    assert f"Dynamic configs for broker {node} are:" in res.stdout
    assert "leader.replication.throttled.rate=5000" in res.stdout
    assert (
        run(
            "alter",
            "--entity-type",
            "brokers",
            "--entity-name",
            node,
            "--delete-config",
            "leader.replication.throttled.rate",
            *boot,
        ).exit_code
        == 0
    )
    assert (
        "leader.replication.throttled.rate"
        not in run("describe", "--entity-type", "brokers", "--entity-name", node, *boot).stdout
    )


def test_diff_and_apply(broker, tmp_path):
    b, admin = broker
    boot = ["--bootstrap-server", b.bootstrap]
    desired = tmp_path / "desired.yaml"
    desired.write_text(
        "topics:\n"
        "  orders:\n    partitions: 4\n    replication_factor: 1\n    config:\n"
        "      cleanup.policy: compact,delete\n      max.message.bytes: 2000000\n"
        "      segment.bytes: 1073741824   # Kafka's default: no drift\n"
        "  payments:\n    partitions: 3\n    replication_factor: 1\n    config:\n      retention.ms: 86400000\n"
    )
    dry = run("diff", "--desired", desired, "--json", *boot)
    assert dry.exit_code == 1, dry.output
    drift = {
        (d["topic"], d["kind"], d["key"])
        for d in map(json.loads, dry.stdout.splitlines())
        if d["type"] == "drift"
    }
    assert drift == {
        ("orders", "partitions", None),
        ("payments", "missing_topic", None),
        ("payments", "config", "retention.ms"),
    }
    res = run("diff", "--desired", desired, "--apply", *boot)
    assert res.exit_code == 0, res.output
    again = run("diff", "--desired", desired, *boot)
    assert again.exit_code == 0 and "no drift: 2 topics as desired" in again.stdout, again.output
    md = admin.list_topics(timeout=10)
    assert len(md.topics["orders"].partitions) == 4 and len(md.topics["payments"].partitions) == 3
    # an override the desired state does not name is drift, removed by --apply; fewer partitions is not applied
    desired.write_text(
        '{"topics": {"orders": {"partitions": 2, "config": {"cleanup.policy": "compact,delete"}}}}'
    )
    res = run("diff", "--desired", desired, "--apply", "--json", *boot)
    rows = [r for r in map(json.loads, res.stdout.splitlines()) if r["type"] == "drift"]
    kinds = {(r["kind"], r["key"], r["applied"]) for r in rows}
    assert ("extra_override", "max.message.bytes", True) in kinds and ("partitions", None, False) in kinds
    assert res.exit_code == 1  # the partition count cannot be lowered: reported
    bad = tmp_path / "bad.yaml"
    bad.write_text("topics:\n  x:\n    config:\n      retention.ms: soon\n")
    res = run("diff", "--desired", bad, *boot)
    assert res.exit_code == 2 and "retention.ms" in res.output
