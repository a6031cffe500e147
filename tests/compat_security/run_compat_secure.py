"""The shared compat matrix (/work/shared/compat) over SASL_SSL with SCRAM-SHA-512 (issue 14).

The harness is read-only and has no security option, so this runner adds one around it:

- ``kafkatool serve`` with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512 only), its certificate
  from run_librdkafka_security.make_pki (tests/broker/security/certs.py's CA);
- the SCRAM user made with ``kafkatool users alter --bootstrap-server <plaintext>``;
- ``run.py --bootstrap <sasl_ssl>`` with the clients' settings injected: kcat reads them from the
  file in KCAT_CONFIG (the kcat adapter passes no -F, which would take precedence), confluent-kafka
  and kafka-python get them from compat_client_security.py, copied as ``sitecustomize.py`` into a
  temp dir put first on PYTHONPATH (the harness passes its environment to every cell).

It prints the harness's matrix and a summary and exits 1 when a cell fails (run.py itself
always exits 0). ``--no-client-security`` runs the same cells without the injection: every cell
must then fail (the SASL_SSL listener refuses them), which shows that a client the injection
misses fails rather than passing over PLAINTEXT.

    python3 tests/compat_security/run_compat_secure.py [--work DIR] [--no-client-security]
        [run.py options: --clients a,b --scenarios x,y --timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from tests.broker.conftest import BrokerProcess, free_port  # noqa: E402
from tests.compat_harness import (  # noqa: E402
    HARNESS,
    NICE,
    inject_sitecustomize,
    probe_injection,
    run_py,
    summarize,
)
from tests.compat_security.run_librdkafka_security import (  # noqa: E402
    add_scram_user,
    keystore_settings,
    make_pki,
)

MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "compat", "compat-secret"


def client_security_env(work: Path, ca_file: str) -> dict[str, str]:
    """The environment that carries the SASL_SSL settings into the harness's cells."""
    env = inject_sitecustomize(work, HERE / "compat_client_security.py")
    kcat_conf = work / "kcat.conf"
    kcat_conf.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanisms={MECHANISM}\n"
        f"sasl.username={USER}\n"
        f"sasl.password={PASSWORD}\n"
        f"ssl.ca.location={ca_file}\n"
    )
    return {
        **env,
        "KCAT_CONFIG": str(kcat_conf),
        "KAFKATOOL_COMPAT_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKATOOL_COMPAT_SASL_MECHANISM": MECHANISM,
        "KAFKATOOL_COMPAT_SASL_USERNAME": USER,
        "KAFKATOOL_COMPAT_SASL_PASSWORD": PASSWORD,
        "KAFKATOOL_COMPAT_SSL_CAFILE": ca_file,
    }


def check_injection(env: dict[str, str]) -> None:
    """The harness's interpreter loads our sitecustomize and wraps every client class the
    adapters build; kcat's adapter passes no -F (which would win over KCAT_CONFIG)."""
    want = [
        "confluent_kafka.Producer",
        "confluent_kafka.Consumer",
        "confluent_kafka.admin.AdminClient",
        "kafka.KafkaProducer",
        "kafka.KafkaConsumer",
        "kafka.KafkaAdminClient",
    ]
    (wrapped,) = probe_injection(env, ["WRAPPED"], "client settings")
    if sorted(wrapped) != sorted(want):
        raise SystemExit(f"client settings not injected as expected: sitecustomize wrapped {wrapped}")
    if '"-F"' in (HARNESS / "c_kcat.py").read_text():
        raise SystemExit("c_kcat.py passes -F, which takes precedence over KCAT_CONFIG")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Other options go to run.py (--clients, --scenarios, --timeout).",
    )
    ap.add_argument("--work", type=Path, default=None, help="certificates, data, results, per-cell logs")
    ap.add_argument(
        "--no-client-security",
        action="store_true",
        help="run the cells without the clients' SASL_SSL settings (every cell must fail)",
    )
    args, harness_args = ap.parse_known_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="compat-secure-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    pki = make_pki(work / "pki")
    plain, sasl_ssl = free_port(), free_port()
    settings = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        *keystore_settings(pki),
        f"sasl.enabled.mechanisms={MECHANISM}",
        "num.partitions=1",
    ]
    broker = BrokerProcess(work / "data", port=plain, extra=settings, prefix=NICE)
    broker.start(timeout=60)
    try:
        add_scram_user(broker.bootstrap, USER, PASSWORD, (MECHANISM,))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKATOOL_COMPAT_", "KCAT_CONFIG"))}
        if not args.no_client_security:
            env |= client_security_env(work, pki["SSL_ca_pem"])
            check_injection(env)
        out = work / "matrix.json"
        out.unlink(missing_ok=True)
        cmd = run_py(f"127.0.0.1:{sasl_ssl}", out, work / "logs", harness_args)
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=env, timeout=3 * 3600).returncode
    finally:
        broker.stop()
    if rc != 0 or not out.exists():
        print(f"run.py exited {rc}; no result in {out}")
        return 2
    counts, failed = summarize(json.loads(out.read_text()))
    how = "without client security settings" if args.no_client_security else "with client security settings"
    print(f"\nSASL_SSL {MECHANISM} ({how}): ok={counts['ok']} fail={counts['fail']} n/a={counts['n/a']}")
    print(f"results {out}, per-cell logs {work / 'logs'}, broker log {broker.log_path}")
    for line in failed:
        print("  FAIL", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
