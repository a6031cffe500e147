"""librdkafka's own security tests against ``kafkatool serve`` (issue 14): 0097 (SSL certificate
verification, over SSL and SASL_SSL), 0135 (SASL credentials), 0142 (KIP-368 re-authentication)
and 0081's subtests that need SASL (authorized operations, ACLs, SCRAM credentials).

librdkafka's test suite expects a trivup cluster; this sets up the same things by hand: a CA and
a client certificate in every form trivup's SslApp writes (the ``SSL_*`` variables 0097 reads),
brokers with trivup's TLS settings (``ssl.client.auth=required``, TLS 1.2 and older only), SASL
PLAIN and SCRAM users (``kafkatool users alter``), one ``test.conf`` per listener/mechanism, then
``run-test.sh`` one test at a time under ``nice -n 19``. 0142 and 0081 create topics with
replication factor 3, so they run on three brokers (ZooKeeper mode, Debian's zookeeper package and
java) with ACLs on (AclAuthorizer, allow.everyone.if.no.acl.found=true as 0081 expects; the
brokers' PLAINTEXT inter-broker principal User:ANONYMOUS a super user).

    python3 tests/compat_security/run_librdkafka_security.py /path/to/librdkafka [--work DIR]

Brokers and the test runner are pinned to different CPUs (``--cpus``, default 0 and 1): when
the broker answers a ClientHello before librdkafka's first SSL_connect() call returns (a broker
woken on the client's CPU preempts it), librdkafka reports that handshake's failure as
ERR__TRANSPORT instead of ERR__SSL (rd_kafka_transport_ssl_connect), and 0097's
verification-failure cases, which accept only ERR__SSL, fail at random on a loaded machine.

The librdkafka tree must be built with SSL (``./configure --disable-gssapi --disable-curl
--disable-zstd --disable-lz4-ext && make libs && make -C tests build``). Share-consumer subtests
(KIP-932, Kafka 4.x) are left out with SUBTESTS: kafkatool serves Kafka 3.7's APIs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: E402

from tests.broker.conftest import BrokerProcess, free_port  # noqa: E402
from tests.broker.security.certs import CA  # noqa: E402

USER, PASSWORD = "testuser", "testpass"
KEY_PASSWORD = "12345678"  # trivup's ssl_key_pass
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";'
)


def make_pki(out: Path) -> dict[str, str]:
    """The files trivup's SslApp makes, by the names of the SSL_* variables librdkafka's tests read."""
    ca = CA(out / "ca", name="kafkatool test CA")
    unused = CA(out / "unused_ca", name="unused CA")
    client = ca.issue("librdkafka", server=False)
    cert = x509.load_pem_x509_certificates(client.cert_pem)[0]
    key = serialization.load_pem_private_key(client.key_pem, None)

    def write(name: str, data: bytes) -> str:
        (out / name).write_bytes(data)
        return str(out / name)

    env = {
        "SSL_ca_pem": str(ca.path),
        "SSL_ca_der": write("ca.der", ca.cert.public_bytes(serialization.Encoding.DER)),
        "SSL_all_cas_pem": write("all_cas.pem", unused.pem + ca.pem),
        "SSL_pub_pem": write("librdkafka-pub.pem", cert.public_bytes(serialization.Encoding.PEM)),
        "SSL_pub_der": write("librdkafka-pub.der", cert.public_bytes(serialization.Encoding.DER)),
        "SSL_priv_pem": write("librdkafka-priv.pem", client.key_pem),
        "SSL_priv_der": write(
            "librdkafka-priv.der",
            key.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ),
        ),
        "SSL_pkcs": write(
            "librdkafka.pfx",
            pkcs12.serialize_key_and_certificates(
                b"librdkafka",
                key,
                cert,
                [ca.cert],
                serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
            ),
        ),
        "SSL_password": KEY_PASSWORD,
        "SSL_client_auth": "required",
    }
    broker = ca.issue("broker")
    return env | {
        "_broker_p12": str(broker.p12_path),
        "_broker_p12_password": broker.p12_password,
        "_truststore": str(ca.truststore_p12("trust-secret")),
    }


def keystore_settings(pki: dict[str, str]) -> list[str]:
    """The broker's certificate (make_pki's ``_broker_p12``) for its SSL and SASL_SSL listeners."""
    return [
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={pki['_broker_p12']}",
        f"ssl.keystore.password={pki['_broker_p12_password']}",
    ]


def broker_settings(pki: dict[str, str], ssl_port: int, sasl_ssl_port: int, plain_port: int) -> list[str]:
    """trivup's broker TLS settings, plus SCRAM and PLAIN on the SASL_SSL listener."""
    return [
        f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        *keystore_settings(pki),
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.location={pki['_truststore']}",
        "ssl.truststore.password=trust-secret",
        "ssl.client.auth=required",
        "ssl.enabled.protocols=TLSv1.2,TLSv1.1,TLSv1",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "connections.max.reauth.ms=10000",
        "num.partitions=4",
    ]


