"""Leader epochs and truncation (replication.md scenario 6), and the fleet scan over the cluster.

Old leader A takes acks=1 writes its followers never fetch (they are stopped), then dies;
B is elected in the next epoch and takes other writes at the same offsets; A comes back,
asks B where its epoch ended (OffsetForLeaderEpoch), truncates its suffix and refetches, so
the three replicas end byte-identical.  ``kafkatool fleet scan`` over the three log dirs
then finds no divergence, and finds the one the test plants.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.broker.conftest import REPO
from tests.cluster.conftest import fetch_links, wait_answered, wait_for
from tests.cluster.test_replication import create_topic, partition_state, read_all

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(60) == 0


def log_bytes(broker, topic: str) -> bytes:
    d = broker.data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def fleet_scan(dirs) -> list[dict]:
    """`kafkatool fleet scan --json DIR...` in-process, on the suite's Spark session (the
    ``spark`` fixture: the JVM starts once for the suite, not once per scan)."""
    from typer.testing import CliRunner

    from kafkatool.cli import app

    r = CliRunner().invoke(app, ["fleet", "scan", "--json", *map(str, dirs)])
    assert r.exit_code in (0, 1), r.output[-2000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_a_returning_leader_truncates_what_it_alone_had(spark, cluster):
    create_topic(cluster, "div", 1, 3, min_insync_replicas=1)
    st = wait_for(
        lambda: (s := partition_state(cluster, "div", 0)) and len(s["isr"]) == 3 and s, 20, "ISR of 3"
    )
    produce(cluster.bootstrap, "div", [b"base-%d" % i for i in range(100)], "all")
    a = cluster.brokers[st["leader"]]
    followers = [cluster.brokers[b] for b in st["isr"] if b != st["leader"]]
    wait_for(
        lambda: all(len(log_bytes(f, "div")) == len(log_bytes(a, "div")) for f in followers), 20, "followers"
    )
    links = fetch_links(followers, a)
    for f in followers:
        os.kill(f.proc.pid, signal.SIGSTOP)
    try:
        wait_answered(links, a)  # their parked fetches come back empty before the writes below
        produce(a.bootstrap, "div", [b"only-on-a-%d" % i for i in range(20)], "1")
        a.kill()
    finally:
        for f in followers:
            os.kill(f.proc.pid, signal.SIGCONT)
    new = wait_for(
        lambda: (s := partition_state(cluster, "div", 0))["leader"] not in (st["leader"], -1) and s,
        30,
        "a new leader",
    )
    assert new["leader_epoch"] > st["leader_epoch"]
    produce(cluster.bootstrap, "div", [b"after-%d" % i for i in range(50)], "all")
    a.start(timeout=60)
    wait_for(lambda: len(partition_state(cluster, "div", 0)["isr"]) == 3, 60, "A back in the ISR")
    leader = cluster.brokers[partition_state(cluster, "div", 0)["leader"]]
    wait_for(lambda: log_bytes(a, "div") == log_bytes(leader, "div"), 30, "A identical to the leader")
    assert "truncating from 120 to 100" in a.log_text()
    values = [v for _, v in read_all(cluster.bootstrap, "div")]
    assert values == [b"base-%d" % i for i in range(100)] + [b"after-%d" % i for i in range(50)]
    for f in followers:
        assert log_bytes(f, "div") == log_bytes(leader, "div")

    # quiet point: ZooKeeper data is consistent, and the fleet scan sees three identical copies
    zk_check = subprocess.run(
        [sys.executable, "-m", "kafkatool", "zk", "check", "--zookeeper", cluster.connect],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert zk_check.returncode == 0, zk_check.stdout + zk_check.stderr
    cluster.stop()
    dirs = [b.data_dir for b in cluster.brokers.values()]
    # plant a divergence: one follower's copy of a batch gets another value (a valid batch);
    # one scan then shows it and nothing else (the faults above left no divergence of their own)
    from kafkatool.formats import records as R

    victim = followers[0].data_dir / "div-0" / "00000000000000000000.log"
    buf = bytearray(victim.read_bytes())
    b = next(x for x in R.iter_batches(buf) if x.base_offset >= 100)
    recs = list(b.records())
    forged = R.build_record_batch(
        [R.SimpleRecord(b"X" + bytes(r.value)[1:], r.key, (), r.timestamp) for r in recs],
        codec=b.codec,
        base_timestamp=b.base_timestamp,
        max_timestamp=b.max_timestamp,
    )
    forged = bytearray(forged)
    R.set_base_offset(forged, 0, b.base_offset)
    R.set_partition_leader_epoch(forged, 0, b.partition_leader_epoch)
    assert len(forged) == b.size
    buf[b.position : b.position + b.size] = forged
    victim.write_bytes(bytes(buf))
    rows = fleet_scan(dirs)
    div = [r for r in rows if r.get("type") == "divergence"]
    # the forged copy differs from each of the two others, at the forged batch, and nowhere else
    victim_id = next(i for i, br in cluster.brokers.items() if br is followers[0])
    assert len(div) == 2, div
    for r in div:
        assert (r["topic"], r["partition"], r["offset"]) == ("div", 0, b.base_offset), r
        assert victim_id in r["brokers"], r
