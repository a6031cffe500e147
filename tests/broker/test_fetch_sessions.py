"""Incremental fetch sessions (KIP-227) against a real ``serve``: raw Fetch requests for the
session rules and error codes (FetchSession.scala's), and the real client that uses sessions
(kafka-python 3.x).  librdkafka 2.x writes session id 0 / epoch -1 into every Fetch
(rdkafka_fetcher.c), so confluent-kafka and kcat stay sessionless; tests/broker/test_clients
covers them."""

from __future__ import annotations

import time

import pytest

from kafkatool.broker.fetch_session import MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.delete_records_request import DeleteRecordsPartition, DeleteRecordsTopic
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from tests.broker.conftest import BrokerProcess
from tests.broker.test_protocol import batch, create_topic, produce
from tests.broker.wire import WireClient


def fetch(
    c: WireClient,
    parts: dict,
    *,
    session_id: int = 0,
    epoch: int = 0,
    forget: dict | None = None,
    replica_id: int = -1,
    max_wait: int = 0,
    version: int = 12,
    topic_ids: dict | None = None,
):
    """``parts``: {topic: {partition: fetch offset}}; ``forget``: {topic: [partitions]}."""
    req = _request(parts, session_id, epoch, forget, replica_id, max_wait, version, topic_ids)
    return c.request(1, version, req)


def _request(parts, session_id, epoch, forget, replica_id, max_wait, version, topic_ids):
    def topic(t, **kw):
        if version >= 13:
            return {"topic_id": topic_ids[t], **kw}
        return {"topic": t, **kw}

    return G.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                **topic(
                    t,
                    partitions=[
                        FetchPartition(
                            partition=p, fetch_offset=o, partition_max_bytes=1 << 20, log_start_offset=-1
                        )
                        for p, o in ps.items()
                    ],
                )
            )
            for t, ps in parts.items()
        ],
        forgotten_topics_data=[ForgottenTopic(**topic(t, partitions=ps)) for t, ps in (forget or {}).items()],
        rack_id="",
    )


def answered(resp) -> dict:
    """{(topic, partition): PartitionData} of a response."""
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def records_of(pd) -> int:
    return len(pd.records or b"")


@pytest.fixture
def c(broker):
    with WireClient(broker.bootstrap) as client:
        yield client


