"""Real clients against a real broker: confluent-kafka (librdkafka), kafka-python, kcat."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def messages(n: int, seed: int = 0) -> list[tuple[bytes, bytes | None]]:
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        v = None if i % 37 == 5 else rnd.randbytes(rnd.choice([0, 1, 100, 1000, 5000]))
        out.append((b"key-%05d" % i, v))
    return out


# ---------------------------------------------------------------- confluent-kafka
def ck_admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def ck_create(bootstrap, name, partitions=3, config=None):
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)
    fs = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    fs[name].result(15)


def ck_consume(bootstrap, topic, partitions, n, timeout=30.0):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "assign-only", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
    finally:
        c.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_consume(broker, codec):
    from confluent_kafka import Producer

    t = topic_name(f"ck-{codec}")
    ck_create(broker.bootstrap, t, 3)
    msgs = messages(500, seed=CODECS.index(codec))
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.type": codec,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    delivered = {}

    def cb(err, m):
        assert err is None, err
        delivered[m.key()] = (m.partition(), m.offset())

    for k, v in msgs:
        p.produce(t, value=v, key=k, headers=[("h", k)], on_delivery=cb)
    assert p.flush(30) == 0
    got = ck_consume(broker.bootstrap, t, 3, len(msgs))
    assert len(got) == len(msgs)
    want = dict(msgs)
    for part, off, k, v, h in got:
        assert v == want[k]
        assert h == [("h", k)]
        assert delivered[k] == (part, off)


def test_confluent_admin_configs_and_delete(broker):
    from confluent_kafka.admin import ConfigResource, NewPartitions

    a = ck_admin(broker.bootstrap)
    t = topic_name("ck-admin")
    ck_create(broker.bootstrap, t, 1, {"retention.ms": "12345"})
    res = ConfigResource("topic", t)
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "12345" and not cfg["retention.ms"].is_default
    assert cfg["segment.bytes"].value == "1073741824" and cfg["segment.bytes"].is_default
    assert cfg["cleanup.policy"].value == "delete"
    res2 = ConfigResource("topic", t, set_config={"cleanup.policy": "compact"})
    a.alter_configs([res2])[res2].result(10)
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["cleanup.policy"].value == "compact"
    assert "retention.ms" not in {
        k for k, v in cfg.items() if not v.is_default
    }  # AlterConfigs replaces the set
    a.create_partitions([NewPartitions(t, 4)])[t].result(10)
    md = a.list_topics(t, timeout=10)
    assert len(md.topics[t].partitions) == 4
    bres = ConfigResource("broker", "1")
    bcfg = a.describe_configs([bres])[bres].result(10)
    assert bcfg["num.partitions"].value == "1"
    assert bcfg["message.max.bytes"].value == "1048588"
    a.delete_topics([t])[t].result(10)
    md = a.list_topics(timeout=10)
    assert t not in md.topics
    cl = a.describe_cluster().result(10) if hasattr(a, "describe_cluster") else None
    if cl is not None:
        assert cl.controller.id == 1 and len(cl.nodes) == 1


def test_confluent_delete_records_and_offsets(broker):
    from confluent_kafka import Producer, TopicPartition

    t = topic_name("ck-dr")
    ck_create(broker.bootstrap, t, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(t, value=b"%d" % i, partition=0)
        p.flush(10)
    a = ck_admin(broker.bootstrap)
    if not hasattr(a, "delete_records"):
        pytest.skip("confluent-kafka without delete_records")
    fut = a.delete_records([TopicPartition(t, 0, 10)])
    res = list(fut.values())[0].result(10)
    assert res.low_watermark == 10
    got = ck_consume(broker.bootstrap, t, 1, 10, timeout=15)
    assert [g[1] for g in got] == list(range(10, 20))


# ---------------------------------------------------------------- kafka-python
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_consume(broker, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    t = topic_name(f"kp-{codec}")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(t, 2, 1)])
    admin.close()
    msgs = messages(300, seed=10 + CODECS.index(codec))
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=None if codec == "none" else codec, acks="all"
    )
    futs = [p.send(t, key=k, value=v, headers=[("h", k)]) for k, v in msgs]
    p.flush(30)
    meta = [f.get(10) for f in futs]
    p.close()
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    c.assign([TopicPartition(t, 0), TopicPartition(t, 1)])
    c.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(msgs) and time.monotonic() < deadline:
        for recs in c.poll(500).values():
            got.extend(recs)
    c.close()
    assert len(got) == len(msgs)
    want = dict(msgs)
    pos = {k: (m.partition, m.offset) for (k, _), m in zip(msgs, meta, strict=True)}
    for r in got:
        assert r.value == want[r.key]
        assert list(r.headers) == [("h", r.key)]
        assert pos[r.key] == (r.partition, r.offset)


def test_kafka_python_offsets_for_times(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    t = topic_name("kp-oft")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        p.send(t, value=b"x", partition=0, timestamp_ms=1_000_000 + i * 100)
    p.flush(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = TopicPartition(t, 0)
    assert c.beginning_offsets([tp])[tp] == 0
    assert c.end_offsets([tp])[tp] == 10
    r = c.offsets_for_times({tp: 1_000_450})[tp]
    assert (r.offset, r.timestamp) == (5, 1_000_500)
    assert c.offsets_for_times({tp: 9_000_000})[tp] is None
    c.close()


# ---------------------------------------------------------------- kcat
KCAT = shutil.which("kcat")


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(broker, codec):
    t = topic_name(f"kc-{codec}")
    lines = [f"line-{i}-" + "y" * (i % 300) for i in range(1000)]
    subprocess.run(
        [
            KCAT,
            "-b",
            broker.bootstrap,
            "-P",
            "-t",
            t,
            "-z",
            codec,
            "-X",
            "topic.request.required.acks=-1",
            "-K",
            ":",
        ],
        input="\n".join(f"k{i}:{v}" for i, v in enumerate(lines)) + "\n",
        text=True,
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-C", "-t", t, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.splitlines()
    assert out == [f"k{i}={v}" for i, v in enumerate(lines)]


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_metadata_and_query(broker):
    import json

    t = topic_name("kc-meta")
    subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-P", "-t", t], input="a\nb\nc\n", text=True, check=True, timeout=30
    )
    md = json.loads(
        subprocess.run(
            [KCAT, "-b", broker.bootstrap, "-L", "-J", "-t", t],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    )
    assert md["brokers"][0]["name"].startswith("127.0.0.1:")
    assert md["topics"][0]["topic"] == t
    out = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-Q", "-t", f"{t}:0:-1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert f"{t} [0] offset 3" in out
