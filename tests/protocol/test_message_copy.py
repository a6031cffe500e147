"""Message.__copy__: the shallow copy the ACL rules narrow (broker/security/acl_rules.install)."""

from __future__ import annotations

import copy

from kafkatool.protocol import generated as G
from kafkatool.protocol.framing import encode_request, parse_request
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData


def _request():
    return G.ProduceRequest(
        transactional_id="t",
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=n, partition_data=[PartitionProduceData(index=0, records=None)])
            for n in ("a", "b")
        ],
    )


def test_a_copy_equals_its_original_and_shares_its_lists():
    req = _request()
    c = copy.copy(req)
    assert c is not req and type(c) is type(req) and c == req
    assert c.topic_data is req.topic_data


def test_replacing_a_list_of_the_copy_leaves_the_original_whole():
    req = _request()
    c = copy.copy(req)
    c.topic_data = [t for t in c.topic_data if t.name == "a"]
    assert [t.name for t in req.topic_data] == ["a", "b"]
    assert [t.name for t in c.topic_data] == ["a"]


def test_a_decoded_request_copies_with_its_unknown_tags():
    frame = encode_request(0, 9, 7, "client", _request())[4:]
    _, req = parse_request(bytes(frame))
    c = copy.copy(req)
    assert c == req and c._unknown_tags == req._unknown_tags
