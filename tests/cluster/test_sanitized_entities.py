"""User principals in ZooKeeper under Kafka's sanitized names (Sanitizer: URLEncoder UTF-8,
``*`` -> ``%2A``, ``+`` -> ``%20``), in a cluster of two ``kafkatool serve`` brokers and a real
ZooKeeper: a SCRAM user made through ``users alter --bootstrap-server`` lands where Kafka's
tools look for it, and one written at the sanitized path with the bytes Kafka's ConfigCommand
writes reaches a running broker through its change notification and logs in."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from tests.broker.conftest import free_port
from tests.broker.test_delegation_tokens import _props, run, token_login
from tests.cluster.conftest import Cluster, wait_for


@pytest.fixture
def scram_cluster(tmp_path, zk_module):
    c = Cluster(tmp_path, zk_module, 2, ["num.partitions=1"])
    for b in c.brokers.values():
        sasl = free_port()
        b.extra += [
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        ]
        b.sasl = f"127.0.0.1:{sasl}"
    try:
        yield c.start()
    finally:
        c.stop()


def _kafka_scram_text(password: str, salt: bytes, iterations: int) -> str:
    """ScramCredentialUtils.credentialToString of ScramFormatter.generateCredential for
    SCRAM-SHA-256 (RFC 5802: SaltedPassword by PBKDF2-HMAC, ClientKey/ServerKey by HMAC, StoredKey
    the hash of ClientKey), made here by hand, not by the project's code."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    return (
        f"salt={b64(salt).decode()},stored_key={b64(hashlib.sha256(client_key).digest()).decode()},"
        f"server_key={b64(server_key).decode()},iterations={iterations}"
    )


def test_users_live_at_their_sanitized_names(scram_cluster, tmp_path):
    c = scram_cluster
    b1, b2 = c.brokers[1], c.brokers[2]
    # 1. ours: AlterUserScramCredentials on broker 1 (ZkAdminManager: Sanitizer.sanitize(user))
    user = "alice@EXAMPLE.COM"
    res = run(
        "users", "alter", "--bootstrap-server", b1.bootstrap, "--user", user,
        "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    k = c.kazoo()
    try:
        assert "alice%40EXAMPLE.COM" in k.get_children("/config/users")
        assert "alice@EXAMPLE.COM" not in k.get_children("/config/users")
        stored = json.loads(k.get("/config/users/alice%40EXAMPLE.COM")[0])
        changes = [
            json.loads(k.get(f"/config/changes/{ch}")[0]) for ch in sorted(k.get_children("/config/changes"))
        ]
    finally:
        k.stop()
        k.close()
    assert stored["config"]["SCRAM-SHA-256"].startswith("salt=")
    assert {"version": 2, "entity_path": "users/alice%40EXAMPLE.COM"} in changes
    alice = _props(tmp_path / "alice.properties", user, "alice-secret")
    assert token_login(b1, alice) is None
    # broker 2 learns of it through the notification (ConfigHandler desanitizes the path)
    wait_for(lambda: token_login(b2, alice) is None, 15, "alice's SCRAM login on broker 2")

    # 2. Kafka's: `kafka-configs.sh --zookeeper ... --alter --entity-type users --entity-name
    # 'svc* ops' --add-config SCRAM-SHA-256=[...]` as AdminZkClient.changeEntityConfig writes it:
    # ConfigEntityZNode.encode (Json.encodeAsBytes of Map("version" -> 1, "config" -> props), the
    # path's name by ConfigCommand.sanitizeName), then the change notification
    # (ConfigEntityChangeNotificationSequenceZNode.encode: Map("version" -> 2, "entity_path" -> ..))
    text = _kafka_scram_text("ops-secret", b"0123456789abcdef", 4096)
    znode = b'{"version":1,"config":{"SCRAM-SHA-256":"' + text.encode() + b'"}}'
    k = c.kazoo()
    try:
        k.create("/config/users/svc%2A%20ops", znode)
        k.create(
            "/config/changes/config_change_",
            b'{"version":2,"entity_path":"users/svc%2A%20ops"}',
            sequence=True,
        )
    finally:
        k.stop()
        k.close()
    ops = _props(tmp_path / "ops.properties", "svc* ops", "ops-secret")
    for b in (b1, b2):
        wait_for(lambda b=b: token_login(b, ops) is None, 15, f"svc* ops's login on broker {b.port}")
    wrong = _props(tmp_path / "wrong.properties", "svc* ops", "not-it")
    assert token_login(b1, wrong) is not None

    # the tools show the real names, read where Kafka keeps them
    res = run("users", "describe", "--bootstrap-server", b2.bootstrap, "--json")
    assert res.exit_code == 0, res.output
    names = {json.loads(line)["user"] for line in res.stdout.splitlines() if line.strip()}
    assert {"alice@EXAMPLE.COM", "svc* ops"} <= names
    res = run(
        "configs", "describe", "--zookeeper", c.connect, "--entity-type", "users", "--entity-name", "svc* ops"
    )
    assert res.exit_code == 0 and "SCRAM-SHA-256" in res.stdout, res.output
    res = run("zk", "configs", "--zookeeper", c.connect, "--type", "users", "--json")
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert {(r["name"], r["path"]) for r in rows} >= {
        ("alice@EXAMPLE.COM", "/config/users/alice%40EXAMPLE.COM"),
        ("svc* ops", "/config/users/svc%2A%20ops"),
    }

    # deleted through the other broker: refused on both, its znode gone
    res = run(
        "users",
        "alter",
        "--bootstrap-server",
        b2.bootstrap,
        "--user",
        user,
        "--delete-config",
        "SCRAM-SHA-256",
    )
    assert res.exit_code == 0, res.output
    for b in (b1, b2):
        wait_for(lambda b=b: token_login(b, alice) is not None, 15, f"alice refused on broker {b.port}")
    k = c.kazoo()
    try:  # emptied, the user's znode is deleted (AdminZkClient.tryCleanQuotaNodes)
        assert sorted(k.get_children("/config/users")) == ["svc%2A%20ops"]
    finally:
        k.stop()
        k.close()
