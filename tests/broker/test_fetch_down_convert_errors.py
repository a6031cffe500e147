"""A stored batch that down-conversion (Fetch v0-3) cannot read, answered as Kafka 3.7.0 answers it.

LazyDownConversionRecords converts its first batch in KafkaApis' request handler
(maybeConvertFetchedData catches only UnsupportedCompressionTypeException): what that throws
reaches KafkaApis.handleError, which answers the whole fetch with FetchRequest.getErrorResponse,
every partition of the request with Errors.forException's code and nothing else.  The batches
after it are converted by LazyDownConversionRecordsSend while the answer is being sent: a failure
there ends the send and the connection.  Such a batch gets into a log as a compressed v2 batch
whose CRC is right and whose stream is garbage: the broker appends it unread where no rule reads
its records (DESIGN.md; Kafka would have refused it at produce), or a log copied from elsewhere.
Neither case may leave a traceback in the broker's log."""

from __future__ import annotations

import threading

from kafkatool.formats import records as R
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_produce_v2_stream import STREAMS, TS
from tests.broker.test_protocol import create_topic, fetch, fetch_req, produce
from tests.broker.wire import WireClient

GARBAGE = STREAMS[0][1]  # gzip codec bits, garbage where the stream should be, CRC right
GOOD = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), TS)])


def answers(resp) -> list[tuple]:
    return [
        (p.partition_index, p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records or b""))
        for t in resp.responses
        for p in t.partitions
    ]


def test_an_unreadable_first_batch_fails_the_whole_fetch(broker):
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "dc-first", partitions=2)
        assert produce(c, "dc-first", GARBAGE).error_code == 0  # appended unread
        assert produce(c, "dc-first", GOOD, partition=1).error_code == 0
        for version in (0, 1, 2, 3):
            resp = c.request(1, version, fetch_req("dc-first", 0, partition=(0, 1)))
            unknown = ErrorCode.UNKNOWN_SERVER_ERROR
            assert answers(resp) == [(0, unknown, -1, -1, b""), (1, unknown, -1, -1, b"")], version
        # the connection goes on serving, and a fetch that needs no conversion reads both
        r = fetch(c, "dc-first", 0, version=12)
        assert r.responses[0].partitions[0].error_code == 0
        assert fetch(c, "dc-first", 0, version=3, partition=1).responses[0].partitions[0].error_code == 0
    log = broker.log_text()
    assert "Traceback" not in log and "handler failed" not in log


def test_an_unreadable_later_batch_closes_the_connection(broker):
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "dc-later")
        assert produce(c, "dc-later", GOOD).error_code == 0
        assert produce(c, "dc-later", GARBAGE).error_code == 0
        c.send(1, 1, fetch_req("dc-later", 0))
        assert c.closed_by_peer(), "the connection should close"
    log = broker.log_text()
    assert "down-converting a fetched batch failed" in log
    assert "Traceback" not in log and "handler failed" not in log


def test_a_long_poll_that_reads_an_unreadable_first_batch_fails_the_whole_fetch(broker):
    with WireClient(broker.bootstrap) as c, WireClient(broker.bootstrap) as writer:
        create_topic(c, "dc-poll")
        c.send(1, 1, fetch_req("dc-poll", 0, max_wait=10_000))  # parked: nothing to read yet
        done = threading.Event()
        resp = []

        def read():
            resp.append(c.recv(1, 1)[1])
            done.set()

        th = threading.Thread(target=read, daemon=True)
        th.start()
        assert not done.wait(0.3), "the fetch should wait for data"
        assert produce(writer, "dc-poll", GARBAGE).error_code == 0
        assert done.wait(8), "the parked fetch was not answered"
        assert answers(resp[0]) == [(0, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, b"")]
    log = broker.log_text()
    assert "Traceback" not in log and "handler failed" not in log
