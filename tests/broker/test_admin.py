"""Admin APIs over the wire: topics, partitions, configs (with sources and synonyms), cluster."""

from __future__ import annotations

import struct

from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.create_partitions_request import CreatePartitionsTopic
from kafkatool.protocol.generated.create_topics_request import CreatableTopic, CreatableTopicConfig
from kafkatool.protocol.generated.delete_records_request import DeleteRecordsPartition, DeleteRecordsTopic
from kafkatool.protocol.generated.delete_topics_request import DeleteTopicState
from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.test_protocol import batch, fetch, produce
from tests.broker.wire import WireClient


def create(c, name, partitions=1, rf=1, configs=None, validate_only=False, version=7):
    req = G.CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=1000,
        validate_only=validate_only,
    )
    return c.request(19, version, req).topics[0]


def describe(c, name, keys=None, rtype=2, version=4):
    req = G.DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=version >= 1,
        include_documentation=version >= 3,
    )
    res = c.request(32, version, req).results[0]
    return res, {e.name: e for e in res.configs}


def test_create_topics_errors_and_echo(broker):
    with WireClient(broker.bootstrap) as c:
        r = create(c, "adm-1", 3, configs={"retention.ms": "1000"})
        assert r.error_code == 0 and r.num_partitions == 3 and r.replication_factor == 1 and r.topic_id.int
        assert {e.name: e.value for e in r.configs}["retention.ms"] == "1000"
        assert create(c, "adm-1").error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert create(c, "adm-2", 0).error_code == ErrorCode.INVALID_PARTITIONS
        assert create(c, "adm-2", 1, rf=3).error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert create(c, "adm-2", configs={"cleanup.policy": "shred"}).error_code == ErrorCode.INVALID_CONFIG
        assert create(c, "adm-2", configs={"no.such.config": "1"}).error_code == ErrorCode.INVALID_CONFIG
        assert create(c, "a" * 250).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        # Topic.validate checks every character: a trailing newline too (a regex's $ lets it pass)
        assert create(c, "adm-2\n").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert create(c, "adm-2", validate_only=True).error_code == 0
        assert create(c, "adm-3", -1, rf=-1).num_partitions == 1  # broker defaults (num.partitions=1)
        md = c.request(
            3,
            12,
            G.MetadataRequest(topics=[MetadataRequestTopic(name="adm-2")], allow_auto_topic_creation=False),
        )
        assert (
            md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )  # validate_only created nothing
        assert create(c, "adm-0", 2, version=0).error_code == 0


def test_describe_configs_sources_types_synonyms(broker):
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-cfg", 1, configs={"retention.ms": "5000"})
        res, cfg = describe(c, "adm-cfg")
        assert res.error_code == 0
        # a topic the metadata does not know: ConfigHelper answers the code alone, no message
        missing, _ = describe(c, "adm-cfg-none")
        assert (missing.error_code, missing.error_message, missing.configs) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            None,
            [],
        )
        r = cfg["retention.ms"]
        assert (r.value, r.config_source, r.config_type) == ("5000", 1, 5)
        # ConfigHelper.configSynonyms of log.retention.ms: only log.retention.hours has a value
        # (Kafka's default 168) and what precedes the first log.retention.ms is dropped
        assert [(s.name, s.value, s.source) for s in r.synonyms] == [("retention.ms", "5000", 1)]
        s = cfg["segment.bytes"]
        assert (s.value, s.config_source, s.config_type) == ("1073741824", 5, 3)
        assert [(y.name, y.value, y.source) for y in s.synonyms] == [("log.segment.bytes", "1073741824", 5)]
        assert cfg["cleanup.policy"].config_type == 7 and cfg["cleanup.policy"].value == "delete"
        # Kafka 3.7's LogConfig.configNames: TopicConfig's 29 (with the deprecated
        # message.format.version, message.timestamp.difference.max.ms and
        # message.downconversion.enable) and the two throttled-replica lists
        assert len(cfg) == 31
        _, only = describe(c, "adm-cfg", keys=["max.message.bytes"], version=0)
        assert list(only) == ["max.message.bytes"]  # v0's is_default: test_describe_configs_v0_bytes
        res, _ = describe(c, "nope-cfg")
        assert res.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        res, b = describe(c, "1", rtype=4)
        assert res.error_code == 0
        assert b["num.partitions"].value == "1" and b["num.partitions"].config_source == 4  # from --override
        assert b["log.segment.bytes"].config_source == 5 and b["log.segment.bytes"].documentation


