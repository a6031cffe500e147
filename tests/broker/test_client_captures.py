"""Every captured real-client Produce payload (../shared/fixtures/client-batches: confluent-kafka,
kcat, kafka-python; magic 0, 1 and 2; every codec; idempotent) replayed at its original Produce
version, then fetched back and compared with what the client was asked to send."""

from __future__ import annotations

import json

from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.test_protocol import create_topic
from tests.broker.test_storage import all_records
from tests.broker.wire import WireClient


def _hex(x):
    return None if x is None else bytes.fromhex(x)


def test_replay_every_client_capture(broker, client_batches_dir):
    captures = sorted(client_batches_dir.glob("*.json"))
    captures = [p for p in captures if p.name not in ("verification.json",)]
    assert len(captures) > 40
    with WireClient(broker.bootstrap) as c:
        for meta_path in captures:
            meta = json.loads(meta_path.read_text())
            if "produce_requests" not in meta:
                continue
            data = (client_batches_dir / meta["file"]).read_bytes()
            topic = "cap-" + meta_path.stem
            create_topic(c, topic)
            for pr in meta["produce_requests"]:
                payload = data[pr["file_offset"] : pr["file_offset"] + pr["length"]]
                req = G.ProduceRequest(
                    transactional_id=None,
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[
                        TopicProduceData(
                            name=topic, partition_data=[PartitionProduceData(index=0, records=payload)]
                        )
                    ],
                )
                resp = c.request(0, pr["produce_version"], req)
                r = resp.responses[0].partition_responses[0]
                assert r.error_code == 0, (meta_path.name, r.error_code, r.error_message)
            got = all_records(c, topic)
            want = meta["messages"]
            assert len(got) == len(want), meta_path.name
            for rec, m in zip(got, want, strict=True):
                assert rec.key == _hex(m["key"]), (meta_path.name, m["index"])
                assert rec.value == _hex(m["value"]), (meta_path.name, m["index"])
                if meta["magic"] == 2 and m["headers"] is not None:
                    assert [(k, v) for k, v in rec.headers] == [(k, _hex(v)) for k, v in m["headers"]], (
                        meta_path.name
                    )
                if m["timestamp"] is not None and meta["magic"] >= 1:
                    assert rec.timestamp == m["timestamp"], meta_path.name
