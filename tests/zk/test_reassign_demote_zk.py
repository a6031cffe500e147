"""--demote-brokers --zookeeper: the partition state znodes give the ISR and the current leaders,
and the printed election covers what a demoted broker leads now (a real ZooKeeper, seeded with
Kafka's layout: the session's server of tests/zk/conftest.py, a chroot a test)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app
from tests.zk.kafka_layout import BrokerSpec, ClusterSpec, PartitionSpec, TopicSpec, seed_cluster


def generate(*args):
    return CliRunner().invoke(app, ["reassign", "generate", *map(str, args)])


def seeded(zk_chroot, partitions):
    spec = ClusterSpec(
        brokers={b: BrokerSpec([f"PLAINTEXT://127.0.0.1:{19090 + b}"]) for b in range(1, 5)},
        topics={"t": TopicSpec(partitions)},
    )
    hosts, chroot = zk_chroot.split("/", 1)
    return seed_cluster(hosts, "/" + chroot, spec)


def test_followers_reordered_and_the_current_leaders_elected(zk_chroot, tmp_path):
    cluster = seeded(
        zk_chroot,
        {
            0: PartitionSpec([2, 1, 3], leader=1),  # 1 leads after a failover: reordered, elected
            1: PartitionSpec([3, 1], leader=1),  # 1 leads, already last: elected only
            2: PartitionSpec([2, 1, 4], isr=[2, 4]),  # 1 out of sync, a follower: reordered
            3: PartitionSpec([1, 4, 3], isr=[1, 3]),  # 4 behind: 3 takes the lead
            4: PartitionSpec([4, 3]),  # no replica on 1
        },
    )
    try:
        topics = tmp_path / "topics.json"
        topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
        r = generate(
            "--topics-to-move-json-file",
            topics,
            "--demote-brokers",
            1,
            "--zookeeper",
            cluster.connect,
            "--json",
        )
        assert r.exit_code == 0, r.stdout + r.stderr
        obj = json.loads(r.stdout)
        assert [(p["partition"], p["replicas"]) for p in obj["proposed"]["partitions"]] == [
            (0, [2, 3, 1]),
            (2, [2, 4, 1]),
            (3, [3, 4, 1]),
        ]
        assert obj["election"] == {"partitions": [{"topic": "t", "partition": p} for p in (0, 1, 3)]}
        assert obj["report"]["replicas_moved"] == 0 and obj["left"] == [] and obj["notes"] == []

    finally:
        cluster.close()


def test_an_order_already_right_still_gets_its_election(zk_chroot, tmp_path):
    cluster = seeded(zk_chroot, {0: PartitionSpec([2, 1], leader=1), 1: PartitionSpec([3, 1])})
    try:
        topics = tmp_path / "topics.json"
        topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
        r = generate(
            "--topics-to-move-json-file", topics, "--demote-brokers", 1, "--zookeeper", cluster.connect
        )
        assert r.exit_code == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert "Proposed partition reassignment configuration" not in lines
        assert "Every partition of these topics already lists broker 1 last: no order to change." in lines
        i = lines.index(
            "A preferred leader election moves leadership off broker 1 to the first replicas (where they are "
            "alive and in sync):"
        )
        assert lines[i + 1] == (
            f"kafkatool leader-election --election-type preferred --zookeeper {cluster.connect} "
            "--topic t --partition 0"
        )
    finally:
        cluster.close()
