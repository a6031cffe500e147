"""Protocol semantics over raw sockets with the project's codec: one broker for the module."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request
from kafkatool.protocol.generated.create_topics_request import CreatableTopic, CreatableTopicConfig
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from kafkatool.protocol.generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.wire import WireClient


def create_topic(c: WireClient, name: str, partitions: int = 1, configs: dict | None = None, error: int = 0):
    """CreateTopics of one topic; asserts its error code is ``error``, returns its result."""
    req = G.CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=5000,
    )
    resp = c.request(19, 7, req)
    assert resp.topics[0].error_code == error, resp
    return resp.topics[0]


def batch(
    n: int = 3,
    *,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    codec: int = 0,
    size: int = 10,
    key=b"k",
    ts=None,
) -> bytes:
    now = int(time.time() * 1000) if ts is None else ts
    recs = [R.SimpleRecord(b"v%d-" % i + b"x" * size, key, [("h", b"1")], now + i) for i in range(n)]
    return R.build_record_batch(recs, codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce(c: WireClient, topic: str, data: bytes, partition: int = 0, acks: int = -1, version: int = 9):
    req = G.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=data)])
        ],
    )
    if acks == 0:
        c.send(0, version, req)
        return None
    resp = c.request(0, version, req)
    return resp.responses[0].partition_responses[0]


def fetch_req(
    topic: str | tuple[str, ...],
    offset: int,
    *,
    partition: int | tuple[int, ...] = 0,
    max_wait: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max: int = 1 << 20,
    session_id: int = 0,
    epoch: int = -1,
):
    """A Fetch request of each partition (one, or a tuple) of each topic from ``offset``."""
    return G.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=name,
                partitions=[
                    FetchPartition(
                        partition=p,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max,
                        current_leader_epoch=-1,
                        log_start_offset=-1,
                    )
                    for p in ((partition,) if isinstance(partition, int) else partition)
                ],
            )
            for name in ((topic,) if isinstance(topic, str) else topic)
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def fetch(c: WireClient, topic: str, offset: int, version: int = 12, **kw):
    resp = c.request(1, version, fetch_req(topic, offset, **kw))
    return resp


def batches_of(records) -> list:
    return list(R.iter_batches(bytes(records or b"")))


@pytest.fixture(scope="module")
def c(broker):
    with WireClient(broker.bootstrap) as client:
        yield client


def test_api_versions_all_versions(broker):
    for v in range(5):
        with WireClient(broker.bootstrap) as c:
            resp = c.api_versions(v)
            assert resp.error_code == 0
            keys = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
            # Kafka 3.9's maxima for the core APIs (issue 17)
            assert keys[18] == (0, 4)
            assert keys[0] == (0, 11) and keys[1] == (0, 17) and keys[3] == (0, 12) and keys[2] == (0, 9)
            for absent in (71, 72):  # telemetry is never advertised
                assert absent not in keys


def test_api_versions_unknown_version_gets_v0_error(broker):
    with WireClient(broker.bootstrap) as c:
        # v5 is newer than any schema we have: a v4 frame with the version field set to 5
        frame = bytearray(
            encode_request(
                18, 4, 77, "x", G.ApiVersionsRequest(client_software_name="x", client_software_version="1")
            )
        )
        frame[6:8] = (5).to_bytes(2, "big")
        c.send_raw(bytes(frame))
        got, resp = c.recv(18, 0)
        assert got == 77
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [(18, 0, 4)]


def test_metadata_auto_create_and_v0_all(c):
    resp = c.request(
        3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="auto-1")], allow_auto_topic_creation=True)
    )
    t = resp.topics[0]
    assert t.error_code == 0 and t.name == "auto-1" and len(t.partitions) == 1
    assert t.topic_id.int != 0
    assert resp.controller_id == 1 and resp.cluster_id and resp.brokers[0].host == "127.0.0.1"
    assert t.partitions[0].leader_id == 1 and t.partitions[0].leader_epoch == 0
    resp = c.request(
        3,
        12,
        G.MetadataRequest(topics=[MetadataRequestTopic(name="nope-x")], allow_auto_topic_creation=False),
    )
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    resp = c.request(
        3,
        12,
        G.MetadataRequest(topics=[MetadataRequestTopic(name="bad name!")], allow_auto_topic_creation=True),
    )
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    resp = c.request(3, 0, G.MetadataRequest(topics=[]))
    assert "auto-1" in {t.name for t in resp.topics}
    resp = c.request(3, 1, G.MetadataRequest(topics=[]))
    assert resp.topics == []


def test_produce_fetch_whole_batch_and_offsets(c):
    create_topic(c, "pf")
    r1 = produce(c, "pf", batch(5))
    r2 = produce(c, "pf", batch(5, codec=1))
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 5)
    # a fetch from the middle of the second batch returns that batch whole
    resp = fetch(c, "pf", 7)
    pd = resp.responses[0].partitions[0]
    assert pd.error_code == 0 and pd.high_watermark == 10 and pd.log_start_offset == 0
    bs = batches_of(pd.records)
    assert [(b.base_offset, b.last_offset) for b in bs] == [(5, 9)]
    assert bs[0].partition_leader_epoch == 0
    assert [r.offset for r in bs[0].records()] == [5, 6, 7, 8, 9]
    # out of range
    pd = fetch(c, "pf", 11).responses[0].partitions[0]
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # at the end: empty records, no error
    pd = fetch(c, "pf", 10).responses[0].partitions[0]
    assert pd.error_code == 0 and bytes(pd.records) == b""


def test_fetch_first_batch_even_if_over_max_bytes(c):
    create_topic(c, "big1")
    produce(c, "big1", batch(4, size=20000))
    produce(c, "big1", batch(4, size=20000))
    pd = fetch(c, "big1", 0, max_bytes=100, partition_max=100).responses[0].partitions[0]
    bs = batches_of(pd.records)
    assert len(bs) == 1 and bs[0].base_offset == 0
    pd = fetch(c, "big1", 0, partition_max=100_000).responses[0].partitions[0]
    assert len(bytes(pd.records)) <= 100_000 + 0 and len(batches_of(pd.records)) == 1


def test_fetch_large_response_is_spliced_correctly(c):
    """Over 64 KiB the records go by sendfile: the frame must still decode for v4 and flexible v12."""
    create_topic(c, "large-f", partitions=2)
    for p in (0, 1):
        for _ in range(6):
            produce(c, "large-f", batch(10, size=3000, codec=0), partition=p)
    for version in (4, 11, 12):
        req = fetch_req("large-f", 0)
        req.topics[0].partitions.append(
            FetchPartition(
                partition=1,
                fetch_offset=0,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                log_start_offset=-1,
            )
        )
        resp = c.request(1, version, req)
        for p, pd in enumerate(resp.responses[0].partitions):
            assert pd.partition_index == p and pd.error_code == 0
            bs = batches_of(pd.records)
            assert len(bs) == 6 and all(b.is_valid() for b in bs)
            assert sum(1 for b in bs for _ in b.records()) == 60


def test_fetch_answers_larger_than_the_socket_takes_go_out_whole_and_in_order(broker):
    """The records go straight into the socket with os.sendfile while it has room, and
    through asyncio once it is full (a reader that is slow to start): every byte arrives,
    and the answers pipelined behind it come after it."""
    with WireClient(broker.bootstrap) as w:
        create_topic(w, "full-sock", partitions=2)
        for p in (0, 1):
            for _ in range(40):
                produce(w, "full-sock", batch(50, size=2000, codec=0), partition=p)
    slow = socket.create_connection(("127.0.0.1", broker.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    with WireClient(broker.bootstrap) as c:
        c.sock.close()
        c.sock = slow
        slow.settimeout(30)
        reqs = []
        for p in (0, 1):
            reqs.append(c.send(1, 12, fetch_req("full-sock", 0, partition=p, partition_max=8 << 20)))
        meta = c.send(3, 12, G.MetadataRequest(topics=None))
        time.sleep(0.5)  # the broker fills the socket and waits for room
        for p, corr in zip((0, 1), reqs, strict=True):
            got, resp = c.recv(1, 12)
            assert got == corr
            pd = resp.responses[0].partitions[0]
            bs = batches_of(pd.records)
            assert pd.partition_index == p and len(bs) == 40 and all(b.is_valid() for b in bs)
            assert [b.base_offset for b in bs] == [50 * i for i in range(40)]
        assert c.recv(3, 12)[0] == meta


def test_fetch_v0_to_v3_down_converts(c):
    create_topic(c, "legacy-f")
    produce(c, "legacy-f", batch(3, codec=compression.SNAPPY))
    produce(c, "legacy-f", batch(2))
    read = len(fetch(c, "legacy-f", 0, version=4).responses[0].partitions[0].records)
    for version, magic in ((0, 0), (2, 1), (3, 1)):
        pd = fetch(c, "legacy-f", 0, version=version).responses[0].partitions[0]
        # LazyDownConversionRecords: as long as the bytes read; what converts longer is cut
        # (a partial message a client leaves for its next fetch)
        assert len(pd.records) == read
        entries = batches_of(pd.records)
        # the snappy batch is one snappy wrapper, the uncompressed one single messages
        assert entries[0].magic == magic and entries[0].codec == compression.SNAPPY
        assert [(e.magic, e.codec) for e in entries[1:]] == [(magic, 0)] * (len(entries) - 1)
        recs = [r for e in entries for r in e.records()]
        assert [r.offset for r in recs] == list(range(len(recs))) and len(recs) >= 3
        assert recs[0].value.startswith(b"v0-")
        pd = fetch(c, "legacy-f", 3, version=version).responses[0].partitions[0]
        assert [(e.magic, e.codec, e.offset) for e in batches_of(pd.records)] == [
            (magic, 0, 3),
            (magic, 0, 4),
        ]


def _inner(wrapper) -> list:
    """The inner messages of a legacy wrapper as stored in it (v1: relative offsets)."""
    key, value = wrapper.key_value()
    assert key is None
    return batches_of(compression.decompress(wrapper.codec, value, magic=wrapper.magic))


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4])
def test_down_conversion_keeps_a_compressed_batch_compressed(c, codec):
    """RecordsUtil.downConvert: a compressed v2 batch becomes one v0/v1 wrapper message of the
    same codec (MemoryRecordsBuilder: lz4 v0 with the broken header checksum), its offset the
    last record's, inner offsets absolute (v0) or relative (v1), v1 timestamps kept and the
    wrapper's the largest; LazyDownConversionRecords sizes the answer as the bytes read, the
    rest an overflow entry (offset -1, a length past the end) that a client ignores."""
    topic = f"legacy-codec-{codec}"
    create_topic(c, topic)
    assert produce(c, topic, batch(3, key=b"k1", ts=1_000)).error_code == 0
    assert produce(c, topic, batch(4, codec=codec, key=b"k2", ts=2_000)).error_code == 0
    stored = fetch(c, topic, 3, version=4).responses[0].partitions[0].records
    (v2,) = batches_of(stored)
    want = [(r.offset, r.key, r.value) for r in v2.records()]
    assert [o for o, _, _ in want] == [3, 4, 5, 6]
    for version, magic in ((1, 0), (2, 1)):
        pd = fetch(c, topic, 3, version=version).responses[0].partitions[0]
        assert pd.error_code == 0 and pd.high_watermark == 7
        records = bytes(pd.records)
        (w,) = batches_of(records)
        assert (w.magic, w.codec, w.offset) == (magic, codec, 6), version
        assert [(r.offset, r.key, r.value) for r in w.records()] == want
        inner = _inner(w)
        assert [(m.magic, m.codec) for m in inner] == [(magic, 0)] * 4
        assert [m.offset for m in inner] == ([0, 1, 2, 3] if magic == 1 else [3, 4, 5, 6])
        if magic == 1:
            assert [m.timestamp for m in inner] == [2_000, 2_001, 2_002, 2_003]
            assert w.timestamp == 2_003 and w.timestamp_type == R.CREATE_TIME
        if codec == compression.LZ4:
            # KafkaLZ4BlockOutputStream: magic 0 keeps the broken header checksum (KAFKA-3160)
            frame = w.key_value()[1]
            assert frame[6] == compression.lz4_header_checksum(frame[:6], magic)
        # as long as the batch read or the wrapper, whichever is longer
        assert len(records) == max(len(stored), w.size)
        _assert_overflow(records, w.size)


def _assert_overflow(records: bytes, used: int) -> None:
    """LazyDownConversionRecordsSend.buildOverflowBatch: what the converted messages leave of the
    answer is an entry at offset -1 whose length runs past the end, zeros after its header."""
    rest = len(records) - used
    assert records[used : used + 12] == struct.pack(">qi", -1, max(rest + 1, 61))[: min(rest, 12)]
    assert records[used + 12 :] == bytes(max(rest - 12, 0))


def test_down_conversion_of_a_log_append_time_batch(c):
    """MemoryRecordsBuilder of magic 1 with LOG_APPEND_TIME: the wrapper and its inner messages
    carry the timestamp type and the batch's append time."""
    create_topic(c, "legacy-lat", configs={"message.timestamp.type": "LogAppendTime"})
    assert produce(c, "legacy-lat", batch(3, codec=compression.GZIP, ts=5)).error_code == 0
    (v2,) = batches_of(fetch(c, "legacy-lat", 0, version=4).responses[0].partitions[0].records)
    assert v2.timestamp_type == R.LOG_APPEND_TIME
    (w,) = batches_of(fetch(c, "legacy-lat", 0, version=3).responses[0].partitions[0].records)
    assert (w.magic, w.codec, w.timestamp_type, w.timestamp) == (
        1,
        compression.GZIP,
        R.LOG_APPEND_TIME,
        v2.max_timestamp,
    )
    inner = _inner(w)
    assert [(m.timestamp_type, m.timestamp) for m in inner] == [(R.LOG_APPEND_TIME, v2.max_timestamp)] * 3


