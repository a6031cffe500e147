"""The KIP-848 consumer-group records of __consumer_offsets (record types 3-8 and 16) through the one
codec: written as Kafka's GroupCoordinatorRecordHelpers writes them, printed as
kafka-dump-log --offsets-decoder prints them."""

from __future__ import annotations

import uuid

import pytest

from kafkatool.formats import internal_topics as IT
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)
from kafkatool.formats.generated.consumer_group_current_member_assignment_value import TopicPartitions

TOPIC = uuid.UUID("8ae8b88e-a2fe-47a7-8cc5-000116ab24d1")


def test_group_epoch_record_bytes_and_dump():
    key, value = IT.consumer_group_record(
        IT.CONSUMER_GROUP_METADATA,
        ConsumerGroupMetadataKey(group_id="g"),
        ConsumerGroupMetadataValue(epoch=7),
    )
    # key: int16 record type 3, then the non-flexible v3 body (int16-length string)
    assert key == b"\x00\x03\x00\x01g"
    # value: int16 version 0, flexible body: int32 epoch + empty tag section
    assert value == b"\x00\x00\x00\x00\x00\x07\x00"
    assert IT.decode_offsets_record(key, value) == (
        '{"type":"3","data":{"groupId":"g"}}',
        '{"version":"0","data":{"epoch":7}}',
    )
    key2, tomb = IT.consumer_group_record(
        IT.CONSUMER_GROUP_METADATA, ConsumerGroupMetadataKey(group_id="g"), None
    )
    assert tomb is None and IT.decode_offsets_record(key2, None)[1] == IT.DELETE


def test_current_assignment_round_trip():
    v = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=3,
        previous_member_epoch=2,
        state=1,
        assigned_partitions=[TopicPartitions(topic_id=TOPIC, partitions=[0, 1])],
        partitions_pending_revocation=[TopicPartitions(topic_id=TOPIC, partitions=[2])],
    )
    key, value = IT.consumer_group_record(
        IT.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m"),
        v,
    )
    rt, k = IT.read_offsets_key(key)
    assert rt == 8 and (k.group_id, k.member_id) == ("g", "m")
    version, back = IT.read_offsets_value(rt, value)
    assert version == 0 and back.partitions_pending_revocation[0].partitions == [2]
    d = IT.offsets_record_dict(key, value)
    assert d["value"]["data"]["assignedPartitions"] == [
        {"topicId": "iui4jqL-R6eMxQABFqsk0Q", "partitions": [0, 1]}
    ]
    # a truncated value names the byte position
    with pytest.raises(FormatError):
        IT.read_offsets_value(rt, value[:9])


def test_regular_expression_record_bytes_and_dump():
    """ConsumerGroupRegularExpression (record type 16, Kafka 4.0): key GroupId +
    RegularExpression (non-flexible), value v0 Topics/Version/Timestamp (flexible)."""
    key, value = IT.consumer_group_record(
        IT.CONSUMER_GROUP_REGULAR_EXPRESSION,
        ConsumerGroupRegularExpressionKey(group_id="g", regular_expression="t.*"),
        ConsumerGroupRegularExpressionValue(topics=["ta"], version=5, timestamp=9),
    )
    assert key == b"\x00\x10\x00\x01g\x00\x03t.*"
    assert value == b"\x00\x00" + b"\x02\x03ta" + (5).to_bytes(8, "big") + (9).to_bytes(8, "big") + b"\x00"
    rt, k = IT.read_offsets_key(key)
    assert rt == 16 and (k.group_id, k.regular_expression) == ("g", "t.*")
    assert IT.read_offsets_value(rt, value)[1].topics == ["ta"]
    assert IT.decode_offsets_record(key, value) == (
        '{"type":"16","data":{"groupId":"g","regularExpression":"t.*"}}',
        '{"version":"0","data":{"topics":["ta"],"version":5,"timestamp":9}}',
    )
