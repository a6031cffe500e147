"""Background retention and compaction in a running broker (the engine the CLI uses)."""

from __future__ import annotations

import time

from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.broker.test_protocol import create_topic, produce
from tests.broker.test_storage import all_records
from tests.broker.wire import WireClient


def earliest(c: WireClient, topic: str) -> int:
    req = G.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2)])
        ],
    )
    return c.request(2, 7, req).topics[0].partitions[0].offset


def keyed_batch(keys: list[bytes], value: bytes) -> bytes:
    now = int(time.time() * 1000)
    return R.build_record_batch([R.SimpleRecord(value + k, k, (), now) for k in keys])


def test_retention_and_compaction_run_in_the_background(make_broker):
    b = make_broker(
        extra=["log.retention.check.interval.ms=300", "log.cleaner.backoff.ms=200", "log.roll.jitter.ms=0"]
    ).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "ret", configs={"segment.bytes": "4000", "retention.bytes": "8000"})
        for _ in range(60):
            assert produce(c, "ret", keyed_batch([b"a", b"b"], b"x" * 300)).error_code == 0
        create_topic(
            c,
            "cmp",
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": "3000",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        keys = [b"k%d" % i for i in range(5)]
        for round_ in range(40):
            assert produce(c, "cmp", keyed_batch(keys, b"v%03d-" % round_ + b"p" * 100)).error_code == 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if earliest(c, "ret") > 0 and len(all_records(c, "cmp")) < 100:
                break
            time.sleep(0.2)
        start = earliest(c, "ret")
        assert start > 0, b.log_text()[-2000:]
        recs = all_records(c, "ret", start=start)
        assert recs[0].offset == start and recs[-1].offset == 119
        cmp = all_records(c, "cmp")
        assert len(cmp) < 100, b.log_text()[-2000:]
        latest = {}
        for r in cmp:
            latest[r.key] = r.value
        assert latest == {k: b"v039-" + b"p" * 100 + k for k in keys}
        offsets = [r.offset for r in cmp]
        assert offsets == sorted(offsets) and offsets[-1] == 199
    assert "retention deleted" in b.log_text() and "log cleaned" in b.log_text()
    b.stop()
    assert (b.data_dir / "cleaner-offset-checkpoint").exists()
