"""`kafkatool zk check`: nothing on healthy layouts, each injected problem found."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from kafkatool.zk import codecs
from tests.zk.clirun import run
from tests.zk.kafka_layout import default_spec, seed_cluster


def _kinds(connect: str, *extra: str) -> tuple[int, set[str], list[dict]]:
    r = run("check", "-z", connect, "--json", *extra)
    lines = r.json_lines()
    findings = [o for o in lines if o["type"] == "finding"]
    assert lines[-1]["type"] == "summary" and lines[-1]["findings"] == len(findings)
    return r.code, {f["kind"] for f in findings}, findings


def test_healthy_layout_has_no_findings(kafka_cluster):
    code, kinds, _ = _kinds(kafka_cluster.connect, "--stale-after", "0")
    assert (code, kinds) == (0, set())
    r = run("check", "-z", kafka_cluster.connect)
    assert r.code == 0 and "no findings" in r.stdout and "3 brokers, 3 topics, 6 partitions" in r.stdout


def test_healthy_reassignment_in_flight_has_no_findings(zk_chroot):
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec(reassigning=True))
    try:
        code, kinds, _ = _kinds(cluster.connect)
        assert (code, kinds) == (0, set())
        # ... but a reassignment znode nobody consumes for longer than --stale-after is stuck.
        code, kinds, _ = _kinds(cluster.connect, "--stale-after", "0")
        assert (code, kinds) == (1, {"stuck_admin_node"})
    finally:
        cluster.close()


def _state(a, topic, p, leader, epoch, isr, cepoch=3):
    a.set(
        f"/brokers/topics/{topic}/partitions/{p}/state",
        codecs.encode_partition_state(leader, epoch, cepoch, isr),
    )


def _recreate(a, path, data):
    a.delete(path)
    a.create(path, data)


def _second_session(c, path, data):
    s = KazooClient(hosts=c.connect)
    s.start(timeout=10)
    c.sessions[100 + len(c.sessions)] = s  # closed with the cluster
    s.create(path, data, ephemeral=True)


INJECTIONS = {
    "isr_not_subset_of_replicas": lambda c: _state(c.admin, "orders", 0, 1, 2, [1, 2, 3, 4]),
    "leader_not_in_isr": lambda c: _state(c.admin, "orders", 0, 1, 2, [2, 3]),
    "leader_not_in_replicas": lambda c: _state(c.admin, "events", 0, 3, 0, [1, 2, 3]),
    "leader_not_live": lambda c: c.stop_broker(2),
    "offline_partition": lambda c: _state(c.admin, "legacy", 0, -1, 7, [3]),
    "under_replicated": lambda c: _state(c.admin, "orders", 1, 2, 0, [2]),
    "epoch_inconsistent": lambda c: _state(c.admin, "orders", 1, 2, 0, [2, 3, 1], cepoch=9),
    "missing_partition_state": lambda c: c.admin.delete("/brokers/topics/orders/partitions/2/state"),
    "orphan_partition_state": lambda c: c.admin.create(
        "/brokers/topics/legacy/partitions/5/state",
        codecs.encode_partition_state(3, 0, 3, [3]),
        makepath=True,
    ),
    "empty_assignment": lambda c: c.admin.create("/brokers/topics/empty", codecs.encode_topic({})),
    "duplicate_replica": lambda c: c.admin.set(
        "/brokers/topics/legacy", codecs.encode_topic({0: [3, 3]}, version=1)
    ),
    "duplicate_broker_registration": lambda c: _second_session(
        c, "/brokers/ids/4", codecs.encode_broker(["PLAINTEXT://127.0.0.1:19092"], timestamp_ms=1)
    ),
    "broker_registration_not_ephemeral": lambda c: c.admin.create(
        "/brokers/ids/7", codecs.encode_broker(["PLAINTEXT://10.9.9.9:9092"], timestamp_ms=1)
    ),
    "controller_not_live": lambda c: c.admin.set("/controller", codecs.encode_controller(9, 1)),
    "controller_session_mismatch": lambda c: (
        c.admin.delete("/controller"),
        c.sessions[2].create("/controller", codecs.encode_controller(1, 1), ephemeral=True),
    ),
    "no_controller": lambda c: c.admin.delete("/controller"),
    "missing_cluster_id": lambda c: c.admin.delete("/cluster/id"),
    "undecodable_payload": lambda c: c.admin.set("/brokers/topics/orders/partitions/1/state", b"{oops"),
    "stuck_admin_node": lambda c: c.admin.create("/admin/delete_topics/gone-topic"),
    "stuck_notification": lambda c: c.admin.create(
        "/isr_change_notification/isr_change_", codecs.encode_partition_list([("orders", 0)]), sequence=True
    ),
    "invalid_reassignment_entry": lambda c: c.admin.create(
        "/admin/reassign_partitions", codecs.encode_reassign_partitions([("nosuch", 0, [1, 2])])
    ),
    "reassignment_to_dead_broker": lambda c: c.admin.create(
        "/admin/reassign_partitions", codecs.encode_reassign_partitions([("orders", 0, [1, 2, 8])])
    ),
    "leftover_throttle": lambda c: c.admin.set(
        "/config/topics/orders", codecs.encode_entity_config({"follower.replication.throttled.replicas": "*"})
    ),
}


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
def test_check_finds_injected_problem(kafka_cluster, kind):
    INJECTIONS[kind](kafka_cluster)
    extra = ("--stale-after", "0") if kind == "stuck_notification" else ()
    code, kinds, findings = _kinds(kafka_cluster.connect, *extra)
    assert code == 1
    assert kind in kinds, findings
    f = next(f for f in findings if f["kind"] == kind)
    assert f["path"].startswith("/") and f["message"] and f["severity"] in ("error", "warning")


def test_recreated_state_znode_is_an_epoch_inconsistency(kafka_cluster):
    # A state node recreated at version 0 with leader epoch 5 (e.g. restored by hand).
    _recreate(
        kafka_cluster.admin,
        "/brokers/topics/orders/partitions/2/state",
        codecs.encode_partition_state(3, 5, 3, [3, 1, 2]),
    )
    code, kinds, findings = _kinds(kafka_cluster.connect)
    assert code == 1 and kinds == {"epoch_inconsistent"} and "recreated" in findings[0]["message"]


def test_leftover_broker_throttle_and_human_output(kafka_cluster):
    kafka_cluster.admin.create(
        "/config/brokers/1", codecs.encode_entity_config({"leader.replication.throttled.rate": "1048576"})
    )
    r = run("check", "-z", kafka_cluster.connect)
    assert r.code == 1 and "leftover_throttle" in r.stdout and "1 finding" in r.stdout
