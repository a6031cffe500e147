"""Controller failover, epoch fencing and automatic preferred-leader rebalance."""

from __future__ import annotations

import json
import time

import pytest

from tests.broker.wire import WireClient
from tests.cluster.conftest import Cluster, wait_for
from tests.cluster.test_replication import create_topic, partition_state

pytest.importorskip("confluent_kafka")


@pytest.fixture
def rebalancing_cluster(tmp_path, zk_module):
    c = Cluster(tmp_path, zk_module, 3, ["num.partitions=1", "leader.imbalance.check.interval.seconds=2"])
    try:
        yield c.start()
    finally:
        c.stop()


def zk_json(cluster, path: str):
    k = cluster.kazoo()
    try:
        return json.loads(k.get(path)[0])
    finally:
        k.stop()
        k.close()


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


def zk_json_or_none(cluster, path: str):
    try:
        return zk_json(cluster, path)
    except Exception:  # noqa: BLE001 (no controller at this instant)
        return None
