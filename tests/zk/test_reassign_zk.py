"""`kafkatool reassign` against a real ZooKeeper seeded exactly as ZK-mode Kafka writes it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.assign.zk_reassign import THROTTLE_RECORD
from kafkatool.cli import app
from kafkatool.zk import codecs
from tests.zk.kafka_layout import default_spec, seed_cluster


def run(*args):
    r = CliRunner().invoke(app, ["reassign", *map(str, args)], catch_exceptions=False)
    assert "Traceback" not in r.stdout + r.stderr
    return r


def get(cluster, path):
    return cluster.admin.get(path)[0]


def config(cluster, entity):
    return json.loads(get(cluster, f"/config/{entity}"))["config"]


def config_changes(cluster):
    names = sorted(cluster.admin.get_children("/config/changes"))
    return [json.loads(get(cluster, f"/config/changes/{n}")) for n in names]


def write(tmp_path, name, partitions):
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return path


@pytest.fixture
def move_events(tmp_path):
    return write(
        tmp_path,
        "move.json",
        [
            {"topic": "events", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
            {"topic": "events", "partition": 1, "replicas": [3, 1]},
        ],
    )


def test_execute_verify_clears_throttles(kafka_cluster, move_events):
    zk = kafka_cluster.connect
    changes_before = len(config_changes(kafka_cluster))
    r = run("execute", "--reassignment-json-file", move_events, "--zookeeper", zk, "--throttle", 1048576)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[2] == (
        '{"version":1,"partitions":[{"topic":"events","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"events","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}'
    )
    assert "Successfully started partition reassignments for events-0,events-1" in r.stdout
    # the znode exactly as the legacy tool wrote it (no log_dirs)
    assert get(kafka_cluster, "/admin/reassign_partitions") == (
        b'{"version":1,"partitions":[{"topic":"events","partition":0,"replicas":[2,3]},'
        b'{"topic":"events","partition":1,"replicas":[3,1]}]}'
    )
    # throttles the way Kafka's tool sets them, other config kept
    assert config(kafka_cluster, "topics/events") == {
        "leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
        "follower.replication.throttled.replicas": "0:3,1:1",
    }
    for b in (1, 2, 3):
        cfg = config(kafka_cluster, f"brokers/{b}")
        assert cfg == {
            "leader.replication.throttled.rate": "1048576",
            "follower.replication.throttled.rate": "1048576",
        }
    new_changes = config_changes(kafka_cluster)[changes_before:]
    assert {c["entity_path"] for c in new_changes} == {"topics/events", "brokers/1", "brokers/2", "brokers/3"}
    assert all(c["version"] == 2 for c in new_changes)
    record = json.loads(get(kafka_cluster, THROTTLE_RECORD))
    assert (record["topics"], record["brokers"], record["rate"]) == (["events"], [1, 2, 3], 1048576)

    # a second submission is refused while the first is in flight
    r = run("execute", "--reassignment-json-file", move_events, "--zookeeper", zk)
    assert r.exit_code == 2 and "existing partition reassignment" in r.stderr

    # in flight: list shows it, verify exits 1 and keeps the throttles
    r = run("list", "--zookeeper", zk)
    assert r.exit_code == 0
    assert "events-0: replicas: 2,3,1. adding: 3. removing: 1." in r.stdout
    r = run("verify", "--reassignment-json-file", move_events, "--zookeeper", zk)
    assert r.exit_code == 1
    assert "Reassignment of partition events-0 is still in progress." in r.stdout
    assert "Throttles kept" in r.stdout
    assert config(kafka_cluster, "brokers/1") != {}

    # the controller finishes: new replicas in the topic znode, the znode deleted
    kafka_cluster.admin.set("/brokers/topics/events", codecs.encode_topic({0: [2, 3], 1: [3, 1]}, version=2))
    kafka_cluster.admin.delete("/admin/reassign_partitions")
    before = len(config_changes(kafka_cluster))
    r = run("verify", "--reassignment-json-file", move_events, "--zookeeper", zk, "--json")
    assert r.exit_code == 0, r.stdout
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["status"] for o in objs[:2]] == ["completed", "completed"]
    assert objs[2]["done"] is True and objs[2]["throttles_cleared"]["brokers"] == [1, 2, 3]
    assert config(kafka_cluster, "topics/events") == {}
    assert all(config(kafka_cluster, f"brokers/{b}") == {} for b in (1, 2, 3))
    assert config(kafka_cluster, "brokers/<default>") == {"log.cleaner.threads": "2"}
    assert len(config_changes(kafka_cluster)) == before + 4
    assert kafka_cluster.admin.exists(THROTTLE_RECORD) is None
    # nothing left to clear: a second verify writes nothing
    r = run("verify", "--reassignment-json-file", move_events, "--zookeeper", zk)
    assert r.exit_code == 0 and len(config_changes(kafka_cluster)) == before + 4


def test_verify_reports_a_different_replica_set(kafka_cluster, tmp_path):
    f = write(tmp_path, "x.json", [{"topic": "orders", "partition": 2, "replicas": [3, 2, 1]}])
    r = run(
        "verify", "--reassignment-json-file", f, "--zookeeper", kafka_cluster.connect, "--preserve-throttles"
    )
    assert r.exit_code == 1
    assert (
        "There is no active reassignment of partition orders-2, but replica set is 3,1,2 rather than 3,2,1."
        in r.stdout
    )


def test_dry_run_writes_nothing(kafka_cluster, move_events):
    zk = kafka_cluster.connect
    n = len(config_changes(kafka_cluster))
    r = run(
        "execute", "--reassignment-json-file", move_events, "--zookeeper", zk, "--throttle", 10, "--dry-run"
    )
    assert r.exit_code == 0 and "Dry run" in r.stdout
    assert kafka_cluster.admin.exists("/admin/reassign_partitions") is None
    assert len(config_changes(kafka_cluster)) == n and config(kafka_cluster, "topics/events") == {}


@pytest.mark.parametrize(
    "partitions, message",
    [
        (
            [{"topic": "events", "partition": 0, "replicas": [2, 9]}],
            "events-0: unknown broker id 9 (registered brokers: 1,2,3)",
        ),
        ([{"topic": "events", "partition": 5, "replicas": [2, 3]}], "unable to find partition events-5"),
        ([{"topic": "nope", "partition": 0, "replicas": [2, 3]}], "unable to find partition nope-0"),
        ([{"topic": "events", "partition": 0, "replicas": [2, 2]}], "duplicate entries: broker 2"),
        (
            [{"topic": "events", "partition": 0, "replicas": [2, 3], "log_dirs": ["/data/k", "any"]}],
            "log_dirs pins need the AlterReplicaLogDirs API",
        ),
    ],
)
def test_execute_rejects_bad_plans(kafka_cluster, tmp_path, partitions, message):
    f = write(tmp_path, "bad.json", partitions)
    r = run("execute", "--reassignment-json-file", f, "--zookeeper", kafka_cluster.connect)
    assert r.exit_code == 2
    assert r.stderr.startswith("kafkatool: error: ") and r.stderr.count("\n") == 1
    assert message in r.stderr
    assert kafka_cluster.admin.exists("/admin/reassign_partitions") is None


def test_additional_resubmission_only_changes_the_throttle(zk_chroot, tmp_path):
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec(reassigning=True))
    try:
        f = write(tmp_path, "same.json", [{"topic": "events", "partition": 0, "replicas": [2, 3]}])
        r = run(
            "execute",
            "--reassignment-json-file",
            f,
            "--zookeeper",
            cluster.connect,
            "--additional",
            "--throttle",
            5000,
        )
        assert r.exit_code == 0, r.stderr
        assert "Throttles updated" in r.stdout
        # sources are RS minus adding: 1 and 2; destination 3
        assert config(cluster, "topics/events") == {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:3",
        }
        assert config(cluster, "brokers/2")["leader.replication.throttled.rate"] == "5000"
        other = write(tmp_path, "other.json", [{"topic": "events", "partition": 1, "replicas": [3, 1]}])
        r = run("execute", "--reassignment-json-file", other, "--zookeeper", cluster.connect, "--additional")
        assert r.exit_code == 2 and "only read it when it is created" in r.stderr
    finally:
        cluster.close()


def test_cancel_reverts_and_moves_the_controller(zk_chroot, tmp_path):
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec(reassigning=True))
    try:
        f = write(tmp_path, "move.json", [{"topic": "events", "partition": 0, "replicas": [2, 3]}])
        r = run("list", "--zookeeper", cluster.connect, "--json")
        [o] = [json.loads(line) for line in r.stdout.splitlines()]
        assert (o["replicas"], o["adding"], o["removing"], o["source"]) == ([2, 3, 1], [3], [1], "topic")
        # issue 12: deleting /controller (an election moving every leadership) is never the default
        topic_before = get(cluster, "/brokers/topics/events")
        r = run("cancel", "--reassignment-json-file", f, "--zookeeper", cluster.connect)
        assert (
            r.exit_code == 2
            and "--force-controller-election" in r.stderr
            and "--bootstrap-server" in r.stderr
        )
        assert cluster.admin.exists("/controller") is not None
        assert get(cluster, "/brokers/topics/events") == topic_before
        r = run(
            "cancel",
            "--reassignment-json-file",
            f,
            "--zookeeper",
            cluster.connect,
            "--force-controller-election",
        )
        assert r.exit_code == 0, r.stderr
        assert "Successfully cancelled partition reassignment for: events-0" in r.stdout
        assert "events-0: replicas may remain on broker(s) 3" in r.stdout
        # RS [2,3,1] minus adding [3]; still a v2 topic znode, byte for byte as Kafka encodes it
        assert get(cluster, "/brokers/topics/events") == (
            b'{"version":2,"partitions":{"0":[2,1],"1":[2,3]},"adding_replicas":{},"removing_replicas":{}}'
        )
        assert cluster.admin.exists("/admin/reassign_partitions") is None
        assert cluster.admin.exists("/controller") is None
        assert config(cluster, "topics/events") == {}
        assert config(cluster, "brokers/1") == {}
        r = run("list", "--zookeeper", cluster.connect)
        assert r.stdout.strip() == "No partition reassignments found."
        r = run("cancel", "--reassignment-json-file", f, "--zookeeper", cluster.connect)
        assert "None of the specified partition reassignments are active." in r.stdout
    finally:
        cluster.close()


def test_issue12_cancel_without_controller_deletes_nothing(zk_chroot, tmp_path):
    """No controller registered (cluster down): the znodes are reverted, nothing else is touched,
    and no election option is needed (the next controller loads the reverted state)."""
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec(reassigning=True))
    try:
        cluster.admin.delete("/controller")
        f = write(tmp_path, "move.json", [{"topic": "events", "partition": 0, "replicas": [2, 3]}])
        r = run("cancel", "--reassignment-json-file", f, "--zookeeper", cluster.connect, "--json")
        assert r.exit_code == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["controller_moved"] is False and out["cancelled"][0]["replicas"] == [2, 1]
    finally:
        cluster.close()


def test_issue12_execute_warns_without_controller(zk_chroot, tmp_path):
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec())
    try:
        cluster.admin.delete("/controller")
        f = write(tmp_path, "move.json", [{"topic": "events", "partition": 0, "replicas": [2, 3]}])
        r = run("execute", "--reassignment-json-file", f, "--zookeeper", cluster.connect)
        assert r.exit_code == 0, r.stderr
        assert "WARNING: no controller is registered" in r.stderr
        assert "nothing moves until a controller is elected" in r.stderr
        cluster.admin.delete("/admin/reassign_partitions")
        r = run(
            "execute", "--reassignment-json-file", f, "--zookeeper", cluster.connect, "--json", "--dry-run"
        )
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert lines[0]["type"] == "warning" and lines[-1]["controller"] is None
    finally:
        cluster.close()


def test_generate_reads_assignment_and_racks_from_zookeeper(kafka_cluster, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"orders"}]}')
    r = run(
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1,2,3",
        "--zookeeper",
        kafka_cluster.connect,
        "--start-index",
        0,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    obj = json.loads(r.stdout)
    # racks 1:r1 2:r2 3:r1 -> alternated [1,2,3]; orders-2: leader 3, broker 1 (r1) rejected, then 2, 1
    assert [p["replicas"] for p in obj["proposed"]["partitions"]] == [[1, 2, 3], [2, 3, 1], [3, 2, 1]]
    assert obj["report"]["leaders_changed"] == 0 and obj["report"]["replicas_moved"] == 0
    r = run(
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1,2,7",
        "--zookeeper",
        kafka_cluster.connect,
    )
    assert r.exit_code == 2 and "--broker-list: unknown broker id 7 (registered: 1,2,3)" in r.stderr
    r = run(
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1,2,3",
        "--zookeeper",
        kafka_cluster.connect,
        "--strategy",
        "minimal",
    )
    assert r.exit_code == 0 and "nothing to move" in r.stdout


def test_not_a_kafka_root(zk_server, tmp_path, move_events):
    r = run("list", "--zookeeper", f"{zk_server}/no/such/chroot")
    assert r.exit_code == 2 and "chroot /no/such/chroot does not exist" in r.stderr
    r = run("verify", "--reassignment-json-file", move_events)
    assert r.exit_code == 2 and "--zookeeper host:port[/chroot] is required" in r.stderr


def test_one_undecodable_topic_does_not_block_the_others(kafka_cluster, move_events, tmp_path):
    kafka_cluster.admin.set("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[3')
    r = run("execute", "--reassignment-json-file", move_events, "--zookeeper", kafka_cluster.connect)
    assert r.exit_code == 0, r.stderr
    f = write(tmp_path, "legacy.json", [{"topic": "legacy", "partition": 0, "replicas": [1]}])
    for action in ("verify", "cancel"):
        r = run(action, "--reassignment-json-file", f, "--zookeeper", kafka_cluster.connect)
        assert r.exit_code == 2
        assert (
            r.stderr.startswith("kafkatool: error: /brokers/topics/legacy: ") and "invalid JSON" in r.stderr
        )


def _controller_starts(cluster, topic, version=3):
    """What a 2.4+ ZK-mode controller writes when it picks up the znode: RS = TRS + (ORS - TRS),
    AR = TRS - ORS, RR = ORS - TRS in the topic znode (KafkaController step 1)."""
    data, _ = cluster.admin.get(f"/brokers/topics/{topic}")
    value = codecs.decode_topic(data, topic)
    znode = codecs.decode_reassign_partitions(cluster.admin.get("/admin/reassign_partitions")[0])
    parts, adding, removing = dict(value.partitions), {}, {}
    for e in znode.partitions:
        if e.topic != topic:
            continue
        ors, trs = parts[e.partition], e.replicas
        parts[e.partition] = trs + [b for b in ors if b not in trs]
        adding[e.partition] = [b for b in trs if b not in ors]
        removing[e.partition] = [b for b in ors if b not in trs]
    cluster.admin.set(
        f"/brokers/topics/{topic}",
        codecs.encode_topic(
            parts, adding=adding, removing=removing, topic_id=value.topic_id, version=version
        ),
    )


def _controller_finishes(cluster, topic, version=3):
    data, _ = cluster.admin.get(f"/brokers/topics/{topic}")
    value = codecs.decode_topic(data, topic)
    parts = {
        p: [b for b in r if b not in value.removing_replicas.get(p, [])] for p, r in value.partitions.items()
    }
    cluster.admin.set(
        f"/brokers/topics/{topic}", codecs.encode_topic(parts, topic_id=value.topic_id, version=version)
    )
    cluster.admin.delete("/admin/reassign_partitions")


def test_generate_minimal_then_execute_verify_end_to_end(zk_chroot, tmp_path):
    from tests.zk.kafka_layout import BrokerSpec, ClusterSpec, PartitionSpec, TopicSpec

    spec = ClusterSpec(
        brokers={
            b: BrokerSpec([f"PLAINTEXT://127.0.0.1:{19090 + b}"], rack=f"r{b % 2}") for b in range(1, 5)
        },
        # 12 partitions RF 2 on brokers 1 and 2 only; 3 and 4 are new
        topics={"clicks": TopicSpec({p: PartitionSpec([1 + p % 2, 2 - p % 2]) for p in range(12)})},
    )
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, spec)
    try:
        zk = cluster.connect
        topics = tmp_path / "topics.json"
        topics.write_text('{"version":1,"topics":[{"topic":"clicks"}]}')
        plan = tmp_path / "plan.json"
        r = run(
            "generate",
            "--topics-to-move-json-file",
            topics,
            "--broker-list",
            "1,2,3,4",
            "--zookeeper",
            zk,
            "--strategy",
            "minimal",
            "--output",
            plan,
            "--json",
        )
        assert r.exit_code == 0, r.stderr
        rep = json.loads(r.stdout)["report"]
        assert rep["replicas_moved"] == 12  # 24 replicas, 6 per broker: 1 and 2 give 6 each
        assert rep["balance"]["replicas"]["after"]["spread"] == 0
        assert rep["balance"]["leaders"]["after"]["spread"] == 0
        r = run("execute", "--reassignment-json-file", plan, "--zookeeper", zk, "--throttle", 50000000)
        assert r.exit_code == 0, r.stderr
        _controller_starts(cluster, "clicks")
        r = run("list", "--zookeeper", zk, "--json")
        listed = [json.loads(line) for line in r.stdout.splitlines()]
        assert len(listed) == 12 and all(o["source"] == "topic" and o["adding"] for o in listed)
        r = run("verify", "--reassignment-json-file", plan, "--zookeeper", zk)
        assert r.exit_code == 1 and r.stdout.count("is still in progress") == 12
        assert config(cluster, "brokers/3")["follower.replication.throttled.rate"] == "50000000"
        _controller_finishes(cluster, "clicks")
        r = run("verify", "--reassignment-json-file", plan, "--zookeeper", zk)
        assert r.exit_code == 0, r.stdout
        assert r.stdout.count("is completed") == 12
        assert config(cluster, "topics/clicks") == {}
        assert all(config(cluster, f"brokers/{b}") == {} for b in range(1, 5))
        r = run(
            "generate",
            "--topics-to-move-json-file",
            topics,
            "--broker-list",
            "1,2,3,4",
            "--zookeeper",
            zk,
            "--strategy",
            "minimal",
        )
        assert "nothing to move" in r.stdout
    finally:
        cluster.close()


@pytest.mark.parametrize(
    "topic, n, expected",
    [
        # brokers by id [1(r1),2(r2),3(r1)] -> alternated [1,2,3]; start = index of first id >= 1 = 0;
        # pid 3 bumps the shift to 1 (x2 racks): k0 -> (0+1+2%2)%3=1 -> 2, k1 -> 2 -> 3
        ("orders", 2, {3: [1, 2, 3], 4: [2, 3, 1]}),
        # pid 2: leader 3 (r1); k0 -> A[0]=1 is r1 again: rejected; k1 -> (2+1+1)%3=1 -> 2
        ("events", 1, {2: [3, 2]}),
        # partition 0 on broker 3: start index 2; pid1 -> (1+2)%3=0 -> 1, pid2 -> 2
        ("legacy", 2, {1: [1], 2: [2]}),
    ],
)
def test_place_added_partitions_as_zk_mode_kafka(kafka_cluster, topic, n, expected):
    r = run("place", "--zookeeper", kafka_cluster.connect, "--topic", topic, "--partitions", n, "--json")
    assert r.exit_code == 0, r.stderr
    obj = json.loads(r.stdout)
    assert {p["partition"]: p["replicas"] for p in obj["partitions"]} == expected


def test_place_new_topic_on_registered_brokers(kafka_cluster):
    r = run(
        "place",
        "-z",
        kafka_cluster.connect,
        "--partitions",
        3,
        "--replication-factor",
        2,
        "--start-index",
        0,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    # [1,2,3] rack-aware: pid0 1 then 2; pid1 2 then 3; pid2 3, 1 rejected (r1), then 2
    assert [p["replicas"] for p in json.loads(r.stdout)["partitions"]] == [[1, 2], [2, 3], [3, 2]]
    r = run(
        "place", "-z", kafka_cluster.connect, "--brokers", "1,9", "--partitions", 1, "--replication-factor", 1
    )
    assert r.exit_code == 2 and "--brokers: unknown broker id 9" in r.stderr
    r = run("place", "-z", kafka_cluster.connect, "--topic", "nope", "--partitions", 1)
    assert r.exit_code == 2 and "topic not found: nope" in r.stderr


def test_generate_demote_takes_the_isr_from_the_partition_state(zk_chroot, tmp_path):
    """--demote-brokers with --zookeeper: the ISR of each partition's state znode decides who
    may lead; a partition with no in-sync replica off the demoted broker is left (exit 1)."""
    from tests.zk.kafka_layout import BrokerSpec, ClusterSpec, PartitionSpec, TopicSpec

    spec = ClusterSpec(
        brokers={b: BrokerSpec([f"PLAINTEXT://127.0.0.1:{19090 + b}"]) for b in range(1, 4)},
        topics={
            "t": TopicSpec(
                {
                    0: PartitionSpec([1, 2, 3], isr=[1, 3]),  # 2 is behind: 3 must lead
                    1: PartitionSpec([1, 2], isr=[1]),  # nobody else in sync: left
                    2: PartitionSpec([2, 1]),
                }
            )
        },
    )
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, spec)
    try:
        topics = tmp_path / "topics.json"
        topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
        r = run(
            "generate", "--topics-to-move-json-file", topics, "--demote-brokers", 1,
            "--zookeeper", cluster.connect, "--json",
        )  # fmt: skip
        assert r.exit_code == 1, r.stdout + r.stderr
        obj = json.loads(r.stdout)
        assert obj["proposed"]["partitions"] == [
            {"topic": "t", "partition": 0, "replicas": [3, 2, 1], "log_dirs": ["any", "any", "any"]}
        ]
        assert obj["left"] == [
            {
                "topic": "t",
                "partition": 1,
                "replicas": [1, 2],
                "isr": [1],
                "reason": "no replica outside the demoted brokers is in sync (ISR [1])",
            }
        ]
        assert obj["notes"] == []
        assert obj["election_command"] == (
            f"kafkatool leader-election --election-type preferred --zookeeper {cluster.connect} "
            "--topic t --partition 0"
        )
    finally:
        cluster.close()
