"""A slice of the shared client x scenario compatibility matrix (../shared/compat) in the default run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import SHARED

COMPAT = SHARED / "compat"
SLICE = {
    "confluent-kafka": "metadata,produce_consume_lz4,offsets_for_times,idempotent,large_message,delete_topic",
    "kafka-python": "create_topic,produce_consume_zstd",
}


@pytest.mark.skipif(not (COMPAT / "run.py").exists(), reason="shared compat harness not found")
@pytest.mark.parametrize("client", sorted(SLICE))
def test_compat_matrix_slice(broker, tmp_path, client):
    out = tmp_path / "compat.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(COMPAT / "run.py"),
            "--bootstrap",
            broker.bootstrap,
            "--json",
            str(out),
            "--clients",
            client,
            "--scenarios",
            SLICE[client],
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = json.loads(out.read_text())[client]
    assert sorted(cells) == sorted(SLICE[client].split(","))
    bad = {name: cell["detail"] for name, cell in cells.items() if cell["status"] != "ok"}
    assert not bad, bad
