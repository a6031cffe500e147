"""kafkatool configs --zookeeper (issue 15): /config/<type>/<name> as AdminZkClient writes it,
with the change notification brokers watch, on a real ZooKeeper seeded as Kafka writes it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app


def run(*args):
    return CliRunner().invoke(app, ["configs", *map(str, args)])


def test_zookeeper_takes_users_and_brokers_only(kafka_cluster):
    """ConfigCommandOptions.checkArgs (Kafka 3.7): --zookeeper describes and alters users and
    brokers (ZkSupportedConfigTypes); topics and clients need --bootstrap-server."""
    z = ["--zookeeper", kafka_cluster.connect]
    before = kafka_cluster.admin.get("/config/topics/orders")[0]
    for action, args in [
        ("describe", ["--entity-type", "topics", "--entity-name", "orders"]),
        (
            "alter",
            ["--entity-type", "topics", "--entity-name", "orders", "--add-config", "retention.ms=1000"],
        ),
        ("alter", ["--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=1"]),
        ("describe", ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients"]),
    ]:
        res = run(action, *args, *z)
        bad = "topics" if "topics" in args else "clients"
        assert res.exit_code == 2, res.output
        assert (
            f"Invalid entity type {bad}, the entity type must be one of users, brokers with a --zookeeper "
            "argument" in res.output
        )
    assert kafka_cluster.admin.get("/config/topics/orders")[0] == before
    got = json.loads(kafka_cluster.admin.get("/config/clients/<default>")[0])["config"]
    assert got == {"consumer_byte_rate": "2097152"}


def test_user_quotas_are_refused_through_zookeeper(kafka_cluster):
    """alterConfigWithZk: a user's configs through ZooKeeper are SCRAM credentials only, Kafka's
    requirement message word for word; nothing written."""
    z = ["--zookeeper", kafka_cluster.connect]
    before = set(kafka_cluster.admin.get_children("/config/users"))
    res = run("alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
              "producer_byte_rate=1024", *z)  # fmt: skip
    assert res.exit_code == 2, res.output
    assert (
        "requirement failed: --bootstrap-server option must be specified to update users configs: "
        "{add: {producer_byte_rate=1024}, delete: List()}. User configuration updates using ZooKeeper "
        "are only supported for SCRAM credential updates." in res.output
    )
    res = run("alter", "--entity-type", "users", "--entity-default", "--delete-config",
              "consumer_byte_rate,SCRAM-SHA-256", *z)  # fmt: skip
    assert res.exit_code == 2
    assert "{add: {}, delete: ArrayBuffer(consumer_byte_rate, SCRAM-SHA-256)}." in res.output
    assert set(kafka_cluster.admin.get_children("/config/users")) == before


def test_scram_credentials_through_zookeeper(kafka_cluster):
    """preProcessScramCredentials: the password is salted into the credential ZooKeeper keeps
    (never written), iterations below 4096 refused; the users' lines read it back."""
    from kafkatool.broker.security import scram

    z = ["--zookeeper", kafka_cluster.connect]
    res = run("alter", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", "--add-config",
              "SCRAM-SHA-256=[iterations=8192,password=c-secret],SCRAM-SHA-512=[password=c-secret]", *z)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "Completed updating config for entity: user-principal 'carol@EXAMPLE.COM'."
    raw = kafka_cluster.admin.get("/config/users/carol%40EXAMPLE.COM")[0]
    assert b"c-secret" not in raw
    config = json.loads(raw)["config"]
    c256 = scram.ScramCredential.from_text(config["SCRAM-SHA-256"])
    assert c256.iterations == 8192
    assert c256 == scram.new_credential("SCRAM-SHA-256", "c-secret", 8192, c256.salt)
    assert scram.ScramCredential.from_text(config["SCRAM-SHA-512"]).iterations == 4096
    res = run("alter", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", "--add-config",
              "SCRAM-SHA-256=[iterations=1000,password=x]", *z)  # fmt: skip
    assert res.exit_code == 2
    assert "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256" in res.output
    res = run("alter", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", "--add-config",
              "SCRAM-SHA-256=[pass=x]", *z)  # fmt: skip
    assert res.exit_code == 2 and "Invalid credential property SCRAM-SHA-256=pass=x" in res.output
    res = run("alter", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", "--delete-config",
              "SCRAM-SHA-512", *z)  # fmt: skip
    assert res.exit_code == 0, res.output
    again = run("alter", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", "--delete-config",
                "SCRAM-SHA-512", *z)  # fmt: skip
    assert again.exit_code == 2 and "Invalid config(s): SCRAM-SHA-512" in again.output
    res = run("describe", "--entity-type", "users", "--entity-name", "carol@EXAMPLE.COM", *z)
    assert res.stdout.startswith("Configs for user-principal 'carol@EXAMPLE.COM' are SCRAM-SHA-256=salt=")


