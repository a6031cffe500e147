"""Background retention and compaction in a running broker (the engine the CLI uses)."""

from __future__ import annotations

import time

import pytest

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


@pytest.mark.parametrize("damage", ["key_length", "header_count"])
def test_a_record_the_decoder_refuses_marks_its_partition_uncleanable(make_broker, damage):
    """Kafka's cleaner thread: the exception out of a round on a record DefaultRecord.readFrom
    refuses (a 6-byte key length, or 50 headers in no bytes, in a CRC-valid batch) becomes a
    LogCleaningException; the partition is marked uncleanable (not picked again), its
    segments and checkpoint stay, the other logs are cleaned.  Ours: one warning line naming
    the file, the batch offset and the byte position, no traceback, not retried."""
    from tests.log.maint_util import bad_header_count_batch, overlong_varint_batch

    cfg = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"}
    b = make_broker(extra=["log.cleaner.enable=false", "log.roll.jitter.ms=0"]).start()
    with WireClient(b.bootstrap) as c:
        for topic in ("bad", "good"):
            create_topic(c, topic, configs=cfg)
            for i in range(30):
                assert produce(c, topic, keyed_batch([b"k%d" % (i % 3)], b"v" * 40)).error_code == 0
    b.stop()
    # offset 7's batch, rewritten in place with as many bytes (the producer path would refuse it)
    part = b.data_dir / "bad-0"
    seg = max(p for p in part.glob("*.log") if int(p.stem) <= 7)
    data = bytearray(seg.read_bytes())
    (old,) = [bt for bt in R.iter_batches(bytes(data)) if bt.base_offset == 7]
    if damage == "key_length":
        new = bytearray(
            overlong_varint_batch(7, b"k1", b"v" * 40 + b"k1", "key_length", timestamp=old.base_timestamp)
        )
        at, message = old.position + 61 + 4, "varint longer than 5 bytes"  # the key length
    else:
        new = bytearray(bad_header_count_batch(7, b"k1", b"v" * 40 + b"k1", timestamp=old.base_timestamp))
        at, message = old.end, "invalid header count 50"  # after the count, the batch's last byte
    assert len(new) == old.size
    new[12:16] = data[old.position + 12 : old.position + 16]  # the leader epoch (not under the CRC)
    data[old.position : old.end] = new
    seg.write_bytes(bytes(data))
    bad_files = {p.name: p.read_bytes() for p in part.glob("*.log")}
    b.extra = ["log.cleaner.backoff.ms=100", "log.roll.jitter.ms=0"]
    b.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = b.log_text()
        if "log cleaning stopped topic=bad" in text and "log cleaned topic=good" in text:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # ten more cleaner passes
    text = b.log_text()
    stopped = [line for line in text.splitlines() if "log cleaning stopped" in line]
    assert stopped and "log cleaned topic=good" in text, text[-3000:]
    assert len(stopped) == 1, stopped  # marked uncleanable: not picked again
    assert f"{seg}: {message} in the batch at offset 7 (at byte {at})" in stopped[0]
    assert "marked uncleanable" in stopped[0]
    assert "Traceback" not in text and "cleaner pass failed" not in text, text[-3000:]
    assert {p.name: p.read_bytes() for p in part.glob("*.log")} == bad_files
    assert not list(part.glob("*.cleaned"))
    with WireClient(b.bootstrap) as c:
        assert len(all_records(c, "good")) < 30
    b.stop()
