"""aiokafka (an asyncio implementation of Kafka's protocol in Python) against ``kafkatool serve``: the
shared client matrix's scenarios, checked byte for byte with the matrix's own data sets and checks.

aiokafka compresses with gzip by itself and with snappy, lz4 and zstd through cramjam, which the
project already installs (python-snappy's own codec library): every codec of the matrix."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

#: what one scenario may take before it fails (every wait below is bounded by it)
BUDGET = 40.0


def name(prefix: str) -> str:
    return f"aio-{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro):
    async def bounded():
        async with asyncio.timeout(BUDGET):
            return await coro

    return asyncio.run(bounded())


async def create_topic(bs: str, topic: str, partitions: int) -> list:
    """CreateTopics through aiokafka's admin client; the topic's Metadata partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bs)
    await admin.start()
    try:
        answer = await admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=10000)
        assert [(t[0], t[1]) for t in answer.topic_errors] == [(topic, 0)], answer
        [md] = await admin.describe_topics([topic])
        return md["partitions"]
    finally:
        await admin.close()


def to_rec(compat, m):
    return compat.Rec(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp)


async def produce_all(producer, topic, msgs, partition_of=None) -> dict:
    """Send in order (acks as the producer says), then every answer: {idx: (partition, offset)}."""
    futures = []
    for m in msgs:
        futures.append(
            (
                m.idx,
                await producer.send(
                    topic,
                    key=m.key,
                    value=m.value,
                    headers=list(m.headers),
                    partition=None if partition_of is None else partition_of(m),
                    timestamp_ms=m.timestamp,
                ),
            )
        )
    delivered = {}
    for idx, future in futures:
        md = await future
        delivered[idx] = (md.partition, md.offset)
    return delivered


async def read_all(compat, bs, topic, partitions, want, settle=0.5, **kw) -> list:
    """Every partition from the beginning (assign, no group): until ``want`` records came and
    each partition's position reached the end the broker gave (its high watermark, or for
    read_committed the last stable offset), then ``settle`` s more for a record too many."""
    c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, fetch_max_wait_ms=100, **kw)
    await c.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    recs = []
    try:
        while len(recs) < want:
            for ms in (await c.getmany(timeout_ms=200)).values():
                recs.extend(to_rec(compat, m) for m in ms)
        end = time.monotonic() + settle
        while time.monotonic() < end:
            for ms in (await c.getmany(timeout_ms=100)).values():
                recs.extend(to_rec(compat, m) for m in ms)
    finally:
        await c.stop()
    return recs


def test_metadata(serve):
    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=serve.bootstrap)
        await admin.start()
        try:
            return await admin.describe_cluster(), await admin.list_topics()
        finally:
            await admin.close()

    cluster, _ = run(scenario())
    [broker] = cluster["brokers"]
    assert (broker["host"], broker["port"]) == ("127.0.0.1", serve.port)
    assert cluster["controller_id"] == broker["node_id"]
    assert cluster["cluster_id"]


def test_create_and_delete_topic(serve):
    topic = name("admin")

    async def scenario():
        parts = await create_topic(serve.bootstrap, topic, 3)
        admin = AIOKafkaAdminClient(bootstrap_servers=serve.bootstrap)
        await admin.start()
        try:
            again = await admin.create_topics([NewTopic(topic, 3, 1)], timeout_ms=10000)
            listed = topic in await admin.list_topics()
            deleted = await admin.delete_topics([topic], timeout_ms=10000)
            while topic in await admin.list_topics():  # bounded by run()'s BUDGET
                await asyncio.sleep(0.1)
            gone = True
            deleted_again = await admin.delete_topics([topic], timeout_ms=10000)
            return parts, again, listed, deleted, gone, deleted_again
        finally:
            await admin.close()

    parts, again, listed, deleted, gone, deleted_again = run(scenario())
    node = parts[0]["leader"]
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["error_code"]) for p in parts] == [
        (p, node, [node], [node], 0) for p in range(3)
    ]
    # TOPIC_ALREADY_EXISTS (36), UNKNOWN_TOPIC_OR_PARTITION (3) as Kafka answers
    assert [t[:2] for t in again.topic_errors] == [(topic, 36)]
    assert listed and gone
    assert list(deleted.topic_error_codes) == [(topic, 0)]
    assert list(deleted_again.topic_error_codes) == [(topic, 3)]


