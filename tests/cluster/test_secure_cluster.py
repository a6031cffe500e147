"""A cluster whose brokers talk to each other over SASL_SSL (PLAIN), with ACLs on: the
controller's requests, the replica fetchers, AlterPartition and the markers all authenticate
as the broker principal (a super user); clients use a PLAINTEXT listener of their own."""

from __future__ import annotations

import json

import pytest

from tests.broker.conftest import free_port
from tests.broker.security.certs import CA
from tests.cluster.conftest import Cluster, kafkatool, wait_for
from tests.cluster.test_divergence import log_bytes, produce
from tests.cluster.test_replication import create_topic, partition_state, read_all

pytest.importorskip("confluent_kafka")

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
    'password="broker-secret" user_broker="broker-secret";'
)


@pytest.fixture
def secure_cluster(tmp_path, zk_module):
    ca = CA(tmp_path / "pki")
    srv = ca.issue("broker")
    c = Cluster(tmp_path, zk_module, 3, ["num.partitions=1"])
    for b in c.brokers.values():
        b.extra += [
            f"listeners=EXTERNAL://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{free_port()}",
            "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={JAAS}",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={srv.p12_path}",
            f"ssl.keystore.password={srv.p12_password}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={ca.path}",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:broker",
            "allow.everyone.if.no.acl.found=true",
        ]
    try:
        yield c.start()
    finally:
        c.discard()


def test_replication_over_sasl_ssl_between_brokers(secure_cluster):
    cluster = secure_cluster
    create_topic(cluster, "secure", 1, 3, min_insync_replicas=2)
    wait_for(lambda: len(partition_state(cluster, "secure", 0)["isr"]) == 3, 30, "ISR of 3")
    values = [b"s%d" % i for i in range(300)]
    produce(cluster.bootstrap, "secure", values, "all")
    assert [v for _, v in read_all(cluster.bootstrap, "secure")] == values
    leader = cluster.brokers[partition_state(cluster, "secure", 0)["leader"]]
    for b in cluster.brokers.values():
        wait_for(lambda b=b: log_bytes(b, "secure") == log_bytes(leader, "secure"), 20, "identical replicas")
    # once the cluster resource has an ACL, a peer without CLUSTER_ACTION gets nothing from the
    # control plane (the EXTERNAL listener's ANONYMOUS principal is no super user)

    from kafkatool.protocol.generated import LeaderAndIsrRequest
    from tests.broker.wire import WireClient

    r = kafkatool(
        "acls", "--bootstrap-server", cluster.bootstrap, "--add",
        "--allow-principal", "User:broker", "--operation", "ClusterAction", "--cluster",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr

    # stored as Kafka's AclAuthorizer stores it, and every broker applies it
    k = cluster.kazoo()
    try:
        stored = json.loads(k.get("/kafka-acl/Cluster/kafka-cluster")[0])
        assert k.get_children("/kafka-acl-changes")
    finally:
        k.stop()
        k.close()
    assert stored["acls"] == [
        {"principal": "User:broker", "permissionType": "Allow", "operation": "ClusterAction", "host": "*"}
    ]

    def refused(b) -> bool:
        with WireClient(b.bootstrap) as c:
            r = c.request(
                4,
                4,
                LeaderAndIsrRequest(
                    controller_id=1, controller_epoch=99, broker_epoch=-1, topic_states=[], live_leaders=[]
                ),
            )
        return r.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED

    for b in cluster.brokers.values():
        wait_for(lambda b=b: refused(b), 10, "the ACL on every broker")
    # the cluster still replicates: the brokers are super users on their own listener
    produce(cluster.bootstrap, "secure", [b"after-acl"], "all")
    assert [v for _, v in read_all(cluster.bootstrap, "secure")][-1] == b"after-acl"
    text = "".join(b.log_text() for b in cluster.brokers.values())
    assert "Failed authentication" not in text


def test_scram_credentials_live_in_zookeeper(shared_cluster):
    cluster = shared_cluster
    """AlterUserScramCredentials on any broker writes /config/users/<user> as Kafka does (with a
    change notification); every broker then describes, and would authenticate, the user."""
    first = next(iter(cluster.brokers.values()))
    r = kafkatool(
        "users", "alter", "--bootstrap-server", first.bootstrap,
        "--entity-name", "alice", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    k = cluster.kazoo()
    try:
        stored = json.loads(k.get("/config/users/alice")[0])["config"]["SCRAM-SHA-512"]
    finally:
        k.stop()
        k.close()
    assert stored.startswith("salt=") and ",iterations=8192" in stored and "stored_key=" in stored

    def described(b) -> bool:
        r = kafkatool("users", "describe", "--bootstrap-server", b.bootstrap, "--json")
        return r.returncode == 0 and "alice" in r.stdout and "SCRAM-SHA-512" in r.stdout

    for b in cluster.brokers.values():
        wait_for(lambda b=b: described(b), 15, "alice on every broker", step=0.5)
