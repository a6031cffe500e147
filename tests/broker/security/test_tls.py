"""TLS listeners by Kafka's rules: real clients (confluent-kafka, kafka-python, kcat) over SSL against
a real ``kafkatool serve`` with a throw-away CA; failures are clean and logged once."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
import uuid

import pytest

from kafkatool.broker.config import BrokerConfig, ConfigError
from kafkatool.broker.security import tls
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.certs import CA


def _pkcs12_opts(srv, pki) -> list[str]:
    """The broker's PKCS12 keystore and truststore settings."""
    return [
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={srv.p12_path}",
        f"ssl.keystore.password={srv.p12_password}",
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.location={pki['trust_p12']}",
        "ssl.truststore.password=trust-secret",
    ]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = CA(d)
    rogue = CA(d / "rogue", name="rogue CA")
    return {
        "ca": ca,
        "server": ca.issue("broker"),
        "client": ca.issue("client", ou="eng", server=False),
        "expired": ca.issue("old-client", server=False, expired=True),
        "rogue": rogue.issue("intruder", server=False),
        "trust_p12": ca.truststore_p12(),
    }


def ssl_broker(tmp_path, pki, *, keystore="pkcs12", client_auth="requested", extra=()):
    port = free_port()
    srv = pki["server"]
    opts = [
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{port}",
        f"ssl.client.auth={client_auth}",
        "num.partitions=1",
    ]
    if keystore == "pkcs12":
        opts += _pkcs12_opts(srv, pki)
    else:  # inline PEM values as a properties file joins continuation lines: one line, no newlines
        chain = srv.cert_pem.decode().replace("\n", "")
        key = srv.key_pem.decode().replace("\n", "")
        opts += [
            "ssl.keystore.type=PEM",
            f"listener.name.ssl.ssl.keystore.certificate.chain={chain}",
            f"listener.name.ssl.ssl.keystore.key={key}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={pki['ca'].path}",
        ]
    opts += list(extra)
    b = BrokerProcess(tmp_path / "data", extra=opts)
    # the fixture's readiness probe speaks plaintext: point it at the PLAINTEXT listener
    b.port = int(opts[0].split(",")[0].rsplit(":", 1)[1])
    b.extra = opts
    b.start()
    b.ssl_bootstrap = f"127.0.0.1:{port}"
    return b


def ck_conf(pki, bootstrap, cert=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki["ca"].path),
    }
    if cert is not None:
        conf["ssl.certificate.location"] = str(cert.cert_path)
        conf["ssl.key.location"] = str(cert.key_path)
    return conf


def payloads(n=200):
    import random

    rnd = random.Random(7)
    return [(b"k%04d" % i, rnd.randbytes(rnd.choice([0, 10, 1000, 70000]))) for i in range(n)]


def test_confluent_and_kafka_python_over_ssl_byte_exact(tmp_path, pki):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    b = ssl_broker(tmp_path, pki, client_auth="required")
    try:
        topic = f"tls-{uuid.uuid4().hex[:6]}"
        data = payloads()
        p = Producer(ck_conf(pki, b.ssl_bootstrap, pki["client"]))
        for k, v in data:
            p.produce(topic, v, k)
        assert p.flush(30) == 0
        c = Consumer(
            {**ck_conf(pki, b.ssl_bootstrap, pki["client"]), "group.id": "g", "enable.auto.commit": False}
        )
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(data) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.key(), m.value()))
        c.close()
        assert got == data

        # kafka-python reads the same bytes over TLS (large values go through the buffered path)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTopicPartition

        # assign(), not subscribe() without a group: kafka-python 3.0.12 can lose the Metadata
        # update its subscribe() asks for (see test_sasl's byte-exact test)
        kc = KafkaConsumer(
            bootstrap_servers=b.ssl_bootstrap,
            security_protocol="SSL",
            ssl_cafile=str(pki["ca"].path),
            ssl_certfile=str(pki["client"].cert_path),
            ssl_keyfile=str(pki["client"].key_path),
            auto_offset_reset="earliest",
            consumer_timeout_ms=15000,
            fetch_max_bytes=1 << 20,
        )
        kc.assign([KafkaTopicPartition(topic, 0)])  # num.partitions=1
        got2 = [
            (m.key, m.value) for _, m in zip(range(len(data)), kc, strict=False)
        ]  # range first: kc is not asked for one more
        kc.close()
        assert got2 == data
    finally:
        b.stop()


def test_kcat_inline_pem_keystore_and_metadata_names_the_ssl_listener(tmp_path, pki):
    if shutil.which("kcat") is None:
        pytest.skip("kcat not installed")
    b = ssl_broker(tmp_path, pki, keystore="pem", client_auth="none")
    try:
        common = [
            "kcat",
            "-b",
            b.ssl_bootstrap,
            "-X",
            "security.protocol=SSL",
            "-X",
            f"ssl.ca.location={pki['ca'].path}",
        ]
        subprocess.run([*common, "-t", "kc", "-P", "-K:"], input=b"a:1\nb:2\n", check=True, timeout=30)
        out = subprocess.run(
            [*common, "-t", "kc", "-C", "-e", "-o", "beginning", "-f", "%k=%s\n"],
            capture_output=True,
            timeout=30,
        )
        assert out.stdout == b"a=1\nb=2\n"
        meta = subprocess.run([*common, "-L"], capture_output=True, text=True, timeout=30).stdout
        assert f"broker 1 at {b.ssl_bootstrap}" in meta  # the SSL listener's address, not PLAINTEXT's
    finally:
        b.stop()