def _v0_entry(resource_type: int, resource: str, name: str, value: str, read_only: bool) -> bytes:
    """A DescribeConfigs v0 response body with one entry, as Kafka's broker writes it (the
    schema's field order; is_default false: Kafka 3.x never sets it, see admin._entry)."""

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    return (
        struct.pack(">ii", 0, 1)  # throttle_time_ms, one result
        + struct.pack(">hhb", 0, -1, resource_type)  # error_code, error_message null, resource_type
        + s(resource)
        + struct.pack(">i", 1)
        + s(name)
        + s(value)
        + struct.pack(">???", read_only, False, False)  # read_only, is_default, is_sensitive
    )


def test_describe_configs_v0_bytes(broker):
    """DescribeConfigs v0 answers byte for byte as Kafka 3.x's broker: is_default is false for a
    topic override, a topic default, a static broker setting and a broker default alike."""
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-v0", 1, configs={"retention.ms": "5000"})
        cases = [
            (2, "adm-v0", "retention.ms", "5000", False),  # topic override
            (2, "adm-v0", "max.message.bytes", "1048588", False),  # topic default
            (4, "1", "num.partitions", "1", True),  # static (server.properties / --override)
            (4, "1", "auto.create.topics.enable", "true", True),  # broker default
        ]
        for rtype, name, key, value, read_only in cases:
            req = G.DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=[key])
                ]
            )
            corr = c.send(32, 0, req)
            frame = c.recv_frame()
            assert frame[:4] == struct.pack(">i", corr)
            assert frame[4:] == _v0_entry(rtype, name, key, value, read_only), key


