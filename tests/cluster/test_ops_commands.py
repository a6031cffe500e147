"""The operator's data commands (`produce`, `consume`, `topics get-offsets`, `topics
delete-records`, `log-dirs describe`) against three ``kafkatool serve`` brokers in ZooKeeper
mode while leaders die (SIGKILL), stop cleanly and move back (preferred leader election).

Every command runs as an operator runs it: ``python -m kafkatool`` in a subprocess, its
output parsed; the records are read back with librdkafka (confluent_kafka)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from tests.broker.conftest import REPO
from tests.cluster.conftest import SHORT_ZK_SESSION, kafkatool, wait_for
from tests.cluster.test_replication import create_topic, partition_state, read_all

confluent_kafka = pytest.importorskip("confluent_kafka")


def wait_isr(cluster, topic: str, partitions: int, n: int = 3, timeout: float = 60) -> dict[int, dict]:
    """Each partition's state once its ISR holds ``n`` replicas and it has a leader."""

    def states():
        s = {p: partition_state(cluster, topic, p) for p in range(partitions)}
        return s if all(len(x["isr"]) == n and x["leader"] >= 0 for x in s.values()) else None

    return wait_for(states, timeout, f"{topic}: ISR of {n} everywhere")


def wait_leader_moved(cluster, topic: str, partition: int, old: int, timeout: float = 30) -> dict:
    return wait_for(
        lambda: (s := partition_state(cluster, topic, partition))["leader"] not in (old, -1) and s,
        timeout,
        f"{topic}-{partition} to have a leader other than {old}",
    )


class Lines(threading.Thread):
    """A subprocess's stdout, one JSON object per line, collected as it comes."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc = proc
        self.rows: list[dict] = []

    def run(self) -> None:
        for line in self.proc.stdout:
            self.rows.append(json.loads(line))

    def stderr(self) -> str:
        self.proc.err_file.seek(0)
        return self.proc.err_file.read().decode(errors="replace")

    def wait_count(self, n: int, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while len(self.rows) < n and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.rows) >= n, (what, len(self.rows), self.stderr()[-3000:])


def popen(*args) -> subprocess.Popen:
    """The command with its stderr in a file (read while it runs)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatool", *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        cwd=REPO,
    )
    proc.err_file = err
    return proc


def finish(proc: subprocess.Popen, reader: Lines, timeout: float) -> tuple[int, str]:
    try:
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)
    return rc, reader.stderr()


def produce_confluent(cluster, topic: str, values: list[bytes], partition: int, **config) -> None:
    """``values`` to ``partition`` with librdkafka (idempotent, acks=all), each one acknowledged."""
    errors = []
    p = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        | config
    )
    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(60) == 0
    assert not errors, errors[:3]


