"""Consumer groups with real clients (confluent-kafka / librdkafka, kafka-python) against ``kafkatool serve``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from kafkatool.broker.group.hashing import partition_for
from tests.broker.conftest import REPO, BrokerProcess

GROUP_OVERRIDES = [
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "offsets.topic.num.partitions=5",
]
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "topic.metadata.refresh.interval.ms": 1000}


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("gbroker") / "data", extra=GROUP_OVERRIDES).start()
    yield b
    b.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    fs = admin.create_topics([NewTopic(topic, partitions, 1)])
    fs[topic].result(15)


def produce(bootstrap: str, topic: str, n: int, partitions: int, prefix: str = "m") -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{prefix}-{i}".encode(), key=str(i).encode(), partition=i % partitions)
    assert p.flush(20) == 0


def ck_consumer(bootstrap: str, group: str, **extra):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **FAST,
    }
    conf.update(extra)
    return Consumer(conf)


def wait_for(cond, timeout: float, poll=None, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if poll is not None:
            poll()
        if cond():
            return
        if poll is None:
            time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def partitions_of(c) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def split_ok(assignments: list[set[int]], total: int) -> bool:
    if any(not a for a in assignments):
        return False
    union = set().union(*assignments)
    return union == set(range(total)) and sum(len(a) for a in assignments) == total


# ---------------------------------------------------------------------------- librdkafka


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_confluent_two_then_three_members(gbroker, assignor):
    bs = gbroker.bootstrap
    topic, group = name("gt"), name("gg")
    create_topic(bs, topic, 6)
    members = []
    got: dict[int, list] = {}

    def poll_all():
        for i, c in enumerate(members):
            for m in c.consume(num_messages=100, timeout=0.05):
                assert m.error() is None, m.error()
                got.setdefault(i, []).append((m.partition(), m.offset()))

    try:
        for _ in range(2):
            c = ck_consumer(bs, group, **{"partition.assignment.strategy": assignor})
            c.subscribe([topic])
            members.append(c)
        wait_for(lambda: split_ok([partitions_of(c) for c in members], 6), 30, poll_all, "two-member split")
        c = ck_consumer(bs, group, **{"partition.assignment.strategy": assignor})
        c.subscribe([topic])
        members.append(c)
        wait_for(lambda: split_ok([partitions_of(c) for c in members], 6), 30, poll_all, "three-member split")
        assert sorted(len(partitions_of(c)) for c in members) == [2, 2, 2]
        produce(bs, topic, 120, 6)
        wait_for(lambda: sum(len(v) for v in got.values()) >= 120, 30, poll_all, "all records")
        for i, c in enumerate(members):
            assert {p for p, _ in got.get(i, [])} <= partitions_of(c)
        seen = [r for v in got.values() for r in v]
        assert len(seen) == len(set(seen)) == 120  # exactly once across the members
    finally:
        for c in members:
            c.close()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs})
    d = admin.describe_consumer_groups([group])[group].result(10)
    assert d.members == [] and str(d.state).endswith("EMPTY")


def test_member_that_stops_heartbeating_is_expelled(gbroker):
    bs = gbroker.bootstrap
    topic, group = name("gx"), name("gxg")
    create_topic(bs, topic, 4)
    script = textwrap.dedent(
        f"""
        import sys, time
        from confluent_kafka import Consumer
        c = Consumer({{"bootstrap.servers": {bs!r}, "group.id": {group!r}, "session.timeout.ms": 2000,
                       "heartbeat.interval.ms": 200, "enable.auto.commit": False}})
        c.subscribe([{topic!r}])
        while True:
            c.poll(0.1)
            if c.assignment():
                print("ASSIGNED", sorted(tp.partition for tp in c.assignment()), flush=True)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    main = ck_consumer(bs, group)
    try:
        main.subscribe([topic])
        wait_for(
            lambda: (
                split_ok([partitions_of(main), {0, 1, 2, 3} - partitions_of(main)], 4)
                and len(partitions_of(main)) == 2
            ),
            30,
            lambda: main.poll(0.05),
            "a split with the child",
        )
        os.kill(child.pid, signal.SIGSTOP)  # no more heartbeats, socket stays open
        t0 = time.monotonic()
        wait_for(
            lambda: partitions_of(main) == {0, 1, 2, 3}, 20, lambda: main.poll(0.05), "the partitions to move"
        )
        took = time.monotonic() - t0
        # the session (2 s) must expire, then a rebalance; not instant, not the 5-minute new-member timeout
        assert 1.5 < took < 15, took
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bs})
        d = admin.describe_consumer_groups([group])[group].result(10)
        assert len(d.members) == 1 and str(d.state).endswith("STABLE")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        main.close()


