"""Chroot discovery across clusters, dump/restore, and the client API the reassign tool uses."""

from __future__ import annotations

import json

import pytest

from kafkatool.zk import codecs
from kafkatool.zk.client import KafkaZk, ZkBadVersionError, ZkError, ZkNodeExistsError
from kafkatool.zk.discovery import find_kafka_roots
from tests.zk.clirun import run
from tests.zk.kafka_layout import ClusterSpec, default_spec, seed_cluster


@pytest.fixture
def two_clusters(zk_chroot):
    hosts, base = zk_chroot.split("/", 1)
    base = "/" + base
    a = seed_cluster(hosts, base + "/kafka/prod", default_spec())
    b = seed_cluster(hosts, base + "/other/team/kafka", default_spec(reassigning=True))
    try:
        yield zk_chroot, a, b
    finally:
        a.close()
        b.close()


def test_discovery_finds_both_clusters(two_clusters):
    connect, a, b = two_clusters
    with KafkaZk(connect) as zk:
        roots = find_kafka_roots(zk)
    assert [(r.chroot, r.cluster_id, r.brokers, r.controller) for r in roots] == [
        ("/kafka/prod", a.cluster_id, [1, 2, 3], 1),
        ("/other/team/kafka", b.cluster_id, [1, 2, 3], 1),
    ]
    rows = run("roots", "-z", connect, "--json").json_lines()
    assert [(o["chroot"], o["connect"], o["cluster_id"]) for o in rows[:-1]] == [
        (a.chroot, a.connect, a.cluster_id),
        (b.chroot, b.connect, b.cluster_id),
    ]
    assert rows[-1] == {"type": "summary", "roots": 2}
    r = run("roots", "-z", connect)
    assert r.code == 0 and a.cluster_id in r.stdout and b.chroot in r.stdout
    # Depth is bounded: /other/team/kafka is 3 levels below the start.
    assert [
        o["chroot"] for o in run("roots", "--max-depth", "2", "-z", connect, "--json").json_lines()[:-1]
    ] == [a.chroot]


def test_kafka_views_demand_a_choice_between_several_roots(two_clusters):
    connect, a, b = two_clusters
    r = run("topics", "-z", connect)
    assert r.code == 2 and a.chroot in r.stderr and b.chroot in r.stderr and len(r.stderr.splitlines()) == 1
    assert run("topics", "-z", a.connect).code == 0


def test_explicit_chroot_is_never_replaced(zk_chroot):
    hosts, base = zk_chroot.split("/", 1)
    c = seed_cluster(hosts, "/" + base + "/only", default_spec())
    try:
        with KafkaZk(zk_chroot) as zk:
            assert [r.chroot for r in find_kafka_roots(zk)] == ["/only"]
        # With a chroot that is not itself a Kafka root, several or one root below it is an error:
        # the user gave an explicit chroot, so it is not silently replaced.
        r = run("cluster-id", "-z", zk_chroot)
        assert r.code == 2 and "/only" in r.stderr
    finally:
        c.close()


def test_stray_brokers_at_the_root_are_flagged(zk_chroot):
    hosts, base = zk_chroot.split("/", 1)
    c = seed_cluster(hosts, "/" + base + "/kafka", default_spec())
    try:
        with KafkaZk(zk_chroot) as zk:
            zk.create("/brokers/ids", makepath=True)
            [root] = find_kafka_roots(zk)
        assert any("stray /brokers" in w for w in root.warnings)
    finally:
        c.close()


def test_root_without_cluster_id_is_flagged(zk_chroot):
    hosts, base = zk_chroot.split("/", 1)
    c = seed_cluster(hosts, "/" + base + "/old", default_spec())
    try:
        c.admin.delete("/cluster/id")
        [o, _] = run("roots", "-z", zk_chroot, "--json").json_lines()
        assert o["cluster_id"] is None and any("no /cluster/id" in w for w in o["warnings"])
    finally:
        c.close()


