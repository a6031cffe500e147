"""Partition reassignment across brokers moves real data (KIP-455 in the controller):
``kafkatool reassign execute`` through the admin API and through ZooKeeper; the adding
replica copies the log, joins the ISR, the removed replica's log is deleted, and
``reassign verify`` reports completion."""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import kafkatool, wait_for, zk_json
from tests.cluster.test_divergence import log_bytes, produce
from tests.cluster.test_replication import partition_state, read_all

confluent_kafka = pytest.importorskip("confluent_kafka")


def assignment(cluster, topic: str) -> dict:
    return zk_json(cluster, f"/brokers/topics/{topic}")


@pytest.mark.parametrize("via", ["bootstrap-server", "zookeeper"])
def test_reassignment_moves_the_data(cluster, tmp_path, via):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics(
            [
                KpNewTopic(
                    name="mv", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1, 2]}
                )
            ],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    wait_for(lambda: len(partition_state(cluster, "mv", 0)["isr"]) == 2, 20, "ISR [1, 2]")
    values = [b"v%d" % i for i in range(500)]
    produce(cluster.bootstrap, "mv", values, "all")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2, 3]}]})
    )
    where = (
        ["--bootstrap-server", cluster.bootstrap]
        if via == "bootstrap-server"
        else ["--zookeeper", cluster.connect]
    )
    r = kafkatool("reassign", "execute", "--reassignment-json-file", str(plan), *where)
    assert r.returncode == 0, r.stdout + r.stderr
    last = []

    def verified() -> bool:
        r = kafkatool("reassign", "verify", "--reassignment-json-file", str(plan), *where)
        last[:] = [r.stdout + r.stderr]
        return r.returncode == 0

    try:
        wait_for(verified, 60, "reassign verify to report completion", step=1.0)
    except AssertionError:
        raise AssertionError(last[0]) from None
    a = assignment(cluster, "mv")
    assert a["partitions"]["0"] == [2, 3] and not a.get("adding_replicas") and not a.get("removing_replicas")
    st = partition_state(cluster, "mv", 0)
    assert st["leader"] in (2, 3) and sorted(st["isr"]) == [2, 3]
    b1, b2, b3 = cluster.brokers[1], cluster.brokers[2], cluster.brokers[3]
    wait_for(lambda: not (b1.data_dir / "mv-0").exists(), 30, "the removed replica's log to be deleted")
    assert log_bytes(b3, "mv") == log_bytes(b2, "mv")
    assert [v for _, v in read_all(cluster.bootstrap, "mv")] == values
    r = kafkatool("zk", "check", "--zookeeper", cluster.connect)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("via", ["bootstrap-server"])
def test_reassignment_honours_the_replication_throttle(cluster, tmp_path, via):
    """``reassign execute --throttle``: the configs reach every broker (ZooKeeper config change
    notifications) and the adding replica copies at no more than the throttled rate, as Kafka's
    ReplicationQuotaManager measures it (a SimpleRate: the bytes since the oldest sample, at least
    one window; 2 samples of 1 s here, tests/cluster/conftest.py).  The new follower's quota has
    no samples yet: three 64 KB fetches pass (192 KB over one window is over the bound), then it
    backs off replica.fetch.backoff.ms (1 s) until its samples expire, ~192 KB every 2.2 s, so
    ~600 KB takes about 6.5 s (measured 6.4 s; unthrottled, well under 1 s)."""
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics(
            [KpNewTopic(name="slow", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1]})],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.size": 20_000})
    for i in range(60):  # ~600 KB in batches of about 10 KB (one fetch cannot take it all)
        p.produce("slow", bytes([i % 256]) * 10_000, partition=0)
    assert p.flush(60) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [2]}]})
    )
    where = (
        ["--bootstrap-server", cluster.bootstrap]
        if via == "bootstrap-server"
        else ["--zookeeper", cluster.connect]
    )
    import time

    t0 = time.monotonic()
    r = kafkatool(
        "reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "150000", *where
    )
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(
        lambda: assignment(cluster, "slow")["partitions"]["0"] == [2], 90, "the move to finish", step=0.2
    )
    took = time.monotonic() - t0
    print(f"600 KB moved under a 150 KB/s throttle in {took:.1f}s")
    assert took >= 3.0, f"the throttle was not honoured: {took:.1f}s"  # 4 rounds of fetches: 6.6 s
    assert log_bytes(cluster.brokers[2], "slow")
    r = kafkatool("reassign", "verify", "--reassignment-json-file", str(plan), *where)
    assert r.returncode == 0, r.stdout + r.stderr
    k = cluster.kazoo()
    try:
        topic_cfg = json.loads(k.get("/config/topics/slow")[0])["config"]
        assert not any("throttled" in key for key in topic_cfg), topic_cfg  # verify cleared them
    finally:
        k.stop()
        k.close()


