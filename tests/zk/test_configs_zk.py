"""kafkatool configs --zookeeper (issue 15): /config/<type>/<name> as AdminZkClient writes it,
with the change notification brokers watch, on a real ZooKeeper seeded as Kafka writes it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app


def run(*args):
    return CliRunner().invoke(app, ["configs", *map(str, args)])


def test_alter_and_describe_through_zookeeper(kafka_cluster):
    z = ["--zookeeper", kafka_cluster.connect]
    res = run("describe", "--entity-type", "topics", "--entity-name", "orders", *z)
    assert res.exit_code == 0, res.output
    assert "  retention.ms=86400000 sensitive=false" in res.stdout
    before = set(kafka_cluster.admin.get_children("/config/changes"))
    res = run(
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--add-config",
        "retention.ms=1000",
        "--delete-config",
        "min.insync.replicas",
        *z,
    )
    assert res.exit_code == 0 and "Completed updating config for topic orders." in res.stdout, res.output
    node = json.loads(kafka_cluster.admin.get("/config/topics/orders")[0])
    assert node == {"version": 1, "config": {"retention.ms": "1000"}}
    (change,) = set(kafka_cluster.admin.get_children("/config/changes")) - before
    assert json.loads(kafka_cluster.admin.get(f"/config/changes/{change}")[0]) == {
        "version": 2,
        "entity_path": "topics/orders",
    }
    res = run(
        "alter",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "producer_byte_rate=1048576",
        *z,
    )
    assert res.exit_code == 0 and "Completed updating config for entity: default client-id." in res.stdout
    got = json.loads(kafka_cluster.admin.get("/config/clients/<default>")[0])["config"]
    assert got["producer_byte_rate"] == "1048576" and got["consumer_byte_rate"] == "2097152"  # the rest kept
    missing = run(
        "alter", "--entity-type", "topics", "--entity-name", "nope", "--add-config", "retention.ms=1", *z
    )
    assert missing.exit_code == 2 and "Topic nope does not exist" in missing.output


def test_client_quotas_in_zookeeper(kafka_cluster):
    """Quota entities where Kafka keeps them: describeConfigWithZk's lines, and the broker's
    ZkQuotaStore reading and writing them (with the change notification brokers follow)."""
    from kafkatool.broker.quotas import DEFAULT, ZkQuotaStore
    from kafkatool.zk.client import KafkaZk

    z = ["--zookeeper", kafka_cluster.connect]
    res = run("describe", "--entity-type", "users", "--entity-name", "alice",
              "--entity-type", "clients", "--entity-name", "app", *z)  # fmt: skip
    assert res.stdout.splitlines() == [
        "Configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576"
    ]
    res = run("describe", "--entity-type", "clients", "--entity-default", *z)
    assert res.stdout.splitlines() == ["Configs for default client-id are consumer_byte_rate=2097152"]
    res = run(
        "alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
        "--add-config",
        "producer_byte_rate=x",
        *z,
    )
    assert res.exit_code == 2 and "Invalid value x for configuration producer_byte_rate" in res.output
    res = run("alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "foo=1", *z)
    assert res.exit_code == 2 and "Unknown Dynamic Configuration: Set(foo)." in res.output
    res = run("alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
              "--entity-name", "app", "--add-config", "consumer_byte_rate=4096", *z)  # fmt: skip
    assert (
        res.stdout.strip() == "Completed updating config for entity: user-principal 'alice', client-id 'app'."
    )
    got = json.loads(kafka_cluster.admin.get("/config/users/alice/clients/app")[0])["config"]
    assert got == {"producer_byte_rate": "1048576", "consumer_byte_rate": "4096"}
    zk = KafkaZk(kafka_cluster.connect)
    zk.start()
    try:
        store = ZkQuotaStore(zk)
        assert store.entries() == {
            ("alice", "app"): {"producer_byte_rate": "1048576", "consumer_byte_rate": "4096"},
            (None, DEFAULT): {"consumer_byte_rate": "2097152"},
        }
        before = set(kafka_cluster.admin.get_children("/config/changes"))
        store.alter((DEFAULT, None), {"request_percentage": "50.0"})
        got = json.loads(kafka_cluster.admin.get("/config/users/<default>")[0])
        assert got == {"version": 1, "config": {"request_percentage": "50.0"}}
        (change,) = set(kafka_cluster.admin.get_children("/config/changes")) - before
        assert (
            json.loads(kafka_cluster.admin.get(f"/config/changes/{change}")[0])["entity_path"]
            == "users/<default>"
        )
    finally:
        zk.close()


def test_quota_values_are_parsed_as_configdef_parses_them():
    """DynamicConfig.Client/User.validate parses with ConfigDef (the one rule,
    log/dynamic_log_config.config_value_error): Long.parseLong takes no 1_000 and nothing past
    Long.MAX_VALUE, Double.parseDouble no 1_0; Python's int()/float() took all three."""
    from kafkatool.assign.configs import ConfigsError, zk_quota_check

    zk_quota_check("clients", {"producer_byte_rate": " 1024 ", "request_percentage": "12.5"})
    for key, value, kind in [
        ("producer_byte_rate", "1_000", "LONG"),
        ("consumer_byte_rate", "9223372036854775808", "LONG"),
        ("request_percentage", "1_0", "DOUBLE"),
    ]:
        with pytest.raises(ConfigsError) as exc:
            zk_quota_check("users", {key: value})
        assert str(exc.value) == f"Invalid value {value} for configuration {key}: Not a number of type {kind}"