def test_full_fetch_opens_a_session_and_incremental_fetches_carry_only_changes(c):
    create_topic(c, "fs-a", partitions=3)
    produce(c, "fs-a", batch(3), partition=0)
    full = fetch(c, {"fs-a": {0: 0, 1: 0, 2: 0}}, epoch=0)
    assert full.error_code == 0 and full.session_id > 0
    got = answered(full)
    assert set(got) == {("fs-a", 0), ("fs-a", 1), ("fs-a", 2)}  # a full answer names everything
    assert records_of(got[("fs-a", 0)]) > 0 and got[("fs-a", 0)].high_watermark == 3
    sid = full.session_id
    # epoch 1: p0 moves to offset 3; nothing changed anywhere: nothing in the answer
    r = fetch(c, {"fs-a": {0: 3}}, session_id=sid, epoch=1)
    assert (r.error_code, r.session_id, answered(r)) == (0, sid, {})
    # new records in p1: only p1 answers, at the offsets the session holds (p1 from 0)
    produce(c, "fs-a", batch(2), partition=1)
    r = fetch(c, {}, session_id=sid, epoch=2)
    got = answered(r)
    assert set(got) == {("fs-a", 1)} and records_of(got[("fs-a", 1)]) > 0
    assert got[("fs-a", 1)].high_watermark == 2
    # the same epoch again (a duplicate) is refused and changes nothing
    r = fetch(c, {}, session_id=sid, epoch=2)
    assert (r.error_code, r.session_id, r.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    # p1's offset is still 0 in the session: its records come again until the client moves it
    r = fetch(c, {"fs-a": {1: 2}}, session_id=sid, epoch=3)
    assert (r.error_code, answered(r)) == (0, {})
    # forgotten partitions leave the session: p2's new records do not come
    r = fetch(c, {}, session_id=sid, epoch=4, forget={"fs-a": [2]})
    assert r.error_code == 0
    produce(c, "fs-a", batch(1), partition=2)
    r = fetch(c, {}, session_id=sid, epoch=5)
    assert (r.error_code, answered(r)) == (0, {})
    # added back at offset 0: it answers with its records
    r = fetch(c, {"fs-a": {2: 0}}, session_id=sid, epoch=6)
    assert set(answered(r)) == {("fs-a", 2)}


def test_session_errors_and_closing(c):
    create_topic(c, "fs-b", partitions=2)
    r = fetch(c, {"fs-b": {0: 0}}, session_id=123456, epoch=1)
    assert (r.error_code, r.session_id, r.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    sid = fetch(c, {"fs-b": {0: 0, 1: 0}}, epoch=0).session_id
    assert sid > 0
    r = fetch(c, {}, session_id=sid, epoch=7)
    assert r.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # a session made with topic names cannot be used by a v13+ fetch (topic ids), nor the reverse
    r = fetch(c, {}, session_id=sid, epoch=1, version=13)
    assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert fetch(c, {}, session_id=sid, epoch=1).error_code == 0
    # a full fetch naming a session closes it and opens another
    r = fetch(c, {"fs-b": {0: 0}}, session_id=sid, epoch=0)
    assert r.error_code == 0 and r.session_id not in (0, sid)
    assert fetch(c, {}, session_id=sid, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # epoch -1 closes the named session and is answered sessionless
    sid2 = r.session_id
    r = fetch(c, {"fs-b": {0: 0}}, session_id=sid2, epoch=-1)
    assert (r.error_code, r.session_id, len(answered(r))) == (0, 0, 1)
    assert fetch(c, {}, session_id=sid2, epoch=1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # forgetting every partition closes the session; the answer is sessionless
    sid3 = fetch(c, {"fs-b": {0: 0}}, epoch=0).session_id
    r = fetch(c, {}, session_id=sid3, epoch=1, forget={"fs-b": [0]})
    assert (r.error_code, r.session_id, r.responses) == (0, 0, [])
    assert fetch(c, {}, session_id=sid3, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Fetch before v7 has no sessions
    r = fetch(c, {"fs-b": {0: 0}}, version=6)
    assert r.error_code == 0 and len(answered(r)) == 1


def test_log_start_and_errors_are_sent_when_they_change(c):
    create_topic(c, "fs-c", partitions=1)
    produce(c, "fs-c", batch(4))
    full = fetch(c, {"fs-c": {0: 4}, "fs-nope": {0: 0}}, epoch=0)
    sid = full.session_id
    got = answered(full)
    assert got[("fs-nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got[("fs-c", 0)].log_start_offset == 0
    # an erroneous partition answers every time, an unchanged good one does not
    r = fetch(c, {}, session_id=sid, epoch=1)
    assert set(answered(r)) == {("fs-nope", 0)}
    req = G.DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(name="fs-c", partitions=[DeleteRecordsPartition(partition_index=0, offset=2)])
        ],
        timeout_ms=1000,
    )
    assert c.request(21, 2, req).topics[0].partitions[0].error_code == 0
    r = fetch(c, {}, session_id=sid, epoch=2)
    got = answered(r)
    assert got[("fs-c", 0)].log_start_offset == 2 and records_of(got[("fs-c", 0)]) == 0
    r = fetch(c, {}, session_id=sid, epoch=3)
    assert set(answered(r)) == {("fs-nope", 0)}


def test_v13_sessions_name_topics_by_id(c):
    create_topic(c, "fs-d", partitions=2)
    md = c.request(3, 12, G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name="fs-d")]))
    ids = {"fs-d": md.topics[0].topic_id}
    full = fetch(c, {"fs-d": {0: 0, 1: 0}}, epoch=0, version=13, topic_ids=ids)
    assert full.error_code == 0 and full.session_id > 0
    assert {(t.topic_id, p.partition_index) for t in full.responses for p in t.partitions} == {
        (ids["fs-d"], 0),
        (ids["fs-d"], 1),
    }
    produce(c, "fs-d", batch(2), partition=1)
    r = fetch(c, {}, session_id=full.session_id, epoch=1, version=13, topic_ids=ids)
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in r.responses] == [
        (ids["fs-d"], [1])
    ]
    r = fetch(c, {}, session_id=full.session_id, epoch=2, version=12)
    assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_long_poll_keeps_the_session_consistent(broker, c):
    create_topic(c, "fs-e", partitions=2)
    sid = fetch(c, {"fs-e": {0: 0, 1: 0}}, epoch=0).session_id
    # an incremental long poll wakes on an append and answers only that partition
    corr = c.send(1, 12, _request({}, sid, 1, None, -1, 5000, 12, None))
    time.sleep(0.2)
    with WireClient(broker.bootstrap) as other:
        produce(other, "fs-e", batch(2), partition=1)
    got_corr, r = c.recv(1, 12)
    assert got_corr == corr and (r.error_code, r.session_id) == (0, sid)
    assert set(answered(r)) == {("fs-e", 1)}
    # a long poll superseded by the session's next epoch (a retry on another connection)
    # is answered INVALID_FETCH_SESSION_EPOCH when it ends; the newer request is answered
    corr = c.send(1, 12, _request({"fs-e": {1: 2}}, sid, 2, None, -1, 1500, 12, None))
    time.sleep(0.2)
    with WireClient(broker.bootstrap) as other:
        r2 = fetch(other, {"fs-e": {1: 2}}, session_id=sid, epoch=3)
    assert r2.error_code == 0
    got_corr, r = c.recv(1, 12)
    assert got_corr == corr
    assert (r.error_code, r.session_id, r.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])
    assert fetch(c, {}, session_id=sid, epoch=4).error_code == 0