def test_fetch_below_v10_of_a_zstd_topic_is_unsupported_compression_type(c):
    """KafkaApis.maybeConvertFetchedData: below Fetch v10 a topic whose compression.type is
    zstd answers UNSUPPORTED_COMPRESSION_TYPE and nothing else (before any down-conversion);
    v10 gets the zstd batch. The topic's config decides, not the batches read."""
    create_topic(c, "zstd-cfg", configs={"compression.type": "zstd"})
    assert produce(c, "zstd-cfg", batch(2)).error_code == 0
    (b,) = batches_of(fetch(c, "zstd-cfg", 0, version=10).responses[0].partitions[0].records)
    assert b.codec == compression.ZSTD and [r.offset for r in b.records()] == [0, 1]
    for version in (9, 4, 3, 0):
        pd = fetch(c, "zstd-cfg", 0, version=version).responses[0].partitions[0]
        assert (pd.error_code, pd.high_watermark, pd.log_start_offset, pd.records or b"") == (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            -1,
            -1,
            b"",
        ), version
    # an offset past the end is answered the same: every partition of the answer is converted
    pd = fetch(c, "zstd-cfg", 99, version=9).responses[0].partitions[0]
    assert pd.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    pd = fetch(c, "zstd-cfg", 99, version=10).responses[0].partitions[0]
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_fetch_session_below_v10_takes_a_zstd_topic_as_read(c):
    """Kafka converts after the session took the answer (createResponse): an incremental
    fetch at the log end leaves the refused partition out while nothing changed (no records
    read, the same high watermark), and shows the error again once records were appended."""
    create_topic(c, "zstd-sess", configs={"compression.type": "zstd"})
    assert produce(c, "zstd-sess", batch(1)).error_code == 0
    full = c.request(1, 9, fetch_req("zstd-sess", 1, epoch=0))
    assert full.session_id != 0
    assert full.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    same = c.request(1, 9, fetch_req("zstd-sess", 1, session_id=full.session_id, epoch=1))
    assert (same.error_code, same.responses) == (0, [])
    assert produce(c, "zstd-sess", batch(1)).error_code == 0
    moved = c.request(1, 9, fetch_req("zstd-sess", 1, session_id=full.session_id, epoch=2))
    (pd,) = moved.responses[0].partitions
    assert (pd.error_code, pd.high_watermark) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)


