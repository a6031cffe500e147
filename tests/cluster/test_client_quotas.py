"""Client quotas in a ZooKeeper-mode cluster: AlterClientQuotas at one broker writes
/config/clients/<c> with its change notification, and every broker throttles by it
(ConfigHandler), as a Kafka 3.7 ZooKeeper-mode cluster does."""

from __future__ import annotations

import time

import pytest

from tests.cluster.conftest import kafkatool, zk_json

ck = pytest.importorskip("confluent_kafka")


def test_a_quota_altered_at_one_broker_throttles_at_every_broker(shared_cluster):
    cluster = shared_cluster
    b1, b2, b3 = (cluster.brokers[i] for i in (1, 2, 3))
    r = kafkatool("configs", "alter", "--entity-type", "clients", "--entity-name", "zk-slow",
                  "--add-config", "producer_byte_rate=20000", "--bootstrap-server", b1.bootstrap)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert zk_json(cluster, "/config/clients/zk-slow") == {
        "version": 1,
        "config": {"producer_byte_rate": "20000"},
    }
    r = kafkatool("configs", "describe", "--entity-type", "clients", "--entity-name", "zk-slow",
                  "--bootstrap-server", b2.bootstrap)  # fmt: skip
    assert r.stdout.splitlines() == ["Quota configs for client-id 'zk-slow' are producer_byte_rate=20000.0"]
    # a partition led by each broker (explicit assignment), the producer writing to each: every
    # broker, not only the one that took the AlterClientQuotas, throttles by the notification
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b1.bootstrap})
    topic = NewTopic("zkq", 3, replica_assignment=[[1], [2], [3]])
    for f in admin.create_topics([topic]).values():
        f.result(15)
    throttled: set[int] = set()
    p = ck.Producer({"bootstrap.servers": b3.bootstrap, "client.id": "zk-slow", "linger.ms": 2,
                     "batch.size": 16384, "throttle_cb": lambda ev: throttled.add(ev.broker_id)})  # fmt: skip
    deadline = time.monotonic() + 30
    while throttled != {1, 2, 3} and time.monotonic() < deadline:
        for part in {0, 1, 2} - {b - 1 for b in throttled}:
            try:
                p.produce("zkq", b"z" * 4096, partition=part)
            except BufferError:
                break
        p.poll(0.01)
    p.purge()
    p.flush(2)
    assert throttled == {1, 2, 3}, throttled