# ----------------------------------------------------------------------------- produce
@SHORT_ZK_SESSION
def test_produce_keeps_every_acknowledged_record_once_across_a_kill_and_a_clean_stop(cluster):
    """`produce` (idempotent, acks=all) while the leader of a partition is killed with SIGKILL,
    then, after it is back in the ISR, while another leader stops cleanly (controlled shutdown):
    it exits 0, and every acknowledged line is in the log once, at the offset it was
    acknowledged with, no line twice."""
    topic, parts = "ops-produce", 3
    create_topic(cluster, topic, parts, 3, min_insync_replicas=2)
    states = wait_isr(cluster, topic, parts)
    proc = popen(
        "produce", "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--timeout", 20,
        "--batch-size", 2000, "--property", "parse.key=true", "--json",
    )  # fmt: skip
    reader = Lines(proc)
    reader.start()
    sent = 0

    def write(n: int) -> None:
        nonlocal sent
        proc.stdin.write(b"".join(b"k%d\tline %d\n" % (sent + i, sent + i) for i in range(n)))
        proc.stdin.flush()
        sent += n

    t0 = time.monotonic()
    try:
        write(600)
        reader.wait_count(600, 30, "the first lines acknowledged")
        write(300)  # in flight while the leader dies
        victim = states[0]["leader"]
        cluster.brokers[victim].kill()
        write(300)
        wait_leader_moved(cluster, topic, 0, victim)
        write(300)
        reader.wait_count(1500, 90, "the lines after the kill acknowledged")
        cluster.brokers[victim].start(timeout=60)
        states = wait_isr(cluster, topic, parts)
        write(300)
        # a clean stop of a broker leading a partition: controlled shutdown moves its leaderships
        stopped = states[1]["leader"]
        stopper = threading.Thread(target=cluster.brokers[stopped].stop, kwargs={"timeout": 60}, daemon=True)
        stopper.start()
        write(300)
        stopper.join(70)
        write(300)
        proc.stdin.close()
        rc, err = finish(proc, reader, 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    print(f"produce ran {time.monotonic() - t0:.1f}s: {err.strip()[-300:]}")
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err
    assert len(reader.rows) == sent == 2400
    acked = {r["line"]: (r["partition"], r["offset"]) for r in reader.rows}
    # keyed lines: every partition, the killed and the stopped leader's too, had records in flight
    assert {p for p, _ in acked.values()} == set(range(parts))
    assert len(acked) == sent and all(off is not None and off >= 0 for _, off in acked.values())
    # what the log holds, read by librdkafka: each line once, at its acknowledged offset
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p in range(parts):
        for off, value in read_all(cluster.bootstrap, topic, p):
            where.setdefault(value, []).append((p, off))
    dups = {v: w for v, w in where.items() if len(w) > 1}
    assert not dups, f"{len(dups)} lines in the log more than once, e.g. {list(dups.items())[:3]}"
    for line, pos in acked.items():
        assert where.get(b"line %d" % (line - 1)) == [pos], (line, pos, where.get(b"line %d" % (line - 1)))


# ----------------------------------------------------------------------------- consume
@SHORT_ZK_SESSION
def test_consume_follows_the_leader_through_a_kill_and_a_preferred_election(cluster):
    """`consume` (no group) from the beginning of two partitions while partition 0's leader is
    killed, records are written to the new leader, the old one comes back and a preferred leader
    election gives it its leadership again: each record is printed once, in offset order per
    partition, and --max-messages ends the run with exit 0."""
    topic, parts, n = "ops-consume", 2, 150
    create_topic(cluster, topic, parts, 3, min_insync_replicas=2)
    states = wait_isr(cluster, topic, parts)
    for p in range(parts):
        produce_confluent(cluster, topic, [b"a%d-%d" % (p, i) for i in range(n)], p)
    proc = popen(
        "consume", "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", 3 * n * parts, "--timeout-ms", 60000, "--json",
    )  # fmt: skip
    reader = Lines(proc)
    reader.start()
    try:
        reader.wait_count(n * parts, 30, "the first records printed")
        victim = states[0]["leader"]
        cluster.brokers[victim].kill()
        wait_leader_moved(cluster, topic, 0, victim)
        for p in range(parts):
            produce_confluent(cluster, topic, [b"b%d-%d" % (p, i) for i in range(n)], p)
        reader.wait_count(2 * n * parts, 60, "the records written to the new leaders printed")
        cluster.brokers[victim].start(timeout=60)
        wait_isr(cluster, topic, parts)
        r = kafkatool(
            "leader-election", "--election-type", "preferred", "--all-topic-partitions",
            "--bootstrap-server", cluster.bootstrap,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(
            lambda: partition_state(cluster, topic, 0)["leader"] == states[0]["leader"],
            30,
            "the preferred leader to lead partition 0 again",
        )
        for p in range(parts):
            produce_confluent(cluster, topic, [b"c%d-%d" % (p, i) for i in range(n)], p)
        rc, err = finish(proc, reader, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err
    assert f"Processed a total of {3 * n * parts} messages" in err
    for p in range(parts):
        got = [(r["offset"], r["value"]) for r in reader.rows if r["partition"] == p]
        want = [(i, f"{phase}{p}-{i % n}") for i, phase in ((i, "abc"[i // n]) for i in range(3 * n))]
        assert got == want, f"partition {p}: {len(got)} records, first differences " + str(
            [(g, w) for g, w in zip(got, want, strict=False) if g != w][:3]
        )


# ----------------------------------------------------------------------------- get-offsets
def get_offsets(cluster, *args, timeout=90):
    r = kafkatool("topics", "get-offsets", "--bootstrap-server", cluster.bootstrap, *args, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def offsets_of(r) -> dict[tuple[str, int], int]:
    out = {}
    for line in r.stdout.splitlines():
        t, p, o = line.rsplit(":", 2)
        out[(t, int(p))] = int(o)
    return out


def epochs_at(bootstrap: str, topic: str, timestamps: list[int]) -> list[tuple[int, int, int]]:
    """(error, offset, leader epoch) of ListOffsets v8 at ``bootstrap`` for partition 0."""
    from kafkatool.protocol.generated import ListOffsetsRequest
    from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
    from tests.broker.wire import WireClient

    out = []
    with WireClient(bootstrap) as c:
        for ts in timestamps:
            req = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)
                        ],
                    )
                ],
            )
            p = c.request(2, 8, req).topics[0].partitions[0]
            out.append((p.error_code, p.offset, p.leader_epoch))
    return out


def test_get_offsets_asks_the_current_leaders_and_names_an_offline_partition(cluster):
    """Right after partition 0's leader is killed (the metadata still names it until its
    ZooKeeper session expires) `topics get-offsets` answers latest, earliest, max-timestamp and a
    timestamp from the leaders of then; a partition whose only replica is down is named on
    stderr as GetOffsetShell names it ("Skip getting offsets ...") and the others still print."""
    topic, parts = "ops-offsets", 3
    create_topic(cluster, topic, parts, 3, min_insync_replicas=2)
    states = wait_isr(cluster, topic, parts)
    victim = states[0]["leader"]
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic("ops-solo", 1, replica_assignment=[[victim]])])[
        "ops-solo"
    ].result(30)
    wait_for(lambda: partition_state(cluster, "ops-solo", 0)["leader"] == victim, 20, "ops-solo's leader")
    # partition 0: one batch whose largest timestamp is its 6th record's (KAFKA-16310: the offset
    # of that record, not the batch's last)
    stamps = [1000 + i for i in range(10)]
    stamps[5] = 9000
    p = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 200}
    )
    for i, ts in enumerate(stamps):
        p.produce(topic, b"v%d" % i, partition=0, timestamp=ts)
    for i in range(7):
        p.produce(topic, b"w%d" % i, partition=1, timestamp=2000 + i)
    assert p.flush(30) == 0
    produce_confluent(cluster, "ops-solo", [b"s"] * 4, 0)
    cluster.brokers[victim].kill()
    r = get_offsets(cluster, "--topic", topic)
    assert r.returncode == 0, r.stderr
    assert offsets_of(r) == {(topic, 0): 10, (topic, 1): 7, (topic, 2): 0}
    assert partition_state(cluster, topic, 0)["leader"] != victim
    assert offsets_of(get_offsets(cluster, "--topic", topic, "--time", "earliest")) == {
        (topic, p): 0 for p in range(parts)
    }
    # max-timestamp: partition 2 has no record (left out, as Kafka leaves out -1)
    assert offsets_of(get_offsets(cluster, "--topic", topic, "--time", "-3")) == {
        (topic, 0): 5,
        (topic, 1): 6,
    }
    assert offsets_of(get_offsets(cluster, "--topic", topic, "--time", "1003")) == {
        (topic, 0): 3,
        (topic, 1): 0,
    }
    # the leader epochs the new leader answers (ListOffsets v8): a lookup's is the epoch written in
    # the batch holding the offset found (UnifiedLog.fetchOffsetByTimestamp), latest the
    # partition's current epoch
    now = partition_state(cluster, topic, 0)
    assert now["leader_epoch"] > states[0]["leader_epoch"]
    assert epochs_at(cluster.brokers[now["leader"]].bootstrap, topic, [-3, 1003, -1, -2]) == [
        (0, 5, states[0]["leader_epoch"]),
        (0, 3, states[0]["leader_epoch"]),
        (0, 10, now["leader_epoch"]),
        (0, 0, states[0]["leader_epoch"]),
    ]
    # the offline partition: named on stderr, exit 1, the others printed
    r = get_offsets(cluster, "--topic", "ops-.*")
    assert r.returncode == 1, r.stdout + r.stderr
    assert offsets_of(r) == {(topic, 0): 10, (topic, 1): 7, (topic, 2): 0}
    (line,) = r.stderr.splitlines()
    assert line.startswith(
        "kafkatool: error: Skip getting offsets for topic-partition ops-solo-0 due to error: LEADER_NOT_AVAILABLE"
    ), line


