"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka >= 2.10) with
``group.protocol=consumer`` (members joining and leaving, regex subscription picking up a new
topic, static members, commits with member epochs, a broker restart reloading the group), and
kafka-python's classic group beside it on the same broker."""

from __future__ import annotations

import pytest

from tests.broker.conftest import BrokerProcess
from tests.broker.test_group_clients import create_topic, name, partitions_of, produce, split_ok, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
if tuple(int(x) for x in confluent_kafka.libversion()[0].split(".")[:2]) < (2, 10):
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)

OVERRIDES = [
    "num.partitions=1",
    "offsets.topic.num.partitions=5",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.heartbeat.interval.ms=300",
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
]


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", extra=OVERRIDES).start()
    yield b
    b.stop()


def consumer(bootstrap: str, group: str, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    conf.update(extra)
    return confluent_kafka.Consumer(conf)


def commit_on_revoke(c, parts):
    """What a careful application does when partitions move: commit what it consumed of them
    before acknowledging the revocation, so the next owner starts where this one stopped."""
    done = [tp for tp in c.position(parts) if tp.offset >= 0]
    if done:
        c.commit(offsets=done, asynchronous=False)


def drain(members, got):
    for i, c in enumerate(members):
        for m in c.consume(num_messages=200, timeout=0.05):
            assert m.error() is None, m.error()
            got.setdefault(i, []).append((m.topic(), m.partition(), m.offset()))


def test_members_join_leave_commit_and_classic_beside(kbroker):
    bs = kbroker.bootstrap
    topic, group = name("k8t"), name("k8g")
    create_topic(bs, topic, 6)
    produce(bs, topic, 300, 6)
    members, got = [], {}
    try:
        for _ in range(2):
            c = consumer(bs, group)
            c.subscribe([topic], on_revoke=commit_on_revoke)
            members.append(c)
        wait_for(
            lambda: split_ok([partitions_of(c) for c in members], 6),
            30,
            lambda: drain(members, got),
            "2 split",
        )
        # half the records read before a third member joins: the partitions it takes have progress
        wait_for(
            lambda: sum(len(v) for v in got.values()) >= 150, 30, lambda: drain(members, got), "half consumed"
        )
        c = consumer(bs, group)
        c.subscribe([topic], on_revoke=commit_on_revoke)
        members.append(c)
        wait_for(
            lambda: split_ok([partitions_of(c) for c in members], 6),
            30,
            lambda: drain(members, got),
            "3 split",
        )
        wait_for(
            lambda: sum(len(v) for v in got.values()) >= 300, 30, lambda: drain(members, got), "all consumed"
        )
        seen = [x for v in got.values() for x in v]
        # each record once: a moved partition's new owner starts at what its old owner committed
        # when it acknowledged the revocation (KIP-848: the coordinator assigns it only then), so
        # no partition was owned by two members at a time. Without that commit a new owner
        # re-reads from the earliest offset, as with Kafka (at-least-once).
        assert len(seen) == len(set(seen)) == 300
        # OffsetCommit v9 with the member epoch (Kafka checks the epoch, not who owns a partition)
        last = {}
        for _, p, off in seen:
            last[p] = max(last.get(p, -1), off + 1)
        offsets = [confluent_kafka.TopicPartition(topic, p, o) for p, o in sorted(last.items())]
        members[0].commit(offsets=offsets, asynchronous=False)
        members.pop().close()  # leaves (epoch -1): the two left share all six partitions
        wait_for(
            lambda: split_ok([partitions_of(c) for c in members], 6),
            30,
            lambda: drain(members, got),
            "2 again",
        )
        committed = members[0].committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(6)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == 300
    finally:
        for c in members:
            c.close()
    # kafka-python's classic group consumes the same topic beside it, on its own group
    kafka = pytest.importorskip("kafka")
    kc = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bs,
        group_id=name("classic"),
        auto_offset_reset="earliest",
        consumer_timeout_ms=8000,
    )
    try:
        assert sum(1 for _ in kc) == 300
    finally:
        kc.close()
    # a fresh consumer-protocol member resumes from the committed offsets: nothing left to read
    produce(bs, topic, 6, 6, prefix="late")
    c = consumer(bs, group)
    c.subscribe([topic])
    try:
        late = {}
        wait_for(lambda: len(late.get(0, [])) >= 6, 30, lambda: drain([c], late), "late records")
        assert sorted(off for _, _, off in late[0]) == [50] * 6
    finally:
        c.close()


