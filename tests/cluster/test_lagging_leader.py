"""A new leader whose high watermark lags the start of its epoch (Partition.fetchOffsetForTimestamp).

After an election the new leader's high watermark is the one it had as a follower, and it
moves only once the ISR's followers fetch from it. Meanwhile Kafka answers a client's
ListOffsets for the latest offset, and a timestamp lookup that finds nothing below the high
watermark, with OFFSET_NOT_AVAILABLE (retriable), never with the stale high watermark: a
consumer resetting to "latest" would otherwise start below records already written (seen
as a flaky empty read after a reassignment, tests/cluster/test_reassign.py)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.broker.wire import WireClient
from tests.cluster.conftest import Cluster, fetch_link, wait_answered, wait_for, zk_json
from tests.cluster.test_divergence import log_bytes, produce
from tests.cluster.test_replication import partition_state

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture
def patient_cluster(tmp_path, zk_module):
    # a stopped follower stays in the ISR and registered for the whole test
    c = Cluster(
        tmp_path, zk_module, 3, ["zookeeper.session.timeout.ms=30000", "replica.lag.time.max.ms=60000"]
    )
    try:
        yield c.start()
    finally:
        for b in c.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                os.kill(b.proc.pid, signal.SIGCONT)
        c.discard()


def list_offsets(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    req = G.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
                ],
            )
        ],
    )
    with WireClient(bootstrap) as c:
        p = c.request(2, 7, req).topics[0].partitions[0]
    return p.error_code, p.offset


def test_a_new_leader_answers_offset_not_available_until_its_high_watermark_catches_up(patient_cluster):
    cluster = patient_cluster
    # replicas [A, B, C]: A leads; C, stopped below, is neither the controller (A's controlled
    # shutdown needs one) nor the leader the controller elects then (B, the next in order)
    controller = zk_json(cluster, "/controller")["brokerid"]
    c_id = next(i for i in cluster.brokers if i != controller)
    a_id, b_id = (i for i in cluster.brokers if i != c_id)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("lag", 1, replica_assignment=[[a_id, b_id, c_id]])])["lag"].result(40)
    wait_for(lambda: len(partition_state(cluster, "lag", 0)["isr"]) == 3, 20, "ISR of 3")
    produce(cluster.bootstrap, "lag", [b"base-%d" % i for i in range(100)], "all")
    a, b, c = (cluster.brokers[i] for i in (a_id, b_id, c_id))
    wait_for(lambda: log_bytes(b, "lag") == log_bytes(c, "lag") == log_bytes(a, "lag"), 20, "followers")
    link = fetch_link(c, a)
    os.kill(c.proc.pid, signal.SIGSTOP)
    wait_answered({c: link}, a)  # its parked fetch comes back empty before the writes below
    # acks=1: B copies them, the high watermark stays at 100 (C, in the ISR, does not fetch)
    produce(a.bootstrap, "lag", [b"more-%d" % i for i in range(20)], "1")
    wait_for(lambda: log_bytes(b, "lag") == log_bytes(a, "lag"), 20, "B to copy the new records")
    assert list_offsets(a.bootstrap, "lag", -1) == (0, 100)
    # A's controlled shutdown makes B the leader: its epoch starts at 120, its high watermark 100
    a.stop(timeout=60)
    wait_for(lambda: partition_state(cluster, "lag", 0)["leader"] == b_id, 30, "B to lead")
    wait_for(
        lambda: list_offsets(b.bootstrap, "lag", -1)[0] == ErrorCode.OFFSET_NOT_AVAILABLE,
        10,
        "B to know it leads",
    )
    assert list_offsets(b.bootstrap, "lag", 0) == (0, 0)  # found below the high watermark
    assert list_offsets(b.bootstrap, "lag", int(time.time() * 1000) + 60_000) == (
        ErrorCode.OFFSET_NOT_AVAILABLE,
        -1,
    )
    assert list_offsets(b.bootstrap, "lag", -2) == (0, 0)  # the earliest offset never waits
    assert list_offsets(b.bootstrap, "lag", -1)[0] == ErrorCode.OFFSET_NOT_AVAILABLE
    # C fetches from B again: the high watermark reaches the epoch's start, the answer is 120
    os.kill(c.proc.pid, signal.SIGCONT)
    wait_for(lambda: list_offsets(b.bootstrap, "lag", -1) == (0, 120), 30, "B's high watermark to catch up")
