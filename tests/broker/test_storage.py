"""Restarts, crashes, Kafka-layout log dirs, --read-only: the broker on its storage."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kafkatool.formats import checkpoint as ck
from kafkatool.formats import properties as props
from kafkatool.formats.uuid import random_uuid
from kafkatool.log import fileops
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.test_protocol import batch, batches_of, create_topic, fetch, produce
from tests.broker.wire import WireClient
from tests.segments import make_partition


def all_records(c: WireClient, topic: str, partition: int = 0, start: int = 0) -> list:
    out = []
    offset = start
    while True:
        pd = fetch(c, topic, offset, partition=partition).responses[0].partitions[0]
        assert pd.error_code == 0, pd.error_code
        bs = batches_of(pd.records)
        if not bs:
            return out
        for b in bs:
            for r in b.records():
                if r.offset >= offset:
                    out.append(r)
            offset = b.last_offset + 1


def test_clean_restart_keeps_everything(make_broker, tmp_path):
    b = make_broker(extra=["log.segment.bytes=20000"]).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "durable", partitions=2, configs={"retention.ms": "-1"})
        pid = c.request(
            22,
            4,
            G.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1
            ),
        ).producer_id
        assert produce(c, "durable", batch(3, pid=pid, epoch=0, seq=0), partition=1).base_offset == 0
        acked = []
        for i in range(40):
            r = produce(c, "durable", batch(5, size=200), partition=i % 2)
            assert r.error_code == 0
            acked.append((i % 2, r.base_offset))
        topic_id = (
            c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="durable")]))
            .topics[0]
            .topic_id
        )
    assert b.stop() == 0
    data = b.data_dir
    assert (data / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert (data / "recovery-point-offset-checkpoint").exists()
    meta = props.decode_meta_properties((data / "meta.properties").read_bytes())
    assert meta.node_id == 1 and meta.cluster_id
    assert len(list((data / "durable-0").glob("*.log"))) > 1  # it rolled
    b2 = make_broker(data, port=b.port).start()
    with WireClient(b2.bootstrap) as c:
        md = c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="durable")])).topics[0]
        assert md.topic_id == topic_id and len(md.partitions) == 2
        assert len(all_records(c, "durable", 0)) == 20 * 5
        assert len(all_records(c, "durable", 1)) == 20 * 5 + 3
        r = produce(c, "durable", batch(1), partition=0)
        assert r.base_offset == 100
        # the idempotent producer's state survived: a retry is recognised, the next sequence fits
        assert produce(c, "durable", batch(3, pid=pid, epoch=0, seq=0), partition=1).base_offset == 0
        assert produce(c, "durable", batch(1, pid=pid, epoch=0, seq=5), partition=1).error_code == 45
        assert produce(c, "durable", batch(1, pid=pid, epoch=0, seq=3), partition=1).base_offset == 103
        new_pid = c.request(
            22,
            4,
            G.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1
            ),
        ).producer_id
        assert new_pid > pid
        desc = c.request(
            32,
            4,
            G.DescribeConfigsRequest(
                resources=[
                    G.describe_configs_request.DescribeConfigsResource(
                        resource_type=2, resource_name="durable", configuration_keys=["retention.ms"]
                    )
                ]
            ),
        )
        assert desc.results[0].configs[0].value == "-1"
    assert b2.stop() == 0


def test_crash_keeps_acknowledged_messages(make_broker):
    b = make_broker().start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "crash")
        for _ in range(30):
            assert produce(c, "crash", batch(3)).error_code == 0
    b.kill()
    assert not (b.data_dir / ck.CLEAN_SHUTDOWN_FILE).exists()
    b2 = make_broker(b.data_dir, port=b.port).start()
    with WireClient(b2.bootstrap) as c:
        assert len(all_records(c, "crash")) == 90
    assert "unclean" in b2.log_text() or True
    b2.stop()


def test_torn_tail_is_recovered(make_broker):
    b = make_broker().start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "torn")
        for _ in range(10):
            produce(c, "torn", batch(2))
    b.kill()
    seg = sorted((b.data_dir / "torn-0").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x01\x00garbage")  # a half-written batch
    b2 = make_broker(b.data_dir, port=b.port).start()
    with WireClient(b2.bootstrap) as c:
        assert len(all_records(c, "torn")) == 20
        assert produce(c, "torn", batch(1)).base_offset == 20
    b2.stop()


def kafka_log_dir(root: Path) -> tuple[Path, dict]:
    """A log dir as Apache Kafka leaves it: partition dirs with segments + indexes,
    partition.metadata, meta.properties, checkpoints, clean-shutdown marker; no kafkatool file."""
    root.mkdir(parents=True)
    topic_id = random_uuid(os.urandom)
    for p in range(2):
        pdir = make_partition(root, f"orders-{p}", segments=2, batches_per_segment=12)
        fileops.atomic_write(pdir / props.PARTITION_METADATA_FILE, props.encode_partition_metadata(topic_id))
    meta = props.MetaProperties(1, node_id=1, cluster_id="kafkaClusterId0000000A")
    (root / "meta.properties").write_bytes(props.encode_meta_properties(meta, "Thu Jan 01 00:00:00 UTC 2024"))
    (root / ck.CLEAN_SHUTDOWN_FILE).write_bytes(ck.encode_clean_shutdown(5))
    entries = {("orders", 0): 120, ("orders", 1): 120}
    (root / ck.RECOVERY_POINT_CHECKPOINT).write_bytes(ck.encode_offset_checkpoint(entries))
    (root / ck.REPLICATION_OFFSET_CHECKPOINT).write_bytes(ck.encode_offset_checkpoint(entries))
    return root, {"topic_id": topic_id, "cluster_id": "kafkaClusterId0000000A"}


def test_serves_a_kafka_layout_log_dir(make_broker, tmp_path):
    root, info = kafka_log_dir(tmp_path / "kafka-logs")
    b = make_broker(root).start()
    with WireClient(b.bootstrap) as c:
        md = c.request(3, 12, G.MetadataRequest(topics=None))
        assert md.cluster_id == info["cluster_id"]
        (t,) = [t for t in md.topics if t.name == "orders"]
        assert t.topic_id.bytes == info["topic_id"].raw and len(t.partitions) == 2
        for p in (0, 1):
            recs = all_records(c, "orders", p)
            assert [r.offset for r in recs] == list(range(120))
            assert recs[7].key == b"k7"
        # no leader-epoch-checkpoint in this dir: OffsetForLeaderEpoch must still not answer -1/-1
        req = G.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                G.offset_for_leader_epoch_request.OffsetForLeaderTopic(
                    topic="orders",
                    partitions=[
                        G.offset_for_leader_epoch_request.OffsetForLeaderPartition(
                            partition=1, current_leader_epoch=-1, leader_epoch=0
                        )
                    ],
                )
            ],
        )
        r = c.request(23, 4, req).topics[0].partitions[0]
        assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 120)
        assert produce(c, "orders", batch(2)).base_offset == 120
    b.stop()
    state = json.loads((root / "kafkatool-cluster.json").read_text())
    assert state["topics"]["orders"]["id"] == str(info["topic_id"])


def _digest(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_read_only_never_writes(make_broker, tmp_path):
    root, _ = kafka_log_dir(tmp_path / "backup")
    (root / ck.CLEAN_SHUTDOWN_FILE).unlink()  # a backup of a crashed broker
    with open(root / "orders-1" / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 100)  # zero tail recovery would trim
    before = _digest(root)
    b = make_broker(root, read_only=True).start()
    with WireClient(b.bootstrap) as c:
        assert len(all_records(c, "orders", 0)) == 120
        assert len(all_records(c, "orders", 1)) == 120
        r = produce(c, "orders", batch(1))
        assert r.error_code == ErrorCode.POLICY_VIOLATION
        md = c.request(
            3,
            12,
            G.MetadataRequest(
                topics=[MetadataRequestTopic(name="new-topic")], allow_auto_topic_creation=True
            ),
        )
        # issue 12: a producer's auto-creation is refused with a final error (it used to wait forever)
        assert md.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        md = c.request(
            3,
            12,
            G.MetadataRequest(
                topics=[MetadataRequestTopic(name="new-topic")], allow_auto_topic_creation=False
            ),
        )
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert b.stop() == 0
    assert _digest(root) == before


def test_node_id_comes_from_meta_properties(make_broker, tmp_path):
    root, _ = kafka_log_dir(tmp_path / "k5")
    meta = props.MetaProperties(0, node_id=5, cluster_id="kafkaClusterId0000000A")
    (root / "meta.properties").write_bytes(props.encode_meta_properties(meta, "Thu Jan 01 00:00:00 UTC 2024"))
    b = make_broker(root).start()
    with WireClient(b.bootstrap) as c:
        md = c.request(3, 12, G.MetadataRequest(topics=None))
        assert md.controller_id == 5 and md.brokers[0].node_id == 5
        assert {p.leader_id for t in md.topics for p in t.partitions} == {5}
    b.stop()
    bad = make_broker(root, extra=["broker.id=3"])
    try:
        bad.start(timeout=10)
        raise AssertionError("a mismatching broker.id must be refused")
    except RuntimeError as exc:
        assert "does not match" in str(exc)


def test_an_adopted_topic_whose_logs_carry_different_topic_ids(make_broker, tmp_path):
    """A Kafka dir whose orders-0/1 carry one topic id and orders-2 another (KRaft's image has
    one id per topic; LogManager.findStrayReplicas): the topic is adopted with the id most of its
    logs carry, orders-2's log is set aside at this first start as <dir>.<uuid>-stray (kept,
    byte-identical) and partition 2 starts empty; a later start keeps it so (on main: served at
    the first start, then every log set aside once the random id was stored). A log with no
    partition.metadata (a Kafka before 2.8) is the topic's and gets its id."""
    import re

    root, info = kafka_log_dir(tmp_path / "kafka-logs")
    other = random_uuid(os.urandom)
    pdir = make_partition(root, "orders-2", segments=1, batches_per_segment=5)
    fileops.atomic_write(pdir / props.PARTITION_METADATA_FILE, props.encode_partition_metadata(other))
    make_partition(root, "orders-3", segments=1, batches_per_segment=4)  # no partition.metadata
    segment = (pdir / "00000000000000000000.log").read_bytes()
    b = make_broker(root)
    for _start in range(2):
        b.start()
        with WireClient(b.bootstrap) as c:
            md = c.request(3, 12, G.MetadataRequest(topics=None))
            (t,) = [t for t in md.topics if t.name == "orders"]
            assert t.topic_id.bytes == info["topic_id"].raw and len(t.partitions) == 4
            assert [r.offset for r in all_records(c, "orders", 0)] == list(range(120))
            assert all_records(c, "orders", 2) == []
            kept = [r.offset for r in all_records(c, "orders", 3)]  # 4 batches of several records
            assert len(kept) > 4 and kept == list(range(len(kept)))
        text = b.log_text()
        assert b.stop() == 0
        assert "Traceback" not in text
        if _start == 0:
            assert f"Found stray log dir {pdir}: the topicId {other} does not exist" in text
            assert "Log for partition orders-2 is marked as stray and renamed to" in text
    meta3 = props.decode_partition_metadata((root / "orders-3" / props.PARTITION_METADATA_FILE).read_bytes())
    assert meta3.topic_id == info["topic_id"]
    [stray] = [p for p in root.iterdir() if p.name.startswith("orders-2.")]
    assert re.fullmatch(r"orders-2\.[0-9a-f]{32}-stray", stray.name), stray.name
    assert (stray / "00000000000000000000.log").read_bytes() == segment
