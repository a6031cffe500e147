"""kafkatool health --zookeeper (issue 15) on a real ZooKeeper seeded as ZK-mode Kafka writes it:
nothing on the healthy layout; a stopped broker's partitions and an imbalanced leader found."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.zk import codecs


def run(*args):
    return CliRunner().invoke(app, ["health", *map(str, args)])


def test_healthy_layout_then_a_stopped_broker_and_a_moved_leader(kafka_cluster):
    ok = run("-z", kafka_cluster.connect)
    assert ok.exit_code == 0, ok.output
    assert "nothing found" in ok.stdout

    # broker 1 stops leading orders-0 (its preferred partition): leadership went to broker 2
    path = "/brokers/topics/orders/partitions/0/state"
    state = json.loads(kafka_cluster.admin.get(path)[0])
    kafka_cluster.admin.set(path, codecs.encode_partition_state(2, state["leader_epoch"] + 1, 3, [1, 2, 3]))
    kafka_cluster.stop_broker(3)
    res = run("-z", kafka_cluster.connect, "--json")
    assert res.exit_code == 1, res.output
    got = [json.loads(x) for x in res.stdout.splitlines() if '"finding"' in x]
    kinds = {(f["kind"], f["subject"]) for f in got}
    # every partition with a replica on broker 3, its leaderships, and broker 1's imbalance
    assert ("replica_on_missing_broker", "orders-0") in kinds
    assert ("replica_on_missing_broker", "events-1") in kinds
    assert ("leader_not_live", "legacy-0") in kinds and ("leader_not_live", "orders-2") in kinds
    assert ("leader_imbalance", "broker 1") in kinds
    imb = next(f for f in got if f["kind"] == "leader_imbalance")
    assert "leads 1 of the 2 partitions" in imb["message"]
    assert imb["fix"] == "kafkatool leader-election --election-type preferred --all-topic-partitions"
