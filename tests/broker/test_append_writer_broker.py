"""Produce through the append writer (log/append_writer.py) on a broker served in-process: an
acks=1 answer never leaves before its bytes are in the file (a kill -9 after the answer keeps
them: the page cache has them), a fetch right after a produce reads them, a failed write
answers KAFKA_STORAGE_ERROR and takes its log dir offline (as a synchronous append's OSError),
and a shutdown writes every queued append before the logs close and the marker is written.

The writer is held (no write starts) to make "not written yet" deterministic: these tests
need the native writer (tools/build_accel.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.server import Broker
from kafkatool.formats import checkpoint as ck
from kafkatool.formats import records as R
from kafkatool.log.append_writer import native_available
from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_handler_failure import Records
from tests.broker.test_protocol import batches_of, fetch_req, produce
from tests.broker.wire import WireClient

pytestmark = pytest.mark.skipif(not native_available(), reason="the native append writer is not built")


#: on whatever the cores (auto needs a spare core per process)
WRITER_ON = "kafkatool.append.writer=true"


class Served:
    def __init__(self, tmp_path, dirs: int = 1, extra: tuple = ()):
        self.dirs = [tmp_path / f"d{i}" for i in range(dirs)]
        for d in self.dirs:
            d.mkdir()
        self.broker = Broker(
            BrokerConfig.load(
                None,
                [
                    f"log.dirs={','.join(map(str, self.dirs))}",
                    "listeners=PLAINTEXT://127.0.0.1:0",
                    WRITER_ON,
                    *extra,
                ],
            )
        )
        self.broker.open_storage()
        self.records = Records()
        self.logger = logging.getLogger("kafkatool")
        self.logger.addHandler(self.records)
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def main():
            try:
                await self.broker.start()
            finally:
                ready.set()
            await self.broker.serve_until_stopped()
            await self.broker.stop()

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        assert ready.wait(20) and self.thread.is_alive(), "the broker did not start"
        host, port = self.broker.bound[0]
        self.bootstrap = f"{host}:{port}"
        assert self.broker.append_writer is not None and self.broker.append_writer.native
        self.broker.append_writer.min_bytes = 0  # every append queued, however small

    def call(self, fn):
        """``fn()`` on the broker's event loop (what touches the broker's state)."""
        done = threading.Event()
        box = {}

        def run():
            try:
                box["result"] = fn()
            finally:
                done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(10)
        return box["result"]

    def create_topic(self, name: str, log_dir=None):
        self.call(lambda: self.broker.create_topic(name, 1, {}))
        lg = self.broker.get_log(name, 0)
        if log_dir is not None:
            assert lg.dir.parent == log_dir, (lg.dir, log_dir)
        return lg

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.broker.request_stop)
            self.thread.join(30)
        if not self.loop.is_closed():
            self.loop.close()
        self.logger.removeHandler(self.records)


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path)
    try:
        yield s
    finally:
        s.broker.append_writer.hold(False)
        s.stop()


def _batch(value: bytes = b"v") -> bytes:
    return R.build_record_batch([R.SimpleRecord(value, b"k", [], int(time.time() * 1000))])


def _answer_arrives(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except TimeoutError:
        return False
    finally:
        sock.settimeout(10)


def _produce_req(topic: str, data: bytes, acks: int):
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    return G.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=data)])
        ],
    )


def _served_with_a_bad_dir(tmp_path, extra: tuple = ()):
    """A broker of two dirs: topic "keep" on the first (the metadata's too), "bad" on the
    second, the one the tests fail: (served, bad's log)."""
    s = Served(tmp_path, dirs=2, extra=extra)
    try:
        s.create_topic("keep")
        return s, s.create_topic("bad", log_dir=s.dirs[1])
    except BaseException:
        s.stop()
        raise


def _break_fd(seg) -> None:
    """The segment's queued writes meet EBADF (its descriptor made read-only)."""
    ro = os.open(seg.log_path, os.O_RDONLY)
    os.dup2(ro, seg._fd)
    os.close(ro)


def _send_queued(c, lg, req, end: int) -> None:
    """Send a produce whose write the held writer queues: until ``lg`` ends at ``end``."""
    c.send(0, 9, req)
    deadline = time.monotonic() + 5
    while lg.log_end_offset < end and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lg.log_end_offset == end  # appended, its write queued


@pytest.mark.parametrize("acks", [1, -1])
def test_the_answer_waits_for_the_write(served, acks):
    lg = served.create_topic("t")
    writer = served.broker.append_writer
    data = _batch(b"first")
    with WireClient(served.bootstrap) as c:
        assert produce(c, "t", _batch(b"warm-up"), acks=acks).error_code == 0
        before = lg.active_segment.log_path.stat().st_size
        writer.hold(True)

        req = _produce_req("t", data, acks)
        corr = c.send(0, 9, req)
        assert not _answer_arrives(c.sock, 0.5)  # held: no answer
        assert lg.active_segment.log_path.stat().st_size == before  # and nothing in the file
        assert lg.log_end_offset == 2  # though the log moved on
        writer.hold(False)
        got, resp = c.recv(0, 9)
        # the answer came: the bytes are in the file (a kill -9 now keeps them)
        assert lg.active_segment.log_path.stat().st_size == before + len(data)
        assert got == corr
        p = resp.responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 1)


def test_answers_behind_a_held_one_wait_in_order(served):
    served.create_topic("t")
    writer = served.broker.append_writer
    from kafkatool.protocol import generated as G

    with WireClient(served.bootstrap) as c:
        writer.hold(True)
        corrs = []
        for i in range(5):
            req = _produce_req("t", _batch(b"%d" % i), 1)
            corrs.append(c.send(0, 9, req))
        c.send(18, 3, G.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert not _answer_arrives(c.sock, 0.5)  # even the ApiVersions answer waits behind them (FIFO)
        writer.hold(False)
        got = [c.recv(0, 9) for _ in range(5)]
        assert [g[0] for g in got] == corrs
        assert [g[1].responses[0].partition_responses[0].base_offset for g in got] == [0, 1, 2, 3, 4]
        assert c.recv(18, 3)[1].error_code == 0


def test_a_fetch_right_after_a_produce_reads_it(served):
    served.create_topic("t")
    writer = served.broker.append_writer

    with WireClient(served.bootstrap) as c:
        for held in (False, True):
            offset = 0 if not held else 1
            if held:
                writer.hold(True)
                threading.Timer(0.3, writer.hold, (False,)).start()
            req = _produce_req("t", _batch(b"x"), 1)
            # pipelined: the fetch is handled before the produce's write may be done
            c.send(0, 9, req)
            c.send(1, 12, fetch_req("t", offset))
            assert c.recv(0, 9)[1].responses[0].partition_responses[0].error_code == 0
            part = c.recv(1, 12)[1].responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == offset + 1
            assert [b.base_offset for b in batches_of(part.records)] == [offset]


def test_a_failed_write_answers_kafka_storage_error_and_takes_the_dir_offline(tmp_path):
    s, bad = _served_with_a_bad_dir(tmp_path)
    try:
        broker = s.broker
        writer = broker.append_writer
        with WireClient(s.bootstrap) as c:
            assert produce(c, "bad", _batch(), acks=1).error_code == 0
            writer.hold(True)

            req = _produce_req("bad", _batch(), 1)
            c.send(0, 9, req)
            assert not _answer_arrives(c.sock, 0.3)
            seg = bad.active_segment
            _break_fd(seg)  # the queued write meets EBADF
            writer.hold(False)
            p = c.recv(0, 9)[1].responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
            # the dir is offline from now on; the other dir serves
            assert produce(c, "bad", _batch(), acks=1).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(c, "keep", _batch(), acks=1).error_code == 0
        errors = [r.getMessage() for r in s.records.errors()]
        assert any(
            f"Error while appending records to bad-0 in dir {s.dirs[1]}" in e and "Bad file descriptor" in e
            for e in errors
        ), errors
    finally:
        s.broker.append_writer.hold(False)
        s.stop()
    assert (s.dirs[0] / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert not (s.dirs[1] / ck.CLEAN_SHUTDOWN_FILE).exists()


def test_a_failed_write_is_counted_as_a_failed_synchronous_append(tmp_path):
    """ReplicaManager.appendToLocalLog marks BytesInPerSec and MessagesInPerSec once the
    append returned, which a storage error's does not, and leaves KafkaStorageException out
    of FailedProduceRequestsPerSec (a known error): a failed queued write's bytes and records
    are taken back (they were counted at the append), and it is no failed produce."""
    from tests.broker.conftest import free_port

    s, bad = _served_with_a_bad_dir(
        tmp_path, (f"kafkatool.metrics.prometheus.listener=http://127.0.0.1:{free_port()}",)
    )
    try:
        writer = s.broker.append_writer
        data = _batch()
        with WireClient(s.bootstrap) as c:
            assert produce(c, "bad", data, acks=1).error_code == 0
            writer.hold(True)
            c.send(0, 9, _produce_req("bad", _batch(b"w"), acks=1))
            assert not _answer_arrives(c.sock, 0.3)
            _break_fd(bad.active_segment)
            writer.hold(False)
            p = c.recv(0, 9)[1].responses[0].partition_responses[0]
            assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        topics = s.broker.metrics.topics
        figures = [
            (t.total_produce, t.failed_produce, t.messages_in, t.bytes_in)
            for t in (topics.topic("bad"), topics.all)
        ]
        assert figures == [(2, 0, 1, len(data))] * 2
    finally:
        s.broker.append_writer.hold(False)
        s.stop()


def test_a_retry_of_a_batch_whose_queued_write_fails_answers_kafka_storage_error_too(tmp_path):
    """An idempotent producer's retry of a batch whose write is still queued is a duplicate
    (nothing appended, the original's offsets): it waits for the original's write and fails
    with it (until then it answered success for a batch that never reached the file; in Kafka
    the original's append fails before any retry can come, and the retry meets the offline
    dir)."""
    s, bad = _served_with_a_bad_dir(tmp_path)
    try:
        writer = s.broker.append_writer
        batch = R.build_record_batch(
            [R.SimpleRecord(b"v", b"k", [], int(time.time() * 1000))],
            producer_id=4242,
            producer_epoch=0,
            base_sequence=0,
        )
        with WireClient(s.bootstrap) as c, WireClient(s.bootstrap) as retry:
            assert produce(c, "keep", _batch(), acks=1).error_code == 0
            writer.hold(True)
            _send_queued(c, bad, _produce_req("bad", batch, acks=1), 1)
            retry.send(0, 9, _produce_req("bad", batch, acks=1))
            assert not _answer_arrives(retry.sock, 0.3)
            assert bad.log_end_offset == 1  # the retry appended nothing
            _break_fd(bad.active_segment)
            writer.hold(False)
            answers = [x.recv(0, 9)[1].responses[0].partition_responses[0] for x in (c, retry)]
            assert [(p.error_code, p.base_offset) for p in answers] == [
                (ErrorCode.KAFKA_STORAGE_ERROR, -1)
            ] * 2
    finally:
        s.broker.append_writer.hold(False)
        s.stop()


def test_a_failed_write_of_an_acks_0_produce_closes_the_connection(tmp_path):
    """As a failed acks=0 produce on the synchronous path (RequestChannel.closeConnection):
    no answer, the connection closed (the failed write was only reported before);
    a request the client sent after it is not answered (Kafka reads it only after the
    produce)."""
    from kafkatool.protocol import generated as G

    s, bad = _served_with_a_bad_dir(tmp_path)
    try:
        writer = s.broker.append_writer
        with WireClient(s.bootstrap) as c:
            assert produce(c, "bad", _batch(), acks=1).error_code == 0
            writer.hold(True)
            _send_queued(c, bad, _produce_req("bad", _batch(), 0), 2)
            c.send(18, 3, G.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            seg = bad.active_segment
            _break_fd(seg)  # the queued write meets EBADF
            writer.hold(False)
            c.sock.settimeout(5)
            assert c.sock.recv(1) == b""  # closed, the ApiVersions answer not sent
        errors = [r.getMessage() for r in s.records.errors()]
        assert any(f"Error while appending records to bad-0 in dir {s.dirs[1]}" in e for e in errors), errors
        closes = [r.getMessage() for r in s.records.records if "closing connection" in r.getMessage()]
        assert any("acks=0" in m for m in closes), closes
    finally:
        s.broker.append_writer.hold(False)
        s.stop()


@pytest.mark.parametrize("acks", [0, 1])
def test_a_failed_write_takes_the_dir_offline_though_its_connection_is_gone(tmp_path, acks):
    """The writer reports a failed write as it collects it, whatever became of the request:
    the client gone before the write, no answer ever built, the dir goes offline at once (not
    at the next operation on it)."""
    s, bad = _served_with_a_bad_dir(tmp_path)
    try:
        writer = s.broker.append_writer
        with WireClient(s.bootstrap) as c:
            assert produce(c, "bad", _batch(), acks=1).error_code == 0
            writer.hold(True)
            _send_queued(c, bad, _produce_req("bad", _batch(), acks), 2)
        _break_fd(bad.active_segment)  # the client has gone; the queued write meets EBADF
        time.sleep(0.2)  # the broker has seen the connection close
        writer.hold(False)
        deadline = time.monotonic() + 10
        while (
            s.call(lambda: s.broker.manager.dirs[s.dirs[1]].offline) is None and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert s.call(lambda: s.broker.manager.dirs[s.dirs[1]].offline) is not None
        errors = [r.getMessage() for r in s.records.errors()]
        assert any(f"Error while appending records to bad-0 in dir {s.dirs[1]}" in e for e in errors), errors
    finally:
        s.broker.append_writer.hold(False)
        s.stop()


def test_a_shutdown_writes_every_queued_append_before_the_marker(tmp_path):
    s = Served(tmp_path)
    try:
        lg = s.create_topic("t")
        writer = s.broker.append_writer
        with WireClient(s.bootstrap) as c:
            assert produce(c, "t", _batch(), acks=1).error_code == 0
            writer.hold(True)
            for _ in range(3):
                produce(c, "t", _batch(b"queued"), acks=0)
            deadline = time.monotonic() + 5
            while lg.log_end_offset < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert lg.log_end_offset == 4
            path = lg.active_segment.log_path
            size = lg.active_segment.size
            assert path.stat().st_size < size  # queued, not written
        s.stop()  # held still: the stop drains the writer regardless
        assert path.stat().st_size == size
        assert (s.dirs[0] / ck.CLEAN_SHUTDOWN_FILE).exists()
        assert not s.records.errors(), s.records.errors()
    finally:
        s.stop()


def test_a_kill_after_the_answers_keeps_every_answered_batch(tmp_path):
    """kill -9 right after the last acks=1 answer of a pipelined burst of a real serve: every
    answered batch is read back after the restart.  An end-to-end check only: the writer mostly
    keeps up here, so answering before the write would usually pass too (the held-writer test
    above is the one that fails then)."""
    from tests.broker.conftest import BrokerProcess
    from tests.broker.test_protocol import create_topic

    b = BrokerProcess(tmp_path / "data", extra=[WRITER_ON]).start()
    try:
        assert "append writer kind=native" in b.log_text()
        data = R.build_record_batch([R.SimpleRecord(b"x" * (256 << 10), b"k", [], int(time.time() * 1000))])
        req = _produce_req("t", data, 1)
        n = 200
        with WireClient(b.bootstrap) as c:
            create_topic(c, "t")
            for _ in range(n):
                c.send(0, 9, req)
            last = [c.recv(0, 9)[1].responses[0].partition_responses[0] for _ in range(n)][-1]
            b.kill()
        assert (last.error_code, last.base_offset) == (0, n - 1)
        b.start()
        with WireClient(b.bootstrap) as c:
            from tests.broker.test_protocol import fetch

            part = fetch(c, "t", n - 1).responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == n, part.high_watermark
            assert [x.base_offset for x in batches_of(part.records)] == [n - 1]
    finally:
        b.kill()


def test_a_produce_past_its_quota_is_throttled_at_once_though_its_write_is_queued(served):
    """producer_byte_rate: the connection is muted once the produce is handled, as for an answer
    made at once (Kafka mutes it then; an acks=0 produce has no answer to wait for), not once its
    queued write is done: the request after it is read only when the throttle time has passed.
    An acks=1 answer built after its write carries the throttle time."""
    from kafkatool.protocol.generated.api_versions_request import ApiVersionsRequest
    from tests.broker.test_quotas import configs

    served.create_topic("t")
    res = configs("alter", "--entity-type", "clients", "--entity-name", "slow",
                  "--add-config", "producer_byte_rate=900", "--bootstrap-server", served.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    writer = served.broker.append_writer
    with WireClient(served.bootstrap, client_id="slow") as c:
        writer.hold(True)
        threading.Timer(0.3, writer.hold, (False,)).start()
        # about 10,100 bytes in the window's first 10 s: ~1,010 B/s against 900, ~1.2 s owed
        c.send(0, 9, _produce_req("t", _batch(b"x" * 10_000), 0))
        c.send(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        # the write is done after 0.3 s; the muted connection reads the request after ~1.2 s
        assert not _answer_arrives(c.sock, 0.8)
        assert c.recv(18, 3)[1].error_code == 0
        p = c.request(0, 9, _produce_req("t", _batch(b"y" * 10_000), 1))
        assert p.responses[0].partition_responses[0].error_code == 0
        assert p.throttle_time_ms > 0
