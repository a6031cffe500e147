"""kafkatool configs --zookeeper (issue 15): /config/<type>/<name> as AdminZkClient writes it,
with the change notification brokers watch, on a real ZooKeeper seeded as Kafka writes it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import password_encoder as PE


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


RUNNING = (
    "Broker configuration operations using ZooKeeper are only supported if the affected broker(s) are "
    "not running."
)


def test_broker_configs_through_zookeeper_only_while_the_brokers_are_down(kafka_cluster):
    """ConfigCommand.validateBrokersNotRunning (Kafka 3.7): a broker's dynamic configs are altered
    or described through ZooKeeper only while /brokers/ids/<id> is absent, the default only while
    no broker is registered; the refusal is Kafka's requirement message, exit 2, nothing written
    (no config, no change notification), one error object with --json.  A broker that stops (its
    session ends, its registration goes) may then be configured, as Kafka's operators do before a
    start (password configs, KIP-226)."""
    z = ["--zookeeper", kafka_cluster.connect]
    admin = kafka_cluster.admin

    def state():
        brokers = {n: admin.get(f"/config/brokers/{n}")[0] for n in admin.get_children("/config/brokers")}
        return brokers, sorted(admin.get_children("/config/changes"))

    before = state()
    res = run(
        "alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.cleaner.threads=4", *z
    )
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (
        "kafkatool: error: requirement failed: --bootstrap-server option must be specified to update brokers "
        "configs: {add: {log.cleaner.threads=4}, delete: List()} - broker 1 is running. " + RUNNING
    )
    res = run("alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.cleaner.threads",
              "--json", *z)  # fmt: skip
    assert res.exit_code == 2, res.output
    (obj,) = [json.loads(line) for line in res.stdout.splitlines()]
    message = (
        "requirement failed: --bootstrap-server option must be specified to update brokers configs: "
        "{add: {}, delete: ArrayBuffer(log.cleaner.threads)} - 3 brokers are running. " + RUNNING
    )
    assert obj == {"type": "error", "entity_type": "brokers", "entity": None, "message": message}
    assert res.stderr.strip() == f"kafkatool: error: {message}"
    # describeConfigWithZk asks the same
    for who, what in (
        (["--entity-name", "2"], "broker 2 is running"),
        (["--entity-default"], "3 brokers are running"),
    ):
        res = run("describe", "--entity-type", "brokers", *who, *z)
        assert res.exit_code == 2, res.output
        assert res.stderr.strip() == (
            "kafkatool: error: requirement failed: --bootstrap-server option must be specified to describe "
            f"brokers - {what}. {RUNNING}"
        )
    res = run("describe", "--entity-type", "brokers", "--entity-name", "one", *z)
    assert res.exit_code == 2
    assert "The entity name for brokers must be a valid integer broker id, but it is: one" in res.stderr
    assert state() == before

    # broker 4 was never registered; broker 1 stops (its registration goes with its session)
    kafka_cluster.stop_broker(1)
    for broker in ("4", "1"):
        res = run("alter", "--entity-type", "brokers", "--entity-name", broker, "--add-config",
                  "log.cleaner.threads=4", *z)  # fmt: skip
        assert res.exit_code == 0, res.output
        assert res.stdout.strip() == f"Completed updating config for entity: brokers '{broker}'."
        assert json.loads(admin.get(f"/config/brokers/{broker}")[0])["config"] == {"log.cleaner.threads": "4"}
        res = run("describe", "--entity-type", "brokers", "--entity-name", broker, *z)
        # describeConfigWithZk's line (the --bootstrap-server form is DescribeConfigs')
        assert res.exit_code == 0, res.output
        assert res.stdout == f"Configs for brokers '{broker}' are log.cleaner.threads=4\n"
    changes = sorted(admin.get_children("/config/changes"))[-2:]
    assert [json.loads(admin.get(f"/config/changes/{c}")[0])["entity_path"] for c in changes] == [
        "brokers/4",
        "brokers/1",
    ]
    res = run(
        "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.cleaner.threads=3", *z
    )
    assert res.exit_code == 2 and "- 2 brokers are running. " in res.stderr, res.output
    # the default once none is registered
    kafka_cluster.stop_broker(2)
    kafka_cluster.stop_broker(3)
    res = run(
        "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.cleaner.threads=3", *z
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "Completed updating config for entity: default brokers."
    assert json.loads(admin.get("/config/brokers/<default>")[0])["config"] == {"log.cleaner.threads": "3"}
    res = run("describe", "--entity-type", "brokers", "--entity-default", *z)
    assert res.exit_code == 0, res.output
    assert res.stdout == "Configs for default brokers are log.cleaner.threads=3\n"
    res = run("describe", "--entity-type", "brokers", "--entity-default", "--json", *z)
    assert res.exit_code == 0, res.output
    (obj,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert (obj["name"], obj["value"], obj["source"]) == (
        "log.cleaner.threads",
        "3",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )


def test_broker_configs_through_zookeeper_are_checked_as_kafka_checks_them(kafka_cluster):
    """preProcessBrokerConfigs on a broker that is not registered (4): password.encoder.* is never
    stored; DynamicBrokerConfig.validateConfigs' refusals in its order, Kafka's words; a password
    config needs password.encoder.secret (Kafka's requirement) and is stored encrypted as Kafka's
    PasswordEncoder stores it, with the encoder settings given.  Nothing refused is written."""
    z = ["--zookeeper", kafka_cluster.connect]
    admin = kafka_cluster.admin

    def alter(config: str, *who: str):
        return run(
            "alter", "--entity-type", "brokers", *(who or ("--entity-name", "4")), "--add-config", config, *z
        )

    refused = {
        "num.partitions=3,log.retention.ms=abc": "Cannot update these configs dynamically: Set(num.partitions)",
        "log.retention.ms=abc,ssl.keystore.password=x": (
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            "Set(ssl.keystore.password)"
        ),
        "log.retention.ms=abc": "Invalid value abc for configuration log.retention.ms: Not a number of type LONG",
        "listener.name.internal.log.retention.ms=-5,log.dirs=/x": (
            "Cannot update these configs dynamically: Set(log.dirs)"
        ),
        "listener.name.internal.log.retention.ms=x": (
            "Invalid value x for configuration log.retention.ms: Not a number of type LONG"
        ),
        "listener.name.internal.ssl.key.password=x": (
            "requirement failed: password.encoder.secret must be specified to update "
            "Set(listener.name.internal.ssl.key.password). Other password encoder configs like cipher "
            "algorithm and iterations may also be specified to override the default encoding parameters. "
            "Password encoder configs will not be persisted in ZooKeeper."
        ),
        "listener.name.internal.ssl.key.password=x,password.encoder.secret=s,"
        "password.encoder.cipher.algorithm=DES/CBC/PKCS5Padding": (
            "password.encoder.*: cipher algorithm DES/CBC/PKCS5Padding is not supported here"
        ),
    }
    for config, why in refused.items():
        res = alter(config)
        assert res.exit_code == 2, (config, res.output)
        assert res.stderr.startswith(f"kafkatool: error: {why}"), (config, res.stderr)
    assert "4" not in admin.get_children("/config/brokers")
    res = alter("log.cleaner.threads=2,password.encoder.secret=s,password.encoder.iterations=8192")
    assert res.exit_code == 0, res.output
    assert json.loads(admin.get("/config/brokers/4")[0])["config"] == {"log.cleaner.threads": "2"}
    key = "listener.name.internal.ssl.key.password"
    res = alter(f"{key}=p\u00e4ss,password.encoder.secret=s,password.encoder.iterations=8192")
    assert res.exit_code == 0, res.output
    stored = json.loads(admin.get("/config/brokers/4")[0])["config"]
    assert sorted(stored) == [key, "log.cleaner.threads"]
    assert "iterations:8192" in stored[key].split(",")
    assert PE.decode(stored[key], "s") == "p\u00e4ss"
    for b in (1, 2, 3):
        kafka_cluster.stop_broker(b)
    res = alter("listener.name.internal.ssl.keystore.location=/k.jks", "--entity-default")
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        "kafkatool: error: Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listener.name.internal.ssl.keystore.location)"
    )
    res = alter("listener.name.internal.ssl.keystore.location=/k.jks", "--entity-name", "4")
    assert res.exit_code == 0, res.output