def test_dump_restore_roundtrip(kafka_cluster, zk_server, tmp_path):
    out = tmp_path / "dump.json"
    r = run("dump", "-z", kafka_cluster.connect, "-o", str(out))
    assert r.code == 0 and "4 ephemeral" in r.stdout
    assert out.stat().st_mode & 0o777 == 0o600  # a dump may hold SCRAM credentials (/config/users)
    doc = json.loads(out.read_text())
    by_path = {n["path"]: n for n in doc["nodes"]}
    assert by_path["/brokers/ids/1"]["ephemeral"] and not by_path["/brokers/topics/orders"]["ephemeral"]
    assert by_path["/controller_epoch"]["data"] == "3"
    assert doc["chroot"] == kafka_cluster.chroot

    target = f"{zk_server}{kafka_cluster.chroot}-copy"
    r = run("restore", str(out), "-z", target, "--dry-run", "--json")
    lines = r.json_lines()
    assert r.code == 0 and lines[-1]["dry_run"] and lines[-1]["written"] == 0
    assert {o["path"] for o in lines if o["type"] == "skipped"} == {
        "/controller",
        "/brokers/ids/1",
        "/brokers/ids/2",
        "/brokers/ids/3",
    }
    with KafkaZk(zk_server) as zk:
        assert zk.exists(kafka_cluster.chroot + "-copy") is None  # dry run wrote nothing

    r = run("restore", str(out), "-z", target)
    assert r.code == 0 and "skipped ephemeral /brokers/ids/1" in r.stdout and "1 transaction" in r.stdout
    with KafkaZk(kafka_cluster.connect) as src, KafkaZk(target) as dst:
        src_nodes = {n.path: n.data for n in src.walk("/") if not n.stat.ephemeral}
        dst_nodes = {n.path: n.data for n in dst.walk("/")}
        assert src_nodes == dst_nodes
        assert dst.broker_ids() == []

    # Restoring again changes nothing; a conflicting node needs --force.
    assert (
        run("restore", str(out), "-z", target, "--json").json_lines()[-1]["unchanged"] == len(dst_nodes) - 1
    )
    with KafkaZk(target) as dst:
        dst.set("/config/topics/orders", b'{"version":1,"config":{}}')
    r = run("restore", str(out), "-z", target)
    assert r.code == 2 and "--force" in r.stderr and "/config/topics/orders" in r.stderr
    r = run("restore", str(out), "-z", target, "--force", "--json")
    assert r.code == 0 and r.json_lines()[-1]["update"] == 1
    with KafkaZk(target) as dst:
        assert b"retention.ms" in dst.get("/config/topics/orders").data


def test_dump_binary_data_and_subtree(kafka_cluster, tmp_path):
    kafka_cluster.admin.create("/brokers/topics/orders/blob", b"\x00\xff\x10")
    out = tmp_path / "sub.json"
    r = run("dump", "/brokers/topics/orders", "-z", kafka_cluster.connect, "-o", str(out), "--json")
    [summary] = r.json_lines()
    assert summary["base64"] == 1 and summary["ephemeral"] == 0
    nodes = {n["path"]: n for n in json.loads(out.read_text())["nodes"]}
    assert nodes["/brokers/topics/orders/blob"] == {
        **nodes["/brokers/topics/orders/blob"],
        "data": "AP8Q",
        "encoding": "base64",
    }
    assert all(p.startswith("/brokers/topics/orders") for p in nodes)
    r = run("dump", "/nope", "-z", kafka_cluster.connect, "-o", str(tmp_path / "x.json"))
    assert r.code == 2 and "no such znode" in r.stderr and not (tmp_path / "x.json").exists()


def test_restore_validates_the_whole_file_first(kafka_cluster, zk_server, tmp_path):
    good = {"path": "/a", "data": "x", "encoding": "utf-8", "ephemeral": False}
    cases = {
        "not json": "{",
        "wrong format": json.dumps({"format": "other"}),
        "bad base64": json.dumps(
            {
                "format": "kafkatool-zk-dump",
                "version": 1,
                "nodes": [good, {"path": "/a/b", "data": "!!", "encoding": "base64"}],
            }
        ),
        "orphan": json.dumps(
            {"format": "kafkatool-zk-dump", "version": 1, "nodes": [good, {"path": "/x/y", "data": ""}]}
        ),
        "zookeeper": json.dumps(
            {"format": "kafkatool-zk-dump", "version": 1, "nodes": [{"path": "/zookeeper/quota"}]}
        ),
        "relative": json.dumps({"format": "kafkatool-zk-dump", "version": 1, "nodes": [{"path": "a"}]}),
    }
    target = f"{zk_server}{kafka_cluster.chroot}-bad"
    for name, text in cases.items():
        f = tmp_path / "bad.json"
        f.write_text(text)
        r = run("restore", str(f), "-z", target)
        assert r.code == 2, name
        assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, name
    with KafkaZk(zk_server) as zk:
        assert zk.exists(kafka_cluster.chroot + "-bad") is None
    r = run("restore", str(tmp_path / "missing.json"), "-z", target)
    assert r.code == 2 and "missing.json" in r.stderr