def test_zstd_batches_of_a_producer_topic(c):
    """compression.type=producer: Fetch v4-9 gets a zstd batch as stored (Kafka checks the
    config only); down-conversion (v0-3) cannot convert one (RecordsUtil.downConvert): a zstd
    batch first is UNSUPPORTED_COMPRESSION_TYPE, after converted records it ends the answer."""
    create_topic(c, "zstd-prod")
    assert produce(c, "zstd-prod", batch(2, codec=compression.GZIP)).error_code == 0
    assert produce(c, "zstd-prod", batch(2, codec=compression.ZSTD)).error_code == 0
    both = batches_of(fetch(c, "zstd-prod", 0, version=9).responses[0].partitions[0].records)
    assert [b.codec for b in both] == [compression.GZIP, compression.ZSTD]
    pd = fetch(c, "zstd-prod", 0, version=3).responses[0].partitions[0]
    assert pd.error_code == 0 and pd.high_watermark == 4
    entries = batches_of(pd.records)
    assert [r.offset for e in entries for r in e.records()] == [0, 1]
    pd = fetch(c, "zstd-prod", 2, version=3).responses[0].partitions[0]
    assert (pd.error_code, pd.high_watermark, pd.records or b"") == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        -1,
        b"",
    )


def test_down_conversion_drops_records_below_the_fetch_offset_of_an_uncompressed_batch(c):
    """RecordsUtil.downConvert: an uncompressed v2 batch gives v0/v1 only its records from the
    fetch offset on (a compressed one all of them, as a v0/v1 wrapper would hold)."""
    create_topic(c, "legacy-mid")
    assert produce(c, "legacy-mid", batch(4)).error_code == 0
    assert produce(c, "legacy-mid", batch(3, codec=compression.GZIP)).error_code == 0
    pd = fetch(c, "legacy-mid", 2, version=2).responses[0].partitions[0]
    assert [r.offset for e in batches_of(pd.records) for r in e.records()] == [2, 3, 4, 5, 6]
    # the first batch alone converts shorter than it is: the overflow entry fills the answer
    first = fetch(c, "legacy-mid", 2, version=4, max_bytes=1).responses[0].partitions[0].records
    pd = fetch(c, "legacy-mid", 2, version=3, max_bytes=1).responses[0].partitions[0]
    assert len(pd.records) == len(first) and len(batches_of(first)) == 1
    converted = batches_of(pd.records)
    assert [(e.magic, e.offset) for e in converted] == [(1, 2), (1, 3)]
    _assert_overflow(bytes(pd.records), converted[-1].end)
    pd = fetch(c, "legacy-mid", 5, version=2).responses[0].partitions[0]
    assert [r.offset for e in batches_of(pd.records) for r in e.records()] == [4, 5, 6]


