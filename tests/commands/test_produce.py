"""kafkatool produce (kafka-console-producer.sh, kcat -P) against a real `kafkatool serve`, each
record checked with a real librdkafka consumer: bytes, keys, headers and null markers as written,
partitions as librdkafka's murmur2 partitioner chooses them, every codec and acks, --json offsets,
an idempotent retry of a batch whose answer was lost (a proxy drops it) appended once, a record
too large named by its line, and bad input refused in one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkatool.assign.producer import murmur2, partition_for_key
from kafkatool.formats import compression
from kafkatool.formats.records import iter_batches
from tests.broker.conftest import REPO, BrokerProcess, free_port, make_broker  # noqa: F401
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.client_checks import at_high_watermarks

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 4


def produce(broker, *args, stdin: bytes = b"", timeout: float = 60.0) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "kafkatool",
        "produce",
        "--bootstrap-server",
        broker.bootstrap,
        *map(str, args),
    ]
    return subprocess.run(cmd, input=stdin, capture_output=True, cwd=REPO, timeout=timeout)


def create(broker, topic: str, partitions: int = PARTITIONS, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    fs[topic].result(timeout=15)


def consume(broker, topic: str, count: int, partitions: int = PARTITIONS, timeout: float = 20.0) -> list:
    """Every record of the topic (at least ``count``, and on to every partition's high
    watermark; waits up to ``timeout``), as (partition, offset, key, value, headers), in offset
    order per partition."""
    c = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    out = []
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        tps = [ck.TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                # at least ``count``, and then everything up to the high watermarks (a duplicate
                # or an extra record would be below them)
                if len(out) >= count and at_high_watermarks(c, tps):
                    break
                continue
            if m.error():
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or []))
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def json_rows(res) -> list[dict]:
    return [json.loads(x) for x in res.stdout.decode().splitlines()]


def summary(res) -> str:
    return res.stderr.decode().splitlines()[-1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("produce") / "data",
        port=free_port(),
        extra=[f"num.partitions={PARTITIONS}", "auto.create.topics.enable=false"],
    ).start()
    try:
        yield b
    finally:
        b.stop()


def test_murmur2_is_kafkas():
    # Kafka's UtilsTest.testMurmur2 vectors
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        bytes([ord("a"), ord("b"), ord("c")]): 479470107,
    }
    assert {k: murmur2(k) for k in vectors} == vectors


def test_lines_keys_headers_and_null_markers_arrive_as_written(broker):
    create(broker, "lines")
    lines = [
        b"h1:v1,h2:v2\tk1\tvalue one",
        b"h1:NULL\tk2\tvalue two",
        b"NULL\tk3\t",
        b"h3:\tNULL\tvalue with null key",
        b"h4:x\tk5\tNULL",
        b"h5:y\tk\xc3\xa96\tv\xff\xfebinary",  # non-UTF-8 value bytes kept as they are
        b"h6:z\tk7\ttab\tin value",
    ]
    stdin = b"\n".join(lines[:3]) + b"\r\n" + b"\r".join(lines[3:5]) + b"\n" + b"\n".join(lines[5:])
    props = ["parse.key=true", "parse.headers=true", "null.marker=NULL"]
    res = produce(
        broker, "--topic", "lines", "--json", *[x for p in props for x in ("--property", p)], stdin=stdin
    )
    assert res.returncode == 0, res.stderr
    assert summary(res).startswith("kafkatool: 7 records, ") and summary(res).endswith(" 0 errors")
    got = consume(broker, "lines", 7)
    assert len(got) == 7
    by_value = {r[3]: r for r in got}
    expect = [
        (b"k1", b"value one", [("h1", b"v1"), ("h2", b"v2")]),
        (b"k2", b"value two", [("h1", None)]),
        (b"k3", b"", []),
        (None, b"value with null key", [("h3", b"")]),
        (b"k5", None, [("h4", b"x")]),
        (b"k\xc3\xa96", b"v\xff\xfebinary", [("h5", b"y")]),
        (b"k7", b"tab\tin value", [("h6", b"z")]),
    ]
    for key, value, headers in expect:
        r = by_value[value]
        assert (r[2], r[4]) == (key, headers)
        if key is not None:
            assert r[0] == partition_for_key(key, PARTITIONS)
    # --json: one row per line, in input order, the offsets the consumer reads
    rows = json_rows(res)
    assert [r["line"] for r in rows] == list(range(1, 8))
    assert {(r["partition"], r["offset"]) for r in rows} == {(r[0], r[1]) for r in got}
    for row, (_key, value, _h) in zip(rows, expect, strict=True):
        assert (row["partition"], row["offset"]) == by_value[value][:2]


def test_keyed_records_land_where_librdkafka_murmur2_puts_them(broker):
    create(broker, "keyed")
    create(broker, "keyed-rd")
    keys = [b"key-%d" % i for i in range(60)] + [b"a", b"ab", b"abc", b"abcd", b"\xe2\x82\xac"]
    stdin = b"".join(k + b"\t" + b"v-" + k + b"\n" for k in keys)
    res = produce(
        broker, "--topic", "keyed", "--property", "parse.key=true", "--batch-size", 200, stdin=stdin
    )
    assert res.returncode == 0, res.stderr
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 0})
    for k in keys:
        p.produce("keyed-rd", key=k, value=b"v-" + k)
    assert p.flush(15) == 0
    ours = {r[2]: r[0] for r in consume(broker, "keyed", len(keys))}
    theirs = {r[2]: r[0] for r in consume(broker, "keyed-rd", len(keys))}
    assert len(ours) == len(keys) and ours == theirs
    assert len(set(ours.values())) == PARTITIONS  # the keys spread: the check can tell partitions apart
    # in input order within each partition
    got = consume(broker, "keyed", len(keys))
    for part in range(PARTITIONS):
        assert [r[2] for r in got if r[0] == part] == [k for k in keys if ours[k] == part]


def _batch_codecs(broker, topic: str) -> set[int]:
    out = set()
    for part in sorted(Path(broker.data_dir).glob(f"{topic}-*")):
        for seg in sorted(part.glob("*.log")):
            out |= {b.codec for b in iter_batches(seg.read_bytes())}
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec(broker, codec):
    topic = f"codec-{codec}"
    create(broker, topic, 1)
    lines = [b"record %d " % i + b"x" * (i % 50) for i in range(300)]
    res = produce(
        broker, "--topic", topic, "--compression-codec", codec, "--json", stdin=b"\n".join(lines) + b"\n"
    )
    assert res.returncode == 0, res.stderr
    got = consume(broker, topic, 300, partitions=1)
    assert [r[3] for r in got] == lines
    assert [(r["partition"], r["offset"]) for r in json_rows(res)] == [(0, i) for i in range(300)]
    assert _batch_codecs(broker, topic) == {compression.codec_from_name(codec)}


@pytest.mark.parametrize("acks", ["0", "1", "-1", "all"])
def test_acks(broker, acks):
    topic = f"acks{acks.replace('-', 'm')}"
    create(broker, topic, 2)
    lines = [b"a%d" % i for i in range(20)]
    res = produce(
        broker, "--topic", topic, "--request-required-acks", acks, "--json", stdin=b"\n".join(lines)
    )
    assert res.returncode == 0, res.stderr
    rows = json_rows(res)
    assert [r["line"] for r in rows] == list(range(1, 21))
    got = consume(broker, topic, 20, partitions=2)
    assert sorted(r[3] for r in got) == sorted(lines)
    if acks == "0":
        assert all(r["offset"] is None for r in rows)  # no answer: the offsets are unknown
    else:
        assert sorted((r["partition"], r["offset"]) for r in rows) == [(r[0], r[1]) for r in got]


def test_sync_sends_each_record_alone(broker):
    create(broker, "sync", 1)
    res = produce(broker, "--topic", "sync", "--sync", stdin=b"one\ntwo\nthree\n")
    assert res.returncode == 0, res.stderr
    data = (Path(broker.data_dir) / "sync-0" / "00000000000000000000.log").read_bytes()
    assert [b.count for b in iter_batches(data)] == [1, 1, 1]


def test_too_large_record_names_its_line(broker):
    create(broker, "small", 1, {"max.message.bytes": "1000"})
    stdin = b"first\n" + b"y" * 2000 + b"\nthird\n"
    res = produce(broker, "--topic", "small", "--json", stdin=stdin)
    assert res.returncode == 1, res.stderr
    errors = [x for x in res.stderr.decode().splitlines() if "error" in x and "records," not in x]
    assert len(errors) == 1 and errors[0].startswith("kafkatool: error: line 2: MESSAGE_TOO_LARGE"), errors
    assert summary(res).endswith("2 records, " + summary(res).split(", ")[1] + ", 1 errors")
    assert [r[3] for r in consume(broker, "small", 2, partitions=1)] == [b"first", b"third"]
    assert [r["line"] for r in json_rows(res)] == [1, 3]
    # nothing sent at all: exit 2
    res = produce(broker, "--topic", "small", stdin=b"z" * 3000)
    assert res.returncode == 2 and "line 1: MESSAGE_TOO_LARGE" in res.stderr.decode()


def one_line(res, code: int = 2) -> str:
    assert res.returncode == code, res.stderr
    err = res.stderr.decode()
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_bad_input_is_one_line(broker):
    # waited for max.block.ms (KafkaProducer.waitOnMetadata), then its TimeoutException's words
    began = time.monotonic()
    line = one_line(produce(broker, "--topic", "no-such-topic", "--max-block-ms", 700, stdin=b"x\n"))
    assert time.monotonic() - began >= 0.7
    assert line == "kafkatool: error: Topic no-such-topic not present in metadata after 700 ms."
    create(broker, "bad", 1)
    line = one_line(produce(broker, "--topic", "bad", "--property", "headers.separator=\t", stdin=b"x\n"))
    assert line == "kafkatool: error: headers.delimiter and headers.separator may not be equal"
    line = one_line(produce(broker, "--topic", "bad", "--property", "parse.keys=true", stdin=b"x\n"))
    assert "unknown property 'parse.keys'" in line
    line = one_line(produce(broker, "--topic", "bad", "--compression-codec", "brotli", stdin=b"x\n"))
    assert "--compression-codec" in line
    assert one_line(produce(broker, "--topic", "bad", "--file", "/nonexistent")).endswith(
        "/nonexistent: No such file or directory"
    )
    line = one_line(produce(broker, "--topic", "bad", "--partition", 5, "--max-block-ms", 300, stdin=b"x\n"))
    assert line == (
        "kafkatool: error: Partition 5 of topic bad with partition count 1 is not present in metadata after 300 ms."
    )
    line = one_line(
        produce(broker, "--topic", "bad", "--request-required-acks", 1, "--idempotence", stdin=b"")
    )
    assert "Must set acks to all" in line
    port = free_port()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkatool",
            "produce",
            "--bootstrap-server",
            f"127.0.0.1:{port}",
            "--topic",
            "t",
        ],
        input=b"x\n",
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert "no bootstrap server reachable" in one_line(res)
    # a line LineMessageReader cannot parse ends the input; what came before is sent
    res = produce(
        broker, "--topic", "bad", "--property", "parse.key=true", stdin=b"k\tv\nno separator\nk\tw\n"
    )
    assert res.returncode == 1
    assert "No key separator found on line number 2: 'no separator'" in res.stderr.decode()
    assert [r[3] for r in consume(broker, "bad", 1, partitions=1)] == [b"v"]
    res = produce(broker, "--topic", "bad", "--property", "parse.key=true", stdin=b"nothing\n")
    assert res.returncode == 2
    # ignore.error=true: sent without a key instead
    res = produce(
        broker,
        "--topic",
        "bad",
        "--property",
        "parse.key=true",
        "--property",
        "ignore.error=true",
        stdin=b"plain\n",
    )
    assert res.returncode == 0, res.stderr
    assert consume(broker, "bad", 2, partitions=1)[-1][2:4] == (None, b"plain")


# ----------------------------------------------------------------------------- a lost answer


def _close_both(*socks) -> None:
    """Close a proxied connection at once: shutdown() first, so the other pump's blocked recv()
    returns and the client sees the connection end (a bare close() from another thread leaves
    that recv() holding the socket open, and the client waits for its own timeout)."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


