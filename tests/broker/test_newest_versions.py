"""The newest versions of the core APIs (issue 17): every advertised version answers, Fetch
by topic id (v13+), KIP-951 leader hints, ListOffsets v8/v9, DescribeTopicPartitions,
DescribeProducers, ListGroups v5; one broker for the module, raw sockets."""

from __future__ import annotations

import time
import uuid

from kafkatool.formats.schema import Message
from kafkatool.protocol import generated as G
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.describe_producers_request import TopicRequest as ProducersTopic
from kafkatool.protocol.generated.describe_topic_partitions_request import Cursor, TopicRequest
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.test_protocol import batch, batches_of, c, create_topic, produce  # noqa: F401
from tests.broker.wire import WireClient

#: requests whose defaults would change something or wait: given harmless values
_SAFE_FIELDS = {
    0: {"acks": 1},  # acks=0 has no response
    1: {"max_wait_ms": 0},
}


def _error_codes(msg, out: list) -> list:
    for f in msg._FIELDS:
        value = getattr(msg, f.attr, None)
        if f.attr == "error_code" and isinstance(value, int):
            out.append(value)
        elif isinstance(value, Message):
            _error_codes(value, out)
        elif isinstance(value, list):
            for e in value:
                if isinstance(e, Message):
                    _error_codes(e, out)
    return out


def test_every_advertised_version_answers(broker):
    """For every API and version ApiVersions advertises, a request built by the generated codec
    (defaults) gets a response that decodes and is not UNSUPPORTED_VERSION."""
    with WireClient(broker.bootstrap) as c0:
        advertised = [(a.api_key, a.min_version, a.max_version) for a in c0.api_versions(4).api_keys]
    assert len(advertised) > 40
    checked = 0
    for key, lo, hi in advertised:
        info = API_BY_KEY[key]
        with WireClient(broker.bootstrap) as c1:
            for v in range(lo, hi + 1):
                req = info.request()
                for k, val in _SAFE_FIELDS.get(key, {}).items():
                    setattr(req, k, val)
                if key == 18:
                    req.client_software_name, req.client_software_version = "walk", "1"
                resp = c1.request(key, v, req)
                codes = _error_codes(resp, [])
                assert ErrorCode.UNSUPPORTED_VERSION not in codes, (info.name, v, resp)
                checked += 1
    assert checked > 200


def _metadata_topic_id(client, name):
    resp = client.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name=name)]))
    return resp.topics[0].topic_id


def _fetch_by_id(topic_id, offset, *, version, epoch=-1):
    return G.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[
            FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=epoch,
                    )
                ],
            )
        ],
    )


def test_fetch_by_topic_id_v13_to_v17(c):  # noqa: F811
    create_topic(c, "ids", 1)
    assert produce(c, "ids", batch(4), version=11).error_code == 0
    tid = _metadata_topic_id(c, "ids")
    assert tid != uuid.UUID(int=0)
    for v in range(13, 18):
        resp = c.request(1, v, _fetch_by_id(tid, 0, version=v))
        (t,) = resp.responses
        assert t.topic_id == tid and t.topic == ""
        (p,) = t.partitions
        assert p.error_code == 0 and p.high_watermark == 4
        assert [b.base_offset for b in batches_of(p.records)] == [0]
    # an unknown id: UNKNOWN_TOPIC_ID per partition, the id echoed
    other = uuid.uuid4()
    resp = c.request(1, 13, _fetch_by_id(other, 0, version=13))
    assert resp.responses[0].topic_id == other
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fetch_v16_leader_hint_only_for_leader_errors(c):  # noqa: F811
    create_topic(c, "hint", 1)
    tid = _metadata_topic_id(c, "hint")
    resp = c.request(1, 16, _fetch_by_id(tid, 0, version=16, epoch=5))
    p = resp.responses[0].partitions[0]
    # an epoch newer than ours is UNKNOWN_LEADER_EPOCH: Kafka adds no KIP-951 hint for it
    assert p.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert p.current_leader.leader_id == -1 and resp.node_endpoints == []


def test_produce_v10_v11_and_list_offsets_v8_v9(c):  # noqa: F811
    create_topic(c, "newest", 1)
    now = int(time.time() * 1000)
    for i, v in enumerate((10, 11)):
        # timestamps set apart: two batches made in the same millisecond would share their
        # largest timestamp, and the max-timestamp lookup answers its first offset (1, not 3)
        r = produce(c, "newest", batch(2, ts=now + 10 * i), version=v)
        assert r.error_code == 0 and r.current_leader.leader_id == -1
    assert produce(c, "missing-topic-xyz", batch(1), version=11).error_code in (
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )

    def lo(ts, v):
        req = G.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name="newest",
                    partitions=[
                        ListOffsetsPartition(partition_index=0, timestamp=ts, current_leader_epoch=-1)
                    ],
                )
            ],
        )
        return c.request(2, v, req).topics[0].partitions[0]

    for v in (8, 9):
        assert (lo(-2, v).offset, lo(-1, v).offset, lo(-4, v).offset) == (0, 4, 0)
        p = lo(-5, v)  # latest tiered: no tiered storage, Kafka answers -1 without an error
        assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)
        assert lo(-3, v).offset == 3


