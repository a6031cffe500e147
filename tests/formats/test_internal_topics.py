"""Internal-topic record decoders render exactly what kafka-dump-log prints."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionRecord,
    TopicRecord,
    TransactionLogKey,
    TransactionLogValue,
)
from kafkatool.formats.generated.consumer_protocol_assignment import TopicPartition as AssignedTP
from kafkatool.formats.generated.consumer_protocol_subscription import TopicPartition as OwnedTP
from kafkatool.formats.generated.group_metadata_value import MemberMetadata
from kafkatool.formats.generated.transaction_log_value import PartitionsSchema
from kafkatool.formats.internal_topics import (
    cluster_metadata_record_dict,
    decode_cluster_metadata_record,
    decode_offsets_record,
    decode_transaction_log_record,
    offsets_record_dict,
    transaction_log_record_dict,
)


def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def prefixed(version: int, body: bytes) -> bytes:
    return struct.pack(">h", version) + body


# --------------------------------------------------------------------------- __consumer_offsets

OFFSET_KEY_V1 = (
    bytes.fromhex("00010002") + b"g1" + bytes.fromhex("0005") + b"topic" + bytes.fromhex("00000003")
)
OFFSET_VALUE_V3 = (
    bytes.fromhex("0003")
    + struct.pack(">q", 100)  # offset
    + struct.pack(">i", 5)  # leaderEpoch
    + s16("meta")
    + struct.pack(">q", 1700000000000)  # commitTimestamp
)


def test_offset_commit_hand_written_bytes():
    key, value = decode_offsets_record(OFFSET_KEY_V1, OFFSET_VALUE_V3)
    assert key == '{"type":"1","data":{"group":"g1","topic":"topic","partition":3}}'
    assert value == (
        '{"version":"3","data":{"offset":100,"leaderEpoch":5,"metadata":"meta","commitTimestamp":1700000000000}}'
    )


def test_offset_commit_generated_classes_match_hand_bytes():
    key = prefixed(1, OffsetCommitKey(group="g1", topic="topic", partition=3).encode(1))
    value = prefixed(
        3,
        OffsetCommitValue(offset=100, leader_epoch=5, metadata="meta", commit_timestamp=1700000000000).encode(
            3
        ),
    )
    assert key == OFFSET_KEY_V1
    assert value == OFFSET_VALUE_V3


def test_offset_commit_value_v1_has_expire_timestamp_and_tombstone():
    v1 = prefixed(
        1, OffsetCommitValue(offset=7, metadata="", commit_timestamp=10, expire_timestamp=20).encode(1)
    )
    _, value = decode_offsets_record(OFFSET_KEY_V1, v1)
    assert (
        value == '{"version":"1","data":{"offset":7,"metadata":"","commitTimestamp":10,"expireTimestamp":20}}'
    )
    key, value = decode_offsets_record(OFFSET_KEY_V1, None)
    assert value == "<DELETE>"
    assert key.startswith('{"type":"1"')


def _subscription_v1() -> bytes:
    sub = ConsumerProtocolSubscription(
        topics=["orders"], user_data=None, owned_partitions=[OwnedTP(topic="orders", partitions=[0, 1])]
    )
    return prefixed(1, sub.encode(1))


def _assignment_v0() -> bytes:
    return prefixed(
        0, ConsumerProtocolAssignment(assigned_partitions=[AssignedTP("orders", [0, 1])]).encode(0)
    )


def _group_value_v3_hand() -> bytes:
    sub = _subscription_v1()
    asg = _assignment_v0()
    member = (
        s16("consumer-1-abc")  # memberId
        + bytes.fromhex("ffff")  # groupInstanceId null
        + s16("consumer-1")  # clientId
        + s16("/127.0.0.1")  # clientHost
        + struct.pack(">i", 300000)  # rebalanceTimeout
        + struct.pack(">i", 45000)  # sessionTimeout
        + struct.pack(">i", len(sub))
        + sub
        + struct.pack(">i", len(asg))
        + asg
    )
    return (
        bytes.fromhex("0003")
        + s16("consumer")  # protocolType
        + struct.pack(">i", 4)  # generation
        + s16("range")  # protocol
        + s16("consumer-1-abc")  # leader
        + struct.pack(">q", 1700000000123)  # currentStateTimestamp
        + struct.pack(">i", 1)
        + member
    )


def test_subscription_and_assignment_hand_bytes():
    sub = _subscription_v1()
    assert sub == (
        bytes.fromhex("000100000001")
        + s16("orders")
        + bytes.fromhex("ffffffff")  # userData null
        + bytes.fromhex("00000001")
        + s16("orders")
        + bytes.fromhex("000000020000000000000001")
    )


def test_group_metadata_v3_hand_written_bytes():
    key = bytes.fromhex("0002") + s16("my-group")
    k, v = decode_offsets_record(key, _group_value_v3_hand())
    assert k == '{"type":"2","data":{"group":"my-group"}}'
    assert v == (
        '{"version":"3","data":{"protocolType":"consumer","generation":4,"protocol":"range",'
        '"leader":"consumer-1-abc","currentStateTimestamp":1700000000123,"members":[{"memberId":"consumer-1-abc",'
        '"groupInstanceId":null,"clientId":"consumer-1","clientHost":"/127.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":45000,"subscription":{"topics":["orders"],"userData":null,'
        '"ownedPartitions":[{"topic":"orders","partitions":[0,1]}]},'
        '"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":null}}]}}'
    )


def test_group_metadata_generated_classes_match_hand_bytes():
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="consumer-1-abc",
        current_state_timestamp=1700000000123,
        members=[
            MemberMetadata(
                member_id="consumer-1-abc",
                group_instance_id=None,
                client_id="consumer-1",
                client_host="/127.0.0.1",
                rebalance_timeout=300000,
                session_timeout=45000,
                subscription=_subscription_v1(),
                assignment=_assignment_v0(),
            )
        ],
    )
    assert prefixed(3, value.encode(3)) == _group_value_v3_hand()
    assert prefixed(2, GroupMetadataKey(group="my-group").encode(2)) == bytes.fromhex("0002") + s16(
        "my-group"
    )


def test_group_metadata_non_consumer_protocol_keeps_base64_bytes():
    value = GroupMetadataValue(
        protocol_type="connect",
        generation=1,
        protocol=None,
        leader=None,
        members=[MemberMetadata("m", None, "c", "h", 1, 2, b"\x00\x01", b"")],
    )
    _, v = decode_offsets_record(bytes.fromhex("0002") + s16("g"), prefixed(3, value.encode(3)))
    assert '"protocol":null,"leader":null' in v
    assert '"subscription":"AAE=","assignment":""' in v


def test_group_metadata_undecodable_subscription_is_left_as_bytes():
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=1,
        members=[MemberMetadata("m", None, "c", "h", 1, 2, b"\x00", b"")],
    )
    _, v = decode_offsets_record(bytes.fromhex("0002") + s16("g"), prefixed(2, value.encode(2)))
    # v2 has no groupInstanceId; one-byte subscription cannot be read -> kept as base64
    assert '"members":[{"memberId":"m","clientId":"c"' in v
    assert '"subscription":"AA==","assignment":""' in v


def test_unknown_record_type_is_skipped_like_kafka():
    # types 3-8 are the KIP-848 consumer-group records (decoded since issue 17); 200 is unknown
    key, value = decode_offsets_record(bytes.fromhex("00c8") + b"\x00\x00", b"\x00\x00", offset=42)
    assert key == "Unknown record type 200 at offset 42, skipping."
    assert value is None
    assert offsets_record_dict(bytes.fromhex("00c8"), None) == {"type": 200, "key": None, "value": None}


def test_offsets_structured_dict():
    d = offsets_record_dict(OFFSET_KEY_V1, OFFSET_VALUE_V3)
    assert d["type"] == 1
    assert d["key"]["data"]["partition"] == 3
    assert d["value"]["data"]["leaderEpoch"] == 5


@pytest.mark.parametrize(
    ("key", "value", "position"),
    [
        (b"\x00", None, 0),
        (OFFSET_KEY_V1[:-2], None, 13),
        (OFFSET_KEY_V1, OFFSET_VALUE_V3[:9], 2),
        (OFFSET_KEY_V1, b"\x00", 0),
        (bytes.fromhex("00017fff"), None, 2),
    ],
)
def test_offsets_undecodable_bytes_raise_format_error(key, value, position):
    with pytest.raises(FormatError) as e:
        decode_offsets_record(key, value)
    assert e.value.position == position


def test_offsets_missing_key():
    with pytest.raises(FormatError):
        decode_offsets_record(None, OFFSET_VALUE_V3)


# --------------------------------------------------------------------------- __transaction_state

TXN_KEY = bytes.fromhex("0000") + s16("my-txn")
TXN_VALUE_V0 = (
    bytes.fromhex("0000")
    + struct.pack(">q", 4001)  # producerId
    + struct.pack(">h", 3)  # producerEpoch
    + struct.pack(">i", 60000)  # transactionTimeoutMs
    + bytes([1])  # Ongoing
    + struct.pack(">i", 1)
    + s16("output-topic")
    + struct.pack(">i", 1)
    + struct.pack(">i", 0)
    + struct.pack(">q", 1742739702876)  # lastUpdate
    + struct.pack(">q", 1742739702870)  # start
)


def test_transaction_log_v0_hand_written_bytes():
    key, value = decode_transaction_log_record(TXN_KEY, TXN_VALUE_V0)
    assert key == "transaction_metadata::transactionalId=my-txn"
    assert value == (
        "producerId:4001,producerEpoch:3,state=Ongoing,partitions=[output-topic-0],"
        "txnLastUpdateTimestamp=1742739702876,txnTimeoutMs=60000"
    )


def test_transaction_log_generated_classes_match_hand_bytes():
    assert prefixed(0, TransactionLogKey(transactional_id="my-txn").encode(0)) == TXN_KEY
    v = TransactionLogValue(
        producer_id=4001,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        transaction_status=1,
        transaction_partitions=[PartitionsSchema("output-topic", [0])],
        transaction_last_update_timestamp_ms=1742739702876,
        transaction_start_timestamp_ms=1742739702870,
    )
    assert prefixed(0, v.encode(0)) == TXN_VALUE_V0


def test_transaction_log_v1_flexible_and_empty_state():
    v = TransactionLogValue(
        producer_id=1,
        previous_producer_id=0,
        producer_epoch=0,
        transaction_timeout_ms=60000,
        transaction_status=0,
        transaction_partitions=None,
        transaction_last_update_timestamp_ms=1742739549435,
        transaction_start_timestamp_ms=-1,
        client_transaction_version=2,
    )
    raw = prefixed(1, v.encode(1))
    _, value = decode_transaction_log_record(TXN_KEY, raw)
    assert value == (
        "producerId:1,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=1742739549435,txnTimeoutMs=60000"
    )
    d = transaction_log_record_dict(TXN_KEY, raw)
    assert d["value"]["data"]["previousProducerId"] == 0
    assert d["value"]["data"]["clientTransactionVersion"] == 2
    assert "nextProducerId" not in d["value"]["data"]  # tagged field at its default is omitted


def test_transaction_log_multi_partition_order_and_tombstone():
    v = TransactionLogValue(
        producer_id=9,
        producer_epoch=1,
        transaction_timeout_ms=1000,
        transaction_status=2,
        transaction_partitions=[PartitionsSchema("b", [1, 0]), PartitionsSchema("a", [0])],
        transaction_last_update_timestamp_ms=5,
        transaction_start_timestamp_ms=4,
    )
    _, value = decode_transaction_log_record(TXN_KEY, prefixed(0, v.encode(0)))
    assert "state=PrepareCommit" in value
    # Scala mutable.HashSet order: TopicPartition hashes 31*(31+p)+topic.hashCode spread over 16 buckets:
    # a-0 = 1058 (bucket 2), b-1 = 1090 (bucket 2, after a-0), b-0 = 1059 (bucket 3)
    assert "partitions=[a-0,b-1,b-0]" in value
    ten = TransactionLogValue(
        producer_id=9,
        transaction_status=1,
        transaction_partitions=[PartitionsSchema("t", list(range(10)))],
    )
    _, value = decode_transaction_log_record(TXN_KEY, prefixed(0, ten.encode(0)))
    assert "partitions=[t-5,t-4,t-3,t-2,t-1,t-0,t-9,t-8,t-7,t-6]" in value
    assert decode_transaction_log_record(TXN_KEY, None) == (
        "transaction_metadata::transactionalId=my-txn",
        "<DELETE>",
    )


def test_transaction_log_unknown_key_version_and_bad_value_version():
    assert decode_transaction_log_record(bytes.fromhex("0003") + s16("x"), b"") == (
        "unknown::version=3",
        None,
    )
    with pytest.raises(FormatError, match="Unknown version 7"):
        decode_transaction_log_record(TXN_KEY, bytes.fromhex("0007") + TXN_VALUE_V0[2:])
    with pytest.raises(FormatError):
        decode_transaction_log_record(TXN_KEY, TXN_VALUE_V0[:20])


# --------------------------------------------------------------------------- __cluster_metadata


def metadata_value(api_key: int, version: int, body: bytes) -> bytes:
    return bytes([1, api_key, version]) + body


def test_topic_record_hand_written_bytes():
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    body = bytes([7]) + b"orders" + topic_id.bytes + b"\x00"
    assert TopicRecord(name="orders", topic_id=topic_id).encode(0) == body
    text = decode_cluster_metadata_record(metadata_value(2, 0, body))
    assert (
        text
        == '{"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"AAECAwQFBgcICQoLDA0ODw"}}'
    )


def test_partition_record_json_and_dict():
    rec = PartitionRecord(
        partition_id=0,
        topic_id=uuid.UUID(int=1),
        replicas=[1, 2],
        isr=[1],
        removing_replicas=[],
        adding_replicas=[],
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
    )
    d = cluster_metadata_record_dict(metadata_value(3, 0, rec.encode(0)))
    assert d["type"] == "PARTITION_RECORD"
    assert d["version"] == 0
    assert d["data"]["replicas"] == [1, 2]
    assert d["data"]["isr"] == [1]
    assert decode_cluster_metadata_record(metadata_value(3, 0, rec.encode(0))).startswith(
        '{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ",'
        '"replicas":[1,2],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,'
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (bytes([0, 2, 0]), "frame version 0"),
        (bytes([2, 2, 0]), "unknown frame version 2"),
        (bytes([1, 99, 0]), "Unknown metadata id 99"),
        (bytes([1, 2, 0, 7]) + b"or", "Failed to deserialize record with type 2"),
        (metadata_value(9, 0, uuid.UUID(int=5).bytes + b"\x00") + b"zz", r"2 byte\(s\) of garbage"),
        (b"\x01\x80", "type"),
    ],
)
def test_cluster_metadata_errors(value, message):
    with pytest.raises(FormatError, match=message):
        decode_cluster_metadata_record(value)


def test_kraft_control_records():
    from kafkatool.formats.internal_topics import decode_kraft_control_record

    header = bytes.fromhex("00000000018bcfe5680000")  # version 0, timestamp, no tags
    assert decode_kraft_control_record(3, header) == (
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000000}'
    )
    assert decode_kraft_control_record(4, bytes.fromhex("0000 00")) == 'SnapshotFooter {"version":0}'
    assert decode_kraft_control_record(5, bytes.fromhex("0000 0001 00")) == (
        'KRaftVersion {"version":0,"kRaftVersion":1}'
    )
    assert decode_kraft_control_record(2, b"") is None
    with pytest.raises(FormatError):
        decode_kraft_control_record(3, bytes.fromhex("0000 0000"))


@settings(max_examples=300, deadline=None)
@given(
    key=st.one_of(st.none(), st.binary(max_size=40)),
    value=st.one_of(st.none(), st.binary(max_size=80)),
    kind=st.sampled_from(["offsets", "txn", "metadata", "control"]),
)
def test_random_bytes_only_raise_format_error(key, value, kind):
    from kafkatool.formats.internal_topics import decode_kraft_control_record

    try:
        if kind == "offsets":
            decode_offsets_record(key, value)
        elif kind == "txn":
            decode_transaction_log_record(key, value)
        elif kind == "metadata":
            decode_cluster_metadata_record(value)
        else:
            decode_kraft_control_record(3 + len(key or b"") % 4, value)
    except FormatError as e:
        assert e.position is None or e.position >= 0


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 200), flip=st.integers(0, 255))
def test_mutated_group_metadata_only_raises_format_error(cut, flip):
    raw = bytearray(_group_value_v3_hand())
    raw[cut % len(raw)] = flip
    try:
        decode_offsets_record(bytes.fromhex("0002") + s16("g"), bytes(raw[: len(raw) - cut // 3]))
    except FormatError:
        pass
