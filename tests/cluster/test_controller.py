"""Controller failover, epoch fencing and automatic preferred-leader rebalance."""

from __future__ import annotations

import time

import pytest

from tests.broker.wire import WireClient
from tests.cluster.conftest import SHORT_ZK_SESSION, Cluster, wait_for, zk_json
from tests.cluster.test_replication import create_topic, partition_state

pytest.importorskip("confluent_kafka")


@pytest.fixture
def rebalancing_cluster(tmp_path, zk_module):
    # the controller is killed: its session expires in 3 s, not 6 (SHORT_ZK_SESSION)
    c = Cluster(
        tmp_path,
        zk_module,
        3,
        ["num.partitions=1", "leader.imbalance.check.interval.seconds=2", *SHORT_ZK_SESSION.args],
    )
    try:
        yield c.start()
    finally:
        c.discard()


def test_controller_failover_fencing_and_rebalance(rebalancing_cluster):
    from kafkatool.protocol.generated import LeaderAndIsrRequest, UpdateMetadataRequest

    cluster = rebalancing_cluster
    create_topic(cluster, "cf", 3, 3)
    before = {
        p: wait_for(
            lambda p=p: (s := partition_state(cluster, "cf", p)) and len(s["isr"]) == 3 and s, 20, "ISR"
        )
        for p in range(3)
    }
    assignment = zk_json(cluster, "/brokers/topics/cf")["partitions"]
    assert all(before[p]["leader"] == assignment[str(p)][0] for p in range(3))  # preferred leaders
    old = zk_json(cluster, "/controller")["brokerid"]
    old_epoch = zk_json(cluster, "/controller_epoch")
    t0 = time.monotonic()
    cluster.brokers[old].kill()
    new = wait_for(
        lambda: (c := zk_json_or_none(cluster, "/controller")) and c["brokerid"] != old and c,
        30,
        "a new controller",
    )
    assert zk_json(cluster, "/controller_epoch") == old_epoch + 1
    after = {
        p: wait_for(
            lambda p=p: (s := partition_state(cluster, "cf", p))["leader"] != old and s, 30, "leaders"
        )
        for p in range(3)
    }
    print(
        f"controller {old} killed; broker {new['brokerid']} controls at epoch {old_epoch + 1} after {time.monotonic() - t0:.1f}s"
    )
    for p in range(3):
        if before[p]["leader"] != old:
            assert after[p]["leader"] == before[p]["leader"], (
                p,
                before[p],
                after[p],
            )  # untouched leaders stay
    # a request of the dead controller's epoch is fenced by every broker
    survivor = cluster.brokers[new["brokerid"]]
    with WireClient(survivor.bootstrap) as c:
        r = c.request(
            4,
            4,
            LeaderAndIsrRequest(
                controller_id=old,
                controller_epoch=old_epoch,
                broker_epoch=-1,
                topic_states=[],
                live_leaders=[],
            ),
        )
        assert r.error_code == 11  # STALE_CONTROLLER_EPOCH
        r = c.request(
            6,
            6,
            UpdateMetadataRequest(
                controller_id=old,
                controller_epoch=old_epoch,
                broker_epoch=-1,
                topic_states=[],
                live_brokers=[],
            ),
        )
        assert r.error_code == 11
    # the killed broker returns; the automatic rebalance gives it back its preferred leaderships
    cluster.brokers[old].start(timeout=60)
    wait_for(
        lambda: all(partition_state(cluster, "cf", p)["leader"] == assignment[str(p)][0] for p in range(3)),
        45,
        "preferred leaders again (auto.leader.rebalance.enable)",
        step=0.5,
    )
    # a topic written by another tool (kafka-topics.sh --zookeeper writes only /brokers/topics/T)
    k = cluster.kazoo()
    try:
        k.create("/brokers/topics/from-zk", b'{"version":2,"partitions":{"0":[2,3,1],"1":[3,1,2]}}')
    finally:
        k.stop()
        k.close()
    for p, head in ((0, 2), (1, 3)):
        st = wait_for(
            lambda p=p: zk_json_or_none(cluster, f"/brokers/topics/from-zk/partitions/{p}/state"), 20, "state"
        )
        assert st["leader"] == head and sorted(st["isr"]) == [1, 2, 3]
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    md = wait_for(
        lambda: (m := admin.list_topics(timeout=10)) and "from-zk" in m.topics and m, 20, "metadata"
    )
    assert {p.id: p.leader for p in md.topics["from-zk"].partitions.values()} == {0: 2, 1: 3}
    # controlled shutdown: SIGTERM moves leadership away before the process exits
    leader = partition_state(cluster, "cf", 0)["leader"]
    cluster.brokers[leader].stop(timeout=60)
    assert "controlled shutdown succeeded" in cluster.brokers[leader].log_text()
    st = partition_state(cluster, "cf", 0)
    assert st["leader"] not in (leader, -1) and leader not in st["isr"], st