def test_the_leader_side_throttle_alone_slows_a_new_replica(cluster):
    """leader.replication.throttled.replicas/rate without any follower throttle: the leader
    sends its out-of-sync follower no records while its quota is exceeded (shouldLeaderThrottle),
    so a replica added by a reassignment copies at no more than the rate.  The leader's quota
    records every follower answer (KafkaApis.sizeOfThrottledPartitions: an answer without
    throttled partitions adds its own few bytes), so its samples reach back as far as they are
    kept: replication.quota.window.num=2 (tests/cluster/conftest.py) keeps 2 s, so whatever the
    leader served before, at most 2 s of the rate (300 KB) and one fetch (64 KB) pass at once and
    the rest of 900 KB takes no less than (900 - 300 - 64) / 150 = 3.6 s.  With Kafka's default
    11 samples a leader its followers fed for 11 s lets ~1.6 MB through at once (measured: 900 KB
    in 0.7 s; with 2 samples 5.9-6.6 s)."""
    import time

    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics(
            [
                KpNewTopic(
                    name="lslow", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1]}
                )
            ],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.size": 20_000})
    for i in range(90):  # ~900 KB: at 150 KB/s after at most 2 s of it at once, 3.6 s or more
        p.produce("lslow", bytes([i % 256]) * 10_000, partition=0)
    assert p.flush(60) == 0
    for args in (
        [
            "--entity-type",
            "topics",
            "--entity-name",
            "lslow",
            "--add-config",
            "leader.replication.throttled.replicas=0:1",
        ],
        [
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--add-config",
            "leader.replication.throttled.rate=150000",
        ],
    ):
        # through a broker: Kafka 3.7's kafka-configs.sh takes no topic through --zookeeper, and a
        # broker's configs only while it is not running
        r = kafkatool("configs", "alter", *args, "--bootstrap-server", cluster.bootstrap)
        assert r.returncode == 0, r.stdout + r.stderr
    # broker 1, the leader, throttles by the configs it holds: wait until it took both (its
    # DescribeConfigs answers from them), not a fixed second (the topic's configs reach it by
    # ZooKeeper's change notification, later on a loaded broker)
    t_alter = time.monotonic()
    wait_for(lambda: _leader_throttle_taken(cluster), 30, "broker 1 to take the throttle configs", step=0.05)
    print(f"broker 1 took the throttle configs {time.monotonic() - t_alter:.2f}s after the alter")
    r = kafkatool(
        "reassign",
        "execute",
        "--reassignment-json-file",
        _plan(cluster, "lslow", [1, 2]),
        "--zookeeper",
        cluster.connect,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    t0 = time.monotonic()  # the copy starts now at the earliest
    wait_for(lambda: len(_isr(cluster, "lslow")) == 2, 90, "the new replica to join the ISR", step=0.2)
    took = time.monotonic() - t0
    print(f"900 KB copied under a 150 KB/s leader-side throttle in {took:.1f}s")
    # no sooner than 3.6 s; unthrottled, well under 1 s
    assert took >= 3.0, f"the leader throttle was not honoured: {took:.1f}s"
    assert log_bytes(cluster.brokers[2], "lslow") == log_bytes(cluster.brokers[1], "lslow")


def _leader_throttle_taken(cluster) -> bool:
    from tests.broker.test_admin import describe
    from tests.broker.wire import WireClient

    with WireClient(cluster.brokers[1].bootstrap) as c:
        replicas = describe(c, "lslow", keys=["leader.replication.throttled.replicas"])[1]
        rate = describe(c, "1", keys=["leader.replication.throttled.rate"], rtype=4)[1]
    got = (
        replicas.get("leader.replication.throttled.replicas"),
        rate.get("leader.replication.throttled.rate"),
    )
    return [e.value if e is not None else None for e in got] == ["0:1", "150000"]


def _plan(cluster, topic: str, replicas: list[int]) -> str:
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, dir=cluster.base)
    json.dump({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}, f)
    f.close()
    return f.name


