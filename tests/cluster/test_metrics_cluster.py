"""The Prometheus endpoint in a ZooKeeper-mode cluster (three ``serve`` processes): a follower
stopped while the leader takes writes leaves the ISR, which the leader's
UnderReplicatedPartitions and IsrShrinksPerSec show, and its return IsrExpandsPerSec; one
active controller across the brokers; replication bytes on both sides."""

from __future__ import annotations

import os
import signal

from confluent_kafka import Producer

from tests.broker.test_metrics import scrape, value
from tests.cluster.conftest import Cluster, wait_for, zk_json
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
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        c.stop()
