"""Consumer groups in a three-broker cluster: the coordinator lives on the leader of the
group's ``__consumer_offsets`` partition (replication factor 3), and when that broker is
killed the coordinator moves with the leadership and the committed offsets survive."""

from __future__ import annotations

import time

import pytest

from tests.cluster.conftest import SHORT_ZK_SESSION, wait_for
from tests.cluster.test_replication import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402


def committed(bootstrap: str, group: str, tps: list[TopicPartition], timeout: float = 5) -> list[int] | None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed(tps, timeout=timeout)]
    except KafkaException:
        return None
    finally:
        c.close()


@SHORT_ZK_SESSION
def test_committed_offsets_survive_the_coordinator_being_killed(cluster):
    create_topic(cluster, "grouped", 3, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(300):
        p.produce("grouped", str(i).encode(), partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "grp",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["grouped"])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 300 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    assert seen == 300
    c.commit(asynchronous=False)
    c.close()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    desc = admin.describe_consumer_groups(["grp"])["grp"].result(timeout=20)
    coordinator = desc.coordinator.id
    tps = [TopicPartition("grouped", i) for i in range(3)]
    assert committed(cluster.bootstrap, "grp", tps) == [100, 100, 100]
    cluster.brokers[coordinator].kill()
    t0 = time.monotonic()
    # asked again every 2 s at most: an ask of the dead coordinator waits out its timeout
    got = wait_for(
        lambda: committed(cluster.bootstrap, "grp", tps, timeout=2) == [100, 100, 100],
        60,
        "offsets from the new coordinator",
    )
    print(f"coordinator {coordinator} killed; offsets served again after {time.monotonic() - t0:.1f}s")
    assert got
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept: the handle must outlive the call
    desc = admin.describe_consumer_groups(["grp"])["grp"].result(timeout=20)
    assert desc.coordinator.id != coordinator
