"""Transactions in a three-broker cluster: the coordinator is the leader of the id's
``__transaction_state`` partition and writes markers to the partition leaders on other
brokers (WriteTxnMarkers); when the coordinator's broker is killed the coordinator moves and
the transactional id keeps working, with committed data visible and aborted data not."""

from __future__ import annotations

import time

import pytest

from tests.cluster.conftest import wait_for
from tests.cluster.test_replication import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402


def read_committed(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 60
) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet_until = None
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None or m.error():
                if len(out) >= expect:
                    quiet_until = quiet_until or time.monotonic() + 2
                    if time.monotonic() > quiet_until:
                        break
                continue
            out.append(m.value())
        return out
    finally:
        c.close()


def txn_producer(bootstrap: str) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "tx-1", "transaction.timeout.ms": 60000}
    )


def test_transactions_across_brokers_and_coordinator_failover(cluster):
    create_topic(cluster, "txt", 3, 3, min_insync_replicas=2)
    p = txn_producer(cluster.bootstrap)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce("txt", f"c{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce("txt", f"a{i}".encode(), partition=i % 3)
    p.abort_transaction(60)
    got = read_committed(cluster.bootstrap, "txt", 3, 30)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(30))
    # the coordinator of tx-1 is killed: the id is served by the new leader of its partition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coord = admin.describe_transactions(["tx-1"]) if hasattr(admin, "describe_transactions") else None
    del coord
    k = cluster.kazoo()
    try:
        import json

        from kafkatool.broker.group.hashing import partition_for

        part = partition_for("tx-1", len(k.get_children("/brokers/topics/__transaction_state/partitions")))
        leader = json.loads(k.get(f"/brokers/topics/__transaction_state/partitions/{part}/state")[0])[
            "leader"
        ]
    finally:
        k.stop()
        k.close()
    cluster.brokers[leader].kill()
    t0 = time.monotonic()

    def again():
        q = txn_producer(cluster.bootstrap)
        try:
            q.init_transactions(15)
        except KafkaException:
            return None
        return q

    q = wait_for(again, 90, "the transactional id to be served again", step=0.5)
    print(f"transaction coordinator {leader} killed; tx-1 served again after {time.monotonic() - t0:.1f}s")
    q.begin_transaction()
    for i in range(30):
        q.produce("txt", f"d{i}".encode(), partition=i % 3)
    q.commit_transaction(60)
    got = read_committed(cluster.bootstrap, "txt", 3, 60)
    want = [f"c{i}".encode() for i in range(30)] + [f"d{i}".encode() for i in range(30)]
    assert sorted(got) == sorted(want)
