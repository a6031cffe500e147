"""Real producers' record payloads (../shared/fixtures/client-batches) carried through Produce requests.

The captures hold the `records` bytes and the Produce version/acks/client id of
each request the client sent; rebuilding those requests and parsing them back
must hand out the exact payload bytes as a zero-copy slice of the frame.
"""

from __future__ import annotations

import json

from kafkatool.protocol.framing import encode_request, parse_request
from kafkatool.protocol.generated import ProduceRequest
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData


def test_fixture_payloads_through_produce_requests(client_batches_dir):
    seen = 0
    for meta_path in sorted(client_batches_dir.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        if "produce_requests" not in meta:
            continue
        payload = (client_batches_dir / meta["file"]).read_bytes()
        for i, pr in enumerate(meta["produce_requests"]):
            records = payload[pr["file_offset"] : pr["file_offset"] + pr["length"]]
            version = pr["produce_version"]
            req = ProduceRequest(
                transactional_id=pr.get("transactional_id") if version >= 3 else None,
                acks=pr["acks"],
                timeout_ms=30000,
                topic_data=[TopicProduceData("capture", [PartitionProduceData(0, records)])],
            )
            wire = memoryview(encode_request(0, version, i, pr.get("client_id"), req))
            header, body = parse_request(wire[4:])
            assert (header.api_version, header.client_id) == (version, pr.get("client_id"))
            got = body.topic_data[0].partition_data[0].records
            assert got.obj is wire.obj
            assert got == records
            seen += 1
    assert seen >= 10
