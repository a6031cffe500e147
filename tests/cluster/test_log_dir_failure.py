"""A leader whose log dir fills up (ENOSPC) in a three-broker ZooKeeper-mode cluster: the dir
goes offline, the broker writes /log_dir_event_notification/log_dir_event_N, the controller
sends it LeaderAndIsr for its replicas, marks the one answered KAFKA_STORAGE_ERROR offline,
elects a new leader from the ISR and deletes the notification (KafkaController's
LogDirEventNotification handling); an idempotent acks=all producer goes on at the new leader
and every acknowledged record is there, once, in order.  The leader's dir is a small tmpfs in
the broker's own mount namespace (``unshare -rm``, as tests/broker/test_log_dir_failure.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.test_log_dir_failure import _mount_prefix, can_mount  # noqa: F401 (a fixture)
from tests.broker.wire import WireClient
from tests.cluster.conftest import Cluster, wait_for, zk_json
from tests.cluster.test_replication import partition_state, read_all

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

VALUE = 64 * 1024
#: 6.4 MiB through a 4 MiB tmpfs
COUNT = 100


@pytest.fixture
def cluster_with_small_disk(tmp_path, zk_module, can_mount):  # noqa: F811
    c = Cluster(tmp_path, zk_module, 3, ["num.partitions=1", "log.roll.jitter.ms=0"])
    # the broker that will lead: its second dir, "afull" (picked first for a new partition:
    # the fewest partitions, then the name), is a tmpfs
    leader_id = 3
    b = c.brokers[leader_id]
    full = b.data_dir.with_name("afull")
    full.mkdir(parents=True)
    b.extra.append(f"log.dirs={b.data_dir},{full}")
    b.prefix = _mount_prefix(full)
    try:
        c.start()
        yield c, leader_id, full
    finally:
        c.discard()


def _metadata(bootstrap: str, topic: str):
    with WireClient(bootstrap) as w:
        r = w.request(
            3,
            12,
            G.MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
        )
    return r.topics[0].partitions[0]


def _notified_and_shown_offline(cluster, topic: str, broker_id: int, leader_ok, seconds: float) -> None:
    """The controller deleted the log-dir event notification, and every broker's Metadata for
    ``topic``'s partition 0 shows a leader ``leader_ok`` accepts and ``broker_id``'s replica
    offline."""
    k = cluster.kazoo()
    try:
        wait_for(
            lambda: k.get_children("/log_dir_event_notification") == [], 20, "the notification's deletion"
        )
    finally:
        k.stop()
        k.close()
    for other in cluster.brokers.values():
        wait_for(
            lambda other=other: (
                leader_ok((m := _metadata(other.bootstrap, topic)).leader_id)
                and m.offline_replicas == [broker_id]
            ),
            seconds,
            f"broker {other.bootstrap} to show {broker_id}'s replica of {topic} offline",
        )


def test_a_full_disk_under_the_leader_moves_leadership_and_keeps_acked_records(cluster_with_small_disk):
    cluster, leader_id, full = cluster_with_small_disk
    others = [i for i in cluster.brokers if i != leader_id]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("fill", 1, replica_assignment=[[leader_id, *others]])])["fill"].result(40)
    wait_for(lambda: len(partition_state(cluster, "fill", 0)["isr"]) == 3, 30, "ISR of 3")
    assert partition_state(cluster, "fill", 0)["leader"] == leader_id
    # the tmpfs is seen through the broker's mount namespace
    inside = Path(f"/proc/{cluster.brokers[leader_id].proc.pid}/root") / full.relative_to("/")
    assert (inside / "fill-0").is_dir()

    acked: list[int] = []
    failed: list[str] = []

    def done(err, msg):
        if err is None:
            acked.append(int(msg.key()))
        else:
            failed.append(str(err))

    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
        }
    )
    for i in range(COUNT):
        p.produce("fill", b"%d" % i + b"v" * VALUE, key=b"%d" % i, partition=0, on_delivery=done)
        p.poll(0)
    assert p.flush(150) == 0
    assert failed == [] and sorted(acked) == list(range(COUNT)), (failed, len(acked))

    st = partition_state(cluster, "fill", 0)
    assert st["leader"] in others and leader_id not in st["isr"], st
    b = cluster.brokers[leader_id]
    text = b.log_text()
    assert "No space left on device" in text and f"log dir {full} is offline" in text, text[-3000:]
    assert b.alive()  # its other dir serves on
    # the controller consumed the notification; every broker's metadata: the new leader, the
    # failed replica offline
    _notified_and_shown_offline(cluster, "fill", leader_id, lambda leader: leader == st["leader"], 20)
    assert zk_json(cluster, f"/brokers/ids/{leader_id}")["endpoints"]  # still registered
    got = read_all(cluster.bootstrap, "fill", timeout=60)
    values = [int(v[: v.index(b"v")]) for _, v in got]
    assert values == list(range(COUNT)), values[:20]
    assert [o for o, _ in got] == list(range(COUNT))


@pytest.fixture
def cluster_with_two_dirs(tmp_path, zk_module):
    c = Cluster(tmp_path, zk_module, 3, ["num.partitions=1"])
    broker_id = 3
    b = c.brokers[broker_id]
    second = b.data_dir.with_name("adir")  # picked first for a new partition (the name)
    second.mkdir(parents=True)
    b.extra.append(f"log.dirs={b.data_dir},{second}")
    try:
        c.start()
        yield c, broker_id, second
    finally:
        c.discard()


def test_a_dir_offline_at_start_up_is_told_to_the_controller(cluster_with_two_dirs):
    """A broker restarted with one of its two dirs unreadable (meta.properties cannot be read:
    MetaPropertiesEnsemble's error dirs) handles it as any failed dir once it starts (Kafka's
    LogManager puts it in the LogDirFailureChannel, ReplicaManager's LogDirFailureHandler
    propagates it): it writes /log_dir_event_notification, the controller handles it for that
    broker and deletes it, the replica on that dir is offline on every broker's metadata and out
    of the ISR, the partition is led elsewhere and keeps its records; the other dir's replica
    is back in the ISR."""
    cluster, broker_id, second = cluster_with_two_dirs
    others = [i for i in cluster.brokers if i != broker_id]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fs = admin.create_topics([NewTopic("lost", 1, replica_assignment=[[broker_id, *others]])])
    fs["lost"].result(40)
    wait_for(lambda: len(partition_state(cluster, "lost", 0)["isr"]) == 3, 30, "ISR of 3")
    assert partition_state(cluster, "lost", 0)["leader"] == broker_id
    b = cluster.brokers[broker_id]
    assert (second / "lost-0").is_dir()
    fs = admin.create_topics([NewTopic("kept", 1, replica_assignment=[[*others, broker_id]])])
    fs["kept"].result(40)
    wait_for(lambda: len(partition_state(cluster, "kept", 0)["isr"]) == 3, 30, "ISR of 3")
    assert (b.data_dir / "kept-0").is_dir()
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("lost", b"%d" % i, partition=0)
    assert p.flush(60) == 0

    assert b.stop(timeout=60) == 0
    meta = second / "meta.properties"
    meta.unlink()
    meta.mkdir()
    b.start(timeout=40)
    text = b.log_text()
    assert f"Error while reading meta.properties file {meta}" in text, text[-3000:]
    assert f"Stopping serving replicas in dir {second}" in text, text[-3000:]

    def handled() -> bool:
        return any(
            f"handling log directory failure for brokers [{broker_id}]" in x.log_text()
            for x in cluster.brokers.values()
        )

    wait_for(handled, 30, "the controller to handle the broker's log dir event")
    _notified_and_shown_offline(cluster, "lost", broker_id, lambda leader: leader in others, 30)
    st = partition_state(cluster, "lost", 0)
    assert st["leader"] in others and broker_id not in st["isr"], st
    # the replica on the readable dir catches up and is in the ISR again
    wait_for(lambda: broker_id in partition_state(cluster, "kept", 0)["isr"], 30, "kept's ISR to hold it")
    assert _metadata(cluster.brokers[others[0]].bootstrap, "kept").offline_replicas == []
    got = read_all(cluster.bootstrap, "lost", timeout=60)
    assert [v for _, v in got] == [b"%d" % i for i in range(10)]
    assert b.alive() and "Traceback" not in b.log_text()
