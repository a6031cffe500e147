"""Issue 12: ``zk restore`` of a ``zk dump`` gives a tree ``zk check`` passes (real ZooKeeper).

Case: 31 findings, epoch_inconsistent on every partition, because restored znodes started
at version 0.  The class: every written znode gets its dumped data version back; what
cannot be restored (ephemeral nodes, zxids, times, child/ACL versions, ACLs) is said.
"""

from __future__ import annotations

import json
import time

from kazoo.client import KazooClient

from kafkatool.zk import codecs, paths
from tests.zk.clirun import run
from tests.zk.kafka_layout import default_spec, seed_cluster


def _start_brokers(hosts: str, chroot: str, spec) -> list[KazooClient]:
    """What brokers do when they start on the restored tree: register, elect a controller."""
    sessions = []
    now = int(time.time() * 1000)
    for b, bs in sorted(spec.brokers.items()):
        s = KazooClient(hosts=hosts + chroot, timeout=10.0)
        s.start(timeout=10)
        sessions.append(s)
        data = codecs.encode_broker(
            bs.endpoints, version=bs.version, timestamp_ms=now, rack=bs.rack, protocol_map=bs.protocol_map
        )
        s.create(paths.broker(b), data, ephemeral=True)
        if b == spec.controller:
            s.create(paths.CONTROLLER, codecs.encode_controller(b, now), ephemeral=True)
    return sessions


def test_issue12_restore_gives_a_tree_check_passes(zk_server, tmp_path):
    src, dst = "/src12", "/dst12"
    spec = default_spec()
    cluster = seed_cluster(zk_server, src, spec)
    sessions = []
    try:
        dump = tmp_path / "dump.json"
        assert run("dump", "-z", zk_server + src, "-o", str(dump)).code == 0
        dumped = {n["path"]: n["stat"]["version"] for n in json.loads(dump.read_text())["nodes"]}
        assert dumped["/brokers/topics/legacy/partitions/0/state"] == 7

        r = run("restore", "-z", zk_server + dst, str(dump))
        assert r.code == 0, r.stderr
        assert "restored the data version of" in r.stdout
        assert "not restored: ephemeral znodes" in r.stdout and "ACLs" in r.stdout

        r = run("restore", "-z", zk_server + dst, str(dump), "--json", "--dry-run")
        summary = r.json_lines()[-1]
        assert summary["create"] == 0 and summary["versions_differ"] == 0
        assert any("cversion" in x for x in summary["not_restored"])

        # every persistent znode is back at its dumped version
        z = KazooClient(hosts=zk_server + dst, timeout=10.0)
        z.start(timeout=10)
        try:
            for path, version in dumped.items():
                if path == "/" or path in ("/controller",) or path.startswith("/brokers/ids/"):
                    continue
                assert z.exists(path).version == version, path
        finally:
            z.stop()
            z.close()

        # stopped: one warning that says so, no error (no epoch_inconsistent, no dead leader per partition)
        r = run("check", "-z", zk_server + dst, "--json")
        findings = [x for x in r.json_lines() if x.get("type") != "summary"]
        assert [f["kind"] for f in findings] == ["cluster_stopped"], findings

        # brokers start and register: the restored tree passes
        sessions = _start_brokers(zk_server, dst, spec)
        r = run("check", "-z", zk_server + dst)
        assert r.code == 0, r.stdout
        assert "no findings" in r.stdout
    finally:
        for s in sessions:
            s.stop()
            s.close()
        cluster.close()
