"""Replication and failover of three ``kafkatool serve`` brokers through a real ZooKeeper.

A topic with replication factor 3 and min.insync.replicas=2; an idempotent producer with
acks=all writes while the leader is killed with SIGKILL: a new leader is elected from the
ISR, producing resumes, and every acknowledged record is read back exactly once, in order.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from tests.broker.wire import WireClient
from tests.cluster.conftest import SHORT_ZK_SESSION, wait_for, zk_json

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def create_topic(cluster, name: str, partitions: int, rf: int, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fs = admin.create_topics(
        [NewTopic(name, partitions, rf, config={k.replace("_", "."): str(v) for k, v in configs.items()})],
        request_timeout=30,
    )
    fs[name].result(timeout=40)


def partition_state(cluster, topic: str, p: int) -> dict:
    return zk_json(cluster, f"/brokers/topics/{topic}/partitions/{p}/state")


def read_all(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60) -> list[tuple[int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    deadline = time.monotonic() + timeout
    try:
        lo, hi = _watermarks(c, TopicPartition(topic, partition), deadline)
        c.assign([TopicPartition(topic, partition, lo)])
        out = []
        while (not out or out[-1][0] < hi - 1) and time.monotonic() < deadline and hi > lo:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def _watermarks(c, tp, deadline: float) -> tuple[int, int]:
    """The partition's watermarks, asked again while its leader answers OFFSET_NOT_AVAILABLE:
    a leader just elected whose high watermark has not reached its epoch's start yet answers
    that (Kafka's Partition.fetchOffsetForTimestamp; a Java consumer retries it by itself,
    librdkafka's get_watermark_offsets hands it back)."""
    while True:
        try:
            return c.get_watermark_offsets(tp, timeout=20)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Writer(threading.Thread):
    """An idempotent acks=all producer writing 0, 1, 2, ... and remembering what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )
        self.topic = topic
        self.acked: list[int] = []
        self.failed: list[str] = []
        self.stop_ev = threading.Event()
        self.sent = 0

    def _cb(self, err, msg):
        if err is None:
            self.acked.append(int(msg.value()))
        else:
            self.failed.append(str(err))

    def run(self):
        deadline = time.monotonic() + 120
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            try:
                self.p.produce(self.topic, str(self.sent).encode(), partition=0, on_delivery=self._cb)
                self.sent += 1
            except BufferError:
                self.p.poll(0.05)
                continue
            self.p.poll(0)
            time.sleep(0.001)
        self.p.flush(120)


@SHORT_ZK_SESSION
def test_rf3_topic_survives_the_leader_being_killed(cluster):
    create_topic(cluster, "replicated", 1, 3, min_insync_replicas=2)
    st = wait_for(
        lambda: (s := partition_state(cluster, "replicated", 0)) and len(s["isr"]) == 3 and s, 20, "ISR of 3"
    )
    w = Writer(cluster.bootstrap, "replicated")
    w.start()
    wait_for(lambda: len(w.acked) >= 500, 30, "500 acknowledged records")
    leader = st["leader"]
    victim = cluster.brokers[leader]
    t0 = time.monotonic()
    victim.kill()
    new = wait_for(
        lambda: (s := partition_state(cluster, "replicated", 0))["leader"] not in (leader, -1) and s,
        30,
        "a new leader",
    )
    elected_s = time.monotonic() - t0
    print(
        f"leader {leader} killed; broker {new['leader']} leads at epoch {new['leader_epoch']} after {elected_s:.1f}s"
    )
    assert leader not in new["isr"] and new["leader_epoch"] == st["leader_epoch"] + 1
    n_before = len(w.acked)
    wait_for(lambda: len(w.acked) >= n_before + 500, 60, "producing to resume")
    w.stop_ev.set()
    w.join(150)
    assert not w.failed, w.failed[:5]
    # the acknowledged records, exactly once and in order
    got = [int(v) for _, v in read_all(cluster.bootstrap, "replicated")]
    assert got == sorted(set(got)), "duplicated or reordered records"
    missing = set(w.acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    # the killed broker comes back, catches up and rejoins the ISR
    victim.start(timeout=60)
    wait_for(lambda: len(partition_state(cluster, "replicated", 0)["isr"]) == 3, 60, "the ISR to heal")
    # the followers hold exactly the leader's records (same offsets, same bytes)
    leader_now = partition_state(cluster, "replicated", 0)["leader"]
    logs = {}
    for bid, b in cluster.brokers.items():
        path = b.data_dir / "replicated-0"
        logs[bid] = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))
    ref = logs[leader_now]
    for bid, data in logs.items():
        n = min(len(data), len(ref))
        assert data[:n] == ref[:n], f"broker {bid} diverges from leader {leader_now}"


@SHORT_ZK_SESSION
def test_two_brokers_down_refuses_acks_all(cluster):
    from kafkatool.formats import records as R
    from kafkatool.protocol.generated import ProduceRequest
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    create_topic(cluster, "minisr", 1, 3, min_insync_replicas=2)
    wait_for(lambda: len(partition_state(cluster, "minisr", 0)["isr"]) == 3, 20, "ISR of 3")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(100):
        p.produce("minisr", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    st = partition_state(cluster, "minisr", 0)
    down = [b for b in st["isr"] if b != st["leader"]]
    for b in down:
        cluster.brokers[b].kill()
    wait_for(lambda: len(partition_state(cluster, "minisr", 0)["isr"]) == 1, 30, "the ISR to shrink to one")
    survivor = cluster.brokers[st["leader"]]
    batch = R.build_record_batch([R.SimpleRecord(b"x", None, (), 0)])
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name="minisr", partition_data=[PartitionProduceData(index=0, records=batch)])
        ],
    )
    with WireClient(survivor.bootstrap) as c:
        resp = c.request(0, 9, req)
    assert resp.responses[0].partition_responses[0].error_code == 19  # NOT_ENOUGH_REPLICAS
    got = [int(v) for _, v in read_all(survivor.bootstrap, "minisr")]
    assert got == list(range(100))


def _produce_all(bootstrap: str, parts: dict[str, list[int]], timeout_ms: int) -> dict[tuple[str, int], int]:
    """One acks=-1 Produce v9 of a one-record batch to each partition of ``parts`` (topic ->
    partitions): (topic, partition) -> error."""
    from kafkatool.formats import records as R
    from kafkatool.protocol.generated import ProduceRequest
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    batch = R.build_record_batch([R.SimpleRecord(b"v", None, (), 0)])
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(
                name=t, partition_data=[PartitionProduceData(index=p, records=batch) for p in ps]
            )
            for t, ps in parts.items()
        ],
    )
    with WireClient(bootstrap, timeout=timeout_ms / 1000 + 20) as c:
        resp = c.request(0, 9, req)
    return {(r.name, pr.index): pr.error_code for r in resp.responses for pr in r.partition_responses}


def test_acks_all_waits_for_each_partition_and_times_out_on_a_stopped_follower(cluster):
    """DelayedProduce (replica.await_replication): an acks=all request is answered once the ISR of
    every partition it wrote has the records; while a follower still in the ISR stops fetching
    (SIGSTOP: the high watermark waits for it) the request waits its whole timeout and answers
    REQUEST_TIMED_OUT for each partition that follower holds, NONE for the others; the records
    stay in the log.  A follower's parked fetch that its peer's high-watermark move woke still
    wakes on the next append: single-record requests one after another are each answered well
    within replica.fetch.wait.max.ms (500 ms), which a missed wake-up costs each of them."""
    import os
    import signal

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # leader 1 everywhere: dp's partitions on all three brokers, dq's on two each
    layouts = {"dp": [[1, 2, 3], [1, 3, 2]], "dq": [[1, 2], [1, 3]]}
    new = [
        NewTopic(
            t,
            num_partitions=2,
            replication_factor=-1,
            replica_assignment=a,
            config={"min.insync.replicas": "2"},
        )
        for t, a in layouts.items()
    ]
    for f in admin.create_topics(new, request_timeout=30).values():
        f.result(timeout=40)
    for t, a in layouts.items():
        for p in (0, 1):
            wait_for(lambda t=t, p=p, n=len(a[p]): len(partition_state(cluster, t, p)["isr"]) == n, 30, "ISR")
            assert partition_state(cluster, t, p)["leader"] == 1
    leader = cluster.brokers[1].bootstrap
    both = {"dp": [0, 1], "dq": [0, 1]}
    assert set(_produce_all(leader, both, 30000).values()) == {0}
    t0 = time.monotonic()
    for i in range(30):
        assert _produce_all(leader, {"dp": [i % 2]}, 30000) == {("dp", i % 2): 0}
    assert time.monotonic() - t0 < 7.5  # 30 x 0.25 s; a missed wake-up costs 0.5 s each
    stopped = cluster.brokers[3].proc
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        # well within replica.lag.time.max.ms (10 s here): broker 3 stays in the ISR
        t0 = time.monotonic()
        got = _produce_all(leader, both, 1500)
        waited = time.monotonic() - t0
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    # REQUEST_TIMED_OUT where broker 3 is a replica; dq-0 is on brokers 1 and 2 only
    assert got == {("dp", 0): 7, ("dp", 1): 7, ("dq", 0): 0, ("dq", 1): 7}
    assert waited >= 1.4  # answered at the timeout, not when dq-0 was done
    assert set(_produce_all(leader, both, 30000).values()) == {0}
    for t in layouts:
        for p in (0, 1):
            n = 1 + (15 if t == "dp" else 0) + 1 + 1  # the timed-out record included
            assert len(read_all(leader, t, p)) == n


def test_refusals_are_one_line(tmp_path, zk_module):
    """No broker.id, or a log dir of another cluster: exit 2 with one line, no traceback."""
    import subprocess
    import sys

    from tests.broker.conftest import REPO, free_port

    def serve(data, *extra):
        return subprocess.run(
            [sys.executable, "-m", "kafkatool", "serve", "--no-banner", "-o", f"log.dirs={data}"]
            + [
                "-o",
                f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                "-o",
                f"zookeeper.connect={zk_module}/r1",
            ]
            + [x for e in extra for x in ("-o", e)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    p = serve(tmp_path / "a")
    assert p.returncode == 2 and "broker.id" in p.stderr and "Traceback" not in p.stderr, p.stderr
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "meta.properties").write_text(
        "version=0\nbroker.id=7\ncluster.id=SomeOtherClusterId0000\n"
    )
    p = serve(tmp_path / "b", "broker.id=7")
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and "doesn't match stored clusterId" in last and "Traceback" not in p.stderr, (
        p.stderr
    )


def test_followers_replicate_through_fetch_sessions_across_a_restart(cluster):
    """Followers fetch through incremental fetch sessions (KIP-227): each opens one with every
    leader it follows; a leader that stops takes its sessions along, its partitions move, the
    followers carry on with the new leaders, and the restarted broker catches up through new
    sessions of its own.  Every replica ends with the leader's bytes."""
    topic, n = "sessions", 4
    create_topic(cluster, topic, n, 3, min_insync_replicas=2)

    def states():
        return [partition_state(cluster, topic, p) for p in range(n)]

    wait_for(lambda: all(len(s["isr"]) == 3 for s in states()), 30, "ISR of 3 everywhere")
    sent = {p: 0 for p in range(n)}

    def write(count: int) -> None:
        prod = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        errors = []
        for p in range(n):
            for _ in range(count):
                prod.produce(
                    topic, b"%d" % sent[p], partition=p, on_delivery=lambda e, m: e and errors.append(e)
                )
                sent[p] += 1
        assert prod.flush(60) == 0 and not errors, errors[:3]

    write(200)
    leaders = {s["leader"] for s in states()}
    assert len(leaders) == 3  # every broker leads a partition, so every broker follows the others

    def sessions(bid: int, since: int = 0) -> set[int]:
        text = cluster.brokers[bid].log_text()[since:]
        return {int(x) for x in re.findall(r"fetcher from broker (\d+): fetch session \d+", text)}

    for bid in cluster.brokers:
        wait_for(lambda bid=bid: sessions(bid) == leaders - {bid}, 20, f"broker {bid}'s fetch sessions")
    victim = states()[0]["leader"]
    b = cluster.brokers[victim]
    assert b.stop(timeout=60) == 0
    wait_for(lambda: all(s["leader"] not in (victim, -1) for s in states()), 30, "leaders moved")
    write(200)
    mark = len(b.log_text())
    b.start(timeout=60)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in states()), 60, "the ISR to heal")
    others = set(cluster.brokers) - {victim}
    wait_for(lambda: sessions(victim, mark) == others & {s["leader"] for s in states()}, 20, "new sessions")
    write(100)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in states()), 60, "the ISR after the last writes")
    for p, s in enumerate(states()):
        got = [int(v) for _, v in read_all(cluster.bootstrap, topic, p)]
        assert got == list(range(sent[p])), f"partition {p}"

        def log_bytes(bid: int, p: int = p) -> bytes:
            d = cluster.brokers[bid].data_dir / f"{topic}-{p}"
            return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

        wait_for(
            lambda p=p, s=s: len({log_bytes(bid) for bid in cluster.brokers}) == 1,
            30,
            f"every replica of partition {p} to hold the leader's bytes",
        )
