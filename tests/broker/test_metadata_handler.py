"""Metadata for every topic on a real Broker (storage in a temp dir, no sockets): what it
answers for partitions with and without a log here, and that the cyclic collector stays off
while the router has the answer built and encoded (Router.dispatch) and is on again
afterwards."""

from __future__ import annotations

import gc

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.server import Broker
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request, parse_response
from tests.broker.wire import DispatchConn

TOPICS = 100
PER_TOPIC = 10  # 1,000 partition entries: more allocations than a young collection's threshold


def open_broker(d, topics: int):
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    b.open_storage()
    for i in range(topics):
        b.create_topic(f"t{i:03d}", PER_TOPIC, {})
    return b


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = open_broker(tmp_path_factory.mktemp("md"), TOPICS)
    yield b
    b.close_storage()


def answer(broker, version: int = 12) -> bytes:
    """The router's answer to a Metadata request for every topic: the encoded frame."""
    frame = encode_request(3, version, 1, "test", G.MetadataRequest(topics=None))[4:]
    return broker.router.dispatch(DispatchConn(), bytearray(frame))


def all_topics(broker, version: int = 12):
    """What a client reads."""
    return parse_response(answer(broker, version)[4:], 3, version)[1]


def test_every_partition_with_its_leader_and_epoch(tmp_path):
    broker = open_broker(tmp_path, 12)
    try:
        t = broker.topic("t007")
        t.leader_epochs[3] = 5  # as a reload from a foreign dir leaves it
        broker.manager.close_log(("t007", 4))  # no log here: no leader
        resp = all_topics(broker)
    finally:
        broker.close_storage()
    assert [x.name for x in resp.topics] == [f"t{i:03d}" for i in range(12)]
    node = broker.node_id
    got = {x.name: x for x in resp.topics}
    assert got["t007"].topic_id.bytes == t.topic_id.raw
    for x in resp.topics:
        assert [p.partition_index for p in x.partitions] == list(range(PER_TOPIC))
        for p in x.partitions:
            if (x.name, p.partition_index) == ("t007", 4):
                assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    -1,
                    [node],
                    [],
                    [node],
                )
                continue
            assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
                0,
                node,
                [node],
                [node],
                [],
            )
            assert p.leader_epoch == (5 if (x.name, p.partition_index) == ("t007", 3) else 0)


def test_no_collection_while_the_answer_is_built(broker):
    started = []

    def seen(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(seen)
    try:
        data = answer(broker)
        built = len(started)  # before anything else allocates: a collection may follow at once
        assert gc.isenabled()
        # the allocation count the answer left behind still drives the next collection
        kept = [[] for _ in range(2000)]
    finally:
        gc.callbacks.remove(seen)
    resp = parse_response(data[4:], 3, 12)[1]
    assert sum(len(x.partitions) for x in resp.topics) == TOPICS * PER_TOPIC and len(kept) == 2000
    assert built == 0
    assert started, "the collector ran no more after the answer"


def test_collector_held_off_by_the_caller_stays_off(broker):
    gc.disable()
    try:
        all_topics(broker)
        assert not gc.isenabled()
    finally:
        gc.enable()


def request_topics(broker, version: int, *topics):
    """A Metadata request naming ``topics`` ((name, topic id) pairs), as a client reads the answer."""
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    req = G.MetadataRequest(
        topics=[MetadataRequestTopic(name=n, topic_id=i) for n, i in topics], allow_auto_topic_creation=False
    )
    frame = encode_request(3, version, 1, "test", req)[4:]
    return parse_response(broker.router.dispatch(DispatchConn(), bytearray(frame))[4:], 3, version)[1]


@pytest.mark.parametrize("version", [10, 11])
def test_a_topic_id_or_a_null_name_before_v12_is_invalid_request(broker, version):
    """KafkaApis.handleTopicMetadataRequest refuses a null name or a topic id below v12
    (InvalidRequestException): MetadataRequest.getErrorResponse, every topic INVALID_REQUEST
    with its id and its name ("" for null).  The handler answered a null name the response
    cannot carry before v12, and the answer failed to encode (the connection was closed)."""
    import uuid

    tid = uuid.UUID(bytes=broker.topic("t001").topic_id.raw)
    zero = uuid.UUID(int=0)
    for topics in ([(None, tid)], [("t002", zero), ("t001", tid)], [(None, zero)]):
        resp = request_topics(broker, version, *topics)
        assert [(t.name, t.topic_id, t.error_code, t.partitions) for t in resp.topics] == [
            (n or "", i, ErrorCode.INVALID_REQUEST, []) for n, i in topics
        ]
        assert resp.brokers == []
    # names alone are answered as ever; from v12 on a topic is found by its id
    assert [t.error_code for t in request_topics(broker, version, ("t002", zero)).topics] == [0]
    by_id = request_topics(broker, 12, (None, tid)).topics
    assert [(t.name, t.error_code) for t in by_id] == [("t001", 0)]
