"""Fixed-width arrays (replica lists) are packed and unpacked inline with shared per-length
structs up to ARRAY_STRUCTS_MAX_N elements (the shortest with their elements as arguments) and
by the helpers beyond: every path must write Kafka's layout, and the inline read must stop at
``end``, not at the end of the buffer."""

from __future__ import annotations

import struct

import pytest

from kafkatool.formats.schema import ARRAY_STRUCTS_MAX_N, SchemaDecodeError
from kafkatool.protocol.generated import MetadataResponse
from kafkatool.protocol.generated.metadata_response import MetadataResponsePartition, MetadataResponseTopic

LENGTHS = [0, 1, 2, 3, 4, ARRAY_STRUCTS_MAX_N, ARRAY_STRUCTS_MAX_N + 1, 126, 127, 300]


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _response(replicas: list[int]) -> MetadataResponse:
    part = MetadataResponsePartition(0, 3, 7, 9, replicas, [], [])
    topic = MetadataResponseTopic(error_code=0, name="t", is_internal=False, partitions=[part])
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=7, topics=[topic])


def _expected(version: int, replicas: list[int]) -> bytes:
    """MetadataResponse v7 (classic) or v9 (flexible) with one topic of one partition, by hand."""
    n = len(replicas)
    elems = struct.pack(f">{n}i", *replicas)
    part = struct.pack(">hiii", 0, 3, 7, 9)
    if version == 7:
        part += struct.pack(">i", n) + elems + struct.pack(">ii", 0, 0)
        topic = struct.pack(">hh", 0, 1) + b"t" + b"\x00" + struct.pack(">i", 1) + part
        return struct.pack(">ii", 0, 0) + b"\xff\xff" + struct.pack(">ii", 7, 1) + topic
    part += _uvarint(n + 1) + elems + b"\x01\x01\x00"
    topic = struct.pack(">h", 0) + b"\x02t" + b"\x00" + b"\x02" + part + struct.pack(">i", -(2**31)) + b"\x00"
    return (
        struct.pack(">i", 0)
        + b"\x01\x00"
        + struct.pack(">i", 7)
        + b"\x02"
        + topic
        + struct.pack(">i", -(2**31))
        + b"\x00"
    )


@pytest.mark.parametrize("version", [7, 9])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("container", [list, tuple])
def test_fixed_array_layout_on_every_path(version: int, n: int, container):
    replicas = [(-1) ** i * (i * 65599) for i in range(n)]
    data = _response(container(replicas)).encode(version)
    assert data == _expected(version, replicas)
    back = MetadataResponse.decode(data, version)
    assert back.topics[0].partitions[0].replica_nodes == replicas


def test_inline_array_read_stops_at_end():
    # v7 ends with the last partition's offline replicas: no later read would notice an
    # array that ran past ``end``
    offline = [1, 2, 3, 4, 5]
    part = MetadataResponsePartition(0, 3, 7, 9, [7], [7], offline)
    topic = MetadataResponseTopic(error_code=0, name="t", is_internal=False, partitions=[part])
    msg = MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=7, topics=[topic])
    data = msg.encode(7)
    assert data.endswith(struct.pack(">6i", 5, *offline))
    buf = memoryview(data + bytes(64))  # the buffer goes on, the message does not
    assert MetadataResponse.decode_from(buf, 0, len(data), 7) == (msg, len(data))
    with pytest.raises(SchemaDecodeError):
        MetadataResponse.decode_from(buf, 0, len(data) - 8, 7)