# ----------------------------------------------------------------------------- delete-records, log-dirs
@pytest.fixture
def checkpointing_cluster(tmp_path, zk_module):
    """Three brokers that checkpoint log start offsets and run retention every half second (the
    followers' log start offsets and their segments deleted below it are seen on disk)."""
    from tests.cluster.conftest import Cluster

    c = Cluster(
        tmp_path,
        zk_module,
        3,
        [
            "num.partitions=1",
            "offsets.topic.num.partitions=3",
            "log.flush.start.offset.checkpoint.interval.ms=300",
            "log.retention.check.interval.ms=500",
        ],
    )
    try:
        yield c.start()
    finally:
        c.discard()


def log_start_offsets(broker) -> dict[str, int]:
    """The broker's log-start-offset-checkpoint: topic-partition -> offset."""
    path = broker.data_dir / "log-start-offset-checkpoint"
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()[2:]
    return {f"{t}-{p}": int(o) for t, p, o in (x.split() for x in lines)}


def describe_log_dirs(cluster, *args) -> tuple[subprocess.CompletedProcess, dict | None]:
    r = kafkatool("log-dirs", "describe", "--bootstrap-server", cluster.bootstrap, *args)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    lines = r.stdout.splitlines()
    return r, (json.loads(lines[2]) if len(lines) > 2 else None)