def test_regex_subscription_and_static_member(kbroker):
    bs = kbroker.bootstrap
    prefix = name("k8rx")
    create_topic(bs, f"{prefix}-a", 2)
    produce(bs, f"{prefix}-a", 4, 2)
    group = name("k8rg")
    c = consumer(bs, group, **{"group.instance.id": "static-1"})
    c.subscribe([f"^{prefix}-.*"])
    got = {}
    try:
        wait_for(lambda: len(got.get(0, [])) >= 4, 30, lambda: drain([c], got), "regex topic a")
        create_topic(bs, f"{prefix}-b", 1)
        produce(bs, f"{prefix}-b", 3, 1)
        wait_for(
            lambda: sum(t.endswith("-b") for t, _, _ in got.get(0, [])) >= 3,
            40,
            lambda: drain([c], got),
            "topic b",
        )
        c.commit(asynchronous=False)
    finally:
        c.close()  # a static member leaves with epoch -2: its assignment waits for the instance
    c2 = consumer(bs, group, **{"group.instance.id": "static-1"})
    c2.subscribe([f"^{prefix}-.*"])
    try:
        wait_for(lambda: len(c2.assignment()) == 3, 30, lambda: drain([c2], {}), "static rejoin")
    finally:
        c2.close()


def test_restart_reloads_the_group(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic, group = name("k8r"), name("k8rg")
        create_topic(bs, topic, 2)
        produce(bs, topic, 20, 2)
        c = consumer(bs, group)
        c.subscribe([topic])
        got = {}
        try:
            wait_for(lambda: len(got.get(0, [])) >= 20, 30, lambda: drain([c], got), "first 20")
            c.commit(asynchronous=False)
        finally:
            c.close()
        b.stop()
        b.start()
        produce(bs, topic, 10, 2, prefix="after")
        c = consumer(bs, group)
        c.subscribe([topic])
        got = {}
        try:
            wait_for(lambda: len(got.get(0, [])) >= 10, 40, lambda: drain([c], got), "after restart")
            assert len(got[0]) == 10  # resumed from the reloaded commits
        finally:
            c.close()
    finally:
        b.stop()


def test_group_configs_describe_alter_and_apply(kbroker):
    """Kafka 4.0 group configs (GROUP config resources, KIP-848): DescribeConfigs of any group
    lists consumer.session.timeout.ms / consumer.heartbeat.interval.ms with the broker's values
    (DEFAULT_CONFIG) or the group's own (GROUP_CONFIG); IncrementalAlterConfigs validates them as
    GroupConfig.validate does; the coordinator uses the group's values
    (GroupMetadataManager.consumerGroupHeartbeatIntervalMs). librdkafka 0081
    do_test_DescribeConfigs_groups / do_test_IncrementalAlterConfigs."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    from kafkatool.protocol import generated as G
    from tests.broker.wire import WireClient

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    g = name("gcfg")

    def describe():
        res = ConfigResource(ResourceType.GROUP, g)
        return admin.describe_configs([res])[res].result(timeout=30)

    d = describe()
    assert set(d) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}
    assert d["consumer.heartbeat.interval.ms"].value == "300"
    assert d["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    def alter(*entries):
        res = ConfigResource(ResourceType.GROUP, g, incremental_configs=list(entries))
        return admin.incremental_alter_configs([res])[res]

    setting = ConfigEntry(
        "consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET
    )
    alter(setting).result(timeout=30)
    d = describe()
    assert d["consumer.heartbeat.interval.ms"].value == "6000"
    assert d["consumer.heartbeat.interval.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert d["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # below group.consumer.min.heartbeat.interval.ms, an unknown name, a session timeout not
    # above the heartbeat interval: INVALID_CONFIG, nothing changed
    for bad in (
        ConfigEntry("consumer.heartbeat.interval.ms", "10", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.no.such", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.session.timeout.ms", "abc", incremental_operation=AlterConfigOpType.SET),
    ):
        with pytest.raises(confluent_kafka.KafkaException) as ei:
            alter(bad).result(timeout=30)
        assert ei.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert describe()["consumer.heartbeat.interval.ms"].value == "6000"

    # the coordinator tells the group's members the group's interval
    create_topic(kbroker.bootstrap, g, 1)
    req = G.ConsumerGroupHeartbeatRequest(
        group_id=g,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[g],
        topic_partitions=[],
    )
    with WireClient(kbroker.bootstrap) as c:
        r = c.request(68, 1, req)
        assert r.error_code == 0 and r.heartbeat_interval_ms == 6000
        alter(
            ConfigEntry(
                "consumer.heartbeat.interval.ms", None, incremental_operation=AlterConfigOpType.DELETE
            )
        ).result(timeout=30)
        assert describe()["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        r2 = c.request(
            68,
            1,
            G.ConsumerGroupHeartbeatRequest(
                group_id=g, member_id=r.member_id, member_epoch=r.member_epoch, rebalance_timeout_ms=-1
            ),
        )
        assert r2.error_code == 0 and r2.heartbeat_interval_ms == 300
        # an empty group name is refused (the client library refuses to send one)
        from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

        d = c.request(
            32,
            4,
            G.DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(resource_type=32, resource_name="", configuration_keys=None)
                ],
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        assert d.results[0].error_code == confluent_kafka.KafkaError.INVALID_REQUEST
