"""--command-config: kafkatool's own wire client reaches SASL_SSL and SASL_PLAINTEXT listeners with
Kafka's client property names (reassign through --bootstrap-server against a secured serve)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.broker.conftest import REPO
from tests.broker.security.test_sasl import secured  # noqa: F401 (the module's secured broker)
from tests.broker.test_admin import create
from tests.broker.wire import WireClient


def kafkatool(*args):
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "listener,props",
    [
        (
            "sasl_ssl",
            ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "ssl.truststore.type=PEM"],
        ),
        ("sasl_plaintext", ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256"]),
    ],
)
def test_reassign_generate_over_secured_listeners(secured, tmp_path, listener, props):  # noqa: F811
    with WireClient(secured.bootstrap) as c:
        assert create(c, f"cc-{listener}", 2).error_code in (0, 36)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": f"cc-{listener}"}]}))
    cfg = tmp_path / "client.properties"
    lines = [
        *props,
        f"ssl.truststore.location={secured.ca.path}",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="bob-secret";',
    ]
    cfg.write_text("\n".join(lines) + "\n")
    bootstrap = getattr(secured, listener)
    args = [
        "reassign",
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1",
        "-b",
        bootstrap,
    ]
    r = kafkatool(*args, "--command-config", cfg, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["partition"] for p in out["current"]["partitions"]] == [0, 1]
    # the same without the settings cannot talk to the listener; a wrong password says Kafka's words
    assert kafkatool(*args).returncode == 2
    cfg.write_text("\n".join(lines).replace("bob-secret", "wrong") + "\n")
    r = kafkatool(*args, "--command-config", cfg)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "Authentication failed during authentication due to invalid credentials" in r.stderr


def test_bad_command_config_is_a_usage_error(tmp_path):
    cfg = tmp_path / "bad.properties"
    cfg.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    r = kafkatool(
        "reassign",
        "generate",
        "--topics-to-move-json-file",
        cfg,
        "--broker-list",
        "1",
        "-b",
        "127.0.0.1:1",
        "--command-config",
        cfg,
    )
    assert r.returncode == 2 and "sasl.mechanism GSSAPI" in r.stderr and "Traceback" not in r.stderr