def test_client_writes_for_reassignment_and_configs(kafka_cluster):
    with KafkaZk(kafka_cluster.connect) as zk:
        zk.create_reassignment({("orders", 0): [2, 3, 1]})
        with pytest.raises(ZkNodeExistsError):
            zk.create_reassignment([("orders", 1, [1, 2, 3])])
        r = zk.reassign_partitions()
        assert r.value.partitions[0].replicas == [2, 3, 1] and not r.stat.ephemeral
        assert zk.delete_reassignment() and not zk.delete_reassignment()

        before = zk.children("/config/changes")
        new = zk.change_entity_config("brokers", "2", set_keys={"leader.replication.throttled.rate": 100})
        assert new == {"leader.replication.throttled.rate": "100"}
        new = zk.change_entity_config(
            "topics", "orders", set_keys={"x": "1"}, delete_keys=["retention.ms", "absent"]
        )
        assert new == {"min.insync.replicas": "2", "x": "1"}
        assert codecs.decode_entity_config(zk.get("/config/topics/orders").data).config == new
        changes = [c for c in zk.children("/config/changes") if c not in before]
        assert len(changes) == 2 and all(c.startswith("config_change_") and len(c) == 24 for c in changes)
        paths_ = sorted(
            codecs.decode_config_change(zk.get("/config/changes/" + c).data).entity_path for c in changes
        )
        assert paths_ == ["brokers/2", "topics/orders"]
        assert zk.sessions() == {kafka_cluster.session_id(b): b for b in (1, 2, 3)}
        assert zk.resign_controller() and zk.controller() is None


def test_seeding_a_custom_spec(zk_chroot):
    hosts, base = zk_chroot.split("/", 1)
    c = seed_cluster(hosts, "/" + base, ClusterSpec(brokers={}, topics={}, controller=None))
    try:
        with KafkaZk(c.connect) as zk:
            assert zk.is_kafka_root() and zk.broker_ids() == [] and zk.controller() is None
    finally:
        c.close()


def test_commit_is_all_or_nothing(kafka_cluster):
    with KafkaZk(kafka_cluster.connect) as zk:
        v = zk.get("/controller_epoch").stat.version
        results = zk.commit(
            [
                ("create", "/config/changes/config_change_", b"{}", True),
                ("set", "/controller_epoch", b"4", v),
                ("check", "/brokers/seqid", 0),
            ]
        )
        assert results[0].startswith(kafka_cluster.chroot + "/config/changes/config_change_") or results[
            0
        ].startswith("/config/changes/config_change_")
        assert zk.get("/controller_epoch").data == b"4"
        with pytest.raises(ZkBadVersionError):
            zk.commit([("create", "/admin/x", b""), ("set", "/controller_epoch", b"5", v)])
        assert zk.exists("/admin/x") is None and zk.get("/controller_epoch").data == b"4"
        with pytest.raises(ZkNodeExistsError):
            zk.commit([("create", "/cluster/id", b"")])
        zk.commit([("delete", "/admin/delete_topics")])
        assert zk.exists("/admin/delete_topics") is None


def test_read_only_connection_refuses_writes(kafka_cluster):
    with KafkaZk(kafka_cluster.connect, read_only=True) as zk:
        for write in (
            lambda: zk.create("/x"),
            lambda: zk.set("/controller_epoch", b"9"),
            lambda: zk.delete("/brokers/seqid"),
            lambda: zk.commit([("delete", "/brokers/seqid")]),
            lambda: zk.create_reassignment([("orders", 0, [1])]),
        ):
            with pytest.raises(ZkError, match="read-only"):
                write()
        assert zk.get("/controller_epoch").data == b"3" and zk.exists("/brokers/seqid") is not None