def _isr(cluster, topic: str) -> list[int]:
    return zk_json(cluster, f"/brokers/topics/{topic}/partitions/0/state")["isr"]


def test_generate_a_replication_factor_raise_then_a_demotion(cluster, tmp_path):
    """``reassign generate --replication-factor 2`` on the live cluster (Metadata), executed and
    verified: every partition gets a second replica holding the data, leaders kept; then
    ``--demote-brokers 1`` (ISR from Metadata) reorders the partition broker 1 leads, and the
    election the plan prints moves its leadership."""
    import shlex

    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics(
            [
                KpNewTopic(
                    name="grow",
                    num_partitions=-1,
                    replication_factor=-1,
                    replica_assignments={0: [1], 1: [2], 2: [3]},
                )
            ],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    wait_for(lambda: partition_state(cluster, "grow", 0)["leader"] == 1, 20, "grow-0 led by broker 1")
    values = [b"g%d" % i for i in range(200)]
    produce(cluster.bootstrap, "grow", values, "all")
    (tmp_path / "topics.json").write_text('{"version":1,"topics":[{"topic":"grow"}]}')
    where = ["--bootstrap-server", cluster.bootstrap]

    def execute_and_verify(plan) -> None:
        r = kafkatool("reassign", "execute", "--reassignment-json-file", plan, *where)
        assert r.returncode == 0, r.stdout + r.stderr
        last = []

        def verified() -> bool:
            r = kafkatool("reassign", "verify", "--reassignment-json-file", plan, *where)
            last[:] = [r.stdout + r.stderr]
            return r.returncode == 0

        try:
            wait_for(verified, 60, "reassign verify to report completion", step=0.5)
        except AssertionError:
            raise AssertionError(last[0]) from None

    plan = tmp_path / "rf2.json"
    r = kafkatool(
        "reassign", "generate", "--topics-to-move-json-file", tmp_path / "topics.json",
        "--broker-list", "1,2,3", "--strategy", "minimal", "--replication-factor", 2,
        "--output", plan, "--json", *where,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["report"]["replicas_moved"] == 3
    execute_and_verify(plan)
    replicas = assignment(cluster, "grow")["partitions"]
    assert {p: r[0] for p, r in replicas.items()} == {"0": 1, "1": 2, "2": 3}  # leaders kept
    assert all(len(set(r)) == 2 for r in replicas.values())
    assert sorted(sum(replicas.values(), [])) == [1, 1, 2, 2, 3, 3]
    for p in range(3):
        wait_for(lambda p=p: len(partition_state(cluster, "grow", p)["isr"]) == 2, 30, f"grow-{p} ISR of 2")
    follower = replicas["0"][1]
    assert log_bytes(cluster.brokers[follower], "grow") == log_bytes(cluster.brokers[1], "grow")

    demote = tmp_path / "demote.json"
    r = kafkatool(
        "reassign", "generate", "--topics-to-move-json-file", tmp_path / "topics.json",
        "--demote-brokers", 1, "--output", demote, "--json", *where,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    obj = json.loads(r.stdout)
    assert obj["proposed"]["partitions"] == [
        {"topic": "grow", "partition": 0, "replicas": [follower, 1], "log_dirs": ["any", "any"]}
    ]
    assert obj["report"]["replicas_moved"] == 0 and obj["notes"] == []
    execute_and_verify(demote)
    assert assignment(cluster, "grow")["partitions"]["0"] == [follower, 1]
    assert partition_state(cluster, "grow", 0)["leader"] == 1  # the order alone elects no one
    command = shlex.split(obj["election_command"])
    assert command[:2] == ["kafkatool", "leader-election"]
    assert command[-4:] == ["--topic", "grow", "--partition", "0"]
    r = kafkatool(*command[1:])
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: partition_state(cluster, "grow", 0)["leader"] == follower, 20, "the preferred leader")
    assert [v for _, v in read_all(cluster.bootstrap, "grow")] == values