class DroppingProxy:
    """A TCP proxy in front of the broker (which advertises the proxy's port) that, while armed,
    forwards a Produce request and then drops its answer, closing the client's connection: the
    batch is appended, the producer never hears of it and must send it again. It also records the
    most Produce requests one connection had unanswered at once (``max_outstanding``)."""

    def __init__(self, target_port: int):
        self.port = free_port()
        self.target = target_port
        self.armed = 0
        self.dropped = 0
        #: Produce answers to swallow, the connection left open (a broker that never answers)
        self.swallow = 0
        self.swallowed = 0
        self.max_outstanding = 0
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", self.port))
        self.server.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.server.close()

    def _accept(self):
        while not self.stop:
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            produce_ids: dict[int, bool] = {}  # correlation id -> answered
            threading.Thread(target=self._up, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, produce_ids), daemon=True).start()

    @staticmethod
    def _frames(sock):
        buf = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 4:
                (size,) = struct.unpack(">i", buf[:4])
                if len(buf) < 4 + size:
                    break
                yield buf[: 4 + size]
                buf = buf[4 + size :]

    def _up(self, client, upstream, produce_ids):
        for frame in self._frames(client):
            api_key, _v, corr = struct.unpack(">hhi", frame[4:12])
            if api_key == 0:
                with self.lock:
                    produce_ids[corr] = False
                    outstanding = sum(1 for answered in produce_ids.values() if not answered)
                    self.max_outstanding = max(self.max_outstanding, outstanding)
            try:
                upstream.sendall(frame)
            except OSError:
                break
        _close_both(client, upstream)

    def _down(self, upstream, client, produce_ids):
        for frame in self._frames(upstream):
            (corr,) = struct.unpack(">i", frame[4:8])
            with self.lock:
                if corr in produce_ids:
                    produce_ids[corr] = True
                drop = corr in produce_ids and self.armed > 0
                if drop:
                    self.armed -= 1
                    self.dropped += 1
                swallow = corr in produce_ids and not drop and self.swallow > 0
                if swallow:
                    self.swallow -= 1
                    self.swallowed += 1
            if drop:
                break
            if swallow:
                continue
            try:
                client.sendall(frame)
            except OSError:
                break
        _close_both(client, upstream)


