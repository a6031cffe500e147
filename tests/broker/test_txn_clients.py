"""Transactions with real clients (confluent-kafka / librdkafka, kafka-python) against ``kafkatool serve``:
commit and abort, read_committed vs read_uncommitted, send_offsets_to_transaction, fencing."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.broker.conftest import BrokerProcess
from tests.client_checks import at_high_watermarks

OVERRIDES = [
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
]


@pytest.fixture(scope="module")
def xbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("xbroker") / "data", extra=OVERRIDES).start()
    yield b
    b.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    want: int,
    timeout: float = 10.0,
    until=None,
):
    """Values read from the beginning of every partition (assign, no group). Once ``want``
    have come it reads on until every partition's position is its high watermark, or 0.7 s
    more (read_committed's open transactions or trailing markers keep positions below it),
    so that records beyond ``want`` show. ``until(values)`` true ends the read at once."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": name("reader"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(tps)
    out = []
    deadline = time.monotonic() + timeout
    settle = None
    try:
        while time.monotonic() < deadline:
            if until is not None and until(out):
                break
            if len(out) >= want and settle is None:
                if at_high_watermarks(c, tps):
                    break
                settle = time.monotonic() + 0.7
            if settle is not None and time.monotonic() > settle:
                break
            for m in c.consume(500, 0.2):
                assert not m.error(), m.error()
                out.append(m.value().decode())
    finally:
        c.close()
    return out


def ck_producer(bootstrap: str, tid: str, **extra):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})


def test_confluent_commit_and_abort(xbroker):
    bs = xbroker.bootstrap
    topic = name("ck-txn")
    create_topic(bs, topic, 3)
    p = ck_producer(bs, name("tid"))
    p.init_transactions(20)
    for label, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(40):
            p.produce(topic, key=str(i).encode(), value=f"{label}-{i}".encode())
        p.flush(10)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    rc = read_all(bs, topic, 3, "read_committed", 80)
    ru = read_all(bs, topic, 3, "read_uncommitted", 120)
    assert sorted(rc) == sorted([f"c1-{i}" for i in range(40)] + [f"c2-{i}" for i in range(40)])
    assert len(ru) == 120 and sum(v.startswith("ab-") for v in ru) == 40
    # an open transaction holds read_committed readers back at its first offset
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(10)
    assert "open" not in read_all(bs, topic, 1, "read_committed", 10**9, timeout=2)

    def has_open(values: list[str]) -> bool:
        return "open" in values

    assert "open" in read_all(bs, topic, 1, "read_uncommitted", 10**9, timeout=10, until=has_open)
    p.commit_transaction(20)
    assert "open" in read_all(bs, topic, 1, "read_committed", 10**9, timeout=10, until=has_open)


def test_confluent_send_offsets_to_transaction(xbroker):
    from confluent_kafka import Consumer, TopicPartition

    bs = xbroker.bootstrap
    src, dst = name("src"), name("dst")
    create_topic(bs, src, 1)
    create_topic(bs, dst, 1)
    group = name("etl")
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.assign([TopicPartition(src, 0, 0)])
    p = ck_producer(bs, name("tid"))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(dst, value=b"out-1")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 17)], c.consumer_group_metadata(), 20)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(dst, value=b"out-2")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 99)], c.consumer_group_metadata(), 20)
    p.abort_transaction(20)
    c.close()
    check = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed"})
    try:
        got = check.committed([TopicPartition(src, 0)], 10)
        assert got[0].offset == 17
    finally:
        check.close()
    assert read_all(bs, dst, 1, "read_committed", 1) == ["out-1"]


def test_confluent_fencing(xbroker):
    from confluent_kafka import KafkaException

    bs = xbroker.bootstrap
    topic = name("fence")
    create_topic(bs, topic, 1)
    tid = name("tid")
    old = ck_producer(bs, tid)
    old.init_transactions(20)
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    old.flush(10)
    new = ck_producer(bs, tid)
    new.init_transactions(20)  # aborts the zombie's open transaction and bumps the epoch
    new.begin_transaction()
    new.produce(topic, value=b"fresh")
    new.flush(10)
    new.commit_transaction(20)
    with pytest.raises(KafkaException) as exc:
        old.commit_transaction(10)
    assert exc.value.args[0].fatal() or "fenced" in str(exc.value).lower()
    assert read_all(bs, topic, 1, "read_committed", 1) == ["fresh"]
    assert sorted(read_all(bs, topic, 1, "read_uncommitted", 2)) == ["fresh", "zombie"]


def test_kafka_python_transactions(xbroker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bs = xbroker.bootstrap
    topic = name("kp-txn")
    create_topic(bs, topic, 2)
    group = name("kp-group")
    p = KafkaProducer(
        bootstrap_servers=bs, transactional_id=name("kp-tid"), enable_idempotence=True, acks="all"
    )
    p.init_transactions()
    for label, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(20):
            p.send(topic, key=str(i).encode(), value=f"{label}-{i}".encode())
        p.flush(timeout=10)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction({TopicPartition(topic, 0): _offset_and_metadata(5)}, group)
    p.commit_transaction()
    p.close(timeout=5)

    def consume(isolation: str, want: int):
        c = KafkaConsumer(
            bootstrap_servers=bs,
            isolation_level=isolation,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=1500,
        )
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        out = []
        deadline = time.monotonic() + 10
        while len(out) < want and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=300).values():
                out.extend(r.value.decode() for r in recs)
        time.sleep(0.3)
        for recs in c.poll(timeout_ms=300).values():
            out.extend(r.value.decode() for r in recs)
        c.close()
        return out

    rc = consume("read_committed", 40)
    ru = consume("read_uncommitted", 60)
    assert sorted(rc) == sorted([f"c1-{i}" for i in range(20)] + [f"c2-{i}" for i in range(20)])
    assert len(ru) == 60
    gc = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        assert gc.committed(TopicPartition(topic, 0)) == 5
    finally:
        gc.close()


def _offset_and_metadata(offset: int):
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:
        return OffsetAndMetadata(offset, "")