def test_produce_legacy_message_set_v2(c):
    create_topic(c, "legacy-p")
    ms = R.build_legacy_message_set([R.SimpleRecord(b"a", b"k"), R.SimpleRecord(b"b", b"k")], magic=1)
    r = produce(c, "legacy-p", ms, version=2)
    assert r.error_code == 0 and r.base_offset == 0
    pd = fetch(c, "legacy-p", 0).responses[0].partitions[0]
    (b,) = batches_of(pd.records)
    assert b.magic == 2 and [r.value for r in b.records()] == [b"a", b"b"]


def test_produce_of_a_compressed_inner_message_is_invalid_record(c):
    """Kafka 3.7: the deep iterator's InvalidRecordException ("Inner messages must not be
    compressed"), INVALID_RECORD, not CORRUPT_MESSAGE; nothing is appended."""
    create_topic(c, "legacy-nested")
    deeper = R.encode_legacy_message(1, b"k", b"v", offset=0, timestamp=5)
    inner = R.encode_legacy_message(1, b"k0", b"v0", offset=0, timestamp=5) + R.encode_legacy_message(
        1, None, compression.compress(compression.SNAPPY, deeper, magic=1), offset=1, attributes=2
    )
    for magic in (0, 1):
        wrapper = R.encode_legacy_message(
            magic, None, compression.compress(compression.GZIP, inner, magic=1), offset=1, attributes=1
        )
        if magic == 0:  # v0 messages inside a v0 wrapper
            wrapper = R.encode_legacy_message(
                0,
                None,
                compression.compress(
                    compression.GZIP,
                    R.encode_legacy_message(0, b"k0", b"v0", offset=0)
                    + R.encode_legacy_message(0, None, b"x" * 20, offset=1, attributes=1),
                    magic=0,
                ),
                offset=1,
                attributes=1,
            )
        r = produce(c, "legacy-nested", wrapper, version=2)
        assert (r.error_code, r.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert produce(c, "legacy-nested", batch(1)).base_offset == 0


def test_long_poll_waits_for_data_and_keeps_order(broker, c):
    create_topic(c, "lp")
    with WireClient(broker.bootstrap) as waiter:
        t0 = time.monotonic()
        corr_f = waiter.send(1, 12, fetch_req("lp", 0, max_wait=5000, min_bytes=1))
        # pipelined behind the parked fetch: must come back after it
        corr_m = waiter.send(3, 12, G.MetadataRequest(topics=None))
        time.sleep(0.3)
        produce(c, "lp", batch(2))
        got, resp = waiter.recv(1, 12)
        assert got == corr_f
        assert time.monotonic() - t0 < 4.0, "the long poll did not wake on the append"
        assert len(batches_of(resp.responses[0].partitions[0].records)) == 1
        got, _ = waiter.recv(3, 12)
        assert got == corr_m


def test_long_poll_times_out_on_max_wait(c):
    create_topic(c, "lp2")
    t0 = time.monotonic()
    resp = fetch(c, "lp2", 0, max_wait=400, min_bytes=1)
    took = time.monotonic() - t0
    assert 0.35 <= took < 2.0
    assert bytes(resp.responses[0].partitions[0].records) == b""


def test_acks_zero_gets_no_response(c):
    create_topic(c, "acks0")
    produce(c, "acks0", batch(1), acks=0)
    resp = c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="acks0")]))
    assert resp.topics[0].name == "acks0"  # the next response is Metadata's, nothing in between
    pd = fetch(c, "acks0", 0).responses[0].partitions[0]
    assert len(batches_of(pd.records)) == 1


