"""The shared compat matrix over SASL_SSL with SCRAM-SHA-512 (issue 14), without changing the harness.

The harness (/work/shared/compat/run.py) has no security option and is read-only here, so this
wrapper starts ``kafkatool serve`` with a PLAINTEXT and a SASL_SSL listener (throw-away CA, a SCRAM
user made with AlterUserScramCredentials), then runs the harness against the SASL_SSL listener with
the clients' settings injected: ``sitecustomize.py`` (confluent-kafka, kafka-python) and
``kcat_shim.sh`` (the harness's KCAT variable).

    python3 tests/compat_security/run_sasl_ssl.py [--json out.json] [run.py options...]
"""

from __future__ import annotations

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
from tests.broker.security.certs import CA  # noqa: E402

HARNESS = Path(os.environ.get("KAFKATOOL_COMPAT", "/work/shared/compat")) / "run.py"


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        ca = CA(Path(d) / "pki")
        srv = ca.issue("broker")
        plain, secure = free_port(), free_port()
        opts = [
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={srv.p12_path}",
            f"ssl.keystore.password={srv.p12_password}",
        ]
        b = BrokerProcess(Path(d) / "data", port=plain, extra=opts)
        b.extra = opts
        b.start()
        try:
            from confluent_kafka.admin import (
                AdminClient,
                ScramCredentialInfo,
                ScramMechanism,
                UserScramCredentialUpsertion,
            )

            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            up = UserScramCredentialUpsertion(
                "compat", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"compat-secret"
            )
            for f in admin.alter_user_scram_credentials([up]).values():
                f.result(15)
            del admin  # no reconnect noise once the broker stops
            conf = {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "compat",
                "sasl.password": "compat-secret",
                "ssl.ca.location": str(ca.path),
            }
            env = dict(
                os.environ,
                PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
                KAFKATOOL_COMPAT_SECURITY=json.dumps(conf),
                KAFKATOOL_COMPAT_KCAT_X=" ".join(f"{k}={v}" for k, v in conf.items()),
                KCAT=str(HERE / "kcat_shim.sh"),
            )
            cmd = [sys.executable, str(HARNESS), "--bootstrap", f"127.0.0.1:{secure}", *sys.argv[1:]]
            return subprocess.run(cmd, env=env).returncode
        finally:
            b.stop()


if __name__ == "__main__":
    sys.exit(main())