def test_delete_records_moves_every_replicas_log_start_and_log_dirs_lists_the_live_brokers(
    checkpointing_cluster, tmp_path
):
    """`topics delete-records` moves the log start offset on the leader and, through the
    followers' fetches, on the followers (their checkpoints, their segments below it deleted,
    their sizes in `log-dirs describe` the leader's); against a partition whose only replica is
    down it names the partition with an error and exits 1. `log-dirs describe` asks the three
    brokers, then, one broker stopped, the two left (Kafka's cluster is its live brokers) and
    refuses the stopped one in --broker-list as LogDirsCommand does."""
    cluster = checkpointing_cluster
    topic = "ops-del"
    create_topic(cluster, topic, 2, 3, min_insync_replicas=2, segment_bytes=2048)
    states = wait_isr(cluster, topic, 2)
    produce_confluent(
        cluster, topic, [b"r%03d" % i + b"x" * 60 for i in range(300)], 0, **{"batch.size": 1000}
    )
    solo = (set(cluster.brokers) - {states[0]["leader"]}).pop()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic("ops-del-solo", 1, replica_assignment=[[solo]])])[
        "ops-del-solo"
    ].result(30)
    wait_for(
        lambda: partition_state(cluster, "ops-del-solo", 0)["leader"] == solo, 20, "ops-del-solo's leader"
    )
    produce_confluent(cluster, "ops-del-solo", [b"s"] * 5, 0)

    def size_of(path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:  # renamed .deleted by the broker's retention between glob and stat
            return 0

    def sizes() -> dict[int, int]:
        return {
            i: sum(size_of(f) for f in (b.data_dir / f"{topic}-0").glob("*.log"))
            for i, b in cluster.brokers.items()
            if b.alive()
        }

    wait_for(lambda: len(set(sizes().values())) == 1, 30, "the followers to catch up")
    spec = tmp_path / "delete.json"
    spec.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 200}], "version": 1})
    )
    # DelayedDeleteRecords: the answer waits for the low watermark, the smallest log start offset
    # of the live replicas; a follower stopped (SIGSTOP, its ZooKeeper session still alive) holds
    # it back until it fetches again
    follower = cluster.brokers[next(i for i in states[0]["isr"] if i != states[0]["leader"])]
    done: dict[str, subprocess.CompletedProcess] = {}
    os.kill(follower.proc.pid, signal.SIGSTOP)
    try:
        run = threading.Thread(
            target=lambda: done.setdefault(
                "r",
                kafkatool(
                    "topics",
                    "delete-records",
                    "--offset-json-file",
                    spec,
                    "--bootstrap-server",
                    cluster.bootstrap,
                ),
            ),
            daemon=True,
        )
        run.start()
        run.join(2.0)
        assert run.is_alive(), f"answered while a live follower had not moved its log start: {done}"
    finally:
        os.kill(follower.proc.pid, signal.SIGCONT)
    run.join(40)
    r = done["r"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 200",
    ]
    # every replica: log start offset 200 in its checkpoint, the segments below it deleted
    wait_for(
        lambda: all(log_start_offsets(b).get(f"{topic}-0") == 200 for b in cluster.brokers.values()),
        20,
        "every replica's log-start-offset-checkpoint at 200",
    )
    wait_for(lambda: len(set(sizes().values())) == 1, 20, "the followers' segments below 200 deleted")
    r, doc = describe_log_dirs(cluster, "--topic-list", topic)
    assert r.returncode == 0, r.stderr
    got = {
        (b["broker"], p["partition"]): p["size"]
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }
    assert got == {(i, f"{topic}-{p}"): s for i, s in sizes().items() for p in [0]} | {
        (i, f"{topic}-1"): 0 for i in cluster.brokers
    }
    assert [o for o, _ in read_all(cluster.bootstrap, topic, 0)] == list(range(200, 300))
    # the broker holding ops-del-solo's only replica stops: that partition has no leader
    cluster.brokers[solo].stop(timeout=60)
    spec.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": topic, "partition": 0, "offset": 250},
                    {"topic": "ops-del-solo", "partition": 0, "offset": 3},
                ]
            }
        )
    )
    r = kafkatool(
        "topics", "delete-records", "--offset-json-file", spec, "--bootstrap-server", cluster.bootstrap
    )
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout.splitlines()
    assert out[:3] == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 250",
    ], out
    assert out[3].startswith("partition: ops-del-solo-0\terror: LEADER_NOT_AVAILABLE"), out
    # log-dirs describe: the live brokers; the stopped one refused from --broker-list
    alive = sorted(i for i, b in cluster.brokers.items() if b.alive())
    r, doc = describe_log_dirs(cluster)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "Received log directory information from brokers " + ",".join(
        map(str, alive)
    )
    assert [b["broker"] for b in doc["brokers"]] == alive
    r, doc = describe_log_dirs(cluster, "--broker-list", "1,2,3")
    assert r.returncode == 2 and doc is None, r.stdout + r.stderr  # the exit contract: a usage error
    assert (
        f"ERROR: The given brokers do not exist from --broker-list: {solo}. Current existent brokers: "
        + ",".join(map(str, alive))
    ) in r.stdout + r.stderr