def test_describe_configs_v0_through_kafka_python(broker):
    """kafka-python pinned to 0.11's versions asks DescribeConfigs v0 and derives the source from
    is_default and read_only: from Kafka 3.x's answer every topic config reads as set on the topic
    and every read-only broker config as static; so it does from ours."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(0, 11), request_timeout_ms=10000)
    try:
        a.create_topics([NewTopic("adm-v0-kp", 1, 1, topic_configs={"retention.ms": "5000"})])
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-v0-kp")], config_filter="all")
        topic = got["topic"]["adm-v0-kp"]
        assert all("is_default" in e and "synonyms" not in e for e in topic.values())  # v0
        assert topic["retention.ms"]["value"] == "5000"
        assert {e["is_default"] for e in topic.values()} == {False}
        assert {e["config_source"] for e in topic.values()} == {"DYNAMIC_TOPIC_CONFIG"}
        got = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
        b = got["broker"]["1"]
        assert b["num.partitions"]["value"] == "1" and b["num.partitions"]["read_only"]
        assert {e["is_default"] for e in b.values()} == {False}
        assert b["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
    finally:
        a.close()


def test_incremental_alter_configs(broker):
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-inc", 1, configs={"retention.ms": "5000"})

        def alter(*ops, validate_only=False):
            req = G.IncrementalAlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        resource_type=2,
                        resource_name="adm-inc",
                        configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
                    )
                ],
                validate_only=validate_only,
            )
            return c.request(44, 1, req).responses[0]

        assert alter(("max.message.bytes", 0, "2000")).error_code == 0
        assert alter(("retention.ms", 1, None)).error_code == 0
        assert alter(("cleanup.policy", 2, "compact")).error_code == 0
        _, cfg = describe(c, "adm-inc")
        assert cfg["max.message.bytes"].value == "2000"
        assert cfg["retention.ms"].config_source == 5
        assert cfg["cleanup.policy"].value == "delete,compact"
        assert alter(("cleanup.policy", 3, "delete")).error_code == 0
        assert describe(c, "adm-inc")[1]["cleanup.policy"].value == "compact"
        assert alter(("segment.bytes", 0, "nope")).error_code == ErrorCode.INVALID_CONFIG
        assert alter(("segment.bytes", 2, "5")).error_code == ErrorCode.INVALID_CONFIG  # not a list
        # the new max.message.bytes applies to produce at once
        assert produce(c, "adm-inc", batch(1, size=5000)).error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_topic_alter_refusals_standalone(broker):
    """Standalone answers as KRaft's controller does: a refused value's message as it is (no
    ZkAdminManager prefix); ConfigAdminManager.preprocess's null and duplicate checks before
    anything, for AlterConfigs too; the default topic resource and a missing topic refused."""
    from kafkatool.protocol.generated import alter_configs_request as AC

    def legacy(c, name, configs):
        res = AC.AlterConfigsResource(
            resource_type=2,
            resource_name=name,
            configs=[AC.AlterableConfig(name=n, value=v) for n, v in configs],
        )
        r = c.request(33, 2, G.AlterConfigsRequest(resources=[res], validate_only=False)).responses[0]
        return r.error_code, r.error_message

    def inc(c, name, *ops):
        res = AlterConfigsResource(
            resource_type=2,
            resource_name=name,
            configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
        )
        r = c.request(44, 1, G.IncrementalAlterConfigsRequest(resources=[res], validate_only=False))
        return r.responses[0].error_code, r.responses[0].error_message

    with WireClient(broker.bootstrap) as c:
        create(c, "adm-refuse", 1, configs={"retention.ms": "5000"})
        assert legacy(c, "adm-refuse", [("retention.ms", "abc")]) == (
            ErrorCode.INVALID_CONFIG,
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        )
        assert inc(c, "adm-refuse", ("segment.bytes", 2, "5")) == (
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key segment.bytes because its type is not LIST.",
        )
        null = (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")
        assert legacy(c, "adm-refuse", [("retention.ms", None)]) == null
        assert inc(c, "adm-refuse", ("retention.ms", 0, None)) == null
        assert inc(c, "adm-refuse", ("retention.ms", 1, None), ("retention.ms", 0, "1")) == (
            ErrorCode.INVALID_REQUEST,
            "Error due to duplicate config keys",
        )
        assert legacy(c, "", [("retention.ms", "1")]) == (
            ErrorCode.INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )
        assert inc(c, "adm-none", ("retention.ms", 0, "1")) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'adm-none' does not exist.",
        )
        # KRaft's ConfigurationControlManager applies the operations, then its validator (the
        # default resource, Topic.validate, LogConfig.validate), then the existence checker: on a
        # missing topic an operation's or a value's refusal is answered, not the missing topic
        assert inc(c, "adm-none", ("no.such.config", 2, "a")) == (
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key no.such.config because its type is not LIST.",
        )
        assert inc(c, "adm-none", ("retention.ms", 0, "abc")) == (
            ErrorCode.INVALID_CONFIG,
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        )
        assert legacy(c, "adm-none", [("retention.ms", "abc")]) == (
            ErrorCode.INVALID_CONFIG,
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        )
        assert inc(c, "adm-none", ("no.such.config", 0, "1")) == (
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: no.such.config",
        )
        assert inc(c, "adm-none", ("cleanup.policy", 2, "compact")) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'adm-none' does not exist.",
        )
        assert inc(c, "", ("segment.bytes", 2, "5")) == (
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key segment.bytes because its type is not LIST.",
        )
        assert inc(c, "", ("retention.ms", 0, "1")) == (
            ErrorCode.INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )
        assert inc(c, "a/b", ("retention.ms", 0, "1")) == (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        )
        assert describe(c, "adm-refuse")[1]["retention.ms"].value == "5000"
        # a name LogConfig does not know (KRaft's ConfigurationControlManager): SET refused by
        # LogConfig.validateNames, DELETE a no-op (no record for an unchanged value), APPEND and
        # SUBTRACT refused as for a config that is no LIST (KafkaConfigSchema.isSplittable)
        assert inc(c, "adm-refuse", ("no.such.config", 0, "1")) == (
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: no.such.config",
        )
        assert inc(c, "adm-refuse", ("no.such.config", 1, None)) == (0, None)
        assert inc(c, "adm-refuse", ("no.such.config", 1, None), ("retention.ms", 0, "6000")) == (0, None)
        assert describe(c, "adm-refuse")[1]["retention.ms"].value == "6000"
        for op, what in ((2, "APPEND"), (3, "SUBTRACT")):
            assert inc(c, "adm-refuse", ("no.such.config", op, "a")) == (
                ErrorCode.INVALID_CONFIG,
                f"Can't {what} to key no.such.config because its type is not LIST.",
            )
        # APPEND to a topic without its own value starts from LogConfig's default, not the broker's
        broker_default = AlterConfigsResource(
            resource_type=4,
            resource_name="",
            configs=[AlterableConfig(name="log.cleanup.policy", config_operation=0, value="compact")],
        )
        req = G.IncrementalAlterConfigsRequest(resources=[broker_default], validate_only=False)
        assert c.request(44, 1, req).responses[0].error_code == 0
        try:
            assert describe(c, "adm-refuse")[1]["cleanup.policy"].value == "compact"
            assert inc(c, "adm-refuse", ("cleanup.policy", 2, "compact")) == (0, None)
            assert describe(c, "adm-refuse")[1]["cleanup.policy"].value == "delete,compact"
        finally:
            broker_default.configs[0].config_operation, broker_default.configs[0].value = 1, None
            assert c.request(44, 1, req).responses[0].error_code == 0


def test_append_and_subtract_of_a_list_value_in_either_metadata_mode():
    """One rule for a topic's and a broker's LIST value: ZooKeeper mode as
    ConfigAdminManager.prepareIncrementalConfigs (Scala List ``:::`` and ``diff``), KRaft as
    ConfigurationControlManager (empty items dropped, each item added once, removed once)."""
    from kafkatool.broker.handlers.admin import incremental_list_value

    append, subtract = 2, 3
    cases = [
        # (op, old, value): (ZooKeeper mode, KRaft)
        ((append, "delete", "compact,compact"), ("delete,compact,compact", "delete,compact")),
        ((append, "", "a"), ("a", "a")),
        ((append, "a,,b", "c"), ("a,,b,c", "a,b,c")),
        ((append, "a", " a"), ("a, a", "a, a")),  # no trimming in either
        ((subtract, "a,b,a", "a"), ("b,a", "b,a")),
        ((subtract, "a,,b", "b"), ("a,", "a")),
        ((subtract, "a,b", "c,a"), ("b", "b")),
        ((subtract, "", "a"), ("", "")),
    ]
    for (op, old, value), (zk, kraft) in cases:
        assert incremental_list_value(op, old, value, kraft=False) == zk, (op, old, value)
        assert incremental_list_value(op, old, value, kraft=True) == kraft, (op, old, value)


def test_create_partitions_delete_records_delete_topics(broker):
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-p", 1)

        def grow(n, validate_only=False):
            req = G.CreatePartitionsRequest(
                topics=[CreatePartitionsTopic(name="adm-p", count=n, assignments=None)],
                timeout_ms=1000,
                validate_only=validate_only,
            )
            return c.request(37, 3, req).results[0]

        assert grow(1).error_code == ErrorCode.INVALID_PARTITIONS
        assert grow(3).error_code == 0
        assert produce(c, "adm-p", batch(2), partition=2).error_code == 0
        for _ in range(4):
            produce(c, "adm-p", batch(5), partition=0)

        def delete_records(offset, partition=0):
            req = G.DeleteRecordsRequest(
                topics=[
                    DeleteRecordsTopic(
                        name="adm-p",
                        partitions=[DeleteRecordsPartition(partition_index=partition, offset=offset)],
                    )
                ],
                timeout_ms=1000,
            )
            return c.request(21, 2, req).topics[0].partitions[0]

        r = delete_records(7)
        assert (r.error_code, r.low_watermark) == (0, 7)
        assert delete_records(99).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        pd = fetch(c, "adm-p", 0).responses[0].partitions[0]
        assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset == 7
        assert delete_records(-1).low_watermark == 20
        md = c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="adm-p")])).topics[0]
        assert len(md.partitions) == 3
        resp = c.request(
            20,
            6,
            G.DeleteTopicsRequest(
                topics=[DeleteTopicState(name=None, topic_id=md.topic_id)], timeout_ms=1000
            ),
        )
        assert resp.responses[0].error_code == 0 and resp.responses[0].name == "adm-p"
        resp = c.request(20, 1, G.DeleteTopicsRequest(topic_names=["adm-p"], timeout_ms=1000))
        assert resp.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert not list(broker.data_dir.glob("adm-p-*"))


def test_create_partitions_refusals_as_kraft(broker):
    """CreatePartitions as Kafka 3.7's KRaft controller answers it (standalone serve is KRaft):
    a name the request holds twice once, INVALID_REQUEST, first; then the others in the order of
    ControllerApis' HashSet of names (checked with a JDK 17: cp-same, cp-grow, cp-less, cp-none,
    cp-dup), ReplicationControlManager's words, an unknown topic without a message."""
    with WireClient(broker.bootstrap) as c:
        for name in ("cp-less", "cp-same", "cp-grow", "cp-dup"):
            assert create(c, name, 2).error_code == 0
        req = G.CreatePartitionsRequest(
            topics=[
                CreatePartitionsTopic(name=n, count=k, assignments=None)
                for n, k in (("cp-dup", 3), ("cp-less", 1), ("cp-same", 2), ("cp-dup", 4), ("cp-none", 2))
            ]
            + [CreatePartitionsTopic(name="cp-grow", count=3, assignments=[])],
            timeout_ms=1000,
            validate_only=False,
        )
        got = [(r.name, r.error_code, r.error_message) for r in c.request(37, 3, req).results]
        assert got == [
            ("cp-dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
            ("cp-same", ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
            (
                "cp-grow",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified.",
            ),
            (
                "cp-less",
                ErrorCode.INVALID_PARTITIONS,
                "The topic cp-less currently has 2 partition(s); 1 would not be an increase.",
            ),
            ("cp-none", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        ]


def test_describe_cluster(broker):
    with WireClient(broker.bootstrap) as c:
        r = c.request(
            60, 1, G.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1)
        )
        md = c.request(3, 12, G.MetadataRequest(topics=[]))
        assert r.error_code == 0 and r.cluster_id == md.cluster_id and r.controller_id == 1
        assert [(b.broker_id, b.host, b.port) for b in r.brokers] == [(1, "127.0.0.1", broker.port)]


def test_excessively_large_partition_requests_are_refused(broker):
    """Kafka's MAX_PARTITIONS_PER_BATCH (10,000): a CreateTopics asking for more in total fails
    for every topic with POLICY_VIOLATION, and so does a CreatePartitions adding more; nothing
    is created (found by the wire fuzz: a flipped bit asked for 2^30 partitions)."""
    with WireClient(broker.bootstrap) as c:
        r = create(c, "huge", 10_001)
        assert r.error_code == ErrorCode.POLICY_VIOLATION
        assert r.error_message == "Excessively large number of partitions per request."
        req = G.CreateTopicsRequest(
            topics=[
                CreatableTopic(name=n, num_partitions=p, replication_factor=1)
                for n, p in (("h1", 6000), ("h2", 5000))
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        assert [t.error_code for t in c.request(19, 7, req).topics] == [ErrorCode.POLICY_VIOLATION] * 2
        assert create(c, "fine", 3).error_code == 0
        cp = G.CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name="fine", count=1 << 30, assignments=None)],
            timeout_ms=1000,
            validate_only=False,
        )
        assert c.request(37, 3, cp).results[0].error_code == ErrorCode.POLICY_VIOLATION
        md = c.request(3, 12, G.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        names = {t.name: len(t.partitions) for t in md.topics}
        assert "huge" not in names and "h1" not in names and names["fine"] == 3


def test_our_client_reads_v0_sources_as_kafkas_client(broker, monkeypatch):
    """Our admin client, held to DescribeConfigs v0, derives config_source as Kafka's client does
    (DescribeConfigsResponse's v0 constructor): DEFAULT_CONFIG if is_default, else a broker's
    value is STATIC_BROKER_CONFIG (4), a topic's TOPIC_CONFIG (1), any other resource's UNKNOWN (0)."""
    from kafkatool.assign import kafka_client as K
    from kafkatool.protocol.generated.describe_configs_response import DescribeConfigsResourceResult

    monkeypatch.setitem(K.CLIENT_MAX, 32, 0)
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-v0-ours", 1, configs={"retention.ms": "5000"})
    with K.KafkaAdmin(broker.bootstrap) as admin:
        assert admin._any().version_for(32) == 0
        b = K.describe_configs(admin, 4, ["1"])["1"]
        assert b["num.partitions"] == ("1", 4)
        assert {src for _, src in b.values()} == {4}  # Kafka 3.x's v0 answer: nothing is default
        t = K.describe_configs(admin, 2, ["adm-v0-ours"])["adm-v0-ours"]
        assert t["retention.ms"] == ("5000", 1) and {src for _, src in t.values()} == {1}
    default = DescribeConfigsResourceResult(name="x", value="1", is_default=True)
    assert [K.config_source(default, 0, rtype) for rtype in (2, 4, 8)] == [5, 5, 5]
    assert K.config_source(DescribeConfigsResourceResult(name="x", value="1"), 0, 8) == 0


def test_a_resource_named_twice_is_refused_wherever_it_appears(broker):
    """ConfigAdminManager.preprocess (both APIs): every resource whose type and name appear more
    than once answers INVALID_REQUEST "Each resource must appear at most once.", nothing of
    them is applied; the request's other resources are served."""
    from kafkatool.protocol.generated import alter_configs_request as AC

    twice = (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    with WireClient(broker.bootstrap) as c:
        create(c, "adm-twice", 1)
        create(c, "adm-once", 1)

        def inc_res(name, value):
            return AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[AlterableConfig(name="retention.ms", config_operation=0, value=value)],
            )

        req = G.IncrementalAlterConfigsRequest(
            resources=[
                inc_res("adm-twice", "5000"),
                inc_res("adm-once", "6000"),
                inc_res("adm-twice", "7000"),
            ],
            validate_only=False,
        )
        got = [(r.error_code, r.error_message) for r in c.request(44, 1, req).responses]
        assert got == [twice, (0, None), twice]

        def legacy_res(name, value):
            return AC.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[AC.AlterableConfig(name="retention.ms", value=value)],
            )

        req = G.AlterConfigsRequest(
            resources=[legacy_res("adm-twice", "8000"), legacy_res("adm-twice", "9000")], validate_only=False
        )
        assert [(r.error_code, r.error_message) for r in c.request(33, 2, req).responses] == [twice, twice]
        d = G.DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(resource_type=2, resource_name=n, configuration_keys=["retention.ms"])
                for n in ("adm-twice", "adm-once")
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        values = [r.configs[0].value for r in c.request(32, 4, d).results]
        assert values == ["604800000", "6000"]  # the twice-named topic kept its default