def add_scram_user(
    bootstrap: str,
    user: str = USER,
    password: str = PASSWORD,
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512"),
) -> None:
    """``kafkatool users alter`` over ``bootstrap`` (a listener that needs no SASL)."""
    cfg = ",".join(f"{m}=[iterations=4096,password={password}]" for m in mechanisms)
    subprocess.run(
        [sys.executable, "-m", "kafkatool", "users", "alter", "--user", user, "--add-config", cfg]
        + ["--bootstrap-server", bootstrap],
        cwd=REPO,
        check=True,
        timeout=60,
    )


def test_conf(path: Path, pki: dict[str, str], bootstrap: str, mechanism: str | None) -> Path:
    lines = [f"bootstrap.servers={bootstrap}", f"security.protocol={'SASL_SSL' if mechanism else 'SSL'}"]
    if mechanism:
        lines += [f"sasl.mechanisms={mechanism}", f"sasl.username={USER}", f"sasl.password={PASSWORD}"]
    lines += [
        f"ssl.ca.location={pki['SSL_ca_pem']}",
        f"ssl.certificate.location={pki['SSL_pub_pem']}",
        f"ssl.key.location={pki['SSL_priv_pem']}",
        f"ssl.key.password={KEY_PASSWORD}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_test(rdk_tests, work, name, conf, test, pki, cpu, subtests=None, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSL_", "TEST", "SUBTESTS"))}
    env |= {k: v for k, v in pki.items() if k.startswith("SSL_")}
    env |= {"RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": "3.7.0", "TESTS": test}
    if subtests:
        env["SUBTESTS"] = subtests
    log = work / f"{name}.log"
    t0 = time.monotonic()
    with open(log, "wb") as out:
        try:
            rc = subprocess.run(
                ["nice", "-n", "19", *pin(cpu), "./run-test.sh"],
                cwd=rdk_tests,
                env=env,
                stdout=out,
                stderr=out,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    result = {"run": name, "rc": rc, "seconds": round(time.monotonic() - t0), "log": str(log)}
    print(json.dumps(result), flush=True)
    return result


def pin(cpu: str | None) -> list[str]:
    return ["taskset", "-c", cpu] if cpu is not None else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("librdkafka", type=Path, help="an SSL-enabled librdkafka tree with its tests built")
    ap.add_argument("--work", type=Path, default=None, help="where certificates, data and logs go")
    ap.add_argument("--no-single", action="store_true", help="skip 0097 and 0135 (one broker)")
    ap.add_argument(
        "--no-cluster", action="store_true", help="skip 0142 and 0081 (three brokers, java, zookeeper)"
    )
    ap.add_argument("--cpus", default="0,1", help="BROKER_CPU,CLIENT_CPU for taskset, or 'none'")
    args = ap.parse_args()
    broker_cpu, client_cpu = (None, None) if args.cpus == "none" else args.cpus.split(",")
    rdk_tests = args.librdkafka.resolve() / "tests"
    work = args.work or Path(tempfile.mkdtemp(prefix="rdk-security-"))
    work.mkdir(parents=True, exist_ok=True)
    pki = make_pki(work / "pki")
    results = []
    if not args.no_single:
        results += one_broker(rdk_tests, work, pki, broker_cpu, client_cpu)
    if not args.no_cluster:
        results += three_brokers(rdk_tests, work, pki, broker_cpu, client_cpu)
    failed = [r for r in results if r["rc"] != 0]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed; logs in {work}")
    return 1 if failed else 0


def one_broker(rdk_tests, work, pki, broker_cpu, client_cpu) -> list[dict]:
    """0097 over SSL and SASL_SSL, 0135 over SASL_SSL with each mechanism."""
    results = []
    plain, tls, sasl = free_port(), free_port(), free_port()
    settings = broker_settings(pki, tls, sasl, plain)
    b = BrokerProcess(work / "single" / "data", port=plain, extra=settings, prefix=pin(broker_cpu))
    b.extra = settings
    (work / "single").mkdir(exist_ok=True)
    b.start(timeout=60)
    try:
        add_scram_user(b.bootstrap)
        ssl_conf = test_conf(work / "ssl.conf", pki, f"127.0.0.1:{tls}", None)
        results.append(run_test(rdk_tests, work, "0097-SSL", ssl_conf, "0097", pki, client_cpu))
        for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"):
            conf = test_conf(work / f"sasl_ssl-{mech}.conf", pki, f"127.0.0.1:{sasl}", mech)
            if mech == "SCRAM-SHA-512":
                results.append(
                    run_test(rdk_tests, work, f"0097-SASL_SSL-{mech}", conf, "0097", pki, client_cpu)
                )
            results.append(
                run_test(rdk_tests, work, f"0135-SASL_SSL-{mech}", conf, "0135", pki, client_cpu, "do_test:")
            )
    finally:
        b.stop()
    return results


def three_brokers(rdk_tests, work, pki, broker_cpu, client_cpu) -> list[dict]:
    """0142's re-authentication subtests and 0081's SASL subtests, on three brokers with ACLs on."""
    from tests.cluster.conftest import Cluster
    from tests.zk.conftest import run_zookeeper

    results = []
    acls = [
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        "super.users=User:ANONYMOUS",
    ]
    with run_zookeeper(work / "zk") as zk:
        c = Cluster(work / "cluster", zk, 3, [])
        sasl_bootstrap = []
        for broker in c.brokers.values():
            tls, sasl = free_port(), free_port()
            broker.extra += broker_settings(pki, tls, sasl, broker.port) + acls
            broker.prefix = pin(broker_cpu)
            sasl_bootstrap.append(f"127.0.0.1:{sasl}")
        c.start()
        try:
            add_scram_user(next(iter(c.brokers.values())).bootstrap)
            conf = test_conf(work / "cluster-sasl_ssl.conf", pki, ",".join(sasl_bootstrap), "SCRAM-SHA-512")
            runs = [
                ("0142", sub)
                for sub in (
                    "do_test_consumer",
                    "do_test_producer",
                    "do_test_txn_producer",
                    "do_test_reauth_failure",
                )
            ] + [
                ("0081", sub)
                for sub in (
                    "do_test_DescribeTopics",
                    "do_test_DescribeCluster",
                    "do_test_DescribeConsumerGroups_with_authorized_ops",
                    "Acls",
                    "do_test_UserScramCredentials",
                )
            ]
            for test, sub in runs:
                results.append(
                    run_test(rdk_tests, work, f"{test}-{sub}", conf, test, pki, client_cpu, sub, timeout=420)
                )
        finally:
            with contextlib.suppress(Exception):
                c.stop()
    return results


if __name__ == "__main__":
    sys.exit(main())
