"""Replication's cost, measured in one run: three brokers through ZooKeeper with replication
factor 3 and acks=all against one broker with acks=1, same machine, same loads.

Run standalone (opt-in, not part of pytest)::

    python bench/bench_cluster.py [--records 1000000] [--seconds 5] [--jepsen 0]

Loads (bench_broker's own, so the figures compare with its table):

* produce with librdkafka (confluent-kafka, default batching), 1 KiB records: MB/s;
* produce latency p50/p99 at 1,000 records/s (one record per request, one connection);
* failover: the leader of a replication-factor-3 partition is killed with SIGKILL under an
  idempotent acks=all producer; seconds until the new leader is in the partition state
  (bounded below by zookeeper.session.timeout.ms, 6 s here) and until producing resumes.

It prints each figure and the ratio cluster/single (target: throughput >= 0.5, p99 <= 5 ms
at 1,000 msg/s).  ``--jepsen SECONDS`` also runs the Jepsen-style checker
(tests/cluster/jepsen.py) for that long and prints its report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_broker import Target, latency, produce_librdkafka, start_ours  # noqa: E402

from tests.cluster.conftest import Cluster, wait_for  # noqa: E402
from tests.cluster.test_replication import Writer, create_topic, partition_state  # noqa: E402
from tests.zk.conftest import run_zookeeper  # noqa: E402

PARTITIONS = 4  # bench_broker.produce_librdkafka writes round-robin over this many partitions


def single(workdir: Path, records: int, seconds: float) -> dict:
    t = start_ours(workdir)
    try:
        from bench_broker import create_topic as raw_create

        raw_create(t.port, "bench", PARTITIONS)
        raw_create(t.port, "lat", 1)
        thr = produce_librdkafka(t, "bench", 1024, records)
        lat = latency(t, "lat", 1000, seconds)
        # one node: the ISR is the leader, so acks=all costs what acks=1 does
        return {
            "mb_s": thr.mb_s,
            "p50_ms": lat.extra["p50_ms"],
            "p99_ms": lat.extra["p99_ms"],
            "acks": "all = 1",
        }
    finally:
        t.stop()


def clustered(workdir: Path, records: int, seconds: float, jepsen_s: float) -> dict:
    out: dict = {}
    with run_zookeeper(workdir / "zk") as zk:
        # Kafka's own fetch size (the tests' Cluster uses 64 KiB to force several fetch rounds)
        c = Cluster(workdir, zk, 3, ["num.partitions=1", "replica.fetch.max.bytes=1048576"])
        c.start()
        try:
            create_topic(c, "bench", PARTITIONS, 3, min_insync_replicas=2)
            create_topic(c, "lat", 1, 3, min_insync_replicas=2)
            for p in range(PARTITIONS):
                wait_for(lambda p=p: len(partition_state(c, "bench", p)["isr"]) == 3, 30, "ISR")
            st = wait_for(lambda: (s := partition_state(c, "lat", 0)) and len(s["isr"]) == 3 and s, 30, "ISR")
            leader = c.brokers[st["leader"]]
            # librdkafka bootstraps from the leader of "lat" and finds every partition's leader;
            # the CPU figure is that one broker's
            t = Target("cluster", leader.proc, leader.port, workdir)
            thr = produce_librdkafka(t, "bench", 1024, records)
            lat = latency(t, "lat", 1000, seconds)
            out.update(
                mb_s=thr.mb_s,
                p50_ms=lat.extra["p50_ms"],
                p99_ms=lat.extra["p99_ms"],
                acks="all, RF 3, min ISR 2",
            )
            # failover under an idempotent acks=all producer
            create_topic(c, "failover", 1, 3, min_insync_replicas=2)
            st = wait_for(
                lambda: (s := partition_state(c, "failover", 0)) and len(s["isr"]) == 3 and s, 30, "ISR"
            )
            w = Writer(c.bootstrap, "failover")
            w.start()
            wait_for(lambda: len(w.acked) > 200, 30, "acks")
            k0 = time.monotonic()
            c.brokers[st["leader"]].kill()
            wait_for(
                lambda: partition_state(c, "failover", 0)["leader"] not in (st["leader"], -1),
                60,
                "leader",
                0.05,
            )
            out["election_s"] = time.monotonic() - k0
            n = len(w.acked)
            wait_for(lambda: len(w.acked) > n, 60, "acks again", 0.02)
            out["resumed_s"] = time.monotonic() - k0
            w.stop_ev.set()
            w.join(120)
            c.brokers[st["leader"]].start(timeout=60)
            if jepsen_s > 0:
                from tests.cluster import jepsen

                rep = jepsen.run(
                    c, topic="jepsen", partitions=3, seconds=jepsen_s, seed=int(time.time()), session_s=6.0
                )
                out["jepsen"] = rep.summary()
                out["jepsen_ok"] = rep.ok
        finally:
            c.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)  # 1 GB: shorter runs vary by +-40%
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument(
        "--jepsen", type=float, default=0.0, help="also run the Jepsen-style checker this long (s)"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        base = Path(d)
        (base / "single").mkdir()
        one = single(base / "single", a.records, a.seconds)
        three = clustered(base / "cluster", a.records, a.seconds, a.jepsen)
    if a.json:
        print(json.dumps({"single": one, "cluster": three}))
        return
    print(f"{'':28s} {'single broker':>16s} {'3 brokers, RF 3':>16s} {'ratio':>8s}")
    print(
        f"{'produce MB/s (librdkafka)':28s} {one['mb_s']:16.1f} {three['mb_s']:16.1f} {three['mb_s'] / one['mb_s']:8.2f}"
    )
    for k in ("p50_ms", "p99_ms"):
        print(f"{'latency ' + k + ' @1000/s':28s} {one[k]:16.2f} {three[k]:16.2f} {three[k] / one[k]:8.2f}")
    print(
        f"failover: new leader after {three['election_s']:.1f}s, producing again after {three['resumed_s']:.1f}s"
    )
    if "jepsen" in three:
        print("jepsen:", three["jepsen"])


if __name__ == "__main__":
    main()
