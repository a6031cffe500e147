"""aiokafka's admin client against serve in ZooKeeper mode (one broker on a real ZooKeeper):
CreateTopics and CreatePartitions refused as Kafka 3.7's ZooKeeper-mode broker refuses them
(KafkaApis, ZkAdminManager, AdminZkClient), where standalone serve answers as KRaft
(test_aiokafka.py, tests/broker/test_admin.py). A ZooKeeper's start: behind -m slow (about 6 s)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

pytest.importorskip("aiokafka")
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic  # noqa: E402
from aiokafka.errors import InvalidPartitionsError  # noqa: E402

from tests.cluster.conftest import Cluster  # noqa: E402
from tests.zk.conftest import ZK_JAR, run_zookeeper  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not __import__("os").path.exists(ZK_JAR), reason="ZooKeeper not installed"),
]


@pytest.fixture(scope="module")
def zk_broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("zkmode")
    with run_zookeeper(base / "zk") as hostport:
        c = Cluster(base, hostport, 1, ["num.partitions=1"])
        try:
            yield c.start().brokers[1]
        finally:
            c.stop()


def test_create_topics_and_partitions_refusals_zk_mode(zk_broker):
    suffix = uuid.uuid4().hex[:8]
    base, ok = f"zk_coll_{suffix}", f"zk-ok-{suffix}"
    dotted = base.replace("_", ".")

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=zk_broker.bootstrap)
        await admin.start()
        try:
            made = await admin.create_topics([NewTopic(base, 2, 1)], timeout_ms=10000)
            dup = await admin.create_topics(
                [NewTopic(t, 1, 1) for t in ("zk-dup", ok, "zk-dup")], timeout_ms=10000
            )
            collides = await admin.create_topics([NewTopic(dotted, 1, 1)], timeout_ms=10000)
            refused = []
            for count in (2, 1):
                try:
                    await admin.create_partitions({base: NewPartitions(count)})
                except InvalidPartitionsError as e:
                    refused.append(str(e))
            return made, dup, collides, refused
        finally:
            await admin.close()

    made, dup, collides, refused = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert [tuple(t) for t in made.topic_errors] == [(base, 0, None)]
    # KafkaApis.handleCreateTopicsRequest: each entry of a name given twice refused in place
    assert [tuple(t) for t in dup.topic_errors] == [
        ("zk-dup", 42, "Found multiple entries for this topic."),
        (ok, 0, None),
        ("zk-dup", 42, "Found multiple entries for this topic."),
    ]
    # AdminZkClient.validateTopicCreate
    assert [tuple(t) for t in collides.topic_errors] == [
        (dotted, 17, f"Topic '{dotted}' collides with existing topics: {base}")
    ]
    # ZkAdminManager.createPartitions (aiokafka puts the broker's message behind its own words)
    assert refused == [
        f"[Error 37] InvalidPartitionsError: Could not create partitions for {base}: Topic already has 2 partitions.",
        f"[Error 37] InvalidPartitionsError: Could not create partitions for {base}: Topic currently has 2 "
        "partitions, which is higher than the requested 1.",
    ]
