"""SIGTERM with clients connected: connections close quietly, one info line says how many."""

from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def test_sigterm_with_clients_connected_closes_quietly(make_broker):
    b = make_broker(extra=["num.partitions=1"]).start()
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    for i in range(100):
        p.produce("quiet", value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "g-quiet",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition("quiet", 0, 0)])
    deadline = time.monotonic() + 30
    got = 0
    while got < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 100
    raw = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(3)]
    # one connection half-way through a frame: the server is blocked in readexactly(size)
    raw[0].sendall(struct.pack(">i", 100) + b"abc")
    time.sleep(0.3)
    assert b.stop() == 0
    log = b.log_text()
    assert "Traceback" not in log and "CancelledError" not in log and "Exception in callback" not in log
    (line,) = [x for x in log.splitlines() if "closing client connections" in x]
    count = int(line.rsplit("count=", 1)[1].split()[0])
    assert count >= 5  # 3 raw sockets + the producer's and the consumer's connections
    assert "shutdown complete clean=true" in log
    for s in raw:
        s.close()
    c.close()


def test_verify_is_clean_on_a_live_and_on_a_killed_broker_dir(make_broker):
    """Issue 18/12: the active segments' preallocated, zero-filled .index/.timeindex are
    what Kafka repairs at start-up; on a live dir and after kill -9 verify must not call
    them corrupt (one rule for both)."""
    from typer.testing import CliRunner

    from kafkatool.cli import app

    b = make_broker(
        extra=["num.partitions=2", "log.segment.bytes=100000", "log.index.interval.bytes=512"]
    ).start()
    # batches well under segment.bytes (a larger one is RECORD_LIST_TOO_LARGE, as in Kafka)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 1, "acks": "all", "batch.size": 16384})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(3000):
        p.produce("live", key=b"k%d" % i, value=b"x" * 300, on_delivery=report)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:3]
    # and a topic with no data at all: its active segment's index is nothing but preallocation
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("empty", 1, 1)])["empty"].result(30)
    runner = CliRunner()
    live = runner.invoke(app, ["verify", "--json", str(b.data_dir)])
    assert live.exit_code == 0, live.output[-3000:]
    b.kill()
    crashed = runner.invoke(app, ["verify", "--json", str(b.data_dir)])
    assert crashed.exit_code == 0, crashed.output[-3000:]