def test_static_members_rejoin_without_rebalance(gbroker):
    bs = gbroker.bootstrap
    topic, group = name("gs"), name("gsg")
    create_topic(bs, topic, 4)
    assigns = {"a": 0, "b": 0}

    def mk(who):
        def on_assign(c, parts):
            assigns[who] += 1

        c = ck_consumer(bs, group, **{"group.instance.id": f"inst-{who}", "session.timeout.ms": 10000})
        c.subscribe([topic], on_assign=on_assign)
        return c

    a, b = mk("a"), mk("b")
    b2 = None
    try:
        wait_for(
            lambda: split_ok([partitions_of(a), partitions_of(b)], 4),
            30,
            lambda: (a.poll(0.05), b.poll(0.05)),
            "static split",
        )
        time.sleep(0.5)
        for _ in range(10):
            a.poll(0.05)
        before_a, parts_b = assigns["a"], partitions_of(b)
        b.close()  # a static member sends no LeaveGroup
        b2 = mk("b")
        wait_for(
            lambda: partitions_of(b2) == parts_b, 20, lambda: (a.poll(0.05), b2.poll(0.05)), "b to come back"
        )
        for _ in range(20):
            a.poll(0.05)
            b2.poll(0.05)
        assert assigns["a"] == before_a, "the other static member was rebalanced"
        assert partitions_of(a) == {0, 1, 2, 3} - parts_b
    finally:
        a.close()
        if b2 is not None:
            b2.close()