def test_create_topics_refusals(serve):
    """CreateTopics' refusals as Kafka 3.7 (KRaft) words them, byte for byte as the client gets
    them: Topic.validate's InvalidTopicException messages, and a name that collides with an
    existing topic by '.' against '_' (ReplicationControlManager.validateNewTopicNames)."""
    base = name("refused").replace("-", "_")
    dotted, long_ascii, long_utf16 = base.replace("_", "."), "x" * 250, "\U0001f600" * 125
    too_long = "Topic name is invalid: the length of '{}' is longer than the max allowed length 249"
    cases = {
        "bad name!": (
            17,
            "Topic name is invalid: 'bad name!' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        ),
        "..": (17, "Topic name is invalid: '..' is not allowed"),
        long_ascii: (17, too_long.format(long_ascii)),
        # String.length() counts UTF-16 code units: 125 characters outside the BMP are 250
        long_utf16: (17, too_long.format(long_utf16)),
        dotted: (17, f"Topic '{dotted}' collides with existing topic: {base}"),
        base: (36, f"Topic '{base}' already exists."),
        base + ".x": (0, None),
    }

    async def scenario():
        await create_topic(serve.bootstrap, base, 1)
        admin = AIOKafkaAdminClient(bootstrap_servers=serve.bootstrap)
        await admin.start()
        try:
            out = {}
            for topic in cases:
                answer = await admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=10000)
                [(t, code, message)] = answer.topic_errors
                out[t] = (code, message)
            return out
        finally:
            await admin.close()

    assert run(scenario()) == cases


def test_create_topics_duplicates(serve):
    """A name a CreateTopics request holds twice: KRaft's ControllerApis leaves its entries out and
    answers one INVALID_REQUEST per such name after the other topics, in its HashSet's order
    (checked with a JDK: [aio-dup-b, aio-dup-a])."""
    ok = name("dup-ok")
    request = ["aio-dup-a", ok, "aio-dup-b", "aio-dup-a", "aio-dup-b"]

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=serve.bootstrap)
        await admin.start()
        try:
            answer = await admin.create_topics([NewTopic(t, 1, 1) for t in request], timeout_ms=10000)
            return [tuple(t) for t in answer.topic_errors], await admin.list_topics()
        finally:
            await admin.close()

    results, listed = run(scenario())
    assert results == [
        (ok, 0, None),
        ("aio-dup-b", 42, "Duplicate topic name."),
        ("aio-dup-a", 42, "Duplicate topic name."),
    ]
    assert ok in listed and "aio-dup-a" not in listed and "aio-dup-b" not in listed


def produce_then_read(serve, compat, topic: str, partitions: int, ds, **producer) -> None:
    """``ds`` through an AIOKafkaProducer of ``producer``'s settings into a new ``topic``, read
    back from the beginning and checked byte for byte (the matrix's verify)."""

    async def scenario():
        await create_topic(serve.bootstrap, topic, partitions)
        p = AIOKafkaProducer(bootstrap_servers=serve.bootstrap, acks="all", **producer)
        await p.start()
        try:
            delivered = await produce_all(p, topic, ds)
        finally:
            await p.stop()
        return delivered, await read_all(compat, serve.bootstrap, topic, partitions, len(ds))

    delivered, recs = run(scenario())
    compat.verify(ds, recs, delivered=delivered)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "none"])
def test_produce_consume(serve, compat, codec):
    ds = compat.make_dataset(compat.N_MESSAGES, seed=11)
    produce_then_read(
        serve,
        compat,
        name(f"pc-{codec}"),
        3,
        ds,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        enable_idempotence=False,
    )


def test_idempotent(serve, compat):
    ds = compat.make_dataset(compat.IDEMPOTENT_N, seed=41, key_prefix="i-")
    produce_then_read(serve, compat, name("idem"), 3, ds, enable_idempotence=True)


def test_large_message(serve, compat):
    ds = compat.make_dataset(1, seed=61, key_prefix="big-")
    ds[0].value = os.urandom(compat.LARGE_VALUE)
    produce_then_read(serve, compat, name("big"), 1, ds)


def test_transactions(serve, compat):
    topic = name("txn")
    c1, ab, c2 = compat.txn_datasets()

    async def scenario():
        await create_topic(serve.bootstrap, topic, 3)
        p = AIOKafkaProducer(bootstrap_servers=serve.bootstrap, transactional_id=f"aio-txn-{topic}")
        admin = AIOKafkaAdminClient(bootstrap_servers=serve.bootstrap)
        await p.start()
        await admin.start()
        # each transaction also commits an offset of a group (AddOffsetsToTxn + TxnOffsetCommit):
        # the number of records sent so far, which only a committed transaction makes the group's
        group, sent, offsets = name("txn-g"), 0, []
        try:
            for batch, commit in ((c1, True), (ab, False), (c2, True)):
                await p.begin_transaction()
                await produce_all(p, topic, batch)
                sent += len(batch)
                await p.send_offsets_to_transaction({TopicPartition(topic, 0): sent}, group)
                await (p.commit_transaction() if commit else p.abort_transaction())
                offsets.append(await admin.list_consumer_group_offsets(group))
        finally:
            await admin.close()
            await p.stop()
        rc = await read_all(
            compat, serve.bootstrap, topic, 3, len(c1) + len(c2), settle=1.0, isolation_level="read_committed"
        )
        ru = await read_all(compat, serve.bootstrap, topic, 3, len(c1) + len(ab) + len(c2))
        return rc, ru, offsets

    rc, ru, offsets = run(scenario())
    compat.check_transactions(c1, ab, c2, rc, ru)
    # the group's offsets after each transaction: the aborted one's offset never became the group's
    tp = TopicPartition(topic, 0)
    assert [{k: v.offset for k, v in o.items()} for o in offsets] == [{tp: 50}, {tp: 50}, {tp: 110}]


