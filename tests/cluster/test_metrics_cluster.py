"""The Prometheus endpoint in a ZooKeeper-mode cluster (three ``serve`` processes): a follower
stopped while the leader takes writes leaves the ISR, which the leader's
UnderReplicatedPartitions and IsrShrinksPerSec show, and its return IsrExpandsPerSec; one
active controller across the brokers; replication bytes on both sides; a leader that becomes a
follower loses the topic's leader meters, and a broker the topic's replicas leave all of them."""

from __future__ import annotations

import os
import signal

from confluent_kafka import Producer

from tests.broker.test_metrics import scrape, value
from tests.cluster.conftest import Cluster, kafkatool, wait_for, zk_json
from tests.cluster.test_replication import create_topic, partition_state
from tests.ports import free_port


def test_a_stopped_follower_moves_under_replicated_and_isr_shrinks(tmp_path, zk_module):
    c = Cluster(
        tmp_path,
        zk_module,
        3,
        ["num.partitions=1", "offsets.topic.num.partitions=3", "replica.lag.time.max.ms=1500"],
    )
    urls = {}
    for i, b in c.brokers.items():
        port = free_port()
        b.extra.append(f"kafkatool.metrics.prometheus.listener=http://127.0.0.1:{port}")
        urls[i] = f"http://127.0.0.1:{port}/metrics"
    c.start()
    stopped = None
    try:
        create_topic(c, "mc", 1, 3)
        wait_for(lambda: len(partition_state(c, "mc", 0)["isr"]) == 3, 30, "an ISR of 3")
        st = partition_state(c, "mc", 0)
        leader = st["leader"]
        # a follower that is not the controller: stopping the controller would have the next one
        # take the follower out of the ISR itself (LeaderAndIsr), which no leader counts as a shrink
        controller = zk_json(c, "/controller")["brokerid"]
        follower = next(b for b in st["isr"] if b not in (leader, controller))

        def leader_says(name):
            return value(scrape(urls[leader]), name)

        wait_for(
            lambda: leader_says("kafka_server_replicamanager_underreplicatedpartitions") == 0, 20, "no URP"
        )
        shrinks = leader_says("kafka_server_replicamanager_isrshrinks_total")
        expands = leader_says("kafka_server_replicamanager_isrexpands_total")
        assert (
            sum(
                value(scrape(u), "kafka_controller_kafkacontroller_activecontrollercount")
                for u in urls.values()
            )
            == 1
        )
        stopped = c.brokers[follower].proc.pid
        os.kill(stopped, signal.SIGSTOP)
        p = Producer({"bootstrap.servers": c.brokers[leader].bootstrap, "acks": "1"})
        for i in range(50):
            p.produce("mc", b"x%d" % i, partition=0)
        assert p.flush(20) == 0
        wait_for(
            lambda: leader_says("kafka_server_replicamanager_underreplicatedpartitions") == 1,
            30,
            "the leader to count the partition under-replicated",
        )
        assert leader_says("kafka_server_replicamanager_isrshrinks_total") == shrinks + 1
        assert len(partition_state(c, "mc", 0)["isr"]) == 2
        os.kill(stopped, signal.SIGCONT)
        stopped = None
        wait_for(
            lambda: leader_says("kafka_server_replicamanager_underreplicatedpartitions") == 0,
            30,
            "the follower back in the ISR",
        )
        assert leader_says("kafka_server_replicamanager_isrexpands_total") == expands + 1
        on_leader, on_follower = scrape(urls[leader]), scrape(urls[follower])
        assert value(on_leader, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
        assert value(on_follower, "kafka_server_brokertopicmetrics_replicationbytesin_total") > 0
        assert value(on_follower, "kafka_server_brokertopicmetrics_messagesin_total", topic="mc") == 0
        assert value(on_leader, "kafka_server_brokertopicmetrics_messagesin_total", topic="mc") == 50

        # leadership moves away (the replicas reordered, then a preferred election): the old
        # leader's leader meters of mc close (updateLeaderAndFollowerMetrics ->
        # removeOldLeaderMetrics), its fetch meters stay
        def topic_series(url):
            return {k[0] for k, _ in scrape(url).items() if ("topic", "mc") in k[1]}

        assert "kafka_server_brokertopicmetrics_messagesin_total" in topic_series(urls[leader])
        assert "kafka_server_brokertopicmetrics_totalfetchrequests_total" in topic_series(urls[leader])
        others = [b for b in sorted(st["isr"]) if b != leader]
        _reassign(c, tmp_path, [*others, leader])
        r = kafkatool("leader-election", "--election-type", "preferred", "--topic", "mc", "--partition", 0,
                      "--bootstrap-server", c.bootstrap)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: partition_state(c, "mc", 0)["leader"] == others[0], 30, "the new preferred leader")
        leader_only = {
            f"kafka_server_brokertopicmetrics_{m}_total"
            for m in (
                "messagesin",
                "bytesin",
                "bytesrejected",
                "failedproducerequests",
                "totalproducerequests",
            )
        }
        wait_for(
            lambda: not topic_series(urls[leader]) & leader_only, 30, "the old leader's leader meters gone"
        )
        assert "kafka_server_brokertopicmetrics_totalfetchrequests_total" in topic_series(urls[leader])
        assert value(scrape(urls[leader]), "kafka_server_brokertopicmetrics_messagesin_total") >= 50
        # the replicas leave the old leader: every meter of mc goes there (maybeRemoveTopicMetrics)
        _reassign(c, tmp_path, others)
        wait_for(lambda: not topic_series(urls[leader]), 30, "the old leader's meters of mc gone")
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        c.discard()


def _reassign(c, tmp_path, replicas: list[int]) -> None:
    """mc-0's replicas become ``replicas`` (kafkatool reassign, AlterPartitionReassignments)."""
    import json

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "mc", "partition": 0, "replicas": replicas}]})
    )
    r = kafkatool("reassign", "execute", "--reassignment-json-file", plan, "--bootstrap-server", c.bootstrap)
    assert r.returncode == 0, r.stdout + r.stderr

    def done() -> bool:
        v = kafkatool(
            "reassign", "verify", "--reassignment-json-file", plan, "--bootstrap-server", c.bootstrap
        )
        return v.returncode == 0

    wait_for(done, 60, f"the reassignment to {replicas}", step=1.0)