def test_produce_errors(c):
    create_topic(c, "perr", configs={"max.message.bytes": "2000"})
    assert produce(c, "perr", batch(1, size=5000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF
    r = produce(c, "perr", bytes(bad))
    # ReplicaManager answers these without a message (hasCustomErrorMessage = false)
    assert (r.error_code, r.error_message) == (ErrorCode.CORRUPT_MESSAGE, None)
    assert produce(c, "perr", batch(1) + batch(1)).error_code == ErrorCode.INVALID_RECORD
    assert produce(c, "nope-topic", batch(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(c, "perr", batch(1), partition=5).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(c, "perr", batch(1), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # KafkaApis sets aside the partitions the metadata does not know before the append's acks check
    assert produce(c, "nope-topic", batch(1), acks=2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (
        produce(c, "perr", batch(1), partition=5, acks=2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        produce(c, "perr", batch(1, codec=4), version=6).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    create_topic(c, "compacted", configs={"cleanup.policy": "compact"})
    r = produce(c, "compacted", batch(2, key=None))
    assert r.error_code == ErrorCode.INVALID_RECORD and len(r.record_errors) == 2
    assert produce(c, "compacted", batch(2)).error_code == 0


def test_log_append_time(c):
    create_topic(c, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    r = produce(c, "lat", batch(2, ts=1000))
    assert r.error_code == 0 and r.log_append_time_ms >= before
    (b,) = batches_of(fetch(c, "lat", 0).responses[0].partitions[0].records)
    assert b.timestamp_type == R.LOG_APPEND_TIME and b.max_timestamp == r.log_append_time_ms and b.is_valid()


def test_idempotent_producer_sequences(c):
    create_topic(c, "idem")
    pid_resp = c.request(
        22,
        4,
        G.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
    )
    assert pid_resp.error_code == 0
    pid = pid_resp.producer_id
    assert produce(c, "idem", batch(3, pid=pid, epoch=0, seq=0)).base_offset == 0
    assert produce(c, "idem", batch(3, pid=pid, epoch=0, seq=3)).base_offset == 3
    # a retry of an earlier batch: success with its original offset, nothing appended
    dup = produce(c, "idem", batch(3, pid=pid, epoch=0, seq=0))
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert (
        produce(c, "idem", batch(1, pid=pid, epoch=0, seq=9)).error_code
        == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert produce(c, "idem", batch(3, pid=pid, epoch=0, seq=6)).base_offset == 6
    # a new epoch must start at 0; an older epoch is fenced
    assert (
        produce(c, "idem", batch(1, pid=pid, epoch=1, seq=5)).error_code
        == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert produce(c, "idem", batch(1, pid=pid, epoch=1, seq=0)).base_offset == 9
    assert (
        produce(c, "idem", batch(1, pid=pid, epoch=0, seq=9)).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    )
    pd = fetch(c, "idem", 0).responses[0].partitions[0]
    assert pd.high_watermark == 10
    other = c.request(
        22,
        4,
        G.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
    )
    assert other.producer_id != pid


def test_list_offsets(c):
    create_topic(c, "lo")
    produce(c, "lo", batch(3, ts=1000))
    produce(c, "lo", batch(3, ts=5000))
    produce(c, "lo", batch(3, ts=2000))

    def lo(ts, version=7):
        req = G.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name="lo",
                    partitions=[
                        ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)
                    ],
                )
            ],
        )
        return c.request(2, version, req).topics[0].partitions[0]

    assert lo(-2).offset == 0
    assert lo(-1).offset == 9
    r = lo(-3)
    assert (r.offset, r.timestamp) == (5, 5002)
    r = lo(4999)
    assert (r.offset, r.timestamp) == (3, 5000)
    r = lo(1001)
    assert (r.offset, r.timestamp) == (1, 1001)
    assert lo(99999).offset == -1
    assert lo(-1, version=0).old_style_offsets == [9]
    assert lo(-1, version=1).offset == 9


def test_offset_for_leader_epoch(c):
    create_topic(c, "ofle")
    produce(c, "ofle", batch(4))
    req = G.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderTopic(
                topic="ofle",
                partitions=[OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)],
            )
        ],
    )
    r = c.request(23, 4, req).topics[0].partitions[0]
    assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 4)
    req.topics[0].partitions[0].current_leader_epoch = 3
    assert c.request(23, 4, req).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_many_pipelined_requests_answer_in_order(broker):
    with WireClient(broker.bootstrap) as c:
        corrs = [c.send(3, 12, G.MetadataRequest(topics=None)) for _ in range(300)]
        for corr in corrs:
            got, _ = c.recv(3, 12)
            assert got == corr


def test_concurrent_clients(broker):
    errors = []

    def worker(i):
        try:
            with WireClient(broker.bootstrap) as c:
                for _ in range(20):
                    produce(c, "conc", batch(2))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    with WireClient(broker.bootstrap) as c:
        create_topic(c, "conc")
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with WireClient(broker.bootstrap) as c:
        assert fetch(c, "conc", 0).responses[0].partitions[0].high_watermark == 8 * 20 * 2


_ = socket


def test_topic_compression_type_recompresses(c):
    create_topic(c, "ctype", configs={"compression.type": "zstd"})
    r = produce(c, "ctype", batch(4, pid=77, epoch=0, seq=0, codec=1))
    assert r.error_code == 0
    (b,) = batches_of(fetch(c, "ctype", 0).responses[0].partitions[0].records)
    assert b.codec == 4 and b.is_valid()
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta) == (77, 0, 0, 3)
    assert [r.value[:3] for r in b.records()] == [b"v0-", b"v1-", b"v2-", b"v3-"]
    create_topic(c, "ctype-p")  # compression.type=producer keeps the producer's bytes exactly
    sent = batch(3, codec=2)
    produce(c, "ctype-p", sent)
    (b,) = batches_of(fetch(c, "ctype-p", 0).responses[0].partitions[0].records)
    assert bytes(b.raw())[61:] == sent[61:] and b.codec == 2


def test_compression_type_follows_the_log_config_as_it_changes(c):
    """The target codec is the log's (LogConfig.compression.type): a topic override, then the
    broker's dynamic default for a topic without one, each in effect at the next append."""
    from tests.broker.test_broker_configs import inc

    create_topic(c, "ctype-dyn")
    assert inc(c, 2, "ctype-dyn", ("compression.type", 0, "lz4")) == (0, None)
    assert produce(c, "ctype-dyn", batch(2)).error_code == 0
    assert inc(c, 2, "ctype-dyn", ("compression.type", 1, None)) == (0, None)
    assert inc(c, 4, "", ("compression.type", 0, "uncompressed")) == (0, None)
    try:
        assert produce(c, "ctype-dyn", batch(2, codec=1)).error_code == 0
    finally:
        assert inc(c, 4, "", ("compression.type", 1, None)) == (0, None)
    assert produce(c, "ctype-dyn", batch(2, codec=1)).error_code == 0
    codecs = [b.codec for b in batches_of(fetch(c, "ctype-dyn", 0).responses[0].partitions[0].records)]
    assert codecs == [3, 0, 1]


def test_min_insync_replicas_above_the_replication_factor_refuses_nothing(c):
    """Kafka 3.7's effective min ISR is min(min.insync.replicas, RF) (Partition.effectiveMinIsr,
    KIP-966): on a broker of one, acks=all succeeds with min.insync.replicas=2."""
    create_topic(c, "minisr", configs={"min.insync.replicas": "2"})
    r = produce(c, "minisr", batch(1), acks=-1)
    assert (r.error_code, r.base_offset) == (0, 0)


def test_a_header_key_that_is_not_utf8_is_accepted_as_kafka_accepts_it(c):
    """Kafka's LogValidator never refuses a header key that is not UTF-8 (readHeaders keeps
    its bytes).  A compacted topic decodes every record for the key check and appends the
    batch as sent; compression.type=gzip rebuilds the records (buildRecordsAndAssignOffsets),
    and DefaultRecord.writeTo writes the key as Utils.utf8(header.key()): U+FFFD's UTF-8 for
    the malformed byte.  Before, both answered CORRUPT_MESSAGE ("header key is not UTF-8")."""
    from tests.formats.test_records import header_keys_on_the_wire as header_keys

    now = int(time.time() * 1000)
    sent = R.build_record_batch(
        [R.SimpleRecord(b"v%d" % i, b"k%d" % i, [(b"id\xff", b"1"), ("ok", None)], now) for i in range(3)]
    )
    create_topic(c, "hkey-compact", configs={"cleanup.policy": "compact"})
    assert produce(c, "hkey-compact", sent).error_code == 0
    (b,) = batches_of(fetch(c, "hkey-compact", 0).responses[0].partitions[0].records)
    assert bytes(b.raw())[61:] == sent[61:] and header_keys(bytes(b.raw())) == [b"id\xff", b"ok"] * 3
    create_topic(c, "hkey-gzip", configs={"compression.type": "gzip"})
    assert produce(c, "hkey-gzip", sent).error_code == 0
    (b,) = batches_of(fetch(c, "hkey-gzip", 0).responses[0].partitions[0].records)
    assert b.codec == compression.GZIP and b.is_valid()
    assert header_keys(bytes(b.raw())) == [b"id\xef\xbf\xbd", b"ok"] * 3
    assert [(r.key, r.value) for r in b.records()] == [(b"k%d" % i, b"v%d" % i) for i in range(3)]
