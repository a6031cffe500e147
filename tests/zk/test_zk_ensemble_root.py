"""Tests that need a whole ensemble to themselves (discovery from '/'), and the installed CLI."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kafkatool.zk.client import KafkaZk
from kafkatool.zk.discovery import find_kafka_roots
from tests.zk.clirun import run
from tests.zk.conftest import run_zookeeper
from tests.zk.kafka_layout import default_spec, seed_cluster


@pytest.fixture(scope="module")
def private_zk(tmp_path_factory):
    with run_zookeeper(tmp_path_factory.mktemp("zk-private")) as connect:
        yield connect


def test_ensemble_root_discovery_and_auto_chroot(private_zk):
    c = seed_cluster(private_zk, "/kafka/prod", default_spec())
    try:
        # No chroot given and no Kafka at '/': the only cluster below is used, with a note.
        r = run("cluster-id", "-z", private_zk)
        assert r.code == 0 and r.stdout.strip() == c.cluster_id
        assert "using the one at /kafka/prod" in r.stderr
        # A broker that once started without its chroot left /brokers at the root.
        with KafkaZk(private_zk) as zk:
            zk.create("/brokers/ids", makepath=True)
            [root] = find_kafka_roots(zk)
            assert root.chroot == "/kafka/prod" and any("stray /brokers" in w for w in root.warnings)
            zk.delete("/brokers", recursive=True)
        # Discovery skips /zookeeper and `tree /` does not show it either.
        nodes = run("tree", "/", "--depth", "1", "-z", private_zk, "--json").json_lines()
        assert {n["path"] for n in nodes} == {"/", "/kafka"}
        # A second cluster: now the user must choose.
        d = seed_cluster(private_zk, "/kafka/dev", default_spec())
        try:
            r = run("brokers", "-z", private_zk)
            assert r.code == 2 and "/kafka/dev" in r.stderr and "/kafka/prod" in r.stderr
            rows = run("roots", "-z", private_zk, "--json").json_lines()
            assert [(o["chroot"], o["cluster_id"]) for o in rows[:-1]] == [
                ("/kafka/dev", d.cluster_id),
                ("/kafka/prod", c.cluster_id),
            ]
        finally:
            d.close()
    finally:
        c.close()


def test_installed_cli_end_to_end(kafka_cluster):
    """`python -m kafkatool zk ...` in a subprocess: real entry point, real stdout/stderr."""
    cmd = [sys.executable, "-m", "kafkatool", "zk"]
    out = subprocess.run(
        [*cmd, "check", "--json", "-z", kafka_cluster.connect], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip().endswith('"partitions": 6}') and out.stderr == ""
    t0 = time.monotonic()
    out = subprocess.run(
        [*cmd, "topics", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KAFKATOOL_ZOOKEEPER": "127.0.0.1:9/kafka", "PATH": "/usr/bin:/bin"},
    )
    assert time.monotonic() - t0 < 10
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "kafkatool: error: 127.0.0.1:9: no ZooKeeper answered within 1 s\n"
