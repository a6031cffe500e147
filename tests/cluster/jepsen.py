"""A Jepsen-style checker for a three-broker cluster (used by tests/cluster/test_jepsen.py and
bench/jepsen_cluster.py).

Writers: one idempotent acks=all producer per partition writes 0, 1, 2, ... and records
every acknowledged value.  A reader follows every partition from the beginning during the
run and records what it saw (a consumer sees only committed records, below the high
watermark).  A nemesis applies random faults for a bounded time: kill -9 and restart,
SIGSTOP/SIGCONT (short, and long enough for the ZooKeeper session to expire), a clean
SIGTERM restart (controlled shutdown), killing the controller.  At the end the cluster is
healed and every partition is read back from the start.

The report counts lost records (acknowledged or once read, but not in the final read),
duplicated records and reordered records; with acks=all, min.insync.replicas=2 and
idempotence all three must be zero.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Report:
    seconds: float
    faults: list[str]
    acked: int
    read_during: int
    final: int
    lost: list[tuple[int, int]] = field(default_factory=list)
    duplicated: list[tuple[int, int]] = field(default_factory=list)
    reordered: list[tuple[int, int]] = field(default_factory=list)
    unavailable_s: float = 0.0
    producer_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered)

    def summary(self) -> str:
        return (
            f"{self.seconds:.0f}s, {len(self.faults)} faults ({', '.join(self.faults)}); acknowledged {self.acked}, "
            f"read during the run {self.read_during}, read at the end {self.final}; lost {len(self.lost)}, "
            f"duplicated {len(self.duplicated)}, reordered {len(self.reordered)}; "
            f"longest time with no acknowledgement {self.unavailable_s:.1f}s"
        )


class _Writer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, partition: int, deadline: float):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 300000,
                "retry.backoff.ms": 100,
            }
        )
        self.topic, self.partition = topic, partition
        self.acked: list[int] = []
        self.ack_times: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.deadline = deadline
        self.next = 0

    def _cb(self, err, msg):
        if err is None:
            self.acked.append(int(msg.value()))
            self.ack_times.append(time.monotonic())
        else:
            self.errors.append(str(err))

    def run(self):
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            if len(self.p) > 2000:
                self.p.poll(0.05)
                continue
            self.p.produce(
                self.topic, str(self.next).encode(), partition=self.partition, on_delivery=self._cb
            )
            self.next += 1
            self.p.poll(0)
            time.sleep(0.002)
        self.p.flush(max(1.0, self.deadline + 300 - time.monotonic()))


class _Reader(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, partitions: int, deadline: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.deadline = deadline

    def run(self):
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "jepsen-reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                self.seen[m.partition()].append(int(m.value()))
        finally:
            c.close()


def _controller_id(cluster) -> int | None:
    k = cluster.kazoo()
    try:
        return json.loads(k.get("/controller")[0])["brokerid"]
    except Exception:  # noqa: BLE001 (no controller at this instant)
        return None
    finally:
        k.stop()
        k.close()


FAULTS = ("kill9", "pause", "expire", "restart", "kill_controller")


def nemesis(cluster, rng: random.Random, until: float, session_s: float, faults=FAULTS) -> list[str]:
    """Random faults, one at a time, each healed before the next; bounded by ``until``."""
    done: list[str] = []
    for _ in range(1000):
        if time.monotonic() + session_s + 8 > until:
            break
        time.sleep(rng.uniform(1.0, 3.0))
        kind = rng.choice(faults)
        bid = rng.choice(sorted(cluster.brokers))
        if kind == "kill_controller":
            bid = _controller_id(cluster) or bid
        b = cluster.brokers[bid]
        if kind in ("kill9", "kill_controller"):
            b.kill()
            time.sleep(rng.uniform(1.0, 4.0))
            b.start(timeout=90)
        elif kind == "pause":
            os.kill(b.proc.pid, signal.SIGSTOP)
            time.sleep(rng.uniform(0.5, 2.0))
            os.kill(b.proc.pid, signal.SIGCONT)
        elif kind == "expire":
            os.kill(b.proc.pid, signal.SIGSTOP)
            time.sleep(session_s + 2.0)  # its ZooKeeper session expires; it is out of the cluster
            os.kill(b.proc.pid, signal.SIGCONT)
        elif kind == "restart":
            b.stop(timeout=90)
            b.start(timeout=90)
        done.append(f"{kind}({bid})")
    return done


def run(
    cluster, *, topic: str, partitions: int, seconds: float, seed: int, session_s: float, faults=FAULTS
) -> Report:
    from tests.cluster.conftest import wait_for
    from tests.cluster.test_replication import create_topic, partition_state, read_all

    rng = random.Random(seed)
    create_topic(cluster, topic, partitions, 3, min_insync_replicas=2)
    for p in range(partitions):
        wait_for(lambda p=p: len(partition_state(cluster, topic, p)["isr"]) == 3, 30, f"ISR of {topic}-{p}")
    t0 = time.monotonic()
    until = t0 + seconds
    writers = [_Writer(cluster.bootstrap, topic, p, until) for p in range(partitions)]
    reader = _Reader(cluster.bootstrap, topic, partitions, until + 120)
    for w in writers:
        w.start()
    reader.start()
    done = nemesis(cluster, rng, until, session_s, faults)
    # heal: every broker up, every partition back to a full ISR
    for b in cluster.brokers.values():
        if not b.alive():
            b.start(timeout=90)
    for w in writers:
        w.stop.set()
    for w in writers:
        w.join(360)
    for p in range(partitions):
        wait_for(
            lambda p=p: len(partition_state(cluster, topic, p)["isr"]) == 3,
            120,
            f"ISR of {topic}-{p} to heal",
        )
    # the reader reads on until it has every acknowledged record (bounded; what it has not read by
    # then is still checked: acknowledged records are read back below whatever it saw)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        set(w.acked) - set(reader.seen[p]) for p, w in enumerate(writers)
    ):
        time.sleep(0.1)
    reader.stop.set()
    reader.join(30)
    report = Report(time.monotonic() - t0, done, sum(len(w.acked) for w in writers), 0, 0)
    report.read_during = sum(len(v) for v in reader.seen.values())
    for w in writers:
        report.producer_errors += w.errors[:5]
        times = [t0, *w.ack_times, until]
        report.unavailable_s = max(
            report.unavailable_s, max(b - a for a, b in zip(times, times[1:], strict=False))
        )
    for p, w in enumerate(writers):
        got = [int(v) for _, v in read_all(cluster.bootstrap, topic, p, timeout=120)]
        report.final += len(got)
        present = set(got)
        if len(present) != len(got):
            seen: set[int] = set()
            report.duplicated += [(p, v) for v in got if v in seen or seen.add(v)]
        report.reordered += [(p, b) for a, b in zip(got, got[1:], strict=False) if b <= a]
        must = set(w.acked) | set(reader.seen[p])
        report.lost += [(p, v) for v in sorted(must - present)]
    return report
