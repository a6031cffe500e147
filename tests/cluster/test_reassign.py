"""Partition reassignment across brokers moves real data (KIP-455 in the controller):
``kafkatool reassign execute`` through the admin API and through ZooKeeper; the adding
replica copies the log, joins the ISR, the removed replica's log is deleted, and
``reassign verify`` reports completion."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.broker.conftest import REPO
from tests.cluster.conftest import wait_for
from tests.cluster.test_divergence import log_bytes, produce
from tests.cluster.test_replication import partition_state, read_all

confluent_kafka = pytest.importorskip("confluent_kafka")


def kafkatool(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def assignment(cluster, topic: str) -> dict:
    k = cluster.kazoo()
    try:
        return json.loads(k.get(f"/brokers/topics/{topic}")[0])
    finally:
        k.stop()
        k.close()


@pytest.mark.parametrize("via", ["bootstrap-server", "zookeeper"])
def test_reassignment_moves_the_data(cluster, tmp_path, via):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics(
            [
                KpNewTopic(
                    name="mv", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1, 2]}
                )
            ],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    wait_for(lambda: len(partition_state(cluster, "mv", 0)["isr"]) == 2, 20, "ISR [1, 2]")
    values = [b"v%d" % i for i in range(500)]
    produce(cluster.bootstrap, "mv", values, "all")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2, 3]}]})
    )
    where = (
        ["--bootstrap-server", cluster.bootstrap]
        if via == "bootstrap-server"
        else ["--zookeeper", cluster.connect]
    )
    r = kafkatool("reassign", "execute", "--reassignment-json-file", str(plan), *where)
    assert r.returncode == 0, r.stdout + r.stderr
    last = []

    def verified() -> bool:
        r = kafkatool("reassign", "verify", "--reassignment-json-file", str(plan), *where)
        last[:] = [r.stdout + r.stderr]
        return r.returncode == 0

    try:
        wait_for(verified, 60, "reassign verify to report completion", step=1.0)
    except AssertionError:
        raise AssertionError(last[0]) from None
    a = assignment(cluster, "mv")
    assert a["partitions"]["0"] == [2, 3] and not a.get("adding_replicas") and not a.get("removing_replicas")
    st = partition_state(cluster, "mv", 0)
    assert st["leader"] in (2, 3) and sorted(st["isr"]) == [2, 3]
    b1, b2, b3 = cluster.brokers[1], cluster.brokers[2], cluster.brokers[3]
    wait_for(lambda: not (b1.data_dir / "mv-0").exists(), 30, "the removed replica's log to be deleted")
    assert log_bytes(b3, "mv") == log_bytes(b2, "mv")
    assert [v for _, v in read_all(cluster.bootstrap, "mv")] == values
    r = kafkatool("zk", "check", "--zookeeper", cluster.connect)
    assert r.returncode == 0, r.stdout + r.stderr