def test_commits_survive_restart_and_dump_log_shows_them(make_broker, tmp_path):
    from confluent_kafka import TopicPartition

    b = make_broker(extra=GROUP_OVERRIDES).start()
    bs = b.bootstrap
    topic, group = "commits", "committers"
    create_topic(bs, topic, 2)
    produce(bs, topic, 20, 2)
    c = ck_consumer(bs, group)
    c.subscribe([topic])
    n = 0
    deadline = time.monotonic() + 30
    while n < 20 and time.monotonic() < deadline:
        n += len([m for m in c.consume(20, 0.2) if m.error() is None])
    assert n == 20
    c.commit(offsets=[TopicPartition(topic, 0, 7, "meta-0"), TopicPartition(topic, 1, 9)], asynchronous=False)
    c.close()

    def committed():
        cc = ck_consumer(b.bootstrap, group)
        try:
            return [
                (tp.partition, tp.offset, tp.metadata)
                for tp in cc.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 15)
            ]
        finally:
            cc.close()

    assert committed() == [(0, 7, "meta-0"), (1, 9, None)]
    b.stop()
    b.start()
    assert committed() == [(0, 7, "meta-0"), (1, 9, None)]
    b.kill()  # a crash: the log is recovered and replayed
    b.start()
    assert committed() == [(0, 7, "meta-0"), (1, 9, None)]
    b.stop()
    part = partition_for(group, 5)
    seg = b.data_dir / f"__consumer_offsets-{part}" / "00000000000000000000.log"
    out = subprocess.run(
        [sys.executable, "-m", "kafkatool", "dump-log", "--offsets-decoder", str(seg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert (
        'key: {"type":"1","data":{"group":"committers","topic":"commits","partition":0}} '
        'payload: {"version":"3","data":{"offset":7,"leaderEpoch":-1,"metadata":"meta-0'
    ) in out.stdout  # (confluent-kafka-python sends the metadata with its C string's NUL)
    groups = [
        json.loads(line.split(" payload: ", 1)[1]) for line in out.stdout.splitlines() if '"type":"2"' in line
    ]
    assert groups and groups[-1]["data"]["members"] == []  # the group emptied when the consumer closed
    assert groups[0]["data"]["members"][0]["subscription"]["topics"] == [topic]


def test_concurrent_rebalances_of_chained_groups(gbroker):
    """Three groups of three consumers: group i reads topic i and writes topic i+1, with commits,
    while members start staggered and one member per group is replaced mid-way."""
    from confluent_kafka import KafkaException, Producer, TopicPartition

    bs = gbroker.bootstrap
    tag = uuid.uuid4().hex[:6]
    topics = [f"chain{i}-{tag}" for i in range(4)]
    for t in topics:
        create_topic(bs, t, 3)
    N = 600

    def feed():  # records keep arriving while the groups rebalance
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
        for i in range(N):
            p.produce(topics[0], value=f"v-{i}".encode(), key=str(i).encode(), partition=i % 3)
            if i % 20 == 19:
                p.flush(10)
                time.sleep(0.15)
        p.flush(10)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    lock = threading.Lock()
    deliveries: list[tuple[int, int, int, float, int]] = []  # (group, partition, offset, time, member)
    commits: list[tuple[int, int, int, float]] = []  # (group, partition, committed offset, time)
    bad_logs: list[str] = []
    log_lines: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    class Capture:
        def __init__(self):
            self.closed = False

        def log(self, level, msg, *args, **kw):
            log_lines.append(1)
            text = msg % args if args else str(msg)
            if not self.closed and ("UNKNOWN_MEMBER_ID" in text or "Unknown member" in text):
                bad_logs.append(text)

        debug = info = warning = error = critical = log

    def member(gi: int, mi: int, lifetime: float | None):
        cap = Capture()
        c = ck_consumer(bs, f"chain-{tag}-{gi}", logger=cap, debug="cgrp", **{"session.timeout.ms": 6000})
        p = Producer({"bootstrap.servers": bs, "linger.ms": 2})
        pending: dict[int, int] = {}

        def commit_pending():
            if not pending:
                return
            offs = [TopicPartition(topics[gi], part, off) for part, off in pending.items()]
            try:
                c.commit(offsets=offs, asynchronous=False)
            except KafkaException as exc:
                err = exc.args[0]
                if "UNKNOWN_MEMBER" in err.name():
                    errors.append(f"group {gi}: commit got {err}")
                pending.clear()  # rebalance in progress / illegal generation: redelivery is allowed
                return
            now = time.monotonic()
            with lock:
                for part, off in pending.items():
                    commits.append((gi, part, off, now))
            pending.clear()

        def on_revoke(cons, parts):
            p.flush(10)
            commit_pending()

        c.subscribe([topics[gi]], on_revoke=on_revoke)
        end = None if lifetime is None else time.monotonic() + lifetime
        try:
            while not stop.is_set() and (end is None or time.monotonic() < end):
                msgs = c.consume(num_messages=20, timeout=0.1)
                now = time.monotonic()
                for m in msgs:
                    if m.error():
                        if "UNKNOWN_MEMBER" in m.error().name():
                            errors.append(f"group {gi}: {m.error()}")
                        continue
                    with lock:
                        deliveries.append((gi, m.partition(), m.offset(), now, mi))
                    p.produce(topics[gi + 1], key=m.key(), value=m.value())
                    pending[m.partition()] = m.offset() + 1
                if msgs:
                    p.flush(10)
                    commit_pending()
            p.flush(10)
            commit_pending()
        finally:
            cap.closed = True
            c.close()

    threads = []

    def spawn(gi, lifetime=None, delay=0.0):
        mi = len(threads)

        def run():
            time.sleep(delay)
            member(gi, mi, lifetime)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)

    for gi in range(3):
        spawn(gi, delay=0.0)
        spawn(gi, delay=0.3 * gi + 0.2)
        spawn(gi, lifetime=1.5 + gi * 0.5, delay=0.5)  # leaves mid-way...
        spawn(gi, delay=2.5 + gi * 0.3)  # ...and is replaced
        spawn(gi, lifetime=1.5, delay=3.5 + gi * 0.2)  # a short-lived fourth member

    from confluent_kafka import Consumer

    final = Consumer({"bootstrap.servers": bs, "group.id": f"final-{tag}", "auto.offset.reset": "earliest"})
    final.subscribe([topics[3]])
    values = set()
    deadline = time.monotonic() + 90
    try:
        while len(values) < N and time.monotonic() < deadline:
            for m in final.consume(200, 0.2):
                if m.error() is None:
                    values.add(m.value())
    finally:
        stop.set()
        feeder.join(30)
        for t in threads:
            t.join(30)
        final.close()
    assert values == {f"v-{i}".encode() for i in range(N)}
    assert not errors, errors[:5]
    assert not bad_logs, bad_logs[:5]
    # no offset below a committed position is ever delivered again after the commit
    by_group: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for gi, part, off, t in commits:
        by_group.setdefault((gi, part), []).append((t, off))
    for gi, part, off, t, _ in deliveries:
        earlier = [c for ct, c in by_group.get((gi, part), []) if ct < t]
        if earlier:
            assert off >= max(earlier), (
                f"group {gi} partition {part}: offset {off} delivered after commit {max(earlier)}"
            )
    assert len(commits) > 0 and len({d[:3] for d in deliveries}) >= 3 * N
    assert log_lines, "the librdkafka log hook saw nothing"
    for gi in range(3):  # ownership really moved between members in every group
        assert len({d[4] for d in deliveries if d[0] == gi}) >= 3


# ---------------------------------------------------------------------------- kafka-python


def test_kafka_python_members_then_librdkafka_joins(gbroker):
    """Two kafka-python members, then a librdkafka member in the same group (all range).

    kafka-python 3.0.12 runs a JoinGroup/SyncGroup round as a task of its I/O thread that poll()
    awaits for at most its timeout; a round that completes while no poll() awaits it can be lost:
    seen under load, the next poll sends a new JoinGroup (a leader's starts a new rebalance, as
    Kafka's coordinator does for a leader's JoinGroup in Stable: a storm that never settled when
    two members were polled in turn, 200 ms each, from one thread), or the consumer stops
    heartbeating and its poll() returns at once from then on (the broker expels it after the
    session timeout, and it never rejoins). So each kafka-python consumer polls in a thread of its
    own, as an application runs one, with a poll timeout (5 s) that a join under load fits in, not
    one that cuts most joins in two; the main thread reads their assignments and polls librdkafka."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.structs import TopicPartition as KTP

    bs = gbroker.bootstrap
    topic, group = name("gk"), name("gkg")
    create_topic(bs, topic, 6)

    def kp():
        return KafkaConsumer(
            topic,
            bootstrap_servers=bs,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
            partition_assignment_strategy=[RangePartitionAssignor],
        )

    lock = threading.Lock()
    got: dict[str, list] = {}
    failures: list[str] = []
    stop = threading.Event()

    def kafka_python_loop(label, c):
        try:
            while not stop.is_set():
                recs = [(r.partition, r.offset) for rs in c.poll(timeout_ms=5000).values() for r in rs]
                with lock:
                    got.setdefault(label, []).extend(recs)
        except Exception as exc:  # reported by the main thread
            failures.append(f"{label}: {exc!r}")

    def consume_ck():
        """The librdkafka member is used by this thread alone (confluent-kafka serializes calls
        on one consumer: an assignment() beside another thread's consume loop waits for a gap)."""
        if ck is None:
            return
        msgs = ck.consume(100, 0.2)
        with lock:
            for m in msgs:
                assert m.error() is None, m.error()
                got.setdefault("ck", []).append((m.partition(), m.offset()))

    def parts(c) -> set[int]:
        # kafka-python's assignment() takes its subscription state's lock: safe beside its poll
        return {tp.partition for tp in c.assignment()}

    def split(consumers) -> bool:
        assert not failures, failures
        return split_ok([parts(c) for c in consumers], 6)

    def consumed() -> int:
        assert not failures, failures
        with lock:
            return sum(len(v) for v in got.values())

    k1, k2 = kp(), kp()
    ck = None
    threads = [
        threading.Thread(target=kafka_python_loop, args=(label, c), daemon=True)
        for label, c in (("k1", k1), ("k2", k2))
    ]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: split([k1, k2]), 40, what="kafka-python split")
        ck = ck_consumer(bs, group, **{"partition.assignment.strategy": "range"})
        ck.subscribe([topic])
        wait_for(lambda: split([k1, k2, ck]), 40, consume_ck, "three-client split")
        produce(bs, topic, 90, 6)
        wait_for(lambda: consumed() >= 90, 30, consume_ck, "all records")
        stop.set()
        for t in threads:
            t.join(15)
        assert not failures, failures
        seen = [r for v in got.values() for r in v]
        assert len(seen) == len(set(seen)) == 90
        k1.commit()  # its poll thread is done: one thread uses a kafka-python consumer at a time
        mine = sorted(parts(k1))
        assert [k1.committed(KTP(topic, p)) for p in mine] == [15] * len(mine)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        k1.close()
        k2.close()
        if ck is not None:
            ck.close()