def _handshake(pki, port, cert=None):
    ctx = ssl.create_default_context(cafile=str(pki["ca"].path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert_path), str(cert.key_path))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            # ApiVersions v0 must be answered over the TLS session
            t.sendall(bytes.fromhex("0000000a00120000000000010000"[:28]))
            return t.recv(4)


def test_failures_are_clean_and_logged_once(tmp_path, pki):
    b = ssl_broker(tmp_path, pki, client_auth="required")
    port = int(b.ssl_bootstrap.rsplit(":", 1)[1])
    try:
        assert len(_handshake(pki, port, pki["client"])) == 4
        for bad in (None, pki["expired"], pki["rogue"]):
            # TLS 1.3: the client learns of the rejection on its first read (an alert or EOF)
            try:
                answer = _handshake(pki, port, bad)
            except (ssl.SSLError, ConnectionError, OSError):
                answer = b""
            assert answer == b""
        # a plaintext client on the TLS port: the broker drops it (the client sees a disconnect)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(bytes.fromhex("0000000a00120000000000010000"))
            s.settimeout(10)
            try:
                assert s.recv(100) == b""  # closed, never a Kafka response
            except ConnectionResetError:
                pass
        time.sleep(0.5)
        lines = [x for x in b.log_text().splitlines() if "Failed authentication" in x]
        assert len(lines) == 4, lines
        assert all("listener=SSL" in x and "SSL handshake failed" in x for x in lines)
        assert "Traceback" not in b.log_text()
        assert b.alive()
    finally:
        b.stop()


def _tls12_failure(pki, port, cert=None) -> str:
    """The client's error when the broker rejects its TLS 1.2 handshake (the alert's name)."""
    ctx = ssl.create_default_context(cafile=str(pki["ca"].path))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # the client certificate is checked inside the handshake
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert_path), str(cert.key_path))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            with ctx.wrap_socket(s, server_hostname="localhost"):
                return "accepted"
        except ssl.SSLError as exc:
            return exc.reason or str(exc)
        except OSError as exc:  # the connection dropped without an alert
            return type(exc).__name__


def test_a_failed_handshake_tells_the_client_why(tmp_path, pki):
    """Kafka's SslTransportLayer flushes the TLS alert before it closes a failed handshake: the
    client learns the reason (no certificate, an unknown CA, an expired certificate), not just a
    dropped connection."""
    from confluent_kafka.admin import AdminClient

    b = ssl_broker(tmp_path, pki, client_auth="required")
    port = int(b.ssl_bootstrap.rsplit(":", 1)[1])
    try:
        assert _tls12_failure(pki, port, pki["client"]) == "accepted"
        # no certificate: OpenSSL's handshake_failure (JSSE before Java 23 sends bad_certificate
        # here; OpenSSL hard-codes this alert, no callback sees an absent certificate)
        assert _tls12_failure(pki, port) == "SSLV3_ALERT_HANDSHAKE_FAILURE"
        # a certificate the broker does not trust is a bad_certificate, whatever OpenSSL's reason,
        # as Kafka's JSSE answers (librdkafka's 0097 accepts 42 or Java 23's 40, not 48 or 45)
        assert _tls12_failure(pki, port, pki["rogue"]) == "SSLV3_ALERT_BAD_CERTIFICATE"
        assert _tls12_failure(pki, port, pki["expired"]) == "SSLV3_ALERT_BAD_CERTIFICATE"
        # TLS 1.3: the client's handshake is over before the broker checks its certificate; the
        # alert is what its first read returns
        ctx = ssl.create_default_context(cafile=str(pki["ca"].path))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                t.sendall(bytes.fromhex("0000000a00120000000000010000"))
                with pytest.raises(ssl.SSLError) as err:
                    t.recv(4)
        assert err.value.reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED"
        # librdkafka reports the alert's number (its test 0097 looks for it)
        errors = []
        a = AdminClient(
            {
                **ck_conf(pki, b.ssl_bootstrap, pki["rogue"]),
                "error_cb": lambda e: errors.append(e.str()),
                "ssl.endpoint.identification.algorithm": "none",
            }
        )
        deadline = time.monotonic() + 20
        while not any("alert number" in e for e in errors) and time.monotonic() < deadline:
            a.poll(0.5)
        assert any("alert bad certificate: SSL alert number 42" in e for e in errors), errors
        assert b.alive()
        log = b.log_text()  # the broker's log keeps OpenSSL's reason
        assert "client certificate rejected (depth 1): self-signed certificate in certificate chain" in log
        assert "client certificate rejected (depth 0): certificate has expired" in log
    finally:
        b.stop()