def test_a_fetch_with_nothing_to_read_is_answered_at_once(c):
    """ReplicaManager.fetchMessages answers at once when the fetch reads no partition: the
    follower's fetch that forgets its throttled partitions (its session left empty) is not
    parked for max_wait_ms, which a partition in the session would be."""
    create_topic(c, "fs-f", partitions=1)
    sid = fetch(c, {"fs-f": {0: 0}}, epoch=0).session_id
    t0 = time.monotonic()
    r = fetch(c, {}, session_id=sid, epoch=1, max_wait=1500)  # fs-f-0: nothing new, parked
    assert (r.error_code, answered(r)) == (0, {}) and time.monotonic() - t0 >= 1.25
    t0 = time.monotonic()
    r = fetch(c, {}, session_id=sid, epoch=2, forget={"fs-f": [0]}, max_wait=1500)
    # FetchManager closes a session left empty and answers sessionless
    assert (r.error_code, r.session_id, answered(r)) == (0, 0, {})
    r = fetch(c, {}, max_wait=1500)  # a sessionless fetch of nothing
    assert r.error_code == 0 and r.responses == []
    assert time.monotonic() - t0 < 1.0  # either one parked would take 1.5 s


def test_cache_slots_and_privileged_eviction(make_broker, tmp_path):
    b = make_broker(tmp_path / "data", extra=["max.incremental.fetch.session.cache.slots=1"]).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "fs-f", partitions=3)
        consumer = fetch(c, {"fs-f": {0: 0}}, epoch=0).session_id
        assert consumer > 0
        # the cache is full and the consumer's session is recent: another consumer gets none,
        # not even with more partitions (only a follower may evict a session this young)
        assert fetch(c, {"fs-f": {0: 0, 1: 0, 2: 0}}, epoch=0).session_id == 0
        assert fetch(c, {}, session_id=consumer, epoch=1).error_code == 0
        # a follower's session is privileged: it evicts the consumer's
        follower = fetch(c, {"fs-f": {0: 0}}, epoch=0, replica_id=7).session_id
        assert follower > 0
        assert fetch(c, {}, session_id=consumer, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # and no consumer evicts it back while it is younger than the eviction time
        assert MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS == 120_000
        assert fetch(c, {"fs-f": {0: 0, 1: 0, 2: 0}}, epoch=0).session_id == 0
        assert fetch(c, {}, session_id=follower, epoch=1, replica_id=7).error_code == 0
    b.stop()
    b = make_broker(tmp_path / "data0", extra=["max.incremental.fetch.session.cache.slots=0"]).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "fs-g")
        r = fetch(c, {"fs-g": {0: 0}}, epoch=0)
        assert (r.error_code, r.session_id, len(answered(r))) == (0, 0, 1)


