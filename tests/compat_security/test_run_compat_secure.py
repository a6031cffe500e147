"""run_compat_secure.py end to end on the metadata cells: with the clients' SASL_SSL settings every
cell passes; without them the SASL_SSL listener refuses every cell and the runner exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent / "run_compat_secure.py"
REPO = RUNNER.parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(os.environ.get("KAFKATOOL_COMPAT", "/work/shared/compat")) / "run.py").exists(),
        reason="the compat harness is not here",
    ),
]


def run(work: Path, *extra: str) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            "--work",
            str(work),
            "--scenarios",
            "metadata",
            "--timeout",
            "20",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return r.returncode, json.loads((work / "matrix.json").read_text())


def test_cells_pass_with_the_client_settings(tmp_path):
    rc, results = run(tmp_path)
    assert {c: cells["metadata"]["status"] for c, cells in results.items()} == {
        "confluent-kafka": "ok",
        "kcat": "ok",
        "kafka-python": "ok",
    }
    assert rc == 0


def test_sasl_ssl_listener_refuses_cells_without_them(tmp_path):
    rc, results = run(tmp_path, "--no-client-security")
    assert {c: cells["metadata"]["status"] for c, cells in results.items()} == {
        "confluent-kafka": "fail",
        "kcat": "fail",
        "kafka-python": "fail",
    }
    assert rc == 1