def zk_json_or_none(cluster, path: str):
    try:
        return zk_json(cluster, path)
    except Exception:  # noqa: BLE001 (no controller at this instant)
        return None


def test_fetcher_index_is_kafkas():
    from kafkatool.broker.cluster.fetcher import fetcher_index

    # Java: Utils.abs(31 * "test".hashCode() + 0) % 3 == 1; one fetcher takes everything
    assert fetcher_index("test", 0, 3) == 1
    assert fetcher_index("test", 7, 1) == 0


@SHORT_ZK_SESSION
def test_topic_deletion_waits_for_an_offline_replica(cluster):
    """TopicDeletionManager: every replica is deleted before the topic's znodes go; a replica on
    an offline broker halts the deletion, which resumes when the broker is back (else the
    broker would keep the topic's data for ever, and a new topic of the same name would
    meet it)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "gone", 2, 3)
    for p in range(2):
        wait_for(lambda p=p: len(partition_state(cluster, "gone", p)["isr"]) == 3, 20, "ISR of 3")
    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        prod.produce("gone", b"v%d" % i, partition=i % 2)
    assert prod.flush(30) == 0
    k = cluster.kazoo()
    try:
        victim = next(b for b in sorted(cluster.brokers) if b != zk_json(cluster, "/controller")["brokerid"])
        cluster.brokers[victim].kill()
        wait_for(lambda: str(victim) not in k.get_children("/brokers/ids"), 20, "the broker's session to end")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.delete_topics(["gone"], request_timeout=15)["gone"].result(30)

        def partition_dirs(b) -> list[str]:
            return sorted(
                d.name for d in cluster.brokers[b].data_dir.glob("gone-*") if not d.name.endswith("-delete")
            )

        live = [b for b in cluster.brokers if b != victim]
        wait_for(lambda: all(partition_dirs(b) == [] for b in live), 20, "the live replicas to be deleted")
        time.sleep(2.0)
        # halted: the offline broker still has its replicas, so the topic is not gone yet
        assert k.exists("/admin/delete_topics/gone") and k.exists("/brokers/topics/gone")
        assert partition_dirs(victim) == ["gone-0", "gone-1"]
        cluster.brokers[victim].start(timeout=60)
        wait_for(lambda: partition_dirs(victim) == [], 30, "the returning broker to delete its replicas")
        wait_for(
            lambda: not k.exists("/brokers/topics/gone") and not k.exists("/admin/delete_topics/gone"),
            30,
            "the deletion to complete",
        )
    finally:
        k.stop()
        k.close()


def test_create_partitions_answers_once_the_new_partitions_have_leaders(shared_cluster):
    """DelayedCreatePartitions: the controller answers CreatePartitions (timeout > 0) once every
    new partition has a live leader in its metadata, so a client's next Metadata has them."""
    cluster = shared_cluster
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated.create_partitions_request import CreatePartitionsTopic
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    create_topic(cluster, "grow", 1, 3)
    ctl = zk_json(cluster, "/controller")["brokerid"]
    with WireClient(cluster.brokers[ctl].bootstrap) as c:
        req = G.CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name="grow", count=4, assignments=None)],
            timeout_ms=15000,
            validate_only=False,
        )
        assert c.request(37, 3, req).results[0].error_code == 0
        md = c.request(3, 9, G.MetadataRequest(topics=[MetadataRequestTopic(name="grow")]))
    [t] = md.topics
    assert t.error_code == 0
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2, 3]
    assert all(p.error_code == 0 and p.leader_id in cluster.brokers for p in t.partitions)