@pytest.fixture
def proxied(tmp_path):
    broker_port = free_port()
    proxy = DroppingProxy(broker_port)
    b = BrokerProcess(
        tmp_path / "data",
        port=broker_port,
        extra=["num.partitions=1", f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}"],
    ).start()
    b.client_bootstrap = f"127.0.0.1:{proxy.port}"
    try:
        yield b, proxy
    finally:
        b.stop()
        proxy.close()


class _Via:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


@pytest.mark.parametrize("idempotent", [True, False])
def test_lost_answer_is_retried_without_duplicate_when_idempotent(proxied, idempotent):
    b, proxy = proxied
    via = _Via(b.client_bootstrap)
    lines = [b"m%d" % i for i in range(30)]
    proxy.armed = 1
    flag = "--idempotence" if idempotent else "--no-idempotence"
    # topic created on first use (auto.create.topics.enable's default), batches of about 10 records
    res = produce(
        via, "--topic", "retry", flag, "--batch-size", 150, "--json", stdin=b"\n".join(lines) + b"\n"
    )
    assert proxy.dropped == 1  # the fault happened
    assert res.returncode == 0, res.stderr
    got = consume(_Via(b.bootstrap), "retry", len(lines), partitions=1)
    values = [r[3] for r in got]
    rows = json_rows(res)
    if idempotent:
        assert values == lines  # appended once, in order
        assert [r["offset"] for r in rows] == list(range(len(lines)))
    else:
        # the control: the same fault without idempotence appends the batch twice
        assert len(values) > len(lines) and sorted(set(values)) == sorted(lines)


