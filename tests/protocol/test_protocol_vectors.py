"""Hand-written byte vectors: header rules, classic vs flexible encodings, records zero copy."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkatool.formats.errors import FormatError
from kafkatool.protocol.apis import API_BY_KEY, request_header_version, response_header_version
from kafkatool.protocol.errors import ErrorCode, ProtocolDecodeError
from kafkatool.protocol.framing import (
    encode_request,
    encode_response,
    parse_request,
    parse_response,
)
from kafkatool.protocol.generated import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkatool.protocol.generated.api_versions_response import ApiVersion
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from kafkatool.protocol.generated.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from kafkatool.protocol.generated.produce_response import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# --------------------------------------------------------------------------- ApiVersions


def test_api_versions_v0_request():
    wire = frame(h("0012 0000 00000001 0001") + b"c")
    assert encode_request(18, 0, 1, "c", ApiVersionsRequest()) == wire
    header, body = parse_request(wire[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 0, 1, "c")
    assert header.header_version == 1
    assert body == ApiVersionsRequest()


def test_api_versions_v3_request_header_v2_keeps_int16_client_id():
    payload = (
        h("0012 0003 00000002")
        + h("0001")
        + b"c"
        + h("00")
        + h("0a")
        + b"kafkatool"
        + h("04")
        + b"1.0"
        + h("00")
    )
    req = ApiVersionsRequest(client_software_name="kafkatool", client_software_version="1.0")
    assert encode_request(18, 3, 2, "c", req) == frame(payload)
    header, body = parse_request(payload)
    assert header.header_version == 2
    assert header.client_id == "c"
    assert body == req


def test_api_versions_v0_response():
    wire = frame(h("000000010000000000020000 0000 00090012 0000 0004"))
    resp = ApiVersionsResponse(
        error_code=0, api_keys=[ApiVersion(api_key=0, min_version=0, max_version=9), ApiVersion(18, 0, 4)]
    )
    assert encode_response(18, 0, 1, resp) == wire
    assert parse_response(wire[4:], 18, 0) == (1, resp)


def test_api_versions_v3_response_uses_header_v0_with_flexible_body():
    body = (
        h("0000")  # error_code
        + h("03")  # compact array of 2
        + h("0000 0000 000b 00")
        + h("0012 0000 0004 00")
        + h("00000000")  # throttle_time_ms
        + h("0101080000000000000005")  # tagged: FinalizedFeaturesEpoch (tag 1) = 5
    )
    wire = frame(h("00000007") + body)  # no tag byte after the correlation id
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(0, 0, 11), ApiVersion(18, 0, 4)],
        throttle_time_ms=0,
        finalized_features_epoch=5,
    )
    assert encode_response(18, 3, 7, resp) == wire
    assert parse_response(wire[4:], 18, 3) == (7, resp)
    assert response_header_version(18, 3) == 0
    assert response_header_version(3, 12) == 1


def test_unknown_tagged_fields_survive_a_round_trip():
    body = h("00000100000000016302abcd")
    resp = ApiVersionsResponse.decode(body, 3)
    assert resp._unknown_tags == [(0x63, b"\xab\xcd")]
    assert resp.encode(3) == body


# --------------------------------------------------------------------------- Metadata


def test_metadata_v0_request_and_response():
    req_body = h("00000001 0001") + b"t"
    assert MetadataRequest(topics=[MetadataRequestTopic(name="t")]).encode(0) == req_body
    assert MetadataRequest.decode(req_body, 0).topics[0].name == "t"
    resp_body = (
        h("00000001")
        + h("00000001")
        + h("0009")
        + b"localhost"
        + h("00002384")  # broker 1 localhost:9092
        + h("00000001")
        + h("0000")
        + h("0001")
        + b"t"  # topic t, no error
        + h("00000001")
        + h("0000 00000000 00000001")  # partition 0, leader 1
        + h("00000001 00000001")
        + h("00000001 00000001")  # replicas [1], isr [1]
    )
    resp = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=1, host="localhost", port=9092)],
        topics=[
            MetadataResponseTopic(
                error_code=0,
                name="t",
                partitions=[
                    MetadataResponsePartition(
                        error_code=0, partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        ],
    )
    assert resp.encode(0) == resp_body
    assert MetadataResponse.decode(resp_body, 0) == resp


def test_metadata_v0_cannot_carry_a_null_topic_list():
    with pytest.raises(ProtocolDecodeError, match="non-nullable"):
        MetadataRequest.decode(h("ffffffff"), 0)
    assert MetadataRequest.decode(h("ffffffff01"), 4).topics is None


def test_metadata_v12_request_and_response():
    tid = uuid.UUID(bytes=bytes(range(1, 17)))
    req_body = h("02") + tid.bytes + h("02") + b"t" + h("00") + h("010000")
    req = MetadataRequest(
        topics=[MetadataRequestTopic(topic_id=tid, name="t")],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    assert req.encode(12) == req_body
    assert MetadataRequest.decode(req_body, 12) == req
    null_topics = h("00000000")
    assert MetadataRequest.decode(null_topics, 12).topics is None
    resp_body = (
        h("00000000")  # throttle
        + h("02")
        + h("00000001")
        + h("0a")
        + b"localhost"
        + h("00002384")
        + h("00")
        + h("00")  # broker, rack null
        + h("08")
        + b"cluster"
        + h("00000001")  # cluster id, controller 1
        + h("02")  # 1 topic
        + h("0000")
        + h("00")
        + tid.bytes
        + h("00")  # error, name null (v12), topic id, not internal
        + h("02")
        + h("0000 00000000 00000001 00000005")
        + h("02 00000001")
        + h("02 00000001")
        + h("01")
        + h("00")
        + h("80000000")
        + h("00")  # topic authorized ops, tags
        + h("00")
    )
    resp = MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=1, host="localhost", port=9092, rack=None)],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                error_code=0,
                name=None,
                topic_id=tid,
                is_internal=False,
                partitions=[MetadataResponsePartition(0, 0, 1, 5, [1], [1], [])],
                topic_authorized_operations=-(2**31),
            )
        ],
    )
    assert resp.encode(12) == resp_body
    assert MetadataResponse.decode(resp_body, 12) == resp


def test_metadata_auto_create_is_not_ignorable_below_v4():
    from kafkatool.formats.schema import UnsupportedVersionError

    with pytest.raises(UnsupportedVersionError):
        MetadataRequest(topics=None, allow_auto_topic_creation=False).encode(3)


# --------------------------------------------------------------------------- Produce

RECORDS = bytes(range(70))


def test_produce_v3_request_with_records_zero_copy():
    body = (
        h("ffffffff00007530")  # null transactional id, acks -1, timeout 30000
        + h("00000001 0001")
        + b"t"
        + h("00000001 00000000")
        + struct.pack(">i", len(RECORDS))
        + RECORDS
    )
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=RECORDS)])
        ],
    )
    assert req.encode(3) == body
    wire = encode_request(0, 3, 9, "p", req)
    header, decoded = parse_request(memoryview(wire)[4:])
    assert decoded == req
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is wire  # a slice of the frame, not a copy
    assert bytes(records) == RECORDS


def test_produce_v9_request_flexible_with_records():
    body = (
        h("00ffff00007530")
        + h("02 02")
        + b"t"
        + h("02 00000000")
        + bytes([len(RECORDS) + 1])
        + RECORDS
        + h("00")  # partition + tags
        + h("00")  # topic tags
        + h("00")
    )
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(0, memoryview(RECORDS))])
        ],
    )
    assert req.encode(9) == body
    decoded = ProduceRequest.decode(body, 9)
    assert decoded == req
    assert decoded.topic_data[0].partition_data[0].records.obj is body


def test_produce_v10_response_tagged_current_leader():
    resp = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[
                    PartitionProduceResponse(
                        index=0,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        base_offset=-1,
                        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                    )
                ],
            )
        ]
    )
    data = resp.encode(10)
    assert h("010009000000020000000700") in data  # tag 0, size 9, struct + its tags
    assert ProduceResponse.decode(data, 10) == resp


# --------------------------------------------------------------------------- header table


def test_header_versions():
    assert request_header_version(18, 0) == 1
    assert request_header_version(18, 3) == 2
    assert request_header_version(18, 9) == 2  # unknown future ApiVersions: still header v2
    assert request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert request_header_version(0, 8) == 1
    assert request_header_version(0, 9) == 2
    assert request_header_version(9999, 0) == 1
    info = API_BY_KEY[0]
    assert (info.name, info.min_version, info.flexible_from) == ("Produce", 0, 9)


def test_decode_error_is_a_format_error():
    with pytest.raises(FormatError) as e:
        ProduceRequest.decode(h("ffff ffff"), 3)
    assert e.value.position == 2  # after the null transactional id
