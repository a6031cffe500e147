"""ZooKeeper over TLS and SASL (issue 14) for every command that takes --zookeeper: a real
ZooKeeper with a TLS port that requires client certificates, and one with SASL DIGEST-MD5, both
reached the way Kafka's tools reach them (--zk-tls-config-file; KAFKA_OPTS's JAAS file)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.security.certs import CA
from tests.ports import free_port
from tests.zk.conftest import run_zookeeper
from tests.zk.kafka_layout import default_spec, seed_cluster


def run(*args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    return r


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory):
    d = tmp_path_factory.mktemp("zk-tls")
    ca, rogue = CA(d / "ca"), CA(d / "rogue", name="rogue CA")
    server, client, intruder = (
        ca.issue("zookeeper"),
        ca.issue("tool", server=False),
        rogue.issue("x", server=False),
    )
    keystore = d / "server.pem"
    keystore.write_bytes(server.key_pem + server.cert_pem)
    secure = free_port()
    cfg = (
        f"secureClientPort={secure}",
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
        f"ssl.keyStore.location={keystore}",
        "ssl.keyStore.type=PEM",
        f"ssl.trustStore.location={ca.path}",
        "ssl.trustStore.type=PEM",
        "ssl.clientAuth=need",
        "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
    )
    with run_zookeeper(d / "server", extra_cfg=cfg) as plain:
        host = plain.rsplit(":", 1)[0]
        cluster = seed_cluster(plain, "/kafka", default_spec())  # seeded over the plain port
        try:
            yield {
                "secure": f"{host}:{secure}/kafka",
                "ca": ca,
                "client": client,
                "intruder": intruder,
                "dir": d,
                "cluster": cluster,
            }
        finally:
            cluster.close()


def _tls_file(path, *, keystore, password=None, kind="PKCS12", truststore, ttype="PEM", extra=()):
    lines = [
        "zookeeper.ssl.client.enable=true",
        "zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
        f"zookeeper.ssl.keystore.location={keystore}",
        f"zookeeper.ssl.keystore.type={kind}",
        f"zookeeper.ssl.truststore.location={truststore}",
        f"zookeeper.ssl.truststore.type={ttype}",
        *extra,
    ]
    if password:
        lines.append(f"zookeeper.ssl.keystore.password={password}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tls_with_a_pkcs12_client_certificate(tls_zk, tmp_path):
    c = tls_zk["client"]
    conf = _tls_file(
        tmp_path / "zk-tls.properties",
        keystore=c.p12_path,
        password=c.p12_password,
        truststore=tls_zk["ca"].path,
    )
    res = run(
        "zk", "brokers", "-z", tls_zk["secure"], "--zk-tls-config-file", conf, "--json", "--timeout", "10"
    )
    assert res.exit_code == 0, res.output
    assert {json.loads(x)["id"] for x in res.stdout.splitlines() if x.startswith("{")} >= {1, 2, 3}
    # a command that writes: the election znode arrives through the TLS session
    res = run(
        "leader-election", "-z", tls_zk["secure"], "--zk-tls-config-file", conf,
        "--election-type", "preferred", "--topic", "orders", "--partition", "1",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(tls_zk["cluster"].admin.get("/admin/preferred_replica_election")[0])
    assert data["partitions"] == [{"topic": "orders", "partition": 1}]
    tls_zk["cluster"].admin.delete("/admin/preferred_replica_election")


def test_tls_with_a_pem_keystore(tls_zk, tmp_path):
    c = tls_zk["client"]
    pem = tmp_path / "client.pem"
    pem.write_bytes(c.key_pem + c.cert_pem)
    conf = _tls_file(tmp_path / "zk.properties", keystore=pem, kind="PEM", truststore=tls_zk["ca"].path)
    res = run("zk", "check", "-z", tls_zk["secure"], "--zk-tls-config-file", conf, "--timeout", "10")
    assert res.exit_code in (0, 1), res.output  # reached: its findings are the layout's business
    assert "cannot connect" not in res.output and "no ZooKeeper answered" not in res.output


def test_tls_failures_are_one_line(tls_zk, tmp_path):
    # no TLS settings against the TLS port: never a session, whatever the timeout (1 s: the exit
    # status is all this case checks, and a failure is reported once the timeout is out)
    res = run("zk", "brokers", "-z", tls_zk["secure"], "--timeout", "1")
    assert res.exit_code == 2
    # a certificate of another CA: the server refuses it
    i = tls_zk["intruder"]
    conf = _tls_file(
        tmp_path / "rogue.properties",
        keystore=i.p12_path,
        password=i.p12_password,
        truststore=tls_zk["ca"].path,
    )
    res = run("zk", "brokers", "-z", tls_zk["secure"], "--zk-tls-config-file", conf, "--timeout", "3")
    assert res.exit_code == 2 and "TLS" in res.output
    # a JKS store is refused with the conversion to use
    conf = _tls_file(
        tmp_path / "jks.properties", keystore=tmp_path / "ks.jks", kind="JKS", truststore=tls_zk["ca"].path
    )
    res = run("zk", "brokers", "-z", tls_zk["secure"], "--zk-tls-config-file", conf, "--timeout", "3")
    assert res.exit_code == 2 and "keytool -importkeystore" in res.output


@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory):
    d = tmp_path_factory.mktemp("zk-sasl")
    jaas = d / "server_jaas.conf"
    jaas.write_text(
        "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  user_kafka="kafka-secret";\n};\n'
    )
    cfg = ("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",)
    with run_zookeeper(
        d / "server", extra_cfg=cfg, jvm_flags=(f"-Djava.security.auth.login.config={jaas}",)
    ) as plain:
        cluster = seed_cluster(plain, "/kafka", default_spec())
        try:
            yield {"connect": plain + "/kafka", "dir": d, "cluster": cluster}
        finally:
            cluster.close()


def _client_jaas(path, password):
    path.write_text(
        "// the section Kafka's ZooKeeper client reads\nClient {\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="kafka"\n  password="{password}";\n}};\n'
    )
    return path


def test_sasl_digest_from_kafka_opts_and_secure_acls(sasl_zk, tmp_path, monkeypatch):
    from kazoo.security import ACL, Id

    jaas = _client_jaas(tmp_path / "jaas.conf", "kafka-secret")
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g -Djava.security.auth.login.config={jaas}")
    acl_conf = tmp_path / "acl.properties"
    acl_conf.write_text("zookeeper.set.acl=true\n")
    res = run(
        "leader-election", "-z", sasl_zk["connect"], "--zk-tls-config-file", acl_conf,
        "--election-type", "preferred", "--topic", "events", "--partition", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    acls, _ = sasl_zk["cluster"].admin.get_acls("/admin/preferred_replica_election")
    assert ACL(31, Id("sasl", "kafka")) in acls and ACL(1, Id("world", "anyone")) in acls
    assert len(acls) == 2
    # the unauthenticated session can read it, not change it (deleting is the parent's ACL's business)
    from kazoo.exceptions import NoAuthError

    assert json.loads(sasl_zk["cluster"].admin.get("/admin/preferred_replica_election")[0])["version"] == 1
    with pytest.raises(NoAuthError):
        sasl_zk["cluster"].admin.set("/admin/preferred_replica_election", b"{}")


def test_sasl_wrong_password_is_one_line(sasl_zk, tmp_path, monkeypatch):
    jaas = _client_jaas(tmp_path / "bad.conf", "wrong")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    res = run("zk", "brokers", "-z", sasl_zk["connect"], "--timeout", "3")
    assert res.exit_code == 2 and "SASL" in res.output
    bad = tmp_path / "krb.conf"
    bad.write_text("Client {\n com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;\n};\n")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={bad}")
    res = run("zk", "brokers", "-z", sasl_zk["connect"], "--timeout", "3")
    assert res.exit_code == 2 and "Krb5LoginModule is not supported" in res.output


def test_serve_joins_a_cluster_over_zookeeper_tls(tls_zk, tmp_path):
    """serve's own ZooKeeper session takes the same zookeeper.ssl.* settings as the tools."""
    from tests.broker.conftest import BrokerProcess

    c = tls_zk["client"]
    connect = tls_zk["secure"].rsplit("/", 1)[0] + "/served"
    b = BrokerProcess(
        tmp_path / "data",
        extra=[
            "broker.id=1",
            f"zookeeper.connect={connect}",
            "zookeeper.ssl.client.enable=true",
            "zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
            f"zookeeper.ssl.keystore.location={c.p12_path}",
            "zookeeper.ssl.keystore.type=PKCS12",
            f"zookeeper.ssl.keystore.password={c.p12_password}",
            f"zookeeper.ssl.truststore.location={tls_zk['ca'].path}",
            "zookeeper.ssl.truststore.type=PEM",
        ],
    ).start(timeout=40)
    try:
        conf = _tls_file(
            tmp_path / "zk-tls.properties",
            keystore=c.p12_path,
            password=c.p12_password,
            truststore=tls_zk["ca"].path,
        )
        res = run("zk", "brokers", "-z", connect, "--zk-tls-config-file", conf, "--json", "--timeout", "10")
        assert res.exit_code == 0, res.output
        rows = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        assert [r["id"] for r in rows] == [1]
        assert "ignoring config" not in b.log_text()
    finally:
        b.stop()