def test_request_timeout_bounds_the_wait_for_an_answer(proxied):
    """request.timeout.ms is also the producer's wait for an answer (NetworkClient's request
    timeout): an answer that never comes drops the connection after it and the batch is sent
    again (appended once: idempotence), not after a fixed socket timeout; each such retry counts
    against retries (Sender: REQUEST_TIMED_OUT)."""
    b, proxy = proxied
    via = _Via(b.client_bootstrap)
    proxy.swallow = 1
    began = time.monotonic()
    res = produce(via, "--topic", "slow", "--request-timeout-ms", 1000, "--json", stdin=b"one\n")
    took = time.monotonic() - began
    assert proxy.swallowed == 1 and res.returncode == 0, res.stderr
    assert 1.0 <= took < 8, took  # the fixed 10 s socket timeout before
    assert [r[3] for r in consume(_Via(b.bootstrap), "slow", 1, partitions=1)] == [b"one"]
    proxy.swallow = 10
    res = produce(via, "--topic", "slow", "--request-timeout-ms", 300, "--message-send-max-retries", 1,
                  "--no-idempotence", stdin=b"two\n")  # fmt: skip
    assert proxy.swallowed == 3, proxy.swallowed  # the first try and one retry
    err = res.stderr.decode()
    assert (
        res.returncode == 2 and "line 1: REQUEST_TIMED_OUT: " in err and "no response within 0.3s" in err
    ), err