def test_describe_topic_partitions_paginates(c):  # noqa: F811
    create_topic(c, "dtp-a", 3)
    create_topic(c, "dtp-b", 2)

    def ask(names, limit, cursor=None):
        return c.request(
            75,
            0,
            G.DescribeTopicPartitionsRequest(
                topics=[TopicRequest(name=n) for n in names], response_partition_limit=limit, cursor=cursor
            ),
        )

    r = ask(["dtp-b", "dtp-a", "dtp-none"], 2)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("dtp-a", [0, 1])]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-a", 2)
    r = ask(["dtp-b", "dtp-a", "dtp-none"], 2, Cursor(topic_name="dtp-a", partition_index=2))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [
        ("dtp-a", [2]),
        ("dtp-b", [0]),
    ]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-b", 1)
    r = ask(["dtp-b", "dtp-a", "dtp-none"], 10, Cursor(topic_name="dtp-b", partition_index=1))
    assert [(t.name, t.error_code) for t in r.topics] == [("dtp-b", 0), ("dtp-none", 3)]
    assert r.next_cursor is None and [p.partition_index for p in r.topics[0].partitions] == [1]
    # the cursor's topic must be listed
    r = ask(["dtp-a"], 10, Cursor(topic_name="dtp-b", partition_index=0))
    assert [t.error_code for t in r.topics] == [ErrorCode.INVALID_REQUEST]


def test_describe_producers(c):  # noqa: F811
    create_topic(c, "prods", 1)
    init = c.request(22, 5, G.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
    assert init.error_code == 0
    pid = init.producer_id
    assert produce(c, "prods", batch(3, pid=pid, epoch=0, seq=0), version=11).error_code == 0
    r = c.request(
        61, 0, G.DescribeProducersRequest(topics=[ProducersTopic(name="prods", partition_indexes=[0, 7])])
    )
    p0, p7 = r.topics[0].partitions
    assert p7.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (s,) = p0.active_producers
    assert (s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset) == (pid, 0, 2, -1)


def test_list_groups_v5_type_filter(c):  # noqa: F811
    from kafkatool.protocol.generated.offset_commit_request import (
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    create_topic(c, "lg5", 1)
    commit = G.OffsetCommitRequest(
        group_id="simple-lg5",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequestTopic(
                name="lg5", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=1)]
            )
        ],
    )
    assert c.request(8, 8, commit).topics[0].partitions[0].error_code == 0
    groups = c.request(16, 5, G.ListGroupsRequest(types_filter=["Classic"])).groups
    assert ("simple-lg5", "classic") in {(g.group_id, g.group_type) for g in groups}
    consumer = c.request(16, 5, G.ListGroupsRequest(types_filter=["consumer"])).groups
    assert "simple-lg5" not in {g.group_id for g in consumer}


def test_api_versions_features(broker):
    """group.version 1 is finalized (KIP-848 served); v3 answers leave out min-version-0
    supported features (KAFKA-17011)."""
    with WireClient(broker.bootstrap) as c4:
        r = c4.api_versions(4)
        assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [
            ("group.version", 0, 1)
        ]
        assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == [
            ("group.version", 1, 1)
        ]
        assert r.finalized_features_epoch == 0
        keys = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
        assert keys[68] == (0, 1) and keys[69] == (0, 0)
    with WireClient(broker.bootstrap) as c3:
        r = c3.api_versions(3)
        assert r.supported_features == [] and r.finalized_features[0].name == "group.version"


def test_alter_configs_accepts_deprecated_message_format_version(c):  # noqa: F811
    """librdkafka's test 0092: Kafka 3.x accepts message.format.version (deprecated, ignored for
    message format v2) in AlterConfigs; a value that is no Kafka version is INVALID_CONFIG."""
    from kafkatool.protocol.generated.alter_configs_request import AlterableConfig, AlterConfigsResource
    from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

    create_topic(c, "mfv", 1)

    def alter(value):
        req = G.AlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=2,
                    resource_name="mfv",
                    configs=[AlterableConfig(name="message.format.version", value=value)],
                )
            ],
            validate_only=False,
        )
        return c.request(33, 2, req).responses[0].error_code

    assert alter("0.10.0") == 0
    assert alter("not-a-version") == ErrorCode.INVALID_CONFIG
    req = G.DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=2, resource_name="mfv", configuration_keys=["message.format.version"]
            )
        ]
    )
    (entry,) = c.request(32, 4, req).results[0].configs
    assert (entry.name, entry.value) == ("message.format.version", "0.10.0")
