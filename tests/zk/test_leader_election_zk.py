"""kafkatool leader-election --zookeeper (issue 15): /admin/preferred_replica_election on a
real ZooKeeper seeded as ZK-mode Kafka writes it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app


def run(*args):
    return CliRunner().invoke(app, ["leader-election", *map(str, args)])


def test_zookeeper_mode_writes_the_election_znode(kafka_cluster):
    res = run("--zookeeper", kafka_cluster.connect, "--election-type", "preferred", "--all-topic-partitions")
    assert res.exit_code == 0, res.output
    data = json.loads(kafka_cluster.admin.get("/admin/preferred_replica_election")[0])
    assert data["version"] == 1
    assert sorted((p["topic"], p["partition"]) for p in data["partitions"]) == [
        ("events", 0), ("events", 1), ("legacy", 0), ("orders", 0), ("orders", 1), ("orders", 2),
    ]  # fmt: skip
    assert "Successfully started preferred replica election for partitions events-0" in res.stdout
    # the controller has not consumed it: a second election is refused, as Kafka's tool refuses
    again = run(
        "--zookeeper",
        kafka_cluster.connect,
        "--election-type",
        "preferred",
        "--topic",
        "orders",
        "--partition",
        "1",
    )
    assert again.exit_code == 2 and "currently in progress" in again.output
    unclean = run(
        "--zookeeper", kafka_cluster.connect, "--election-type", "unclean", "--all-topic-partitions"
    )
    assert unclean.exit_code == 2 and "--bootstrap-server" in unclean.output
