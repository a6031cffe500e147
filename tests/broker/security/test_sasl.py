"""SASL by Kafka's rules against a real ``kafkatool serve``: PLAIN and SCRAM-SHA-256/512 over
SASL_PLAINTEXT and SASL_SSL with confluent-kafka, kafka-python and kcat; failures answered with
Kafka's messages and logged once; handshake v0 raw tokens, KIP-368 session lifetime, and the
SCRAM credential APIs."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from kafkatool.broker.security import scram
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.certs import CA
from tests.broker.wire import WireClient

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_USERS = {"bob": "bob-secret", "carol": "carol-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl")
    ca = CA(d / "pki")
    srv = ca.issue("broker")
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    opts = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={srv.p12_path}",
        f"ssl.keystore.password={srv.p12_password}",
        "connections.max.reauth.ms=60000",
        "num.partitions=1",
    ]
    b = BrokerProcess(d / "data", port=plain, extra=opts)
    b.extra = opts
    b.start()
    b.sasl_plaintext = f"127.0.0.1:{sasl_plain}"
    b.sasl_ssl = f"127.0.0.1:{sasl_ssl}"
    b.ca = ca
    # SCRAM users through AlterUserScramCredentials on the PLAINTEXT listener (the client salts)
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    ups = [
        UserScramCredentialUpsertion(u, ScramCredentialInfo(m, 4096), pw.encode())
        for u, pw in SCRAM_USERS.items()
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for f in admin.alter_user_scram_credentials(ups).values():
        f.result(15)
    yield b
    b.stop()


def command_config(b, path):
    """A kafkatool --command-config file (Kafka's client properties) for ``b``'s SASL_SSL
    listener as SCRAM-SHA-512 user bob, trusting the test CA; returns ``path``."""
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={b.ca.path}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="bob-secret";\n'
    )
    return path


def ck_conf(b, protocol, mechanism, user, password):
    conf = {
        "bootstrap.servers": b.sasl_plaintext if protocol == "SASL_PLAINTEXT" else b.sasl_ssl,
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(b.ca.path)
    return conf


CASES = [
    (proto, mech)
    for proto in ("SASL_PLAINTEXT", "SASL_SSL")
    for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
]


def creds(mech):
    return ("alice", "alice-secret") if mech == "PLAIN" else ("bob", "bob-secret")


@pytest.mark.parametrize("proto,mech", CASES)
def test_confluent_produce_kafka_python_consume_byte_exact(secured, proto, mech):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    user, pw = creds(mech)
    topic = f"sasl-{uuid.uuid4().hex[:6]}"
    data = [(b"k%03d" % i, bytes([i % 256]) * (i * 37)) for i in range(60)]
    p = Producer(ck_conf(secured, proto, mech, user, pw))
    for k, v in data:
        p.produce(topic, v, k)
    assert p.flush(30) == 0
    kw = {}
    if proto == "SASL_SSL":
        kw = {"ssl_cafile": str(secured.ca.path), "ssl_check_hostname": False}
    # assign(), not subscribe() without a group: kafka-python 3.0.12 can lose the Metadata update
    # its subscribe() asks for (one built before the topic was added answers it), and then has
    # no partition to read until metadata.max.age.ms (5 min); assign() asks again until it
    # knows the partition's leader
    kc = KafkaConsumer(
        bootstrap_servers=secured.sasl_plaintext if proto == "SASL_PLAINTEXT" else secured.sasl_ssl,
        security_protocol=proto,
        sasl_mechanism=mech,
        sasl_plain_username=user,
        sasl_plain_password=pw,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **kw,
    )
    kc.assign([TopicPartition(topic, 0)])  # num.partitions=1
    got = [
        (m.key, m.value) for _, m in zip(range(len(data)), kc, strict=False)
    ]  # range first: kc is not asked for one more
    kc.close()
    assert got == data


@pytest.mark.parametrize("proto,mech", CASES)
def test_kcat(secured, proto, mech):
    if shutil.which("kcat") is None:
        pytest.skip("kcat not installed")
    user, pw = creds(mech)
    conf = ck_conf(secured, proto, mech, user, pw)
    args = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    topic = f"kc-{uuid.uuid4().hex[:6]}"
    subprocess.run([*args, "-t", topic, "-P", "-K:"], input=b"a:1\nb:2\n", check=True, timeout=30)
    out = subprocess.run(
        [*args, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%k=%s\n"], capture_output=True, timeout=30
    )
    assert out.stdout == b"a=1\nb=2\n", out.stderr


@pytest.mark.parametrize(
    "mech,user,pw,message",
    [
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "nobody", "x", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "bob", "wrong", scram.INVALID_CREDENTIALS.format("SCRAM-SHA-256")),
        ("SCRAM-SHA-512", "nobody", "x", scram.INVALID_CREDENTIALS.format("SCRAM-SHA-512")),
    ],
)
def test_failed_authentication_kafka_error_and_one_log_line(secured, mech, user, pw, message):
    from kafkatool.protocol.generated import sasl_authenticate_request as A
    from kafkatool.protocol.generated import sasl_handshake_request as H
    from tests.client_checks import metadata_or_refusal

    # a real client (librdkafka) reports Kafka's message, and is refused
    seen = []
    conf = ck_conf(secured, "SASL_PLAINTEXT", mech, user, pw)
    assert metadata_or_refusal(conf, "SASL authentication error", errors=seen) is None
    assert any(message in e.str() for e in seen), [e.str() for e in seen]
    # one connection, one failure: SASL_AUTHENTICATION_FAILED with the message, delayed, closed, one log line
    time.sleep(0.3)
    before = secured.log_text().count("Failed authentication")
    with WireClient(secured.sasl_plaintext) as c:
        assert c.request(17, 1, H.SaslHandshakeRequest(mechanism=mech)).error_code == 0
        if mech == "PLAIN":
            token = _plain_token(user, pw)
        else:
            token = f"n,,n={user},r=abcdefgh".encode()
        t0 = time.monotonic()
        r = c.request(36, 1, A.SaslAuthenticateRequest(auth_bytes=token))
        if mech != "PLAIN" and r.error_code == 0:  # known user: fail on the proof
            nonce = r.auth_bytes.decode().split(",")[0][2:]
            r = c.request(36, 1, A.SaslAuthenticateRequest(auth_bytes=f"c=biws,r={nonce},p=AAAA".encode()))
        assert (r.error_code, r.error_message) == (58, message)
        assert time.monotonic() - t0 >= 0.09  # connection.failed.authentication.delay.ms
        assert c.closed_by_peer()
    time.sleep(0.3)
    lines = [x for x in secured.log_text().splitlines() if "Failed authentication" in x][before:]
    assert len(lines) == 1 and message in lines[0], lines
    assert "Traceback" not in secured.log_text()


def _plain_token(user, pw):
    return b"\0" + user.encode() + b"\0" + pw.encode()


def test_wire_handshake_v0_raw_tokens_v1_lifetime_and_state_rules(secured):
    from kafkatool.protocol.generated import sasl_authenticate_request as A
    from kafkatool.protocol.generated import sasl_handshake_request as H
    from kafkatool.protocol.generated.metadata_request import MetadataRequest

    # v1: SaslHandshake + SaslAuthenticate v2 carry the KIP-368 session lifetime
    with WireClient(secured.sasl_plaintext) as c:
        c.api_versions()
        r = c.request(17, 1, H.SaslHandshakeRequest(mechanism="SCRAM-SHA-999"))
        assert r.error_code == 33 and "PLAIN" in r.mechanisms
        assert c.closed_by_peer()
    with WireClient(secured.sasl_plaintext) as c:
        assert c.request(17, 1, H.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        r = c.request(36, 2, A.SaslAuthenticateRequest(auth_bytes=_plain_token("alice", "alice-secret")))
        assert (r.error_code, r.session_lifetime_ms) == (0, 60000)
        assert c.request(3, 1, MetadataRequest(topics=[])).brokers  # authenticated: served
        r = c.request(36, 2, A.SaslAuthenticateRequest(auth_bytes=b""))
        assert r.error_code == 34  # after success: ILLEGAL_SASL_STATE
    # v0: tokens travel as raw size-prefixed frames
    with WireClient(secured.sasl_plaintext) as c:
        assert c.request(17, 0, H.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        tok = _plain_token("admin", "admin-secret")
        c.send_raw(len(tok).to_bytes(4, "big") + tok)
        assert c.recv_frame() == b""
        assert c.request(3, 1, MetadataRequest(topics=[])).brokers
    # any other request before authentication closes the connection
    with WireClient(secured.sasl_plaintext) as c:
        c.send(3, 1, MetadataRequest(topics=[]))
        assert c.closed_by_peer()
    # on a PLAINTEXT listener the SASL APIs answer ILLEGAL_SASL_STATE, as KafkaApis does
    with WireClient(secured.bootstrap) as c:
        assert c.request(17, 1, H.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 34


def _plain_login(c, user="alice", pw="alice-secret"):
    from kafkatool.protocol.generated import sasl_authenticate_request as A
    from kafkatool.protocol.generated import sasl_handshake_request as H

    assert c.request(17, 1, H.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.request(36, 2, A.SaslAuthenticateRequest(auth_bytes=_plain_token(user, pw))).error_code == 0


def test_a_handshake_after_authentication_reauthenticates_only_as_kafka_allows(
    secured, make_broker, tmp_path
):
    """KafkaChannel.maybeBeginServerReauthentication: a SaslHandshake on an authenticated
    connection begins a re-authentication only when the session expires (here
    connections.max.reauth.ms) and none began in the last second; otherwise it is an
    ordinary request, answered ILLEGAL_SASL_STATE by KafkaApis, the connection kept.  A
    handshake always began one, so a mechanism that is not enabled closed the connection of a
    session that never expires."""
    from kafkatool.protocol.generated import sasl_handshake_request as H
    from kafkatool.protocol.generated.metadata_request import MetadataRequest

    with WireClient(secured.sasl_plaintext) as c:
        _plain_login(c)
        _plain_login(c)  # a re-authentication (the session lasts connections.max.reauth.ms)
        # a second one within the second: an ordinary request
        assert c.request(17, 1, H.SaslHandshakeRequest(mechanism="SCRAM-SHA-999")).error_code == 34
        assert c.request(3, 1, MetadataRequest(topics=[])).brokers
    port = free_port()
    b = make_broker(
        tmp_path / "noreauth",
        port=port,
        extra=[
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",  # in place of the PLAINTEXT one
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        ],
    ).start()
    with WireClient(b.bootstrap) as c:
        _plain_login(c)
        for mech in ("SCRAM-SHA-999", "PLAIN"):
            assert c.request(17, 1, H.SaslHandshakeRequest(mechanism=mech)).error_code == 34
        assert c.request(3, 1, MetadataRequest(topics=[])).brokers
    assert "Traceback" not in b.log_text()


def test_scram_credential_apis_and_storage(secured):
    from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion

    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    desc = admin.describe_user_scram_credentials(["bob", "nobody"])
    bob = desc["bob"].result(10)
    assert sorted((i.mechanism, i.iterations) for i in bob.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    with pytest.raises(Exception, match="does not exist"):
        desc["nobody"].result(10)
    # stored as Kafka stores them: salt/stored_key/server_key/iterations, never the password
    import json

    meta = json.loads((secured.data_dir / "kafkatool-cluster.json").read_text())
    text = meta["user_scram_credentials"]["carol"]["SCRAM-SHA-256"]
    cred = scram.ScramCredential.from_text(text)
    assert cred.iterations == 4096 and "carol-secret" not in text
    assert scram.new_credential("SCRAM-SHA-256", "carol-secret", 4096, cred.salt) == cred
    # deletion takes effect for the next authentication, without a restart
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]
    ).values():
        f.result(10)
    from kafkatool.protocol.generated import sasl_authenticate_request as A
    from kafkatool.protocol.generated import sasl_handshake_request as H

    for mech, code in (("SCRAM-SHA-512", 58), ("SCRAM-SHA-256", 0)):
        with WireClient(secured.sasl_plaintext) as c:
            assert c.request(17, 1, H.SaslHandshakeRequest(mechanism=mech)).error_code == 0
            r = c.request(36, 1, A.SaslAuthenticateRequest(auth_bytes=b"n,,n=carol,r=xyz"))
            assert r.error_code == code
