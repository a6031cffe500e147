"""`kafkatool reassign ... --bootstrap-server` against a real `kafkatool serve`, and the broker's
reassignment APIs (45/46), DescribeLogDirs (35) and dynamic broker throttle configs."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from kafkatool.assign.kafka_client import Connection, KafkaAdmin, KafkaAdminError, parse_bootstrap
from kafkatool.cli import app
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from kafkatool.protocol.generated.list_partition_reassignments_request import ListPartitionReassignmentsTopics
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.test_admin import create, describe
from tests.broker.wire import WireClient

THROTTLE_TOPIC_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
THROTTLE_BROKER_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)


@pytest.fixture(scope="module")
def rbroker(tmp_path_factory):
    base = tmp_path_factory.mktemp("reassign")
    dirs = f"{base / 'd1'},{base / 'd2'}"
    b = BrokerProcess(base / "d1", extra=[f"log.dirs={dirs}"]).start()
    b.dirs = [base / "d1", base / "d2"]
    yield b
    b.stop()


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKATOOL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("KAFKATOOL_ZOOKEEPER", raising=False)
    return tmp_path / "state"


def run(*args):
    r = CliRunner().invoke(app, ["reassign", *map(str, args)], catch_exceptions=False)
    assert "Traceback" not in r.stdout + r.stderr
    return r


def plan(tmp_path, partitions, name="plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return path


def set_here(entries):
    """Keys set on the entity itself (topic override = 1, dynamic per-broker = 2)."""
    return {k: e.value for k, e in entries.items() if e.config_source in (1, 2)}


def test_execute_with_throttle_sets_kafkas_configs_then_verify_clears_them(rbroker, tmp_path, state_dir):
    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "moves", 3).error_code == 0
    path = plan(tmp_path, [{"topic": "moves", "partition": p, "replicas": [1]} for p in (0, 2)])
    r = run(
        "execute",
        "--reassignment-json-file",
        path,
        "--bootstrap-server",
        rbroker.bootstrap,
        "--throttle",
        1048576,
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[2]) == {
        "version": 1,
        "partitions": [
            {"topic": "moves", "partition": 0, "replicas": [1], "log_dirs": ["any"]},
            {"topic": "moves", "partition": 2, "replicas": [1], "log_dirs": ["any"]},
        ],
    }
    assert "The inter-broker throttle limit was set to 1048576 B/s" in lines
    assert lines[-1] == "Successfully started partition reassignments for moves-0,moves-2"
    with WireClient(rbroker.bootstrap) as c:
        _, topic = describe(c, "moves", keys=list(THROTTLE_TOPIC_KEYS))
        _, broker = describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)
        _, other = describe(c, "moves", keys=None)
    # Kafka's tool: leader list = every source replica p:b, follower list = destinations not sources
    assert set_here(topic) == {
        "leader.replication.throttled.replicas": "0:1,2:1",
        "follower.replication.throttled.replicas": "",
    }
    assert set_here(broker) == {
        "leader.replication.throttled.rate": "1048576",
        "follower.replication.throttled.rate": "1048576",
    }
    assert "replica.alter.log.dirs.io.max.bytes.per.second" not in broker  # unset: not listed, as Kafka
    assert len(set_here(other)) == 2  # nothing else touched
    record = json.loads(next(state_dir.iterdir()).read_text())
    assert record["topics"] == ["moves"] and record["brokers"] == [1] and record["rate"] == 1048576

    r = run("list", "--bootstrap-server", rbroker.bootstrap)
    assert r.exit_code == 0 and r.stdout.strip() == "No partition reassignments found."

    r = run("verify", "--reassignment-json-file", path, "--bootstrap-server", rbroker.bootstrap)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition moves-0 is completed.",
        "Reassignment of partition moves-2 is completed.",
        "Cleared broker-level throttles on broker 1",
        "Cleared topic-level throttles on topic moves",
    ]
    with WireClient(rbroker.bootstrap) as c:
        _, topic = describe(c, "moves", keys=list(THROTTLE_TOPIC_KEYS))
        _, broker = describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)
    assert set_here(topic) == {} and broker == {}  # cleared throttles are no longer listed, as Kafka
    assert list(state_dir.iterdir()) == []
    # a second verify finds nothing left to clear
    r = run("verify", "--reassignment-json-file", path, "--bootstrap-server", rbroker.bootstrap, "--json")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.exit_code == 0
    assert [x["status"] for x in lines[:-1]] == ["completed", "completed"]
    assert lines[-1]["done"] is True and lines[-1]["throttles_cleared"] == {
        "brokers": [],
        "topics": [],
        "skipped": None,
    }


def test_verify_clears_topics_recorded_by_execute_beyond_the_file(rbroker, tmp_path):
    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "rec-a", 1).error_code == 0
        assert create(c, "rec-b", 1).error_code == 0
    both = plan(tmp_path, [{"topic": t, "partition": 0, "replicas": [1]} for t in ("rec-a", "rec-b")])
    only_a = plan(tmp_path, [{"topic": "rec-a", "partition": 0, "replicas": [1]}], "a.json")
    r = run(
        "execute", "--reassignment-json-file", both, "-b", rbroker.bootstrap, "--throttle", 5000, "--json"
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["throttles"]["topics"]["rec-b"] == {
        "leader.replication.throttled.replicas": "0:1",
        "follower.replication.throttled.replicas": "",
    }
    r = run("verify", "--reassignment-json-file", only_a, "-b", rbroker.bootstrap, "--dry-run")
    assert r.exit_code == 0 and "Would clear topic-level throttles on topics rec-a,rec-b" in r.stdout
    with WireClient(rbroker.bootstrap) as c:
        assert set_here(describe(c, "rec-b", keys=list(THROTTLE_TOPIC_KEYS))[1])  # dry run: still set
    r = run("verify", "--reassignment-json-file", only_a, "-b", rbroker.bootstrap)
    assert r.exit_code == 0 and "Cleared topic-level throttles on topics rec-a,rec-b" in r.stdout
    with WireClient(rbroker.bootstrap) as c:
        assert set_here(describe(c, "rec-b", keys=list(THROTTLE_TOPIC_KEYS))[1]) == {}


def test_dry_run_writes_nothing(rbroker, tmp_path, state_dir):
    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "dry", 1).error_code == 0
    path = plan(tmp_path, [{"topic": "dry", "partition": 0, "replicas": [1]}])
    r = run(
        "execute", "--reassignment-json-file", path, "-b", rbroker.bootstrap, "--throttle", 10, "--dry-run"
    )
    assert r.exit_code == 0 and "Dry run: nothing written." in r.stdout
    assert "The inter-broker throttle limit would be set to 10 B/s" in r.stdout
    with WireClient(rbroker.bootstrap) as c:
        assert set_here(describe(c, "dry", keys=list(THROTTLE_TOPIC_KEYS))[1]) == {}
    assert not state_dir.exists()


def test_verify_exits_1_for_a_missing_partition_and_cancel_finds_nothing(rbroker, tmp_path):
    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "ver", 1).error_code == 0
    path = plan(
        tmp_path,
        [
            {"topic": "ver", "partition": 0, "replicas": [1]},
            {"topic": "ver", "partition": 7, "replicas": [1]},
        ],
    )
    r = run("verify", "--reassignment-json-file", path, "-b", rbroker.bootstrap, "--preserve-throttles")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition ver-0 is completed.",
        "Partition ver-7 does not exist.",
    ]
    r = run("cancel", "--reassignment-json-file", path, "-b", rbroker.bootstrap, "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["cancelled"] == [] and out["controller_moved"] is False
    r = run("list", "-b", rbroker.bootstrap, "--json")
    assert r.exit_code == 0 and r.stdout == ""


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        (
            [{"topic": "errs", "partition": 0, "replicas": [1, 2]}],
            "errs-0: unknown broker id 2 (live brokers: 1)",
        ),
        (
            [{"topic": "nope", "partition": 0, "replicas": [1]}],
            "topic not found: nope (UNKNOWN_TOPIC_OR_PARTITION)",
        ),
        ([{"topic": "errs", "partition": 3, "replicas": [1]}], "unable to find partition errs-3"),
        (
            [{"topic": "errs", "partition": 0, "replicas": [1], "log_dirs": ["/nowhere"]}],
            "errs-0: /nowhere is not a live log dir of broker 1",
        ),
    ],
)
def test_execute_errors_are_one_line_exit_2_and_write_nothing(
    rbroker, tmp_path, state_dir, partitions, message
):
    with WireClient(rbroker.bootstrap) as c:
        create(c, "errs", 1)
    path = plan(tmp_path, partitions)
    r = run("execute", "--reassignment-json-file", path, "-b", rbroker.bootstrap, "--throttle", 100)
    assert r.exit_code == 2, r.stdout
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("kafkatool: error: ") and message in r.stderr
    with WireClient(rbroker.bootstrap) as c:
        assert set_here(describe(c, "errs", keys=list(THROTTLE_TOPIC_KEYS))[1]) == {}
        assert set_here(describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)[1]) == {}
    assert not state_dir.exists()


def test_connection_errors_and_option_errors(tmp_path):
    path = plan(tmp_path, [{"topic": "x", "partition": 0, "replicas": [1]}])
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = run("verify", "--reassignment-json-file", path, "--bootstrap-server", f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 5
    assert r.exit_code == 2
    assert (
        r.stderr
        == f"kafkatool: error: no bootstrap server reachable: 127.0.0.1:{port}: cannot connect: Connection refused\n"
    )
    r = run("list", "--bootstrap-server", "localhost")
    assert r.exit_code == 2 and "'localhost' is not host:port" in r.stderr
    r = run("list", "--bootstrap-server", "127.0.0.1:1", "--zookeeper", "127.0.0.1:2181")
    assert r.exit_code == 2 and "not both" in r.stderr
    r = run("list")
    assert r.exit_code == 2 and "--bootstrap-server" in r.stderr
    r = run(
        "execute",
        "--reassignment-json-file",
        path,
        "-z",
        "127.0.0.1:1",
        "--replica-alter-log-dirs-throttle",
        5,
    )
    assert r.exit_code == 2 and "needs --bootstrap-server" in r.stderr


def test_generate_reads_the_assignment_from_metadata(rbroker, tmp_path):
    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "gen", 2).error_code == 0
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"gen"}]}')
    r = run(
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1",
        "-b",
        rbroker.bootstrap,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["current"]["partitions"] == [
        {"topic": "gen", "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in (0, 1)
    ]
    r = run("generate", "--topics-to-move-json-file", topics, "--broker-list", "1,4", "-b", rbroker.bootstrap)
    assert r.exit_code == 2 and "unknown broker id 4" in r.stderr


# ---------------------------------------------------------------- the broker's APIs, raw


def alter(c, *entries, version=0):
    by_topic = {}
    for t, p, replicas in entries:
        by_topic.setdefault(t, []).append(ReassignablePartition(partition_index=p, replicas=replicas))
    req = G.AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    )
    resp = c.request(45, version, req)
    assert resp.error_code == 0
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in resp.responses
        for p in t.partitions
    }


def test_alter_and_list_partition_reassignments_single_node(rbroker):
    with WireClient(rbroker.bootstrap) as c:
        create(c, "raw", 2)
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.api_versions().api_keys}
        assert keys[45] == (0, 0) and keys[46] == (0, 0) and keys[35] == (0, 4)
        got = alter(
            c,
            ("raw", 0, [1]),
            ("raw", 1, None),
            ("raw", 2, [1]),
            ("raw", 1, [1, 3]),
            ("raw", 1, []),
            ("raw", 1, [1, 1]),
            ("missing", 0, [1]),
        )
        # the request carries raw-1 three times: the last answer per partition wins in the dict
        assert got[("raw", 0)] == (0, None)
        assert got[("raw", 2)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert got[("missing", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        one = alter(c, ("raw", 1, None))[("raw", 1)]
        assert one[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        bad = alter(c, ("raw", 1, [1, 3]))[("raw", 1)]
        assert bad == (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 3, but no such broker is registered.",
        )
        assert alter(c, ("raw", 1, []))[("raw", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert alter(c, ("raw", 1, [1, 1]))[("raw", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        for topics in (None, [ListPartitionReassignmentsTopics(name="raw", partition_indexes=[0, 1])]):
            resp = c.request(46, 0, G.ListPartitionReassignmentsRequest(topics=topics))
            assert resp.error_code == 0 and resp.topics == []


def test_describe_log_dirs_lists_every_dir(rbroker):
    with WireClient(rbroker.bootstrap) as c:
        create(c, "dirs", 4)
        for version in (0, 4):
            resp = c.request(35, version, G.DescribeLogDirsRequest(topics=None))
            by_dir = {r.log_dir: r for r in resp.results}
            assert set(by_dir) == {str(d) for d in rbroker.dirs}
            held = sorted(
                p.partition_index
                for r in resp.results
                for t in r.topics
                if t.name == "dirs"
                for p in t.partitions
            )
            assert held == [0, 1, 2, 3]
            # Kafka spreads new partitions over the dirs with the fewest partitions
            assert all(any(t.name == "dirs" for t in r.topics) for r in resp.results)
            if version >= 4:
                assert all(r.total_bytes > 0 and r.usable_bytes >= 0 for r in resp.results)


def test_dynamic_broker_throttle_configs(rbroker):
    def inc(c, name, *ops):
        req = G.IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=4,
                    resource_name=name,
                    configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
                )
            ]
        )
        r = c.request(44, 1, req).responses[0]
        return r.error_code, r.error_message

    with WireClient(rbroker.bootstrap) as c:
        assert inc(c, "1", ("follower.replication.throttled.rate", 0, "77"))[0] == 0
        _, b = describe(c, "1", keys=["follower.replication.throttled.rate"], rtype=4)
        e = b["follower.replication.throttled.rate"]
        # read_only as Kafka's: the throttles are not in DynamicBrokerConfig.AllDynamicConfigs
        assert (e.value, e.config_source, e.read_only, e.config_type) == ("77", 2, True, 5)
        assert inc(c, "1", ("follower.replication.throttled.rate", 1, None))[0] == 0
        _, b = describe(c, "1", keys=["follower.replication.throttled.rate"], rtype=4)
        assert b == {}  # unset, a dynamic-only throttle is not listed (tests/broker/test_broker_configs.py)
        # Kafka 3.7 refuses these with INVALID_REQUEST (ConfigAdminManager, KAFKA-13609)
        assert inc(c, "1", ("leader.replication.throttled.rate", 0, "-5"))[0] == ErrorCode.INVALID_REQUEST
        assert inc(c, "1", ("num.partitions", 0, "3"))[0] == ErrorCode.INVALID_REQUEST
        assert inc(c, "9", ("leader.replication.throttled.rate", 0, "5"))[0] == ErrorCode.INVALID_REQUEST


# ---------------------------------------------------------------- the client


def test_client_negotiates_versions_and_reads_metadata(rbroker):
    conn = Connection("127.0.0.1", rbroker.port, timeout=5)
    try:
        # the broker's ApiVersions range (v4 since the protocol currency work; a client asking
        # newer than that gets Kafka's KIP-511 downgrade, tests/broker/test_bad_input.py)
        assert conn.versions[18] == (0, 4)
        assert conn.version_for(45) == 0 and conn.version_for(3) == 12
        assert conn.version_for(34) == 2 and conn.version_for(35) == 4
        assert conn.version_for(48) == 1  # DescribeClientQuotas
        with pytest.raises(KafkaAdminError, match="does not support UpdateFeatures"):
            conn.version_for(57)  # an API the broker does not serve
    finally:
        conn.close()
    with KafkaAdmin(f"127.0.0.1:{free_port()},{rbroker.bootstrap}") as admin:  # first one is down
        meta = admin.metadata()
        assert meta.controller_id == 1 and meta.brokers[1][1] == rbroker.port
        assert admin.controller() is admin.node(1)
    with pytest.raises(KafkaAdminError, match="not host:port"):
        parse_bootstrap("a:b")


# ---------------------------------------------------------------- log dir moves


def replica_dir(c, topic, partition):
    """(current dir, future dir) of a replica from DescribeLogDirs."""
    found = [None, None]
    for r in c.request(35, 4, G.DescribeLogDirsRequest(topics=None)).results:
        for t in r.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition:
                    found[1 if p.is_future_key else 0] = r.log_dir
    return tuple(found)


def test_log_dir_move_throttled_with_appends_then_verify_and_fetch(rbroker, tmp_path):
    from tests.broker.test_protocol import batch, batches_of, fetch, produce

    with WireClient(rbroker.bootstrap) as c:
        assert create(c, "ldm", 1, configs={"segment.bytes": "4096"}).error_code == 0
        for _ in range(40):
            produce(c, "ldm", batch(5, size=100))
        src, _ = replica_dir(c, "ldm", 0)
    dest = next(str(d) for d in rbroker.dirs if str(d) != src)
    path = plan(tmp_path, [{"topic": "ldm", "partition": 0, "replicas": [1], "log_dirs": [dest]}])
    r = run(
        "execute",
        "--reassignment-json-file",
        path,
        "-b",
        rbroker.bootstrap,
        "--replica-alter-log-dirs-throttle",
        2000,
    )
    assert r.exit_code == 0, r.stderr
    assert "The replica-alter-dir throttle limit was set to 2000 B/s" in r.stdout
    assert r.stdout.splitlines()[-1] == "Successfully started log directory move for: ldm-0-1"
    with WireClient(rbroker.bootstrap) as c:
        b = describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)[1]
        assert set_here(b) == {"replica.alter.log.dirs.io.max.bytes.per.second": "2000"}
        assert replica_dir(c, "ldm", 0) == (src, dest)  # the future replica, copying at 2 kB/s
        for _ in range(5):  # appends during the copy reach the new dir too
            produce(c, "ldm", batch(5, size=100))
    r = run("verify", "--reassignment-json-file", path, "-b", rbroker.bootstrap, "--json")
    assert r.exit_code == 1
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert (
        lines[1]["type"] == "log_dir" and lines[1]["status"] == "in_progress" and lines[1]["future"] == dest
    )
    assert lines[-1]["throttles_cleared"]["skipped"] == "log dir moves are still in progress"
    # raise the throttle: the copy reads it at every chunk
    with WireClient(rbroker.bootstrap) as c:
        req = G.IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=[
                        AlterableConfig(name=THROTTLE_BROKER_KEYS[2], config_operation=0, value="100000000")
                    ],
                )
            ]
        )
        assert c.request(44, 1, req).responses[0].error_code == 0
    deadline = time.monotonic() + 20
    while True:
        r = run("verify", "--reassignment-json-file", path, "-b", rbroker.bootstrap)
        if r.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.exit_code == 0, r.stdout
    assert "Reassignment of replica ldm-0-1 completed successfully." in r.stdout
    assert "Cleared broker-level throttles on broker 1" in r.stdout
    with WireClient(rbroker.bootstrap) as c:
        assert replica_dir(c, "ldm", 0) == (dest, None)
        records, offset = 0, 0
        while True:
            resp = fetch(c, "ldm", offset)
            got = batches_of(resp.responses[0].partitions[0].records)
            if not got:
                break
            records += sum(bt.last_offset_delta + 1 for bt in got)
            offset = got[-1].base_offset + got[-1].last_offset_delta + 1
        assert records == offset == 225
        produce(c, "ldm", batch(5, size=100))  # the moved log takes appends
        assert fetch(c, "ldm", 225).responses[0].partitions[0].high_watermark == 230
    import os

    assert not [n for n in os.listdir(src) if n.startswith("ldm-0")]
    assert sorted(os.listdir(dest)).count("ldm-0") == 1 and not [
        n for n in os.listdir(dest) if n.startswith("ldm-0.")
    ]


def test_alter_replica_log_dirs_errors_and_cancel(rbroker, tmp_path):
    from kafkatool.protocol.generated.alter_replica_log_dirs_request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirTopic,
    )
    from tests.broker.test_protocol import batch, produce

    with WireClient(rbroker.bootstrap) as c:
        create(c, "ldc", 1)
        for _ in range(20):
            produce(c, "ldc", batch(5, size=200))
        src, _ = replica_dir(c, "ldc", 0)

        def alter_dir(path, topic="ldc", partition=0):
            req = G.AlterReplicaLogDirsRequest(
                dirs=[
                    AlterReplicaLogDir(
                        path=path, topics=[AlterReplicaLogDirTopic(name=topic, partitions=[partition])]
                    )
                ]
            )
            return c.request(34, 2, req).results[0].partitions[0].error_code

        assert alter_dir("/no/such/dir") == ErrorCode.LOG_DIR_NOT_FOUND
        assert alter_dir(src, topic="ldc-none") == ErrorCode.REPLICA_NOT_AVAILABLE
        assert alter_dir(src) == 0 and replica_dir(c, "ldc", 0) == (src, None)  # already there
    dest = next(str(d) for d in rbroker.dirs if str(d) != src)
    path = plan(tmp_path, [{"topic": "ldc", "partition": 0, "replicas": [1], "log_dirs": [dest]}])
    r = run(
        "execute",
        "--reassignment-json-file",
        path,
        "-b",
        rbroker.bootstrap,
        "--replica-alter-log-dirs-throttle",
        100,
    )
    assert r.exit_code == 0, r.stderr
    r = run("cancel", "--reassignment-json-file", path, "-b", rbroker.bootstrap)
    assert r.exit_code == 0, r.stderr
    assert "Successfully cancelled log directory move for: ldc-0-1" in r.stdout
    with WireClient(rbroker.bootstrap) as c:
        assert replica_dir(c, "ldc", 0) == (src, None)
        assert set_here(describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)[1]) == {}
    import os

    assert not [n for n in os.listdir(dest) if n.startswith("ldc-0")]  # the future dir is gone
    r = run("verify", "--reassignment-json-file", path, "-b", rbroker.bootstrap)
    assert r.exit_code == 1
    assert f"Partition ldc-0 on broker 1 is not being moved from log dir {src} to {dest}." in r.stdout


def test_client_gives_up_on_a_silent_server():
    import socket

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(KafkaAdminError, match=r"no response within 0.5s"):
            KafkaAdmin(f"127.0.0.1:{port}", timeout=0.5).metadata()
        assert time.monotonic() - t0 < 3


def test_dynamic_throttle_survives_a_restart_until_verify_clears_it(make_broker, tmp_path):
    b = make_broker(tmp_path / "data").start()
    with WireClient(b.bootstrap) as c:
        assert create(c, "keep", 1).error_code == 0
    path = plan(tmp_path, [{"topic": "keep", "partition": 0, "replicas": [1]}])
    r = run("execute", "--reassignment-json-file", path, "-b", b.bootstrap, "--throttle", 777)
    assert r.exit_code == 0, r.stderr
    assert b.stop() == 0
    b = make_broker(tmp_path / "data", port=b.port).start()
    with WireClient(b.bootstrap) as c:
        got = describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)[1]
        assert set_here(got) == {
            "leader.replication.throttled.rate": "777",
            "follower.replication.throttled.rate": "777",
        }
        assert set_here(describe(c, "keep", keys=list(THROTTLE_TOPIC_KEYS))[1])
    r = run("verify", "--reassignment-json-file", path, "-b", b.bootstrap)
    assert r.exit_code == 0 and "Cleared broker-level throttles on broker 1" in r.stdout
    assert b.stop() == 0
    b = make_broker(tmp_path / "data", port=b.port).start()
    with WireClient(b.bootstrap) as c:
        assert set_here(describe(c, "1", keys=list(THROTTLE_BROKER_KEYS), rtype=4)[1]) == {}