def test_each_process_of_a_broker_has_its_own_sessions(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["kafkatool.processes=2", "num.partitions=1"]).start(
        timeout=40
    )
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "fs-h", partitions=4)
            md = c.request(
                3, 12, G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name="fs-h")])
            )
        ports = {n.node_id: n.port for n in md.brokers}
        owned: dict[int, dict] = {}
        for p in md.topics[0].partitions:
            owned.setdefault(p.leader_id, {})[p.partition_index] = 0
        assert set(owned) == set(ports) and len(ports) == 2
        sids = {}
        clients = {n: WireClient(f"127.0.0.1:{port}") for n, port in ports.items()}
        try:
            for n, cl in clients.items():
                r = fetch(cl, {"fs-h": owned[n]}, epoch=0)
                assert r.error_code == 0 and r.session_id > 0
                assert all(pd.error_code == 0 for pd in answered(r).values())
                sids[n] = r.session_id
            a, z = sorted(clients)
            # a session lives in the process that made it: the other process does not know it
            assert fetch(clients[z], {}, session_id=sids[a], epoch=1).error_code == (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            )
            for n, cl in clients.items():
                assert fetch(cl, {}, session_id=sids[n], epoch=1).error_code == 0
        finally:
            for cl in clients.values():
                cl.close()
    finally:
        b.stop()


def test_kafka_python_consumes_through_incremental_sessions(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "fs-kp"
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    # assign(), not subscribe() without a group: kafka-python 3.0.12 can lose the Metadata
    # update its subscribe() asks for (see tests/broker/security/test_sasl.py's byte-exact test)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        consumer_timeout_ms=200,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(3)])

    def round_trip(prefix: bytes) -> None:
        want = [prefix + b"%d" % i for i in range(30)]
        for i, v in enumerate(want):
            producer.send(topic, value=v, partition=i % 3)
        producer.flush(10)
        got = []
        for _ in range(100):
            got += [m.value for m in consumer]
            if len(got) >= len(want):
                break
        assert sorted(got) == sorted(want)

    try:
        round_trip(b"a")
        # more records arrive through the same session (incremental answers carry them)
        round_trip(b"b")
        [handler] = consumer._fetcher._session_handlers.values()
        meta = handler.next_metadata
        assert meta.session_id != 0 and meta.epoch > 2, (meta.session_id, meta.epoch)
    finally:
        consumer.close()
        producer.close()


def test_the_followers_session_handler_against_serve(c):
    """The client half the replica fetcher uses: full, then incremental fetches; a session
    the broker lost or an answer that never came sends it back to a full fetch, which opens a
    new one."""
    from kafkatool.broker.fetch_session import FetchSessionHandler

    create_topic(c, "fs-i", partitions=2)
    h = FetchSessionHandler()

    def round_trip(offsets: dict):
        want = {("fs-i", p): (-1, o, -1, -1, 1 << 20) for p, o in offsets.items()}
        send, forget = h.build(want)
        parts = {"fs-i": {tp[1]: want[tp][1] for tp in send}} if send else {}
        forgotten = {"fs-i": [p for _, p in forget]} if forget else None
        r = fetch(c, parts, session_id=h.session_id, epoch=h.epoch, forget=forgotten, replica_id=9)
        ok = h.handle_response(r.error_code, r.session_id, list(answered(r)))
        return send, r, ok

    send, r, ok = round_trip({0: 0, 1: 0})
    assert ok and len(send) == 2 and h.session_id == r.session_id > 0 and h.epoch == 1
    send, r, ok = round_trip({0: 0, 1: 0})
    assert ok and send == [] and answered(r) == {} and h.epoch == 2
    produce(c, "fs-i", batch(2), partition=0)
    send, r, ok = round_trip({0: 0, 1: 0})
    assert ok and send == [] and set(answered(r)) == {("fs-i", 0)}
    send, r, ok = round_trip({0: 2})  # partition 1 leaves the session
    assert ok and send == [("fs-i", 0)] and answered(r) == {}
    # the broker loses the session (closed from elsewhere): one refused fetch, then a full one
    fetch(c, {"fs-i": {0: 0}}, session_id=h.session_id, epoch=-1)
    send, r, ok = round_trip({0: 2})
    assert not ok and r.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and h.epoch == 0
    send, r, ok = round_trip({0: 2, 1: 0})
    assert ok and len(send) == 2 and h.session_id == r.session_id > 0 and h.epoch == 1
    # a request that got no answer: the next fetch is full and replaces the session
    old = h.session_id
    h.handle_error()
    send, r, ok = round_trip({0: 2, 1: 0})
    assert ok and len(send) == 2 and h.session_id not in (0, old)
    assert fetch(c, {}, session_id=old, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