def test_offsets_for_times(serve, compat):
    topic = name("times")
    base = (int(time.time()) - 3600) * 1000
    ds = compat.make_dataset(30, seed=31, key_prefix="t-")
    for m in ds:
        m.timestamp = base + m.idx * 1000
    times = {"ts10": base + 10_000, "ts10-500ms": base + 9_500, "ts0": base, "after_last": base + 100_000}

    async def scenario():
        await create_topic(serve.bootstrap, topic, 1)
        p = AIOKafkaProducer(bootstrap_servers=serve.bootstrap, acks="all", linger_ms=0)
        await p.start()
        try:
            await produce_all(p, topic, ds, partition_of=lambda m: 0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=serve.bootstrap)
        await c.start()
        tp = TopicPartition(topic, 0)
        try:
            lo = (await c.beginning_offsets([tp]))[tp]
            hi = (await c.end_offsets([tp]))[tp]
            found = {}
            for what, ts in times.items():
                r = (await c.offsets_for_times({tp: ts}))[tp]
                found[what] = None if r is None else (r.offset, r.timestamp)
        finally:
            await c.stop()
        return lo, hi, found

    lo, hi, found = run(scenario())
    assert (lo, hi) == (0, 30)
    # ListOffsets by time: the first record at or after it, with its timestamp; none after the last
    assert found == {
        "ts10": (10, base + 10_000),
        "ts10-500ms": (10, base + 10_000),
        "ts0": (0, base),
        "after_last": None,
    }


def test_group(serve, compat):
    topic, group = name("group"), name("g")
    parts = compat.GROUP_PARTITIONS
    first = compat.make_dataset(compat.GROUP_FIRST, seed=21, key_prefix="g1-")
    second = compat.make_dataset(compat.GROUP_SECOND, seed=22, key_prefix="g2-")

    def member():
        # short group timers: the broker's group.min.session.timeout.ms is 6 s
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=serve.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )

    async def poll(c, into):
        for ms in (await c.getmany(timeout_ms=100)).values():
            into.extend(to_rec(compat, m) for m in ms)

    async def scenario():
        await create_topic(serve.bootstrap, topic, parts)
        c1, c2 = member(), member()
        got1, got2 = [], []
        await c1.start()
        await c2.start()
        # both members hold a disjoint, complete assignment that lasted 1 s
        snap, since = None, 0.0
        while True:
            await poll(c1, got1)
            await poll(c2, got2)
            a1 = sorted(tp.partition for tp in c1.assignment())
            a2 = sorted(tp.partition for tp in c2.assignment())
            if not (a1 and a2 and sorted(a1 + a2) == list(range(parts))):
                snap = None
            elif (a1, a2) != snap:
                snap, since = (a1, a2), time.monotonic()
            elif time.monotonic() - since >= 1.0:
                break
        p = AIOKafkaProducer(bootstrap_servers=serve.bootstrap, acks="all")
        await p.start()
        try:
            delivered1 = await produce_all(p, topic, first, partition_of=lambda m: m.idx % parts)
            while len(got1) + len(got2) < len(first):
                await poll(c1, got1)
                await poll(c2, got2)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                await poll(c1, got1)
                await poll(c2, got2)
            # commit both before either leaves (a leave rebalances the other)
            await c1.commit()
            await c2.commit()
            await c1.stop()
            await c2.stop()
            delivered2 = await produce_all(p, topic, second, partition_of=lambda m: m.idx % parts)
        finally:
            await p.stop()
        c3, got3 = member(), []
        await c3.start()
        try:
            while len(got3) < len(second):
                await poll(c3, got3)
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                await poll(c3, got3)
        finally:
            await c3.stop()
        return snap, got1, got2, got3, delivered1, delivered2

    (a1, a2), got1, got2, got3, delivered1, delivered2 = run(scenario())
    assert {r.partition for r in got1} <= set(a1) and {r.partition for r in got2} <= set(a2)
    compat.verify(first, got1 + got2, delivered=delivered1)
    # the fresh member resumed at the committed offsets: only the new records
    compat.verify(second, got3, delivered=delivered2)