def _send_buffer(pid: int, port: int) -> int:
    """SO_SNDBUF of process ``pid``'s connection to ``port`` as the kernel holds it (ss's tb)."""
    import re

    out = subprocess.run(["ss", "-Htmnp", "dst", f"127.0.0.1:{port}"], capture_output=True, text=True,
                         timeout=10, check=True).stdout  # fmt: skip
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if f"pid={pid}," in line and i + 1 < len(lines):
            return int(re.search(r"\btb(\d+)", lines[i + 1]).group(1))
    raise AssertionError(f"no connection of {pid} to {port}: {out}")


def test_metadata_expiry_and_socket_buffer_are_applied(broker):
    """--metadata-expiry-ms (metadata.max.age.ms): partitions added while the producer runs are
    used once its metadata is that old (a key's partition is murmur2 % the new count);
    --socket-buffer-size (send.buffer.bytes) is its connections' SO_SNDBUF (Linux doubles it)."""
    from confluent_kafka.admin import NewPartitions

    create(broker, "expiry", 1)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", broker.bootstrap, "--topic",
           "expiry", "--timeout", "0", "--metadata-expiry-ms", "200", "--socket-buffer-size", "50000",
           "--property", "parse.key=true", "--json"]  # fmt: skip
    key = next(k for k in (b"k%d" % i for i in range(100)) if partition_for_key(k, 4) != 0)
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        proc.stdin.write(key + b"\tbefore\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["partition"] == 0
        assert _send_buffer(proc.pid, broker.port) == 100000
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its handle must outlive the call
        admin.create_partitions([NewPartitions("expiry", 4)])["expiry"].result(15)
        time.sleep(0.3)
        proc.stdin.write(key + b"\tafter\n")
        proc.stdin.close()
        assert json.loads(proc.stdout.readline())["partition"] == partition_for_key(key, 4)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_buffer_memory_bounds_what_waits(broker):
    """--max-memory-bytes (buffer.memory): a record larger is refused in Kafka's words; when a new
    batch would pass it, what waits is sent at once (Kafka's send() blocks, every batch sendable),
    not after linger.ms."""
    create(broker, "memory", 2)
    res = produce(broker, "--topic", "memory", "--max-memory-bytes", 200, "--batch-size", 100, "--partition", 0,
                  stdin=b"small\n" + b"x" * 300 + b"\n")  # fmt: skip
    assert res.returncode == 1
    assert (
        "line 2: RecordTooLargeException: The message is 370 bytes when serialized which is larger than the "
        "total memory buffer you have configured with the buffer.memory configuration."
    ) in res.stderr.decode()
    # a batch.size above buffer.memory: BufferPool refuses the allocation, the run ends
    res = produce(broker, "--topic", "memory", "--max-memory-bytes", 1000, stdin=b"a\nb\n")
    assert res.returncode == 2
    assert (
        "line 1: IllegalArgumentException: Attempt to allocate 16384 bytes, but there is a hard limit of 1000 on "
        "memory allocations." in res.stderr.decode()
    )
    keys = [next(k for k in (b"m%d" % i for i in range(100)) if partition_for_key(k, 2) == p) for p in (0, 1)]
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", broker.bootstrap, "--topic",
           "memory", "--timeout", "60000", "--max-memory-bytes", "16384", "--batch-size", "16384",
           "--property", "parse.key=true", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        proc.stdin.write(keys[1] + b"\tfirst\n" + keys[0] + b"\tsecond\n")
        proc.stdin.flush()
        row = json.loads(proc.stdout.readline())  # long before linger.ms (60 s)
        assert (row["line"], row["partition"]) == (1, 1) and proc.poll() is None
        proc.stdin.close()
        assert json.loads(proc.stdout.readline())["line"] == 2
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_line_is_sent_after_linger_while_the_input_stays_open(broker):
    """A terminal or a slow pipe: the record goes out once --timeout (linger.ms) passed, not at
    the end of the input."""
    create(broker, "linger", 1)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", broker.bootstrap,
           "--topic", "linger", "--timeout", "200", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        proc.stdin.write(b"early\n")
        proc.stdin.flush()
        got = consume(broker, "linger", 1, partitions=1, timeout=15)
        assert [r[3] for r in got] == [b"early"] and proc.poll() is None  # still reading
        row = json.loads(proc.stdout.readline())
        assert (row["line"], row["offset"]) == (1, 0)
        proc.stdin.write(b"late")  # the last line needs no end
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert [r[3] for r in consume(broker, "linger", 2, partitions=1)] == [b"early", b"late"]


def test_invalid_record_names_each_line_with_its_record_error(broker):
    create(broker, "compacted", 1, {"cleanup.policy": "compact"})
    res = produce(broker, "--topic", "compacted", "--property", "parse.key=true", "--property", "null.marker=-",
                  stdin=b"k\tfirst\n")  # fmt: skip
    assert res.returncode == 0, res.stderr
    # one batch of three records, the second without a key: the broker refuses the batch
    res = produce(broker, "--topic", "compacted", "--property", "parse.key=true", "--property", "null.marker=-",
                  stdin=b"a\t1\n-\t2\nb\t3\n")  # fmt: skip
    assert res.returncode == 2, res.stderr
    errors = res.stderr.decode().splitlines()[:-1]
    assert [e.split(":")[2].strip() for e in errors] == ["line 1", "line 2", "line 3"], errors
    assert all("INVALID_RECORD" in e for e in errors)
    assert "Compacted topic cannot accept message without key" in errors[1]
    assert "part of a batch which had one more more invalid records" in errors[0]
    assert [r[3] for r in consume(broker, "compacted", 1, partitions=1)] == [b"first"]


def test_broker_killed_and_restarted_mid_stream(tmp_path):
    """A crash (SIGKILL) between two parts of the input: the producer waits for the broker to be
    back, sends the rest with the sequences the restarted broker's producer state expects, and
    every line is in the log once."""
    b = BrokerProcess(tmp_path / "data", port=free_port(), extra=["num.partitions=1"]).start()
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", b.bootstrap,
           "--topic", "crash", "--timeout", "50", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        first = [b"before %d" % i for i in range(20)]
        proc.stdin.write(b"\n".join(first) + b"\n")
        proc.stdin.flush()
        rows = [json.loads(proc.stdout.readline()) for _ in first]  # all acknowledged
        assert [r["offset"] for r in rows] == list(range(20))
        b.kill()
        second = [b"after %d" % i for i in range(20)]
        proc.stdin.write(b"\n".join(second) + b"\n")
        proc.stdin.flush()
        time.sleep(1.0)  # the producer finds the broker gone and waits
        b.spawn().await_ready()
        proc.stdin.close()
        assert proc.wait(60) == 0, proc.stderr.read()
        rows += [json.loads(x) for x in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        b.stop()
    b.start()
    try:
        got = consume(b, "crash", 40, partitions=1)
    finally:
        b.stop()
    assert [r[3] for r in got] == first + second
    assert [r["offset"] for r in rows] == list(range(40))


def test_ctrl_c_sends_what_was_read_then_exits_130(broker):
    create(broker, "interrupt", 1)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", broker.bootstrap,
           "--topic", "interrupt", "--timeout", "60000"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        proc.stdin.write(b"typed\n")
        proc.stdin.flush()
        time.sleep(1.5)  # read, waiting for its linger of 60 s
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
        assert proc.stderr.read().decode().splitlines()[-1].startswith("kafkatool: 1 records, ")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert [r[3] for r in consume(broker, "interrupt", 1, partitions=1)] == [b"typed"]


def test_over_sasl_ssl_with_command_config(secured, tmp_path):  # noqa: F811
    cfg = command_config(secured, tmp_path / "client.properties")
    via = _Via(secured.sasl_ssl)
    res = produce(via, "--topic", "secured-produce", "--command-config", cfg, "--json", stdin=b"s1\ns2\n")
    assert res.returncode == 0, res.stderr
    assert [r["offset"] for r in json_rows(res)] == [0, 1]
    assert [r[3] for r in consume(secured, "secured-produce", 2, partitions=1)] == [b"s1", b"s2"]
    # without it the SASL_SSL listener cannot be spoken to: one line, exit 2
    one_line(produce(via, "--topic", "secured-produce", stdin=b"s3\n"))


def test_leaders_lost_and_back_are_followed(make_broker):  # noqa: F811
    """kafkatool.processes=2: the broker is two nodes; SIGKILL of the member takes its partitions'
    leader away until the primary restarts it with a new leader epoch (NOT_LEADER_OR_FOLLOWER,
    LEADER_NOT_AVAILABLE, a lost connection). The producer follows the metadata back: every line
    once, in order per partition, the offsets it prints the ones the consumer reads."""
    from tests.broker.test_processes import OVERRIDES, children, free_base_port, gone, wait_until

    b = make_broker(port=free_base_port(2, 1), extra=OVERRIDES).start(timeout=40)
    create(b, "moving", 4)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", b.bootstrap, "--topic", "moving",
           "--property", "parse.key=true", "--timeout", "20", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        first = [b"k%d\tbefore %d" % (i, i) for i in range(40)]
        proc.stdin.write(b"\n".join(first) + b"\n")
        proc.stdin.flush()
        rows = [json.loads(proc.stdout.readline()) for _ in first]
        [member] = children(b.proc.pid)
        os.kill(member, signal.SIGKILL)
        assert wait_until(lambda: gone(member), timeout=20)
        second = [b"k%d\tafter %d" % (i, i) for i in range(40)]
        proc.stdin.write(b"\n".join(second) + b"\n")
        proc.stdin.close()
        assert proc.wait(90) == 0, proc.stderr.read()
        rows += [json.loads(x) for x in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert wait_until(lambda: len(children(b.proc.pid)) == 1, timeout=30)  # the member is back
    got = consume(b, "moving", 80)
    assert len(got) == 80
    assert {(r["partition"], r["offset"]) for r in rows} == {(r[0], r[1]) for r in got}
    for part in range(4):
        values = [r[3] for r in got if r[0] == part]
        expected = [
            x.split(b"\t")[1] for x in first + second if partition_for_key(x.split(b"\t")[0], 4) == part
        ]
        assert values == expected
    assert len({r[0] for r in got}) == 4
