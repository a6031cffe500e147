"""Produce and consume throughput over SSL against PLAINTEXT, same broker, same run (issue 14).

One ``kafkatool serve`` with a PLAINTEXT and an SSL listener (throw-away CA); confluent-kafka
produces N records of SIZE bytes to a fresh topic on each listener and consumes them back;
the table gives MB/s per listener and the SSL/PLAINTEXT ratio.  Fetch uses sendfile on the
PLAINTEXT listener and buffered writes under TLS, so the consume ratio shows that cost too.

    python bench/bench_tls.py                # 200 MB each way per listener
    python bench/bench_tls.py --mb 20        # a smoke run

Opt-in, never part of the test suite; bounded in time; only 127.0.0.1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.broker.conftest import BrokerProcess, free_port  # noqa: E402
from tests.broker.security.certs import CA  # noqa: E402


def run(conf: dict, mb: int, size: int) -> tuple[float, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    n = mb * (1 << 20) // size
    value = b"x" * size
    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1})
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    produce = n * size / (time.perf_counter() - t0) / 1e6
    c = Consumer(
        {**conf, "group.id": "bench", "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20}
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    consume = got * size / (time.perf_counter() - t0) / 1e6
    c.close()
    return produce, consume


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--size", type=int, default=10240)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ca = CA(Path(d) / "pki")
        srv = ca.issue("broker")
        plain, tls_port = free_port(), free_port()
        opts = [
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={Path(d) / 'broker.pem'}",
        ]
        (Path(d) / "broker.pem").write_bytes(srv.key_pem + srv.cert_pem)
        b = BrokerProcess(Path(d) / "data", port=plain, extra=opts)
        b.extra = opts
        b.start()
        try:
            rows = {
                "PLAINTEXT": run({"bootstrap.servers": f"127.0.0.1:{plain}"}, args.mb, args.size),
                "SSL": run(
                    {
                        "bootstrap.servers": f"127.0.0.1:{tls_port}",
                        "security.protocol": "SSL",
                        "ssl.ca.location": str(ca.path),
                    },
                    args.mb,
                    args.size,
                ),
            }
        finally:
            b.stop()
    print(f"{args.mb} MB of {args.size}-byte records per listener, confluent-kafka, one partition")
    print(f"{'listener':<10} {'produce MB/s':>13} {'consume MB/s':>13}")
    for name, (p, c) in rows.items():
        print(f"{name:<10} {p:>13.1f} {c:>13.1f}")
    (pp, pc), (sp, sc) = rows["PLAINTEXT"], rows["SSL"]
    print(f"{'SSL/PLAIN':<10} {sp / pp:>13.2f} {sc / pc:>13.2f}")


if __name__ == "__main__":
    main()
