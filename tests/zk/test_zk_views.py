"""`kafkatool zk` generic and Kafka views against a real ZooKeeper seeded like a Kafka cluster."""

from __future__ import annotations

import time

from kafkatool.zk import codecs
from tests.zk.clirun import run
from tests.zk.kafka_layout import default_spec, seed_cluster


def _no_traceback(r):
    assert "Traceback" not in r.stdout + r.stderr


def test_ls_human_and_json(kafka_cluster):
    r = run("ls", "/brokers/ids", "-z", kafka_cluster.connect)
    assert r.code == 0 and "ephemeral" in r.stdout and "1" in r.stdout
    rows = run("ls", "/brokers/ids", "-z", kafka_cluster.connect, "--json").json_lines()
    assert [(o["name"], o["ephemeral"]) for o in rows] == [("1", True), ("2", True), ("3", True)]
    assert all(o["path"] == f"/brokers/ids/{o['name']}" for o in rows)


def test_get_decodes_by_path(kafka_cluster):
    r = run("get", "/brokers/topics/orders/partitions/2/state", "-z", kafka_cluster.connect)
    assert r.code == 0 and "partition_state" in r.stdout and '"leader_epoch": 5' in r.stdout
    [o] = run("get", "/cluster/id", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["kind"] == "cluster_id" and o["decoded"]["id"] == kafka_cluster.cluster_id and o["error"] is None
    assert o["data"] == f'{{"version":"1","id":"{kafka_cluster.cluster_id}"}}' and o["encoding"] == "utf-8"
    raw = run("get", "/controller_epoch", "--raw", "-z", kafka_cluster.connect)
    assert raw.stdout == "3"


def test_get_undecodable_payload_is_flagged_and_shown_raw(kafka_cluster):
    kafka_cluster.admin.set("/brokers/topics/orders/partitions/0/state", b'{"leader":1,"isr":[1,')
    r = run("get", "/brokers/topics/orders/partitions/0/state", "-z", kafka_cluster.connect)
    assert r.code == 1 and "undecodable" in r.stdout and '{"leader":1,"isr":[1,' in r.stdout
    _no_traceback(r)
    kafka_cluster.admin.set("/config/topics/orders", b"\xff\xfe\x00binary")
    [o] = run("get", "/config/topics/orders", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["encoding"] == "base64" and o["decoded"] is None and "UTF-8" in o["error"]


def test_get_missing_path_and_unknown_path(kafka_cluster):
    r = run("get", "/brokers/ids/99", "-z", kafka_cluster.connect)
    assert r.code == 2 and r.stderr.strip().endswith("/brokers/ids/99: no such znode")
    assert len(r.stderr.strip().splitlines()) == 1
    kafka_cluster.admin.create("/custom", b"hello")
    [o] = run("get", "/custom", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["kind"] is None and o["data"] == "hello" and o["error"] is None


def test_tree_and_stat(kafka_cluster):
    r = run("tree", "/brokers", "-z", kafka_cluster.connect)
    assert r.code == 0 and "ephemeral" in r.stdout and "state" in r.stdout
    nodes = run("tree", "/brokers", "--depth", "1", "-z", kafka_cluster.connect, "--json").json_lines()
    assert {n["path"] for n in nodes} == {"/brokers", "/brokers/ids", "/brokers/topics", "/brokers/seqid"}
    assert {n["depth"] for n in nodes} == {0, 1}
    sid = kafka_cluster.session_id(2)
    r = run("stat", "/brokers/ids/2", "-z", kafka_cluster.connect)
    assert r.code == 0 and f"0x{sid:x}" in r.stdout and "session of broker 2" in r.stdout
    [o] = run("stat", "/controller", "-z", kafka_cluster.connect, "--json").json_lines()
    assert (
        o["ephemeral"]
        and o["owner_broker"] == 1
        and o["ephemeral_owner"] == f"0x{kafka_cluster.session_id(1):x}"
    )
    [o] = run("stat", "/controller_epoch", "-z", kafka_cluster.connect, "--json").json_lines()
    assert not o["ephemeral"] and o["owner_broker"] is None and "mtime_ms" in o and "version" in o


def test_brokers(kafka_cluster):
    r = run("brokers", "-z", kafka_cluster.connect)
    assert r.code == 0 and "(controller)" in r.stdout and "SASL_SSL" in r.stdout and "r2" in r.stdout
    rows = {o["id"]: o for o in run("brokers", "-z", kafka_cluster.connect, "--json").json_lines()}
    assert set(rows) == {1, 2, 3}
    assert rows[1]["controller"] and not rows[2]["controller"]
    assert rows[1]["endpoints"] == ["PLAINTEXT://127.0.0.1:19091", "SSL://127.0.0.1:19191"]
    assert rows[3]["security_protocols"] == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    assert rows[3]["endpoints"][1] == "EXTERNAL://[::1]:29093"
    assert rows[2]["rack"] == "r2" and rows[2]["version"] == 5
    assert rows[2]["session"] == f"0x{kafka_cluster.session_id(2):x}"
    # The broker epoch is the registration znode's czxid.
    assert rows[2]["broker_epoch"] == kafka_cluster.admin.exists("/brokers/ids/2").czxid


def test_topics_and_describe(kafka_cluster):
    r = run("topics", "-z", kafka_cluster.connect)
    assert r.code == 0 and "orders" in r.stdout and "legacy" in r.stdout
    rows = {o["topic"]: o for o in run("topics", "-z", kafka_cluster.connect, "--json").json_lines()}
    assert rows["orders"]["partitions"] == 3 and rows["orders"]["replication_factor"] == 3
    assert (
        rows["orders"]["topic_id"] and rows["events"]["topic_id"] is None and rows["legacy"]["version"] == 1
    )
    assert rows["orders"]["config_overrides"] == 2
    assert all(o["under_replicated"] == 0 and o["offline"] == 0 for o in rows.values())

    r = run("describe", "orders", "-z", kafka_cluster.connect)
    assert r.code == 0 and "min.insync.replicas=2" in r.stdout
    lines = run("describe", "orders", "-z", kafka_cluster.connect, "--json").json_lines()
    assert lines[0]["type"] == "topic" and lines[0]["config"]["retention.ms"] == "86400000"
    parts = {o["partition"]: o for o in lines[1:]}
    assert parts[2]["leader"] == 3 and parts[2]["isr"] == [3, 1, 2] and parts[2]["leader_epoch"] == 5
    assert parts[2]["partition_epoch"] == 5 and parts[2]["controller_epoch"] == 3
    assert parts[0]["preferred_leader"] and not parts[0]["under_replicated"]


def test_describe_flags_under_replicated_and_offline(kafka_cluster):
    a = kafka_cluster.admin
    a.set("/brokers/topics/orders/partitions/0/state", codecs.encode_partition_state(1, 3, 3, [1]))
    a.set("/brokers/topics/orders/partitions/1/state", codecs.encode_partition_state(-1, 1, 3, [2]))
    r = run("describe", "orders", "-z", kafka_cluster.connect)
    assert r.code == 1 and "under-replicated" in r.stdout and "offline" in r.stdout
    parts = {
        o["partition"]: o
        for o in run("describe", "orders", "-z", kafka_cluster.connect, "--json").json_lines()[1:]
    }
    assert parts[0]["under_replicated"] and parts[1]["offline"] and not parts[2]["under_replicated"]
    [t] = [
        o for o in run("topics", "-z", kafka_cluster.connect, "--json").json_lines() if o["topic"] == "orders"
    ]
    assert (t["under_replicated"], t["offline"]) == (1, 1)
    r = run("describe", "nosuch", "-z", kafka_cluster.connect)
    assert r.code == 2 and "does not exist" in r.stderr


def test_controller(kafka_cluster):
    r = run("controller", "-z", kafka_cluster.connect)
    assert r.code == 0 and "broker" in r.stdout
    [o] = run("controller", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["broker_id"] == 1 and o["epoch"] == 3 and o["version"] == 2 and not o["kraft"]
    assert o["same_session_as_broker"] and o["broker_registered"]
    assert "migration" not in o
    # During a ZK->KRaft migration the KRaft controller writes /controller persistent, with its epoch.
    a = kafka_cluster.admin
    a.create("/migration", codecs.encode_migration(3000, 5, 120, 4))
    a.delete("/controller")
    a.create("/controller", codecs.encode_controller(3000, 1, kraft_controller_epoch=5))
    [o] = run("controller", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["kraft"] and o["broker_id"] == 3000 and not o["ephemeral"]
    assert o["migration"]["kraft_controller_id"] == 3000 and o["migration"]["kraft_metadata_offset"] == 120
    r = run("controller", "-z", kafka_cluster.connect)
    assert (
        r.code == 0 and "KRaft controller during migration" in r.stdout and "ZK->KRaft migration" in r.stdout
    )
    code = run("check", "-z", kafka_cluster.connect, "--json").code
    assert code == 0  # a KRaft controller is not a registered ZK broker, and that is fine
    a.delete("/controller")
    a.delete("/migration")
    kafka_cluster.sessions[1].create("/controller", codecs.encode_controller(1, 1), ephemeral=True)
    kafka_cluster.stop_broker(1)  # the controller's session ends: /controller vanishes
    r = run("controller", "-z", kafka_cluster.connect)
    assert r.code == 1 and "no controller" in r.stdout
    [o] = run("controller", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["broker_id"] is None and o["epoch"] == 3


def test_reassignments(zk_chroot):
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec(reassigning=True))
    try:
        r = run("reassignments", "-z", cluster.connect)
        assert (
            r.code == 0 and "events-0" in r.stdout and "/admin/reassign_partitions: 1 partitions" in r.stdout
        )
        lines = run("reassignments", "-z", cluster.connect, "--json").json_lines()
        assert lines[0] == {
            "type": "reassignment",
            "topic": "events",
            "partition": 0,
            "replicas": [2, 3, 1],
            "target": [2, 3],
            "adding_replicas": [3],
            "removing_replicas": [1],
            "source": ["controller", "admin_znode"],
        }
        assert lines[-1]["type"] == "summary" and lines[-1]["admin_znode"] and lines[-1]["partitions"] == 1
        # Throttles belong to the move: not leftovers while it runs.
        r = run("configs", "-z", cluster.connect, "--json")
        assert r.code == 0
        events = [o for o in r.json_lines() if o["name"] == "events"][0]
        assert events["throttles"] and not events["leftover_throttle"]
    finally:
        cluster.close()


def test_reassignments_none(kafka_cluster):
    r = run("reassignments", "-z", kafka_cluster.connect)
    assert r.code == 0 and "no reassignments in progress" in r.stdout
    assert run("reassignments", "-z", kafka_cluster.connect, "--json").json_lines() == [
        {"type": "summary", "partitions": 0, "admin_znode": False}
    ]


def test_configs_and_leftover_throttles(kafka_cluster):
    r = run("configs", "-z", kafka_cluster.connect)
    assert r.code == 0 and "producer_byte_rate=1048576" in r.stdout and "users/alice/clients/app" in r.stdout
    rows = {
        (o["entity_type"], o["name"]): o
        for o in run("configs", "-z", kafka_cluster.connect, "--json").json_lines()
    }
    assert rows[("clients", "<default>")]["config"] == {"consumer_byte_rate": "2097152"}
    assert rows[("brokers", "<default>")]["config"] == {"log.cleaner.threads": "2"}
    a = kafka_cluster.admin
    a.set(
        "/config/topics/orders",
        codecs.encode_entity_config({"retention.ms": "1", "leader.replication.throttled.replicas": "0:1"}),
    )
    a.create(
        "/config/brokers/2", codecs.encode_entity_config({"follower.replication.throttled.rate": "1000"})
    )
    r = run("configs", "--type", "topics", "--type", "brokers", "-z", kafka_cluster.connect)
    assert r.code == 1 and "leftover throttle" in r.stdout
    rows = {
        (o["entity_type"], o["name"]): o
        for o in run(
            "configs", "-t", "brokers", "-t", "topics", "-z", kafka_cluster.connect, "--json"
        ).json_lines()
    }
    assert rows[("topics", "orders")]["leftover_throttle"]
    assert rows[("topics", "orders")]["throttles"] == {"leader.replication.throttled.replicas": "0:1"}
    assert rows[("brokers", "2")]["leftover_throttle"]
    assert not rows[("brokers", "<default>")]["leftover_throttle"]
    assert run("configs", "-t", "bogus", "-z", kafka_cluster.connect).code == 2


def test_acls(kafka_cluster):
    r = run("acls", "-z", kafka_cluster.connect)
    assert r.code == 0 and "User:alice" in r.stdout and "PREFIXED" in r.stdout
    rows = run("acls", "-z", kafka_cluster.connect, "--json").json_lines()
    assert {
        "type": "acl",
        "pattern_type": "LITERAL",
        "resource_type": "Topic",
        "resource": "orders",
        "path": "/kafka-acl/Topic/orders",
        "principal": "User:bob",
        "permission": "Deny",
        "operation": "Write",
        "host": "10.0.0.1",
    } in rows
    assert any(o["pattern_type"] == "PREFIXED" and o["resource"] == "app-" for o in rows)
    assert len(rows) == 4


def test_cluster_id(kafka_cluster):
    r = run("cluster-id", "-z", kafka_cluster.connect)
    assert r.code == 0 and r.stdout.strip() == kafka_cluster.cluster_id
    [o] = run("cluster-id", "-z", kafka_cluster.connect, "--json").json_lines()
    assert o["id"] == kafka_cluster.cluster_id and o["version"] == "1"
    kafka_cluster.admin.delete("/cluster/id")
    assert run("cluster-id", "-z", kafka_cluster.connect).code == 1


def test_env_var_supplies_the_connect_string(kafka_cluster):
    r = run("cluster-id", env={"KAFKATOOL_ZOOKEEPER": kafka_cluster.connect})
    assert r.code == 0 and r.stdout.strip() == kafka_cluster.cluster_id
    r = run("cluster-id", env={"KAFKATOOL_ZOOKEEPER": ""})
    assert r.code == 2 and "--zookeeper" in r.stderr


def test_unreachable_zookeeper_times_out_with_one_line():
    t0 = time.monotonic()
    r = run("brokers", "-z", "127.0.0.1:1", "--timeout", "1")
    assert time.monotonic() - t0 < 5
    assert r.code == 2 and r.stderr.startswith(
        "kafkatool: error: 127.0.0.1:1: no ZooKeeper answered within 1 s"
    )
    assert len(r.stderr.splitlines()) == 1 and r.stdout == ""


def test_missing_chroot_and_non_kafka_root(zk_chroot, kafka_cluster):
    r = run("topics", "-z", zk_chroot + "/nothing")
    assert r.code == 2 and "does not exist" in r.stderr
    r = run("ls", "/", "-z", zk_chroot + "/nothing")
    assert r.code == 2 and "no such znode" in r.stderr
    _no_traceback(r)
