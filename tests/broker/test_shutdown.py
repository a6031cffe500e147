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