def test_sasl_ssl_listener_ignores_the_broker_wide_client_auth(tmp_path, pki):
    """KIP-684 (Kafka's ChannelBuilders): ``ssl.client.auth`` set broker-wide asks SSL listeners for
    client certificates, not SASL_SSL ones, whose clients SASL authenticates; a SASL_SSL listener
    asks only through its own ``listener.name.<name>.ssl.client.auth``."""
    from tests.client_checks import metadata_or_refusal

    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_alice="alice-secret";'
    )
    srv = pki["server"]

    def broker(extra):
        plain, tls_port, sasl_port = free_port(), free_port(), free_port()
        opts = [
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port},SASL_SSL://127.0.0.1:{sasl_port}",
            "ssl.client.auth=required",
            *_pkcs12_opts(srv, pki),
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}",
            *extra,
        ]
        b = BrokerProcess(tmp_path / f"data-{sasl_port}", port=plain, extra=opts)
        b.start()
        return b, f"127.0.0.1:{tls_port}", f"127.0.0.1:{sasl_port}"

    def cluster_id(conf):
        """The cluster id librdkafka reads, or None once the broker refused the handshake for
        want of a client certificate (TLS alert 116)."""
        md = metadata_or_refusal(conf, "alert certificate required")
        return None if md is None else md.cluster_id

    def sasl_conf(bootstrap):
        return {
            **ck_conf(pki, bootstrap),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }

    b, ssl_bootstrap, sasl_bootstrap = broker([])
    try:
        assert cluster_id(sasl_conf(sasl_bootstrap))  # no client certificate asked for
        assert cluster_id(ck_conf(pki, ssl_bootstrap)) is None  # the SSL listener still requires one
        assert cluster_id(ck_conf(pki, ssl_bootstrap, pki["client"]))
        assert "applies to SSL listeners only" in b.log_text()
    finally:
        b.stop()
    b, ssl_bootstrap, sasl_bootstrap = broker(["listener.name.sasl_ssl.ssl.client.auth=required"])
    try:
        assert cluster_id(sasl_conf(sasl_bootstrap)) is None
        with_cert = sasl_conf(sasl_bootstrap)
        with_cert["ssl.certificate.location"] = str(pki["client"].cert_path)
        with_cert["ssl.key.location"] = str(pki["client"].key_path)
        assert cluster_id(with_cert)
    finally:
        b.stop()


def test_principal_from_dn_with_mapping_rules(pki):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    der = x509.load_pem_x509_certificate(pki["client"].cert_path.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    dn = tls.certificate_dn(der)
    assert dn == "CN=client,OU=eng,O=kafkatool,C=US"  # X500Principal.getName(): most specific first
    assert tls.SslPrincipalMapper("DEFAULT").name(dn) == dn
    rules = "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L, DEFAULT"
    assert tls.SslPrincipalMapper(rules).name(dn) == "client@eng"
    assert tls.SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/U").name(dn) == "CLIENT"
    with pytest.raises(PermissionError):
        tls.SslPrincipalMapper("RULE:^CN=nobody,.*$/x/").name(dn)
    with pytest.raises(ConfigError):
        tls.SslPrincipalMapper("RULE:broken")


def test_listener_rules():
    cfg = BrokerConfig.load(
        None,
        [
            "listeners=INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
            "advertised.listeners=INTERNAL://10.0.0.1:9092,EXTERNAL://kafka.example:9093",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
        ],
    )
    assert [(x.name, x.security_protocol) for x in cfg.listeners] == [
        ("INTERNAL", "PLAINTEXT"),
        ("EXTERNAL", "SSL"),
    ]
    assert cfg.inter_broker_listener.host == "10.0.0.1"
    assert cfg.listener_setting("EXTERNAL", "ssl.client.auth") == "none"
    bad = [
        ["listeners=FOO://127.0.0.1:1"],  # not in the protocol map
        ["listeners=PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"],
        ["listener.security.protocol.map=A:TLS"],
        ["inter.broker.listener.name=NOPE"],
        ["inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"],
        ["listeners=PLAINTEXT://127.0.0.1:1", "advertised.listeners=SSL://x:1"],
    ]
    for overrides in bad:
        with pytest.raises(ConfigError):
            BrokerConfig.load(None, overrides)
    assert cfg.unknown() == []
    assert BrokerConfig.load(None, ["listener.name.external.ssl.keystore.type=PEM"]).unknown() == []


def test_cipher_suite_names():
    assert tls.iana_to_openssl("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    assert tls.iana_to_openssl("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA") == "ECDHE-RSA-AES128-SHA"
    assert (
        tls.iana_to_openssl("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
        == "ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert tls.iana_to_openssl("TLS_RSA_WITH_AES_128_GCM_SHA256") == "AES128-GCM-SHA256"
    ctx_get = {
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    }
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls._protocols(ctx, ctx_get.get)
    tls._ciphers(ctx, ctx_get.get)
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2  # Java never negotiates 1.3 without a 1.3 suite
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    ]
    with pytest.raises(ConfigError):
        tls._ciphers(ctx, {"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}.get)
    with pytest.raises(ConfigError):
        tls._protocols(ctx, {"ssl.enabled.protocols": "SSLv3"}.get)
