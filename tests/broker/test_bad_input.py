"""Bad input: the broker answers with the right error or closes that connection, and every
other client carries on.  Ends with a fuzz run of random and mutated real requests."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.conftest import BrokerProcess
from tests.broker.test_protocol import batch, create_topic, fetch_req, produce
from tests.broker.wire import WireClient


@pytest.fixture(scope="module")
def fb(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("badinput") / "data", extra=["socket.request.max.bytes=1000000"]
    ).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "fz", partitions=2)
        for _ in range(5):
            produce(c, "fz", batch(3))
    yield b
    b.stop()


def healthy(b: BrokerProcess) -> None:
    assert b.alive(), b.log_text()[-2000:]
    with WireClient(b.bootstrap, timeout=5) as c:
        assert c.api_versions().error_code == 0
        assert produce(c, "fz", batch(1)).error_code == 0


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_garbage_body_closes_only_that_connection(fb):
    with WireClient(fb.bootstrap) as other, WireClient(fb.bootstrap) as bad:
        other.api_versions()
        bad.send_raw(frame(struct.pack(">hhi", 3, 12, 7) + b"\x00\x04abcd\x00" + b"\xff" * 30))
        assert bad.closed_by_peer()
        assert other.api_versions().error_code == 0
    healthy(fb)


def test_unknown_api_key_and_version(fb):
    with WireClient(fb.bootstrap) as c:
        c.send_raw(frame(struct.pack(">hhi", 9999, 0, 1) + b"\x00\x01x"))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:
        c.send_raw(frame(struct.pack(">hhi", 0, 99, 1) + b"\x00\x01x" + b"\x00" * 20))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:  # a known schema this broker does not serve (UpdateFeatures)
        c.send(57, 0, G.UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[]))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:  # a served API at a version above the advertised range
        produce_max = next(k.max_version for k in c.api_versions().api_keys if k.api_key == 0)
        c.send_raw(frame(struct.pack(">hhi", 0, produce_max + 1, 1) + b"\x00\x01x\x00" + b"\x00" * 20))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:  # ApiVersions at an unknown version: answered, v0 body, error 35
        c.send_raw(frame(struct.pack(">hhi", 18, 77, 42) + b"\x00\x01x\x00" + b"\x02a\x02b\x00"))
        got, resp = c.recv(18, 0)
        assert got == 42 and resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert c.api_versions().error_code == 0  # the connection stays usable
    healthy(fb)


def test_size_prefix_over_socket_request_max_bytes(fb):
    with WireClient(fb.bootstrap) as c:
        c.send_raw(struct.pack(">i", 1_000_001))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:
        c.send_raw(struct.pack(">i", -5))
        assert c.closed_by_peer()
    with WireClient(fb.bootstrap) as c:
        c.send_raw(frame(b"\x00\x03\x00"))  # shorter than a request header
        assert c.closed_by_peer()
    healthy(fb)


def test_idle_client_and_byte_by_byte(fb):
    idle = socket.create_connection(("127.0.0.1", fb.port))
    try:
        with WireClient(fb.bootstrap) as c:
            data = encode_request(
                3, 12, 5, "slow", G.MetadataRequest(topics=[MetadataRequestTopic(name="fz")])
            )
            for i in range(len(data)):
                c.send_raw(data[i : i + 1])
                if i % 7 == 0:
                    time.sleep(0.001)
            got, resp = c.recv(3, 12)
            assert got == 5 and resp.topics[0].name == "fz" and len(resp.topics[0].partitions) == 2
        healthy(fb)
        idle.settimeout(0.2)
        with pytest.raises(TimeoutError):
            idle.recv(1)  # still open, nothing sent to it
    finally:
        idle.close()


def test_disconnect_mid_request_and_while_parked(fb):
    data = encode_request(0, 9, 1, "x", G.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]))
    for cut in (2, 4, 9, len(data) - 1):
        s = socket.create_connection(("127.0.0.1", fb.port))
        s.sendall(data[:cut])
        s.close()
    # a client that parks a long-poll fetch and goes away
    s = socket.create_connection(("127.0.0.1", fb.port))
    s.sendall(
        encode_request(
            1, 12, 1, "x", fetch_req("fz", 10**6 if False else 16, max_wait=30000, min_bytes=10**6)
        )
    )
    time.sleep(0.2)
    s.close()
    healthy(fb)
    with WireClient(fb.bootstrap) as c:  # appends still wake other long polls normally
        assert produce(c, "fz", batch(1)).error_code == 0


def _real_requests() -> list[tuple[int, int, bytes]]:
    from kafkatool.protocol.generated.create_topics_request import CreatableTopic
    from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    reqs = [
        (18, 3, G.ApiVersionsRequest(client_software_name="a", client_software_version="1")),
        (3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="fz")], allow_auto_topic_creation=False)),
        (3, 1, G.MetadataRequest(topics=None)),
        (
            0,
            9,
            G.ProduceRequest(
                acks=1,
                timeout_ms=100,
                topic_data=[
                    TopicProduceData(
                        name="fz", partition_data=[PartitionProduceData(index=1, records=batch(3, codec=1))]
                    )
                ],
            ),
        ),
        (
            0,
            7,
            G.ProduceRequest(
                acks=-1,
                timeout_ms=100,
                topic_data=[
                    TopicProduceData(
                        name="fz",
                        partition_data=[
                            PartitionProduceData(index=0, records=batch(2, pid=3, epoch=0, seq=0))
                        ],
                    )
                ],
            ),
        ),
        (1, 12, fetch_req("fz", 0, max_wait=10)),
        (1, 4, fetch_req("fz", 3, max_wait=10)),
        (
            2,
            7,
            G.ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsTopic(
                        name="fz", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
                    )
                ],
            ),
        ),
        (
            19,
            7,
            G.CreateTopicsRequest(
                topics=[CreatableTopic(name="fzc", num_partitions=1, replication_factor=1)], timeout_ms=100
            ),
        ),
        (
            32,
            4,
            G.DescribeConfigsRequest(
                resources=[
                    G.describe_configs_request.DescribeConfigsResource(
                        resource_type=2, resource_name="fz", configuration_keys=None
                    )
                ]
            ),
        ),
        (
            22,
            4,
            G.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1
            ),
        ),
        (60, 1, G.DescribeClusterRequest(endpoint_type=1)),
    ]
    return [(k, v, encode_request(k, v, 9, "fuzz", body)[4:]) for k, v, body in reqs]


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.random()
        if op < 0.4 and b:
            i = rnd.randrange(len(b))
            b[i] = rnd.randrange(256)
        elif op < 0.6 and b:
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
        elif op < 0.75:
            del b[rnd.randrange(len(b) + 1) :]
        elif op < 0.9 and len(b) > 8:
            i = rnd.randrange(8, len(b))
            b[i:i] = rnd.randbytes(rnd.randint(1, 8))
        else:
            i = rnd.randrange(8, max(9, len(b)))
            b[i : i + 4] = rnd.choice(
                [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00"]
            )
    b[:2] = data[:2] if rnd.random() < 0.9 else b[:2]
    return bytes(b)


def test_fuzz_random_and_mutated_requests(fb):
    rnd = random.Random(20261122)
    corpus = _real_requests()
    n = 0
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline and n < 3000:
        s = socket.create_connection(("127.0.0.1", fb.port))
        s.settimeout(2)
        try:
            for _ in range(rnd.randint(1, 6)):
                if rnd.random() < 0.15:
                    payload = rnd.randbytes(rnd.randint(0, 64))
                else:
                    payload = _mutate(rnd, rnd.choice(corpus)[2])
                s.sendall(frame(payload))
                n += 1
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(65536):
                    pass
            except (TimeoutError, ConnectionError):
                pass
        except OSError:
            pass  # the broker closed this connection: expected for bad input
        finally:
            s.close()
    assert n > 300
    healthy(fb)
    log = fb.log_text()
    assert "handler failed" not in log, log[log.find("handler failed") - 200 :][:3000]
    assert "Traceback" not in log, log[log.find("Traceback") :][:3000]


def test_idle_connections_are_closed_after_connections_max_idle_ms(make_broker):
    b = make_broker(extra=["connections.max.idle.ms=600"]).start()
    idle = socket.create_connection(("127.0.0.1", b.port))
    with WireClient(b.bootstrap) as busy:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            assert busy.api_versions().error_code == 0
            time.sleep(0.1)
        idle.settimeout(2)
        assert idle.recv(1) == b""  # closed by the broker
    idle.close()
    b.stop()