def test_zk_entity_line():
    """ConfigCommand.ConfigEntity.toString, alterConfigWithZk's and describeConfigWithZk's name of
    the entity."""
    from kafkatool.assign.configs import zk_entity_label
    from kafkatool.zk.paths import DEFAULT

    assert zk_entity_label("brokers", "1") == "brokers '1'"
    assert zk_entity_label("brokers", "<default>") == "default brokers"
    assert zk_entity_label("users", DEFAULT) == "default user-principal"
    assert zk_entity_label("users", "<default>") == "user-principal '<default>'"
    assert zk_entity_label("users", "a b", "c") == "user-principal 'a b', client-id 'c'"


def test_client_quotas_in_zookeeper(kafka_cluster):
    """Quota entities where Kafka keeps them: the broker's ZkQuotaStore reading and writing them
    (with the change notification brokers follow); describeConfigWithZk's line of a user."""
    from kafkatool.broker.quotas import DEFAULT, ZkQuotaStore
    from kafkatool.zk.client import KafkaZk

    z = ["--zookeeper", kafka_cluster.connect]
    kafka_cluster.admin.create(
        "/config/users/dave", json.dumps({"version": 1, "config": {"producer_byte_rate": "1024"}}).encode()
    )
    res = run("describe", "--entity-type", "users", "--entity-name", "dave", *z)
    assert res.stdout.splitlines() == ["Configs for user-principal 'dave' are producer_byte_rate=1024"]
    kafka_cluster.admin.delete("/config/users/dave")
    zk = KafkaZk(kafka_cluster.connect)
    zk.start()
    try:
        store = ZkQuotaStore(zk)
        assert store.entries() == {
            ("alice", "app"): {"producer_byte_rate": "1048576"},
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


def test_a_user_named_default_is_not_the_default_user(kafka_cluster):
    """ConfigCommand.sanitizeName: --entity-name '<default>' is Sanitizer's %3Cdefault%3E, only
    --entity-default (an empty name) the <default> znode; the broker's stores (ZkAdminManager's
    sanitizeEntityName, UserConfigHandler) keep the two apart the same way."""
    from kafkatool.broker.cluster.scram_store import ZkScramStore
    from kafkatool.broker.quotas import DEFAULT, ZkQuotaStore
    from kafkatool.zk.client import KafkaZk

    z = ["--zookeeper", kafka_cluster.connect]
    for who in (["--entity-name", "<default>"], ["--entity-default"]):
        res = run("alter", "--entity-type", "users", *who, "--add-config", "SCRAM-SHA-512=[password=p]", *z)
        assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "Completed updating config for entity: default user-principal."
    assert {"%3Cdefault%3E", "<default>"} <= set(kafka_cluster.admin.get_children("/config/users"))
    res = run("describe", "--entity-type", "users", "--entity-name", "<default>", *z)
    assert res.stdout.startswith("Configs for user-principal '<default>' are SCRAM-SHA-512=salt=")
    res = run("describe", "--entity-type", "users", "--entity-default", *z)
    assert res.stdout.startswith("Configs for default user-principal are SCRAM-SHA-512=salt=")
    res = run("describe", "--entity-type", "users", *z)
    lines = sorted(line.split(" are ")[0] for line in res.stdout.splitlines())
    assert lines == ["Configs for default user-principal", "Configs for user-principal '<default>'"]
    zk = KafkaZk(kafka_cluster.connect)
    zk.start()
    try:
        # the user <default> has SCRAM credentials, the default user's znode holds none Kafka loads
        assert set(ZkScramStore(zk).user_scram) == {"<default>"}
        store = ZkQuotaStore(zk)
        store.alter(("<default>", None), {"producer_byte_rate": "1024"})
        got = json.loads(kafka_cluster.admin.get("/config/users/%3Cdefault%3E")[0])["config"]
        assert got["producer_byte_rate"] == "1024" and "SCRAM-SHA-512" in got
        entries = store.entries()
        assert entries[("<default>", None)] == {"producer_byte_rate": "1024"}
        assert (DEFAULT, None) not in entries
    finally:
        zk.close()
